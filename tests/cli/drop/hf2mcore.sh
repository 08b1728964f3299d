# hf2mcore: an input tensor no rule takes is refused, naming it; --drop leaves it out on purpose
# and the report lists it, with the rotary inv_freq buffer the built-in rule drops.
cp -r "$TESTDATA/hf/llama_tiny" in
python3 "$CLI_DIR/add_tensor.py" in model.layers.0.self_attn.rotary_emb.inv_freq
python3 "$CLI_DIR/add_tensor.py" in model.extra.weight
ckptconv hf2mcore in out 2>&1 | sed "s|$PWD/||"; echo "exit ${PIPESTATUS[0]}"
test ! -e out
ckptconv hf2mcore in out --drop 'model.extra.*' --drop 'no.such.*' 2>&1; echo "exit $?"
ckptconv hf2mcore in out --drop 'model.extra.*' 2>&1 | sed 's/in [0-9.]* s$/in T s/'; echo "exit ${PIPESTATUS[0]}"
ckptconv hf2mcore in out2 --drop 'model.extra.*' --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["dropped"], r["dry_run"], r["tensors"], len(r["files"]))'
ckptconv hf2mcore in out3 --drop 'model.extra.*' --dry-run | tail -n 2
