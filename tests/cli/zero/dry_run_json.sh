# --dry-run --json: every file with its tensors (and tied names), nothing written.
set -e
ckptconv zero-to-fp32 --dry-run --json --optimizer-states "$TESTDATA/zero/stage3_fp32_ws2" out | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["dry_run"], d["tensors"], d["data_bytes"], d["notes"])
for f in d["files"]:
    print(f["name"], f["tensors"], f["data_bytes"], [(t["name"], t["dtype"], t["shape"], t["bytes"], t.get("alias_of"))
                                                      for t in f["tensor_list"]][-2:])'
test ! -e out
