"""paddle-side checks of converter output. Run with the venv Python (paddle).

  expected OUT JSON [SKIP...]  paddle.load(OUT) holds every tensor of the reference JSON
                               (torch or paddle; except the names SKIP...) by name, dtype,
                               shape and bits (bfloat16 compared as its uint16 patterns).
                               Nested containers are flattened with our naming rule.
  equal SRC OUT                paddle.load of both gives the same structure and tensors.
  raw_equal SRC OUT            the unpickled files (plain pickle, nothing of paddle's
                               post-processing) are equal: keys and their order, name table,
                               (var_name, array) tuples, array dtypes/shapes/bytes, scalars.
  protocol OUT P               OUT starts with pickle PROTO P.
  converted OUT JSON P [SKIP...]  protocol OUT P, then expected OUT JSON SKIP...
  roundtrip SRC OUT JSON P     protocol, equal, raw_equal and expected together.
"""

import pickle
import struct
import warnings

import numpy as np

warnings.simplefilter("ignore")
import paddle  # noqa: E402

from common import (Mismatch, check, compare_record, key_join, load_expected, match_names,  # noqa: E402
                    numpy_as_reference, run_main)


def tensor_info(t):
    a = t.numpy()
    return str(t.dtype).replace("paddle.", ""), list(t.shape), np.ascontiguousarray(a).tobytes()


def flatten(obj, path, out):
    if isinstance(obj, paddle.Tensor):
        out[path] = tensor_info(obj)
    elif isinstance(obj, np.ndarray):
        out[path] = (np.dtype(obj.dtype).name, list(obj.shape), np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, key_join(path, k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, key_join(path, i), out)


def cmd_expected(out, expected_json, *skip):
    exp = load_expected(expected_json)
    want = [t for t in exp["tensors"] if t["name"] not in skip]
    arrays = [numpy_as_reference(a) for a in exp.get("numpy_arrays", [])]
    got = {}
    flatten(paddle.load(out), "", got)
    mapping = match_names(want, got, optional=arrays)
    for rec in want:
        compare_record(rec, mapping[rec["name"]], *got[mapping[rec["name"]]])
    for rec in arrays:
        if rec["name"] in got:
            compare_record(rec, rec["name"], *got[rec["name"]])
    print(f"{out}: {len(want)} tensors match")


def deep_equal(a, b, path, tensor_rule):
    where = path or "<root>"
    if tensor_rule(a, b, where):
        return
    check(type(a) is type(b), f"{where}: {type(b).__name__}, expected {type(a).__name__}")
    if isinstance(a, dict):
        check(list(a) == list(b), f"{where}: keys {list(b)[:8]}..., expected {list(a)[:8]}...")
        for k in a:
            deep_equal(a[k], b[k], key_join(path, k), tensor_rule)
    elif isinstance(a, (list, tuple)):
        check(len(a) == len(b), f"{where}: length {len(b)}, expected {len(a)}")
        for i, (x, y) in enumerate(zip(a, b)):
            deep_equal(x, y, key_join(path, i), tensor_rule)
    elif isinstance(a, float):
        check(struct.pack("<d", a) == struct.pack("<d", b), f"{where}: {b!r}, expected {a!r}")
    elif isinstance(a, (int, str, bytes)) or a is None:
        check(a == b, f"{where}: {b!r}, expected {a!r}")
    else:
        raise Mismatch(f"{where}: no rule to compare {type(a).__name__}")


def paddle_tensors(a, b, where):
    if not isinstance(a, paddle.Tensor):
        return False
    check(isinstance(b, paddle.Tensor), f"{where}: {type(b).__name__}, expected a paddle Tensor")
    ia, ib = tensor_info(a), tensor_info(b)
    check(ia[:2] == ib[:2], f"{where}: {ib[0]}{ib[1]}, expected {ia[0]}{ia[1]}")
    check(ia[2] == ib[2], f"{where}: values differ")
    return True


def numpy_arrays(a, b, where):
    if not isinstance(a, np.ndarray):
        return False
    check(isinstance(b, np.ndarray), f"{where}: {type(b).__name__}, expected an ndarray")
    check(a.dtype.str == b.dtype.str and a.shape == b.shape,
          f"{where}: {b.dtype.str}{b.shape}, expected {a.dtype.str}{a.shape}")
    check(np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), f"{where}: values differ")
    return True


def cmd_equal(src, out):
    a = paddle.load(src)
    b = paddle.load(out)
    deep_equal(a, b, "", paddle_tensors)
    print(f"{out}: equal to {src} after paddle.load")


def raw_load(path):
    with open(path, "rb") as f:
        return pickle.load(f, encoding="latin1")


def cmd_raw_equal(src, out):
    deep_equal(raw_load(src), raw_load(out), "", numpy_arrays)
    print(f"{out}: unpickles equal to {src}")


def cmd_protocol(out, protocol):
    with open(out, "rb") as f:
        head = f.read(2)
    check(head == bytes([0x80, int(protocol)]), f"{out}: starts with {head.hex()}, expected PROTO {protocol}")


def cmd_converted(out, expected_json, protocol, *skip):
    cmd_protocol(out, protocol)
    cmd_expected(out, expected_json, *skip)


def cmd_roundtrip(src, out, expected_json, protocol):
    cmd_protocol(out, protocol)
    cmd_equal(src, out)
    cmd_raw_equal(src, out)
    cmd_expected(out, expected_json)


if __name__ == "__main__":
    run_main({"expected": cmd_expected, "equal": cmd_equal, "raw_equal": cmd_raw_equal,
              "protocol": cmd_protocol, "converted": cmd_converted, "roundtrip": cmd_roundtrip})
