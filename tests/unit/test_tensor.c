/* Tensors: metadata, validation, and reads of contiguous and strided views, converted. */
#include "core_fixture.h"

CKPT_TEST(test_tensor_metadata)
{
    ckpt_tensor t;
    int64_t shape[3] = { 2, 3, 4 };

    tensor_init(&t, "w", CKPT_DTYPE_BF16, NULL, 3, shape);
    ASSERT_EQ_INT(t.stride[0], 12);
    ASSERT_EQ_INT(t.stride[1], 4);
    ASSERT_EQ_INT(t.stride[2], 1);
    ASSERT_EQ_INT(ckpt_tensor_numel(&t), 24);
    ASSERT_EQ_INT(ckpt_tensor_nbytes(&t), 48);
    ASSERT_TRUE(ckpt_tensor_is_contiguous(&t));
    t.stride[0] = 1;
    t.stride[2] = 6;
    ASSERT_TRUE(!ckpt_tensor_is_contiguous(&t));
    /* Size-1 dimensions may have any stride. */
    t.shape[1] = 1;
    t.stride[0] = 4;
    t.stride[1] = 999;
    t.stride[2] = 1;
    ASSERT_TRUE(ckpt_tensor_is_contiguous(&t));
    t.ndim = 0;
    ASSERT_EQ_INT(ckpt_tensor_numel(&t), 1);
    ASSERT_TRUE(ckpt_tensor_is_contiguous(&t));
    t.ndim = 3;
    t.shape[1] = 0;
    ASSERT_EQ_INT(ckpt_tensor_numel(&t), 0);
    ASSERT_TRUE(ckpt_tensor_is_contiguous(&t));
    t.shape[0] = (int64_t)1 << 62;
    t.shape[2] = (int64_t)1 << 62;
    ASSERT_EQ_INT(ckpt_tensor_numel(&t), 0); /* a zero dimension wins over overflow */
    t.shape[1] = 4;
    ASSERT_EQ_INT(ckpt_tensor_numel(&t), -1);
    ASSERT_TRUE(ckpt_tensor_nbytes(&t) == UINT64_MAX);
    ASSERT_TRUE(!ckpt_tensor_is_contiguous(&t));
    t.shape[0] = -1;
    ASSERT_EQ_INT(ckpt_tensor_numel(&t), -1);
    t.ndim = CKPT_MAX_DIMS + 1;
    ASSERT_EQ_INT(ckpt_tensor_numel(&t), -1);
    t.ndim = 1;
    t.shape[0] = (int64_t)1 << 62;
    ASSERT_TRUE(ckpt_tensor_nbytes(&t) == (uint64_t)1 << 63); /* 2^62 bf16 elements */
    t.dtype = CKPT_DTYPE_C128;
    ASSERT_TRUE(ckpt_tensor_nbytes(&t) == UINT64_MAX);
}

CKPT_TEST(test_tensor_shape_format)
{
    const int64_t shape[3] = { 4, 8, 123456789012LL };
    char buf[64], small[6];

    ASSERT_EQ_STR(ckpt_shape_format(shape, 2, buf, sizeof buf), "[4, 8]");
    ASSERT_EQ_STR(ckpt_shape_format(shape, 3, buf, sizeof buf), "[4, 8, 123456789012]");
    ASSERT_EQ_STR(ckpt_shape_format(shape, 0, buf, sizeof buf), "[]");
    /* cut short where the buffer ends, still a string */
    ASSERT_EQ_STR(ckpt_shape_format(shape, 3, small, sizeof small), "[4, 8");
}

