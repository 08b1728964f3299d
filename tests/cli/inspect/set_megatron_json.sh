# A Megatron checkpoint root, --json: the layout, the rank files, the tensors at full shape.
ckptconv inspect --json "$TESTDATA/megatron/tp2" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["layout"], r["tp"], r["pp"], [(f["path"], f["role"], f["tp"]) for f in r["files"]])
print(len(r["tensors"]), r["tensors"][0])'
