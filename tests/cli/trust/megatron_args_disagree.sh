# A rank file from another run (GPT-2 style: 4 query groups, not 2) among the ranks: refused,
# naming both files and the field their args disagree on.
cp -r "$TESTDATA/megatron/tp2" mixed
cp "$TESTDATA/megatron/gpt2style_tp2/iter_0000010/mp_rank_01/model_optim_rng.pt" mixed/iter_0000010/mp_rank_01/
ckptconv reshard mixed out --tp 1
echo "exit $?"
test ! -e out && echo "no output"
