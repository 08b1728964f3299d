#!/usr/bin/env python3
"""Reference vectors for the element-type conversions (tests/unit/test_dtype.c) and the
tensor statistics (tests/unit/test_stats.c).

Run with a Python that has torch and ml_dtypes, e.g. Debian's python3-torch (1.13) plus
ml_dtypes 0.4 (the last to work with Debian's numpy 1.24) in a venv made with
--system-site-packages (`pip install --no-deps ml_dtypes==0.4.1`):

    python3 testdata/gen/gen_dtype_vectors.py [OUTDIR]     (default: testdata/vectors)

Conversions are done by torch's Tensor.to() on contiguous CPU tensors with one thread
(torch 1.13's float64 -> bfloat16 kernel treats NaN differently in the last n % 16
elements, so every array is padded to a multiple of 64 before converting; see
src/core/dtype_convert.c). torch 1.13 has no float8: float8 values come from ml_dtypes,
whose rounding and overflow are checked here against c10's rules, with c10's NaN
encodings applied (ml_dtypes writes 0x7E for an e5m2 NaN and decodes every float8 NaN
to the canonical float NaN; c10 writes 0x7F and decodes e4m3fn NaN to sign | 0x7FF00000
and e5m2 like the half whose top byte it is).

Every file is gzip (mtime 0) of little-endian binary data; `u32 N` is a count, then whole
arrays follow one after another, each N long, in the order given:

half_all.bin.gz     the 65536 half patterns h = 0..65535, in order:
                    u32 float bits of h, u16 bfloat16 bits of h
bf16_all.bin.gz     the 65536 bfloat16 patterns: u32 float bits, u16 half bits
f32_cases.bin.gz    u32 N; u32 input float bits; u16 half; u16 bfloat16; u8 e4m3fn;
                    u8 e5m2; u64 double bits; u8 int8; u8 uint8; u16 int16; u32 int32;
                    u64 int64; u8 bool
f64_cases.bin.gz    u32 N; u64 input double bits; u32 float bits; u16 half; u16 bfloat16;
                    u8 int8; u8 uint8; u16 int16; u32 int32; u64 int64; u8 bool
int_cases.bin.gz    u32 N; u64 input int64; u64 double bits; u32 float bits; u16 half;
                    u16 bfloat16; u8 int8; u8 uint8; u16 int16; u32 int32; u8 bool;
                    u32 int32 input (the int64 wrapped); u32 its float bits;
                    u16 its bfloat16; u16 its half
fp8_all.bin.gz      the 256 patterns: u32 float bits of e4m3fn v; u32 float bits of e5m2 v
stats_cases.bin.gz  u32 N; then N records: u32 case id, u32 ckpt dtype (enum value),
                    u64 element count, f64 min, max, mean, std (population, over finite
                    values), u64 count, nan, inf. numpy gives min, max and the counts; mean
                    and std are computed exactly in rational arithmetic and rounded once.
                    The data of each case is rebuilt by the test from a xorshift32 stream
                    (see stats_data below), so only the results are stored.
versions.txt        the library versions that produced the files.
"""

import gzip
import math
import os
import platform
import struct
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np
import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors")
RNG = np.random.default_rng(20240611)

# ckpt_dtype enum values (include/ckpt/dtype.h)
CKPT_F64, CKPT_F32, CKPT_F16, CKPT_BF16 = 1, 2, 3, 4
CKPT_I32 = 9


def to(values, src, dst):
    """torch conversion of a numpy array of `src` dtype, contiguous, padded to 64."""
    n = len(values)
    pad = (-n) % 64
    t = torch.from_numpy(np.concatenate([values, np.zeros(pad, dtype=values.dtype)]))
    if src is not None:
        t = t.view(src)
    out = t.to(dst)[:n].contiguous()
    if dst in (torch.float16, torch.bfloat16):
        return out.view(torch.int16).numpy().view(np.uint16)
    if dst == torch.bool:
        return out.numpy().view(np.uint8)
    return out.numpy()


