# config.json's intermediate_size does not fit the MLP weights: the tensor, its shape and the
# shape the config implies are named.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
sed -i "s/\"intermediate_size\": 32/\"intermediate_size\": 64/" in/config.json
ckptconv reshard in out --tp 1
status=$?
test ! -e out || echo "out was written"
exit $status
