# With one checkpoint: its TP ranks against their merge; one that has no second form is an error.
ckptconv verify "$TESTDATA/megatron/tp2pp2" --device cpu -q
echo "exit $?"
ckptconv verify "$TESTDATA/megatron/tp1" --device cpu
echo "exit $?"