def f32_from_bits(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def f64_from_bits(bits):
    return np.asarray(bits, dtype=np.uint64).view(np.float64)


def write(name, *arrays, count=None):
    data = b""
    if count is not None:
        data += struct.pack("<I", count)
    for a in arrays:
        a = np.ascontiguousarray(a)
        data += a.astype(a.dtype.newbyteorder("<")).tobytes()
    with open(os.path.join(OUT, name), "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
            g.write(data)


# ---- float8 (ml_dtypes, checked against c10's rules) ----------------------------------

E4, E5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2


def check_ml_dtypes():
    def enc(t, x):
        return int(np.array([x], dtype=np.float32).astype(t).view(np.uint8)[0])
    above = np.nextafter(np.float32(464), np.float32(np.inf))
    assert enc(E4, 448) == 0x7E and enc(E4, 464) == 0x7E, "e4m3fn: 464 is a tie that rounds to 448"
    assert enc(E4, above) == 0x7F and enc(E4, 480) == 0x7F, "e4m3fn overflow is NaN"
    assert enc(E4, np.inf) == 0x7F and enc(E4, -np.inf) == 0xFF, "e4m3fn: Inf becomes NaN with sign"
    assert enc(E5, 57344) == 0x7B and enc(E5, 61439.996) == 0x7B, "e5m2 largest finite"
    assert enc(E5, 61440) == 0x7C and enc(E5, np.inf) == 0x7C and enc(E5, -1e30) == 0xFC, "e5m2 overflow is Inf"


def fp8_encode(f32):
    """c10 encodings of float values: ml_dtypes for numbers, c10's rule for NaN."""
    with np.errstate(invalid="ignore", over="ignore"):
        e4 = f32.astype(E4).view(np.uint8).copy()
        e5 = f32.astype(E5).view(np.uint8).copy()
    bits = f32.view(np.uint32)
    nan = np.isnan(f32)
    sign = ((bits >> 24) & 0x80).astype(np.uint8)
    e4[nan] = 0x7F | sign[nan]
    e5[nan] = 0x7F | sign[nan]
    return e4, e5


def fp8_decode():
    v = np.arange(256, dtype=np.uint8)
    e4 = v.view(E4).astype(np.float32).view(np.uint32).copy()
    e5 = v.view(E5).astype(np.float32).view(np.uint32).copy()
    # e5m2 is the top byte of a half: c10 decodes it exactly as torch decodes that half.
    e5_c10 = to((v.astype(np.uint16) << 8).view(np.int16), torch.float16, torch.float32).view(np.uint32)
    finite5 = (v & 0x7F) < 0x7D
    assert np.array_equal(e5[finite5], e5_c10[finite5]), "ml_dtypes and torch disagree on e5m2 values"
    e5 = e5_c10
    nan4 = (v & 0x7F) == 0x7F
    e4[nan4] = (v[nan4].astype(np.uint32) & 0x80) << 24 | 0x7FF00000
    return e4, e5


# ---- inputs ---------------------------------------------------------------------------

NANS32 = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FC12345, 0xFFD55555, 0x7FBFFFFF,
          0x7F802000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA00000, 0x7F800100]


def ties_around(values_f32_bits, step_bits):
    """Midpoints (in float) between consecutive representable values spaced step_bits apart
    in the float bit pattern, and one float ulp on each side."""
    mids = values_f32_bits + step_bits // 2
    return np.concatenate([mids, mids - 1, mids + 1])


def f32_inputs():
    parts = []
    specials = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000] + NANS32
    parts.append(np.array(specials, dtype=np.uint32))
    # half: all subnormal ties, every 7th normal tie, top of range
    half_pos = np.arange(0, 0x7C00, dtype=np.uint32)
    half_f32 = to(half_pos.astype(np.uint16).view(np.int16), torch.float16, torch.float32).view(np.uint32)
    nxt = to((half_pos + 1).astype(np.uint16).view(np.int16), torch.float16, torch.float32).view(np.uint32)
    sel = np.concatenate([np.arange(0, 0x400), np.arange(0x400, 0x7BFF, 13), np.arange(0x7BE0, 0x7C00)])
    sel = sel[sel < 0x7BFF]
    mids = f32_from_bits(half_f32[sel]).astype(np.float64) / 2 + f32_from_bits(nxt[sel]).astype(np.float64) / 2
    mid_bits = mids.astype(np.float32).view(np.uint32)
    parts.append(np.concatenate([mid_bits, mid_bits - 1, mid_bits + 1]))
    thresholds = np.array([65504, 65519.998, 65520, 65520.004, 65535, 65536, 2.0 ** -24, 2.0 ** -25,
                           2.0 ** -26, 1.5 * 2.0 ** -25, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25,
                           448, 464, 480, 479.99997, 57344, 61440, 61439.996, 2.0 ** -9, 2.0 ** -10,
                           2.0 ** -16, 2.0 ** -17, 3 * 2.0 ** -11], dtype=np.float32).view(np.uint32)
    parts.append(np.concatenate([thresholds, thresholds - 1, thresholds + 1]))
    # bfloat16: ties of random patterns, subnormals and the top of range included
    b = np.concatenate([RNG.integers(0, 0x7F80, 1000), np.arange(0, 40), np.arange(0x7F70, 0x7F80)]).astype(np.uint32)
    parts.append(ties_around(b << 16, 0x10000))
    # float8 ties
    v = np.arange(256, dtype=np.uint8)
    for t in (E4, E5):
        vals = v.view(t).astype(np.float64)
        vals = np.unique(vals[np.isfinite(vals) & (vals >= 0)])
        mids = ((vals[:-1] + vals[1:]) / 2).astype(np.float32).view(np.uint32)
        parts.append(np.concatenate([mids, mids - 1, mids + 1]))
    # float denormals, random bit patterns, values of every magnitude
    parts.append(RNG.integers(1, 0x800000, 500).astype(np.uint32))
    parts.append(RNG.integers(0, 2 ** 32, 2000, dtype=np.uint64).astype(np.uint32))
    mags = RNG.standard_normal(1500) * 10.0 ** RNG.integers(-8, 12, 1500)
    parts.append(mags.astype(np.float32).view(np.uint32))
    # integer-conversion edge cases
    ints = np.array([0.5, -0.5, 0.99999994, -0.99999994, 1.5, -1.5, 2.5, -2.5, 127.5, 128, -128.5, -129,
                     255.5, 256, 300.7, -300.7, 32767.5, 32768, -32769, 65535, 65536, 2147483520,
                     2147483648, -2147483648, -2147483904, 3e9, -3e9, 9.2233715e18, 9.223372e18,
                     -9.223372e18, -9.2233725e18, 1.8446743e19, 1e20, -1e20, 4294967296, 4294967040],
                    dtype=np.float32).view(np.uint32)
    parts.append(np.concatenate([ints, ints ^ 0x80000000]))
    return np.concatenate(parts).astype(np.uint32)


