"""Shared by the interop checkers: reference data, naming rule, hashing, failure reporting.

Standard library only; every checker imports the framework it needs itself.
"""

import contextlib
import hashlib
import io
import json
import os
import sys
import traceback


class Mismatch(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Mismatch(msg)


def run_batch(commands, path):
    """Runs one check per line of `path` (case name, command, arguments; tab-separated) in this
    one process, so that the framework is imported once. Prints ok/FAIL per case and a final
    `BATCH <passed> <failed>` line for lib.sh."""
    passed = failed = 0
    with open(path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n").split("\t") for ln in f if ln.strip()]
    for name, cmd, *args in lines:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                commands[cmd](*args)
            passed += 1
            print(f"ok   {name}")
        except Exception as e:  # every failure is reported against its case, then we go on
            failed += 1
            print(f"FAIL {name}")
            detail = str(e) if isinstance(e, Mismatch) else traceback.format_exc(limit=-3)
            for ln in (out.getvalue() + detail).splitlines()[-30:]:
                print(f"     | {ln}")
        sys.stdout.flush()
    print(f"BATCH {passed} {failed}")


def run_main(commands):
    """argv[1] names a command in `commands` (or `batch FILE`); a Mismatch exits 1 with its
    message."""
    if len(sys.argv) == 3 and sys.argv[1] == "batch":
        run_batch(commands, sys.argv[2])
        return
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: {os.path.basename(sys.argv[0])} {{{'|'.join(commands)}|batch FILE}} ARGS...")
    try:
        commands[sys.argv[1]](*sys.argv[2:])
    except Mismatch as e:
        print(f"MISMATCH: {e}", file=sys.stderr)
        sys.exit(1)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def numpy_as_reference(rec):
    """A reference record as numpy names its dtype (bfloat16 arrays are stored as uint16)."""
    import numpy as np
    r = dict(rec)
    r["dtype"] = np.dtype(rec.get("numpy_dtype", rec["dtype"])).name
    return r


def load_expected(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def key_join(path, key):
    k = str(key)
    return k if not path else path + "/" + k


def name_candidates(rec):
    """Names under which a converter may legitimately publish an expected tensor: our key path,
    and for paddle (var_name, array) tuples the var name or the path without the tuple index."""
    names = [rec["name"]]
    if rec["name"].endswith("/1"):
        names.append(rec["name"][:-2])
    if rec.get("paddle_name") and rec["paddle_name"] not in names:
        names.append(rec["paddle_name"])
    return names


def match_names(expected, actual_names, optional=()):
    """Maps every expected record to exactly one actual name; every actual name must be used,
    except names listed in `optional` (records that may or may not be published)."""
    actual = set(actual_names)
    mapping = {}
    for rec in expected:
        hits = [n for n in name_candidates(rec) if n in actual]
        check(len(hits) == 1, f"tensor {rec['name']}: expected exactly one of {name_candidates(rec)} "
                              f"in the output, found {hits}")
        mapping[rec["name"]] = hits[0]
    used = set(mapping.values())
    opt = {n for rec in optional for n in name_candidates(rec)}
    extra = sorted(actual - used - opt)
    check(not extra, f"unexpected tensors in the output: {extra[:10]}")
    return mapping


def compare_record(rec, name, dtype, shape, raw):
    check(dtype == rec["dtype"], f"{name}: dtype {dtype}, expected {rec['dtype']}")
    check(list(shape) == list(rec["shape"]), f"{name}: shape {list(shape)}, expected {rec['shape']}")
    check(sha256(raw) == rec["sha256"], f"{name}: bytes differ from the source")
