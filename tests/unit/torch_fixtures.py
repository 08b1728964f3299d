"""Fixtures and checks for tests/unit/test_torch.c, run with a Python that has torch.

  torch_fixtures.py make-all DIR          write every fixture checkpoint into DIR, each with
                                          an .expect file saying what its tensors hold
  torch_fixtures.py compare A,B[,wo] ...  load A and B with torch.load (wo: weights_only=True)
                                          and compare every value; exit status 1 on a difference

An .expect file has one line per tensor, tab-separated: name, dtype, shape, stride, storage
offset, flags (p = Parameter, g = requires_grad), storage group (tensors sharing a storage
share it; -1 for empty storages) and the hex of the tensor's elements in C order. Names follow
the reader's rule: the '/'-joined key path of the first place the tensor appears, depth first.
"""
import argparse
import collections
import io
import math
import os
import pickle
import random
import struct
import sys
import zipfile

import numpy as np
import torch

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128]


class Evil:
    """Pickles as a call to os.system; a safe reader must never run it."""

    def __reduce__(self):
        return (os.system, ("touch pwned",))


class OffsetOutOfRange:
    """A tensor whose view reaches past the end of its storage."""

    def __reduce_ex__(self, proto):
        storage = torch.arange(4, dtype=torch.float32).storage()
        return (torch._utils._rebuild_tensor_v2,
                (storage, 3, (4,), (1,), False, collections.OrderedDict()))


def dtype_tensors():
    gen = torch.Generator().manual_seed(7)
    out = collections.OrderedDict()
    for dt in DTYPES:
        if dt.is_floating_point or dt.is_complex:
            t = torch.randn(3, 5, generator=gen, dtype=torch.float64).to(dt)
            if dt.is_floating_point:
                t[0, 0] = math.inf
                t[0, 1] = -0.0
                t[0, 2] = math.nan
        elif dt == torch.bool:
            t = torch.randint(0, 2, (3, 5), generator=gen).bool()
        else:
            info = torch.iinfo(dt)
            t = torch.randint(info.min, info.max, (3, 5), generator=gen, dtype=torch.int64).to(dt)
        out[str(dt).replace("torch.", "")] = t
    return out


def views():
    base = torch.arange(24, dtype=torch.float32)
    grid = base[4:16].view(3, 4)
    weight = torch.nn.Parameter(torch.randn(2, 3, generator=torch.Generator().manual_seed(1)))
    frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)
    return collections.OrderedDict([
        ("base", base),
        ("slice", base[2:5]),
        ("grid", grid),
        ("transposed", grid.t()),
        ("strided", base[::3]),
        ("scalar", torch.tensor(3.5, dtype=torch.float64)),
        ("empty", torch.empty(0, 3)),
        ("expanded", torch.ones(1, dtype=torch.int16).expand(4)),
        ("weight", weight),
        ("frozen", frozen),
        ("grad", torch.zeros(2, requires_grad=True)),
        ("again", base),
        ("layers", [{"w": torch.full((2,), 1.5)}, {"w": torch.full((2,), 2.5), "b": base[1:3]}]),
        ("pair", (torch.tensor([7], dtype=torch.int64), 5, "text")),
        ("iteration", 12),
    ])


def megatron():
    gen = torch.Generator().manual_seed(3)
    te_state = io.BytesIO()
    torch.save(None, te_state)
    te_state.seek(0)
    random.seed(0)
    np.random.seed(0)
    model = collections.OrderedDict([
        ("embedding.word_embeddings.weight", torch.randn(8, 4, generator=gen).bfloat16()),
        ("decoder.layers.0.self_attention.linear_qkv.weight", torch.randn(12, 4, generator=gen).bfloat16()),
        ("decoder.layers.0.self_attention.linear_qkv._extra_state", te_state),
        ("decoder.layers.0.mlp.linear_fc1._extra_state", torch.empty(0, dtype=torch.uint8)),
        ("decoder.final_layernorm.weight", torch.ones(4).bfloat16()),
    ])
    exp_avg = torch.randn(4, generator=gen)
    return {
        "args": argparse.Namespace(tensor_model_parallel_size=1, hidden_size=4, lr=3e-4,
                                   params_dtype=torch.bfloat16, seq_length=16),
        "checkpoint_version": 3.0,
        "iteration": 100,
        "model": model,
        "optimizer": {
            "optimizer": {"state": {0: {"exp_avg": exp_avg, "exp_avg_sq": exp_avg * exp_avg, "step": 10}},
                          "param_groups": [{"lr": 3e-4, "betas": (0.9, 0.95), "params": [0]}]},
            "grad_scaler": {"scale": 4096.0, "growth_tracker": 2},
        },
        "opt_param_scheduler": {"max_lr": 3e-4, "num_steps": 1600, "lr_decay_style": "cosine"},
        "rng_state": [{
            "random_rng_state": random.getstate(),
            "np_rng_state": np.random.get_state(),
            "torch_rng_state": torch.get_rng_state(),
            "rng_tracker_states": {},
        }],
        "num_floating_point_operations_so_far": 123456789,
    }


