/* Storages: extents stored raw, as deflate streams and as latin-1 text, and byteswapped
 * storages, read whole, in pieces and through tensors. */
#include "core_fixture.h"

/* Three raw extents, out of file order, with junk between them. */
CKPT_TEST(test_storage_raw_extents)
{
    float vals[30], got[30];
    double wide[30];
    uint8_t file[200];
    mapped m;
    ckpt_extent e[3];
    ckpt_storage s = { "st", CKPT_DTYPE_F32, 120, 3, e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[1] = { 30 };
    const float *p;
    int i;

    memset(file, 0xEE, sizeof file);
    for (i = 0; i < 30; i++)
        vals[i] = (float)i * 1.5f - 7;
    memcpy(file + 150, vals, 40);      /* elements 0..9 */
    memcpy(file + 3, vals + 10, 48);   /* 10..21: unaligned in the file */
    memcpy(file + 80, vals + 22, 32);  /* 22..29 */
    ASSERT_OK(map_file(&m, "raw.bin", file, sizeof file));
    extent_set(&e[0], &m, 150, 40, 40, CKPT_EXTENT_RAW);
    extent_set(&e[1], &m, 3, 48, 48, CKPT_EXTENT_RAW);
    extent_set(&e[2], &m, 80, 32, 32, CKPT_EXTENT_RAW);
    ASSERT_OK(ckpt_storage_read(&s, 0, 120, got));
    ASSERT_TRUE(memcmp(got, vals, 120) == 0);
    ASSERT_OK(ckpt_storage_read(&s, 37, 50, (uint8_t *)got + 1));
    ASSERT_TRUE(memcmp((uint8_t *)got + 1, (uint8_t *)vals + 37, 50) == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 100, 21, got));
    /* Mapping works inside one extent only. */
    p = ckpt_storage_map(&s, 44, 8);
    ASSERT_TRUE(p == (const void *)(m.f.data + 7));
    ASSERT_TRUE(ckpt_storage_map(&s, 36, 8) == NULL);
    ASSERT_TRUE(ckpt_storage_map(&s, 116, 8) == NULL);
    tensor_init(&t, "x", CKPT_DTYPE_F32, &s, 1, shape);
    ASSERT_OK(ckpt_tensor_read(&t, 0, 30, CKPT_DTYPE_F64, wide));
    for (i = 0; i < 30; i++)
        ASSERT_TRUE(wide[i] == vals[i]);
    ASSERT_OK(ckpt_tensor_read(&t, 11, 1, CKPT_DTYPE_F32, got));
    ASSERT_TRUE(got[0] == vals[11]);
    /* An extent past the end of its file names the file and the storage. */
    e[2].offset = 190;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_read(&t, 0, 30, CKPT_DTYPE_F64, wide));
    ASSERT_ERROR_MENTIONS("raw.bin");
    ASSERT_ERROR_MENTIONS("'st'");
    ASSERT_ERROR_MENTIONS("'x'");
    e[2].offset = 80;
    e[2].stored_size = 31;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 0, 120, got));
    e[2].stored_size = 32;
    e[2].encoding = (ckpt_extent_encoding)7;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 0, 120, got));
    ASSERT_ERROR_MENTIONS("encoding");
    e[2].encoding = CKPT_EXTENT_RAW;
    /* Extents that hold less than the storage claims. */
    s.n_extents = 2;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 80, 40, got));
    ASSERT_ERROR_MENTIONS("fewer");
    unmap_file(&m);
}

