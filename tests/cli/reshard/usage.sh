# Usage errors exit 2 and say what is wrong.
ckptconv reshard "$TESTDATA/megatron/tp1" out --tp 0
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1" --tp 2
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1" out --extra-state keep
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1" out --bogus
echo "exit $?"
test ! -e out
