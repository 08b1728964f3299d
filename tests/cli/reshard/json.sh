# --json: one report for scripts; the layout before and after, every file written.
set -e
ckptconv reshard "$TESTDATA/megatron/tp2pp2" out --tp 1 --pp 1 --json > report.json
python3 -c '
import json
r = json.load(open("report.json"))
print(r["command"], r["from"]["tp"], r["from"]["pp"], r["to"]["tp"], r["to"]["pp"], r["num_layers"], r["iteration"])
print(sorted(f["path"] for f in r["files"]))
print(r["bytes_written"] > 0)'
ls out out/iter_0000010
