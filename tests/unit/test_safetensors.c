/* safetensors: the fixtures written by the real package open with the right names, dtypes,
 * shapes and values; every validation rule of the reference rejects a crafted file; the
 * writer reproduces the reference writer's bytes. */
#include "test.h"

#include <stdlib.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------------- */

static void put_u64le(uint8_t *p, uint64_t v)
{
    int i;
    for (i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A file whose length field is `n` (the JSON's own length when n == UINT64_MAX). */
static void write_st_n(const char *path, uint64_t n, const char *json, const void *data, size_t n_data)
{
    size_t jn = strlen(json);
    uint8_t *buf = malloc(8 + jn + n_data);

    put_u64le(buf, n == UINT64_MAX ? jn : n);
    memcpy(buf + 8, json, jn);
    if (n_data)
        memcpy(buf + 8 + jn, data, n_data);
    ckpt_test_write_file(path, buf, 8 + jn + n_data);
    free(buf);
}

static void write_st(const char *path, const char *json, const void *data, size_t n_data)
{
    write_st_n(path, UINT64_MAX, json, data, n_data);
}

static int open_st(ckpt_ckpt **c, const char *path)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    o.format = "safetensors";
    return ckpt_open(c, path, &o);
}

static const uint8_t zeros[64];

/* A crafted file must fail with `code` and a message naming the file and `needle`. */
#define EXPECT_BAD_N(code, n, json, n_data, needle)                              \
    do {                                                                         \
        ckpt_ckpt *c_ = NULL;                                                    \
        write_st_n("bad.safetensors", (n), (json), zeros, (n_data));             \
        ASSERT_FAILS(code, open_st(&c_, "bad.safetensors"));                     \
        ASSERT_TRUE(c_ == NULL);                                                 \
        ASSERT_ERROR_MENTIONS("bad.safetensors: safetensors: ");                 \
        ASSERT_ERROR_MENTIONS(needle);                                           \
    } while (0)
#define EXPECT_BAD(json, n_data, needle) EXPECT_BAD_N(CKPT_EFORMAT, UINT64_MAX, json, n_data, needle)
#define EXPECT_UNSUPPORTED(json, n_data, needle) EXPECT_BAD_N(CKPT_EUNSUPPORTED, UINT64_MAX, json, n_data, needle)

#define EXPECT_GOOD(json, n_data, n_tensors)                                     \
    do {                                                                         \
        ckpt_ckpt *c_ = NULL;                                                    \
        write_st("good.safetensors", (json), zeros, (n_data));                  \
        ASSERT_OK(open_st(&c_, "good.safetensors"));                             \
        ASSERT_EQ_INT(ckpt_tensor_count(c_), (n_tensors));                       \
        ckpt_close(c_);                                                          \
    } while (0)

/* Check a tensor's dtype, shape and raw little-endian bytes. */
static int tensor_is(const ckpt_ckpt *c, const char *name, ckpt_dtype dtype, int ndim, const int64_t *shape,
                     const void *bytes, size_t n_bytes)
{
    const ckpt_tensor *t = ckpt_tensor_find(c, name);
    uint8_t buf[256];
    int d;

    if (!t || t->dtype != dtype || t->ndim != ndim || strcmp(t->name, name) != 0 || ckpt_tensor_nbytes(t) != n_bytes ||
        n_bytes > sizeof buf) {
        fprintf(stderr, "  tensor '%s': missing or wrong dtype/ndim/size\n", name);
        return 0;
    }
    for (d = 0; d < ndim; d++)
        if (t->shape[d] != shape[d])
            return 0;
    if (!ckpt_tensor_is_contiguous(t))
        return 0;
    if (ckpt_tensor_read(t, 0, ckpt_tensor_numel(t), dtype, buf) < 0)
        return 0;
    return n_bytes == 0 || memcmp(buf, bytes, n_bytes) == 0;
}

static int files_equal(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    unsigned char *x = ckpt_test_read_file(a, &na), *y = ckpt_test_read_file(b, &nb);
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;

    free(x);
    free(y);
    return eq;
}

static int convert_to(const ckpt_ckpt *c, const char *out)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_convert_report rep;
    int rc;

    memset(&rep, 0, sizeof rep);
    rc = ckpt_convert(c, out, &o, &rep);
    ckpt_convert_report_dispose(&rep);
    return rc;
}

/* ---- fixtures written by the real package ------------------------------------ */

CKPT_TEST(test_safetensors_all_dtypes)
{
    static const int64_t s1[] = { 1 }, s2[] = { 2 }, s3[] = { 3 }, s4[] = { 4 }, s23[] = { 2, 3 },
                         s34[] = { 3, 4 }, s0[] = { 0 }, s203[] = { 2, 0, 3 };
    static const uint8_t b_bool[] = { 1, 0, 1 }, b_u8[] = { 0, 1, 2, 3, 4, 5 };
    static const int8_t b_i8[] = { -128, -1, 0, 127 };
    static const int16_t b_i16[] = { -32768, 1, 32767 };
    static const uint16_t b_u16[] = { 0, 1, 65535 }, b_f16[] = { 0x3C00, 0xC100, 0x7BFF },
                          b_bf16[] = { 0x3F80, 0xC000, 0x4049 };
    static const int32_t b_i32[] = { INT32_MIN, 7, INT32_MAX };
    static const uint32_t b_u32[] = { 0, UINT32_MAX };
    static const int64_t b_i64[] = { INT64_MIN, 42, INT64_MAX }, b_si64[] = { -7 };
    static const uint64_t b_u64[] = { 0, UINT64_MAX };
    static const float b_f32[] = { 0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4.5f, 5, 5.5f }, b_sf32[] = { 3.5f },
                       b_c64[] = { 1, 2, -3.5f, 0.25f };
    static const double b_f64[] = { 1.0 / 3.0, -1e300 };
    static const uint8_t b_e4m3[] = { 0x38, 0xC0, 0x7E, 0x00 }, b_e5m2[] = { 0x3C, 0xC0, 0x7B, 0x00 };
    static const char *const order[] = { "u64", "i64", "scalar_i64", "f64", "c64", "empty_f32", "f32", "scalar_f32" };
    ckpt_ckpt *c;
    const ckpt_value *root, *meta;
    size_t i;

    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/all_dtypes.safetensors"), NULL));
    ASSERT_EQ_STR(ckpt_format_name(c), "safetensors");
    ASSERT_EQ_INT(ckpt_tensor_count(c), 20);
    /* Header order, which the reference writer sorted by dtype (descending) then name. */
    for (i = 0; i < sizeof order / sizeof order[0]; i++)
        ASSERT_EQ_STR(ckpt_tensor_at(c, i)->name, order[i]);
    ASSERT_TRUE(tensor_is(c, "bool", CKPT_DTYPE_BOOL, 1, s3, b_bool, sizeof b_bool));
    ASSERT_TRUE(tensor_is(c, "u8", CKPT_DTYPE_U8, 2, s23, b_u8, sizeof b_u8));
    ASSERT_TRUE(tensor_is(c, "i8", CKPT_DTYPE_I8, 1, s4, b_i8, sizeof b_i8));
    ASSERT_TRUE(tensor_is(c, "i16", CKPT_DTYPE_I16, 1, s3, b_i16, sizeof b_i16));
    ASSERT_TRUE(tensor_is(c, "u16", CKPT_DTYPE_U16, 1, s3, b_u16, sizeof b_u16));
    ASSERT_TRUE(tensor_is(c, "i32", CKPT_DTYPE_I32, 1, s3, b_i32, sizeof b_i32));
    ASSERT_TRUE(tensor_is(c, "u32", CKPT_DTYPE_U32, 1, s2, b_u32, sizeof b_u32));
    ASSERT_TRUE(tensor_is(c, "i64", CKPT_DTYPE_I64, 1, s3, b_i64, sizeof b_i64));
    ASSERT_TRUE(tensor_is(c, "u64", CKPT_DTYPE_U64, 1, s2, b_u64, sizeof b_u64));
    ASSERT_TRUE(tensor_is(c, "f16", CKPT_DTYPE_F16, 1, s3, b_f16, sizeof b_f16));
    ASSERT_TRUE(tensor_is(c, "bf16", CKPT_DTYPE_BF16, 1, s3, b_bf16, sizeof b_bf16));
    ASSERT_TRUE(tensor_is(c, "f32", CKPT_DTYPE_F32, 2, s34, b_f32, sizeof b_f32));
    ASSERT_TRUE(tensor_is(c, "f64", CKPT_DTYPE_F64, 1, s2, b_f64, sizeof b_f64));
    ASSERT_TRUE(tensor_is(c, "f8_e4m3", CKPT_DTYPE_F8_E4M3FN, 1, s4, b_e4m3, sizeof b_e4m3));
    ASSERT_TRUE(tensor_is(c, "f8_e5m2", CKPT_DTYPE_F8_E5M2, 1, s4, b_e5m2, sizeof b_e5m2));
    ASSERT_TRUE(tensor_is(c, "c64", CKPT_DTYPE_C64, 1, s2, b_c64, sizeof b_c64));
    ASSERT_TRUE(tensor_is(c, "scalar_f32", CKPT_DTYPE_F32, 0, s1, b_sf32, sizeof b_sf32));
    ASSERT_TRUE(tensor_is(c, "scalar_i64", CKPT_DTYPE_I64, 0, s1, b_si64, sizeof b_si64));
    ASSERT_TRUE(tensor_is(c, "empty_f32", CKPT_DTYPE_F32, 1, s0, NULL, 0));
    ASSERT_TRUE(tensor_is(c, "empty_i32", CKPT_DTYPE_I32, 3, s203, NULL, 0));
    /* Each tensor owns its storage: one raw extent at 8 + N + begin. */
    ASSERT_EQ_INT(ckpt_tensor_find(c, "f32")->storage->n_extents, 1);
    ASSERT_EQ_INT(ckpt_tensor_find(c, "f32")->storage->extents[0].encoding, CKPT_EXTENT_RAW);
    root = ckpt_root(c);
    ASSERT_TRUE(root && root->kind == CKPT_VAL_DICT);
    ASSERT_EQ_INT(root->u.dict.map.n, 21);
    meta = ckpt_value_dict_get(root, "__metadata__");
    ASSERT_TRUE(meta && meta->kind == CKPT_VAL_DICT && meta->u.dict.map.n == 1);
    ASSERT_TRUE(ckpt_value_is_str(ckpt_value_dict_get(meta, "format"), "pt"));
    ASSERT_TRUE(ckpt_value_dict_get(root, "bf16")->kind == CKPT_VAL_TENSOR);
    ckpt_close(c);
}

CKPT_TEST(test_safetensors_no_tensors_no_metadata)
{
    static const int16_t x[] = { 0, 1, 2, 3 };
    static const int64_t s4[] = { 4 };
    ckpt_ckpt *c;

    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/no_tensors.safetensors"), NULL));
    ASSERT_EQ_INT(ckpt_tensor_count(c), 0);
    ASSERT_TRUE(ckpt_value_dict_get(ckpt_root(c), "__metadata__") != NULL);
    ckpt_close(c);
    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/no_metadata.safetensors"), NULL));
    ASSERT_TRUE(tensor_is(c, "x", CKPT_DTYPE_I16, 1, s4, x, sizeof x));
    ASSERT_TRUE(ckpt_value_dict_get(ckpt_root(c), "__metadata__") == NULL);
    ASSERT_EQ_INT(ckpt_root(c)->u.dict.map.n, 1);
    ckpt_close(c);
}

CKPT_TEST(test_safetensors_unsupported_dtypes)
{
    static const char *const cases[][2] = {
        { "safetensors/unsupported_f4.safetensors", "F4" },
        { "safetensors/unsupported_f8_e8m0.safetensors", "F8_E8M0" },
        { "safetensors/unsupported_f8_e4m3fnuz.safetensors", "F8_E4M3FNUZ" },
        { "safetensors/unsupported_f8_e5m2fnuz.safetensors", "F8_E5M2FNUZ" },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_ckpt *c = NULL;
        ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_open(&c, ckpt_test_data(cases[i][0]), NULL));
        ASSERT_ERROR_MENTIONS(cases[i][1]);
        ASSERT_ERROR_MENTIONS("(tensor 'w')");
    }
    EXPECT_UNSUPPORTED("{\"w\":{\"dtype\":\"F6_E2M3\",\"shape\":[4],\"data_offsets\":[0,3]}}", 3, "F6_E2M3");
    EXPECT_UNSUPPORTED("{\"w\":{\"dtype\":\"F6_E3M2\",\"shape\":[4],\"data_offsets\":[0,3]}}", 3, "F6_E3M2");
    EXPECT_UNSUPPORTED("{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
                       "\"data_offsets\":[0,1]}}", 1, "17 dimensions");
    EXPECT_UNSUPPORTED("{\"w\":{\"dtype\":\"U8\",\"shape\":[0,9007199254740993],\"data_offsets\":[0,0]}}", 0,
                       "above 2^53");
    EXPECT_UNSUPPORTED("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "NUL");
}

/* ---- sharded models ----------------------------------------------------------- */

static int check_sharded(const ckpt_ckpt *c)
{
    static const char *const order[] = { "embed.weight", "layers.0.norm", "layers.0.proj", "layers.1.norm",
                                         "layers.1.proj", "lm_head.bias", "step" };
    static const float twos[] = { 2, 2, 2, 2 };
    static const int64_t step[] = { 100 }, s4[] = { 4 }, s0[] = { 0 };
    const ckpt_value *meta;
    size_t i;

    if (ckpt_tensor_count(c) != 7)
        return 0;
    for (i = 0; i < 7; i++)
        if (strcmp(ckpt_tensor_at(c, i)->name, order[i]) != 0)
            return 0;
    meta = ckpt_value_dict_get(ckpt_root(c), "__metadata__");
    return tensor_is(c, "layers.1.norm", CKPT_DTYPE_F32, 1, s4, twos, sizeof twos) &&
           tensor_is(c, "step", CKPT_DTYPE_I64, 0, s4, step, sizeof step) &&
           tensor_is(c, "lm_head.bias", CKPT_DTYPE_F32, 1, s0, NULL, 0) &&
           ckpt_tensor_find(c, "layers.1.proj")->dtype == CKPT_DTYPE_BF16 && meta &&
           ckpt_value_dict_get(meta, "total_size") && ckpt_value_dict_get(meta, "total_size")->u.integer == 232 &&
           ckpt_note_count(c) == 0;
}

CKPT_TEST(test_safetensors_sharded)
{
    ckpt_ckpt *c;

    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/sharded/model.safetensors.index.json"), NULL));
    ASSERT_EQ_STR(ckpt_format_name(c), "safetensors");
    ASSERT_TRUE(check_sharded(c));
    ckpt_close(c);
    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/sharded"), NULL));
    ASSERT_EQ_STR(ckpt_format_name(c), "safetensors");
    ASSERT_TRUE(check_sharded(c));
    ckpt_close(c);
}

/* Copy the fixture shards here and write an index of our own. */
static void shard_setup(const char *index_json)
{
    static const char *const names[] = { "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                         "model-00003-of-00003.safetensors" };
    size_t i, n;

    for (i = 0; i < 3; i++) {
        char rel[128];
        unsigned char *data;
        snprintf(rel, sizeof rel, "safetensors/sharded/%s", names[i]);
        data = ckpt_test_read_file(ckpt_test_data(rel), &n);
        ckpt_test_write_file(names[i], data, n);
        free(data);
    }
    ckpt_test_write_file("model.safetensors.index.json", index_json, strlen(index_json));
}

#define S1 "\"model-00001-of-00003.safetensors\""
#define S2 "\"model-00002-of-00003.safetensors\""
#define S3 "\"model-00003-of-00003.safetensors\""
#define WM_TAIL "\"layers.0.proj\":" S2 ",\"layers.1.norm\":" S2 ",\"layers.1.proj\":" S3 ",\"lm_head.bias\":" S3 ",\"step\":" S3
#define WM_OK "{\"embed.weight\":" S1 ",\"layers.0.norm\":" S1 "," WM_TAIL "}"

#define EXPECT_BAD_INDEX(json, needle)                                           \
    do {                                                                         \
        ckpt_ckpt *c_ = NULL;                                                    \
        shard_setup(json);                                                       \
        ASSERT_FAILS(CKPT_EFORMAT, open_st(&c_, "model.safetensors.index.json"));   \
        ASSERT_ERROR_MENTIONS("model.safetensors.index.json: safetensors: ");    \
        ASSERT_ERROR_MENTIONS(needle);                                           \
    } while (0)

CKPT_TEST(test_safetensors_sharded_errors)
{
    ckpt_ckpt *c = NULL;

    shard_setup("{\"metadata\":{\"total_size\":1},\"weight_map\":" WM_OK "}");
    ASSERT_OK(ckpt_open(&c, "model.safetensors.index.json", NULL));
    ASSERT_EQ_INT(ckpt_note_count(c), 1);
    ASSERT_TRUE(strstr(ckpt_note_at(c, 0), "total_size") != NULL);
    ckpt_close(c);
    /* The shard holds layers.0.norm, the weight_map does not list it. */
    EXPECT_BAD_INDEX("{\"weight_map\":{\"embed.weight\":" S1 "," WM_TAIL "}}", "(tensor 'layers.0.norm')");
    /* Listed, but not in the shard named. */
    EXPECT_BAD_INDEX("{\"weight_map\":{\"embed.weight\":" S1 ",\"layers.0.norm\":" S1 ",\"ghost\":" S1 "," WM_TAIL
                     "}}", "lacks a tensor the weight_map puts there (tensor 'ghost')");
    /* In shard 1, listed under shard 2. */
    EXPECT_BAD_INDEX("{\"weight_map\":{\"embed.weight\":" S1 ",\"layers.0.norm\":" S2 "," WM_TAIL "}}",
                     "(tensor 'layers.0.norm')");
    EXPECT_BAD_INDEX("{\"weight_map\":{\"embed.weight\":\"/etc/passwd\"}}", "not a relative path");
    EXPECT_BAD_INDEX("{\"weight_map\":{\"embed.weight\":\"../x.safetensors\"}}", "'..'");
    EXPECT_BAD_INDEX("{\"weight_map\":{\"embed.weight\":\"a//b\"}}", "empty");
    EXPECT_BAD_INDEX("{\"weight_map\":{\"embed.weight\":3}}", "not a file name");
    EXPECT_BAD_INDEX("{\"weight_map\":{\"embed.weight\":" S1 ",\"embed.weight\":" S1 "}}", "twice");
    EXPECT_BAD_INDEX("{\"weight_map\":[]}", "no weight_map object");
    EXPECT_BAD_INDEX("{\"weight_map\":{}", "invalid JSON in index");
    /* A shard that is missing fails the open; a broken shard names itself. */
    shard_setup("{\"weight_map\":{\"x\":\"missing.safetensors\"}}");
    ASSERT_TRUE(ckpt_open(&c, "model.safetensors.index.json", NULL) < 0);
    ASSERT_ERROR_MENTIONS("missing.safetensors");
    shard_setup("{\"weight_map\":{\"x\":\"broken.safetensors\"}}");
    write_st("broken.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", zeros, 1);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "model.safetensors.index.json", NULL));
    ASSERT_ERROR_MENTIONS("broken.safetensors: safetensors: file truncated");
}