CKPT_TEST(test_storage_deflate_extent)
{
    size_t n = 100000, zlen, i;
    uint32_t *vals = malloc(n * 4), *got = malloc(n * 4);
    unsigned char *z, *file;
    uint16_t head[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    mapped m;
    ckpt_extent e[2];
    ckpt_storage s = { "zipped", CKPT_DTYPE_I32, 0, 2, e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[1];

    ASSERT_TRUE(vals && got);
    for (i = 0; i < n; i++)
        vals[i] = (uint32_t)(i * 2654435761u) >> (i % 13);
    z = deflate_raw(vals, n * 4, &zlen);
    ASSERT_TRUE(z != NULL && zlen > 100);
    file = malloc(zlen + 64);
    memset(file, 0x55, zlen + 64);
    memcpy(file + 5, head, sizeof head);
    memcpy(file + 40, z, zlen);
    ASSERT_OK(map_file(&m, "z.bin", file, zlen + 64));
    /* 16 raw bytes, then the inflated ones. */
    extent_set(&e[0], &m, 5, 16, 16, CKPT_EXTENT_RAW);
    extent_set(&e[1], &m, 40, zlen, n * 4, CKPT_EXTENT_DEFLATE);
    s.nbytes = 16 + n * 4;
    ASSERT_OK(ckpt_storage_read(&s, 16, n * 4, got));
    ASSERT_TRUE(memcmp(got, vals, n * 4) == 0);
    /* Entering the stream in the middle, across the raw/deflate boundary, to the end. */
    ASSERT_OK(ckpt_storage_read(&s, 12, 4 + 70000 * 4, got));
    ASSERT_TRUE(memcmp(got, (uint8_t *)head + 12, 4) == 0 && memcmp(got + 1, vals, 70000 * 4) == 0);
    ASSERT_OK(ckpt_storage_read(&s, 16 + 4 * 77777, 4 * (n - 77777), got));
    ASSERT_TRUE(memcmp(got, vals + 77777, 4 * (n - 77777)) == 0);
    ASSERT_TRUE(ckpt_storage_map(&s, 16, 4) == NULL);
    ASSERT_TRUE(ckpt_storage_map(&s, 0, 16) != NULL);
    /* A tensor over the inflated part, read converted in pieces and strided. */
    shape[0] = (int64_t)n;
    tensor_init(&t, "z.t", CKPT_DTYPE_I32, &s, 1, shape);
    t.offset = 4;
    ASSERT_OK(ckpt_tensor_read(&t, 1000, 5000, CKPT_DTYPE_I64, got));
    ASSERT_TRUE(((int64_t *)(void *)got)[0] == (int32_t)vals[1000] && ((int64_t *)(void *)got)[4999] == (int32_t)vals[5999]);
    ASSERT_OK(ckpt_tensor_read(&t, 0, (int64_t)n, CKPT_DTYPE_I32, got));
    ASSERT_TRUE(memcmp(got, vals, n * 4) == 0);
    shape[0] = 3;
    tensor_init(&t, "z.strided", CKPT_DTYPE_I32, &s, 1, shape);
    t.offset = 4 + 10;
    t.stride[0] = 30000;
    ASSERT_OK(ckpt_tensor_read(&t, 0, 3, CKPT_DTYPE_I32, got));
    ASSERT_TRUE(got[0] == vals[10] && got[1] == vals[30010] && got[2] == vals[60010]);
    /* Sizes that disagree with the stream, and corrupt or truncated data. */
    e[1].size = n * 4 + 4;
    s.nbytes += 4;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 16, n * 4 + 4, got));
    ASSERT_ERROR_MENTIONS("ends before");
    e[1].size = n * 4 - 4;
    s.nbytes -= 8;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 16, n * 4 - 4, got));
    ASSERT_ERROR_MENTIONS("more than");
    ASSERT_OK(ckpt_storage_read(&s, 16, n * 2, got)); /* not read to the end: not checked */
    e[1].size = n * 4;
    s.nbytes += 4;
    e[1].stored_size = zlen / 2;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 16, n * 4, got));
    ASSERT_ERROR_MENTIONS("truncated");
    ASSERT_ERROR_MENTIONS("z.bin");
    unmap_file(&m);
    file[40] ^= 0xFF;
    file[41] ^= 0xFF;
    file[42] ^= 0x5A;
    ASSERT_OK(map_file(&m, "zbad.bin", file, zlen + 64));
    extent_set(&e[1], &m, 40, zlen, n * 4, CKPT_EXTENT_DEFLATE);
    extent_set(&e[0], &m, 5, 16, 16, CKPT_EXTENT_RAW);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 16, n * 4, got));
    ASSERT_ERROR_MENTIONS("zipped");
    unmap_file(&m);
    free(file);
    free(z);
    free(vals);
    free(got);
}

