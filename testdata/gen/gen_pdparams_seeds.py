"""Writes the pdparams reader's fuzz seeds (tests/fuzz/corpora/pdparams_read/).

Run with any Python 3 that has numpy: python3 testdata/gen/gen_pdparams_seeds.py
Seeds are pickles in the byte format paddle.save writes (numpy arrays in a dict, protocol
2-5), the layouts paddle uses (name table, split parts, (name, array) pairs) and hostile
variants: wrong lengths, absurd shapes, foreign globals, deep nesting, cut streams.
"""

import os
import pickle
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED_DIR = os.path.join(ROOT, "tests", "fuzz", "corpora", "pdparams_read")


class Raw:
    """Pickles as the reduce tuple it is given, to craft any construction."""

    def __init__(self, *r):
        self.r = r

    def __reduce__(self):
        return self.r


def array(shape, typestr, data, fortran=False, state_dtype=None):
    dtype = state_dtype if state_dtype is not None else np.dtype(typestr)
    return Raw(np.core.multiarray._reconstruct, (np.ndarray, (0,), b"b"), (1, shape, dtype, fortran, data))


def small_model():
    return {
        "w": np.arange(6, dtype="f4").reshape(2, 3),
        "bf16": np.array([0x3F80, 0xBF80], dtype="u2"),
        "h": np.array([1.5], dtype="f2"),
        "flag": np.array([True, False]),
        "scalar": np.array(3.0),
        "StructuredToParameterName@@": {"w": "linear_0.w_0", "bf16": "linear_0.b_0"},
    }


def split_model(parts=("w@@.0", "w@@.1"), cut=(0, 3, 6), shape=(2, 3)):
    flat = np.arange(6, dtype="f4")
    d = {"a": np.ones(2, dtype="f4")}
    for i, p in enumerate(parts):
        d[p] = flat[cut[i]:cut[i + 1]]
    d["UnpackBigParamInfor@@"] = {"w": {"OriginShape": shape, "slices": ["w@@.0", "w@@.1"]}}
    return d


def nested(depth):
    v = np.ones(1, dtype="f4")
    for _ in range(depth):
        v = [v]
    return {"deep": v}


def seeds():
    shared = np.arange(4, dtype="i4")
    pair = Raw(tuple, (("linear_0.w_0_fp32_master_0", np.ones((2, 2), dtype="f4")),))
    yield "p4.pdparams", small_model(), 4
    yield "p3.pdparams", small_model(), 3
    yield "p2.pdparams", small_model(), 2
    yield "p5_frombuffer.pdparams", {"w": np.asfortranarray(np.arange(6, dtype="u2").reshape(2, 3))}, 5
    yield "fortran_big_endian.pdparams", {"f": np.asfortranarray(np.arange(6, dtype=">f8").reshape(2, 3))}, 4
    yield "pairs.pdopt", {"m_0": pair, "master_weights": {"w": pair}, "LR_Scheduler": {"last_epoch": 1}}, 4
    yield "split_p2.pdparams", split_model(), 2
    yield "split_missing_part.pdparams", split_model(parts=("w@@.0",), cut=(0, 3)), 2
    yield "split_wrong_size.pdparams", split_model(shape=(2, 4)), 4
    yield "memo_shared.pdparams", {"a": shared, "b": shared, "c": [shared]}, 4
    yield "length_mismatch.pdparams", {"w": array((2, 3), "f4", b"\0" * 20)}, 4
    yield "huge_shape.pdparams", {"w": array((2**40, 2**40, 0), "f4", b"")}, 4
    yield "overflow_shape.pdparams", {"w": array((2**62, 2**62), "f4", b"\0" * 4)}, 4
    yield "negative_shape.pdparams", {"w": array((-1,), "f4", b"")}, 4
    yield "many_dims.pdparams", {"w": array((1,) * 17, "f4", b"\0" * 4)}, 4
    yield "object_dtype.pdparams", {"o": np.array([1, "a"], dtype=object)}, 4
    yield "unicode_dtype.pdparams", {"s": np.array(["abc"])}, 2
    yield "data_not_bytes.pdparams", {"w": array((1,), "f4", 1.5)}, 4
    yield "dtype_not_dtype.pdparams", {"w": array((1,), "f4", b"\0" * 4, state_dtype="f4")}, 4
    yield "eval_lodtensor.pdparams", {"lod": Raw(eval, ("data", {"data": np.ones(2)}))}, 2
    yield "deep_nesting.pdparams", nested(2000), 4


def main():
    os.makedirs(SEED_DIR, exist_ok=True)
    sys.setrecursionlimit(10000)
    for name, obj, protocol in seeds():
        data = pickle.dumps(obj, protocol=protocol)
        with open(os.path.join(SEED_DIR, name), "wb") as f:
            f.write(data)
    good = pickle.dumps(small_model(), protocol=2)
    extra = {
        "truncated.pdparams": good[: len(good) // 2],
        "trailing_bytes.pdparams": good + b"garbage",
        "empty.pdparams": b"",
        "proto_only.pdparams": b"\x80\x04",
    }
    for name, data in extra.items():
        with open(os.path.join(SEED_DIR, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
