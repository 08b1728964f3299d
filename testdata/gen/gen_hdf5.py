#!/usr/bin/env python3
"""Regenerate the HDF5 fixtures in testdata/hdf5/ (see README_hdf5.md).

Every .h5 file is written by h5py (PyPI wheel, with its own HDF5 library); the zstd
datasets use hdf5plugin's Zstd filter (registered filter id 32015), the others only
filters built into HDF5 (deflate, shuffle, fletcher32). Next to each fixture X.h5,
expected/X.safetensors holds the tensors a reader must find in it: name (the dataset path
without the leading "/"), dtype, shape and little-endian bytes. It is written by the
`safetensors` package's own serializer (serialize_file with TensorSpec over raw bytes), so
bfloat16 and float8 values, which numpy cannot name, keep their exact bits under the
right safetensors dtype. String datasets and attributes are not tensors and are not in
the expected files.

Conventions (the ones ckptconv writes and reads):
  - bfloat16 / float8_e4m3fn / float8_e5m2: uint16 / uint8 datasets with a string
    attribute "dtype" = "bfloat16" / "float8_e4m3fn" / "float8_e5m2";
  - float16: HDF5 IEEE half, as h5py writes numpy float16;
  - bool: h5py's enum over int8 (FALSE=0, TRUE=1).

bfloat16 values are made from float32 in numpy by round-to-nearest-even on the bits (as
torch rounds); float8 datasets hold every one of the 256 bit patterns. Deterministic:
fixed seeds, no object timestamps (track_times=False on datasets, H5Pset_obj_track_times
off on groups); running it twice gives the same bytes.

    .venv/bin/python testdata/gen/gen_hdf5.py      # after scripts/install-deps.sh
"""
import os
import platform
import sys

import h5py
import hdf5plugin
import numpy as np
import safetensors
from safetensors import TensorSpec, serialize_file

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hdf5")
ZSTD_ID = 32015

# numpy dtype -> safetensors dtype name (TensorSpec spelling)
ST_NAMES = {
    "float16": "float16", "float32": "float32", "float64": "float64", "bool": "bool",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
}


def rng(seed):
    return np.random.default_rng(seed)


def randn(seed, shape, dtype=np.float32, scale=1.0):
    return (rng(seed).standard_normal(shape) * scale).astype(dtype)


def quantized(seed, shape, dtype=np.float32):
    """Normal values rounded to 1/16: realistic-looking weights that still compress."""
    return (np.round(rng(seed).standard_normal(shape) * 16) / 16).astype(dtype)


def ints(seed, shape, dtype):
    info = np.iinfo(dtype)
    a = rng(seed).integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    flat = a.reshape(-1)
    if flat.size >= 2:  # the extremes are always there
        flat[0], flat[-1] = info.min, info.max
    return a


def specials(dtype):
    """Values whose bits a converter must not change: signed zero, infinities, NaNs with a
    payload, the smallest subnormal, the largest finite value."""
    f = np.finfo(dtype)
    bits = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}[dtype]
    nan_payload = {np.float16: 0x7E01, np.float32: 0x7FA00001, np.float64: 0x7FF4000000000001}[dtype]
    neg_nan = {np.float16: 0xFE00, np.float32: 0xFFC00000, np.float64: 0xFFF8000000000000}[dtype]
    vals = np.array([0.0, -0.0, np.inf, -np.inf, f.max, -f.max, f.smallest_subnormal, 1.0, 0.0, 0.0],
                    dtype=dtype)
    vals.view(bits)[8] = nan_payload
    vals.view(bits)[9] = neg_nan
    return vals


def bf16_bits(a):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even; NaN stays quiet NaN."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