CKPT_TEST(test_tensor_validate)
{
    uint8_t bytes[64] = { 0 };
    mapped m;
    ckpt_extent e;
    ckpt_storage s = { "data/0", CKPT_DTYPE_F32, 64, 1, &e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[2] = { 4, 4 };

    ASSERT_OK(map_file(&m, "v.bin", bytes, sizeof bytes));
    extent_set(&e, &m, 0, 64, 64, CKPT_EXTENT_RAW);
    tensor_init(&t, "layer.weight", CKPT_DTYPE_F32, &s, 2, shape);
    ASSERT_OK(ckpt_tensor_validate(&t));
    t.offset = 1;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    ASSERT_ERROR_MENTIONS("layer.weight");
    ASSERT_ERROR_MENTIONS("data/0");
    t.offset = -1;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    t.offset = 0;
    t.stride[0] = -4;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    ASSERT_ERROR_MENTIONS("negative stride");
    /* Transposed and broadcast views inside the storage are fine. */
    t.stride[0] = 1;
    t.stride[1] = 4;
    ASSERT_OK(ckpt_tensor_validate(&t));
    t.stride[1] = 0;
    ASSERT_OK(ckpt_tensor_validate(&t));
    /* Strides whose reach overflows. */
    t.shape[0] = (int64_t)1 << 40;
    t.stride[0] = (int64_t)1 << 40;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    ASSERT_ERROR_MENTIONS("layer.weight");
    t.shape[0] = 2;
    t.stride[0] = INT64_MAX / 8;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    t.stride[0] = 4;
    t.shape[0] = INT64_MAX / 2;
    t.shape[1] = 4;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    ASSERT_ERROR_MENTIONS("overflows");
    /* Storage not made of whole elements. */
    t.shape[0] = 2;
    t.stride[0] = 4;
    s.nbytes = 62;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    s.nbytes = 64;
    t.dtype = CKPT_DTYPE_INVALID;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    t.dtype = CKPT_DTYPE_F32;
    t.shape[1] = -2;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    ASSERT_ERROR_MENTIONS("negative size");
    t.shape[1] = 4;
    t.storage = NULL;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    /* A zero-element tensor needs no storage. */
    t.shape[0] = 0;
    ASSERT_OK(ckpt_tensor_validate(&t));
    ASSERT_OK(ckpt_tensor_read(&t, 0, 0, CKPT_DTYPE_F32, NULL));
    t.ndim = -1;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_validate(&t));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_tensor_validate(NULL));
    unmap_file(&m);
}

/* Element (i, j, k) of a [3, 4, 5] array holds 100 i + 10 j + k. */
CKPT_TEST(test_tensor_strided_views)
{
    float base[60], got[60];
    uint16_t bf[60];
    double wide[60];
    mapped m;
    ckpt_extent e;
    ckpt_storage s = { "s", CKPT_DTYPE_F32, 240, 1, &e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[3] = { 5, 4, 3 };
    int i, j, k, n;

    for (i = 0; i < 3; i++)
        for (j = 0; j < 4; j++)
            for (k = 0; k < 5; k++)
                base[20 * i + 5 * j + k] = (float)(100 * i + 10 * j + k);
    ASSERT_OK(map_file(&m, "s.bin", base, sizeof base));
    extent_set(&e, &m, 0, 240, 240, CKPT_EXTENT_RAW);
    /* permute(2, 1, 0): shape [5, 4, 3], strides [1, 5, 20] */
    tensor_init(&t, "perm", CKPT_DTYPE_F32, &s, 3, shape);
    t.stride[0] = 1;
    t.stride[1] = 5;
    t.stride[2] = 20;
    ASSERT_OK(ckpt_tensor_read(&t, 0, 60, CKPT_DTYPE_F32, got));
    for (n = 0, k = 0; k < 5; k++)
        for (j = 0; j < 4; j++)
            for (i = 0; i < 3; i++, n++)
                ASSERT_TRUE(got[n] == (float)(100 * i + 10 * j + k));
    /* any sub-range, converted, gives the same elements */
    ASSERT_OK(ckpt_tensor_read(&t, 7, 41, CKPT_DTYPE_F64, wide));
    for (n = 0; n < 41; n++)
        ASSERT_TRUE(wide[n] == got[7 + n]);
    ASSERT_OK(ckpt_tensor_read(&t, 59, 1, CKPT_DTYPE_BF16, bf));
    ASSERT_EQ_INT(bf[0], ckpt_f32_to_bf16(got[59]));
    /* x[1:, ::2, 1:4]: offset 21, shape [2, 2, 3], strides [20, 10, 1] */
    shape[0] = 2;
    shape[1] = 2;
    shape[2] = 3;
    tensor_init(&t, "slice", CKPT_DTYPE_F32, &s, 3, shape);
    t.offset = 21;
    t.stride[0] = 20;
    t.stride[1] = 10;
    ASSERT_OK(ckpt_tensor_read(&t, 0, 12, CKPT_DTYPE_BF16, bf));
    for (n = 0, i = 1; i < 3; i++)
        for (j = 0; j < 4; j += 2)
            for (k = 1; k < 4; k++, n++)
                ASSERT_EQ_INT(bf[n], ckpt_f32_to_bf16((float)(100 * i + 10 * j + k)));
    /* a contiguous row slice with an offset takes the contiguous path */
    shape[0] = 8;
    tensor_init(&t, "rows", CKPT_DTYPE_F32, &s, 1, shape);
    t.offset = 45;
    ASSERT_OK(ckpt_tensor_read(&t, 2, 6, CKPT_DTYPE_F32, got));
    ASSERT_TRUE(memcmp(got, base + 47, 24) == 0);
    /* broadcast (stride 0) and a scalar */
    shape[0] = 3;
    shape[1] = 2;
    tensor_init(&t, "bcast", CKPT_DTYPE_F32, &s, 2, shape);
    t.offset = 59;
    t.stride[0] = 0;
    t.stride[1] = 0;
    ASSERT_OK(ckpt_tensor_read(&t, 0, 6, CKPT_DTYPE_F32, got));
    for (n = 0; n < 6; n++)
        ASSERT_TRUE(got[n] == base[59]);
    tensor_init(&t, "scalar", CKPT_DTYPE_F32, &s, 0, shape);
    t.offset = 13;
    ASSERT_OK(ckpt_tensor_read(&t, 0, 1, CKPT_DTYPE_F64, wide));
    ASSERT_TRUE(wide[0] == base[13]);
    /* bad ranges and conversions */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_tensor_read(&t, 0, 2, CKPT_DTYPE_F64, wide));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_tensor_read(&t, -1, 1, CKPT_DTYPE_F64, wide));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_tensor_read(&t, 1, 0x7FFFFFFFFFFFFFFF, CKPT_DTYPE_F64, wide));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_tensor_read(&t, 0, 1, CKPT_DTYPE_C64, wide));
    ASSERT_ERROR_MENTIONS("scalar");
    unmap_file(&m);
}

