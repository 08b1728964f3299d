# --padded-vocab-size is bounded by the vocabulary it pads: 2^40 rows (a 256 TiB table) is
# not a size the option takes; 2^30 rows (more than twice the true vocabulary) and fewer rows
# than the true vocabulary are refused by the library before anything is written.
ckptconv reshard "$TESTDATA/megatron/tp1" out --padded-vocab-size 1099511627776
echo "exit $?"
test ! -e out || echo "out written"
ckptconv reshard "$TESTDATA/megatron/tp1" out --padded-vocab-size 1073741824
echo "exit $?"
test ! -e out || echo "out written"
ckptconv reshard "$TESTDATA/megatron/tp1" out --padded-vocab-size 200
echo "exit $?"
test ! -e out || echo "out written"
