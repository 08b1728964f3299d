/* Reading HDF5: files made here with the HDF5 C library (every layout, filter, byte order and
 * the dtype convention), read back through the public API element by element. */
#include "test.h"

#define CKPT_BUILD
#include "../../formats/hdf5_private.h"
#include "core/storage_private.h"

#include <hdf5.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- making files ---- */

static hid_t new_file(const char *path, hsize_t user_block)
{
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), f;

    if (user_block)
        H5Pset_userblock(fcpl, user_block);
    f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    return f;
}

/* A dataset of type ftype, written from `data` of type mtype (NULL: never written). */
static int put(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int ndim, const hsize_t *dims, hid_t dcpl,
               const void *data)
{
    hid_t sp = ndim ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    int rc = d < 0 ? -1 : 0;

    if (rc == 0 && data && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        rc = -1;
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(sp);
    return rc;
}

static hid_t chunks(int ndim, const hsize_t *chunk)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);

    H5Pset_chunk(dcpl, ndim, chunk);
    return dcpl;
}

static void string_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a;

    H5Tset_size(t, strlen(value) + 1);
    a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, value);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

/* h5py's float16: IEEE binary16 described from a copy of float32. */
static hid_t f16_type(void)
{
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);

    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    return t;
}

/* ---- reading back ---- */

static ckpt_ckpt *open_h5(const char *path)
{
    ckpt_ckpt *c = NULL;

    if (ckpt_open(&c, path, NULL) < 0) {
        ckpt_test_fail(__FILE__, __LINE__, "ckpt_open(%s): %s", path, ckpt_error_last()->message);
        return NULL;
    }
    if (strcmp(ckpt_format_name(c), "hdf5") != 0) {
        ckpt_test_fail(__FILE__, __LINE__, "%s opened as %s", path, ckpt_format_name(c));
        ckpt_close(c);
        return NULL;
    }
    return c;
}

/* Tensor `name` has dtype and n elements, equal (as float64) to want[]. */
static int check(const ckpt_ckpt *c, const char *name, ckpt_dtype dtype, int64_t n, const double *want)
{
    const ckpt_tensor *t = ckpt_tensor_find(c, name);
    double *got;
    int64_t i;

    if (!t || t->dtype != dtype || ckpt_tensor_numel(t) != n) {
        ckpt_test_fail(__FILE__, __LINE__, "tensor '%s': %s, dtype %s, %lld elements", name, t ? "found" : "missing",
                       t ? ckpt_dtype_name(t->dtype) : "-", t ? (long long)ckpt_tensor_numel(t) : -1ll);
        return -1;
    }
    got = malloc((size_t)n * sizeof *got + 1);
    if (ckpt_tensor_read(t, 0, n, CKPT_DTYPE_F64, got) < 0) {
        ckpt_test_fail(__FILE__, __LINE__, "reading '%s': %s", name, ckpt_error_last()->message);
        free(got);
        return -1;
    }
    for (i = 0; i < n; i++)
        if (got[i] != want[i]) {
            ckpt_test_fail(__FILE__, __LINE__, "'%s'[%lld] = %g, expected %g", name, (long long)i, got[i], want[i]);
            free(got);
            return -1;
        }
    free(got);
    return 0;
}

#define CHECK(c, name, dtype, n, want) ASSERT_TRUE(check(c, name, dtype, n, want) == 0)

static double *ramp(int64_t n, double scale)
{
    double *v = malloc((size_t)n * sizeof *v);
    int64_t i;

    for (i = 0; i < n; i++)
        v[i] = (double)i * scale;
    return v;
}

/* ---- the cases ---- */

