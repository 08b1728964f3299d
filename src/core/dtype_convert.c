/* Conversions between element types, bit-identical to torch's Tensor.to() on the CPU.
 *
 * What torch does was measured with torch 1.13.1 (x86-64, AVX2 kernels, contiguous
 * tensors, one thread) over NaN payloads of both signs and lengths 1..100, 10^5 and 2^20;
 * testdata/gen/gen_dtype_vectors.py records the reference vectors:
 *
 * - float -> bfloat16: every NaN becomes 0xFFFF, at every length (the vectorised kernel
 *   handles the tail too). Strided tensors and the scalar c10::BFloat16 constructor give
 *   0x7FC0 instead; we follow contiguous tensors.
 * - double -> bfloat16: rounds to float first (double rounding, as c10 does). NaN gives
 *   0xFFFF inside the kernel's 16-element blocks but 0x7FC0 for the last n % 16 elements of
 *   each thread's range, so the result depends on position and thread count. We give
 *   0xFFFF everywhere, which is torch's answer for every tensor whose length is a multiple
 *   of 16 and for all but a short tail of the others.
 * - half -> bfloat16 (and float8 -> bfloat16, from c10's rules: no vectorised kernel): NaN
 *   is 0x7FC0. Non-NaN values go through float exactly.
 * - anything -> half: NaN is the input's sign | 0x7E00; double rounds to float first.
 * - half, bfloat16 -> float/double: exact; half NaNs are quieted with their payload kept,
 *   bfloat16 -> float is the plain 16-bit shift (a signalling NaN stays signalling).
 * - float <-> double: NaN payload kept and quieted (x86 semantics).
 * - float8 (not in torch 1.13): c10::Float8_e4m3fn / Float8_e5m2 rules, see
 *   dtype_private.h; other types convert to and from float8 through float.
 * - floating point -> integer truncates toward zero. Out-of-range values are undefined in
 *   C++; torch on x86 gives what cvttss2si/cvttsd2si give, and so do we, without invoking
 *   undefined behaviour: int32 and int64 get INT_MIN for NaN, Inf and out-of-range values;
 *   int8 and int16 take the low bits of the int32 result (so 300.7 -> int8 is 44 and 3e9 is
 *   0); uint8 takes the low bits of the int64 result (c10 casts through int64, so
 *   -2.5 -> 254 and 2^32 + 300 -> 44). For the unsigned types torch 1.13 lacks we follow
 *   what gcc emits for static_cast on x86-64: uint16 = low bits of int32, uint32 = low bits
 *   of int64, uint64 = exact in [0, 2^64), two's complement for negatives >= -2^63,
 *   0x8000000000000000 below that, 0 for NaN, +Inf and values >= 2^64.
 * - integer -> integer wraps (two's complement); integer -> half/bfloat16/float8 converts
 *   to float first (c10 constructs those from float, so bfloat16 rounds twice); bool reads
 *   any non-zero byte as true; anything -> bool is (x != 0), NaN included.
 *
 * Each element's result depends on nothing but its value, so splitting the work across
 * threads cannot change it. */
#include "dtype_private.h"

#include <ckpt/sys/common.h>

#include <string.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

/* Elements per step of the generic path (a few KiB of stack). */
#define CONVERT_BLOCK 256
/* Arrays at least this long are split across threads, in pieces of PARALLEL_PIECE. */
#define PARALLEL_MIN ((size_t)1 << 20)
#define PARALLEL_PIECE ((size_t)1 << 16)

typedef unsigned char byte;

/* gcc vectorises these loops at -O2 only when asked (its default cost model there refuses
 * loops that need an epilogue); OpenMP builds can ask. clang vectorises them by itself and
 * warns when an instrumented build cannot honour the request. */
#if defined(CKPT_HAVE_OPENMP) && defined(__GNUC__) && !defined(__clang__)
#define SIMD_LOOP _Pragma("omp simd")
#else
#define SIMD_LOOP
#endif

/* ---- unaligned element access (mapped files give no alignment guarantee) ---- */

