"""HDF5 / zstd checks of converter output, read by the real h5py (+ hdf5plugin), safetensors
and torch. Run with the venv's Python (h5py, hdf5plugin, safetensors, and Debian's torch
through --system-site-packages); commands that touch only .pt files also run under the
plain torch Python, since every framework is imported only when a file needs it.

  same A B             A and B hold the same tensors: names, dtypes, shapes, bytes. Each
                       side is a .safetensors (read by safetensors.deserialize), a .pt/.bin
                       (torch.load, names by our rule: keys joined with "/"), or an .h5/.hdf5
                       (h5py; name = dataset path; uint16/uint8 datasets with the attribute
                       dtype=bfloat16/float8_* are those dtypes).
  ordered A B          same, and the names come in the same order.
  filters H5 KIND [LEVEL]
                       every dataset of H5 with elements and at least one axis is chunked and
                       its filter pipeline has zstd (32015) / deflate (1) when KIND is zstd /
                       gzip, with LEVEL as its first parameter when given; KIND none: no
                       filters at all. Scalars and zero-size datasets may be contiguous.
  same_dir OUT REF     every directory under OUT that holds .h5 files holds, over all of
                       them, the same tensors as the .safetensors (else .bin) files of the
                       same directory under REF.
  loads FILE           FILE loads with its framework's own loader (torch.load,
                       safetensors.torch.load_file, h5py) and prints its tensor count.
"""

import os

from common import Mismatch, check, key_join, run_main

ZSTD_FILTER = 32015
DEFLATE_FILTER = 1
SPECIAL = {"bfloat16": "uint16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}
ST_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
             "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "BOOL": "bool",
             "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64",
             "U8": "uint8", "U16": "uint16", "U32": "uint32", "U64": "uint64",
             "C64": "complex64", "C128": "complex128"}


# --- readers: name -> (dtype, shape, little-endian bytes), in file order ---------------------

def st_tensors(path):
    import safetensors
    with open(path, "rb") as f:
        items = safetensors.deserialize(f.read())
    return {n: (ST_DTYPES.get(t["dtype"], t["dtype"]), list(t["shape"]), bytes(t["data"]))
            for n, t in items}


def torch_tensors(path):
    import torch

    def raw(t):
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return t.numpy().tobytes()

    out = {}

    def walk(obj, p):
        if isinstance(obj, torch.Tensor):
            out[p] = (str(obj.dtype).replace("torch.", ""), list(obj.shape), raw(obj))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, key_join(p, k))
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, key_join(p, i))

    walk(torch.load(path, map_location="cpu"), "")
    return out


def h5_attr_str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if hasattr(v, "shape") and v.shape == () and hasattr(v, "item"):
        return h5_attr_str(v.item())
    return v if isinstance(v, str) else None


def h5_dtype(ds):
    import numpy as np
    kind = h5_attr_str(ds.attrs["dtype"]) if "dtype" in ds.attrs else None
    base = np.dtype(ds.dtype).newbyteorder("=")
    if kind in SPECIAL:
        check(base.name == SPECIAL[kind], f"{ds.name}: dtype attribute {kind!r} on a {base.name} dataset")
        return kind
    return "bool" if base.kind == "b" else base.name


def h5_datasets(path):
    """(name, h5py dataset) of every dataset in the file, in the order h5py visits them."""
    import h5py
    import hdf5plugin  # noqa: F401  (registers the zstd filter)
    f = h5py.File(path, "r")
    found = []
    f.visititems(lambda n, o: found.append((n, o)) if isinstance(o, h5py.Dataset) else None)
    return f, found


def h5_tensors(path):
    import numpy as np
    f, found = h5_datasets(path)
    out, skipped = {}, []
    with f:
        for name, ds in found:
            if ds.dtype.kind not in "biuf":
                skipped.append(f"{name} ({ds.dtype})")
                continue
            a = ds[()]
            a = np.asarray(a)
            if a.dtype.byteorder == ">":
                a = a.astype(a.dtype.newbyteorder("<"))
            out[name] = (h5_dtype(ds), list(a.shape), np.ascontiguousarray(a).tobytes())
    if skipped:
        print(f"{os.path.basename(path)}: not tensors: {', '.join(skipped)}")
    return out


def tensors(path):
    ext = path.rsplit(".", 1)[-1].lower()
    if ext == "safetensors":
        return st_tensors(path)
    if ext in ("h5", "hdf5"):
        return h5_tensors(path)
    if ext in ("pt", "bin", "pth"):
        return torch_tensors(path)
    raise Mismatch(f"{path}: no reader for .{ext}")


