"""Compares a PaddleNLP model file, converted to safetensors by `ckptconv convert` (the standard
library reads it, no numpy), with what PaddleNLP itself saved for the same Hugging Face model
(testdata/gen/paddlenlp_moe_oracle.json, written by testdata/gen/gen_paddlenlp_moe.py): every
tensor name, its dtype (paddle.save keeps bf16 as uint16: BF16 here), shape and the sha256 of
its bytes (as many leading hex digits as the oracle keeps). Prints one line; exit 1 on any difference.
With RANK, the file is TP rank RANK of 2, compared with PaddleNLP's own cut of its tensors
(the oracle's "tp2").
usage: moe_oracle.py ORACLE_JSON CASE FILE.safetensors [RANK]"""
import hashlib
import json
import sys

DTYPES = {"uint16": "BF16", "float32": "F32", "float16": "F16"}

oracle_path, case, path = sys.argv[1:4]
oracle = json.load(open(oracle_path))["cases"][case]
tensors = oracle["tp2"][int(sys.argv[4])] if len(sys.argv) > 4 else oracle["tensors"]
want = {k: {"dtype": DTYPES[v["dtype"]], "shape": v["shape"], "sha256": v["sha256"]} for k, v in tensors.items()}
with open(path, "rb") as f:
    data = f.read()
n = int.from_bytes(data[:8], "little")
header = json.loads(data[8:8 + n])
got = {}
for k, v in header.items():
    if k == "__metadata__":
        continue
    a, b = v["data_offsets"]
    got[k] = {"dtype": v["dtype"], "shape": v["shape"], "sha256": hashlib.sha256(data[8 + n + a:8 + n + b]).hexdigest()[:len(want[k]["sha256"]) if k in want else None]}
bad = sorted(set(want) ^ set(got)) + sorted(k for k in set(want) & set(got) if want[k] != got[k])
if bad:
    print(f"{case}: {len(bad)} tensor(s) differ from PaddleNLP's, first {bad[0]}: want {want.get(bad[0])}, "
          f"got {got.get(bad[0])}")
    sys.exit(1)
print(f"{case}{' TP rank ' + sys.argv[4] if len(sys.argv) > 4 else ''}: {len(got)} tensors equal PaddleNLP's own (name, dtype, shape, sha256)")
