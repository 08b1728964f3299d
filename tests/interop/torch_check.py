"""torch-side checks of converter output. Run with the Python that has torch.

  equal SRC OUT            torch.load both (weights_only=False; only for trusted inputs) and
                           compare everything: container types and order, tensors bit for bit
                           with dtype/shape/stride/offset, Parameter-ness, requires_grad,
                           storage sharing, Namespace attributes, BytesIO contents, numpy
                           objects, floats by bit pattern.
  weights_only PATH        torch.load(weights_only=True) must succeed.
  loads_weights_only PATH  prints yes or no.
  expected OUT JSON [NAME...]  OUT (loaded weights_only=True) holds exactly the tensors NAME...
                           of the reference JSON (all of them when none is named), bit for bit.
  without SRC OUT KEY...   torch.save SRC's top-level dict less KEY... as OUT (a derived input).
  roundtrip SRC OUT        equal SRC OUT, and when torch's weights_only loader accepts SRC it
                           must accept OUT too.
"""

import argparse
import io
import struct

import numpy as np
import torch

from common import Mismatch, check, key_join, load_expected, run_main, sha256


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def storage_id(t):
    return t.storage()._storage._cdata


class Comparer:
    def __init__(self):
        self.storage_map = {}    # source storage -> output storage
        self.storage_back = {}   # output storage -> source storage
        self.object_map = {}     # id of a source tensor -> id of its output tensor

    def tensors(self, a, b, path):
        check(type(a) is type(b), f"{path}: {type(b).__name__}, expected {type(a).__name__}")
        if id(a) in self.object_map:
            check(self.object_map[id(a)] == id(b),
                  f"{path}: the source reaches the same tensor again here, the output does not")
            return
        self.object_map[id(a)] = id(b)
        check(a.dtype == b.dtype, f"{path}: dtype {b.dtype}, expected {a.dtype}")
        check(a.shape == b.shape, f"{path}: shape {tuple(b.shape)}, expected {tuple(a.shape)}")
        check(a.stride() == b.stride(), f"{path}: stride {b.stride()}, expected {a.stride()}")
        check(a.storage_offset() == b.storage_offset(),
              f"{path}: storage offset {b.storage_offset()}, expected {a.storage_offset()}")
        check(a.requires_grad == b.requires_grad,
              f"{path}: requires_grad {b.requires_grad}, expected {a.requires_grad}")
        check(a.storage().nbytes() == b.storage().nbytes(),
              f"{path}: storage of {b.storage().nbytes()} bytes, expected {a.storage().nbytes()}")
        sa, sb = storage_id(a), storage_id(b)
        check(self.storage_map.setdefault(sa, sb) == sb,
              f"{path}: shares its storage with other tensors in the source, not in the output")
        check(self.storage_back.setdefault(sb, sa) == sa,
              f"{path}: shares a storage with an unrelated tensor in the output")
        check(tensor_bytes(a) == tensor_bytes(b), f"{path}: values differ")

    def values(self, a, b, path=""):
        where = path or "<root>"
        if isinstance(a, torch.Tensor):
            self.tensors(a, b, where)
            return
        check(type(a) is type(b), f"{where}: {type(b).__name__}, expected {type(a).__name__}")
        if isinstance(a, dict):
            check(list(a.keys()) == list(b.keys()),
                  f"{where}: keys {list(b.keys())[:8]}..., expected {list(a.keys())[:8]}...")
            for k in a:
                self.values(a[k], b[k], key_join(path, k))
            if hasattr(a, "_metadata") or hasattr(b, "_metadata"):
                self.values(getattr(a, "_metadata", None), getattr(b, "_metadata", None),
                            key_join(path, "<_metadata>"))
        elif isinstance(a, (list, tuple)):
            check(len(a) == len(b), f"{where}: length {len(b)}, expected {len(a)}")
            for i, (x, y) in enumerate(zip(a, b)):
                self.values(x, y, key_join(path, i))
        elif isinstance(a, float):
            check(struct.pack("<d", a) == struct.pack("<d", b), f"{where}: {b!r}, expected {a!r}")
        elif isinstance(a, (int, str, bytes, bytearray, set, frozenset, complex)) or a is None:
            check(a == b, f"{where}: {b!r}, expected {a!r}")
        elif isinstance(a, argparse.Namespace):
            self.values(vars(a), vars(b), key_join(path, "<Namespace>"))
        elif isinstance(a, io.BytesIO):
            check(a.getvalue() == b.getvalue(), f"{where}: BytesIO contents differ")
            check(a.tell() == b.tell(), f"{where}: BytesIO position {b.tell()}, expected {a.tell()}")
        elif isinstance(a, np.ndarray):
            check(a.dtype.str == b.dtype.str and a.shape == b.shape,
                  f"{where}: array {b.dtype.str}{b.shape}, expected {a.dtype.str}{a.shape}")
            check(a.tobytes("A") == b.tobytes("A"), f"{where}: array values differ")
        elif isinstance(a, np.generic):
            check(a.tobytes() == b.tobytes(), f"{where}: {b!r}, expected {a!r}")
        elif isinstance(a, np.random.RandomState):
            self.values(a.get_state(legacy=False), b.get_state(legacy=False), key_join(path, "<state>"))
        elif isinstance(a, (torch.dtype, torch.device, torch.Size)):
            check(a == b, f"{where}: {b!r}, expected {a!r}")
        elif hasattr(a, "__dict__"):
            self.values(vars(a), vars(b), key_join(path, f"<{type(a).__name__}>"))
        else:
            raise Mismatch(f"{where}: no rule to compare {type(a).__name__}")


