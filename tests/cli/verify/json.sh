# --json: one object, the layers in order, the model-level entries without an index.
set -e
ckptconv verify "$TESTDATA/llama/fp32_tp2" "$TESTDATA/llama/fp32_tp1" --device cpu --json --seed 7 > r.json
python3 -c '
import json
r = json.load(open("r.json"))
print(r["pass"], r["tokens"], r["seed"], r["tol"], r["tol_reason"], r["dtype"])
print([(e.get("index"), e["name"], e["pass"]) for e in r["layers"]])
print(r["a"]["kind"])
print(r["b"]["kind"])
print(sorted(r["seconds"]))'
