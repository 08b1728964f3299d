# pd2te --tp/--pp: converted and resharded in one pass.
ckptconv pd2te "$TESTDATA/paddlenlp/bf16_pp2" out --tp 2 --pp 1 --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["map"], r["from"], r["to"])
for f in r["files"]:
    print(f["path"], f["tensors"])'
grep tensor_parallel_degree out/config.json