#define DEFINE_LOAD(name, type)                                                       \
    static inline type load_##name(const byte *p)                                     \
    {                                                                                 \
        type v;                                                                       \
        memcpy(&v, p, sizeof v);                                                      \
        return v;                                                                     \
    }
#define DEFINE_STORE(name, type)                                                      \
    static inline void store_##name(byte *p, type v)                                  \
    {                                                                                 \
        memcpy(p, &v, sizeof v);                                                      \
    }

DEFINE_LOAD(u16, uint16_t)
DEFINE_LOAD(u32, uint32_t)
DEFINE_LOAD(f32, float)
DEFINE_LOAD(f64, double)
DEFINE_STORE(u16, uint16_t)
DEFINE_STORE(u32, uint32_t)
DEFINE_STORE(u64, uint64_t)
DEFINE_STORE(f32, float)
DEFINE_STORE(f64, double)

/* ---- floating point -> integer, x86 truncation semantics without undefined behaviour ---- */

static inline int32_t trunc_i32(double d)
{
    return d > -2147483649.0 && d < 2147483648.0 ? (int32_t)d : INT32_MIN;
}

static inline int64_t trunc_i64(double d)
{
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? (int64_t)d : INT64_MIN;
}

static inline uint64_t trunc_u64(double d)
{
    if (d < 9223372036854775808.0)
        return (uint64_t)trunc_i64(d);
    if (d < 18446744073709551616.0)
        return (uint64_t)(d - 9223372036854775808.0) + ((uint64_t)1 << 63);
    return 0;
}

/* The int64 whose two's complement bits are u, without an implementation-defined cast. */
static inline int64_t u64_as_i64(uint64_t u)
{
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)~u - 1;
}

/* ---- the hot paths: fused, branch-free loops that vectorise ---- */

static void f32_to_bf16(byte *restrict d, const byte *restrict s, size_t n)
{
    size_t i;
    SIMD_LOOP
    for (i = 0; i < n; i++)
        store_u16(d + 2 * i, ckpt_dtype__f32_to_bf16(load_f32(s + 4 * i), CKPT_BF16_NAN_VECTOR));
}

static void bf16_to_f32(byte *restrict d, const byte *restrict s, size_t n)
{
    size_t i;
    SIMD_LOOP
    for (i = 0; i < n; i++)
        store_u32(d + 4 * i, (uint32_t)load_u16(s + 2 * i) << 16);
}

static void f32_to_f16(byte *restrict d, const byte *restrict s, size_t n)
{
    size_t i;
    SIMD_LOOP
    for (i = 0; i < n; i++)
        store_u16(d + 2 * i, ckpt_dtype__f32_to_f16(load_f32(s + 4 * i)));
}

static void f16_to_f32(byte *restrict d, const byte *restrict s, size_t n)
{
    size_t i;
    SIMD_LOOP
    for (i = 0; i < n; i++)
        store_f32(d + 4 * i, ckpt_dtype__f16_to_f32(load_u16(s + 2 * i)));
}

static void f16_to_bf16(byte *restrict d, const byte *restrict s, size_t n)
{
    size_t i;
    SIMD_LOOP
    for (i = 0; i < n; i++)
        store_u16(d + 2 * i, ckpt_dtype__f32_to_bf16(ckpt_dtype__f16_to_f32(load_u16(s + 2 * i)),
                                                     CKPT_BF16_NAN_SCALAR));
}

static void bf16_to_f16(byte *restrict d, const byte *restrict s, size_t n)
{
    size_t i;
    SIMD_LOOP
    for (i = 0; i < n; i++)
        store_u16(d + 2 * i, ckpt_dtype__f32_to_f16(ckpt_dtype__bf16_to_f32(load_u16(s + 2 * i))));
}

static void f32_to_f64(byte *restrict d, const byte *restrict s, size_t n)
{
    size_t i;
    SIMD_LOOP
    for (i = 0; i < n; i++)
        store_f64(d + 8 * i, ckpt_dtype__f32_to_f64(load_f32(s + 4 * i)));
}