/* ---- every validation rule ------------------------------------------------------ */

CKPT_TEST(test_safetensors_bad_length)
{
    ckpt_ckpt *c = NULL;

    ckpt_test_write_file("bad.safetensors", "\x02\0\0", 3);
    ASSERT_FAILS(CKPT_EFORMAT, open_st(&c, "bad.safetensors"));
    ASSERT_ERROR_MENTIONS("header too small");
    EXPECT_BAD_N(CKPT_EFORMAT, 100000001u, "{}", 0, "header too large");
    EXPECT_BAD_N(CKPT_EFORMAT, UINT64_MAX - 1, "{}", 0, "header too large");
    EXPECT_BAD_N(CKPT_EFORMAT, 3, "{}", 0, "invalid header length");
    EXPECT_BAD_N(CKPT_EFORMAT, 0, "{}", 0, "invalid JSON");
}

CKPT_TEST(test_safetensors_bad_json)
{
    EXPECT_BAD("{\"\xff\":1}", 0, "not valid UTF-8");
    EXPECT_BAD("{\"\xc0\xaf\":1}", 0, "not valid UTF-8");       /* overlong */
    EXPECT_BAD("{\"\xed\xa0\x80\":1}", 0, "not valid UTF-8");   /* encoded surrogate */
    EXPECT_BAD("{\"a\":", 0, "invalid JSON in header");
    EXPECT_BAD("{} x", 0, "after the JSON value");
    EXPECT_BAD("{}\x0c", 0, "after the JSON value");            /* form feed is not JSON whitespace */
    EXPECT_BAD("{\"a\":[01]}", 0, "leading zero");
    EXPECT_BAD("{\"a\":[1.]}", 0, "invalid number");
    EXPECT_BAD("{\"a\":[+1]}", 0, "unexpected character");
    EXPECT_BAD("{\"a\tb\":1}", 0, "control character");
    EXPECT_BAD("{\"a\\xb\":1}", 0, "invalid escape");
    EXPECT_BAD("{\"\\ud800\":1}", 0, "surrogate");
    EXPECT_BAD("{\"\\udc00\":1}", 0, "surrogate");
    EXPECT_BAD("{\"a\":1,}", 0, "expected a string key");
    EXPECT_BAD("{\"a\":tru}", 0, "unexpected character");
    {
        /* serde_json allows 127 levels: header object, tensor entry and 125 arrays. */
        static const char head[] = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":";
        char deep[600];
        int k, levels;
        for (levels = 125; levels <= 126; levels++) {
            strcpy(deep, head);
            for (k = 0; k < levels; k++)
                strcat(deep, "[");
            for (k = 0; k < levels; k++)
                strcat(deep, "]");
            strcat(deep, "}}");
            if (levels == 125)
                EXPECT_GOOD(deep, 1, 1);
            else
                EXPECT_BAD(deep, 1, "nesting deeper than 127");
        }
    }
    EXPECT_BAD("[]", 0, "header is not a JSON object");
    EXPECT_BAD("\"x\"", 0, "header is not a JSON object");
    /* Leading and trailing JSON whitespace is fine; so is null metadata and an unknown field. */
    EXPECT_GOOD(" \n\t{\"a\" : {\"dtype\" : \"U8\", \"shape\" : [1], \"data_offsets\" : [0, 1]}}\r\n   ", 1, 1);
    EXPECT_GOOD("{\"__metadata__\":null,\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":[1.5]}}",
                1, 1);
}

