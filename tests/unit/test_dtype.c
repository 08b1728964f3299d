/* Element types and conversions, against vectors written by torch (and ml_dtypes for
 * float8) in testdata/vectors/ by testdata/gen/gen_dtype_vectors.py. */
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <zlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* A whole vector file, gunzipped, read in order. */
typedef struct vectors {
    unsigned char *data;
    size_t len, pos;
    uint32_t n;
} vectors;

static int vectors_open(vectors *v, const char *name, int counted)
{
    gzFile g = gzopen(ckpt_test_data(name), "rb");
    size_t cap = 1 << 20;
    int got;

    memset(v, 0, sizeof *v);
    if (!g)
        return -1;
    v->data = malloc(cap);
    while (v->data && (got = gzread(g, v->data + v->len, (unsigned)(cap - v->len))) > 0) {
        v->len += (size_t)got;
        if (v->len == cap) {
            unsigned char *p = realloc(v->data, cap * 2);
            if (!p)
                break;
            v->data = p;
            cap *= 2;
        }
    }
    gzclose(g);
    if (!v->data)
        return -1;
    if (counted) {
        if (v->len < 4)
            return -1;
        memcpy(&v->n, v->data, 4);
        v->pos = 4;
    }
    return 0;
}

/* The next array of n elements of `size` bytes; NULL if the file is too short. */
static const void *vectors_take(vectors *v, size_t n, size_t size)
{
    const void *p = v->data + v->pos;
    if (v->len - v->pos < n * size)
        return NULL;
    v->pos += n * size;
    return p;
}

/* Convert `in` (n elements of src) to dst and compare bytes with `want`; print the first
 * few differences. Returns the number of differing elements. */
