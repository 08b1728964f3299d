# A TP 2 directory without its tp01 files, whose config.json says tensor_parallel_degree 2, is
# refused naming the missing file and the field (it used to come out as a half-size model).
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
rm in/model_state.tp01.pdparams in/optimizer.tp01.pdopt
ckptconv paddle2hf in out
status=$?
test ! -e out || echo "out was written"
exit $status
