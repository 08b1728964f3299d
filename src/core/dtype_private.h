/* Bit-level conversions between floating-point formats, shared by the dtype code and the
 * statistics. Everything is static inline so that the conversion loops can be inlined and
 * auto-vectorised: integer arithmetic and selects only, except for one float addition per
 * subnormal path whose result is always a normal number (so flush-to-zero modes cannot
 * change it). Round-to-nearest-even is assumed as the FPU rounding mode, as torch does.
 *
 * NaN rules follow what torch 1.13 (x86-64, AVX2 kernels, contiguous tensors) produces;
 * see dtype_convert.c for the measurements. */
#ifndef CKPT_CORE_DTYPE_PRIVATE_H
#define CKPT_CORE_DTYPE_PRIVATE_H

#ifndef CKPT_BUILD
#error "dtype_private.h is internal to the library"
#endif

#include <ckpt/dtype.h>

#include <string.h>

/* bf16 NaN results: the vectorised float/double -> bf16 kernels write 0xFFFF, the scalar
 * c10::BFloat16 constructor (used from half and float8) writes 0x7FC0. */
#define CKPT_BF16_NAN_VECTOR 0xFFFFu
#define CKPT_BF16_NAN_SCALAR 0x7FC0u

static inline uint32_t ckpt_dtype__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float ckpt_dtype__f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint64_t ckpt_dtype__f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double ckpt_dtype__f64_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* cond ? a : b on all-ones / all-zeros masks. Plain ?: lets gcc move the float addition
 * of the subnormal paths into a branch, which under the default -ftrapping-math it may not
 * if-convert back, and the loops stop vectorising. */
static inline uint32_t ckpt_dtype__select(uint32_t cond, uint32_t a, uint32_t b)
{
    uint32_t mask = 0u - (cond & 1u);
    return (a & mask) | (b & ~mask);
}

/* Exact. A NaN keeps its sign and payload and becomes quiet, as the hardware conversions
 * torch relies on do. Subnormals are m * 2^-24: 0.5 + m * 2^-24 is exact in float, so one
 * subtraction gives the value without any variable shift. */
static inline float ckpt_dtype__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t mag = h & 0x7FFFu;
    uint32_t normal = (mag << 13) + 0x38000000u;
    uint32_t special = (mag << 13) | 0x7F800000u | ckpt_dtype__select(mag > 0x7C00u, 0x00400000u, 0u);
    uint32_t sub = ckpt_dtype__f32_bits(ckpt_dtype__f32_from_bits(0x3F000000u | mag) - 0.5f);
    uint32_t r = ckpt_dtype__select(mag >= 0x7C00u, special, normal);
    r = ckpt_dtype__select(mag < 0x0400u, sub, r);
    return ckpt_dtype__f32_from_bits(sign | r);
}

/* Round to nearest even; overflow (>= 65520) gives Inf; NaN gives the canonical quiet NaN
 * with the input's sign (0x7E00 / 0xFE00), as c10::Half does. Results below 2^-14 come
 * from adding 0.5, whose ulp is exactly the half subnormal step 2^-24. */
static inline uint16_t ckpt_dtype__f32_to_f16(float f)
{
    uint32_t x = ckpt_dtype__f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7FFFFFFFu;
    uint32_t normal = (ax - 0x38000000u + 0x0FFFu + ((ax >> 13) & 1u)) >> 13;
    uint32_t sub = ckpt_dtype__f32_bits(ckpt_dtype__f32_from_bits(ax) + 0.5f) - 0x3F000000u;
    uint32_t r = ckpt_dtype__select(ax < 0x38800000u, sub, normal);
    r = ckpt_dtype__select(ax >= 0x477FF000u, 0x7C00u, r);
    r = ckpt_dtype__select(ax > 0x7F800000u, 0x7E00u, r);
    return (uint16_t)(sign | r);
}

static inline float ckpt_dtype__bf16_to_f32(uint16_t b)
{
    return ckpt_dtype__f32_from_bits((uint32_t)b << 16);
}

/* Round to nearest even on the bit pattern (denormals and overflow to Inf included); a NaN
 * becomes `nan` (CKPT_BF16_NAN_VECTOR or CKPT_BF16_NAN_SCALAR). */
static inline uint16_t ckpt_dtype__f32_to_bf16(float f, uint16_t nan)
{
    uint32_t x = ckpt_dtype__f32_bits(f);
    uint32_t r = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)ckpt_dtype__select((x & 0x7FFFFFFFu) > 0x7F800000u, nan, r);
}

