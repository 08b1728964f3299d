/* Block-scaled dequantisation (ckpt_node_block_dequant) against values computed here: E4M3
 * decoded by its definition, the float32 product, bfloat16 rounded to nearest even by bits;
 * several blocks and partial ones, every E4M3 byte (NaN included), an infinite scale, read
 * whole, in odd ranges and through transposes and slices; refused shapes. */
#include "test.h"

#include <ckpt/sys/io.h>

#include <ckpt/graph.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 200
#define COLS 136
#define BR 128
#define BC 64
#define SR ((ROWS + BR - 1) / BR)
#define SC ((COLS + BC - 1) / BC)

typedef struct fixture {
    ckpt_file *fd, *fs;
    ckpt_storage sd, ss;
    ckpt_extent ed, es;
    ckpt_tensor data, scale;
    ckpt_graph *g;
    float scales[SR * SC];
    uint16_t want[ROWS * COLS]; /* bfloat16 bits */
} fixture;

static float e4m3fn(uint8_t b)
{
    int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
    float v;

    if (e == 15 && m == 7)
        return NAN;
    v = e ? ldexpf(1.0f + (float)m / 8, e - 7) : ldexpf((float)m / 8, -6);
    return sign ? -v : v;
}

static uint16_t bf16_rne(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof u);
    if (isnan(f))
        return 0x7fc0;
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static uint8_t byte_at(int64_t i, int64_t j)
{
    return (uint8_t)((i * COLS + j) * 37 + i);
}

static void storage(ckpt_storage *s, ckpt_extent *e, ckpt_file **f, const char *path, const void *bytes, size_t n,
                    ckpt_dtype dtype)
{
    ckpt_test_write_file(path, bytes, n);
    if (ckpt_file_open(f, path) < 0)
        abort();
    e->file = *f;
    e->stored_size = e->size = n;
    s->key = path;
    s->dtype = dtype;
    s->nbytes = n;
    s->n_extents = 1;
    s->extents = e;
}

static void tensor(ckpt_tensor *t, ckpt_storage *s, const char *name, ckpt_dtype dtype, int64_t rows, int64_t cols)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = dtype;
    t->ndim = 2;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->storage = s;
    ckpt_tensor_set_contiguous(t);
}

static void fixture_open(fixture *f)
{
    static uint8_t bytes[ROWS * COLS];
    int64_t i, j;

    memset(f, 0, sizeof *f);
    for (i = 0; i < SR * SC; i++)
        f->scales[i] = ldexpf(1.0f + 0.37f * (float)i, (int)i - 3);
    f->scales[SC + 1] = INFINITY; /* a partial block in both dimensions */
    for (i = 0; i < ROWS; i++)
        for (j = 0; j < COLS; j++) {
            bytes[i * COLS + j] = byte_at(i, j);
            f->want[i * COLS + j] = bf16_rne(e4m3fn(byte_at(i, j)) * f->scales[(i / BR) * SC + j / BC]);
        }
    storage(&f->sd, &f->ed, &f->fd, "data.bin", bytes, sizeof bytes, CKPT_DTYPE_F8_E4M3FN);
    storage(&f->ss, &f->es, &f->fs, "scale.bin", f->scales, sizeof f->scales, CKPT_DTYPE_F32);
    tensor(&f->data, &f->sd, "w.weight", CKPT_DTYPE_F8_E4M3FN, ROWS, COLS);
    tensor(&f->scale, &f->ss, "w.weight_scale_inv", CKPT_DTYPE_F32, SR, SC);
    if (ckpt_graph_new(&f->g) < 0)
        abort();
}

static void fixture_close(fixture *f)
{
    ckpt_graph_free(f->g);
    ckpt_file_close(f->fd);
    ckpt_file_close(f->fs);
}

static int same_bf16(uint16_t a, uint16_t b)
{
    int nan_a = (a & 0x7f80) == 0x7f80 && (a & 0x7f), nan_b = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
    return nan_a || nan_b ? nan_a && nan_b : a == b;
}

/* x read as bf16, whole and in ranges of odd lengths from odd places, equals want[0..n). */
static int check(const ckpt_node *x, const uint16_t *want, int64_t n)
{
    static uint16_t got[ROWS * COLS];
    int64_t first, len, i;

    if (ckpt_node_numel(x) != n)
        return 0;
    for (len = n; len >= 1; len = len > 200 ? len / 3 : len - 97) {
        for (first = 0; first + len <= n; first += len + 13) {
            if (ckpt_node_read(x, first, len, CKPT_DTYPE_BF16, got) < 0)
                return 0;
            for (i = 0; i < len; i++)
                if (!same_bf16(got[i], want[first + i]))
                    return 0;
        }
        if (len < 100)
            break;
    }
    return 1;
}