def f64_inputs():
    parts = []
    nan64 = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF4000020000000,
             0xFFF0000100000000, 0x7FFFFFFFFFFFFFFF, 0x7FF800000000FFFF, 0xFFF7FFFFE0000000]
    parts.append(np.array([0, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000] + nan64, dtype=np.uint64))
    # double rounding: float-representable ties of half / bfloat16 nudged by far less than
    # a float ulp, so rounding straight from double would go the other way
    f = f32_from_bits(f32_inputs()).astype(np.float64)
    f = f[np.isfinite(f) & (f != 0)][:3000]
    parts.append(np.concatenate([f, f * (1 + 2.0 ** -40), f * (1 - 2.0 ** -40)]).view(np.uint64))
    parts.append(RNG.integers(0, 2 ** 64, 1000, dtype=np.uint64))
    parts.append((RNG.standard_normal(800) * 10.0 ** RNG.integers(-300, 300, 800)).view(np.uint64))
    parts.append(RNG.integers(1, 1 << 52, 200, dtype=np.uint64))  # subnormals
    ints = np.array([0.5, -0.5, 0.9999999999, -0.9999999999, 127.9, -128.9, 255.9, 300.7, -300.7,
                     2147483647.9, 2147483648.0, -2147483648.9, -2147483649.0, 2.0 ** 32 + 300,
                     -(2.0 ** 40) - 300, 2.0 ** 31 + 5, 9223372036854774784.0, 2.0 ** 63,
                     -(2.0 ** 63), -9223372036854777856.0, 2.0 ** 64, 18446744073709549568.0,
                     1e20, -1e20, 4.9e-324], dtype=np.float64)
    parts.append(np.concatenate([ints, -ints]).view(np.uint64))
    return np.concatenate(parts).astype(np.uint64)