static size_t check_convert(const char *what, ckpt_dtype dst, ckpt_dtype src, const void *in,
                            const void *want, size_t n)
{
    size_t ds = ckpt_dtype_size(dst), ss = ckpt_dtype_size(src), bad = 0, i;
    unsigned char *out = malloc(n * ds + 1);

    /* Misaligned on purpose: mapped files give no alignment guarantee. */
    if (!out || ckpt_dtype_convert(dst, out + 1, src, in, n) != 0) {
        fprintf(stderr, "  %s: conversion failed: %s\n", what, ckpt_error_last()->message);
        free(out);
        return n ? n : 1;
    }
    for (i = 0; i < n; i++) {
        if (memcmp(out + 1 + i * ds, (const unsigned char *)want + i * ds, ds) != 0) {
            if (bad < 5) {
                uint64_t a = 0, b = 0, x = 0;
                memcpy(&a, out + 1 + i * ds, ds);
                memcpy(&b, (const unsigned char *)want + i * ds, ds);
                memcpy(&x, (const unsigned char *)in + i * ss, ss < 8 ? ss : 8);
                fprintf(stderr, "  %s[%zu]: input 0x%" PRIx64 " gives 0x%" PRIx64 ", torch 0x%" PRIx64 "\n",
                        what, i, x, a, b);
            }
            bad++;
        }
    }
    free(out);
    return bad;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

CKPT_TEST(test_dtype_names)
{
    ckpt_dtype t;

    for (t = CKPT_DTYPE_F64; t < CKPT_DTYPE_COUNT; t++) {
        ASSERT_TRUE(ckpt_dtype_size(t) > 0);
        ASSERT_EQ_INT(ckpt_dtype_from_name(ckpt_dtype_name(t)), t);
    }
    ASSERT_EQ_STR(ckpt_dtype_name(CKPT_DTYPE_BF16), "bfloat16");
    ASSERT_EQ_STR(ckpt_dtype_name(CKPT_DTYPE_F8_E4M3FN), "float8_e4m3fn");
    ASSERT_EQ_STR(ckpt_dtype_name(CKPT_DTYPE_C128), "complex128");
    ASSERT_EQ_STR(ckpt_dtype_name(CKPT_DTYPE_INVALID), "invalid");
    ASSERT_EQ_STR(ckpt_dtype_name((ckpt_dtype)99), "invalid");
    ASSERT_EQ_INT(ckpt_dtype_size(CKPT_DTYPE_INVALID), 0);
    ASSERT_EQ_INT(ckpt_dtype_size(CKPT_DTYPE_COUNT), 0);
    ASSERT_EQ_INT(ckpt_dtype_size(CKPT_DTYPE_C128), 16);
    ASSERT_EQ_INT(ckpt_dtype_size(CKPT_DTYPE_BOOL), 1);
    ASSERT_EQ_INT(ckpt_dtype_from_name("fp32"), CKPT_DTYPE_F32);
    ASSERT_EQ_INT(ckpt_dtype_from_name("f32"), CKPT_DTYPE_F32);
    ASSERT_EQ_INT(ckpt_dtype_from_name("float"), CKPT_DTYPE_F32);
    ASSERT_EQ_INT(ckpt_dtype_from_name("half"), CKPT_DTYPE_F16);
    ASSERT_EQ_INT(ckpt_dtype_from_name("fp16"), CKPT_DTYPE_F16);
    ASSERT_EQ_INT(ckpt_dtype_from_name("bf16"), CKPT_DTYPE_BF16);
    ASSERT_EQ_INT(ckpt_dtype_from_name("double"), CKPT_DTYPE_F64);
    ASSERT_EQ_INT(ckpt_dtype_from_name("fp8_e4m3"), CKPT_DTYPE_F8_E4M3FN);
    ASSERT_EQ_INT(ckpt_dtype_from_name("fp8_e5m2"), CKPT_DTYPE_F8_E5M2);
    ASSERT_EQ_INT(ckpt_dtype_from_name("long"), CKPT_DTYPE_I64);
    ASSERT_EQ_INT(ckpt_dtype_from_name("Float32"), CKPT_DTYPE_INVALID);
    ASSERT_EQ_INT(ckpt_dtype_from_name(""), CKPT_DTYPE_INVALID);
    ASSERT_EQ_INT(ckpt_dtype_from_name(NULL), CKPT_DTYPE_INVALID);
    ASSERT_TRUE(ckpt_dtype_is_float(CKPT_DTYPE_F8_E5M2));
    ASSERT_TRUE(ckpt_dtype_is_float(CKPT_DTYPE_F64));
    ASSERT_TRUE(!ckpt_dtype_is_float(CKPT_DTYPE_BOOL));
    ASSERT_TRUE(!ckpt_dtype_is_float(CKPT_DTYPE_C64));
    ASSERT_TRUE(!ckpt_dtype_is_float(CKPT_DTYPE_INVALID));
}

CKPT_TEST(test_dtype_can_convert)
{
    ckpt_dtype a, b;

    for (a = CKPT_DTYPE_F64; a < CKPT_DTYPE_COUNT; a++)
        for (b = CKPT_DTYPE_F64; b < CKPT_DTYPE_COUNT; b++) {
            int complex = a >= CKPT_DTYPE_C64 || b >= CKPT_DTYPE_C64;
            ASSERT_EQ_INT(ckpt_dtype_can_convert(a, b), !complex || a == b);
        }
    ASSERT_TRUE(!ckpt_dtype_can_convert(CKPT_DTYPE_INVALID, CKPT_DTYPE_F32));
    ASSERT_TRUE(!ckpt_dtype_can_convert(CKPT_DTYPE_F32, CKPT_DTYPE_COUNT));
}

CKPT_TEST(test_dtype_unsupported_pairs)
{
    float f[2] = { 1, 2 }, g[2];
    double c[2] = { 3, 4 }, c2[2];

    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_dtype_convert(CKPT_DTYPE_F32, g, CKPT_DTYPE_C64, f, 1));
    ASSERT_ERROR_MENTIONS("complex64");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_dtype_convert(CKPT_DTYPE_C128, c2, CKPT_DTYPE_F64, c, 1));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_dtype_convert(CKPT_DTYPE_INVALID, g, CKPT_DTYPE_F32, f, 1));
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_C64, g, CKPT_DTYPE_C64, f, 1));
    ASSERT_TRUE(g[0] == 1 && g[1] == 2);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_C64, f, CKPT_DTYPE_C64, f, 1));
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F32, g, CKPT_DTYPE_F16, f, 0));
}