class Fixture:
    """One .h5 file and the tensors expected from it (in creation order)."""

    def __init__(self, name, **file_kw):
        self.name = name
        self.path = os.path.join(OUT, name + ".h5")
        self.expected = []  # (name, safetensors dtype, shape, little-endian bytes)
        fapl_kw = dict(file_kw)
        self.file = h5py.File(self.path, "w", **fapl_kw)

    def group(self, path, track_order=None):
        return self.file.require_group(path) if track_order is None else \
            self.file.create_group(path, track_order=track_order)

    def expect(self, name, st_dtype, array):
        a = np.asarray(array)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        self.expected.append((name, st_dtype, list(a.shape), np.ascontiguousarray(a).tobytes()))

    def dataset(self, path, data, expect=True, **kw):
        kw.setdefault("track_times", False)
        ds = self.file.create_dataset(path, data=data, **kw)
        if expect:
            self.expect(path.lstrip("/"), ST_NAMES[np.dtype(ds.dtype).newbyteorder("=").name], data)
        return ds

    def special(self, path, bits, kind, **kw):
        """bfloat16 / float8 raw bits stored as uint16 / uint8 with the "dtype" attribute."""
        kw.setdefault("track_times", False)
        attr = kw.pop("attr", None)
        ds = self.file.create_dataset(path, data=bits, **kw)
        ds.attrs["dtype"] = kind if attr is None else attr
        self.expect(path.lstrip("/"), kind, bits)
        return ds

    def close(self):
        self.file.close()
        keep, specs = [], {}
        for name, dtype, shape, data in self.expected:
            buf = np.frombuffer(data, dtype=np.uint8).copy() if data else np.zeros(1, np.uint8)
            keep.append(buf)
            specs[name] = TensorSpec(dtype=dtype, shape=shape, data_ptr=buf.ctypes.data, data_len=len(data))
        path = os.path.join(OUT, "expected", self.name + ".safetensors")
        serialize_file(specs, path, metadata={"source": self.name + ".h5"})
        os.chmod(path, 0o644)
        check_expected(self)


def check_expected(fx):
    """The expected file reads back through the safetensors package; every numeric dataset of
    the fixture (h5py's view) is in it with the same bytes."""
    with open(os.path.join(OUT, "expected", fx.name + ".safetensors"), "rb") as f:
        got = {n: (t["dtype"], t["shape"], bytes(t["data"])) for n, t in safetensors.deserialize(f.read())}
    assert len(got) == len(fx.expected), (fx.name, len(got), len(fx.expected))
    with h5py.File(fx.path, "r") as h:
        seen = []

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind in "biuf":
                seen.append(name)
                a = obj[()]
                if a.dtype.byteorder == ">":
                    a = a.astype(a.dtype.newbyteorder("<"))
                assert got[name][2] == np.ascontiguousarray(a).tobytes(), (fx.name, name)
                assert got[name][1] == list(a.shape), (fx.name, name)
        h.visititems(visit)
    assert sorted(seen) == sorted(got), (fx.name, sorted(set(seen) ^ set(got)))


