# paddle2hf of a unified checkpoint whose index names a missing shard names the shard and the index.
mkdir in
cp "$TESTDATA/paddlenlp/unified_fp32/"* in/
rm in/model-00002-of-00002.safetensors
ckptconv paddle2hf in out
status=$?
test ! -e out || echo "out was written"
exit $status