/* Every half pattern to float, double and bfloat16. */
CKPT_TEST(test_dtype_half_all_patterns)
{
    vectors v;
    uint16_t in[65536];
    const uint32_t *f32;
    const uint16_t *bf16;
    double *f64 = malloc(65536 * sizeof *f64);
    uint32_t i;

    ASSERT_TRUE(f64 != NULL);
    ASSERT_OK(vectors_open(&v, "vectors/half_all.bin.gz", 0));
    f32 = vectors_take(&v, 65536, 4);
    bf16 = vectors_take(&v, 65536, 2);
    ASSERT_TRUE(f32 && bf16);
    for (i = 0; i < 65536; i++) {
        in[i] = (uint16_t)i;
        if (f32_bits(ckpt_f16_to_f32((uint16_t)i)) != f32[i]) {
            ckpt_test_fail(__FILE__, __LINE__, "half 0x%04x -> 0x%08x, torch 0x%08x", i,
                           f32_bits(ckpt_f16_to_f32((uint16_t)i)), f32[i]);
            break;
        }
    }
    ASSERT_EQ_INT(check_convert("half->float", CKPT_DTYPE_F32, CKPT_DTYPE_F16, in, f32, 65536), 0);
    ASSERT_EQ_INT(check_convert("half->bfloat16", CKPT_DTYPE_BF16, CKPT_DTYPE_F16, in, bf16, 65536), 0);
    /* float -> double is checked against torch in the float cases; half -> double is the
     * composition of the two exact conversions. */
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F64, f64, CKPT_DTYPE_F32, f32, 65536));
    ASSERT_EQ_INT(check_convert("half->double", CKPT_DTYPE_F64, CKPT_DTYPE_F16, in, f64, 65536), 0);
    free(f64);
    free(v.data);
}

CKPT_TEST(test_dtype_bf16_all_patterns)
{
    vectors v;
    uint16_t in[65536];
    const uint32_t *f32;
    const uint16_t *f16;
    uint32_t i;

    ASSERT_OK(vectors_open(&v, "vectors/bf16_all.bin.gz", 0));
    f32 = vectors_take(&v, 65536, 4);
    f16 = vectors_take(&v, 65536, 2);
    ASSERT_TRUE(f32 && f16);
    for (i = 0; i < 65536; i++) {
        in[i] = (uint16_t)i;
        if (f32_bits(ckpt_bf16_to_f32((uint16_t)i)) != f32[i]) {
            ckpt_test_fail(__FILE__, __LINE__, "bfloat16 0x%04x differs", i);
            break;
        }
    }
    ASSERT_EQ_INT(check_convert("bf16->float", CKPT_DTYPE_F32, CKPT_DTYPE_BF16, in, f32, 65536), 0);
    ASSERT_EQ_INT(check_convert("bf16->half", CKPT_DTYPE_F16, CKPT_DTYPE_BF16, in, f16, 65536), 0);
    free(v.data);
}