def int_inputs():
    vals = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769, 65535, 65536,
            2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1, 2 ** 32 - 1, 2 ** 32, 2 ** 63 - 1, -2 ** 63,
            2 ** 24 + 1, 2 ** 25 + 2 ** 17 + 1, 2 ** 25 + 2 ** 17, 65504, 65519, 65520, 65535, 2049, 4097,
            2 ** 53 + 1, 2 ** 62 + 2 ** 38 + 1]
    for p in range(64):
        vals += [2 ** p - 1 if p < 63 else 2 ** 63 - 1, -(2 ** p) + 1, -(2 ** p)]
    vals = np.array(vals, dtype=np.int64)
    rnd = RNG.integers(-2 ** 63, 2 ** 63 - 1, 300, dtype=np.int64)
    small = RNG.integers(-70000, 70000, 500, dtype=np.int64)
    mid = RNG.integers(-2 ** 34, 2 ** 34, 500, dtype=np.int64)
    return np.concatenate([vals, rnd, small, mid])


# ---- statistics ---------------------------------------------------------------------------

def xorshift32(seed, n):
    out = np.empty(n, dtype=np.uint32)
    x = seed
    for i in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out[i] = x
    return out


def stats_data(case):
    """The data of each statistics case; tests/unit/test_stats.c builds the same arrays.
    u = xorshift32 stream (seed 0x9E3779B9 + case); base = float(0x3F800000 | u >> 9) - 1.5,
    uniform in [-0.5, 0.5) and exact in float."""
    n = {0: 300000, 1: 200003, 2: 150000, 3: 100000, 4: 70001, 5: 1000}[case]
    u = xorshift32(0x9E3779B9 + case, n)
    base = f32_from_bits(0x3F800000 | (u >> 9)) - np.float32(1.5)
    i = np.arange(n)
    if case == 0:    # float32 with NaN and Inf sprinkled in
        x = base.copy()
        x[i % 1000 == 17] = np.nan
        x[i % 7919 == 5] = np.inf
        x[i % 104729 == 3] = -np.inf
        return CKPT_F32, x
    if case == 1:    # bfloat16 of base * 1000, NaN every 5000th
        x = base * np.float32(1000)
        x[i % 5000 == 1] = np.nan
        return CKPT_BF16, x
    if case == 2:    # float16 of base * 200000: many values overflow to +-Inf
        return CKPT_F16, base * np.float32(200000)
    if case == 3:    # float64 with a large offset: naive sum-of-squares variance fails here
        return CKPT_F64, base.astype(np.float64) * 1e-3 + 1e8
    if case == 4:    # int32: the raw stream as signed integers
        return CKPT_I32, u.view(np.int32)
    return CKPT_F32, np.full(n, np.nan, dtype=np.float32)  # no finite values at all


def exact_mean_std(v):
    """Mean and population std in rational arithmetic, rounded once. numpy's float64
    std loses about 1e-9 (relative) on case 3, more than the library does."""
    shift = Fraction(float(v[0]))
    d = [Fraction(float(x)) - shift for x in v]
    m = sum(d) / len(d)
    var = sum((x - m) ** 2 for x in d) / len(d)
    return float(shift + m), math.sqrt(var)


