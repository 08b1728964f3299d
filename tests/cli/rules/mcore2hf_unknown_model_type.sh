# mcore2hf: Megatron args whose hf_model_type no family knows (falcon) are refused naming it and
# the known families, nothing written; reshard, which needs no family, still writes them.
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" m -q
python3 "$CLI_DIR/rename_key.py" m/iter_0000001/mp_rank_00/model_optim_rng.pt llama falcon
ckptconv mcore2hf m h 2>&1; echo "exit $?"
test ! -e h
ckptconv reshard m r --tp 2 -q; echo "exit $?"
