# --optimizer on a checkpoint without optimizer state (the same model's, written without it)
# says so; it needs two checkpoints.
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" noopt --no-optimizer -q
ckptconv verify noopt "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" --optimizer --device cpu --tokens 4 -q
echo "exit $?"
ckptconv verify "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" --optimizer
echo "exit $?"
ckptconv verify "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" --optimizer-rtol -1
echo "exit $?"
