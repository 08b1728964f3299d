"""Manual interop check against a modern torch (2.6 or newer; not run by ctest, whose torch is 1.13).

usage: python tests/interop/torch2_check.py CKPTCONV

For every testdata/torch2/*.pt fixture (see testdata/gen/README_torch2.md):
  - `ckptconv convert F out.pt`, then torch.load(out.pt) with the default loader
    (weights_only=True) when torch loads F that way, else weights_only=False (the fixtures are
    ours), once plainly and once with mmap=True. Every tensor must equal the input's bit for
    bit with the same dtype, shape, stride, storage offset, requires_grad, Parameter-ness and
    storage sharing; every other object must be equal (same container types and key order,
    OrderedDict _metadata, floats by bit pattern, numpy arrays and scalars by dtype and bytes).
  - `ckptconv convert F out.safetensors`, loaded with safetensors.torch.load_file (when
    installed): each tensor equals the input's, made contiguous.
  - unsafe.pt: convert must refuse; with --drop-unknown-objects the output must load with
    weights_only=True and hold the tensors only, as a flat name -> tensor dict.
Prints one ok/FAIL line per check and exits 1 if any failed.
"""

import collections
import glob
import os
import struct
import subprocess
import sys
import tempfile
import traceback
import zipfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "testdata", "torch2")

INT_VIEW = {
    torch.bfloat16: torch.int16,
    torch.float8_e4m3fn: torch.uint8,
    torch.float8_e5m2: torch.uint8,
    torch.uint16: torch.int16,
    torch.uint32: torch.int32,
    torch.uint64: torch.int64,
}


