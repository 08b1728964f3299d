# paddle2hf: a tensor of the PaddleNLP model files no rule takes is refused, naming it; --drop
# leaves it out and the report lists it (text and JSON).
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
for f in in/model_state.tp00.pdparams in/model_state.tp01.pdparams; do
    python3 "$CLI_DIR/../drop/add_pdparams_tensor.py" "$f" llama.norm.weight llama.layers.0.self_attn.foo.weight
done
ckptconv paddle2hf in h 2>&1; echo "exit $?"
test ! -e h
ckptconv paddle2hf in h --drop llama.layers.0.self_attn.foo.weight 2>&1 | sed 's/in [0-9.]* s$/in T s/'
ckptconv paddle2hf in h2 --drop 'llama.*.foo.*' --json | python3 -c '
import json, sys
print(json.load(sys.stdin)["dropped"])'
