#!/usr/bin/env python3
"""Regenerate the safetensors fixtures in testdata/safetensors/.

Every file except writer_shuffled.safetensors is written by the real `safetensors`
package. Needs torch, numpy and safetensors, e.g. a venv over a system torch:

    python3 -m venv --system-site-packages venv && venv/bin/pip install safetensors 'numpy<2'
    venv/bin/python testdata/gen/gen_safetensors.py

dtypes that this torch or numpy cannot express (bfloat16 in numpy, float8, float4) are
handed to the package's own serializer as raw bytes with its dtype name (TensorSpec), so
the header is still the package's. The versions used are written to VERSIONS.txt.
"""
import json
import os
import struct
import sys

import numpy as np
import safetensors
import torch
from safetensors import TensorSpec, serialize_file
from safetensors.torch import load_file, save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "safetensors")


def spec(dtype, shape, array, keep):
    """A TensorSpec over the bytes of a numpy array (kept alive in `keep`)."""
    array = np.ascontiguousarray(array)
    keep.append(array)
    return TensorSpec(dtype=dtype, shape=list(shape), data_ptr=array.ctypes.data, data_len=array.nbytes)


def all_dtypes():
    """One tensor per dtype the library supports, with values the unit test checks."""
    keep = []
    bf16 = torch.tensor([1.0, -2.0, 3.140625], dtype=torch.bfloat16).view(torch.int16).numpy()
    tensors = {
        "bool": spec("bool", [3], np.array([True, False, True]), keep),
        "u8": spec("uint8", [2, 3], np.arange(6, dtype=np.uint8).reshape(2, 3), keep),
        "i8": spec("int8", [4], np.array([-128, -1, 0, 127], dtype=np.int8), keep),
        "i16": spec("int16", [3], np.array([-32768, 1, 32767], dtype=np.int16), keep),
        "u16": spec("uint16", [3], np.array([0, 1, 65535], dtype=np.uint16), keep),
        "i32": spec("int32", [3], np.array([-(2**31), 7, 2**31 - 1], dtype=np.int32), keep),
        "u32": spec("uint32", [2], np.array([0, 2**32 - 1], dtype=np.uint32), keep),
        "i64": spec("int64", [3], np.array([-(2**63), 42, 2**63 - 1], dtype=np.int64), keep),
        "u64": spec("uint64", [2], np.array([0, 2**64 - 1], dtype=np.uint64), keep),
        "f16": spec("float16", [3], np.array([1.0, -2.5, 65504.0], dtype=np.float16), keep),
        "bf16": spec("bfloat16", [3], bf16, keep),
        "f32": spec("float32", [3, 4], np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5, keep),
        "f64": spec("float64", [2], np.array([1.0 / 3.0, -1e300]), keep),
        # float8 bytes: 1.0, -2.0, the largest finite value, 0.
        "f8_e4m3": spec("float8_e4m3fn", [4], np.array([0x38, 0xC0, 0x7E, 0x00], dtype=np.uint8), keep),
        "f8_e5m2": spec("float8_e5m2", [4], np.array([0x3C, 0xC0, 0x7B, 0x00], dtype=np.uint8), keep),
        "c64": spec("complex64", [2], np.array([1 + 2j, -3.5 + 0.25j], dtype=np.complex64), keep),
        "scalar_f32": spec("float32", [], np.array(3.5, dtype=np.float32), keep),
        "scalar_i64": spec("int64", [], np.array(-7, dtype=np.int64), keep),
        "empty_f32": spec("float32", [0], np.zeros(0, dtype=np.float32), keep),
        "empty_i32": spec("int32", [2, 0, 3], np.zeros(0, dtype=np.int32), keep),
    }
    serialize_file(tensors, os.path.join(OUT, "all_dtypes.safetensors"), metadata={"format": "pt"})


def writer_tensors():
    """Mixed dtypes and awkward names: the writer must order and escape them as the reference does."""
    g = torch.Generator().manual_seed(0)
    return {
        "model.layers.0.weight": torch.randn(4, 3, generator=g),
        "b": torch.randn(2, generator=g),
        "a": torch.randn(2, generator=g).to(torch.float16),
        "Zeta": torch.randn(3, generator=g),
        'quote"name': torch.randn(1, generator=g).to(torch.bfloat16),
        "back\\slash": torch.arange(3, dtype=torch.int64),
        "tab\tnew\nline\r": torch.tensor([True, False]),
        "ctl\x01\x1f\x7f\b\f": torch.arange(5, dtype=torch.uint8),
        "\u00fcn\u00efcode/\u540d\u524d": torch.randn(2, 2, generator=g, dtype=torch.float64),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
        "i8": torch.tensor([-3, 3], dtype=torch.int8),
        "i16": torch.tensor([-300, 300], dtype=torch.int16),
        "i32": torch.tensor([-70000, 70000], dtype=torch.int32),
        "c64": torch.tensor([1 + 1j], dtype=torch.complex64),
    }


