ckptconv pd2te --json "$TESTDATA/llama/fp32_tp2" out | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["map"], r["dry_run"], r["dropped"])
for f in r["files"]:
    print(f["path"], f["kind"], r["tensors_in"].get(f["path"]), f["tensors"], f["bytes"] > 0, f["bytes_written"] > 0)
print(r["copied"], r["skipped"])'
ckptconv pd2te --json --dry-run "$TESTDATA/llama/fp32_tp2" out2 | python3 -c '
import json, sys
r = json.load(sys.stdin)
t = r["tensor_lists"]["model_state.tp00.pdparams"]
print(r["dry_run"], len(t), sorted(t[0]), sum(1 for x in t if x["rule"]))'