/* Bytes as the UTF-8 text of a latin-1 string (pickle protocol 2). */
static size_t latin1_utf8(const uint8_t *in, size_t n, uint8_t *out)
{
    size_t i, k = 0;

    for (i = 0; i < n; i++) {
        if (in[i] < 0x80) {
            out[k++] = in[i];
        } else {
            out[k++] = (uint8_t)(0xC0 | (in[i] >> 6));
            out[k++] = (uint8_t)(0x80 | (in[i] & 0x3F));
        }
    }
    return k;
}

CKPT_TEST(test_storage_latin1_extent)
{
    uint8_t raw[1024], text[2100], got[1024];
    uint16_t h[4];
    mapped m;
    ckpt_extent e;
    ckpt_storage s = { "pickled", CKPT_DTYPE_F16, 1024, 1, &e, 0, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[2] = { 2, 2 };
    size_t tlen, i;

    for (i = 0; i < sizeof raw; i++)
        raw[i] = (uint8_t)(i * 7 + (i >> 8));
    tlen = latin1_utf8(raw, sizeof raw, text);
    ASSERT_TRUE(tlen > 1500);
    ASSERT_OK(map_file(&m, "l.bin", text, tlen));
    extent_set(&e, &m, 0, tlen, sizeof raw, CKPT_EXTENT_LATIN1_UTF8);
    ASSERT_OK(ckpt_storage_read(&s, 0, sizeof raw, got));
    ASSERT_TRUE(memcmp(got, raw, sizeof raw) == 0);
    ASSERT_OK(ckpt_storage_read(&s, 301, 500, got));
    ASSERT_TRUE(memcmp(got, raw + 301, 500) == 0);
    ASSERT_TRUE(ckpt_storage_map(&s, 0, 4) == NULL);
    /* A transposed half view on the text. */
    tensor_init(&t, "emb", CKPT_DTYPE_F16, &s, 2, shape);
    t.offset = 100;
    t.stride[0] = 1;
    t.stride[1] = 2;
    ASSERT_OK(ckpt_tensor_read(&t, 0, 4, CKPT_DTYPE_F16, h));
    ASSERT_TRUE(memcmp(&h[0], raw + 200, 2) == 0 && memcmp(&h[1], raw + 204, 2) == 0);
    ASSERT_TRUE(memcmp(&h[2], raw + 202, 2) == 0 && memcmp(&h[3], raw + 206, 2) == 0);
    unmap_file(&m);
    /* Text that decodes to fewer or more bytes than the extent says. */
    ASSERT_OK(map_file(&m, "l2.bin", text, tlen));
    extent_set(&e, &m, 0, tlen - 1, sizeof raw, CKPT_EXTENT_LATIN1_UTF8);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 0, sizeof raw, got));
    extent_set(&e, &m, 0, tlen, sizeof raw - 2, CKPT_EXTENT_LATIN1_UTF8);
    s.nbytes = sizeof raw - 2;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 0, sizeof raw - 2, got));
    ASSERT_ERROR_MENTIONS("more than");
    unmap_file(&m);
    /* Code points past 255, stray continuation bytes, and a cut sequence. */
    {
        static const uint8_t bad[3][4] = { { 'a', 0xC4, 0x80, 'b' }, { 'a', 0x80, 'b', 'c' }, { 'a', 'b', 'c', 0xC3 } };
        for (i = 0; i < 3; i++) {
            ASSERT_OK(map_file(&m, "bad.bin", bad[i], 4));
            extent_set(&e, &m, 0, 4, 3, CKPT_EXTENT_LATIN1_UTF8);
            s.nbytes = 3;
            ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 0, 3, got));
            ASSERT_ERROR_MENTIONS("latin-1");
            unmap_file(&m);
        }
    }
}

