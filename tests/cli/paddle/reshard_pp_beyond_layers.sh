# More pipeline stages than decoder layers is refused; nothing is written.
ckptconv reshard "$TESTDATA/paddlenlp/fp32_pp2" out --pp 5
status=$?
test ! -e out || echo "out was written"
exit $status