/* Ties, denormals, overflow, NaN payloads, +-0 and random floats to every type. */
CKPT_TEST(test_dtype_float_cases)
{
    vectors v;
    const uint32_t *in;
    const void *f16, *bf16, *e4, *e5, *f64, *i8, *u8, *i16, *i32, *i64, *b;
    uint32_t n, i;

    ASSERT_OK(vectors_open(&v, "vectors/f32_cases.bin.gz", 1));
    n = v.n;
    in = vectors_take(&v, n, 4);
    f16 = vectors_take(&v, n, 2);
    bf16 = vectors_take(&v, n, 2);
    e4 = vectors_take(&v, n, 1);
    e5 = vectors_take(&v, n, 1);
    f64 = vectors_take(&v, n, 8);
    i8 = vectors_take(&v, n, 1);
    u8 = vectors_take(&v, n, 1);
    i16 = vectors_take(&v, n, 2);
    i32 = vectors_take(&v, n, 4);
    i64 = vectors_take(&v, n, 8);
    b = vectors_take(&v, n, 1);
    ASSERT_TRUE(b != NULL && n > 10000);
    ASSERT_EQ_INT(check_convert("float->half", CKPT_DTYPE_F16, CKPT_DTYPE_F32, in, f16, n), 0);
    ASSERT_EQ_INT(check_convert("float->bfloat16", CKPT_DTYPE_BF16, CKPT_DTYPE_F32, in, bf16, n), 0);
    ASSERT_EQ_INT(check_convert("float->e4m3fn", CKPT_DTYPE_F8_E4M3FN, CKPT_DTYPE_F32, in, e4, n), 0);
    ASSERT_EQ_INT(check_convert("float->e5m2", CKPT_DTYPE_F8_E5M2, CKPT_DTYPE_F32, in, e5, n), 0);
    ASSERT_EQ_INT(check_convert("float->double", CKPT_DTYPE_F64, CKPT_DTYPE_F32, in, f64, n), 0);
    ASSERT_EQ_INT(check_convert("float->int8", CKPT_DTYPE_I8, CKPT_DTYPE_F32, in, i8, n), 0);
    ASSERT_EQ_INT(check_convert("float->uint8", CKPT_DTYPE_U8, CKPT_DTYPE_F32, in, u8, n), 0);
    ASSERT_EQ_INT(check_convert("float->int16", CKPT_DTYPE_I16, CKPT_DTYPE_F32, in, i16, n), 0);
    ASSERT_EQ_INT(check_convert("float->int32", CKPT_DTYPE_I32, CKPT_DTYPE_F32, in, i32, n), 0);
    ASSERT_EQ_INT(check_convert("float->int64", CKPT_DTYPE_I64, CKPT_DTYPE_F32, in, i64, n), 0);
    ASSERT_EQ_INT(check_convert("float->bool", CKPT_DTYPE_BOOL, CKPT_DTYPE_F32, in, b, n), 0);
    /* The single-value helpers agree with the array conversion. */
    for (i = 0; i < n; i++) {
        float f = f32_of(in[i]);
        uint16_t h, bb;
        memcpy(&h, (const uint8_t *)f16 + 2 * i, 2);
        memcpy(&bb, (const uint8_t *)bf16 + 2 * i, 2);
        ASSERT_EQ_INT(ckpt_f32_to_f16(f), h);
        ASSERT_EQ_INT(ckpt_f32_to_bf16(f), bb);
        ASSERT_EQ_INT(ckpt_f32_to_f8e4m3fn(f), ((const uint8_t *)e4)[i]);
        ASSERT_EQ_INT(ckpt_f32_to_f8e5m2(f), ((const uint8_t *)e5)[i]);
    }
    free(v.data);
}

/* Doubles: double rounding through float for half and bfloat16, int truncation rules. */
CKPT_TEST(test_dtype_double_cases)
{
    vectors v;
    const void *in, *f32, *f16, *bf16, *i8, *u8, *i16, *i32, *i64, *b;
    uint32_t n;

    ASSERT_OK(vectors_open(&v, "vectors/f64_cases.bin.gz", 1));
    n = v.n;
    in = vectors_take(&v, n, 8);
    f32 = vectors_take(&v, n, 4);
    f16 = vectors_take(&v, n, 2);
    bf16 = vectors_take(&v, n, 2);
    i8 = vectors_take(&v, n, 1);
    u8 = vectors_take(&v, n, 1);
    i16 = vectors_take(&v, n, 2);
    i32 = vectors_take(&v, n, 4);
    i64 = vectors_take(&v, n, 8);
    b = vectors_take(&v, n, 1);
    ASSERT_TRUE(b != NULL && n > 5000);
    ASSERT_EQ_INT(check_convert("double->float", CKPT_DTYPE_F32, CKPT_DTYPE_F64, in, f32, n), 0);
    ASSERT_EQ_INT(check_convert("double->half", CKPT_DTYPE_F16, CKPT_DTYPE_F64, in, f16, n), 0);
    ASSERT_EQ_INT(check_convert("double->bfloat16", CKPT_DTYPE_BF16, CKPT_DTYPE_F64, in, bf16, n), 0);
    ASSERT_EQ_INT(check_convert("double->int8", CKPT_DTYPE_I8, CKPT_DTYPE_F64, in, i8, n), 0);
    ASSERT_EQ_INT(check_convert("double->uint8", CKPT_DTYPE_U8, CKPT_DTYPE_F64, in, u8, n), 0);
    ASSERT_EQ_INT(check_convert("double->int16", CKPT_DTYPE_I16, CKPT_DTYPE_F64, in, i16, n), 0);
    ASSERT_EQ_INT(check_convert("double->int32", CKPT_DTYPE_I32, CKPT_DTYPE_F64, in, i32, n), 0);
    ASSERT_EQ_INT(check_convert("double->int64", CKPT_DTYPE_I64, CKPT_DTYPE_F64, in, i64, n), 0);
    ASSERT_EQ_INT(check_convert("double->bool", CKPT_DTYPE_BOOL, CKPT_DTYPE_F64, in, b, n), 0);
    free(v.data);
}

