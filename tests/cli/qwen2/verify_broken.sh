# verify on a Qwen2 round trip (TP 2 PP 2) with layer 1's q bias zeroed fails at layer 1; with
# its k bias removed it names the tensor; both sides intact it passes.
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
set -e
for src in "$TESTDATA/hf/qwen2_tiny" "$TESTDATA/hf/transformers5/qwen2_tiny"; do
    ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
    ckptconv mcore2hf mc hf -q
    ckptconv verify "$src" hf -q
    set +e
    for case in "zero model.layers.1.self_attn.q_proj.bias" "remove model.layers.1.self_attn.k_proj.bias"; do
        rm -rf bad && cp -r hf bad
        # shellcheck disable=SC2086
        edit bad/model.safetensors $case
        ckptconv verify "$src" bad -q
        echo "$case: exit $?"
    done
    set -e
    rm -rf mc hf bad
done