def plain():
    """Contiguous datasets of every numeric type in nested groups; scalar, zero-size and
    string datasets; attributes of several kinds on the root, groups and datasets."""
    fx = Fixture("plain")
    f = fx.file
    f.attrs["framework"] = "ckptconv-fixture"                  # variable-length UTF-8 string
    f.attrs["fixed_ascii"] = np.bytes_(b"fixed-length")         # fixed-length byte string
    f.attrs["epoch"] = np.int64(7)
    f.attrs["lr"] = np.float64(3e-4)
    f.attrs["betas"] = np.array([0.9, 0.999], dtype=np.float32)
    f.attrs["shape"] = np.array([2, 3, 4], dtype=np.int32)
    f.attrs["flag"] = np.bool_(True)
    f.attrs["tags"] = ["a", "bc", "d\u00e9f"]                   # array of variable-length strings
    f.attrs["nothing"] = h5py.Empty("f4")                       # null dataspace
    fx.dataset("f32", randn(1, (4, 5)))
    fx.dataset("f16", np.concatenate([randn(2, (6,), np.float16), specials(np.float16)]))
    fx.dataset("f64", np.concatenate([randn(3, (5,), np.float64), specials(np.float64)]))
    fx.dataset("f32_specials", specials(np.float32))
    for i, t in enumerate((np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)):
        fx.dataset("ints/" + np.dtype(t).name, ints(10 + i, (3, 4), t))
    fx.dataset("bool", np.array([[True, False, True], [False, False, True]]))
    fx.dataset("scalar_f32", np.float32(2.5))
    fx.dataset("scalar_i64", np.int64(-42))
    fx.dataset("empty_f32", np.zeros((0,), np.float32))
    fx.dataset("empty_i32", np.zeros((2, 0, 3), np.int32))
    g = fx.group("model/layers/0")
    g.attrs["layer_index"] = np.int32(0)
    g.attrs["kind"] = "decoder"
    f["model"].attrs["num_layers"] = np.int64(2)
    ds = fx.dataset("model/layers/0/attn.q.weight", randn(4, (8, 8)))
    ds.attrs["units"] = "none"
    ds.attrs["scale"] = np.float32(0.125)
    ds.attrs["init"] = np.array([0.0, 0.02])
    fx.dataset("model/layers/0/mlp/w1", randn(5, (16, 8)))
    fx.dataset("model/layers/1/attn.q.weight", randn(6, (8, 8)))
    fx.dataset("model/layers/1/mlp/w1", randn(7, (16, 8)))
    fx.dataset("model/embed", randn(8, (10, 8), np.float16))
    fx.dataset("model/step", np.int64(1000))
    fx.dataset("meta/names", np.array(["alpha", "beta", "\u03b3"], dtype=h5py.string_dtype()),
               expect=False)
    fx.dataset("meta/fixed", np.array([b"abc", b"de"]), expect=False)
    fx.dataset("meta/title", "a scalar string", dtype=h5py.string_dtype(), expect=False)
    fx.close()


def chunked(name, comp):
    """Chunked datasets with filters. comp(shuffle) gives create_dataset keywords."""
    fx = Fixture(name)
    fx.dataset("shuffled", quantized(20, (16, 24)), chunks=(8, 8), **comp(True))
    fx.dataset("plain_filter", quantized(21, (16, 24)), chunks=(4, 24), **comp(False))
    fx.dataset("fletcher32", quantized(22, (10, 10)), chunks=(5, 5), fletcher32=True, **comp(True))
    fx.dataset("fletcher32_only", ints(23, (12, 7), np.int32), chunks=(5, 7), fletcher32=True)
    fx.dataset("edge_chunks", quantized(24, (20, 13)), chunks=(7, 5), **comp(True))
    fx.dataset("cube", quantized(25, (6, 10, 12), np.float64), chunks=(4, 3, 5), **comp(True))
    fx.dataset("cube_f16", quantized(26, (3, 9, 17), np.float16), chunks=(2, 4, 16), **comp(False))
    fx.dataset("ints/i64", ints(27, (33,), np.int64), chunks=(8,), **comp(True))
    fx.dataset("ints/u8", ints(28, (40, 3), np.uint8), chunks=(16, 2), **comp(False))
    fx.dataset("bool", rng(29).integers(0, 2, size=(25,)).astype(bool), chunks=(10,), **comp(False))
    fx.dataset("one_chunk", quantized(30, (5, 6)), chunks=(5, 6), **comp(True))
    fx.dataset("chunk_larger_than_shape", quantized(31, (3, 4)), chunks=(8, 8), maxshape=(None, None),
               **comp(False))
    # h5py's automatic chunking of a largish 2-D array: the chunks cut the last axis too.
    ds = fx.dataset("auto/weight", quantized(32, (32, 1000)), chunks=True, **comp(True))
    assert ds.chunks[-1] < 1000, ds.chunks
    return fx


def gzip_comp(shuffle):
    return {"compression": "gzip", "compression_opts": 4, "shuffle": shuffle}


def zstd_comp(shuffle):
    return dict(hdf5plugin.Zstd(clevel=5), shuffle=shuffle)


def chunked_gzip():
    chunked("chunked_gzip", gzip_comp).close()


