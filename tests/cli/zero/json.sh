# --json report of a real run: files, tensors, bytes, seconds.
set -e
ckptconv zero-to-fp32 --json --max-shard-size 3KB "$TESTDATA/zero/stage3_fp32_ws4" out | python3 -c '
import json, os, sys
d = json.load(sys.stdin)
print(d["dry_run"], d["tensors"], sorted(d), d["seconds"] >= 0)
for f in d["files"]:
    print(f["name"], f["tensors"], f["data_bytes"], f["bytes"] == os.path.getsize(os.path.join("out", f["name"])))
print(d["bytes"] == sum(f["bytes"] for f in d["files"]))'
