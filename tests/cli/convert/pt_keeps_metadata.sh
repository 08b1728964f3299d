set -e
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" out.pt --dtype float32
ckptconv inspect out.pt | grep -E '^  (args|iteration|checkpoint_version) '
ckptconv inspect --json out.pt | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sorted({t["dtype"] for t in d["tensors"]}))'
