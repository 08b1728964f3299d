"""Writes testdata/torch2/*.pt with the real torch.save of a modern torch (2.x, numpy 2.x).

Run with a Python that has torch >= 2.6 and numpy >= 2: python testdata/gen/gen_torch2.py
Every fixture gets testdata/torch2/expected/<name>.json in the format of
testdata/torch/expected/*.json (see README.md), plus `zip_records` (name, data offset, size),
`loads_weights_only` (whether torch.load's default weights_only=True loader accepts the
file) and, for numpy2.pt, `numpy_scalars`.
"""

import collections
import os
import sys
import zipfile

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_common as gc  # noqa: E402

OUT = gc.out_dir("torch2")

# dtypes whose bytes numpy cannot show directly are hashed through an integer view of equal width
INT_VIEW = {
    torch.bfloat16: torch.int16,
    torch.float8_e4m3fn: torch.uint8,
    torch.float8_e5m2: torch.uint8,
    torch.uint16: torch.int16,
    torch.uint32: torch.int32,
    torch.uint64: torch.int64,
}


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype in INT_VIEW:
        t = t.view(INT_VIEW[t.dtype])
    return t.numpy().tobytes()


class Walker:
    """Tensors (first key path wins for an object reached twice), numpy arrays and scalars."""

    def __init__(self):
        self.tensors = []
        self.arrays = []
        self.scalars = []
        self.seen = set()
        self.storages = {}

    def walk(self, obj, path=""):
        if isinstance(obj, torch.Tensor):
            if id(obj) not in self.seen:
                self.seen.add(id(obj))
                self.tensors.append(self.record(path, obj))
        elif isinstance(obj, np.ndarray):
            if id(obj) not in self.seen:
                self.seen.add(id(obj))
                self.arrays.append(gc.numpy_record(path, obj))
        elif isinstance(obj, np.generic):
            self.scalars.append({"name": path, "dtype": obj.dtype.str,
                                 "sha256": gc.sha256(obj.tobytes())})
        elif isinstance(obj, dict):
            for k, v in obj.items():
                self.walk(v, gc.key_join(path, k))
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                self.walk(v, gc.key_join(path, i))

    def record(self, name, t):
        st = t.untyped_storage()
        sid = self.storages.setdefault(st._cdata, len(self.storages))
        return {
            "name": name,
            "dtype": dtype_name(t.dtype),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "storage_offset": t.storage_offset(),
            "storage": sid,
            "storage_nbytes": st.nbytes(),
            "requires_grad": bool(t.requires_grad),
            "parameter": isinstance(t, nn.Parameter),
            "sha256": gc.sha256(tensor_bytes(t)),
        }


def zip_records(path):
    """Each record's name (archive prefix removed), the offset of its data and its size."""
    out = []
    with open(path, "rb") as f:
        raw = f.read()
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            h = info.header_offset
            name_len = int.from_bytes(raw[h + 26:h + 28], "little")
            extra_len = int.from_bytes(raw[h + 28:h + 30], "little")
            out.append({"name": info.filename.split("/", 1)[1],
                        "offset": h + 30 + name_len + extra_len,
                        "size": info.file_size, "crc32": info.CRC})
    return out


def data_pkl(path):
    """data.pkl read by offset, so that a file written without CRC-32 (no_crc.pt) works too."""
    (rec,) = [r for r in zip_records(path) if r["name"] == "data.pkl"]
    with open(path, "rb") as f:
        f.seek(rec["offset"])
        return f.read(rec["size"])


def loads_weights_only(path):
    try:
        torch.load(path)
        return True
    except Exception:  # the weights_only unpickler refuses with several exception types
        return False


def save(obj, name, protocol=2, load_back=True, extra=None, **kwargs):
    path = os.path.join(OUT, name)
    torch.save(obj, path, pickle_protocol=protocol, **kwargs)
    loaded = torch.load(path, map_location="cpu", weights_only=False) if load_back else obj
    w = Walker()
    w.walk(loaded)
    exp = {
        "file": name,
        "format": "torch-zip",
        "pickle_protocol": protocol,
        "versions": gc.versions(torch=torch.__version__),
        "top_keys": [str(k) for k in loaded] if isinstance(loaded, dict) else None,
        "tensors": w.tensors,
        "numpy_arrays": w.arrays,
        "globals": gc.pickle_globals(data_pkl(path)),
        "loads_weights_only": loads_weights_only(path) if load_back else False,
        "zip_records": zip_records(path),
    }
    if w.scalars:
        exp["numpy_scalars"] = w.scalars
    if extra:
        exp.update(extra)
    gc.write_json(os.path.join(OUT, "expected", name.rsplit(".", 1)[0] + ".json"), exp)
    return path