CKPT_TEST(test_safetensors_bad_keys)
{
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, "duplicate key 'a' in the header");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
               "duplicate key 'dtype' in the tensor entry (tensor 'a')");
    EXPECT_BAD("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate key 'k' in __metadata__");
    EXPECT_BAD("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value of 'k' is not a string");
    EXPECT_BAD("{\"__metadata__\":[]}", 0, "__metadata__ is not a JSON object");
    EXPECT_BAD("{\"a\":[\"U8\",[1],[0,1]]}", 1, "tensor entry is not a JSON object (tensor 'a')");
    EXPECT_BAD("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "lacks 'dtype' (tensor 'a')");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "lacks 'shape'");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "lacks 'data_offsets'");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'F31'");
    EXPECT_BAD("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'f32'");
    EXPECT_BAD("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype is not a string");
    /* Keys are case-sensitive. */
    EXPECT_BAD("{\"a\":{\"DTYPE\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "lacks 'dtype'");
}

CKPT_TEST(test_safetensors_bad_numbers)
{
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1,
               "a number in shape is not a plain non-negative integer (tensor 'a')");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1, "in shape is not a plain");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", 1, "in shape is not a plain");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1e0],\"data_offsets\":[0,1]}}", 1, "in shape is not a plain");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.0]}}", 1,
               "in data_offsets is not a plain");
    /* An escaped key still names the field: the value check catches what the syntax check could not. */
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"sh\\u0061pe\":[-1],\"data_offsets\":[0,1]}}", 1,
               "shape holds a negative number");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"sh\\u0061pe\":[0.5],\"data_offsets\":[0,1]}}", 1,
               "shape holds a number that is not an integer");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}}", 1,
               "shape holds a value that is not a number");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 1, "shape is not an array");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1, "not an array of two integers");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 1, "not an array of two");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,0]}}", 1, "end 0 is before begin 1");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
               "data_offsets [0, 4] hold 4 bytes, but F32 [2] needs 8 (tensor 'a')");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0,
               "element count of the shape overflows");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F64\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,0]}}", 0,
               "bit size of the shape overflows");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "do not fill whole bytes");
}