def write_shuffled(tensors, path):
    """The same tensors as writer_reference, laid out differently: header keys in another
    order, data in reverse header order, spaces in the JSON, __metadata__ last with other
    content, and padding that leaves the data unaligned. Written by hand (the reference
    writer always produces its canonical layout), then checked with the reference reader."""
    names = sorted(tensors, key=lambda n: (len(n), n))
    dtypes = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
              torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
              torch.uint8: "U8", torch.bool: "BOOL", torch.complex64: "C64"}
    blobs = {n: tensors[n].reshape(-1).contiguous().view(torch.uint8).numpy().tobytes() if tensors[n].numel() else b""
             for n in names}
    header, offset = {}, 0
    for n in reversed(names):
        offset_end = offset + len(blobs[n])
        header[n] = (dtypes[tensors[n].dtype], list(tensors[n].shape), offset, offset_end)
        offset = offset_end
    parts = []
    for n in names:
        d, shape, b, e = header[n]
        parts.append("%s: {\"data_offsets\": [%d, %d], \"dtype\": \"%s\", \"shape\": %s}"
                     % (json.dumps(n, ensure_ascii=True), b, e, d, json.dumps(shape)))
    parts.append("\"__metadata__\": {\"note\": \"hand-written\", \"format\": \"pt\"}")
    text = ("{" + ", ".join(parts) + "}").encode()
    if len(text) % 8 == 0:
        text += b" "
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for n in reversed(names):
            f.write(blobs[n])
    back = load_file(path)
    assert back.keys() == tensors.keys()
    for n in tensors:
        assert back[n].dtype == tensors[n].dtype and torch.equal(back[n], tensors[n]), n


def sharded():
    """Three shards and the index the Hugging Face tools write next to them."""
    g = torch.Generator().manual_seed(1)
    shards = [
        {"embed.weight": torch.randn(8, 4, generator=g), "layers.0.norm": torch.ones(4)},
        {"layers.0.proj": torch.randn(4, 4, generator=g).to(torch.bfloat16), "layers.1.norm": torch.full((4,), 2.0)},
        {"layers.1.proj": torch.randn(4, 4, generator=g).to(torch.bfloat16), "lm_head.bias": torch.zeros(0),
         "step": torch.tensor(100)},
    ]
    os.makedirs(os.path.join(OUT, "sharded"), exist_ok=True)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        save_file(shard, os.path.join(OUT, "sharded", name), metadata={"format": "pt"})
        for k, v in shard.items():
            weight_map[k] = name
            total += v.numel() * v.element_size()
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(OUT, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def unsupported():
    """Valid files whose only tensor has a dtype the library cannot hold."""
    for dtype, st in [("float4_e2m1fn_x2", "f4"), ("float8_e8m0fnu", "f8_e8m0"),
                      ("float8_e4m3fnuz", "f8_e4m3fnuz"), ("float8_e5m2fnuz", "f8_e5m2fnuz")]:
        keep = []
        tensors = {"w": spec(dtype, [2], np.array([0x11, 0x22], dtype=np.uint8), keep)}
        serialize_file(tensors, os.path.join(OUT, "unsupported_%s.safetensors" % st))


def main():
    os.makedirs(OUT, exist_ok=True)
    all_dtypes()
    tensors = writer_tensors()
    save_file(tensors, os.path.join(OUT, "writer_reference.safetensors"), metadata={"format": "pt"})
    write_shuffled(tensors, os.path.join(OUT, "writer_shuffled.safetensors"))
    save_file({}, os.path.join(OUT, "no_tensors.safetensors"), metadata={"format": "pt"})
    save_file({"x": torch.arange(4, dtype=torch.int16)}, os.path.join(OUT, "no_metadata.safetensors"))
    sharded()
    unsupported()
    with open(os.path.join(OUT, "VERSIONS.txt"), "w") as f:
        f.write("safetensors %s\ntorch %s\nnumpy %s\npython %s\n"
                % (safetensors.__version__, torch.__version__, np.__version__, sys.version.split()[0]))


if __name__ == "__main__":
    main()