/* A strided view whose span is too large to decode whole, on a storage that cannot be
 * mapped in one piece: it is read run by run. */
CKPT_TEST(test_tensor_strided_large_span)
{
    size_t half = (size_t)48 << 20;
    int64_t far = ((int64_t)70 << 20) / 8 + 1; /* a row stride past the 64 MiB decode limit */
    mapped m;
    ckpt_extent e[2];
    ckpt_storage s = { "big", CKPT_DTYPE_I64, 2 * half, 2, e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[2] = { 2, 3 }, got[6], want[6];
    int i, fd;

    /* A sparse file, zero but for the elements the view reads; the storage's two extents
     * are the file's two halves in swapped order. */
    fd = open("big.bin", O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ASSERT_TRUE(fd >= 0 && ftruncate(fd, (off_t)(2 * half)) == 0);
    for (i = 0; i < 6; i++) {
        uint64_t idx = 8 + (uint64_t)(i / 3) * (uint64_t)far + (uint64_t)(i % 3) * 2;
        uint64_t byte = idx * 8, fpos = byte < half ? byte + half : byte - half;
        want[i] = 1000 + i;
        ASSERT_TRUE(pwrite(fd, &want[i], 8, (off_t)fpos) == 8);
    }
    close(fd);
    ASSERT_OK(map_existing(&m, "big.bin", 2 * half));
    extent_set(&e[0], &m, half, half, half, CKPT_EXTENT_RAW);
    extent_set(&e[1], &m, 0, half, half, CKPT_EXTENT_RAW);
    tensor_init(&t, "far", CKPT_DTYPE_I64, &s, 2, shape);
    t.offset = 8;
    t.stride[0] = far;
    t.stride[1] = 2;
    ASSERT_OK(ckpt_tensor_read(&t, 0, 6, CKPT_DTYPE_I64, got));
    ASSERT_TRUE(memcmp(got, want, sizeof got) == 0);
    ASSERT_OK(ckpt_tensor_read(&t, 2, 3, CKPT_DTYPE_I64, got));
    ASSERT_TRUE(memcmp(got, want + 2, 3 * 8) == 0);
    /* runs along a unit-stride last dimension */
    shape[0] = 2;
    shape[1] = 2;
    tensor_init(&t, "far_rows", CKPT_DTYPE_I64, &s, 2, shape);
    t.offset = 8;
    t.stride[0] = far;
    ASSERT_OK(ckpt_tensor_read(&t, 0, 4, CKPT_DTYPE_I64, got));
    ASSERT_TRUE(got[0] == want[0] && got[1] == 0 && got[2] == want[3] && got[3] == 0);
    unmap_file(&m);
}

/* A large contiguous read straight from a mapped file, converted in pieces whose pages
 * are handed back after use. */
CKPT_TEST(test_tensor_large_contiguous)
{
    size_t n = ((size_t)6 << 20) + 5, i;
    float *vals = malloc(n * 4);
    uint16_t *got = malloc(n * 2);
    float *back = malloc(n * 4);
    mapped m;
    ckpt_extent e;
    ckpt_storage s = { "large", CKPT_DTYPE_F32, 0, 1, &e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[1];

    ASSERT_TRUE(vals && got && back);
    for (i = 0; i < n; i++)
        vals[i] = (float)i * 0.37f - 1000.0f;
    ASSERT_OK(map_file(&m, "large.bin", vals, n * 4));
    extent_set(&e, &m, 0, n * 4, n * 4, CKPT_EXTENT_RAW);
    s.nbytes = n * 4;
    shape[0] = (int64_t)n;
    tensor_init(&t, "large", CKPT_DTYPE_F32, &s, 1, shape);
    ASSERT_OK(ckpt_tensor_read(&t, 0, (int64_t)n, CKPT_DTYPE_BF16, got));
    for (i = 0; i < n; i += 4099)
        ASSERT_EQ_INT(got[i], ckpt_f32_to_bf16(vals[i]));
    ASSERT_EQ_INT(got[n - 1], ckpt_f32_to_bf16(vals[n - 1]));
    /* the pages handed back are read again from the file */
    ASSERT_OK(ckpt_tensor_read(&t, 3, (int64_t)n - 3, CKPT_DTYPE_F32, back));
    ASSERT_TRUE(memcmp(back, vals + 3, (n - 3) * 4) == 0);
    unmap_file(&m);
    free(vals);
    free(got);
    free(back);
}

/* Transposed views of every element size: 1, 8 and 16 bytes, and big-endian doubles. */
CKPT_TEST(test_tensor_strided_element_sizes)
{
    uint8_t bytes[192], got[192];
    mapped m;
    ckpt_extent e;
    ckpt_storage s = { "sizes", CKPT_DTYPE_U8, 192, 1, &e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[2] = { 4, 3 };
    size_t sizes[3] = { 1, 8, 16 }, es;
    ckpt_dtype types[3] = { CKPT_DTYPE_U8, CKPT_DTYPE_I64, CKPT_DTYPE_C128 };
    double be[3] = { 1.25, -3.5, 1e300 }, d[3];
    int i, j, k, r;

    for (i = 0; i < 192; i++)
        bytes[i] = (uint8_t)(i * 37 + 11);
    ASSERT_OK(map_file(&m, "sizes.bin", bytes, sizeof bytes));
    extent_set(&e, &m, 0, 192, 192, CKPT_EXTENT_RAW);
    for (k = 0; k < 3; k++) {
        es = sizes[k];
        /* the transpose of a [3, 4] array */
        tensor_init(&t, "t", types[k], &s, 2, shape);
        t.stride[0] = 1;
        t.stride[1] = 4;
        ASSERT_OK(ckpt_tensor_read(&t, 0, 12, types[k], got));
        for (i = 0, r = 0; i < 4; i++)
            for (j = 0; j < 3; j++, r++)
                ASSERT_TRUE(memcmp(got + (size_t)r * es, bytes + (size_t)(4 * j + i) * es, es) == 0);
    }
    unmap_file(&m);
    for (i = 0; i < 3; i++)
        for (k = 0; k < 8; k++)
            bytes[8 * i + k] = ((uint8_t *)&be[i])[7 - k];
    ASSERT_OK(map_file(&m, "be64.bin", bytes, 24));
    extent_set(&e, &m, 0, 24, 24, CKPT_EXTENT_RAW);
    s.dtype = CKPT_DTYPE_F64;
    s.nbytes = 24;
    s.byteswap = 1;
    ASSERT_OK(ckpt_storage_read(&s, 0, 24, d));
    ASSERT_TRUE(d[0] == be[0] && d[1] == be[1] && d[2] == be[2]);
    unmap_file(&m);
}

/* ---- transposed views, checked against an element-by-element copy ---- */

static void fill_random(uint8_t *p, size_t n, uint32_t seed)
{
    size_t i;

    for (i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

/* The view's elements in C order, one at a time from the storage's bytes. */
static void view_reference(const ckpt_tensor *t, const uint8_t *bytes, uint8_t *out)
{
    size_t es = ckpt_dtype_size(t->dtype);
    int64_t idx[CKPT_MAX_DIMS] = { 0 }, n = ckpt_tensor_numel(t), k, pos;
    int d;

    for (k = 0; k < n; k++) {
        for (pos = t->offset, d = 0; d < t->ndim; d++)
            pos += idx[d] * t->stride[d];
        memcpy(out + (size_t)k * es, bytes + (size_t)pos * es, es);
        for (d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--)
            idx[d] = 0;
    }
}

/* Reads of the whole view, of ranges starting and ending inside rows, and of the whole
 * view in pieces of several sizes, as dst_type. 0 when all match the reference and write
 * nothing past their range, else the number of the first read that did not. */
static int check_view(const ckpt_tensor *t, const uint8_t *bytes, ckpt_dtype dst_type)
{
    size_t es = ckpt_dtype_size(t->dtype), ds = ckpt_dtype_size(dst_type);
    int64_t n = ckpt_tensor_numel(t), row = t->shape[t->ndim - 1], k, at;
    int64_t ranges[][2] = { { 0, n },           { 1, n - 1 },   { 0, n - 1 },      { row / 2, n - row },
                            { row, n - 2 * row }, { n - 1, 1 }, { row - 1, 2 },    { row / 3, row / 3 },
                            { row + 1, 3 * row }, { 5 * row - 2, 70 * row + 5 } };
    int64_t pieces[] = { 7, row + 3, 5000, 3 * row };
    uint8_t *ref = malloc((size_t)n * es), *want = malloc((size_t)n * ds), *got = malloc((size_t)n * ds);
    int bad = 0, r;

    if (!ref || !want || !got) {
        bad = -1;
        goto done;
    }
    view_reference(t, bytes, ref);
    if (ckpt_dtype_convert(dst_type, want, t->dtype, ref, (size_t)n) < 0) {
        bad = -1;
        goto done;
    }
    for (r = 0; r < (int)(sizeof ranges / sizeof ranges[0]) && !bad; r++) {
        int64_t first = ranges[r][0], count = ranges[r][1];
        if (first < 0 || count < 0 || first + count > n)
            continue;
        memset(got, 0xA5, (size_t)n * ds);
        if (ckpt_tensor_read(t, first, count, dst_type, got) < 0 ||
            memcmp(got, want + (size_t)first * ds, (size_t)count * ds) != 0)
            bad = r + 1;
        /* nothing written past the range */
        for (at = count * (int64_t)ds; at < n * (int64_t)ds && !bad; at++)
            if (got[at] != 0xA5)
                bad = r + 1;
    }
    for (r = 0; r < (int)(sizeof pieces / sizeof pieces[0]) && !bad; r++) {
        memset(got, 0xA5, (size_t)n * ds);
        for (at = 0; at < n && !bad; at += k) {
            k = n - at < pieces[r] ? n - at : pieces[r];
            if (ckpt_tensor_read(t, at, k, dst_type, got + (size_t)at * ds) < 0)
                bad = 100 + r;
        }
        if (!bad && memcmp(got, want, (size_t)n * ds) != 0)
            bad = 100 + r;
    }
done:
    free(ref);
    free(want);
    free(got);
    return bad;
}

/* The transpose of a C-contiguous [a, b] matrix at element `offset`: shape [b, a]. */
static void transposed(ckpt_tensor *t, ckpt_dtype dtype, const ckpt_storage *s, int64_t a, int64_t b, int64_t offset)
{
    int64_t shape[2];

    shape[0] = b;
    shape[1] = a;
    tensor_init(t, "w.T", dtype, s, 2, shape);
    t->stride[0] = 1;
    t->stride[1] = b;
    t->offset = offset;
}

/* Every element size, odd shapes, rows longer than a tile's columns and more rows than a
 * tile's; the storage starts at an odd file offset, so no element is aligned. */
CKPT_TEST(test_tensor_transposed_reads)
{
    static const ckpt_dtype types[] = { CKPT_DTYPE_U8, CKPT_DTYPE_BF16, CKPT_DTYPE_F32, CKPT_DTYPE_I64,
                                        CKPT_DTYPE_C128 };
    static const int64_t shapes[][2] = { { 1, 300 }, { 300, 1 }, { 3, 1000 }, { 1000, 3 },
                                         { 67, 129 }, { 150, 1100 }, { 1100, 150 }, { 9, 8 } };
    size_t len = (size_t)3 << 20, t_i, s_i;
    uint8_t *bytes = malloc(len);
    mapped m;
    ckpt_extent e;
    ckpt_storage s = { "data", CKPT_DTYPE_U8, 0, 1, &e, 0, NULL, 0 };
    ckpt_tensor t;

    ASSERT_TRUE(bytes != NULL);
    fill_random(bytes, len, 7);
    ASSERT_OK(map_file(&m, "t.bin", bytes, len));
    for (t_i = 0; t_i < sizeof types / sizeof types[0]; t_i++) {
        size_t es = ckpt_dtype_size(types[t_i]);
        s.dtype = types[t_i];
        s.nbytes = (len - 3) / es * es;
        extent_set(&e, &m, 3, s.nbytes, s.nbytes, CKPT_EXTENT_RAW);
        for (s_i = 0; s_i < sizeof shapes / sizeof shapes[0]; s_i++) {
            transposed(&t, types[t_i], &s, shapes[s_i][0], shapes[s_i][1], 5);
            ASSERT_EQ_INT(check_view(&t, bytes + 3, types[t_i]), 0);
            if (types[t_i] != CKPT_DTYPE_C128)
                ASSERT_EQ_INT(check_view(&t, bytes + 3, CKPT_DTYPE_F64), 0);
        }
    }
    /* bf16 rounded from f32 on the way */
    s.dtype = CKPT_DTYPE_F32;
    s.nbytes = (len - 3) / 4 * 4;
    extent_set(&e, &m, 3, s.nbytes, s.nbytes, CKPT_EXTENT_RAW);
    transposed(&t, CKPT_DTYPE_F32, &s, 1100, 150, 0);
    ASSERT_EQ_INT(check_view(&t, bytes + 3, CKPT_DTYPE_BF16), 0);
    unmap_file(&m);
    free(bytes);
}

/* Transposes inside larger views: batched, with unit dimensions, reshaped after the
 * transpose, broadcast; and on a storage that is not mapped in one piece. */
CKPT_TEST(test_tensor_transposed_views)
{
    size_t len = (size_t)1 << 20;
    uint8_t *bytes = malloc(len);
    mapped m;
    ckpt_extent e[2];
    ckpt_storage s = { "data", CKPT_DTYPE_BF16, 0, 1, e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[4];

    ASSERT_TRUE(bytes != NULL);
    fill_random(bytes, len, 11);
    ASSERT_OK(map_file(&m, "v.bin", bytes, len));
    s.nbytes = len;
    extent_set(&e[0], &m, 0, len, len, CKPT_EXTENT_RAW);
    /* [3, 67, 129] with the last two axes swapped */
    shape[0] = 3;
    shape[1] = 129;
    shape[2] = 67;
    tensor_init(&t, "batched", CKPT_DTYPE_BF16, &s, 3, shape);
    t.stride[0] = 67 * 129;
    t.stride[1] = 1;
    t.stride[2] = 129;
    t.offset = 1;
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_BF16), 0);
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_F32), 0);
    /* the same with [2, 3] batch dimensions and a unit dimension in the middle */
    shape[0] = 2;
    shape[1] = 3;
    shape[2] = 129;
    shape[3] = 67;
    tensor_init(&t, "batched4", CKPT_DTYPE_BF16, &s, 4, shape);
    t.stride[0] = 3 * 67 * 129;
    t.stride[1] = 67 * 129;
    t.stride[2] = 1;
    t.stride[3] = 129;
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_BF16), 0);
    shape[0] = 129;
    shape[1] = 1;
    shape[2] = 67;
    tensor_init(&t, "unit", CKPT_DTYPE_BF16, &s, 3, shape);
    t.stride[0] = 1;
    t.stride[1] = 12345;
    t.stride[2] = 129;
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_BF16), 0);
    /* the transpose of a [60, 37] matrix with its last dimension split into [6, 10] and
     * sliced to [6, 9]: shape [37, 6, 9], the unit stride two dimensions before the last */
    shape[0] = 37;
    shape[1] = 6;
    shape[2] = 9;
    tensor_init(&t, "split", CKPT_DTYPE_BF16, &s, 3, shape);
    t.stride[0] = 1;
    t.stride[1] = 10 * 37;
    t.stride[2] = 37;
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_BF16), 0);
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_F64), 0);
    /* a column broadcast along the rows: stride 0 on the last dimension */
    shape[0] = 70;
    shape[1] = 90;
    tensor_init(&t, "bcast", CKPT_DTYPE_BF16, &s, 2, shape);
    t.stride[0] = 1;
    t.stride[1] = 0;
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_BF16), 0);
    /* a storage made of the file's two halves in swapped order: decoded whole, then read */
    extent_set(&e[0], &m, len / 2, len / 2, len / 2, CKPT_EXTENT_RAW);
    extent_set(&e[1], &m, 0, len / 2, len / 2, CKPT_EXTENT_RAW);
    s.n_extents = 2;
    memcpy(bytes, m.f.data + len / 2, len / 2);
    memcpy(bytes + len / 2, m.f.data, len / 2);
    shape[0] = 300;
    shape[1] = 500;
    tensor_init(&t, "split_storage", CKPT_DTYPE_BF16, &s, 2, shape);
    t.stride[0] = 1;
    t.stride[1] = 300;
    t.offset = 7;
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_BF16), 0);
    ASSERT_EQ_INT(check_view(&t, bytes, CKPT_DTYPE_F32), 0);
    unmap_file(&m);
    free(bytes);
}