def bits(values, dtype):
    return torch.tensor(values, dtype=torch.uint8).view(dtype)


def gen_fp8():
    # e4m3fn: no inf; 0x7F/0xFF are NaN, 0x7E = 448 is the max, 0x01 = 2^-9 the smallest denormal
    e4m3 = bits([0x00, 0x80, 0x38, 0xB8, 0x7F, 0xFF, 0x7E, 0xFE, 0x01, 0x07, 0x08, 0x81,
                 0x3C, 0x44, 0x1A, 0x55], torch.float8_e4m3fn)
    # e5m2: 0x7C = inf, 0x7D..0x7F NaN, 0x7B = 57344 the max, 0x01 = 2^-16 the smallest denormal
    e5m2 = bits([0x00, 0x80, 0x3C, 0xBC, 0x7C, 0xFC, 0x7D, 0x7F, 0x7B, 0xFB, 0x01, 0x03,
                 0x04, 0x83, 0x42, 0x2A], torch.float8_e5m2)
    base = e4m3.reshape(4, 4)
    obj = {
        "e4m3fn": base,
        "e5m2": e5m2.reshape(2, 8),
        "e4m3fn_view": base[1:, 2:],
        "e5m2_from_f32": torch.tensor([0.1, -3.0, 1e5, 1e-6, float("nan")]).to(torch.float8_e5m2),
        "e4m3fn_scalar": torch.tensor(1.75).to(torch.float8_e4m3fn),
    }
    assert torch.isnan(base.float()[1, 0]) and base.float()[1, 2] == 448
    return save(obj, "fp8.pt")


def gen_unsigned():
    u16 = torch.tensor([0, 1, 0x7FFF, 0x8000, 0xFFFF], dtype=torch.uint16)
    u32 = torch.tensor([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], dtype=torch.uint32)
    u64 = torch.tensor([0, 1, 2**63 - 1, -2**63, -1], dtype=torch.int64).view(torch.uint64)
    m = torch.arange(12, dtype=torch.int32).view(torch.uint32).reshape(3, 4)
    return save({"u16": u16, "u32": u32, "u64": u64, "u32_matrix": m,
                 "u32_column": m[:, 1], "u64_tail": u64[3:]}, "unsigned.pt")


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3).to(torch.bfloat16)
        self.proj = nn.Linear(3, 2, bias=False).to(torch.float16)
        self.norm = nn.LayerNorm(2)
        self.bn = nn.BatchNorm1d(2)
        self.register_buffer("scale", torch.tensor([0.5, 2.0]))
        self.register_buffer("mask", torch.ones(2, dtype=torch.bfloat16))


def gen_state_dict():
    torch.manual_seed(2)
    m = Tiny()
    m.bn.running_mean.uniform_()
    m.bn.num_batches_tracked.fill_(3)
    sd = m.state_dict()
    assert isinstance(sd, collections.OrderedDict) and hasattr(sd, "_metadata")
    return save(sd, "state_dict.pt")


def gen_views():
    t = torch.arange(24, dtype=torch.float32)
    m = t.view(4, 6)
    b = torch.arange(16, dtype=torch.bfloat16)
    obj = {
        "base": t,
        "rows": m[1:3],
        "column": m[:, 4],
        "transposed": m.t(),
        "strided": m[::2, 1::2],
        "element": m[3, 5],
        "alias": t,
        "cube": t.view(2, 3, 4).permute(2, 0, 1),
        "expanded": torch.arange(3, dtype=torch.int64).unsqueeze(1).expand(3, 5),
        "bf16_tail": b[10:],
        "bf16_base": b,
        "list": [m[2], (m[0, 1:4],)],
    }
    return save(obj, "views.pt")


