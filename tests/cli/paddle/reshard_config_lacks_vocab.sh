# A TP 2 directory whose config.json lacks vocab_size: the message names the directory once.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
python3 -c 'import json; c = json.load(open("in/config.json")); del c["vocab_size"]; json.dump(c, open("in/config.json", "w"))'
ckptconv reshard in out --tp 1
status=$?
test ! -e out || echo "out was written"
exit $status