# --- comparisons ------------------------------------------------------------------------------

def compare(a, b, label_a, label_b, ordered=False):
    missing = [n for n in a if n not in b]
    extra = [n for n in b if n not in a]
    check(not missing and not extra,
          f"{label_b} lacks {missing[:8]} ({len(missing)}) and has extra {extra[:8]} ({len(extra)})"
          f" compared with {label_a}")
    bad = []
    for n, (dt, shape, raw) in a.items():
        dt2, shape2, raw2 = b[n]
        if (dt, shape) != (dt2, shape2):
            bad.append(f"{n}: {dt2}{shape2} in {label_b}, {dt}{shape} in {label_a}")
        elif raw != raw2:
            diff = next(i for i in range(min(len(raw), len(raw2))) if raw[i] != raw2[i]) \
                if len(raw) == len(raw2) else "size"
            bad.append(f"{n}: bytes differ (first at byte {diff})")
    check(not bad, "; ".join(bad[:8]) + (f" ... {len(bad)} tensors differ" if len(bad) > 8 else ""))
    if ordered:
        check(list(a) == list(b), f"names in another order: {list(b)[:6]}..., expected {list(a)[:6]}...")
    print(f"{len(a)} tensors equal")


def cmd_same(a, b):
    compare(tensors(a), tensors(b), os.path.basename(a), os.path.basename(b))


def cmd_ordered(a, b):
    compare(tensors(a), tensors(b), os.path.basename(a), os.path.basename(b), ordered=True)


def cmd_filters(path, kind, level=None):
    import h5py
    want = {"zstd": ZSTD_FILTER, "gzip": DEFLATE_FILTER, "none": None}[kind]
    f, found = h5_datasets(path)
    pipelines = {}
    with f:
        check(found, f"{path}: no datasets")
        for name, ds in found:
            pl = ds.id.get_create_plist()
            filters = [pl.get_filter(i) for i in range(pl.get_nfilters())]
            ids = [flt[0] for flt in filters]
            pipelines.setdefault(tuple(ids), []).append(name)
            if want is None:
                check(not ids, f"{name}: filters {ids}, expected none")
                continue
            if ds.shape == () or ds.size == 0:
                continue
            check(pl.get_layout() == h5py.h5d.CHUNKED, f"{name}: not chunked (layout {pl.get_layout()})")
            check(want in ids, f"{name}: filters {ids}, expected {want} ({kind})")
            if level is not None:
                values = filters[ids.index(want)][2]
                check(values and values[0] == int(level),
                      f"{name}: {kind} parameters {tuple(values)}, expected level {level} first")
    for ids, names in pipelines.items():
        print(f"filters {list(ids)}: {len(names)} datasets (e.g. {names[0]})")


def files_by_dir(root, exts):
    out = {}
    for d, _, files in os.walk(root):
        hits = sorted(os.path.join(d, n) for n in files if n.rsplit(".", 1)[-1] in exts)
        if hits:
            out[os.path.relpath(d, root)] = hits
    return out


def cmd_same_dir(out, ref):
    ours = files_by_dir(out, {"h5", "hdf5"})
    check(ours, f"{out}: no .h5 files")
    refs_st = files_by_dir(ref, {"safetensors"})
    refs_bin = files_by_dir(ref, {"bin"})
    for rel, files in sorted(ours.items()):
        ref_files = refs_st.get(rel) or refs_bin.get(rel)
        check(ref_files, f"{ref}/{rel}: no .safetensors or .bin to compare {files} with")
        a, b = {}, {}
        for p in ref_files:
            a.update(tensors(p))
        for p in files:
            b.update(tensors(p))
        print(f"{rel}: {[os.path.basename(p) for p in files]} vs {[os.path.basename(p) for p in ref_files]}")
        compare(a, b, os.path.basename(ref_files[0]), os.path.basename(files[0]))


def cmd_loads(path):
    ext = path.rsplit(".", 1)[-1].lower()
    if ext == "safetensors":
        from safetensors.torch import load_file
        n = len(load_file(path))
    elif ext in ("h5", "hdf5"):
        n = len(h5_tensors(path))
    else:
        import torch
        n = len(torch_tensors(path))
        torch.load(path, map_location="cpu")
    check(n > 0, f"{path}: no tensors")
    print(f"{os.path.basename(path)}: {n} tensors")


if __name__ == "__main__":
    run_main({"same": cmd_same, "ordered": cmd_ordered, "filters": cmd_filters,
              "same_dir": cmd_same_dir, "loads": cmd_loads})
