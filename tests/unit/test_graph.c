/* The tensor graph: every operation against values computed here by index formulas, read
 * whole and in odd ranges, and written through ckpt_graph_write. */
#include "test.h"

#include <ckpt/sys/io.h>

#include <ckpt/graph.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVALS 4096

/* A real mapped file holding float32 0, 1, 2, ... so a value names its storage position. */
typedef struct fixture {
    ckpt_file *file;
    ckpt_storage s;
    ckpt_extent e;
    ckpt_graph *g;
} fixture;

static void fixture_open(fixture *f)
{
    static float vals[NVALS];
    int i;

    for (i = 0; i < NVALS; i++)
        vals[i] = (float)i;
    memset(f, 0, sizeof *f);
    ckpt_test_write_file("vals.bin", vals, sizeof vals);
    if (ckpt_file_open(&f->file, "vals.bin") < 0)
        abort();
    f->e.file = f->file;
    f->e.stored_size = f->e.size = sizeof vals;
    f->s.key = "vals";
    f->s.dtype = CKPT_DTYPE_F32;
    f->s.nbytes = sizeof vals;
    f->s.n_extents = 1;
    f->s.extents = &f->e;
    if (ckpt_graph_new(&f->g) < 0)
        abort();
}

static void fixture_close(fixture *f)
{
    ckpt_graph_free(f->g);
    ckpt_file_close(f->file);
}

/* A C-contiguous 2-D tensor of the fixture starting at element `offset`. */
static void matrix(ckpt_tensor *t, fixture *f, const char *name, int64_t offset, int64_t rows, int64_t cols)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = CKPT_DTYPE_F32;
    t->ndim = 2;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->offset = offset;
    t->storage = &f->s;
    ckpt_tensor_set_contiguous(t);
}

/* Reads the node whole and in ranges of every length 1..7 and compares with want[]. */
static int check_values(const ckpt_node *x, const float *want, int64_t n)
{
    static float got[NVALS];
    int64_t first, len;

    if (ckpt_node_numel(x) != n || ckpt_node_read(x, 0, n, CKPT_DTYPE_F32, got) < 0)
        return 0;
    if (memcmp(got, want, (size_t)n * sizeof *got))
        return 0;
    for (len = 1; len <= 7; len++)
        for (first = 0; first + len <= n; first += len + 3) {
            if (ckpt_node_read(x, first, len, CKPT_DTYPE_F32, got) < 0)
                return 0;
            if (memcmp(got, want + first, (size_t)len * sizeof *got))
                return 0;
        }
    return 1;
}

CKPT_TEST(transpose_of_a_view)
{
    static float want[60];
    const ckpt_node *x, *y;
    ckpt_tensor t;
    fixture f;
    int i, j;

    fixture_open(&f);
    matrix(&t, &f, "w", 100, 6, 10);
    ASSERT_OK(ckpt_node_tensor(f.g, &t, &x));
    ASSERT_TRUE(ckpt_node_is_copy(x));
    ASSERT_OK(ckpt_node_transpose(f.g, x, 0, 1, &y));
    ASSERT_TRUE(!ckpt_node_is_copy(y));
    ASSERT_EQ_INT(ckpt_node_shape(y)[0], 10);
    ASSERT_EQ_INT(ckpt_node_shape(y)[1], 6);
    for (i = 0; i < 10; i++)
        for (j = 0; j < 6; j++)
            want[i * 6 + j] = (float)(100 + j * 10 + i);
    ASSERT_TRUE(check_values(y, want, 60));
    ASSERT_OK(ckpt_node_transpose(f.g, y, -1, -2, &y));
    for (i = 0; i < 60; i++)
        want[i] = (float)(100 + i);
    ASSERT_TRUE(check_values(y, want, 60));
    fixture_close(&f);
}