def stats_cases():
    recs = b""
    for case in range(6):
        dtype, x = stats_data(case)
        if dtype == CKPT_BF16:
            x = to(x, None, torch.bfloat16).astype(np.uint32) << 16
            x = f32_from_bits(x)
        elif dtype == CKPT_F16:
            x = x.astype(np.float16)
        v = x.astype(np.float64)
        fin = v[np.isfinite(v)]
        if len(fin):
            mn, mx = fin.min(), fin.max()
            mean, std = exact_mean_std(fin)
        else:
            mn = mx = mean = std = np.nan
        recs += struct.pack("<IIQddddQQQ", case, dtype, len(x), mn, mx, mean, std, len(x),
                            int(np.isnan(v).sum()), int(np.isinf(v).sum()))
    with open(os.path.join(OUT, "stats_cases.bin.gz"), "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
            g.write(struct.pack("<I", 6) + recs)


def main():
    torch.set_num_threads(1)
    np.seterr(invalid="ignore", over="ignore")
    os.makedirs(OUT, exist_ok=True)
    check_ml_dtypes()

    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.int16)
    write("half_all.bin.gz", to(h, torch.float16, torch.float32).view(np.uint32),
          to(h, torch.float16, torch.bfloat16))
    write("bf16_all.bin.gz", to(h, torch.bfloat16, torch.float32).view(np.uint32),
          to(h, torch.bfloat16, torch.float16))

    xb = f32_inputs()
    x = f32_from_bits(xb)
    e4, e5 = fp8_encode(x)
    write("f32_cases.bin.gz", xb, to(x, None, torch.float16), to(x, None, torch.bfloat16), e4, e5,
          to(x, None, torch.float64).view(np.uint64), to(x, None, torch.int8).view(np.uint8),
          to(x, None, torch.uint8), to(x, None, torch.int16).view(np.uint16),
          to(x, None, torch.int32).view(np.uint32), to(x, None, torch.int64).view(np.uint64),
          to(x, None, torch.bool), count=len(xb))

    db = f64_inputs()
    d = f64_from_bits(db)
    write("f64_cases.bin.gz", db, to(d, None, torch.float32).view(np.uint32), to(d, None, torch.float16),
          to(d, None, torch.bfloat16), to(d, None, torch.int8).view(np.uint8), to(d, None, torch.uint8),
          to(d, None, torch.int16).view(np.uint16), to(d, None, torch.int32).view(np.uint32),
          to(d, None, torch.int64).view(np.uint64), to(d, None, torch.bool), count=len(db))

    iv = int_inputs()
    i32 = to(iv, None, torch.int32)
    write("int_cases.bin.gz", iv.view(np.uint64), to(iv, None, torch.float64).view(np.uint64),
          to(iv, None, torch.float32).view(np.uint32), to(iv, None, torch.float16), to(iv, None, torch.bfloat16),
          to(iv, None, torch.int8).view(np.uint8), to(iv, None, torch.uint8), to(iv, None, torch.int16).view(np.uint16),
          to(iv, None, torch.int32).view(np.uint32), to(iv, None, torch.bool), i32.view(np.uint32),
          to(i32, None, torch.float32).view(np.uint32), to(i32, None, torch.bfloat16), to(i32, None, torch.float16),
          count=len(iv))

    write("fp8_all.bin.gz", *fp8_decode())
    stats_cases()

    cap = torch.__config__.show().split("CPU capability usage: ")[1].split("\n")[0]
    with open(os.path.join(OUT, "versions.txt"), "w") as f:
        f.write("torch %s (CPU capability %s), numpy %s, ml_dtypes %s, %s\n"
                % (torch.__version__, cap, np.__version__, ml_dtypes.__version__, platform.machine()))


if __name__ == "__main__":
    main()
