set -e
ckptconv inspect --stats --json "$TESTDATA/torch/dtypes.pt" > out.json
python3 - <<'PY'
import json
d = json.load(open("out.json"))
floats = [t for t in d["tensors"] if t["dtype"].startswith(("float", "bfloat"))]
assert floats, "no float tensors"
for t in d["tensors"]:
    s = t["stats"]
    assert set(s) == {"min", "max", "mean", "std", "nan", "inf"}, s
print("nan found:", any(t["stats"]["nan"] > 0 for t in floats))
print("inf found:", any(t["stats"]["inf"] > 0 for t in floats))
PY
