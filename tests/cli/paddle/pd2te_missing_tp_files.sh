# pd2te --tp of a directory that lacks the TP ranks its config.json names is refused.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
rm in/model_state.tp01.pdparams in/optimizer.tp01.pdopt
ckptconv pd2te in out --tp 1
status=$?
test ! -e out || echo "out was written"
exit $status