CKPT_TEST(test_dtype_integer_cases)
{
    vectors v;
    const void *in, *f64, *f32, *f16, *bf16, *i8, *u8, *i16, *i32, *b, *in32, *f32_32, *bf16_32, *f16_32;
    uint32_t n;

    ASSERT_OK(vectors_open(&v, "vectors/int_cases.bin.gz", 1));
    n = v.n;
    in = vectors_take(&v, n, 8);
    f64 = vectors_take(&v, n, 8);
    f32 = vectors_take(&v, n, 4);
    f16 = vectors_take(&v, n, 2);
    bf16 = vectors_take(&v, n, 2);
    i8 = vectors_take(&v, n, 1);
    u8 = vectors_take(&v, n, 1);
    i16 = vectors_take(&v, n, 2);
    i32 = vectors_take(&v, n, 4);
    b = vectors_take(&v, n, 1);
    in32 = vectors_take(&v, n, 4);
    f32_32 = vectors_take(&v, n, 4);
    bf16_32 = vectors_take(&v, n, 2);
    f16_32 = vectors_take(&v, n, 2);
    ASSERT_TRUE(f16_32 != NULL && n > 1000);
    ASSERT_EQ_INT(check_convert("int64->double", CKPT_DTYPE_F64, CKPT_DTYPE_I64, in, f64, n), 0);
    ASSERT_EQ_INT(check_convert("int64->float", CKPT_DTYPE_F32, CKPT_DTYPE_I64, in, f32, n), 0);
    ASSERT_EQ_INT(check_convert("int64->half", CKPT_DTYPE_F16, CKPT_DTYPE_I64, in, f16, n), 0);
    ASSERT_EQ_INT(check_convert("int64->bfloat16", CKPT_DTYPE_BF16, CKPT_DTYPE_I64, in, bf16, n), 0);
    ASSERT_EQ_INT(check_convert("int64->int8", CKPT_DTYPE_I8, CKPT_DTYPE_I64, in, i8, n), 0);
    ASSERT_EQ_INT(check_convert("int64->uint8", CKPT_DTYPE_U8, CKPT_DTYPE_I64, in, u8, n), 0);
    ASSERT_EQ_INT(check_convert("int64->int16", CKPT_DTYPE_I16, CKPT_DTYPE_I64, in, i16, n), 0);
    ASSERT_EQ_INT(check_convert("int64->int32", CKPT_DTYPE_I32, CKPT_DTYPE_I64, in, i32, n), 0);
    ASSERT_EQ_INT(check_convert("int64->bool", CKPT_DTYPE_BOOL, CKPT_DTYPE_I64, in, b, n), 0);
    ASSERT_EQ_INT(check_convert("int32->float", CKPT_DTYPE_F32, CKPT_DTYPE_I32, in32, f32_32, n), 0);
    ASSERT_EQ_INT(check_convert("int32->bfloat16", CKPT_DTYPE_BF16, CKPT_DTYPE_I32, in32, bf16_32, n), 0);
    ASSERT_EQ_INT(check_convert("int32->half", CKPT_DTYPE_F16, CKPT_DTYPE_I32, in32, f16_32, n), 0);
    free(v.data);
}

/* All 256 float8 patterns decode as c10 decodes them, and re-encode to themselves. */
CKPT_TEST(test_dtype_fp8_all_patterns)
{
    vectors v;
    const uint32_t *e4, *e5;
    uint8_t in[256], back[256];
    float f[256];
    int i;

    ASSERT_OK(vectors_open(&v, "vectors/fp8_all.bin.gz", 0));
    e4 = vectors_take(&v, 256, 4);
    e5 = vectors_take(&v, 256, 4);
    ASSERT_TRUE(e4 && e5);
    for (i = 0; i < 256; i++) {
        in[i] = (uint8_t)i;
        ASSERT_EQ_INT(f32_bits(ckpt_f8e4m3fn_to_f32((uint8_t)i)), e4[i]);
        ASSERT_EQ_INT(f32_bits(ckpt_f8e5m2_to_f32((uint8_t)i)), e5[i]);
    }
    ASSERT_EQ_INT(check_convert("e4m3fn->float", CKPT_DTYPE_F32, CKPT_DTYPE_F8_E4M3FN, in, e4, 256), 0);
    ASSERT_EQ_INT(check_convert("e5m2->float", CKPT_DTYPE_F32, CKPT_DTYPE_F8_E5M2, in, e5, 256), 0);
    memcpy(f, e4, sizeof f);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F8_E4M3FN, back, CKPT_DTYPE_F32, f, 256));
    ASSERT_TRUE(memcmp(back, in, 256) == 0);
    /* e5m2 NaNs 0x7D and 0x7E re-encode as c10's NaN 0x7F. */
    memcpy(f, e5, sizeof f);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F8_E5M2, back, CKPT_DTYPE_F32, f, 256));
    for (i = 0; i < 256; i++)
        ASSERT_EQ_INT(back[i], (i & 0x7F) > 0x7C ? (i | 0x7F) : i);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F8_E5M2, back, CKPT_DTYPE_F8_E4M3FN, in, 256));
    ASSERT_EQ_INT(back[0x7E], 0x5F); /* 448 is exact in e5m2 */
    ASSERT_EQ_INT(back[0xFF], 0xFF);
    free(v.data);
}

