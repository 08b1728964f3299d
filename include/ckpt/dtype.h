/* Element types and exact conversions between them. */
#ifndef CKPT_DTYPE_H
#define CKPT_DTYPE_H

#include "common.h"

CKPT_BEGIN_DECL

/* Append-only: values are part of the ABI and of test fixtures. */
typedef enum ckpt_dtype {
    CKPT_DTYPE_INVALID = 0,
    CKPT_DTYPE_F64,
    CKPT_DTYPE_F32,
    CKPT_DTYPE_F16,
    CKPT_DTYPE_BF16,
    CKPT_DTYPE_F8_E4M3FN,
    CKPT_DTYPE_F8_E5M2,
    CKPT_DTYPE_I8,
    CKPT_DTYPE_I16,
    CKPT_DTYPE_I32,
    CKPT_DTYPE_I64,
    CKPT_DTYPE_U8,
    CKPT_DTYPE_BOOL,
    CKPT_DTYPE_U16,
    CKPT_DTYPE_U32,
    CKPT_DTYPE_U64,
    CKPT_DTYPE_C64,  /* complex64: two float32 */
    CKPT_DTYPE_C128, /* complex128: two float64 */
    CKPT_DTYPE_COUNT
} ckpt_dtype;

/* Size of one element in bytes; 0 for CKPT_DTYPE_INVALID or out-of-range values. */
CKPT_EXTERN(size_t) ckpt_dtype_size(ckpt_dtype t);

/* torch's name for the type ("float32", "bfloat16", "float8_e4m3fn", "bool", ...);
 * "invalid" for an unknown value. */
CKPT_EXTERN(const char *) ckpt_dtype_name(ckpt_dtype t);

/* The type whose torch name is `name` (also accepts the short aliases "fp32", "f32",
 * "fp16", "half", "bf16", "float", "double", "fp8_e4m3", "fp8_e5m2", "fp64", "f64", "f16",
 * and torch's "short", "int", "long", "cfloat", "cdouble"); CKPT_DTYPE_INVALID if none. */
CKPT_EXTERN(ckpt_dtype) ckpt_dtype_from_name(const char *name);

/* Non-zero for real floating-point types (f64, f32, f16, bf16, fp8). */
CKPT_EXTERN(int) ckpt_dtype_is_float(ckpt_dtype t);

/* Non-zero if ckpt_dtype_convert supports src -> dst. Every pair of real types
 * (floats, integers, bool) is supported; complex types only convert to themselves. */
CKPT_EXTERN(int) ckpt_dtype_can_convert(ckpt_dtype dst, ckpt_dtype src);

/* Convert n elements, bit-identical to torch's Tensor.to(dst): floats round to
 * nearest even, NaN/Inf/denormals handled as torch handles them, float -> integer
 * truncates toward zero, anything -> bool is (x != 0). Source and destination must not
 * overlap unless dst == src and the types are equal. Large arrays are split across
 * OpenMP threads; the result does not depend on the thread count.
 * Returns 0, or CKPT_EUNSUPPORTED for an unsupported pair. */
CKPT_EXTERN(int) ckpt_dtype_convert(ckpt_dtype dst_type, void *dst, ckpt_dtype src_type,
                                    const void *src, size_t n);

/* Single-value helpers used by statistics and tests. They give the same bits as
 * ckpt_dtype_convert (ckpt_f32_to_bf16 turns NaN into 0xFFFF, as torch's float -> bfloat16
 * kernel does). ckpt_dtype_load_f64 reads one element of any type (complex: the real part;
 * an invalid type: NaN). */
CKPT_EXTERN(double) ckpt_dtype_load_f64(ckpt_dtype t, const void *elem);
CKPT_EXTERN(float) ckpt_f16_to_f32(uint16_t h);
CKPT_EXTERN(uint16_t) ckpt_f32_to_f16(float f);
CKPT_EXTERN(float) ckpt_bf16_to_f32(uint16_t b);
CKPT_EXTERN(uint16_t) ckpt_f32_to_bf16(float f);
CKPT_EXTERN(float) ckpt_f8e4m3fn_to_f32(uint8_t v);
CKPT_EXTERN(uint8_t) ckpt_f32_to_f8e4m3fn(float f);
CKPT_EXTERN(float) ckpt_f8e5m2_to_f32(uint8_t v);
CKPT_EXTERN(uint8_t) ckpt_f32_to_f8e5m2(float f);

CKPT_END_DECL

#endif
