# reshard and mcore2hf with a rank file cut short while mapped (its pickle is read in
# place) or once opened (tensor data).
. "$CLI_DIR/cut.bash"
INPUTS=mt
cp -r "$TESTDATA/megatron/tp2" mt
cut_run mt/iter_0000010/mp_rank_00/model_optim_rng.pt map reshard mt out --tp 1
rm -rf mt && cp -r "$TESTDATA/megatron/tp2" mt
cut_run mt/iter_0000010/mp_rank_00/model_optim_rng.pt opened reshard mt out --tp 1
rm -rf mt && cp -r "$TESTDATA/megatron/tp2" mt
cut_run mt/iter_0000010/mp_rank_00/model_optim_rng.pt opened mcore2hf mt out