def chunked_zstd():
    fx = chunked("chunked_zstd", zstd_comp)
    # zstd at its extremes, and bfloat16 / float8 through zstd
    fx.dataset("level1", quantized(40, (9, 11)), chunks=(4, 4), **hdf5plugin.Zstd(clevel=1))
    fx.dataset("level19", quantized(41, (9, 11)), chunks=(4, 4), **hdf5plugin.Zstd(clevel=19))
    fx.dataset("shuffle_level3", quantized(42, (9, 11)), chunks=(4, 4), shuffle=True,
               **hdf5plugin.Zstd(clevel=3))
    fx.special("bf16", bf16_bits(randn(43, (24, 16), scale=0.02)), "bfloat16", chunks=(8, 16),
               shuffle=True, **hdf5plugin.Zstd(clevel=3))
    fx.special("fp8_e4m3fn", np.arange(256, dtype=np.uint8).reshape(16, 16), "float8_e4m3fn",
               chunks=(6, 16), **hdf5plugin.Zstd())
    with h5py.File(fx.path, "r") as h:  # every dataset here went through filter 32015 but one
        for n in h:
            if isinstance(h[n], h5py.Dataset) and n != "fletcher32_only":
                pl = h[n].id.get_create_plist()
                assert ZSTD_ID in [pl.get_filter(i)[0] for i in range(pl.get_nfilters())], n
    fx.close()


def bf16_fp8():
    """bfloat16 and float8 by the "dtype" attribute convention, contiguous and gzip."""
    fx = Fixture("bf16_fp8")
    w = randn(50, (32, 16), scale=0.02)
    fx.special("bf16/weight", bf16_bits(w), "bfloat16")
    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.0, 3.0e38, 1e-40, 65504.0,
                     1.00390625, 1.01171875], dtype=np.float32)  # ties round to even
    fx.special("bf16/specials", bf16_bits(edge), "bfloat16")
    fx.special("bf16/scalar", bf16_bits(np.array(0.3125, np.float32)), "bfloat16")
    fx.special("bf16/empty", np.zeros((0, 4), np.uint16), "bfloat16")
    # the attribute as a fixed-length byte string (not h5py's default variable-length str)
    fx.special("bf16/fixed_attr", bf16_bits(randn(51, (5, 3))), "bfloat16", attr=np.bytes_(b"bfloat16"))
    fx.special("bf16/gzip", bf16_bits(randn(52, (20, 30), scale=0.02)), "bfloat16", chunks=(7, 16),
               compression="gzip", shuffle=True)
    every = np.arange(256, dtype=np.uint8).reshape(16, 16)
    fx.special("fp8/e4m3fn", every, "float8_e4m3fn")
    fx.special("fp8/e5m2", every[::-1].copy(), "float8_e5m2")
    fx.special("fp8/e4m3fn_gzip", rng(53).integers(0, 256, (40, 9), dtype=np.uint8), "float8_e4m3fn",
               chunks=(16, 9), compression="gzip")
    # plain uint16 / uint8 with no attribute stay integers
    fx.dataset("plain_u16", ints(54, (4, 4), np.uint16))
    fx.dataset("plain_u8", ints(55, (4, 4), np.uint8))
    fx.close()


def big_endian():
    fx = Fixture("big_endian")
    for i, t in enumerate((">f4", ">f8", ">f2", ">i2", ">i4", ">i8", ">u2", ">u4", ">u8")):
        dt = np.dtype(t)
        a = (randn(60 + i, (3, 5)) if dt.kind == "f" else ints(60 + i, (3, 5), dt.newbyteorder("=")))
        fx.dataset("be_" + dt.newbyteorder("=").name, a.astype(dt))
    fx.dataset("be_f32_specials", specials(np.float32).astype(">f4"))
    fx.dataset("be_f4_gzip", quantized(70, (12, 10)).astype(">f4"), chunks=(5, 4), compression="gzip",
               shuffle=True)
    fx.dataset("le_f32", randn(71, (2, 3)))
    fx.close()


