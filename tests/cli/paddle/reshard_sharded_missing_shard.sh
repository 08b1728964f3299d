# A sharded save without one sharding rank's model file is refused, naming the rank.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2_shard2/"* in/
rm in/model_state.tp01_shard01.pdparams
ckptconv reshard in out --tp 1
status=$?
test ! -e out || echo "out was written"
exit $status
