"""edit_tensor.py FILE OP NAME [ARG]: edit one tensor of the safetensors file FILE in place (the
standard library only), to derive broken inputs from the fixtures:

  remove NAME          drop the tensor (header entry and bytes)
  zero NAME            set every element to 0
  swap NAME OTHER      exchange the values of two tensors of the same dtype and shape
  add NAME X           add the number X to every element (F32, F16, BF16; BF16 rounded to
                       nearest even, as torch rounds)
  copy NAME NEW        add tensor NEW, a copy of NAME (placed after it)
  rename NAME NEW      give tensor NAME the name NEW (same place, dtype and bytes)

The other tensors keep their bytes, order and dtype; the header keeps __metadata__ and is
padded with spaces to 8 bytes, as the safetensors library writes it. A sharded model's
index.json is not touched: edit it with edit_json.py."""
import json
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", None)
    tensors = []
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = info["data_offsets"]
        tensors.append([name, info["dtype"], info["shape"], bytearray(body[a:b])])
    return meta, tensors


def save(path, meta, tensors):
    header, off = {}, 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors:
            f.write(t[3])


def f32_to_bf16(x):
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    if (bits & 0x7F800000) == 0x7F800000:
        return bits >> 16
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def add(t, x):
    dtype, raw = t[1], t[3]
    if dtype == "F32":
        vals = struct.unpack("<%df" % (len(raw) // 4), raw)
        t[3] = bytearray(struct.pack("<%df" % len(vals), *[v + x for v in vals]))
    elif dtype == "F16":
        vals = struct.unpack("<%de" % (len(raw) // 2), raw)
        t[3] = bytearray(struct.pack("<%de" % len(vals), *[v + x for v in vals]))
    elif dtype == "BF16":
        out = bytearray()
        for (h,) in struct.iter_unpack("<H", raw):
            v = struct.unpack("<f", struct.pack("<I", h << 16))[0]
            out += struct.pack("<H", f32_to_bf16(v + x))
        t[3] = out
    else:
        sys.exit("edit_tensor.py: %s is %s; add takes F32, F16 or BF16" % (t[0], dtype))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, op, name = sys.argv[1:4]
    meta, tensors = load(path)
    index = {t[0]: i for i, t in enumerate(tensors)}
    if name not in index:
        sys.exit("edit_tensor.py: %s has no tensor %s" % (path, name))
    t = tensors[index[name]]
    if op == "remove":
        del tensors[index[name]]
    elif op == "zero":
        t[3] = bytearray(len(t[3]))
    elif op == "swap":
        other = tensors[index[sys.argv[4]]]
        if (t[1], t[2]) != (other[1], other[2]):
            sys.exit("edit_tensor.py: %s and %s differ in dtype or shape" % (name, other[0]))
        t[3], other[3] = other[3], t[3]
    elif op == "add":
        add(t, float(sys.argv[4]))
    elif op == "copy":
        new = sys.argv[4]
        if new in index:
            sys.exit("edit_tensor.py: %s already has a tensor %s" % (path, new))
        tensors.insert(index[name] + 1, [new, t[1], list(t[2]), bytearray(t[3])])
    elif op == "rename":
        new = sys.argv[4]
        if new in index:
            sys.exit("edit_tensor.py: %s already has a tensor %s" % (path, new))
        t[0] = new
    else:
        sys.exit("edit_tensor.py: unknown operation %s\n%s" % (op, __doc__))
    save(path, meta, tensors)


if __name__ == "__main__":
    main()