/* TE's fused QKV: concat([q, k, v], axis=1).T, parts in three separate tensors. */
CKPT_TEST(concat_then_transpose)
{
    static float want[8 * 8];
    const ckpt_node *q, *k, *v, *parts[3], *cat, *te;
    ckpt_tensor tq, tk, tv;
    ckpt_buf text = CKPT_BUF_INIT;
    fixture f;
    int i, h;

    fixture_open(&f);
    matrix(&tq, &f, "q", 0, 8, 4);
    matrix(&tk, &f, "k", 1000, 8, 2);
    matrix(&tv, &f, "v", 2000, 8, 2);
    ASSERT_OK(ckpt_node_tensor(f.g, &tq, &q));
    ASSERT_OK(ckpt_node_tensor(f.g, &tk, &k));
    ASSERT_OK(ckpt_node_tensor(f.g, &tv, &v));
    parts[0] = q;
    parts[1] = k;
    parts[2] = v;
    ASSERT_OK(ckpt_node_concat(f.g, parts, 3, 1, &cat));
    ASSERT_OK(ckpt_node_transpose(f.g, cat, 0, 1, &te));
    for (i = 0; i < 8; i++)
        for (h = 0; h < 8; h++)
            want[i * 8 + h] = i < 4 ? (float)(h * 4 + i) : i < 6 ? (float)(1000 + h * 2 + i - 4)
                                                                  : (float)(2000 + h * 2 + i - 6);
    ASSERT_TRUE(check_values(te, want, 64));
    ASSERT_OK(ckpt_node_describe(te, &text));
    ASSERT_EQ_STR((const char *)text.data, "transpose(concat[axis=1](q, k, v))");
    ckpt_buf_dispose(&text);
    fixture_close(&f);
}

/* PaddleNLP's fused qkv_proj [H, ng*(g+2)*d]: per KV group g query heads, then k, then v. */
CKPT_TEST(deinterleave_fused_qkv)
{
    enum { H = 5, NG = 2, G = 2, D = 3, COLS = NG * (G + 2) * D };
    static float want[COLS * H];
    const int64_t blocks[3] = { G * D, D, D };
    const ckpt_node *w, *qkv[3], *cat, *te, *back, *cols[3], *wt;
    ckpt_tensor tw;
    fixture f;
    int r, c, n = 0, part, grp, j;

    fixture_open(&f);
    matrix(&tw, &f, "qkv_proj", 7, H, COLS);
    ASSERT_OK(ckpt_node_tensor(f.g, &tw, &w));
    ASSERT_OK(ckpt_node_deinterleave(f.g, w, 1, 3, blocks, qkv));
    ASSERT_EQ_INT(ckpt_node_shape(qkv[0])[1], NG * G * D);
    ASSERT_EQ_INT(ckpt_node_shape(qkv[1])[1], NG * D);
    ASSERT_OK(ckpt_node_concat(f.g, qkv, 3, 1, &cat));
    ASSERT_OK(ckpt_node_transpose(f.g, cat, 0, 1, &te));
    /* row c of te: part (q, k or v), group, index within the block */
    for (part = 0; part < 3; part++)
        for (grp = 0; grp < NG; grp++)
            for (j = 0; j < blocks[part]; j++, n++)
                for (r = 0; r < H; r++) {
                    int col = grp * (G + 2) * D + (part == 0 ? 0 : part == 1 ? G * D : G * D + D) + j;
                    want[n * H + r] = (float)(7 + r * COLS + col);
                }
    ASSERT_TRUE(check_values(te, want, COLS * H));

    /* and back: split TE rows into q, k, v, transpose, interleave per group */
    {
        const int64_t sizes[3] = { NG * G * D, NG * D, NG * D };
        ASSERT_OK(ckpt_node_transpose(f.g, te, 0, 1, &wt));
        ASSERT_OK(ckpt_node_split(f.g, wt, 1, 3, sizes, cols));
        ASSERT_OK(ckpt_node_interleave(f.g, cols, 3, 1, blocks, &back));
        for (r = 0; r < H; r++)
            for (c = 0; c < COLS; c++)
                want[r * COLS + c] = (float)(7 + r * COLS + c);
        ASSERT_TRUE(check_values(back, want, H * COLS));
        /* interleave of transposed parts, read transposed again */
        ASSERT_OK(ckpt_node_transpose(f.g, back, 0, 1, &back));
        for (c = 0; c < COLS; c++)
            for (r = 0; r < H; r++)
                want[c * H + r] = (float)(7 + r * COLS + c);
        ASSERT_TRUE(check_values(back, want, H * COLS));
    }
    fixture_close(&f);
}