CKPT_TEST(test_storage_byteswap)
{
    float vals[6] = { 1.5f, -2.25f, 3e30f, -0.0f, 1e-40f, 65504.0f }, got[6];
    uint8_t be[24], be16[4] = { 0x3F, 0x80, 0xC0, 0x40 }, file[64];
    double wide[6];
    uint16_t bf[2];
    mapped m;
    ckpt_extent e;
    ckpt_storage s = { "bigendian", CKPT_DTYPE_F32, 24, 1, &e, 1, NULL, 0 };
    ckpt_tensor t;
    int64_t shape[2] = { 2, 3 };
    int i, k;

    for (i = 0; i < 6; i++)
        for (k = 0; k < 4; k++)
            be[4 * i + k] = ((uint8_t *)&vals[i])[3 - k];
    memset(file, 0, sizeof file);
    memcpy(file + 8, be, 24);
    memcpy(file + 40, be16, 4);
    /* complex64 (1, -2) big-endian: each float swapped on its own */
    for (k = 0; k < 4; k++) {
        float one = 1, two = -2;
        file[48 + k] = ((uint8_t *)&one)[3 - k];
        file[52 + k] = ((uint8_t *)&two)[3 - k];
    }
    ASSERT_OK(map_file(&m, "be.bin", file, sizeof file));
    extent_set(&e, &m, 8, 24, 24, CKPT_EXTENT_RAW);
    ASSERT_OK(ckpt_storage_read(&s, 0, 24, got));
    ASSERT_TRUE(memcmp(got, vals, 24) == 0);
    ASSERT_TRUE(ckpt_storage_map(&s, 0, 24) == NULL);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_storage_read(&s, 2, 4, got));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_storage_read(&s, 0, 6, got));
    tensor_init(&t, "be", CKPT_DTYPE_F32, &s, 2, shape);
    ASSERT_OK(ckpt_tensor_read(&t, 0, 6, CKPT_DTYPE_F64, wide));
    for (i = 0; i < 6; i++)
        ASSERT_TRUE(wide[i] == (double)vals[i]);
    t.stride[0] = 1;
    t.stride[1] = 2;
    ASSERT_OK(ckpt_tensor_read(&t, 1, 4, CKPT_DTYPE_F32, got));
    ASSERT_TRUE(got[0] == vals[2] && got[1] == vals[4] && got[2] == vals[1] && got[3] == vals[3]);
    /* bfloat16 */
    s.dtype = CKPT_DTYPE_BF16;
    s.nbytes = 4;
    extent_set(&e, &m, 40, 4, 4, CKPT_EXTENT_RAW);
    ASSERT_OK(ckpt_storage_read(&s, 0, 4, bf));
    ASSERT_TRUE(bf[0] == 0x3F80 && bf[1] == 0xC040);
    /* complex64 swaps its two parts separately */
    s.dtype = CKPT_DTYPE_C64;
    s.nbytes = 8;
    extent_set(&e, &m, 48, 8, 8, CKPT_EXTENT_RAW);
    ASSERT_OK(ckpt_storage_read(&s, 0, 8, got));
    ASSERT_TRUE(got[0] == 1 && got[1] == -2);
    /* one-byte elements need no swapping and can be mapped */
    s.dtype = CKPT_DTYPE_U8;
    ASSERT_TRUE(ckpt_storage_map(&s, 0, 8) != NULL);
    s.dtype = CKPT_DTYPE_INVALID;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&s, 0, 8, got));
    unmap_file(&m);
}
