/* The HDF5 writer, checked through libhdf5 itself: datasets, groups, chunks, filters, the
 * dtype convention, edge chunks, determinism, and names HDF5 cannot hold. Inputs are
 * safetensors files made here, so every shape and type is chosen by the test. */
#include "test.h"

#include <hdf5.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct st_tensor {
    const char *name, *dtype;
    int ndim;
    int64_t shape[4];
    size_t esize;
    int random; /* incompressible bytes instead of a smooth pattern */
} st_tensor;

static size_t numel(const st_tensor *t)
{
    size_t n = 1;
    int d;
    for (d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

/* Byte k of tensor i: a pattern that compresses, or xorshift noise that does not. */
static unsigned char byte_at(const st_tensor *t, size_t i, size_t k)
{
    if (t->random) {
        uint64_t x = (k + 1) * 0x9E3779B97F4A7C15ull + i;
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        return (unsigned char)x;
    }
    return (unsigned char)((k / t->esize) % 7 + (k % t->esize == t->esize - 1 ? 0x3c : 0) + i);
}

static void write_safetensors(const char *path, const st_tensor *ts, size_t n)
{
    char header[4096];
    size_t used = 0, off = 0, i, k, total = 0;
    unsigned char *file;
    uint64_t hlen;

    used += (size_t)snprintf(header + used, sizeof header - used, "{");
    for (i = 0; i < n; i++) {
        size_t bytes = numel(&ts[i]) * ts[i].esize;
        int d;
        used += (size_t)snprintf(header + used, sizeof header - used, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                                 i ? "," : "", ts[i].name, ts[i].dtype);
        for (d = 0; d < ts[i].ndim; d++)
            used += (size_t)snprintf(header + used, sizeof header - used, "%s%lld", d ? "," : "",
                                     (long long)ts[i].shape[d]);
        used += (size_t)snprintf(header + used, sizeof header - used, "],\"data_offsets\":[%zu,%zu]}", off,
                                 off + bytes);
        off += bytes;
    }
    used += (size_t)snprintf(header + used, sizeof header - used, "}");
    while (used % 8)
        header[used++] = ' ';
    total = 8 + used + off;
    file = malloc(total);
    hlen = used;
    memcpy(file, &hlen, 8);
    memcpy(file + 8, header, used);
    off = 8 + used;
    for (i = 0; i < n; i++)
        for (k = 0; k < numel(&ts[i]) * ts[i].esize; k++)
            file[off++] = byte_at(&ts[i], i, k);
    ckpt_test_write_file(path, file, total);
    free(file);
}

static int convert(const char *in, const char *out, ckpt_codec codec, int level, uint64_t memory, int threads)
{
    ckpt_convert_options opts = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;
    int rc;

    opts.compress = codec;
    opts.compress_level = level;
    opts.memory = memory;
    opts.threads = threads;
    if ((rc = ckpt_open(&c, in, NULL)) < 0)
        return rc;
    rc = ckpt_convert(c, out, &opts, NULL);
    ckpt_close(c);
    return rc;
}

/* Whether dataset `name` holds tensor i's bytes (read through libhdf5 and its filters). */
static int holds(hid_t f, const st_tensor *t, size_t i)
{
    hid_t d = H5Dopen2(f, t->name, H5P_DEFAULT), type = d >= 0 ? H5Dget_type(d) : -1;
    size_t n = numel(t) * t->esize, k;
    unsigned char *buf = malloc(n ? n : 1);
    int ok = d >= 0 && type >= 0 && buf && H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;

    for (k = 0; ok && k < n; k++)
        ok = buf[k] == byte_at(t, i, k);
    free(buf);
    if (type >= 0)
        H5Tclose(type);
    if (d >= 0)
        H5Dclose(d);
    return ok;
}

static int chunk_dims(hid_t f, const char *name, int ndim, hsize_t *out)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), p = d >= 0 ? H5Dget_create_plist(d) : -1;
    int got = p >= 0 && H5Pget_layout(p) == H5D_CHUNKED ? H5Pget_chunk(p, ndim, out) : -1;

    if (p >= 0)
        H5Pclose(p);
    if (d >= 0)
        H5Dclose(d);
    return got;
}