#define CKPT_BUILD
#include "core/tensor_private.h"

/* The page band of a transpose: page / element size indices of its dimension of stride 1,
 * times what follows it, so that a read of a band uses up a page of every source line;
 * views that read along their source need none. */
CKPT_TEST(test_tensor_page_band)
{
    ckpt_extent e;
    ckpt_storage s = { "data", CKPT_DTYPE_BF16, (uint64_t)1 << 30, 1, &e, 0, NULL, 0 };
    int64_t shape[3] = { 3, 5000, 100 };
    ckpt_tensor t;

    memset(&e, 0, sizeof e);
    transposed(&t, CKPT_DTYPE_BF16, &s, 100, 5000, 0);
    ASSERT_EQ_INT(ckpt_tensor__page_band(&t, 4096), 2048 * 100);
    transposed(&t, CKPT_DTYPE_F32, &s, 100, 5000, 0);
    ASSERT_EQ_INT(ckpt_tensor__page_band(&t, 4096), 1024 * 100);
    /* fewer columns than a page holds: the whole view */
    transposed(&t, CKPT_DTYPE_F32, &s, 100, 300, 0);
    ASSERT_EQ_INT(ckpt_tensor__page_band(&t, 4096), 300 * 100);
    /* batched: the transposes of 3 [100, 5000] matrices */
    tensor_init(&t, "b", CKPT_DTYPE_BF16, &s, 3, shape);
    t.stride[0] = 500000;
    t.stride[1] = 1;
    t.stride[2] = 5000;
    ASSERT_EQ_INT(ckpt_tensor__page_band(&t, 4096), 2048 * 100);
    /* contiguous, and strided along the source (every other row) */
    tensor_init(&t, "c", CKPT_DTYPE_BF16, &s, 3, shape);
    ASSERT_EQ_INT(ckpt_tensor__page_band(&t, 4096), 1);
    t.stride[1] = 200;
    t.shape[1] = 2500;
    ASSERT_EQ_INT(ckpt_tensor__page_band(&t, 4096), 1);
}