def cmd_equal(src, out):
    a = torch.load(src, map_location="cpu")
    b = torch.load(out, map_location="cpu")
    Comparer().values(a, b)


def loads_weights_only(path):
    try:
        torch.load(path, map_location="cpu", weights_only=True)
        return True
    except Exception:
        return False


def cmd_weights_only(path):
    try:
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # the message is what the user would see
        raise Mismatch(f"torch.load(weights_only=True) failed on {path}: {str(e)[-300:]}")


def cmd_loads_weights_only(path):
    print("yes" if loads_weights_only(path) else "no")


def flatten(obj, path, out, seen):
    if isinstance(obj, torch.Tensor):
        if id(obj) not in seen:
            seen.add(id(obj))
            out[path] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, key_join(path, k), out, seen)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, key_join(path, i), out, seen)


def cmd_expected(out, expected_json, *names):
    exp = load_expected(expected_json)
    want = [t for t in exp["tensors"] if not names or t["name"] in names]
    got = {}
    flatten(torch.load(out, map_location="cpu", weights_only=True), "", got, set())
    check(sorted(got) == sorted(t["name"] for t in want),
          f"tensors {sorted(got)}, expected {sorted(t['name'] for t in want)}")
    for rec in want:
        t = got[rec["name"]]
        dtype = str(t.dtype).replace("torch.", "")
        check(dtype == rec["dtype"] and list(t.shape) == rec["shape"],
              f"{rec['name']}: {dtype}{list(t.shape)}, expected {rec['dtype']}{rec['shape']}")
        check(sha256(tensor_bytes(t)) == rec["sha256"], f"{rec['name']}: values differ")


def cmd_roundtrip(src, out):
    cmd_equal(src, out)
    if loads_weights_only(src):
        cmd_weights_only(out)
        print("weights_only=True loads the output")


def cmd_without(src, out, *keys):
    obj = torch.load(src, map_location="cpu")
    for k in keys:
        del obj[k]
    torch.save(obj, out)


if __name__ == "__main__":
    run_main({"equal": cmd_equal, "weights_only": cmd_weights_only,
              "loads_weights_only": cmd_loads_weights_only, "expected": cmd_expected,
              "without": cmd_without, "roundtrip": cmd_roundtrip})
