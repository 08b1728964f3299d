# A config size far beyond any model's is refused before anything is sized by it.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
sed -i "s/\"vocab_size\": 128/\"vocab_size\": 1e12/" in/config.json
ckptconv reshard in out --tp 1
status=$?
test ! -e out || echo "out was written"
exit $status