def float32_only():
    gen = torch.Generator().manual_seed(5)
    return collections.OrderedDict([("a", torch.randn(3, 2, generator=gen)), ("b", torch.randn(5, generator=gen))])


# ---- hand-written pickles for what torch 1.13 cannot save --------------------------------

def _str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _int(v):
    return b"J" + struct.pack("<i", v)


def v3_pickle(entries):
    """{name: _rebuild_tensor_v3(pid(UntypedStorage, key, nbytes), 0, (n,), (1,), False, {}, torch.<dtype>)}"""
    out = bytearray(b"\x80\x02}(")
    for key, (name, dtype, n, itemsize) in enumerate(entries):
        out += _str(name) + b"ctorch._utils\n_rebuild_tensor_v3\n("
        out += b"(" + _str("storage") + b"ctorch.storage\nUntypedStorage\n" + _str(str(key)) + _str("cpu")
        out += _int(n * itemsize) + b"tQ"
        out += _int(0) + _int(n) + b"\x85" + _int(1) + b"\x85" + b"\x89"
        out += b"ccollections\nOrderedDict\n)R" + b"ctorch\n" + dtype.encode() + b"\ntR"
    out += b"u."
    return bytes(out)


def write_v3(path, entries, data):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("v3/data.pkl", v3_pickle(entries))
        for key, blob in enumerate(data):
            z.writestr(f"v3/data/{key}", blob)
        z.writestr("v3/version", "3\n")


# ---- expectations ---------------------------------------------------------------------------

def tensor_hex(t):
    return t.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes().hex()


def walk(obj, path, seen, out):
    if isinstance(obj, torch.Tensor):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append((path, obj))
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, f"{path}/{k}" if path else str(k), seen, out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            walk(v, f"{path}/{i}" if path else str(i), seen, out)


def write_expect(obj, path):
    found = []
    walk(obj, "", set(), found)
    groups = {}
    with open(path, "w") as f:
        for name, t in found:
            ptr = t.storage().data_ptr()
            group = -1 if t.storage().size() == 0 else groups.setdefault(ptr, len(groups))
            flags = ("p" if isinstance(t, torch.nn.Parameter) else "") + ("g" if t.requires_grad else "")
            f.write("\t".join([
                name, str(t.dtype).replace("torch.", ""),
                ",".join(map(str, t.shape)) or "-", ",".join(map(str, t.stride())) or "-",
                str(t.storage_offset()), flags or "-", str(group), tensor_hex(t) or "-",
            ]) + "\n")


def write_v3_expect(path, entries, data):
    with open(path, "w") as f:
        for (name, dtype, n, _), blob in zip(entries, data):
            f.write("\t".join([name, dtype, str(n), "1", "0", "-", "-1", blob.hex()]) + "\n")


V3_ENTRIES = [("f8", "float8_e4m3fn", 4, 1), ("u16", "uint16", 3, 2), ("f8b", "float8_e5m2", 2, 1)]
V3_DATA = [bytes([0x38, 0x40, 0xC8, 0x7F]), bytes([1, 0, 0xFF, 0xFF, 0x34, 0x12]), bytes([0x3C, 0xFB])]


def make(case, out, expect):
    """Write fixture CASE to OUT and, for cases with tensors to check, its expectations."""
    if case == "v3":
        write_v3(out, V3_ENTRIES, V3_DATA)
        if expect:
            write_v3_expect(expect, V3_ENTRIES, V3_DATA)
        return
    if case == "complex32":
        write_v3(out, [("c", "complex32", 1, 4)], [bytes(4)])
        return
    if case == "torchscript":
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), out)
        return
    builders = {
        "dtypes": (dtype_tensors, {}),
        "views": (views, {}),
        "megatron": (megatron, {}),
        "float32": (float32_only, {}),
        "legacy": (views, {"_use_new_zipfile_serialization": False}),
        "legacy_dtypes": (dtype_tensors, {"_use_new_zipfile_serialization": False}),
        "proto4": (views, {"pickle_protocol": 4}),
        "evil": (lambda: {"w": torch.ones(2), "payload": Evil()}, {}),
        "offset": (lambda: {"bad": OffsetOutOfRange()}, {}),
    }
    build, kwargs = builders[case]
    obj = build()
    torch.save(obj, out, **kwargs)
    if expect:
        write_expect(obj, expect)


