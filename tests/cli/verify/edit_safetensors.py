"""edit_safetensors.py FILE OP ARGS...: change a .safetensors file in place. OP:
  swap NAME NAME2        exchange the two tensors' bytes (same shape and dtype)
  drop NAME              remove the tensor (its header entry and its bytes)
  swap_rows NAME A B N   exchange rows A..A+N-1 and B..B+N-1 of the tensor (axis 0; a row of a
                         1-D tensor is one element)
The standard library only."""
import json
import struct
import sys

path, op, args = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    head = json.loads(f.read(n))
    body = bytearray(f.read())


def span(name):
    lo, hi = head[name]["data_offsets"]
    return lo, hi


if op == "swap":
    (a0, a1), (b0, b1) = span(args[0]), span(args[1])
    assert head[args[0]]["shape"] == head[args[1]]["shape"] and head[args[0]]["dtype"] == head[args[1]]["dtype"]
    body[a0:a1], body[b0:b1] = body[b0:b1], body[a0:a1]
elif op == "drop":
    lo, hi = span(args[0])
    del head[args[0]]
    del body[lo:hi]
    for k, v in head.items():
        if k != "__metadata__" and v["data_offsets"][0] >= hi:
            v["data_offsets"] = [v["data_offsets"][0] - (hi - lo), v["data_offsets"][1] - (hi - lo)]
elif op == "swap_rows":
    lo, hi = span(args[0])
    rows = head[args[0]]["shape"][0]
    a, b, count = int(args[1]), int(args[2]), int(args[3])
    assert 0 <= a and 0 <= b and a + count <= rows and b + count <= rows and abs(a - b) >= count
    row = (hi - lo) // rows
    pa, pb = lo + a * row, lo + b * row
    body[pa:pa + count * row], body[pb:pb + count * row] = body[pb:pb + count * row], body[pa:pa + count * row]
else:
    sys.exit(f"unknown op {op}")
text = json.dumps(head, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + bytes(body))