class Mismatch(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Mismatch(msg)


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype in INT_VIEW:
        t = t.view(INT_VIEW[t.dtype])
    return t.numpy().tobytes()


def join(path, key):
    return str(key) if not path else f"{path}/{key}"


class Comparer:
    """Deep equality of two loaded objects, tensors bit for bit, views and sharing included."""

    def __init__(self, views=True):
        self.views = views
        self.storage_map = {}

    def tensor(self, a, b, path):
        check(type(a) is type(b), f"{path}: type {type(b).__name__}, expected {type(a).__name__}")
        check(a.dtype == b.dtype, f"{path}: dtype {b.dtype}, expected {a.dtype}")
        check(a.shape == b.shape, f"{path}: shape {tuple(b.shape)}, expected {tuple(a.shape)}")
        check(a.requires_grad == b.requires_grad, f"{path}: requires_grad {b.requires_grad}")
        check(tensor_bytes(a) == tensor_bytes(b), f"{path}: tensor bytes differ")
        if not self.views:
            return
        check(a.stride() == b.stride(), f"{path}: stride {b.stride()}, expected {a.stride()}")
        check(a.storage_offset() == b.storage_offset(),
              f"{path}: storage offset {b.storage_offset()}, expected {a.storage_offset()}")
        sa, sb = a.untyped_storage(), b.untyped_storage()
        check(sa.nbytes() == sb.nbytes(), f"{path}: storage nbytes {sb.nbytes()}, expected {sa.nbytes()}")
        prev = self.storage_map.setdefault(sa._cdata, sb._cdata)
        check(prev == sb._cdata, f"{path}: storage sharing differs from the input")

    def equal(self, a, b, path=""):
        if isinstance(a, torch.Tensor):
            check(isinstance(b, torch.Tensor), f"{path}: {type(b).__name__}, expected a tensor")
            self.tensor(a, b, path)
            return
        check(type(a) is type(b), f"{path}: type {type(b).__name__}, expected {type(a).__name__}")
        if isinstance(a, dict):
            check(list(a) == list(b), f"{path}: keys {list(b)}, expected {list(a)}")
            check(getattr(a, "_metadata", None) == getattr(b, "_metadata", None),
                  f"{path}: _metadata differs")
            for k in a:
                self.equal(a[k], b[k], join(path, k))
        elif isinstance(a, (list, tuple)):
            check(len(a) == len(b), f"{path}: length {len(b)}, expected {len(a)}")
            for i, (x, y) in enumerate(zip(a, b)):
                self.equal(x, y, join(path, i))
        elif isinstance(a, float):
            check(struct.pack("<d", a) == struct.pack("<d", b), f"{path}: {b!r}, expected {a!r}")
        elif isinstance(a, np.ndarray):
            check(a.dtype == b.dtype and a.shape == b.shape and a.tobytes("A") == b.tobytes("A")
                  and a.flags.f_contiguous == b.flags.f_contiguous, f"{path}: numpy array differs")
        elif isinstance(a, np.generic):
            check(a.dtype == b.dtype and a.tobytes() == b.tobytes(), f"{path}: numpy scalar differs")
        else:
            check(a == b, f"{path}: {b!r}, expected {a!r}")


def ckptconv(binary, *args):
    return subprocess.run([binary, *args, "-q", "--force"], capture_output=True, text=True)


def weights_only_ok(path):
    try:
        torch.load(path)
        return True
    except Exception:  # the weights_only unpickler refuses with several exception types
        return False


def record_alignment(path):
    """Records of a zip whose data does not start on a 64-byte boundary (what torch writes)."""
    raw = open(path, "rb").read()
    bad = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            h = info.header_offset
            off = h + 30 + int.from_bytes(raw[h + 26:h + 28], "little") + \
                int.from_bytes(raw[h + 28:h + 30], "little")
            if off % 64:
                bad.append(info.filename)
    return bad


def check_pt(binary, src, tmp):
    out = os.path.join(tmp, "out.pt")
    r = ckptconv(binary, "convert", src, out)
    check(r.returncode == 0, f"convert to .pt failed (exit {r.returncode}): {r.stderr.strip()}")
    ref = torch.load(src, weights_only=False)
    src_wo = weights_only_ok(src)
    notes = []
    if src_wo:
        try:
            torch.load(out)
        except Exception as e:
            raise Mismatch(f"input loads with weights_only=True but output does not: "
                           f"{type(e).__name__}: {str(e).splitlines()[0]}")
    for mmap in (False, True):
        got = torch.load(out, weights_only=src_wo, mmap=mmap)
        Comparer().equal(ref, got)
    bad = record_alignment(out)
    notes.append(f"records not 64-byte aligned: {bad}" if bad else "records 64-byte aligned")
    if src_wo:
        notes.append("default loader")
    else:
        notes.append("weights_only=False (the input needs it too); the output "
                     + ("loads" if weights_only_ok(out) else "does not load") + " with the default loader")
    return "; ".join(notes)


def check_safetensors(binary, src, tmp):
    try:
        from safetensors.torch import load_file
    except ImportError:
        return "skipped: safetensors not installed"
    out = os.path.join(tmp, "out.safetensors")
    r = ckptconv(binary, "convert", src, out)
    check(r.returncode == 0, f"convert to .safetensors failed (exit {r.returncode}): {r.stderr.strip()}")
    got = load_file(out)
    ref = torch.load(src, weights_only=False)
    want = collections.OrderedDict()

    def walk(obj, path):
        if isinstance(obj, torch.Tensor):
            want.setdefault(id(obj), (path, obj))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, join(path, k))
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, join(path, i))

    walk(ref, "")
    names = {p: t for p, t in want.values()}
    check(sorted(names) == sorted(got), f"names {sorted(got)}, expected {sorted(names)}")
    cmp = Comparer(views=False)
    for n, t in names.items():
        cmp.tensor(t.detach().contiguous(), got[n], n)
    return f"{len(names)} tensors"


def check_unsafe(binary, src, tmp):
    out = os.path.join(tmp, "out.pt")
    r = ckptconv(binary, "convert", src, out)
    check(r.returncode != 0 and "posix.system" in r.stderr,
          f"convert did not refuse naming posix.system (exit {r.returncode}): {r.stderr.strip()}")
    r = ckptconv(binary, "convert", src, out, "--drop-unknown-objects")
    check(r.returncode == 0, f"--drop-unknown-objects failed: {r.stderr.strip()}")
    got = torch.load(out)
    check(list(got) == ["model/weight"] and isinstance(got["model/weight"], torch.Tensor),
          f"expected the flat tensor dict {{'model/weight'}}, got keys {list(got)}")
    return "refused; --drop-unknown-objects output loads with weights_only=True"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    failed = 0
    for src in sorted(glob.glob(os.path.join(FIXTURES, "*.pt"))):
        base = os.path.basename(src)
        checks = [("unsafe", check_unsafe)] if base == "unsafe.pt" else \
            [("pt", check_pt), ("safetensors", check_safetensors)]
        for label, fn in checks:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    info = fn(binary, src, tmp)
                    print(f"ok   {base} {label}: {info}")
                except Exception as e:  # report every failure, then go on
                    failed += 1
                    msg = str(e) if isinstance(e, Mismatch) else traceback.format_exc(limit=-2)
                    print(f"FAIL {base} {label}: {msg}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