static H5Z_filter_t first_filter(hid_t f, const char *name, unsigned *level)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), p = d >= 0 ? H5Dget_create_plist(d) : -1;
    size_t n_values = 1;
    unsigned flags;
    char fname[64];
    H5Z_filter_t id = -1;

    *level = 0;
    if (p >= 0 && H5Pget_nfilters(p) > 0)
        id = H5Pget_filter2(p, 0, &flags, &n_values, level, sizeof fname, fname, NULL);
    if (p >= 0)
        H5Pclose(p);
    if (d >= 0)
        H5Dclose(d);
    return id;
}

static char *string_attr(hid_t f, const char *name, const char *attr)
{
    hid_t d = H5Oopen(f, name, H5P_DEFAULT), a = d >= 0 ? H5Aopen(d, attr, H5P_DEFAULT) : -1;
    hid_t type = a >= 0 ? H5Aget_type(a) : -1;
    char *value = NULL, *copy = NULL;

    if (type >= 0 && H5Tis_variable_str(type) > 0 && H5Aread(a, type, &value) >= 0 && value) {
        copy = strdup(value);
        H5free_memory(value);
    }
    if (type >= 0)
        H5Tclose(type);
    if (a >= 0)
        H5Aclose(a);
    if (d >= 0)
        H5Oclose(d);
    return copy;
}

static const st_tensor layout_tensors[] = {
    { "model/layers.0/w", "F32", 2, { 1000, 70 }, 4, 0 },  /* bands of 234 rows, the last 64 */
    { "model/wide", "F32", 2, { 3, 40000 }, 4, 0 },        /* a row is too big: cut along axis 1 */
    { "bias", "BF16", 1, { 33 }, 2, 0 },
    { "half", "F16", 3, { 2, 3, 5 }, 2, 0 },
    { "scalar", "I64", 0, { 0 }, 8, 0 },
    { "empty", "F32", 2, { 0, 5 }, 4, 0 },
    { "noise", "U8", 1, { 200000 }, 1, 1 },
};

