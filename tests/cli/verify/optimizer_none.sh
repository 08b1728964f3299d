# --optimizer on a checkpoint without optimizer state says so; it needs two checkpoints.
ckptconv verify "$TESTDATA/megatron/tp1" "$TESTDATA/megatron/tp2_optim" --optimizer --device cpu --tokens 4 -q
echo "exit $?"
ckptconv verify "$TESTDATA/megatron/tp2_optim" --optimizer
echo "exit $?"
ckptconv verify "$TESTDATA/megatron/tp2_optim" "$TESTDATA/megatron/tp2_optim" --optimizer-rtol -1
echo "exit $?"