static void f64_to_f32(byte *restrict d, const byte *restrict s, size_t n)
{
    size_t i;
    SIMD_LOOP
    for (i = 0; i < n; i++)
        store_f32(d + 4 * i, ckpt_dtype__f64_to_f32(load_f64(s + 8 * i)));
}

/* ---- the generic path: decode a block to float, double or 64-bit integer, then encode ---- */

typedef enum wide_kind { WIDE_F32, WIDE_F64, WIDE_INT } wide_kind;

static wide_kind wide_kind_of(ckpt_dtype t)
{
    switch (t) {
    case CKPT_DTYPE_F64: return WIDE_F64;
    case CKPT_DTYPE_F32:
    case CKPT_DTYPE_F16:
    case CKPT_DTYPE_BF16:
    case CKPT_DTYPE_F8_E4M3FN:
    case CKPT_DTYPE_F8_E5M2: return WIDE_F32;
    default: return WIDE_INT;
    }
}

/* Every type but double decodes to float exactly. */
static void load_f32_block(ckpt_dtype t, const byte *s, size_t n, float *out)
{
    size_t i;
    switch (t) {
    case CKPT_DTYPE_F16:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = ckpt_dtype__f16_to_f32(load_u16(s + 2 * i));
        break;
    case CKPT_DTYPE_BF16:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = ckpt_dtype__bf16_to_f32(load_u16(s + 2 * i));
        break;
    case CKPT_DTYPE_F8_E4M3FN:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = ckpt_dtype__e4m3fn_to_f32(s[i]);
        break;
    case CKPT_DTYPE_F8_E5M2:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = ckpt_dtype__e5m2_to_f32(s[i]);
        break;
    default:
        memcpy(out, s, n * sizeof *out);
        break;
    }
}

/* Integers as the two's complement bits of their 64-bit value; bool as 0 or 1. */
static void load_int_block(ckpt_dtype t, const byte *s, size_t n, uint64_t *out)
{
    size_t i;
    switch (t) {
    case CKPT_DTYPE_I8:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = (uint64_t)(int64_t)(int8_t)s[i];
        break;
    case CKPT_DTYPE_I16:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = (uint64_t)(int64_t)(int16_t)load_u16(s + 2 * i);
        break;
    case CKPT_DTYPE_I32:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = (uint64_t)(int64_t)(int32_t)load_u32(s + 4 * i);
        break;
    case CKPT_DTYPE_U8:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = s[i];
        break;
    case CKPT_DTYPE_BOOL:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = s[i] != 0;
        break;
    case CKPT_DTYPE_U16:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = load_u16(s + 2 * i);
        break;
    case CKPT_DTYPE_U32:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            out[i] = load_u32(s + 4 * i);
        break;
    default: /* I64, U64 */
        memcpy(out, s, n * sizeof *out);
        break;
    }
}

/* Encode floats (already in `dst_type`'s float path) into 8/16-bit float formats. */
static int store_small_float(ckpt_dtype t, byte *d, const float *in, size_t n, uint16_t bf16_nan)
{
    size_t i;
    switch (t) {
    case CKPT_DTYPE_F16:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            store_u16(d + 2 * i, ckpt_dtype__f32_to_f16(in[i]));
        return 1;
    case CKPT_DTYPE_BF16:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            store_u16(d + 2 * i, ckpt_dtype__f32_to_bf16(in[i], bf16_nan));
        return 1;
    case CKPT_DTYPE_F8_E4M3FN:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            d[i] = ckpt_dtype__f32_to_e4m3fn(in[i]);
        return 1;
    case CKPT_DTYPE_F8_E5M2:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            d[i] = ckpt_dtype__f32_to_e5m2(in[i]);
        return 1;
    default:
        return 0;
    }
}