CKPT_TEST(reshape_permute_slice)
{
    static float want[120];
    const int64_t s3[3] = { 2, 3, 20 }, s2[2] = { 4, -1 }, s64[2] = { 6, 4 };
    const int perm[3] = { 2, 0, 1 };
    const ckpt_node *x, *y, *z;
    ckpt_tensor t;
    fixture f;
    int a, b, c;

    fixture_open(&f);
    matrix(&t, &f, "w", 0, 6, 20);
    ASSERT_OK(ckpt_node_tensor(f.g, &t, &x));
    ASSERT_OK(ckpt_node_reshape(f.g, x, 3, s3, &y));
    ASSERT_OK(ckpt_node_permute(f.g, y, perm, &y)); /* [20, 2, 3] */
    for (a = 0; a < 20; a++)
        for (b = 0; b < 2; b++)
            for (c = 0; c < 3; c++)
                want[a * 6 + b * 3 + c] = (float)((b * 3 + c) * 20 + a);
    ASSERT_TRUE(check_values(y, want, 120));
    ASSERT_OK(ckpt_node_slice(f.g, y, 0, 5, 4, &y)); /* [4, 2, 3] */
    for (a = 0; a < 4; a++)
        for (b = 0; b < 6; b++)
            want[a * 6 + b] = (float)(b * 20 + a + 5);
    ASSERT_TRUE(check_values(y, want, 24));
    ASSERT_OK(ckpt_node_reshape(f.g, y, 2, s2, &z)); /* [4, 6]: merges the permuted dims */
    ASSERT_EQ_INT(ckpt_node_shape(z)[1], 6);
    ASSERT_TRUE(check_values(z, want, 24));
    /* [6, 4] would need the stride-1 dim of 4 split in 1.5: not a view, refused */
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_node_reshape(f.g, z, 2, s64, &z));
    fixture_close(&f);
}

CKPT_TEST(pad_cast_and_errors)
{
    static float want[40];
    const ckpt_node *x, *y, *z, *parts[2];
    const int64_t bad[2] = { 3, 7 };
    ckpt_tensor t, t2;
    fixture f;
    int i;

    fixture_open(&f);
    matrix(&t, &f, "emb", 3000, 3, 8);
    ASSERT_OK(ckpt_node_tensor(f.g, &t, &x));
    ASSERT_OK(ckpt_node_pad(f.g, x, 0, 5, &y));
    for (i = 0; i < 40; i++)
        want[i] = i < 24 ? (float)(3000 + i) : 0.0f;
    ASSERT_TRUE(check_values(y, want, 40));
    ASSERT_OK(ckpt_node_slice(f.g, y, 0, 0, 3, &z));
    ASSERT_TRUE(check_values(z, want, 24));

    /* 3001 is not a bfloat16: rounding through it, then widening, changes it once */
    ASSERT_OK(ckpt_node_cast(f.g, x, CKPT_DTYPE_BF16, &y));
    ASSERT_OK(ckpt_node_cast(f.g, y, CKPT_DTYPE_F32, &y));
    ASSERT_EQ_INT(ckpt_node_dtype(y), CKPT_DTYPE_F32);
    for (i = 0; i < 24; i++) {
        uint16_t h;
        ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_BF16, &h, CKPT_DTYPE_F32, &want[i], 1));
        ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F32, &want[i], CKPT_DTYPE_BF16, &h, 1));
    }
    ASSERT_TRUE(want[1] != 3001.0f);
    ASSERT_TRUE(check_values(y, want, 24));

    ASSERT_FAILS(CKPT_EINVALID, ckpt_node_reshape(f.g, x, 2, bad, &y));
    ASSERT_ERROR_MENTIONS("21");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_node_slice(f.g, x, 1, 6, 3, &y));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_node_transpose(f.g, x, 0, 2, &y));
    matrix(&t2, &f, "other", 0, 4, 4);
    ASSERT_OK(ckpt_node_tensor(f.g, &t2, &z));
    parts[0] = x;
    parts[1] = z;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_node_concat(f.g, parts, 2, 0, &y));
    ASSERT_ERROR_MENTIONS("dimension 1");
    /* splitting the axis two parts were joined along, off their boundary */
    parts[1] = x;
    ASSERT_OK(ckpt_node_concat(f.g, parts, 2, 0, &y)); /* [6, 8] */
    {
        const int64_t split[2] = { 4, 12 };
        ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_node_reshape(f.g, y, 2, split, &z));
    }
    fixture_close(&f);
}