CKPT_TEST(test_safetensors_bad_layout)
{
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2,
               "data at [1, 2) leaves a hole: the data before it ends at 0 (tensor 'a')");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}", 3, "leaves a hole: the data before it ends at 1 (tensor 'b')");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[0,2]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, "overlaps the data before it");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "overlaps");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 2,
               "1 bytes after the last tensor's data");
    EXPECT_BAD("{}", 5, "5 bytes after the last tensor's data");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 3,
               "file truncated: the tensors need 4 bytes of data, 3 present");
    /* Offsets in any header order, and empty tensors sharing an offset, are fine. */
    EXPECT_GOOD("{\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
                "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[1,1]},"
                "\"f\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[1,1]},"
                "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 2, 4);
}

CKPT_TEST(test_safetensors_bid)
{
    ckpt_ckpt *c = NULL;

    /* Without a format named, only a file that looks like safetensors is one. */
    ckpt_test_write_file("notes.txt", "just some text, not a checkpoint", 32);
    ASSERT_TRUE(ckpt_open(&c, "notes.txt", NULL) < 0);
    ASSERT_TRUE(c == NULL);
    write_st("padded.safetensors", "  {}    ", NULL, 0);
    ASSERT_OK(ckpt_open(&c, "padded.safetensors", NULL));
    ASSERT_EQ_STR(ckpt_format_name(c), "safetensors");
    ckpt_close(c);
    ASSERT_EQ_STR(ckpt_format_for_path("x/model.safetensors"), "safetensors");
}

