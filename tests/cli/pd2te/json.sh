ckptconv pd2te --json "$TESTDATA/llama/fp32_tp2" out | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["map"], r["dry_run"])
for f in r["files"]:
    print(f["file"], f["tensors_in"], f["tensors_out"], f["tensor_bytes"] > 0, f["bytes_written"] > 0)
print(r["copied"], r["skipped"], r["indexes"])'