/* NaN and other values through float to bfloat16 by the scalar rule, and int8 via float. */
CKPT_TEST(test_dtype_fp8_to_others)
{
    uint8_t e4[4] = { 0x7F, 0xFF, 0x38, 0x01 }, i8[4];
    uint16_t bf[4], h[4];
    double d[4];

    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_BF16, bf, CKPT_DTYPE_F8_E4M3FN, e4, 4));
    ASSERT_EQ_INT(bf[0], 0x7FC0);
    ASSERT_EQ_INT(bf[1], 0x7FC0);
    ASSERT_EQ_INT(bf[2], 0x3F80); /* 1.0 */
    ASSERT_EQ_INT(bf[3], 0x3B00); /* 2^-9 */
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F16, h, CKPT_DTYPE_F8_E4M3FN, e4, 4));
    ASSERT_EQ_INT(h[0], 0x7E00);
    ASSERT_EQ_INT(h[1], 0xFE00);
    ASSERT_EQ_INT(h[3], 0x1800);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F64, d, CKPT_DTYPE_F8_E4M3FN, e4, 4));
    ASSERT_TRUE(isnan(d[0]) && d[2] == 1.0 && d[3] == 1.0 / 512);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_I8, i8, CKPT_DTYPE_F8_E4M3FN, e4, 4));
    ASSERT_TRUE(i8[0] == 0 && i8[2] == 1 && i8[3] == 0);
}

/* The unsigned types torch 1.13 lacks follow the documented x86 static_cast rules. */
CKPT_TEST(test_dtype_wide_unsigned_rules)
{
    double in[10] = { -1.5, 70000.7, 3e9, 5e9, 1.8e19, 18446744073709551616.0, NAN, -1e20, -2.0, 0.9 };
    uint16_t u16[10];
    uint32_t u32[10];
    uint64_t u64[10], big[2] = { UINT64_MAX, (uint64_t)1 << 63 };
    float f[2];
    uint8_t i8[2];

    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_U16, u16, CKPT_DTYPE_F64, in, 10));
    ASSERT_EQ_INT(u16[0], 0xFFFF);
    ASSERT_EQ_INT(u16[1], 70000 - 65536);
    ASSERT_EQ_INT(u16[2], 0);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_U32, u32, CKPT_DTYPE_F64, in, 10));
    ASSERT_EQ_INT(u32[0], 0xFFFFFFFFu);
    ASSERT_EQ_INT(u32[2], 3000000000u);
    ASSERT_EQ_INT(u32[3], (uint32_t)5000000000ull);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_U64, u64, CKPT_DTYPE_F64, in, 10));
    ASSERT_TRUE(u64[0] == UINT64_MAX && u64[4] == 18000000000000000000ull);
    ASSERT_TRUE(u64[5] == 0 && u64[6] == 0 && u64[7] == (uint64_t)1 << 63);
    ASSERT_TRUE(u64[8] == UINT64_MAX - 1 && u64[9] == 0);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F32, f, CKPT_DTYPE_U64, big, 2));
    ASSERT_TRUE(f[0] == 18446744073709551616.0f && f[1] == 9223372036854775808.0f);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_I8, i8, CKPT_DTYPE_U64, big, 2));
    ASSERT_TRUE(i8[0] == 0xFF && i8[1] == 0);
}