CKPT_TEST(test_hdf5_contiguous_types)
{
    static const hsize_t dims[2] = { 3, 4 };
    int16_t be[12];
    uint16_t half[12];
    double *want = ramp(12, 1.0), *neg = ramp(12, -1.0);
    float f[12];
    int i;
    hid_t f16 = f16_type(), file = new_file("types.h5", 0);
    ckpt_ckpt *c;

    for (i = 0; i < 12; i++) {
        f[i] = (float)i;
        be[i] = (int16_t)-i;
        half[i] = ckpt_f32_to_f16((float)i);
    }
    ASSERT_TRUE(put(file, "f32", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, H5P_DEFAULT, f) == 0);
    ASSERT_TRUE(put(file, "f64be", H5T_IEEE_F64BE, H5T_NATIVE_DOUBLE, 2, dims, H5P_DEFAULT, want) == 0);
    ASSERT_TRUE(put(file, "i16be", H5T_STD_I16BE, H5T_NATIVE_INT16, 2, dims, H5P_DEFAULT, be) == 0);
    ASSERT_TRUE(put(file, "u8", H5T_STD_U8LE, H5T_NATIVE_FLOAT, 2, dims, H5P_DEFAULT, f) == 0);
    ASSERT_TRUE(put(file, "i64", H5T_STD_I64LE, H5T_NATIVE_FLOAT, 2, dims, H5P_DEFAULT, f) == 0);
    ASSERT_TRUE(put(file, "f16", f16, f16, 2, dims, H5P_DEFAULT, half) == 0);
    ASSERT_TRUE(put(file, "scalar", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 0, NULL, H5P_DEFAULT, f + 5) == 0);
    H5Tclose(f16);
    H5Fclose(file);
    c = open_h5("types.h5");
    ASSERT_TRUE(c);
    CHECK(c, "f32", CKPT_DTYPE_F32, 12, want);
    CHECK(c, "f64be", CKPT_DTYPE_F64, 12, want);
    CHECK(c, "i16be", CKPT_DTYPE_I16, 12, neg);
    CHECK(c, "u8", CKPT_DTYPE_U8, 12, want);
    CHECK(c, "i64", CKPT_DTYPE_I64, 12, want);
    CHECK(c, "f16", CKPT_DTYPE_F16, 12, want);
    CHECK(c, "scalar", CKPT_DTYPE_F32, 1, want + 5);
    ASSERT_EQ_INT(ckpt_tensor_find(c, "f32")->ndim, 2);
    ASSERT_EQ_INT(ckpt_tensor_find(c, "scalar")->ndim, 0);
    /* contiguous data is mapped in place */
    ASSERT_TRUE(ckpt_storage_map(ckpt_tensor_find(c, "f32")->storage, 0, 48) != NULL);
    ckpt_close(c);
    free(want);
    free(neg);
}

/* 2-D and 3-D arrays whose chunks stick out of the array, one cut across the last axis only,
 * through deflate + shuffle + fletcher32, zstd, and no filter at all. */
CKPT_TEST(test_hdf5_chunked_filters_and_edges)
{
    static const hsize_t d2[2] = { 10, 7 }, c2[2] = { 4, 3 }, d3[3] = { 5, 6, 7 }, c3[3] = { 2, 4, 3 };
    static const hsize_t dl[2] = { 3, 10 }, cl[2] = { 3, 4 };
    double *want = ramp(210, 0.5), *ints = ramp(210, 1.0);
    hid_t file = new_file("chunked.h5", 0), dcpl;
    unsigned level = 3;
    ckpt_ckpt *c;

    ASSERT_OK(ckpt_hdf5__init());
    dcpl = chunks(2, c2);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 6);
    H5Pset_fletcher32(dcpl);
    ASSERT_TRUE(put(file, "deflate2d", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 2, d2, dcpl, want) == 0);
    ASSERT_TRUE(put(file, "deflate2d_be", H5T_IEEE_F64BE, H5T_NATIVE_DOUBLE, 2, d2, dcpl, want) == 0);
    H5Pclose(dcpl);
    dcpl = chunks(3, c3);
    H5Pset_shuffle(dcpl);
    ASSERT_TRUE(H5Pset_filter(dcpl, CKPT_H5_FILTER_ZSTD, H5Z_FLAG_MANDATORY, 1, &level) >= 0);
    ASSERT_TRUE(put(file, "zstd3d", H5T_STD_I32LE, H5T_NATIVE_DOUBLE, 3, d3, dcpl, ints) == 0);
    H5Pclose(dcpl);
    dcpl = chunks(3, c3);
    ASSERT_TRUE(put(file, "plain3d", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 3, d3, dcpl, want) == 0);
    H5Pclose(dcpl);
    dcpl = chunks(2, cl);
    H5Pset_deflate(dcpl, 1);
    ASSERT_TRUE(put(file, "lastaxis", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 2, dl, dcpl, want) == 0);
    H5Pclose(dcpl);
    H5Fclose(file);

    c = open_h5("chunked.h5");
    ASSERT_TRUE(c);
    CHECK(c, "deflate2d", CKPT_DTYPE_F32, 70, want);
    CHECK(c, "deflate2d_be", CKPT_DTYPE_F64, 70, want);
    CHECK(c, "zstd3d", CKPT_DTYPE_I32, 210, ints);
    CHECK(c, "plain3d", CKPT_DTYPE_F64, 210, want);
    CHECK(c, "lastaxis", CKPT_DTYPE_F32, 30, want);
    {
        /* the tiles keep the stored chunk shape and the compressed extents their size */
        const ckpt_tensor *t = ckpt_tensor_find(c, "deflate2d");
        const ckpt_tiling *g = t->storage->tiling;
        const ckpt_tile *edge;
        float part[9];
        int k;
        ASSERT_TRUE(g && g->n_tiles == 9 && g->chunk[0] == 4 && g->chunk[1] == 3);
        edge = &g->tiles[8];
        ASSERT_EQ_INT(edge->size[0], 2);
        ASSERT_EQ_INT(edge->size[1], 1);
        ASSERT_EQ_INT(edge->stored[0], 4);
        ASSERT_EQ_INT(edge->stored[1], 3);
        ASSERT_EQ_INT(edge->source->extents[0].encoding, CKPT_EXTENT_ZLIB);
        ASSERT_EQ_INT(edge->source->extents[0].shuffle, 4);
        ASSERT_EQ_INT(edge->source->extents[0].flags, CKPT_EXTENT_FLETCHER32);
        /* a piece starting mid-row */
        ASSERT_OK(ckpt_tensor_read(t, 12, 9, CKPT_DTYPE_F32, part));
        for (k = 0; k < 9; k++)
            ASSERT_TRUE(part[k] == (float)want[12 + k]);
    }
    ckpt_close(c);
    free(want);
    free(ints);
}

