set -e
ckptconv inspect --json "$TESTDATA/torch/views.pt" > out.json
python3 - <<'PY'
import json
d = json.load(open("out.json"))
assert d["format"] == "torch", d["format"]
assert isinstance(d["tensors"], list) and d["tensors"], "no tensors"
for t in d["tensors"]:
    assert set(t) >= {"name", "dtype", "shape", "stride", "offset", "nbytes"}, t
    assert len(t["shape"]) == len(t["stride"])
assert all(g["known"] for g in d["globals"]), d["globals"]
print("tensors:", len(d["tensors"]))
PY
