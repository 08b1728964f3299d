set -e
ckptconv convert -q "$TESTDATA/paddle/bf16.pdparams" out.pt
ckptconv convert -q out.pt back.pdparams
ckptconv inspect --json back.pdparams | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["format"], sorted({t["dtype"] for t in d["tensors"]}))'
