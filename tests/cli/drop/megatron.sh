# mcore2hf and reshard: a tensor of the rank files no layout rule takes is refused, naming it;
# --drop leaves it out and the report lists it. mcore2hf's built-in rule drops _extra_state.
# A parameter dropped with the optimizer state kept is refused: the state follows the
# parameters in order.
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" m -q
python3 "$CLI_DIR/rename_key.py" m/iter_0000001/mp_rank_00/model_optim_rng.pt \
    layers.0.self_attention.linear_proj._extra_state layers.0.self_attention.linear_proj._extra_stat3
ckptconv mcore2hf m h 2>&1; echo "exit $?"
ckptconv reshard m r --tp 2 2>&1; echo "exit $?"
test ! -e h && test ! -e r
ckptconv mcore2hf m h --drop '*._extra_stat3' 2>&1 | sed 's/in [0-9.]* s$/in T s/'; echo "exit ${PIPESTATUS[0]}"
ckptconv mcore2hf m h2 --drop '*._extra_stat3' --dry-run --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], len(r["dropped"]), r["dropped"][0], sorted({d["reason"] for d in r["dropped"]}))'
ckptconv reshard m r --tp 2 --drop '*._extra_stat3' --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["to"]["tp"], r["dropped"], r["bytes_written"] > 0)'
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" o --drop decoder.final_layernorm.weight 2>&1 | sed "s|$TESTDATA|TESTDATA|"
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" o --drop decoder.final_layernorm.weight --no-optimizer -q; echo "exit $?"
ckptconv inspect o | grep -c final_layernorm || true
