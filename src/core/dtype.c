/* Element types: sizes, names, and single-value conversions. */
#include "dtype_private.h"

#include <string.h>

static const struct {
    const char *name; /* torch's */
    size_t size;
    int is_float;
} dtype_info[CKPT_DTYPE_COUNT] = {
    [CKPT_DTYPE_INVALID] = { "invalid", 0, 0 },
    [CKPT_DTYPE_F64] = { "float64", 8, 1 },
    [CKPT_DTYPE_F32] = { "float32", 4, 1 },
    [CKPT_DTYPE_F16] = { "float16", 2, 1 },
    [CKPT_DTYPE_BF16] = { "bfloat16", 2, 1 },
    [CKPT_DTYPE_F8_E4M3FN] = { "float8_e4m3fn", 1, 1 },
    [CKPT_DTYPE_F8_E5M2] = { "float8_e5m2", 1, 1 },
    [CKPT_DTYPE_I8] = { "int8", 1, 0 },
    [CKPT_DTYPE_I16] = { "int16", 2, 0 },
    [CKPT_DTYPE_I32] = { "int32", 4, 0 },
    [CKPT_DTYPE_I64] = { "int64", 8, 0 },
    [CKPT_DTYPE_U8] = { "uint8", 1, 0 },
    [CKPT_DTYPE_BOOL] = { "bool", 1, 0 },
    [CKPT_DTYPE_U16] = { "uint16", 2, 0 },
    [CKPT_DTYPE_U32] = { "uint32", 4, 0 },
    [CKPT_DTYPE_U64] = { "uint64", 8, 0 },
    [CKPT_DTYPE_C64] = { "complex64", 8, 0 },
    [CKPT_DTYPE_C128] = { "complex128", 16, 0 },
};

/* Short spellings people type on command lines, and torch's own aliases
 * (torch.half, torch.float, torch.double, torch.long, ...). */
static const struct {
    const char *alias;
    ckpt_dtype type;
} dtype_aliases[] = {
    { "fp64", CKPT_DTYPE_F64 },     { "f64", CKPT_DTYPE_F64 },   { "double", CKPT_DTYPE_F64 },
    { "fp32", CKPT_DTYPE_F32 },     { "f32", CKPT_DTYPE_F32 },   { "float", CKPT_DTYPE_F32 },
    { "fp16", CKPT_DTYPE_F16 },     { "f16", CKPT_DTYPE_F16 },   { "half", CKPT_DTYPE_F16 },
    { "bf16", CKPT_DTYPE_BF16 },    { "fp8_e4m3", CKPT_DTYPE_F8_E4M3FN },
    { "fp8_e5m2", CKPT_DTYPE_F8_E5M2 },
    { "short", CKPT_DTYPE_I16 },    { "int", CKPT_DTYPE_I32 },   { "long", CKPT_DTYPE_I64 },
    { "cfloat", CKPT_DTYPE_C64 },   { "cdouble", CKPT_DTYPE_C128 },
};

static int dtype_valid(ckpt_dtype t)
{
    return t > CKPT_DTYPE_INVALID && t < CKPT_DTYPE_COUNT;
}

size_t ckpt_dtype_size(ckpt_dtype t)
{
    return dtype_valid(t) ? dtype_info[t].size : 0;
}

const char *ckpt_dtype_name(ckpt_dtype t)
{
    return dtype_valid(t) ? dtype_info[t].name : "invalid";
}

