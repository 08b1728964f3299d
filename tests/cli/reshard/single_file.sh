# One rank file on its own (a TP 1 PP 1 checkpoint saved by torch.save under any name) is a
# checkpoint; the file of one rank of several is refused, pointing at the root.
ckptconv reshard "$TESTDATA/sample/tiny_llama.pt" out --tp 2 -q
echo "exit $?"
ls out out/iter_0000001
ckptconv reshard "$TESTDATA/megatron/tp2/iter_0000010/mp_rank_01/model_optim_rng.pt" out2 --tp 1
echo "exit $?"
test ! -e out2
