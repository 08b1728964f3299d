# The optimizer options: one kind, once; the distributed optimizer's files are not written
# yet; a checkpoint without optimizer state has none to convert.
ckptconv reshard "$TESTDATA/megatron/tp1_optim" out --to-optimizer adam
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1_optim" out --no-optimizer --to-optimizer plain
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1_optim" out --to-distributed-optimizer
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1" out --to-optimizer plain -q
echo "exit $?"
test -e out || echo "nothing written"
