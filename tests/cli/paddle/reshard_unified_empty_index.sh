# A unified checkpoint whose index is empty is still read as PaddleNLP's (the shards' headers say
# so), and the index is named (it used to be read as a Megatron directory).
mkdir in
cp "$TESTDATA/paddlenlp/unified_fp32/"* in/
: > in/model.safetensors.index.json
ckptconv reshard in out --tp 1
status=$?
test ! -e out || echo "out was written"
exit $status