/* ---- the writer -------------------------------------------------------------------- */

CKPT_TEST(test_safetensors_write_matches_reference)
{
    ckpt_ckpt *c;

    /* Same tensors, other layout: our header must be the reference writer's, byte for byte. */
    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/writer_shuffled.safetensors"), NULL));
    ASSERT_OK(convert_to(c, "out.safetensors"));
    ckpt_close(c);
    ASSERT_TRUE(files_equal("out.safetensors", ckpt_test_data("safetensors/writer_reference.safetensors")));
    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/writer_reference.safetensors"), NULL));
    ASSERT_OK(convert_to(c, "again.safetensors"));
    ckpt_close(c);
    ASSERT_TRUE(files_equal("again.safetensors", ckpt_test_data("safetensors/writer_reference.safetensors")));
}

CKPT_TEST(test_safetensors_round_trip)
{
    ckpt_ckpt *c, *d;
    size_t i;

    /* Every dtype, empty tensors and scalars come back as the reference wrote them. */
    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/all_dtypes.safetensors"), NULL));
    ASSERT_OK(convert_to(c, "all.safetensors"));
    ckpt_close(c);
    ASSERT_TRUE(files_equal("all.safetensors", ckpt_test_data("safetensors/all_dtypes.safetensors")));
    /* A sharded model becomes one file with the same tensors. */
    ASSERT_OK(ckpt_open(&c, ckpt_test_data("safetensors/sharded"), NULL));
    ASSERT_OK(convert_to(c, "merged.safetensors"));
    ASSERT_OK(ckpt_open(&d, "merged.safetensors", NULL));
    ASSERT_EQ_INT(ckpt_tensor_count(d), ckpt_tensor_count(c));
    for (i = 0; i < ckpt_tensor_count(c); i++) {
        const ckpt_tensor *a = ckpt_tensor_at(c, i), *b = ckpt_tensor_find(d, a->name);
        uint8_t x[256], y[256];
        ASSERT_TRUE(b && b->dtype == a->dtype && b->ndim == a->ndim && ckpt_tensor_nbytes(a) <= sizeof x);
        ASSERT_TRUE(memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim) == 0);
        ASSERT_OK(ckpt_tensor_read(a, 0, ckpt_tensor_numel(a), a->dtype, x));
        ASSERT_OK(ckpt_tensor_read(b, 0, ckpt_tensor_numel(b), b->dtype, y));
        ASSERT_TRUE(memcmp(x, y, ckpt_tensor_nbytes(a)) == 0);
    }
    ckpt_close(d);
    ckpt_close(c);
}

