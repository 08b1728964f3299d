# --json report of a real run: the plan report every job gives (files, tensors, bytes,
# bytes_written, seconds) with the notes.
set -e
ckptconv zero-to-fp32 --json --max-shard-size 3KB "$TESTDATA/zero/stage3_fp32_ws4" out | python3 -c '
import json, os, sys
d = json.load(sys.stdin)
print(d["dry_run"], d["tensors"], sorted(d), d["seconds"] >= 0)
for f in d["files"]:
    print(f["path"], f["kind"], f["tensors"], f["bytes_written"] == os.path.getsize(os.path.join("out", f["path"])))
print(d["bytes_written"] == sum(f["bytes_written"] for f in d["files"]))'
