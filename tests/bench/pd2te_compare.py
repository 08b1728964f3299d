"""Checks that two pd2te output directories hold the same tensors: for every
`model_state*.pdparams` (the same file names on both sides), the same tensor names with equal
dtype, shape and full SHA-256 of the bytes. Key order may differ and is only reported.

Run with any Python that has numpy: pd2te_compare.py DIR_A DIR_B

Files are read by plain pickle restricted to numpy's globals (the way paddle.load unpickles,
without creating Paddle tensors) one at a time, so memory stays near one file's size.
"""

import hashlib
import os
import pickle
import sys

import numpy as np

ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("collections", "OrderedDict"),
    ("builtins", "tuple"),
    ("__builtin__", "tuple"),
    ("_codecs", "encode"),
}


class NumpyOnly(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return super().find_class(module, name)


def digest(path):
    """name -> (dtype, shape, sha256) of every ndarray in a paddle.save file, in file order."""
    with open(path, "rb") as f:
        obj = NumpyOnly(f, encoding="latin1").load()
    out = {}
    for name in list(obj):
        value = obj.pop(name)
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], np.ndarray):
            value = value[1]
        if isinstance(value, np.ndarray):
            a = np.ascontiguousarray(value)
            out[name] = (a.dtype.str, a.shape, hashlib.sha256(memoryview(a.reshape(-1).view(np.uint8))).hexdigest())
        del value
    return out


def model_files(directory):
    return sorted(f for f in os.listdir(directory) if f.startswith("model_state") and f.endswith(".pdparams"))


def main(dir_a, dir_b):
    files_a, files_b = model_files(dir_a), model_files(dir_b)
    if files_a != files_b:
        sys.exit(f"pd2te_compare: different files: {files_a} vs {files_b}")
    if not files_a:
        sys.exit(f"pd2te_compare: no model_state*.pdparams in {dir_a}")
    problems = []
    tensors = 0
    for f in files_a:
        a = digest(os.path.join(dir_a, f))
        b = digest(os.path.join(dir_b, f))
        for name in sorted(set(a) | set(b)):
            if name not in a or name not in b:
                problems.append(f"{f}: {name} only in {dir_a if name in a else dir_b}")
            elif a[name] != b[name]:
                problems.append(f"{f}: {name}: {a[name][:2]} {a[name][2][:12]} vs {b[name][:2]} {b[name][2][:12]}")
        tensors += len(a)
        if not problems and list(a) != list(b):
            print(f"pd2te_compare: {f}: same tensors, different key order")
    if problems:
        print("\n".join(problems[:20]), file=sys.stderr)
        sys.exit(f"pd2te_compare: {len(problems)} differences")
    print(f"pd2te_compare: {len(files_a)} file(s), {tensors} tensors identical (dtype, shape, sha256)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