CKPT_TEST(full_reads_its_value_through_views_and_casts)
{
    static const float want[6] = { 10, 10, 10, 10, 10, 10 };
    const int64_t shape[2] = { 2, 3 };
    const ckpt_node *x, *y, *parts[2];
    ckpt_buf d = CKPT_BUF_INIT;
    float got[6];
    fixture f;

    fixture_open(&f);
    ASSERT_OK(ckpt_node_full(f.g, CKPT_DTYPE_F32, 2, shape, 10.0, &x));
    ASSERT_TRUE(check_values(x, want, 6));
    ASSERT_OK(ckpt_node_slice(f.g, x, 1, 1, 2, &y));
    ASSERT_TRUE(check_values(y, want, 4));
    ASSERT_OK(ckpt_node_transpose(f.g, x, 0, 1, &y));
    ASSERT_TRUE(check_values(y, want, 6));
    /* 10.3 rounds to 10.3125 as a bfloat16, and stays that when widened again */
    ASSERT_OK(ckpt_node_full(f.g, CKPT_DTYPE_F32, 0, shape, 10.3, &x));
    ASSERT_OK(ckpt_node_cast(f.g, x, CKPT_DTYPE_BF16, &y));
    ASSERT_OK(ckpt_node_cast(f.g, y, CKPT_DTYPE_F32, &y));
    ASSERT_OK(ckpt_node_read(y, 0, 1, CKPT_DTYPE_F32, got));
    ASSERT_TRUE(got[0] == 10.3125f);
    ASSERT_OK(ckpt_node_describe(y, &d));
    ASSERT_TRUE(strstr((const char *)d.data, "full(10.3") != NULL);
    ckpt_buf_dispose(&d);
    /* zeros and a fill side by side */
    ASSERT_OK(ckpt_node_full(f.g, CKPT_DTYPE_F32, 2, shape, 0.0, &parts[0]));
    ASSERT_OK(ckpt_node_full(f.g, CKPT_DTYPE_F32, 2, shape, 10.0, &parts[1]));
    ASSERT_OK(ckpt_node_concat(f.g, parts, 2, 0, &y));
    ASSERT_OK(ckpt_node_read(y, 5, 2, CKPT_DTYPE_F32, got));
    ASSERT_TRUE(got[0] == 0.0f && got[1] == 10.0f);
    fixture_close(&f);
}

/* A flat tensor built the way optimizer buffers are: long contiguous pieces of an input
 * (written straight from the input's mapping), a strided piece and a rounded one (read
 * through a buffer), zeros between. Every byte and, in the zip, every checksum must come
 * out as if the whole tensor had been read through the buffer. */
CKPT_TEST(direct_runs_of_a_flat_concatenation)
{
    enum { ROWS = 256, COLS = 512, N = ROWS * COLS };
    static float vals[N], got[N];
    const ckpt_node *x, *p[6], *flat;
    ckpt_graph_output out;
    ckpt_convert_options opts = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_open_options oopts = CKPT_OPEN_OPTIONS_INIT;
    ckpt_convert_report report;
    const char *paths[2] = { "flat.pt", "flat.safetensors" };
    int64_t flat_shape = 0, zeros = 37, n, k;
    ckpt_tensor t;
    fixture f;
    size_t i, j;

    for (k = 0; k < N; k++)
        vals[k] = (float)k;
    fixture_open(&f);
    ckpt_test_write_file("big.bin", vals, sizeof vals);
    ckpt_file_close(f.file);
    ASSERT_OK(ckpt_file_open(&f.file, "big.bin"));
    f.e.file = f.file;
    f.e.stored_size = f.e.size = f.s.nbytes = sizeof vals;
    matrix(&t, &f, "w", 0, ROWS, COLS);
    ASSERT_OK(ckpt_node_tensor(f.g, &t, &x));
    ASSERT_OK(ckpt_node_slice(f.g, x, 0, 0, 96, &p[0]));        /* rows 0..95: one run */
    ASSERT_OK(ckpt_node_slice(f.g, x, 1, 0, COLS / 2, &p[1]));  /* half of each row: strided */
    ASSERT_OK(ckpt_node_slice(f.g, p[1], 0, 96, 32, &p[1]));
    ASSERT_OK(ckpt_node_zeros(f.g, CKPT_DTYPE_F32, 1, &zeros, &p[2]));
    ASSERT_OK(ckpt_node_slice(f.g, x, 0, 128, 64, &p[3]));      /* a run that starts mid-file */
    ASSERT_OK(ckpt_node_slice(f.g, x, 0, 192, 32, &p[4]));
    ASSERT_OK(ckpt_node_cast(f.g, p[4], CKPT_DTYPE_F64, &p[4])); /* converted: read through a buffer */
    ASSERT_OK(ckpt_node_cast(f.g, p[4], CKPT_DTYPE_F32, &p[4]));
    ASSERT_OK(ckpt_node_slice(f.g, x, 0, 224, 32, &p[5]));
    for (i = 0; i < 6; i++) {
        n = ckpt_node_numel(p[i]);
        ASSERT_OK(ckpt_node_reshape(f.g, p[i], 1, &n, &p[i]));
        flat_shape += n;
    }
    ASSERT_OK(ckpt_node_concat(f.g, p, 6, 0, &flat));
    ASSERT_EQ_INT((int)ckpt_node_numel(flat), (int)flat_shape);
    out = (ckpt_graph_output){ "flat", flat, 0 };
    oopts.verify_crc = 1;
    for (j = 0; j < 2; j++) {
        float *want = vals, *at = got;
        ckpt_ckpt *c;
        ASSERT_OK(ckpt_graph_write(&out, 1, paths[j], &opts, &report));
        ckpt_convert_report_dispose(&report);
        ASSERT_OK(ckpt_open(&c, paths[j], &oopts));
        ASSERT_OK(ckpt_tensor_read(ckpt_tensor_find(c, "flat"), 0, flat_shape, CKPT_DTYPE_F32, got));
        ckpt_close(c);
        ASSERT_TRUE(memcmp(at, want, 96 * COLS * sizeof *got) == 0);
        at += 96 * COLS;
        for (k = 96; k < 128; k++, at += COLS / 2)
            ASSERT_TRUE(memcmp(at, want + k * COLS, COLS / 2 * sizeof *got) == 0);
        for (k = 0; k < zeros; k++)
            ASSERT_TRUE(*at++ == 0.0f);
        ASSERT_TRUE(memcmp(at, want + 128 * COLS, 128 * COLS * sizeof *got) == 0);
    }
    fixture_close(&f);
}