/* Doubles to integers and bool (the rules in the comment at the top). */
static void store_int_from_f64(ckpt_dtype t, byte *d, const double *in, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        double v = in[i];
        switch (t) {
        case CKPT_DTYPE_I8: d[i] = (uint8_t)(uint32_t)trunc_i32(v); break;
        case CKPT_DTYPE_U8: d[i] = (uint8_t)(uint64_t)trunc_i64(v); break;
        case CKPT_DTYPE_I16:
        case CKPT_DTYPE_U16: store_u16(d + 2 * i, (uint16_t)(uint32_t)trunc_i32(v)); break;
        case CKPT_DTYPE_I32: store_u32(d + 4 * i, (uint32_t)trunc_i32(v)); break;
        case CKPT_DTYPE_U32: store_u32(d + 4 * i, (uint32_t)(uint64_t)trunc_i64(v)); break;
        case CKPT_DTYPE_I64: store_u64(d + 8 * i, (uint64_t)trunc_i64(v)); break;
        case CKPT_DTYPE_U64: store_u64(d + 8 * i, trunc_u64(v)); break;
        default: d[i] = v != 0; break; /* BOOL */
        }
    }
}

static void store_from_f64(ckpt_dtype t, byte *d, const double *in, size_t n)
{
    float f[CONVERT_BLOCK];
    size_t i;

    switch (t) {
    case CKPT_DTYPE_F64:
        memcpy(d, in, n * sizeof *in);
        return;
    case CKPT_DTYPE_F32:
    case CKPT_DTYPE_F16:
    case CKPT_DTYPE_BF16:
    case CKPT_DTYPE_F8_E4M3FN:
    case CKPT_DTYPE_F8_E5M2:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            f[i] = ckpt_dtype__f64_to_f32(in[i]);
        if (!store_small_float(t, d, f, n, CKPT_BF16_NAN_VECTOR))
            memcpy(d, f, n * sizeof *f);
        return;
    default:
        store_int_from_f64(t, d, in, n);
        return;
    }
}

static void store_from_f32(ckpt_dtype t, byte *d, const float *in, size_t n, uint16_t bf16_nan)
{
    double wide[CONVERT_BLOCK];
    size_t i;

    if (store_small_float(t, d, in, n, bf16_nan))
        return;
    switch (t) {
    case CKPT_DTYPE_F32:
        memcpy(d, in, n * sizeof *in);
        return;
    case CKPT_DTYPE_F64:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            store_f64(d + 8 * i, ckpt_dtype__f32_to_f64(in[i]));
        return;
    default:
        /* Widening is exact, so truncating the double truncates the float. */
        SIMD_LOOP
        for (i = 0; i < n; i++)
            wide[i] = in[i];
        store_int_from_f64(t, d, wide, n);
        return;
    }
}

static void store_from_int(ckpt_dtype t, byte *d, const uint64_t *in, size_t n, int src_u64)
{
    float f[CONVERT_BLOCK];
    size_t i;

    switch (t) {
    case CKPT_DTYPE_F64:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            store_f64(d + 8 * i, src_u64 ? (double)in[i] : (double)u64_as_i64(in[i]));
        return;
    case CKPT_DTYPE_F32:
    case CKPT_DTYPE_F16:
    case CKPT_DTYPE_BF16:
    case CKPT_DTYPE_F8_E4M3FN:
    case CKPT_DTYPE_F8_E5M2:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            f[i] = src_u64 ? (float)in[i] : (float)u64_as_i64(in[i]);
        if (!store_small_float(t, d, f, n, CKPT_BF16_NAN_SCALAR))
            memcpy(d, f, n * sizeof *f);
        return;
    case CKPT_DTYPE_I8:
    case CKPT_DTYPE_U8:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            d[i] = (uint8_t)in[i];
        return;
    case CKPT_DTYPE_I16:
    case CKPT_DTYPE_U16:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            store_u16(d + 2 * i, (uint16_t)in[i]);
        return;
    case CKPT_DTYPE_I32:
    case CKPT_DTYPE_U32:
        SIMD_LOOP
        for (i = 0; i < n; i++)
            store_u32(d + 4 * i, (uint32_t)in[i]);
        return;
    case CKPT_DTYPE_I64:
    case CKPT_DTYPE_U64:
        memcpy(d, in, n * sizeof *in);
        return;
    default: /* BOOL */
        SIMD_LOOP
        for (i = 0; i < n; i++)
            d[i] = in[i] != 0;
        return;
    }
}