CKPT_TEST(test_hdf5_write_datasets_chunks_and_filters)
{
    size_t n = sizeof layout_tensors / sizeof layout_tensors[0], i;
    hsize_t chunk[4];
    unsigned level;
    char *attr;
    hid_t f, d, type;

    write_safetensors("in.safetensors", layout_tensors, n);
    /* 1 MiB of memory makes chunks of at most 64 KiB */
    ASSERT_OK(convert("in.safetensors", "out.h5", CKPT_CODEC_ZSTD, 0, 1u << 20, 1));
    f = H5Fopen("out.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_TRUE(f >= 0);
    for (i = 0; i < n; i++)
        ASSERT_TRUE(holds(f, &layout_tensors[i], i));
    ASSERT_EQ_INT(chunk_dims(f, "model/layers.0/w", 2, chunk), 2);
    ASSERT_EQ_INT(chunk[0], 234);
    ASSERT_EQ_INT(chunk[1], 70);
    ASSERT_EQ_INT(chunk_dims(f, "model/wide", 2, chunk), 2);
    ASSERT_EQ_INT(chunk[0], 1);
    ASSERT_EQ_INT(chunk[1], 16384);
    ASSERT_EQ_INT(first_filter(f, "model/layers.0/w", &level), 32015);
    ASSERT_EQ_INT(level, 3);
    ASSERT_EQ_INT(chunk_dims(f, "scalar", 0, chunk), -1);
    /* bfloat16 is uint16 named by its attribute; float16 is IEEE half */
    attr = string_attr(f, "bias", "dtype");
    ASSERT_TRUE(attr && strcmp(attr, "bfloat16") == 0);
    free(attr);
    d = H5Dopen2(f, "half", H5P_DEFAULT);
    type = H5Dget_type(d);
    ASSERT_TRUE(H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 2 && H5Tget_ebias(type) == 15);
    H5Tclose(type);
    H5Dclose(d);
    /* noise does not shrink: its chunks are stored as they are, the filter skipped */
    {
        hsize_t offset[1], size;
        haddr_t addr;
        unsigned mask = 0;
        hid_t space;
        d = H5Dopen2(f, "noise", H5P_DEFAULT);
        space = H5Dget_space(d);
        ASSERT_TRUE(H5Dget_chunk_info(d, space, 0, offset, &mask, &addr, &size) >= 0);
        H5Sclose(space);
        ASSERT_EQ_INT(mask, 1);
        H5Dclose(d);
    }
    H5Fclose(f);
}

CKPT_TEST(test_hdf5_write_gzip_and_none)
{
    size_t n = sizeof layout_tensors / sizeof layout_tensors[0], i;
    unsigned level;
    hid_t f;

    write_safetensors("in.safetensors", layout_tensors, n);
    ASSERT_OK(convert("in.safetensors", "gzip.h5", CKPT_CODEC_GZIP, 2, 0, 0));
    ASSERT_OK(convert("in.safetensors", "none.h5", CKPT_CODEC_NONE, 0, 0, 0));
    f = H5Fopen("gzip.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_TRUE(f >= 0);
    for (i = 0; i < n; i++)
        ASSERT_TRUE(holds(f, &layout_tensors[i], i));
    ASSERT_EQ_INT(first_filter(f, "model/layers.0/w", &level), H5Z_FILTER_DEFLATE);
    ASSERT_EQ_INT(level, 2);
    H5Fclose(f);
    f = H5Fopen("none.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_TRUE(f >= 0);
    for (i = 0; i < n; i++)
        ASSERT_TRUE(holds(f, &layout_tensors[i], i));
    ASSERT_EQ_INT(first_filter(f, "model/layers.0/w", &level), -1);
    H5Fclose(f);
}

CKPT_TEST(test_hdf5_write_is_deterministic)
{
    size_t n = sizeof layout_tensors / sizeof layout_tensors[0], la, lb;
    unsigned char *a, *b;

    write_safetensors("in.safetensors", layout_tensors, n);
    ASSERT_OK(convert("in.safetensors", "a.h5", CKPT_CODEC_ZSTD, 0, 1u << 20, 2));
    ASSERT_OK(convert("in.safetensors", "b.h5", CKPT_CODEC_ZSTD, 0, 1u << 20, 1));
    a = ckpt_test_read_file("a.h5", &la);
    b = ckpt_test_read_file("b.h5", &lb);
    ASSERT_TRUE(a && b && la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
}

CKPT_TEST(test_hdf5_write_refuses_names_hdf5_cannot_hold)
{
    static const st_tensor clash[] = {
        { "x", "F32", 1, { 4 }, 4, 0 },
        { "x/y", "F32", 1, { 4 }, 4, 0 },
    };
    static const st_tensor dot[] = { { "a/./b", "F32", 1, { 4 }, 4, 0 } };

    write_safetensors("clash.safetensors", clash, 2);
    ASSERT_FAILS(CKPT_EINVALID, convert("clash.safetensors", "clash.h5", CKPT_CODEC_NONE, 0, 0, 0));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "'x' is a tensor") != NULL);
    ASSERT_TRUE(access("clash.h5", F_OK) != 0);
    write_safetensors("dot.safetensors", dot, 1);
    ASSERT_FAILS(CKPT_EINVALID, convert("dot.safetensors", "dot.h5", CKPT_CODEC_NONE, 0, 0, 0));
    ASSERT_TRUE(access("dot.h5", F_OK) != 0);
}

CKPT_TEST(test_hdf5_write_checks_levels)
{
    static const st_tensor one[] = { { "w", "F32", 1, { 4 }, 4, 0 } };

    write_safetensors("in.safetensors", one, 1);
    ASSERT_FAILS(CKPT_EINVALID, convert("in.safetensors", "g.h5", CKPT_CODEC_GZIP, 10, 0, 0));
    ASSERT_FAILS(CKPT_EINVALID, convert("in.safetensors", "z.h5", CKPT_CODEC_ZSTD, 23, 0, 0));
    ASSERT_TRUE(access("g.h5", F_OK) != 0 && access("z.h5", F_OK) != 0);
}