CKPT_TEST(write_and_reopen)
{
    const ckpt_node *x, *y;
    ckpt_graph_output outs[3];
    ckpt_convert_options opts = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_convert_report report;
    ckpt_ckpt *c;
    ckpt_tensor t;
    float got[60];
    fixture f;
    int i, j;

    fixture_open(&f);
    matrix(&t, &f, "w", 10, 6, 10);
    ASSERT_OK(ckpt_node_tensor(f.g, &t, &x));
    ASSERT_OK(ckpt_node_transpose(f.g, x, 0, 1, &y));
    outs[0] = (ckpt_graph_output){ "a.weight", y, 0 };
    outs[1] = (ckpt_graph_output){ "b.weight", x, 0 };
    outs[2] = (ckpt_graph_output){ "tied.weight", y, 0 };
    ASSERT_OK(ckpt_graph_write(outs, 3, "out.safetensors", &opts, &report));
    ckpt_convert_report_dispose(&report);
    ASSERT_OK(ckpt_open(&c, "out.safetensors", NULL));
    ASSERT_EQ_INT(ckpt_tensor_count(c), 3);
    ASSERT_OK(ckpt_tensor_read(ckpt_tensor_find(c, "tied.weight"), 0, 60, CKPT_DTYPE_F32, got));
    for (i = 0; i < 10; i++)
        for (j = 0; j < 6; j++)
            ASSERT_TRUE(got[i * 6 + j] == (float)(10 + j * 10 + i));
    ckpt_close(c);

    /* torch keeps shared storages: the two outputs of one node are one storage */
    ASSERT_OK(ckpt_graph_write(outs, 3, "out.pt", &opts, &report));
    ckpt_convert_report_dispose(&report);
    ASSERT_OK(ckpt_open(&c, "out.pt", NULL));
    ASSERT_TRUE(ckpt_tensor_find(c, "a.weight")->storage == ckpt_tensor_find(c, "tied.weight")->storage);
    ASSERT_TRUE(ckpt_tensor_find(c, "a.weight")->storage != ckpt_tensor_find(c, "b.weight")->storage);
    ckpt_close(c);

    /* pdparams takes one blob per tensor, each computed from its node (here a
     * concatenation, which is no view of any input) */
    {
        const ckpt_node *parts[2] = { x, x }, *cat;
        ASSERT_OK(ckpt_node_concat(f.g, parts, 2, 0, &cat)); /* [20, 6] */
        outs[1] = (ckpt_graph_output){ "cat.weight", cat, 0 };
        ASSERT_OK(ckpt_graph_write(outs, 2, "out.pdparams", &opts, &report));
        ckpt_convert_report_dispose(&report);
        ASSERT_OK(ckpt_open(&c, "out.pdparams", NULL));
        ASSERT_OK(ckpt_tensor_read(ckpt_tensor_find(c, "cat.weight"), 60, 60, CKPT_DTYPE_F32, got));
        for (i = 0; i < 60; i++)
            ASSERT_TRUE(got[i] == (float)(10 + i));
        ckpt_close(c);
    }

    outs[1].name = "a.weight";
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_graph_write(outs, 2, "dup.safetensors", &opts, &report));
    ASSERT_ERROR_MENTIONS("a.weight");
    ckpt_convert_report_dispose(&report);
    ASSERT_TRUE(access("dup.safetensors", F_OK) != 0);
    fixture_close(&f);
}