# ---- corrupt variants of zip checkpoints ----------------------------------------------------

def corrupt(kind, src, dst):
    with zipfile.ZipFile(src) as zin:
        records = [(i.filename, zin.read(i.filename)) for i in zin.infolist()]
    prefix = records[0][0].split("/")[0] + "/"
    out = []
    for name, data in records:
        rec = name[len(prefix):]
        if kind == "short" and rec == "data/0":
            data = data[:-4]
        elif kind == "badtype" and rec == "data.pkl":
            data = data.replace(b"FloatStorage", b"FlaotStorage")
        elif kind == "badversion" and rec == "version":
            data = b"11\n"
        elif kind == "missing" and rec == "data/1":
            continue
        elif kind == "bigendian" and rec.startswith("data/"):
            data = b"".join(data[i:i + 4][::-1] for i in range(0, len(data), 4))
        out.append((name, data))
    if kind == "bigendian":
        out.insert(1, (prefix + "byteorder", b"big"))
    method = zipfile.ZIP_DEFLATED if kind == "deflate" else zipfile.ZIP_STORED
    with zipfile.ZipFile(dst, "w", method) as z:
        for name, data in out:
            z.writestr(name, data)


# ---- comparing two checkpoints through torch.load -------------------------------------------

class Mismatch(Exception):
    pass


def same(a, b, path, shared):
    if type(a) is not type(b):
        raise Mismatch(f"{path}: {type(a).__name__} vs {type(b).__name__}")
    if isinstance(a, torch.Tensor):
        for what in ("dtype", "shape", "requires_grad"):
            if getattr(a, what) != getattr(b, what):
                raise Mismatch(f"{path}: {what} {getattr(a, what)} vs {getattr(b, what)}")
        if a.stride() != b.stride() or a.storage_offset() != b.storage_offset():
            raise Mismatch(f"{path}: view {a.stride()}+{a.storage_offset()} vs {b.stride()}+{b.storage_offset()}")
        if tensor_hex(a) != tensor_hex(b):
            raise Mismatch(f"{path}: tensor bytes differ")
        if a.storage().size():
            pa, pb = a.storage().data_ptr(), b.storage().data_ptr()
            if shared.setdefault(("a", pa), pb) != pb or shared.setdefault(("b", pb), pa) != pa:
                raise Mismatch(f"{path}: storage sharing differs")
        return
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            raise Mismatch(f"{path}: numpy arrays differ")
        return
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            raise Mismatch(f"{path}: keys {list(a.keys())} vs {list(b.keys())}")
        for k in a:
            same(a[k], b[k], f"{path}/{k}", shared)
        return
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            raise Mismatch(f"{path}: length {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}/{i}", shared)
        return
    if isinstance(a, argparse.Namespace):
        same(vars(a), vars(b), path, shared)
        return
    if isinstance(a, io.BytesIO):
        if a.getvalue() != b.getvalue():
            raise Mismatch(f"{path}: BytesIO contents differ")
        return
    if isinstance(a, float):
        if struct.pack("<d", a) != struct.pack("<d", b):
            raise Mismatch(f"{path}: {a!r} vs {b!r}")
        return
    if a != b:
        raise Mismatch(f"{path}: {a!r} vs {b!r}")


def compare(a_path, b_path, weights_only):
    a = torch.load(a_path, weights_only=weights_only)
    b = torch.load(b_path, weights_only=weights_only)
    try:
        same(a, b, "", {})
    except Mismatch as e:
        print(f"{a_path} and {b_path}: mismatch at {e}", file=sys.stderr)
        return 1
    return 0


CASES = ["dtypes", "views", "megatron", "float32", "legacy", "legacy_dtypes", "proto4", "evil", "offset", "v3",
         "complex32", "torchscript"]
CORRUPT = [("short", "dtypes"), ("badtype", "dtypes"), ("badversion", "dtypes"), ("missing", "dtypes"),
           ("deflate", "float32"), ("bigendian", "float32")]


def make_all(d):
    for case in CASES:
        make(case, os.path.join(d, case + ".pt"), os.path.join(d, case + ".expect"))
    for kind, src in CORRUPT:
        corrupt(kind, os.path.join(d, src + ".pt"), os.path.join(d, kind + ".pt"))


def main():
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "make-all":
        make_all(args[1])
        return 0
    if len(args) >= 2 and args[0] == "compare":
        status = 0
        for spec in args[1:]:
            parts = spec.split(",")
            status |= compare(parts[0], parts[1], parts[2:] == ["wo"])
        return status
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