static void convert_generic(ckpt_dtype dt, byte *d, ckpt_dtype st, const byte *s, size_t n)
{
    union {
        float f32[CONVERT_BLOCK];
        double f64[CONVERT_BLOCK];
        uint64_t i64[CONVERT_BLOCK];
    } buf;
    size_t ds = ckpt_dtype_size(dt), ss = ckpt_dtype_size(st), i, m;
    wide_kind kind = wide_kind_of(st);
    uint16_t bf16_nan = st == CKPT_DTYPE_F32 ? CKPT_BF16_NAN_VECTOR : CKPT_BF16_NAN_SCALAR;

    for (i = 0; i < n; i += m) {
        m = n - i < CONVERT_BLOCK ? n - i : CONVERT_BLOCK;
        switch (kind) {
        case WIDE_F32:
            load_f32_block(st, s + i * ss, m, buf.f32);
            store_from_f32(dt, d + i * ds, buf.f32, m, bf16_nan);
            break;
        case WIDE_F64:
            memcpy(buf.f64, s + i * ss, m * sizeof(double));
            store_from_f64(dt, d + i * ds, buf.f64, m);
            break;
        case WIDE_INT:
            load_int_block(st, s + i * ss, m, buf.i64);
            store_from_int(dt, d + i * ds, buf.i64, m, st == CKPT_DTYPE_U64);
            break;
        }
    }
}

typedef void (*convert_fn)(byte *restrict d, const byte *restrict s, size_t n);

static convert_fn hot_path(ckpt_dtype dt, ckpt_dtype st)
{
    if (st == CKPT_DTYPE_F32 && dt == CKPT_DTYPE_BF16) return f32_to_bf16;
    if (st == CKPT_DTYPE_BF16 && dt == CKPT_DTYPE_F32) return bf16_to_f32;
    if (st == CKPT_DTYPE_F32 && dt == CKPT_DTYPE_F16) return f32_to_f16;
    if (st == CKPT_DTYPE_F16 && dt == CKPT_DTYPE_F32) return f16_to_f32;
    if (st == CKPT_DTYPE_F16 && dt == CKPT_DTYPE_BF16) return f16_to_bf16;
    if (st == CKPT_DTYPE_BF16 && dt == CKPT_DTYPE_F16) return bf16_to_f16;
    if (st == CKPT_DTYPE_F32 && dt == CKPT_DTYPE_F64) return f32_to_f64;
    if (st == CKPT_DTYPE_F64 && dt == CKPT_DTYPE_F32) return f64_to_f32;
    return NULL;
}

static void convert_range(ckpt_dtype dt, byte *d, ckpt_dtype st, const byte *s, size_t n)
{
    convert_fn fn;

    if (dt == st) {
        if (d != s)
            memcpy(d, s, n * ckpt_dtype_size(st));
        return;
    }
    fn = hot_path(dt, st);
    if (fn)
        fn(d, s, n);
    else
        convert_generic(dt, d, st, s, n);
}

int ckpt_dtype_convert(ckpt_dtype dst_type, void *dst, ckpt_dtype src_type, const void *src, size_t n)
{
    if (!ckpt_dtype_can_convert(dst_type, src_type))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "cannot convert %s to %s", ckpt_dtype_name(src_type),
                              ckpt_dtype_name(dst_type));
    if (n == 0)
        return 0;
#ifdef CKPT_HAVE_OPENMP
    if (n >= PARALLEL_MIN && !omp_in_parallel()) {
        size_t ds = ckpt_dtype_size(dst_type), ss = ckpt_dtype_size(src_type);
        size_t pieces = (n + PARALLEL_PIECE - 1) / PARALLEL_PIECE, p;
#pragma omp parallel for schedule(static)
        for (p = 0; p < pieces; p++) {
            size_t first = p * PARALLEL_PIECE;
            size_t m = n - first < PARALLEL_PIECE ? n - first : PARALLEL_PIECE;
            convert_range(dst_type, (byte *)dst + first * ds, src_type, (const byte *)src + first * ss, m);
        }
        return 0;
    }
#endif
    convert_range(dst_type, dst, src_type, src, n);
    return 0;
}