def gen_numpy2():
    rng = np.random.default_rng(7)
    obj = {
        "weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "array_f32": rng.standard_normal((2, 3)).astype(np.float32),
        "array_i64": np.arange(5, dtype=np.int64),
        "array_bool": np.array([True, False]),
        "array_fortran": np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
        "scalar_f64": np.float64(0.25),
        "scalar_i32": np.int32(-7),
        "scalar_bool": np.bool_(True),
        "nested": {"list": [np.float32(1.5), np.zeros(2, dtype=np.uint8)]},
        "dtype": np.dtype("float16"),
    }
    path = save(obj, "numpy2.pt")
    assert any(g.startswith("numpy._core.") for g in gc.pickle_globals(data_pkl(path)))
    return path


def gen_params():
    torch.manual_seed(3)
    obj = {
        "weight": nn.Parameter(torch.randn(3, 4)),
        "frozen": nn.Parameter(torch.randn(4), requires_grad=False),
        "bf16_param": nn.Parameter(torch.randn(2, 3).to(torch.bfloat16)),
        "leaf_grad": torch.randn(2).requires_grad_(True),
        "nested": {
            "list": [nn.Parameter(torch.ones(2)), (torch.arange(3), 7, 2.5, "s", None)],
            "tuple": (torch.zeros(1, dtype=torch.float16), [torch.full((2,), -3, dtype=torch.int8)]),
            "empty": [],
        },
        "step": 11,
        "name": "params \u00e9",
        "flags": (True, False),
        5: "int key",
    }
    return save(obj, "params.pt")


def gen_proto4():
    torch.manual_seed(4)
    w = torch.randn(4, 4)
    return save({
        "weight": w,
        "weight_t": w.t(),
        "half": torch.randn(3).half(),
        "fp8": torch.randn(4).to(torch.float8_e4m3fn),
        "u16": torch.tensor([1, 65535], dtype=torch.uint16),
        "meta": {"name": "proto4", "long": "y" * 300, "raw": b"\x00\xff bytes",
                 "set": {1, 2}, "tuple": (1, 2.5, None)},
    }, "proto4.pt", protocol=4)


def gen_no_crc():
    torch.manual_seed(6)
    torch.serialization.set_crc32_options(False)
    try:
        return save({"a": torch.randn(5), "b": torch.arange(4, dtype=torch.int16)}, "no_crc.pt")
    finally:
        torch.serialization.set_crc32_options(True)


def gen_no_byteorder():
    return save({"a": torch.arange(3, dtype=torch.float64)}, "no_byteorder.pt",
                _disable_byteorder_record=True)


def gen_mmap_aligned():
    torch.manual_seed(8)
    sd = collections.OrderedDict()
    for i in range(5):
        sd[f"layer.{i}.w"] = torch.randn(3 + i, 5)
    sd["odd"] = torch.arange(7, dtype=torch.int8)
    path = save(sd, "mmap_aligned.pt")
    recs = {r["name"]: r for r in zip_records(path)}
    for need in ("data.pkl", ".format_version", ".storage_alignment", "byteorder", "version",
                 ".data/serialization_id"):
        assert need in recs, need
    for n, r in recs.items():
        assert r["offset"] % 64 == 0, (n, r)
    return path


class SystemCall:
    """Pickles as a call of os.system; pickling never runs it, only unpickling would."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def gen_unsafe():
    torch.manual_seed(5)
    obj = {"model": collections.OrderedDict(weight=torch.randn(2, 2)),
           "extra": {"hook": SystemCall()}}
    bad = f"{os.system.__module__}.{os.system.__name__}"
    return save(obj, "unsafe.pt", load_back=False,
                extra={"unsafe_globals": [{"global": bad, "path": "extra/hook"}]})


def main():
    paths = [gen_fp8(), gen_unsigned(), gen_state_dict(), gen_views(), gen_numpy2(), gen_params(),
             gen_proto4(), gen_no_crc(), gen_no_byteorder(), gen_mmap_aligned(), gen_unsafe()]
    print("torch", torch.__version__, "numpy", np.__version__, "python", sys.version.split()[0])
    gc.report(paths)


if __name__ == "__main__":
    main()
