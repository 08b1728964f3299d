# --dry-run --json: the plan report every job gives, every file's tensors (and tied names),
# nothing written.
set -e
ckptconv zero-to-fp32 --dry-run --json --optimizer-states "$TESTDATA/zero/stage3_fp32_ws2" out | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["command"], d["dry_run"], d["tensors"], d["bytes"], d["notes"], d["dropped"])
for f in d["files"]:
    print(f["path"], f["kind"], f["tensors"], f["bytes"], [(t["name"], t["dtype"], t["shape"], t["bytes"], t.get("alias_of"))
                                                          for t in d["tensor_lists"][f["path"]]][-2:])'
test ! -e out