CKPT_TEST(test_dtype_bool)
{
    uint8_t raw[4] = { 0, 1, 2, 255 }, out8[4];
    int32_t i32[4];
    float f[4], g[4] = { 0.0f, -0.0f, NAN, 1e-45f };
    uint16_t h[4];

    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_I32, i32, CKPT_DTYPE_BOOL, raw, 4));
    ASSERT_TRUE(i32[0] == 0 && i32[1] == 1 && i32[2] == 1 && i32[3] == 1);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F32, f, CKPT_DTYPE_BOOL, raw, 4));
    ASSERT_TRUE(f[0] == 0 && f[1] == 1 && f[2] == 1 && f[3] == 1);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_BF16, h, CKPT_DTYPE_BOOL, raw, 4));
    ASSERT_TRUE(h[0] == 0 && h[1] == 0x3F80 && h[3] == 0x3F80);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_BOOL, out8, CKPT_DTYPE_F32, g, 4));
    ASSERT_TRUE(out8[0] == 0 && out8[1] == 0 && out8[2] == 1 && out8[3] == 1);
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_BOOL, out8, CKPT_DTYPE_U8, raw, 4));
    ASSERT_TRUE(out8[0] == 0 && out8[1] == 1 && out8[2] == 1 && out8[3] == 1);
    /* Same type is a plain copy, whatever the bytes. */
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_BOOL, out8, CKPT_DTYPE_BOOL, raw, 4));
    ASSERT_TRUE(memcmp(out8, raw, 4) == 0);
}

CKPT_TEST(test_dtype_load_f64)
{
    uint16_t h = 0x3C00, bf = 0xC040;
    int64_t big = INT64_MIN;
    uint8_t b = 7, e5 = 0x7C;
    double c[2] = { 2.5, -1 };

    ASSERT_TRUE(ckpt_dtype_load_f64(CKPT_DTYPE_F16, &h) == 1.0);
    ASSERT_TRUE(ckpt_dtype_load_f64(CKPT_DTYPE_BF16, &bf) == -3.0);
    ASSERT_TRUE(ckpt_dtype_load_f64(CKPT_DTYPE_I64, &big) == -9223372036854775808.0);
    ASSERT_TRUE(ckpt_dtype_load_f64(CKPT_DTYPE_BOOL, &b) == 1.0);
    ASSERT_TRUE(isinf(ckpt_dtype_load_f64(CKPT_DTYPE_F8_E5M2, &e5)));
    ASSERT_TRUE(ckpt_dtype_load_f64(CKPT_DTYPE_C128, c) == 2.5);
    ASSERT_TRUE(isnan(ckpt_dtype_load_f64(CKPT_DTYPE_INVALID, c)));
}

/* Large arrays are split across threads: the bytes must not depend on how many. */
CKPT_TEST(test_dtype_thread_count_independent)
{
    size_t n = ((size_t)3 << 20) + 12345, i;
    uint32_t *in = malloc(n * 4), x = 0x12345678u;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    uint8_t *e = malloc(n);

    ASSERT_TRUE(in && a && b && e);
    for (i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        in[i] = x;
    }
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_BF16, a, CKPT_DTYPE_F32, in, n));
#ifdef _OPENMP
    omp_set_num_threads(4);
#endif
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_BF16, b, CKPT_DTYPE_F32, in, n));
    ASSERT_TRUE(memcmp(a, b, n * 2) == 0);
    for (i = 0; i < n; i += 997)
        ASSERT_EQ_INT(a[i], ckpt_f32_to_bf16(f32_of(in[i])));
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F16, b, CKPT_DTYPE_F32, in, n));
    for (i = 0; i < n; i += 997)
        ASSERT_EQ_INT(b[i], ckpt_f32_to_f16(f32_of(in[i])));
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F8_E4M3FN, e, CKPT_DTYPE_F32, in, n));
    for (i = 0; i < n; i += 997)
        ASSERT_EQ_INT(e[i], ckpt_f32_to_f8e4m3fn(f32_of(in[i])));
    ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F32, in, CKPT_DTYPE_BF16, a, n));
    for (i = 0; i < n; i += 997)
        ASSERT_EQ_INT(in[i], (uint32_t)a[i] << 16);
    free(in);
    free(a);
    free(b);
    free(e);
}
