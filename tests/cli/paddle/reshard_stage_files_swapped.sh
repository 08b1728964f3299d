# Stage files renamed out of order: a stage that holds layers PaddleNLP's pipeline puts on another
# stage is refused, naming the file and the layer.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_pp4/"* in/
mv in/model_state.pp01.pdparams tmp && mv in/model_state.pp02.pdparams in/model_state.pp01.pdparams
mv tmp in/model_state.pp02.pdparams
ckptconv reshard in out --pp 1 --no-optimizer
status=$?
test ! -e out || echo "out was written"
exit $status
