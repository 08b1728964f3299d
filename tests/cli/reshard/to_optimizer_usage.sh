# The optimizer options: one kind, once; a checkpoint without optimizer state has none to
# convert, and nothing is written.
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" out --to-optimizer adam
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" out --no-optimizer --to-optimizer plain
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" out --to-distributed-optimizer --to-optimizer plain
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1" out --to-optimizer plain -q
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1" out --to-distributed-optimizer -q
echo "exit $?"
test -e out || echo "nothing written"
