"""Write a small safetensors file from the command line (Python's standard library only):
  python3 st.py OUT NAME:DTYPE:SHAPE:VALUES ...
DTYPE F32, F64, BF16 (the high half of the float32: exact for values bfloat16 holds) or I64;
SHAPE 2x3 ('' for a scalar); VALUES comma separated ('nan', 'inf' allowed), or 'iN' for
0, 1, ... N-1 scaled by 1/8."""
import json
import struct
import sys

FMT = {"F32": "<f", "F64": "<d", "I64": "<q"}


def encode(dtype, values):
    if dtype == "BF16":
        return b"".join(struct.pack("<f", v)[2:] for v in values)
    return b"".join(struct.pack(FMT[dtype], int(v) if dtype == "I64" else v) for v in values)


def main():
    out, specs = sys.argv[1], sys.argv[2:]
    header, data = {}, b""
    for spec in specs:
        name, dtype, shape, values = spec.split(":")
        dims = [int(d) for d in shape.split("x")] if shape else []
        if values.startswith("i"):
            vals = [i / 8 for i in range(int(values[1:]))]
        else:
            vals = [float(v) for v in values.split(",")]
        blob = encode(dtype, vals)
        header[name] = {"dtype": dtype, "shape": dims, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


main()
