# A unified checkpoint whose index names a missing shard: the shard and the index are named
# (the message used to blame latest_checkpointed_iteration.txt).
mkdir in
cp "$TESTDATA/paddlenlp/unified_fp32/"* in/
rm in/model-00002-of-00002.safetensors
ckptconv reshard in out --tp 2
status=$?
test ! -e out || echo "out was written"
exit $status
