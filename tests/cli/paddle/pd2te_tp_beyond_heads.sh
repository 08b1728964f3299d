# pd2te --tp applies the same constraints as reshard.
ckptconv pd2te "$TESTDATA/paddlenlp/fp32_tp2" out --tp 8
status=$?
test ! -e out || echo "out was written"
exit $status
