"""mutate_tensor.py FILE REFERENCE.safetensors OP NAME [NAME2]: change the bytes of tensor NAME
in the torch.save file FILE in place, finding them by the bytes the same tensor has in
REFERENCE (FILE converted by `ckptconv convert`; each tensor's bytes must occur once in FILE).
OP: swap (NAME's and NAME2's bytes, same shape), zero, transpose (a 2-D float32 tensor's
values written transposed under the same shape). The standard library only."""
import json
import struct
import sys

path, ref, op, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
with open(ref, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    head = json.loads(f.read(n))
    body = f.read()


def tensor(name):
    lo, hi = head[name]["data_offsets"]
    return head[name], body[lo:hi]


data = bytearray(open(path, "rb").read())


def where(blob):
    at = data.find(blob)
    assert at >= 0 and data.find(blob, at + 1) < 0, f"{path}: the bytes are not there exactly once"
    return at


info, blob = tensor(names[0])
at = where(blob)
if op == "swap":
    info2, blob2 = tensor(names[1])
    assert info["shape"] == info2["shape"] and blob != blob2
    at2 = where(blob2)
    data[at:at + len(blob)], data[at2:at2 + len(blob2)] = blob2, blob
elif op == "zero":
    data[at:at + len(blob)] = bytes(len(blob))
elif op == "transpose":
    assert info["dtype"] == "F32" and len(info["shape"]) == 2
    rows, cols = info["shape"]
    v = struct.unpack(f"<{rows * cols}f", blob)
    data[at:at + len(blob)] = struct.pack(f"<{rows * cols}f", *[v[r * cols + c] for c in range(cols) for r in range(rows)])
else:
    sys.exit(f"unknown op {op}")
open(path, "wb").write(data)
