# Model files of more TP ranks than config.json's tensor_parallel_degree: the extra file is named.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
sed -i "s/\"tensor_parallel_degree\": 2/\"tensor_parallel_degree\": 1/" in/config.json
ckptconv reshard in out --tp 1
status=$?
test ! -e out || echo "out was written"
exit $status