/* Fletcher-32 where its sums are largest: every byte 0xFF, over several 360-word blocks, an
 * odd length; and a checksum that does not match. */
CKPT_TEST(test_hdf5_fletcher32)
{
    static const hsize_t dims[1] = { 2001 }, chunk[1] = { 2001 };
    uint8_t *ones = malloc(2001);
    double *want = malloc(2001 * sizeof *want);
    hid_t file = new_file("sums.h5", 0), dcpl = chunks(1, chunk);
    const ckpt_tensor *t;
    ckpt_ckpt *c;
    uint8_t *bytes, got[4];
    uint64_t at;
    size_t len;
    int i;

    for (i = 0; i < 2001; i++) {
        ones[i] = 0xFF;
        want[i] = 255;
    }
    H5Pset_fletcher32(dcpl);
    ASSERT_TRUE(put(file, "ff", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, dims, dcpl, ones) == 0);
    H5Pclose(dcpl);
    H5Fclose(file);
    c = open_h5("sums.h5");
    ASSERT_TRUE(c);
    CHECK(c, "ff", CKPT_DTYPE_U8, 2001, want);
    t = ckpt_tensor_find(c, "ff");
    at = t->storage->tiling->tiles[0].source->extents[0].offset;
    ckpt_close(c);
    /* one payload byte changed: opening still works, reading fails */
    bytes = ckpt_test_read_file("sums.h5", &len);
    ASSERT_TRUE(bytes && at + 100 < len);
    bytes[at + 100] = 0xFE;
    ckpt_test_write_file("bad.h5", bytes, len);
    free(bytes);
    c = open_h5("bad.h5");
    ASSERT_TRUE(c);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_read(ckpt_tensor_find(c, "ff"), 0, 4, CKPT_DTYPE_U8, got));
    ASSERT_ERROR_MENTIONS("Fletcher-32");
    ASSERT_ERROR_MENTIONS("bad.h5");
    ckpt_close(c);
    free(ones);
    free(want);
}

