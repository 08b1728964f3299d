# hf2paddle: a tensor of the Hugging Face weights no rule takes is refused, naming it; --drop
# leaves it out and the report lists it (text and JSON).
cp -r "$TESTDATA/hf/llama_tiny" in
python3 "$CLI_DIR/../drop/add_tensor.py" in model.layers.0.self_attn.foo.weight
ckptconv hf2paddle in out 2>&1; echo "exit $?"
test ! -e out
ckptconv hf2paddle in out --drop model.layers.0.self_attn.foo.weight 2>&1 | sed 's/in [0-9.]* s$/in T s/'
ckptconv hf2paddle in out2 --drop 'model.*.foo.*' --json | python3 -c '
import json, sys
print(json.load(sys.stdin)["dropped"])'