/* NaN payloads are kept (top bits) and quieted, as x86 cvtsd2ss / cvtss2sd do; written
 * out so that the result does not depend on the target's NaN propagation. */
static inline float ckpt_dtype__f64_to_f32(double d)
{
    uint64_t x = ckpt_dtype__f64_bits(d);
    uint32_t nan = (uint32_t)(x >> 32 & 0x80000000u) | 0x7FC00000u |
                   (uint32_t)((x & 0x000FFFFFFFFFFFFFull) >> 29);
    uint32_t is_nan = (x & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
    return ckpt_dtype__f32_from_bits(ckpt_dtype__select(is_nan, nan, ckpt_dtype__f32_bits((float)d)));
}

static inline double ckpt_dtype__f32_to_f64(float f)
{
    uint32_t x = ckpt_dtype__f32_bits(f);
    uint64_t nan = ((uint64_t)(x & 0x80000000u) << 32) | 0x7FF8000000000000ull |
                   ((uint64_t)(x & 0x007FFFFFu) << 29);
    uint64_t mask = 0u - (uint64_t)((x & 0x7FFFFFFFu) > 0x7F800000u);
    return ckpt_dtype__f64_from_bits((nan & mask) | (ckpt_dtype__f64_bits((double)f) & ~mask));
}

/* float8_e4m3fn (c10::Float8_e4m3fn): bias 7, no Inf; S.1111.111 is NaN and decodes to
 * the float pattern sign | 0x7FF00000. Subnormals are m * 2^-9 = (16384 + m * 2^-9) - 16384. */
static inline float ckpt_dtype__e4m3fn_to_f32(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t mag = v & 0x7Fu;
    uint32_t normal = (mag << 20) + 0x3C000000u;
    uint32_t sub = ckpt_dtype__f32_bits(ckpt_dtype__f32_from_bits(0x46800000u | mag) - 16384.0f);
    uint32_t r = ckpt_dtype__select(mag < 0x08u, sub, normal);
    r = ckpt_dtype__select(mag == 0x7Fu, 0x7FF00000u, r);
    return ckpt_dtype__f32_from_bits(sign | r);
}

/* Round to nearest even; |x| >= 480 (past the 464 tie above the largest value 448), Inf
 * and NaN all give NaN 0x7F with the input's sign. */
static inline uint8_t ckpt_dtype__f32_to_e4m3fn(float f)
{
    uint32_t x = ckpt_dtype__f32_bits(f);
    uint32_t sign = (x >> 24) & 0x80u;
    uint32_t ax = x & 0x7FFFFFFFu;
    uint32_t normal = (ax - 0x3C000000u + 0x7FFFFu + ((ax >> 20) & 1u)) >> 20;
    uint32_t sub = ckpt_dtype__f32_bits(ckpt_dtype__f32_from_bits(ax) + 16384.0f) - 0x46800000u;
    uint32_t r = ckpt_dtype__select(ax < 0x3C800000u, sub, normal);
    r = ckpt_dtype__select(ax >= 0x43F00000u, 0x7Fu, r);
    return (uint8_t)(sign | r);
}

/* float8_e5m2 is the top byte of a half: decoding is the half decoding. */
static inline float ckpt_dtype__e5m2_to_f32(uint8_t v)
{
    return ckpt_dtype__f16_to_f32((uint16_t)(v << 8));
}

/* Round to nearest even; >= 61440 rounds to Inf (0x7C); NaN gives 0x7F; sign kept. */
static inline uint8_t ckpt_dtype__f32_to_e5m2(float f)
{
    uint32_t x = ckpt_dtype__f32_bits(f);
    uint32_t sign = (x >> 24) & 0x80u;
    uint32_t ax = x & 0x7FFFFFFFu;
    uint32_t normal = (ax - 0x38000000u + 0xFFFFFu + ((ax >> 21) & 1u)) >> 21;
    uint32_t sub = ckpt_dtype__f32_bits(ckpt_dtype__f32_from_bits(ax) + 128.0f) - 0x43000000u;
    uint32_t r = ckpt_dtype__select(ax < 0x38800000u, sub, normal);
    r = ckpt_dtype__select(ax >= 0x47800000u, 0x7Cu, r);
    r = ckpt_dtype__select(ax > 0x7F800000u, 0x7Fu, r);
    return (uint8_t)(sign | r);
}

#endif