/* A row-major read crosses each chunk of a band once per row: each is decoded once. */
CKPT_TEST(test_hdf5_chunks_decoded_once)
{
    static const hsize_t dims[2] = { 256, 512 }, chunk[2] = { 128, 256 };
    float *data = malloc(256 * 512 * sizeof *data), *got = malloc(256 * 512 * sizeof *got);
    hid_t file = new_file("band.h5", 0), dcpl = chunks(2, chunk);
    uint64_t before;
    ckpt_ckpt *c;
    int i;

    for (i = 0; i < 256 * 512; i++)
        data[i] = (float)i;
    H5Pset_deflate(dcpl, 1);
    ASSERT_TRUE(put(file, "w", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, dcpl, data) == 0);
    H5Pclose(dcpl);
    H5Fclose(file);
    c = open_h5("band.h5");
    ASSERT_TRUE(c);
    before = ckpt_storage__decodes();
    for (i = 0; i < 256; i++)
        ASSERT_OK(ckpt_tensor_read(ckpt_tensor_find(c, "w"), (int64_t)i * 512, 512, CKPT_DTYPE_F32, got + i * 512));
    ASSERT_EQ_INT(ckpt_storage__decodes() - before, 4);
    ASSERT_TRUE(memcmp(got, data, 256 * 512 * sizeof *data) == 0);
    ckpt_close(c);
    free(data);
    free(got);
}

/* Converting under --memory: each writing thread keeps at most a quarter of its share of the
 * budget in decoded chunks, not CKPT_STORAGE_CACHE_BYTES (16 MiB of chunks read in order would
 * all stay cached). */
CKPT_TEST(test_hdf5_chunk_cache_within_memory)
{
    static const hsize_t dims[2] = { 64, 65536 }, chunk[2] = { 4, 65536 };
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    float *data = malloc(64 * 65536 * sizeof *data);
    hid_t file = new_file("big.h5", 0), dcpl = chunks(2, chunk);
    ckpt_ckpt *c;
    int i;

    for (i = 0; i < 64 * 65536; i++)
        data[i] = (float)(i % 1000);
    H5Pset_deflate(dcpl, 1);
    ASSERT_TRUE(put(file, "w", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, dcpl, data) == 0);
    H5Pclose(dcpl);
    H5Fclose(file);
    c = open_h5("big.h5");
    ASSERT_TRUE(c);
    o.memory = 16u << 20;
    o.threads = 2;
    ckpt_storage__cache_peak_reset();
    ASSERT_OK(ckpt_convert(c, "big.safetensors", &o, NULL));
    ASSERT_TRUE(ckpt_storage__cache_peak() >= 1u << 20);
    ASSERT_TRUE(ckpt_storage__cache_peak() <= o.memory / 2 / 4);
    ckpt_storage__cache_peak_reset();
    o.format = "hdf5";
    o.compress = CKPT_CODEC_ZSTD;
    ASSERT_OK(ckpt_convert(c, "big2.h5", &o, NULL));
    ASSERT_TRUE(ckpt_storage__cache_peak() <= o.memory / 2 / 4);
    ckpt_close(c);
    free(data);
}

