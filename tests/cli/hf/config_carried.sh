# What config.json says that Megatron's own args cannot (token ids, an eos_token_id list,
# pad_token_id) and generation_config.json come back from hf2mcore -> mcore2hf for every
# fixture transformers wrote, with the fields args do carry (tie_word_embeddings, dtype,
# initializer_range), and every other key of config.json as it was (Qwen2's max_window_layers
# becomes the layer count: no window is used, use_sliding_window is false). A
# Megatron-trained checkpoint has none: the report says config.json
# leaves them to transformers' defaults.
set -e
compare() {
    python3 - "$1/config.json" "$2/config.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def get(c, k):
    if k == "dtype":
        return c.get("dtype", c.get("torch_dtype"))
    return c.get(k)
keys = ["bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings", "dtype", "initializer_range"]
lost = [f"{k}: {get(a, k)!r} -> {get(b, k)!r}" for k in keys if get(a, k) != get(b, k)]
print("; ".join(lost) if lost else "same " + ", ".join(f"{k}={json.dumps(get(a, k))}" for k in keys[:3]), end="")
# every other key: none lost (null is absent; transformers_version names the writer) or changed
other = sorted(k for k in a if k not in keys + ["torch_dtype", "transformers_version"] and a[k] is not None
               and a[k] != b.get(k))
print("".join(f"; {k}: {json.dumps(a[k])} -> {json.dumps(b.get(k))}" for k in other))
PY
    if [ -e "$1/generation_config.json" ]; then cmp "$1/generation_config.json" "$2/generation_config.json"; fi
}
for m in llama_tiny llama3_tiny mistral_tiny qwen2_tiny transformers5/llama3_tiny transformers5/mistral_tiny \
         transformers5/qwen2_tiny; do
    ckptconv hf2mcore "$TESTDATA/hf/$m" mc --tp 2 -q
    ckptconv mcore2hf mc hf -q
    echo "== $m: $(compare "$TESTDATA/hf/$m" hf)"
    rm -rf mc hf
done
# Llama 3.1's several end tokens, a pad token
cp -r "$TESTDATA/hf/llama3_tiny" in
python3 "$CLI_DIR/edit_json.py" in/config.json eos_token_id '[2, 5, 7]'
python3 "$CLI_DIR/edit_json.py" in/config.json pad_token_id 0
ckptconv hf2mcore in mc -q
ckptconv reshard mc mc2 --tp 2 -q
ckptconv mcore2hf mc2 hf -q
echo "== eos list: $(compare in hf)"
python3 "$CLI_DIR/edit_json.py" in/config.json eos_token_id '[2, "x"]'
ckptconv hf2mcore in bad 2>&1 | sed "s|$PWD/||" || true
ckptconv mcore2hf "$TESTDATA/megatron/dist_tp1" h --json | python3 -c '
import json, sys
print(json.load(sys.stdin)["notes"])'
python3 -c 'import json; print(sorted(k for k in json.load(open("h/config.json")) if k.endswith("token_id")))'