#define CKPT_BUILD
#include "graph/engine.h"
#include "graph/node.h"

/* A transposed read uses up each input page only when it spans page / element size source
 * columns: the writer's steps over a transpose are such page bands, however short its chunk,
 * and for a concatenation of transposed parts along an inner axis, rows enough for every
 * part. A page of 64 bytes here: 16 float32 columns. */
CKPT_TEST(page_bands_of_transposes)
{
    static float want[32 * 24];
    const ckpt_node *x, *y, *a, *b, *parts[2], *cat;
    ckpt_tensor t, ta, tb;
    uint64_t step;
    fixture f;
    int i, j;

    fixture_open(&f);
    matrix(&t, &f, "w", 0, 64, 64);
    ASSERT_OK(ckpt_node_tensor(f.g, &t, &x));
    ASSERT_OK(ckpt_node_transpose(f.g, x, 0, 1, &y));
    ASSERT_EQ_INT(ckpt_node__page_band(x, CKPT_DTYPE_F32, 64), 1);
    ASSERT_EQ_INT(ckpt_node__page_band(y, CKPT_DTYPE_F32, 64), 16 * 64);
    /* a copy keeps its chunk; a transpose steps by whole pages of every source line */
    ASSERT_EQ_INT(ckpt_writer__step(x, CKPT_DTYPE_F32, 16384, 1024, 1 << 20, 64), 1024);
    step = ckpt_writer__step(y, CKPT_DTYPE_F32, 16384, 1024, 1 << 20, 64);
    ASSERT_EQ_INT(step, 4096);
    ASSERT_EQ_INT(step / (64 * 4) * 4 % 64, 0);
    /* no more than the placement, nor than the cap (then the longest step that fits) */
    ASSERT_EQ_INT(ckpt_writer__step(y, CKPT_DTYPE_F32, 2048, 1024, 1 << 20, 64), 2048);
    ASSERT_EQ_INT(ckpt_writer__step(y, CKPT_DTYPE_F32, 16384, 1024, 3002, 64), 3000);
    ASSERT_EQ_INT(ckpt_writer__step(y, CKPT_DTYPE_F32, 16384, 1024, 1000, 64), 1024);
    /* pages shorter than a row of the transpose: a band of one row is enough */
    ASSERT_EQ_INT(ckpt_node__page_band(y, CKPT_DTYPE_F32, 4), 64);

    /* concat([A.T, B.T], axis=1), A [8, 32] and B [16, 32]: 16 rows for both parts */
    matrix(&ta, &f, "a", 0, 8, 32);
    matrix(&tb, &f, "b", 1000, 16, 32);
    ASSERT_OK(ckpt_node_tensor(f.g, &ta, &a));
    ASSERT_OK(ckpt_node_tensor(f.g, &tb, &b));
    ASSERT_OK(ckpt_node_transpose(f.g, a, 0, 1, &parts[0]));
    ASSERT_OK(ckpt_node_transpose(f.g, b, 0, 1, &parts[1]));
    ASSERT_OK(ckpt_node_concat(f.g, parts, 2, 1, &cat));
    ASSERT_EQ_INT(ckpt_node__page_band(cat, CKPT_DTYPE_F32, 64), 16 * 24);
    for (i = 0; i < 32; i++)
        for (j = 0; j < 24; j++)
            want[i * 24 + j] = j < 8 ? (float)(j * 32 + i) : (float)(1000 + (j - 8) * 32 + i);
    /* read in bands of whole rows, and from inside a row to inside another */
    ASSERT_TRUE(check_values(cat, want, 32 * 24));
    {
        static float got[32 * 24];
        ASSERT_OK(ckpt_node_read(cat, 30, 700, CKPT_DTYPE_F32, got));
        ASSERT_TRUE(memcmp(got, want + 30, 700 * sizeof *got) == 0);
    }
    fixture_close(&f);
}
