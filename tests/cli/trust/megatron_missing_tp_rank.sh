# A Megatron set without one of the TP ranks its args name is refused by every command that
# opens it, naming the missing rank directory and the field; it used to read as a TP 1 model
# of half-width layers (linear_qkv [64, 64] instead of [128, 64]). Nothing is written.
cp -r "$TESTDATA/megatron/tp2" tp2
rm -r tp2/iter_0000010/mp_rank_01
cp -r "$TESTDATA/megatron/tp2pp2" tp2pp2
rm -r tp2pp2/iter_0000010/mp_rank_01_000 tp2pp2/iter_0000010/mp_rank_01_001
ckptconv reshard tp2 out --tp 1 --pp 1
echo "exit $?"
ckptconv reshard tp2pp2 out --tp 1 --pp 1
echo "exit $?"
ckptconv inspect tp2
echo "exit $?"
ckptconv mcore2hf tp2 out
echo "exit $?"
test ! -e out && echo "no output"
