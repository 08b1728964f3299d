# A TP size that does not divide the attention heads is refused, naming the constraint; nothing
# is written.
ckptconv reshard "$TESTDATA/paddlenlp/fp32_tp1" out --tp 3
status=$?
test ! -e out || echo "out was written"
exit $status
