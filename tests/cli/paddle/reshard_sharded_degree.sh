# model_meta.json says 3 sharding ranks, the directory holds 2.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2_shard2/"* in/
sed -i "s/\"sharding_degree\": 2/\"sharding_degree\": 3/" in/model_meta.json
ckptconv reshard in out --tp 1
status=$?
test ! -e out || echo "out was written"
exit $status