CKPT_TEST(dequant_blocks_partial_blocks_nan_inf)
{
    fixture f;
    const ckpt_node *x;

    fixture_open(&f);
    ASSERT_OK(ckpt_node_block_dequant(f.g, &f.data, &f.scale, BR, BC, CKPT_DTYPE_BF16, &x));
    ASSERT_EQ_INT(ckpt_node_dtype(x), CKPT_DTYPE_BF16);
    ASSERT_TRUE(!ckpt_node_is_copy(x));
    ASSERT_TRUE(check(x, f.want, ROWS * COLS));
    fixture_close(&f);
}

CKPT_TEST(dequant_rounds_once_to_bf16_then_casts)
{
    fixture f;
    const ckpt_node *x, *y;
    static float got[ROWS * COLS];
    int64_t i;
    uint32_t bits;

    fixture_open(&f);
    ASSERT_OK(ckpt_node_block_dequant(f.g, &f.data, &f.scale, BR, BC, CKPT_DTYPE_BF16, &x));
    ASSERT_OK(ckpt_node_cast(f.g, x, CKPT_DTYPE_F32, &y));
    ASSERT_OK(ckpt_node_read(y, 0, ROWS * COLS, CKPT_DTYPE_F32, got));
    for (i = 0; i < ROWS * COLS; i++) {
        ASSERT_TRUE(same_bf16(bf16_rne(got[i]), f.want[i]));
        /* float32 holds every bfloat16 exactly */
        memcpy(&bits, &got[i], sizeof bits);
        ASSERT_TRUE(isnan(got[i]) || (uint32_t)bf16_rne(got[i]) << 16 == bits);
    }
    fixture_close(&f);
}

CKPT_TEST(dequant_through_transpose_and_slices)
{
    fixture f;
    const ckpt_node *x, *t, *s;
    static uint16_t want[ROWS * COLS];
    int64_t i, j;

    fixture_open(&f);
    ASSERT_OK(ckpt_node_block_dequant(f.g, &f.data, &f.scale, BR, BC, CKPT_DTYPE_BF16, &x));
    /* rows 100..199 across the row-block edge at 128, columns 60..129 across both column edges */
    ASSERT_OK(ckpt_node_slice(f.g, x, 0, 100, 100, &s));
    ASSERT_OK(ckpt_node_slice(f.g, s, 1, 60, 70, &s));
    ASSERT_OK(ckpt_node_transpose(f.g, s, 0, 1, &t));
    for (j = 0; j < 70; j++)
        for (i = 0; i < 100; i++)
            want[j * 100 + i] = f.want[(100 + i) * COLS + 60 + j];
    ASSERT_TRUE(check(t, want, 70 * 100));
    fixture_close(&f);
}

CKPT_TEST(dequant_refuses_scale_shape_block_size_and_rank)
{
    fixture f;
    const ckpt_node *x;
    ckpt_tensor bad;

    fixture_open(&f);
    /* one block too few along the columns: [ceil(200/128), ceil(136/64)] is [2, 3] */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_node_block_dequant(f.g, &f.data, &f.scale, BR, 128, CKPT_DTYPE_BF16, &x));
    ASSERT_ERROR_MENTIONS("w.weight_scale_inv");
    ASSERT_ERROR_MENTIONS("[2, 2]");
    bad = f.scale;
    bad.shape[0] = 3;
    bad.shape[1] = 2;
    ckpt_tensor_set_contiguous(&bad);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_node_block_dequant(f.g, &f.data, &bad, BR, BC, CKPT_DTYPE_BF16, &x));
    ASSERT_ERROR_MENTIONS("w.weight");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_node_block_dequant(f.g, &f.data, &f.scale, 0, BC, CKPT_DTYPE_BF16, &x));
    ASSERT_ERROR_MENTIONS("not positive");
    bad = f.data;
    bad.ndim = 1;
    bad.shape[0] = ROWS * COLS;
    ckpt_tensor_set_contiguous(&bad);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_node_block_dequant(f.g, &bad, &f.scale, BR, BC, CKPT_DTYPE_BF16, &x));
    ASSERT_ERROR_MENTIONS("1 dimensions");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_node_block_dequant(f.g, &f.data, &f.scale, BR, BC, CKPT_DTYPE_I32, &x));
    fixture_close(&f);
}
