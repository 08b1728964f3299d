# reshard (Megatron): a tensor of the rank files no layout rule takes is refused, naming it, and
# nothing is written; --drop leaves it out and the report lists it (text and JSON).
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" m -q
python3 "$CLI_DIR/rename_key.py" m/iter_0000001/mp_rank_00/model_optim_rng.pt \
    decoder.layers.0.self_attention.linear_proj._extra_state decoder.layers.0.foo
ckptconv reshard m r --tp 2 2>&1; echo "exit $?"
test ! -e r
ckptconv reshard m r --tp 2 --drop decoder.layers.0.foo 2>&1 | sed 's/in [0-9.]* s$/in T s/'
ckptconv reshard m r2 --tp 2 --drop 'decoder.layers.0.foo' --json | python3 -c '
import json, sys
print(json.load(sys.stdin)["dropped"])'