def compact():
    """Compact layout: the data lives in the object header (h5py's low-level API)."""
    fx = Fixture("compact")
    for name, data in (("compact_f32", randn(80, (6, 7))), ("compact_i16", ints(81, (10,), np.int16)),
                       ("compact_scalar", np.float64(-1.25))):
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        dcpl.set_obj_track_times(False)
        space = h5py.h5s.create_simple(data.shape) if data.shape else h5py.h5s.create(h5py.h5s.SCALAR)
        dsid = h5py.h5d.create(fx.file.id, name.encode(), h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
        assert dsid.get_create_plist().get_layout() == h5py.h5d.COMPACT
        fx.expect(name, ST_NAMES[data.dtype.name], data)
    fx.dataset("contiguous_f32", randn(82, (3, 3)))
    fx.close()


def userblock():
    """A 512-byte user block before the HDF5 superblock, filled with text."""
    fx = Fixture("userblock", userblock_size=512)
    fx.dataset("weight", randn(90, (4, 6)))
    fx.dataset("bias", randn(91, (6,)))
    fx.dataset("gz", quantized(92, (8, 8)), chunks=(4, 4), compression="gzip")
    fx.close()
    text = b"ckptconv fixture: this file starts with a 512-byte user block\n"
    with open(fx.path, "r+b") as f:
        f.write(text + b"\0" * (512 - len(text)))
    check_expected(fx)


def unallocated():
    """Datasets created without data: reading gives the fill value."""
    fx = Fixture("unallocated")
    f = fx.file
    f.create_dataset("contiguous_default_fill", shape=(4, 5), dtype="f4", track_times=False)
    fx.expect("contiguous_default_fill", "float32", np.zeros((4, 5), np.float32))
    f.create_dataset("contiguous_fill", shape=(3, 4), dtype="f4", fillvalue=1.5, track_times=False)
    fx.expect("contiguous_fill", "float32", np.full((3, 4), 1.5, np.float32))
    f.create_dataset("chunked_fill", shape=(10, 10), dtype="i4", chunks=(4, 4), fillvalue=-7,
                     track_times=False)
    fx.expect("chunked_fill", "int32", np.full((10, 10), -7, np.int32))
    f.create_dataset("chunked_gzip_none", shape=(6, 6), dtype="f8", chunks=(3, 3), compression="gzip",
                     fillvalue=np.pi, track_times=False)
    fx.expect("chunked_gzip_none", "float64", np.full((6, 6), np.pi))
    # some chunks written, the others never allocated
    part = f.create_dataset("partial", shape=(12, 8), dtype="f4", chunks=(4, 8), compression="gzip",
                            fillvalue=-1.0, track_times=False)
    rows = quantized(100, (4, 8))
    part[4:8] = rows
    full = np.full((12, 8), -1.0, np.float32)
    full[4:8] = rows
    fx.expect("partial", "float32", full)
    zs = f.create_dataset("partial_zstd", shape=(9, 4), dtype="f4", chunks=(3, 4), fillvalue=0.5,
                          track_times=False, **hdf5plugin.Zstd())
    zrows = quantized(101, (3, 4))
    zs[6:9] = zrows
    zfull = np.full((9, 4), 0.5, np.float32)
    zfull[6:9] = zrows
    fx.expect("partial_zstd", "float32", zfull)
    fx.close()


def keras():
    """Keras 2 .h5 naming: model_weights/<layer>/<layer>/kernel:0, with Keras's attributes."""
    fx = Fixture("keras")
    f = fx.file
    f.attrs["keras_version"] = "2.15.0"
    f.attrs["backend"] = "tensorflow"
    f.attrs["model_config"] = ('{"class_name": "Sequential", "config": {"name": "sequential", "layers": '
                               '[{"class_name": "Dense", "config": {"name": "dense", "units": 16}}, '
                               '{"class_name": "Dense", "config": {"name": "dense_1", "units": 4}}]}}')
    mw = fx.group("model_weights")
    mw.attrs["layer_names"] = np.array([b"dense", b"dense_1"])
    mw.attrs["backend"] = b"tensorflow"
    mw.attrs["keras_version"] = b"2.15.0"
    for layer, (fan_in, units) in (("dense", (8, 16)), ("dense_1", (16, 4))):
        g = fx.group(f"model_weights/{layer}")
        g.attrs["weight_names"] = np.array([f"{layer}/kernel:0".encode(), f"{layer}/bias:0".encode()])
        seed = 110 if layer == "dense" else 112
        fx.dataset(f"model_weights/{layer}/{layer}/kernel:0", randn(seed, (fan_in, units), scale=0.3))
        fx.dataset(f"model_weights/{layer}/{layer}/bias:0", randn(seed + 1, (units,), scale=0.01))
    ow = fx.group("optimizer_weights")
    ow.attrs["weight_names"] = np.array([b"Adam/iter:0", b"Adam/dense/kernel/m:0", b"Adam/dense/kernel/v:0"])
    fx.dataset("optimizer_weights/Adam/iter:0", np.int64(25))
    fx.dataset("optimizer_weights/Adam/dense/kernel/m:0", randn(114, (8, 16), scale=1e-3))
    fx.dataset("optimizer_weights/Adam/dense/kernel/v:0", np.abs(randn(115, (8, 16), scale=1e-6)))
    fx.close()


def many_links():
    """A group of 100 datasets in creation order (track_order), not in name order: past 8
    links, HDF5 keeps them in dense storage (fractal heap + B-tree v2)."""
    fx = Fixture("many_links")
    g = fx.group("layers", track_order=True)
    for i in range(100):
        fx.dataset(f"layers/{(i * 7919) % 1000:04d}.w", np.arange(i % 5 + 1, dtype=np.float32) + i)
    assert len(g) == 100
    fx.close()


def libver_v110():
    """libver=('v110', 'v110'): the HDF5 1.10 file format throughout (superblock v3, object
    header v2, the 1.10 chunk indexes: single chunk, fixed array, extensible array, v2 B-tree,
    chosen by maxshape). Not 'latest': with h5py's HDF5 2.0 that writes layout messages that
    HDF5 1.10 (Debian 12's libhdf5) cannot decode."""
    fx = Fixture("libver_v110", libver=("v110", "v110"))
    fx.dataset("contiguous", randn(120, (4, 4)))
    fx.dataset("single_chunk", quantized(121, (6, 6)), chunks=(6, 6), compression="gzip")
    fx.dataset("fixed_array", quantized(122, (10, 12)), chunks=(4, 5), compression="gzip", shuffle=True)
    fx.dataset("extensible_array", quantized(123, (9, 8)), chunks=(4, 8), maxshape=(None, 8),
               compression="gzip")
    fx.dataset("btree_v2", quantized(124, (7, 9)), chunks=(3, 4), maxshape=(None, None),
               **hdf5plugin.Zstd())
    fx.dataset("deep/er/group/f16", randn(125, (5,), np.float16))
    fx.special("bf16", bf16_bits(randn(126, (3, 8))), "bfloat16")
    fx.close()


def write_versions():
    with open(os.path.join(OUT, "VERSIONS.txt"), "w", encoding="utf-8") as f:
        f.write(f"h5py {h5py.__version__}\n")
        f.write(f"hdf5 {h5py.version.hdf5_version} (bundled with h5py)\n")
        f.write(f"hdf5plugin {hdf5plugin.version}\n")
        f.write(f"safetensors {safetensors.__version__}\n")
        f.write(f"numpy {np.__version__}\n")
        f.write(f"python {platform.python_version()}\n")


def main():
    if not h5py.h5z.filter_avail(ZSTD_ID):
        sys.exit("hdf5plugin did not register the zstd filter (32015)")
    os.makedirs(os.path.join(OUT, "expected"), exist_ok=True)
    for gen in (plain, chunked_gzip, chunked_zstd, bf16_fp8, big_endian, compact, userblock,
                unallocated, keras, many_links, libver_v110):
        gen()
    write_versions()
    total = 0
    for root, _, files in os.walk(OUT):
        for n in sorted(files):
            total += os.path.getsize(os.path.join(root, n))
    print(f"{OUT}: {total} bytes in all")


if __name__ == "__main__":
    main()