/* Refusals happen in write_begin, before any data is read, so the engine's writer entry can
 * be driven with tensors that have no source at all. */
#define CKPT_BUILD
#include "graph/engine.h"

static int write_tensors(const ckpt_out_tensor *tensors, const ckpt_out_blob *blobs, size_t n)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_blob_source sources[2];
    ckpt_out out;

    memset(sources, 0, sizeof sources);
    memset(&out, 0, sizeof out);
    out.n_tensors = n;
    out.tensors = tensors;
    out.n_blobs = n;
    out.blobs = blobs;
    return ckpt_writer__run(ckpt_registry__find("safetensors"), &out, sources, "w.safetensors", &o, NULL);
}

CKPT_TEST(test_safetensors_write_errors)
{
    ckpt_out_tensor t[2];
    ckpt_out_blob b[2];

    memset(t, 0, sizeof t);
    t[0].name = "z";
    t[0].dtype = b[0].dtype = CKPT_DTYPE_C128;
    t[0].ndim = 1;
    t[0].shape[0] = t[0].stride[0] = 1;
    b[0].nbytes = 16;
    ASSERT_FAILS(CKPT_EUNSUPPORTED, write_tensors(t, b, 1));
    ASSERT_ERROR_MENTIONS("w.safetensors: safetensors: no safetensors type for ");
    ASSERT_ERROR_MENTIONS("(tensor 'z')");

    t[0].dtype = b[0].dtype = CKPT_DTYPE_F32;
    b[0].nbytes = 4;
    t[1] = t[0];
    t[1].blob = 1;
    t[1].dtype = b[1].dtype = CKPT_DTYPE_F16;
    b[1].nbytes = 2;
    ASSERT_FAILS(CKPT_EINVALID, write_tensors(t, b, 2));
    ASSERT_ERROR_MENTIONS("two tensors have the same name (tensor 'z')");

    t[1].name = "bad\xff";
    ASSERT_FAILS(CKPT_EUNSUPPORTED, write_tensors(t, b, 2));
    ASSERT_ERROR_MENTIONS("not valid UTF-8");

    /* Nothing appears under the output name when a write fails. */
    ASSERT_TRUE(access("w.safetensors", F_OK) != 0);
}
