"""safetensors-side checks of converter output. Run with the venv Python (safetensors + torch).

  expected OUT JSON [SKIP...]  OUT holds every tensor of the reference JSON (except the names
                               SKIP...) by name, dtype, shape and bytes; views count as their
                               contiguous values. Arrays the JSON lists under numpy_arrays may
                               appear too and must then match.
  cast OUT SRC.pt DTYPE        OUT equals torch's own `.to(DTYPE)` of every floating-point
                               tensor of SRC (others unchanged), bit for bit.
  make SRC.pt OUT              safetensors.torch.save_file of SRC's tensors (contiguous
                               copies, named by our rule): an input written by the package.
  describe FILE JSON           reference JSON (names, dtypes, shapes, sha256) of a
                               safetensors file, as the package reads it.
  same_tensors DIR_A DIR_B     the safetensors files of two Hugging Face directories (the
                               index's files, or model.safetensors) hold the same tensors:
                               names, dtypes, shapes and bytes, however they are sharded.

Tensors are read with the safetensors package: framework "pt" for BF16 (numpy has no
bfloat16), "np" otherwise (torch 1.13 has no unsigned types beyond uint8).
"""

import json
import os
import struct

import numpy as np
import torch
from safetensors import safe_open

from common import check, compare_record, key_join, load_expected, match_names, numpy_as_reference, run_main, sha256

ST_TO_NAME = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64",
    "U8": "uint8", "U16": "uint16", "U32": "uint32", "U64": "uint64",
    "BOOL": "bool", "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def load(path):
    """{name: (dtype name, shape, raw bytes)} read through the safetensors package."""
    hdr = header(path)
    hdr.pop("__metadata__", None)
    out = {}
    with safe_open(path, framework="np") as fnp, safe_open(path, framework="pt") as fpt:
        check(sorted(fnp.keys()) == sorted(hdr), "the package and the header disagree on the names")
        for name, info in hdr.items():
            dtype = ST_TO_NAME[info["dtype"]]
            if info["dtype"] == "BF16":
                t = fpt.get_tensor(name)
                check(t.dtype == torch.bfloat16, f"{name}: loaded as {t.dtype}")
                raw = t.contiguous().view(torch.int16).numpy().tobytes()
                shape = list(t.shape)
            else:
                a = fnp.get_tensor(name)
                check(np.dtype(a.dtype).name == dtype, f"{name}: loaded as {a.dtype}")
                raw = np.ascontiguousarray(a).tobytes()
                shape = list(a.shape)
            out[name] = (dtype, shape, raw)
    return out


def cmd_expected(out, expected_json, *skip):
    exp = load_expected(expected_json)
    want = [t for t in exp["tensors"] if t["name"] not in skip]
    arrays = [numpy_as_reference(a) for a in exp.get("numpy_arrays", [])]
    got = load(out)
    mapping = match_names(want, got, optional=arrays)
    for rec in want:
        compare_record(rec, mapping[rec["name"]], *got[mapping[rec["name"]]])
    for rec in arrays:
        if rec["name"] in got:
            compare_record(rec, rec["name"], *got[rec["name"]])
    print(f"{out}: {len(want)} tensors match")


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def flatten(obj, path, tensors, arrays, seen):
    if isinstance(obj, torch.Tensor):
        if id(obj) not in seen:
            seen.add(id(obj))
            tensors[path] = obj
    elif isinstance(obj, np.ndarray):
        arrays.add(path)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, key_join(path, k), tensors, arrays, seen)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, key_join(path, i), tensors, arrays, seen)


def compare_nan_cast(name, want, dtype, shape, raw):
    """Bit-identical except for NaN payloads, which torch itself does not fix: its
    double->bfloat16 kernel writes 0xFFFF from the vector loop and 0x7FC0 from the scalar
    tail, and strided inputs take the scalar path, so the payload depends on position,
    layout and thread count. NaNs must sit in the same places; every other bit must match.
    (Casts to half give one NaN pattern whatever the layout, so they stay bit for bit.)"""
    check(dtype == str(want.dtype).replace("torch.", ""), f"{name}: dtype {dtype}")
    check(list(shape) == list(want.shape), f"{name}: shape {list(shape)}")
    got_t = torch.frombuffer(bytearray(raw), dtype=want.dtype).reshape(want.shape)
    nan_w, nan_g = torch.isnan(want), torch.isnan(got_t)
    check(torch.equal(nan_w, nan_g), f"{name}: NaNs in different places")
    check(tensor_bytes(want.masked_fill(nan_w, 0)) == tensor_bytes(got_t.masked_fill(nan_g, 0)),
          f"{name}: non-NaN values differ from torch's cast")


def cmd_cast(out, src, dtype_name):
    dtype = getattr(torch, dtype_name)
    tensors, arrays = {}, set()
    flatten(torch.load(src, map_location="cpu"), "", tensors, arrays, set())
    got = load(out)
    missing = sorted(set(tensors) - set(got))
    extra = sorted(set(got) - set(tensors) - arrays)
    check(not missing and not extra, f"missing {missing[:8]}, unexpected {extra[:8]}")
    casts = 0
    for name, t in tensors.items():
        want = t.to(dtype) if t.is_floating_point() else t
        casts += t.is_floating_point() and t.dtype != dtype
        if want.dtype == torch.bfloat16 and bool(torch.isnan(want).any()):
            compare_nan_cast(name, want, *got[name])
            continue
        rec = {"dtype": str(want.dtype).replace("torch.", ""), "shape": list(want.shape),
               "sha256": sha256(tensor_bytes(want))}
        compare_record(rec, name, *got[name])
    check(casts > 0, f"{src} has no tensor that --dtype {dtype_name} changes")
    print(f"{out}: {len(tensors)} tensors match torch's cast ({casts} cast)")


def cmd_make(src, out):
    from safetensors.torch import save_file
    tensors, arrays = {}, set()
    flatten(torch.load(src, map_location="cpu"), "", tensors, arrays, set())
    save_file({k: t.detach().contiguous().clone() for k, t in tensors.items()}, out)


def cmd_describe(path, out_json):
    recs = [{"name": n, "dtype": d, "shape": s, "sha256": sha256(raw)}
            for n, (d, s, raw) in load(path).items()]
    with open(out_json, "w", encoding="utf-8") as f:
        json.dump({"file": path, "tensors": recs}, f, indent=1)


def load_dir(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for name in files:
        out.update(load(os.path.join(d, name)))
    return out


def cmd_same_tensors(a_dir, b_dir):
    a, b = load_dir(a_dir), load_dir(b_dir)
    check(sorted(a) == sorted(b), f"names differ: {sorted(set(a) ^ set(b))[:8]}")
    for name in a:
        check(a[name][:2] == b[name][:2], f"{name}: {a[name][:2]} vs {b[name][:2]}")
        check(a[name][2] == b[name][2], f"{name}: the bytes differ")


if __name__ == "__main__":
    run_main({"expected": cmd_expected, "cast": cmd_cast, "make": cmd_make, "describe": cmd_describe,
              "same_tensors": cmd_same_tensors})