ckpt_dtype ckpt_dtype_from_name(const char *name)
{
    size_t i;

    if (!name)
        return CKPT_DTYPE_INVALID;
    for (i = CKPT_DTYPE_INVALID + 1; i < CKPT_DTYPE_COUNT; i++)
        if (strcmp(name, dtype_info[i].name) == 0)
            return (ckpt_dtype)i;
    for (i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
        if (strcmp(name, dtype_aliases[i].alias) == 0)
            return dtype_aliases[i].type;
    return CKPT_DTYPE_INVALID;
}

int ckpt_dtype_is_float(ckpt_dtype t)
{
    return dtype_valid(t) && dtype_info[t].is_float;
}

static int dtype_is_complex(ckpt_dtype t)
{
    return t == CKPT_DTYPE_C64 || t == CKPT_DTYPE_C128;
}

int ckpt_dtype_can_convert(ckpt_dtype dst, ckpt_dtype src)
{
    if (!dtype_valid(dst) || !dtype_valid(src))
        return 0;
    if (dst == src)
        return 1;
    return !dtype_is_complex(dst) && !dtype_is_complex(src);
}

/* Integers go through their exact 64-bit value; complex types give their real part. */
double ckpt_dtype_load_f64(ckpt_dtype t, const void *elem)
{
    union {
        double f64;
        float f32;
        uint16_t u16;
        uint8_t u8;
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint32_t u32;
        uint64_t u64;
    } v;

    if (!dtype_valid(t))
        return ckpt_dtype__f64_from_bits(0x7FF8000000000000ull);
    memcpy(&v, elem, dtype_info[t].size < sizeof v ? dtype_info[t].size : sizeof v);
    switch (t) {
    case CKPT_DTYPE_F64: return v.f64;
    case CKPT_DTYPE_F32: return ckpt_dtype__f32_to_f64(v.f32);
    case CKPT_DTYPE_F16: return ckpt_dtype__f32_to_f64(ckpt_dtype__f16_to_f32(v.u16));
    case CKPT_DTYPE_BF16: return ckpt_dtype__f32_to_f64(ckpt_dtype__bf16_to_f32(v.u16));
    case CKPT_DTYPE_F8_E4M3FN: return ckpt_dtype__f32_to_f64(ckpt_dtype__e4m3fn_to_f32(v.u8));
    case CKPT_DTYPE_F8_E5M2: return ckpt_dtype__f32_to_f64(ckpt_dtype__e5m2_to_f32(v.u8));
    case CKPT_DTYPE_I8: return v.i8;
    case CKPT_DTYPE_I16: return v.i16;
    case CKPT_DTYPE_I32: return v.i32;
    case CKPT_DTYPE_I64: return (double)v.i64;
    case CKPT_DTYPE_U8: return v.u8;
    case CKPT_DTYPE_BOOL: return v.u8 != 0;
    case CKPT_DTYPE_U16: return v.u16;
    case CKPT_DTYPE_U32: return v.u32;
    case CKPT_DTYPE_U64: return (double)v.u64;
    case CKPT_DTYPE_C64: return ckpt_dtype__f32_to_f64(v.f32);
    case CKPT_DTYPE_C128: return v.f64;
    case CKPT_DTYPE_INVALID:
    case CKPT_DTYPE_COUNT: break;
    }
    return ckpt_dtype__f64_from_bits(0x7FF8000000000000ull);
}

float ckpt_f16_to_f32(uint16_t h)
{
    return ckpt_dtype__f16_to_f32(h);
}

uint16_t ckpt_f32_to_f16(float f)
{
    return ckpt_dtype__f32_to_f16(f);
}

float ckpt_bf16_to_f32(uint16_t b)
{
    return ckpt_dtype__bf16_to_f32(b);
}

/* Same NaN result as ckpt_dtype_convert(F32 -> BF16). */
uint16_t ckpt_f32_to_bf16(float f)
{
    return ckpt_dtype__f32_to_bf16(f, CKPT_BF16_NAN_VECTOR);
}

float ckpt_f8e4m3fn_to_f32(uint8_t v)
{
    return ckpt_dtype__e4m3fn_to_f32(v);
}

uint8_t ckpt_f32_to_f8e4m3fn(float f)
{
    return ckpt_dtype__f32_to_e4m3fn(f);
}

float ckpt_f8e5m2_to_f32(uint8_t v)
{
    return ckpt_dtype__e5m2_to_f32(v);
}

uint8_t ckpt_f32_to_f8e5m2(float f)
{
    return ckpt_dtype__f32_to_e5m2(f);
}
