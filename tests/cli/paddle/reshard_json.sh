# reshard of a PaddleNLP directory, --json: the layouts, the optimizer and master weights
# carried, every file written.
ckptconv reshard "$TESTDATA/paddlenlp/bf16_tp2pp2" out --tp 1 --pp 4 --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["layout"], r["from"], r["to"], r["num_layers"], r["optimizer"], r["master_weights"])
for f in r["files"]:
    print(f["path"], f["tensors"], f["bytes"] > 0)
print(r["bytes_written"] > 0, r["dry_run"])'
ls out
