"""Helpers shared by the fixture generators: reference records and pickle global scans.

Standard library only at import time (numpy is imported by the functions that describe
arrays), so that gen_bad.py runs on any Python 3.
"""

import hashlib
import io
import json
import os
import pickletools
import platform
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def out_dir(name):
    d = os.path.join(ROOT, name)
    os.makedirs(os.path.join(d, "expected"), exist_ok=True)
    return d


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def deb_version(package):
    """The Debian package version, or None when dpkg does not know the package."""
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                           capture_output=True, text=True, check=False)
    except OSError:
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def versions(**extra):
    import numpy as np
    v = {"python": platform.python_version(), "numpy": np.__version__}
    v.update(extra)
    return v


def key_join(path, key):
    """Our naming rule: container keys joined with '/', sequence indices as decimals."""
    k = str(key)
    return k if not path else path + "/" + k


def numpy_record(name, a):
    import numpy as np
    a = np.asarray(a)
    return {
        "name": name,
        "dtype": a.dtype.str,
        "shape": list(a.shape),
        "sha256": sha256(np.ascontiguousarray(a).tobytes()),
    }


def walk_numpy(obj, path="", out=None, seen=None):
    """numpy arrays reachable through dicts, lists and tuples (objects are not entered)."""
    import numpy as np
    if out is None:
        out, seen = [], set()
    if isinstance(obj, np.ndarray):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append(numpy_record(path, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk_numpy(v, key_join(path, k), out, seen)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            walk_numpy(v, key_join(path, i), out, seen)
    return out


def pickle_globals(data):
    """(module, name) of every GLOBAL / STACK_GLOBAL in a pickle, in order, without loading it.

    STACK_GLOBAL takes its operands from the two most recent string pushes, which is how
    CPython's pickler emits them (memo fetches included)."""
    found = []
    strings = []
    memo = {}
    memo_count = 0
    last = None  # the string the previous opcode pushed, if it pushed one
    for op, arg, _pos in pickletools.genops(data):
        name = op.name
        pushed = None
        if name == "GLOBAL":
            mod, _, attr = arg.partition(" ")
            found.append((mod, attr))
        elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            pushed = arg
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = last
            pushed = last
        elif name == "MEMOIZE":
            memo[memo_count] = last
            memo_count += 1
            pushed = last
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            pushed = memo.get(arg)
        elif name == "STACK_GLOBAL":
            found.append((strings[-2], strings[-1]))
        if pushed is not None and name not in ("BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"):
            strings.append(pushed)
        last = pushed
    seen, uniq = set(), []
    for g in found:
        if g not in seen:
            seen.add(g)
            uniq.append(g)
    return [".".join(g) for g in uniq]


def zip_pickle(path):
    """The data.pkl bytes of a torch zip checkpoint."""
    with zipfile.ZipFile(path) as z:
        (name,) = [n for n in z.namelist() if n.endswith("/data.pkl")]
        return z.read(name)


def legacy_pickle(path):
    """The object pickle (the fourth stream) of a legacy torch.save file."""
    with open(path, "rb") as f:
        data = f.read()
    buf = io.BytesIO(data)
    for _ in range(3):
        for _ in pickletools.genops(buf):
            pass
    start = buf.tell()
    for _ in pickletools.genops(buf):
        pass
    return data[start:buf.tell()]


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")


def report(paths):
    for p in paths:
        print(f"{os.path.relpath(p, ROOT):45s} {os.path.getsize(p):>10d} bytes")
    sys.stdout.flush()
