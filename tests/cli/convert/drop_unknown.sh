set -e
ckptconv convert -q --drop-unknown-objects "$TESTDATA/torch/unsafe_os_system.pt" out.pt
ckptconv inspect --json out.pt | python3 -c '
import json, sys
d = json.load(sys.stdin)
print([g["module"] + "." + g["name"] for g in d["globals"] if not g["known"]], len(d["tensors"]) > 0)'