CKPT_TEST(test_hdf5_bool_complex_and_convention)
{
    static const hsize_t n4[1] = { 4 };
    static const double want[4] = { 0, 1, 1, 0 }, bf[4] = { 1.5, -2, 0.25, 3 };
    static const double e4[4] = { 0.5, 1, -1.5, 448 };
    int8_t flags[4] = { 0, 1, 1, 0 }, v;
    uint16_t bits[4];
    uint8_t e4bits[4];
    float cplx[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    hid_t file = new_file("conv.h5", 0), en = H5Tenum_create(H5T_NATIVE_INT8), cx, op, tagged, d;
    ckpt_ckpt *c;
    const ckpt_tensor *t;
    float im[8];
    int i;

    for (i = 0; i < 4; i++) {
        bits[i] = ckpt_f32_to_bf16((float)bf[i]);
        e4bits[i] = ckpt_f32_to_f8e4m3fn((float)e4[i]);
    }
    v = 0;
    H5Tenum_insert(en, "FALSE", &v);
    v = 1;
    H5Tenum_insert(en, "TRUE", &v);
    ASSERT_TRUE(put(file, "mask", en, en, 1, n4, H5P_DEFAULT, flags) == 0);
    cx = H5Tcreate(H5T_COMPOUND, 8);
    H5Tinsert(cx, "r", 0, H5T_IEEE_F32LE);
    H5Tinsert(cx, "i", 4, H5T_IEEE_F32LE);
    ASSERT_TRUE(put(file, "z", cx, cx, 1, n4, H5P_DEFAULT, cplx) == 0);
    ASSERT_TRUE(put(file, "bf16", H5T_STD_U16LE, H5T_NATIVE_UINT16, 1, n4, H5P_DEFAULT, bits) == 0);
    ASSERT_TRUE(put(file, "e4m3", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, n4, H5P_DEFAULT, e4bits) == 0);
    op = H5Tcreate(H5T_OPAQUE, 2);
    ASSERT_TRUE(put(file, "h5py_bf16", op, op, 1, n4, H5P_DEFAULT, bits) == 0);
    tagged = H5Tcreate(H5T_OPAQUE, 1);
    H5Tset_tag(tagged, "torch.float8_e4m3fn");
    ASSERT_TRUE(put(file, "tagged_e4m3", tagged, tagged, 1, n4, H5P_DEFAULT, e4bits) == 0);
    d = H5Dopen2(file, "bf16", H5P_DEFAULT);
    string_attr(d, "dtype", "bfloat16");
    H5Dclose(d);
    d = H5Dopen2(file, "e4m3", H5P_DEFAULT);
    string_attr(d, "dtype", "torch.float8_e4m3fn");
    H5Dclose(d);
    H5Tclose(en);
    H5Tclose(cx);
    H5Tclose(op);
    H5Tclose(tagged);
    H5Fclose(file);

    c = open_h5("conv.h5");
    ASSERT_TRUE(c);
    CHECK(c, "mask", CKPT_DTYPE_BOOL, 4, want);
    CHECK(c, "bf16", CKPT_DTYPE_BF16, 4, bf);
    CHECK(c, "h5py_bf16", CKPT_DTYPE_BF16, 4, bf);
    CHECK(c, "e4m3", CKPT_DTYPE_F8_E4M3FN, 4, e4);
    CHECK(c, "tagged_e4m3", CKPT_DTYPE_F8_E4M3FN, 4, e4);
    t = ckpt_tensor_find(c, "z");
    ASSERT_TRUE(t && t->dtype == CKPT_DTYPE_C64 && t->ndim == 1 && t->shape[0] == 4);
    ASSERT_OK(ckpt_tensor_read(t, 0, 4, CKPT_DTYPE_C64, im));
    ASSERT_TRUE(memcmp(im, cplx, sizeof cplx) == 0);
    ckpt_close(c);
}

/* Compact data, data never written (a fill value, zeros), a user block in front. */
CKPT_TEST(test_hdf5_compact_unallocated_user_block)
{
    static const hsize_t dims[2] = { 6, 5 }, chunk[2] = { 4, 2 }, one[2] = { 4, 2 }, start[2] = { 0, 0 };
    double *want = ramp(30, 1.0), filled[30], zeros[30];
    float seven = 7.5f, block[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    hid_t file = new_file("sparse.h5", 512), dcpl, d, fs, ms;
    ckpt_ckpt *c;
    int i, r, k;

    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_COMPACT);
    ASSERT_TRUE(put(file, "compact", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, dims, dcpl, want) == 0);
    H5Pclose(dcpl);
    ASSERT_TRUE(put(file, "contig", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 2, dims, H5P_DEFAULT, want) == 0);
    ASSERT_TRUE(put(file, "never", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, H5P_DEFAULT, NULL) == 0);
    dcpl = chunks(2, chunk);
    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &seven);
    H5Pset_deflate(dcpl, 1);
    ASSERT_TRUE(put(file, "partial", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, dcpl, NULL) == 0);
    H5Pclose(dcpl);
    /* one chunk written, the others never */
    d = H5Dopen2(file, "partial", H5P_DEFAULT);
    fs = H5Dget_space(d);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, one, NULL);
    ms = H5Screate_simple(2, one, NULL);
    ASSERT_TRUE(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, block) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(file);

    for (i = 0; i < 30; i++) {
        zeros[i] = 0;
        r = i / 5;
        k = i % 5;
        filled[i] = r < 4 && k < 2 ? block[r * 2 + k] : 7.5;
    }
    c = open_h5("sparse.h5");
    ASSERT_TRUE(c);
    CHECK(c, "compact", CKPT_DTYPE_F64, 30, want);
    CHECK(c, "contig", CKPT_DTYPE_F32, 30, want);
    CHECK(c, "never", CKPT_DTYPE_F32, 30, zeros);
    CHECK(c, "partial", CKPT_DTYPE_F32, 30, filled);
    ckpt_close(c);
    free(want);
}

CKPT_TEST(test_hdf5_groups_attributes_links)
{
    static const hsize_t n3[1] = { 3 }, n2[1] = { 2 };
    double want[3] = { 1, 2, 3 };
    int64_t ints[3] = { 10, 20, 30 };
    hid_t file = new_file("tree.h5", 0), g, sub, sp, a, st;
    const char *names[2] = { "alpha", "beta" };
    const ckpt_value *root, *layers, *attrs, *v;
    ckpt_ckpt *c;
    size_t i, tensors = 0;

    g = H5Gcreate2(file, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    sub = H5Gcreate2(g, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_TRUE(put(sub, "w", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 1, n3, H5P_DEFAULT, want) == 0);
    ASSERT_TRUE(H5Lcreate_hard(sub, "w", file, "also_w", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    ASSERT_TRUE(H5Lcreate_soft("/model/layers/w", file, "soft_w", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    string_attr(g, "arch", "llama");
    sp = H5Screate_simple(1, n3, NULL);
    a = H5Acreate2(file, "steps", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, ints);
    H5Aclose(a);
    st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    H5Sclose(sp);
    sp = H5Screate_simple(1, n2, NULL);
    a = H5Dcreate2(file, "names", st, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(a, st, H5S_ALL, H5S_ALL, H5P_DEFAULT, names);
    H5Dclose(a);
    H5Tclose(st);
    H5Sclose(sp);
    H5Gclose(sub);
    H5Gclose(g);
    H5Fclose(file);

    c = open_h5("tree.h5");
    ASSERT_TRUE(c);
    for (i = 0; i < ckpt_tensor_count(c); i++)
        tensors++;
    ASSERT_EQ_INT(tensors, 1); /* two hard links, one tensor; the soft link not followed */
    ASSERT_TRUE(ckpt_tensor_find(c, "also_w") || ckpt_tensor_find(c, "model/layers/w"));
    root = ckpt_root(c);
    ASSERT_TRUE(root && root->kind == CKPT_VAL_DICT);
    layers = ckpt_value_dict_get(ckpt_value_dict_get(root, "model"), "layers");
    ASSERT_TRUE(layers && layers->kind == CKPT_VAL_DICT);
    attrs = ckpt_value_dict_get(root, "__attributes__");
    ASSERT_TRUE(attrs && attrs->kind == CKPT_VAL_DICT);
    v = ckpt_value_dict_get(ckpt_value_dict_get(attrs, "model"), "arch");
    ASSERT_TRUE(v && ckpt_value_is_str(v, "llama"));
    v = ckpt_value_dict_get(ckpt_value_dict_get(attrs, "/"), "steps");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_LIST && v->u.seq.n == 3 && v->u.seq.items[2]->u.integer == 30);
    v = ckpt_value_dict_get(root, "names");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_LIST && v->u.seq.n == 2 && ckpt_value_is_str(v->u.seq.items[1], "beta"));
    ASSERT_TRUE(ckpt_note_count(c) >= 2);
    ckpt_close(c);
}

/* A filter of our own, registered while writing and gone while reading. */
static size_t xor_filter(unsigned flags, size_t n_values, const unsigned values[], size_t nbytes, size_t *buf_size,
                         void **buf)
{
    unsigned char *p = *buf;
    size_t i;

    (void)flags;
    (void)n_values;
    (void)values;
    (void)buf_size;
    for (i = 0; i < nbytes; i++)
        p[i] ^= 0x5A;
    return nbytes;
}

CKPT_TEST(test_hdf5_errors)
{
    static const hsize_t n8[1] = { 8 }, c4[1] = { 4 };
    const H5Z_class2_t cls = { H5Z_CLASS_T_VERS, (H5Z_filter_t)40001, 1, 1, "xor", NULL, NULL, xor_filter };
    double *want = ramp(8, 1.0);
    hid_t file, dcpl, op;
    ckpt_ckpt *c = NULL;

    ASSERT_OK(ckpt_hdf5__init());
    file = new_file("xor.h5", 0);
    ASSERT_TRUE(H5Zregister(&cls) >= 0);
    dcpl = chunks(1, c4);
    ASSERT_TRUE(H5Pset_filter(dcpl, 40001, H5Z_FLAG_MANDATORY, 0, NULL) >= 0);
    ASSERT_TRUE(put(file, "secret", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, n8, dcpl, want) == 0);
    H5Pclose(dcpl);
    H5Fclose(file);
    H5Zunregister(40001);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_open(&c, "xor.h5", NULL));
    ASSERT_ERROR_MENTIONS("xor.h5");
    ASSERT_ERROR_MENTIONS("secret");
    ASSERT_ERROR_MENTIONS("40001");

    /* a one-byte opaque type could be any float8: it needs a name */
    file = new_file("opaque.h5", 0);
    op = H5Tcreate(H5T_OPAQUE, 1);
    ASSERT_TRUE(put(file, "mystery", op, op, 1, n8, H5P_DEFAULT, want) == 0);
    H5Tclose(op);
    H5Fclose(file);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_open(&c, "opaque.h5", NULL));
    ASSERT_ERROR_MENTIONS("mystery");

    /* cut short: the data lies past the end */
    file = new_file("short.h5", 0);
    ASSERT_TRUE(put(file, "w", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, n8, H5P_DEFAULT, want) == 0);
    H5Fclose(file);
    ASSERT_TRUE(truncate("short.h5", 2100) == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "short.h5", NULL));
    ASSERT_ERROR_MENTIONS("short.h5");
    free(want);
}

/* What the fuzz harness drives: names, types and pipelines without libhdf5. */
CKPT_TEST(test_hdf5_dtype_rules)
{
    ckpt_h5_type t;
    ckpt_h5_pipeline p;
    ckpt_extent e;
    ckpt_dtype d;
    unsigned info;
    int swap;
    char why[200];

    ASSERT_EQ_INT(ckpt_hdf5__dtype_name("torch.bfloat16"), CKPT_DTYPE_BF16);
    ASSERT_EQ_INT(ckpt_hdf5__dtype_name(" BF16 "), CKPT_DTYPE_BF16);
    ASSERT_EQ_INT(ckpt_hdf5__dtype_name("ml_dtypes.float8_e5m2"), CKPT_DTYPE_F8_E5M2);
    ASSERT_EQ_INT(ckpt_hdf5__dtype_name("NUMPY:<f1"), CKPT_DTYPE_F8_E5M2);
    ASSERT_EQ_INT(ckpt_hdf5__dtype_name("NUMPY:<V1"), CKPT_DTYPE_INVALID);
    ASSERT_EQ_INT(ckpt_hdf5__dtype_name("e4m3"), CKPT_DTYPE_F8_E4M3FN);
    memset(&t, 0, sizeof t);
    t.cls = CKPT_H5_INTEGER;
    t.size = t.atom.size = 2;
    t.atom.cls = CKPT_H5_INTEGER;
    t.atom.precision = 16;
    ASSERT_OK(ckpt_hdf5__dtype(&t, "bf16", &d, &swap, &info, why, sizeof why));
    ASSERT_EQ_INT(d, CKPT_DTYPE_BF16);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_hdf5__dtype(&t, "float8_e5m2", &d, &swap, &info, why, sizeof why));
    ASSERT_OK(ckpt_hdf5__dtype(&t, "float32", &d, &swap, &info, why, sizeof why));
    ASSERT_EQ_INT(d, CKPT_DTYPE_U16);
    t.atom.precision = 12;
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hdf5__dtype(&t, NULL, &d, &swap, &info, why, sizeof why));

    memset(&p, 0, sizeof p);
    p.n = 3;
    p.id[0] = CKPT_H5_FILTER_SHUFFLE;
    p.id[1] = CKPT_H5_FILTER_ZSTD;
    p.id[2] = CKPT_H5_FILTER_FLETCHER32;
    ASSERT_OK(ckpt_hdf5__chunk_encoding(&p, 0, 4, &e, why, sizeof why));
    ASSERT_TRUE(e.encoding == CKPT_EXTENT_ZSTD && e.shuffle == 4 && e.flags == CKPT_EXTENT_FLETCHER32);
    ASSERT_OK(ckpt_hdf5__chunk_encoding(&p, 0x2, 4, &e, why, sizeof why));
    ASSERT_TRUE(e.encoding == CKPT_EXTENT_RAW && e.shuffle == 4 && e.flags == CKPT_EXTENT_FLETCHER32);
    p.id[0] = CKPT_H5_FILTER_FLETCHER32;
    p.id[2] = CKPT_H5_FILTER_SHUFFLE;
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hdf5__chunk_encoding(&p, 0, 4, &e, why, sizeof why));
    p.id[0] = 4;
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hdf5__chunk_encoding(&p, 0, 4, &e, why, sizeof why));
    ASSERT_TRUE(strstr(why, "szip") != NULL);
}
