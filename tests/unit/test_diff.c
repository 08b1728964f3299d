/* ckpt_diff against values set here: equality, tolerances, NaN and infinities, dtype and
 * shape changes, names on one side, pieces of a large tensor spread over threads, complex
 * values, 64-bit integers, empty tensors, scalars, bool and float8, state entries. ckpt_whole
 * (the checkpoints compared) is test_whole.c's. */
#include "test.h"

#include <ckpt/sys/io.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 16

/* Tensors over files of their own, in the test's temporary directory. */
typedef struct pool {
    ckpt_file *files[MAX_TENSORS];
    ckpt_extent extents[MAX_TENSORS];
    ckpt_storage storages[MAX_TENSORS];
    ckpt_tensor tensors[MAX_TENSORS];
    ckpt_graph *g;
    ckpt_diff_input in[MAX_TENSORS];
    size_t n;
} pool;

static void pool_open(pool *p)
{
    memset(p, 0, sizeof *p);
    if (ckpt_graph_new(&p->g) < 0)
        abort();
}

static void pool_close(pool *p)
{
    size_t i;

    ckpt_graph_free(p->g);
    for (i = 0; i < p->n; i++)
        ckpt_file_close(p->files[i]);
}

/* A tensor of `dtype` and shape holding `data` (its bytes as stored). */
static void add(pool *p, const char *name, ckpt_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    static int counter;
    ckpt_tensor *t = &p->tensors[p->n];
    ckpt_storage *s = &p->storages[p->n];
    ckpt_extent *e = &p->extents[p->n];
    size_t nbytes = ckpt_dtype_size(dtype);
    char path[64];
    int d;

    for (d = 0; d < ndim; d++)
        nbytes *= (size_t)shape[d];
    snprintf(path, sizeof path, "t%d.bin", counter++);
    ckpt_test_write_file(path, data, nbytes);
    if (ckpt_file_open(&p->files[p->n], path) < 0)
        abort();
    e->file = p->files[p->n];
    e->stored_size = e->size = nbytes;
    s->key = name;
    s->dtype = dtype;
    s->nbytes = nbytes;
    s->n_extents = 1;
    s->extents = e;
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->storage = s;
    ckpt_tensor_set_contiguous(t);
    if (ckpt_node_tensor(p->g, t, &p->in[p->n].node) < 0)
        abort();
    p->in[p->n++].name = name;
}

static void add_f32(pool *p, const char *name, int64_t rows, int64_t cols, const float *v)
{
    int64_t shape[2] = { rows, cols };
    add(p, name, CKPT_DTYPE_F32, 2, shape, v);
}

static const ckpt_diff_entry *entry(const ckpt_diff_report *r, const char *name)
{
    size_t i;

    for (i = 0; i < r->n; i++)
        if (strcmp(r->entries[i].name, name) == 0)
            return &r->entries[i];
    return NULL;
}

CKPT_TEST(equal_tensors_are_equal)
{
    float v[6] = { 1, 2, 3, 4, 5, 6 };
    pool a, b;
    ckpt_diff_report *r;

    pool_open(&a);
    pool_open(&b);
    add_f32(&a, "w", 2, 3, v);
    add_f32(&b, "w", 2, 3, v);
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, NULL, &r));
    ASSERT_EQ_INT(r->n, 1);
    ASSERT_EQ_INT(r->equal, 1);
    ASSERT_EQ_INT(r->entries[0].status, CKPT_DIFF_EQUAL);
    ASSERT_EQ_INT(r->entries[0].elements, 6);
    ASSERT_EQ_INT(r->entries[0].first, -1);
    ASSERT_TRUE(ckpt_diff_report_same(r, 0));
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(a_changed_element_is_found)
{
    float va[6] = { 1, 2, 3, 4, 5, 6 }, vb[6] = { 1, 2, 3, 4, 5.5f, 6 };
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    const ckpt_diff_entry *e;
    pool a, b;
    ckpt_diff_report *r;

    pool_open(&a);
    pool_open(&b);
    add_f32(&a, "w", 2, 3, va);
    add_f32(&b, "w", 2, 3, vb);
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
    e = &r->entries[0];
    ASSERT_EQ_INT(e->status, CKPT_DIFF_DIFFERENT);
    ASSERT_EQ_INT(e->first, 4);
    ASSERT_EQ_INT(e->first_index[0], 1);
    ASSERT_EQ_INT(e->first_index[1], 1);
    ASSERT_TRUE(e->first_a == 5 && e->first_b == 5.5);
    ASSERT_TRUE(e->max_abs == 0.5);
    ASSERT_TRUE(fabs(e->max_rel - 0.5 / 5.5) < 1e-15);
    ASSERT_EQ_INT(e->unequal, 1);
    ASSERT_EQ_INT(e->mismatched, 1);
    ASSERT_TRUE(!ckpt_diff_report_same(r, 1));
    ckpt_diff_report_free(r);
    /* |a - b| = 0.5 <= atol + rtol * |b| = 0.2 + 0.1 * 5.5 */
    o.atol = 0.2;
    o.rtol = 0.1;
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
    e = &r->entries[0];
    ASSERT_EQ_INT(e->status, CKPT_DIFF_CLOSE);
    ASSERT_EQ_INT(e->mismatched, 0);
    ASSERT_EQ_INT(e->first, 4);
    ASSERT_TRUE(ckpt_diff_report_same(r, 0));
    ckpt_diff_report_free(r);
    /* just outside: 0.5 > 0.2 + 0.05 * 5.5 */
    o.rtol = 0.05;
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
    ASSERT_EQ_INT(r->entries[0].status, CKPT_DIFF_DIFFERENT);
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(nan_equals_nan_at_the_same_place_only)
{
    float va[6] = { NAN, 1, INFINITY, -0.0f, 2, 3 }, vb[6] = { NAN, 1, INFINITY, 0.0f, 2, 3 };
    float vc[6] = { NAN, NAN, INFINITY, 0.0f, -INFINITY, 3 };
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    const ckpt_diff_entry *e;
    pool a, b;
    ckpt_diff_report *r;

    pool_open(&a);
    pool_open(&b);
    add_f32(&a, "x", 2, 3, va);
    add_f32(&a, "y", 2, 3, va);
    add_f32(&b, "x", 2, 3, vb);
    add_f32(&b, "y", 2, 3, vc);
    o.atol = 1e30;
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
    /* -0 against 0: equal values, other bytes */
    e = entry(r, "x");
    ASSERT_EQ_INT(e->status, CKPT_DIFF_CLOSE);
    ASSERT_EQ_INT(e->unequal, 0);
    ASSERT_EQ_INT(e->first, -1);
    /* 1 against NaN, 2 against -inf: outside any tolerance */
    e = entry(r, "y");
    ASSERT_EQ_INT(e->status, CKPT_DIFF_DIFFERENT);
    ASSERT_EQ_INT(e->unequal, 2);
    ASSERT_EQ_INT(e->mismatched, 2);
    ASSERT_EQ_INT(e->nan_mismatched, 1);
    ASSERT_EQ_INT(e->first, 1);
    ASSERT_TRUE(isinf(e->max_abs));
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(dtypes_compare_by_value)
{
    float v[4] = { 1, -2.5f, 0.125f, 3 };
    uint16_t bf[4];
    int64_t shape[1] = { 4 };
    pool a, b;
    ckpt_diff_report *r;
    int i;

    for (i = 0; i < 4; i++)
        bf[i] = ckpt_f32_to_bf16(v[i]);
    pool_open(&a);
    pool_open(&b);
    add(&a, "w", CKPT_DTYPE_F32, 1, shape, v);
    add(&b, "w", CKPT_DTYPE_BF16, 1, shape, bf);
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, NULL, &r));
    ASSERT_EQ_INT(r->entries[0].status, CKPT_DIFF_EQUAL);
    ASSERT_EQ_INT(r->entries[0].dtype_a, CKPT_DTYPE_F32);
    ASSERT_EQ_INT(r->entries[0].dtype_b, CKPT_DTYPE_BF16);
    ASSERT_EQ_INT(r->dtype_changed, 1);
    ASSERT_TRUE(!ckpt_diff_report_same(r, 0));
    ASSERT_TRUE(ckpt_diff_report_same(r, 1));
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(names_shapes_and_exclusions)
{
    float v[6] = { 1, 2, 3, 4, 5, 6 };
    const char *exclude[] = { "*.skip", NULL };
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    pool a, b;
    ckpt_diff_report *r;

    pool_open(&a);
    pool_open(&b);
    add_f32(&a, "only_a", 2, 3, v);
    add_f32(&a, "s", 2, 3, v);
    add_f32(&a, "x.skip", 2, 3, v);
    add_f32(&a, "same", 2, 3, v);
    add_f32(&b, "same", 2, 3, v);
    add_f32(&b, "s", 3, 2, v);
    add_f32(&b, "only_b", 1, 6, v);
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, NULL, &r));
    ASSERT_EQ_INT(r->n, 5);
    ASSERT_EQ_STR(r->entries[0].name, "only_a");
    ASSERT_EQ_INT(r->entries[0].status, CKPT_DIFF_ONLY_A);
    ASSERT_EQ_INT(entry(r, "s")->status, CKPT_DIFF_SHAPE);
    ASSERT_EQ_INT(entry(r, "x.skip")->status, CKPT_DIFF_ONLY_A);
    ASSERT_EQ_STR(r->entries[4].name, "only_b");
    ASSERT_EQ_INT(r->entries[4].status, CKPT_DIFF_ONLY_B);
    ASSERT_EQ_INT(r->only_a, 2);
    ASSERT_EQ_INT(r->only_b, 1);
    ASSERT_EQ_INT(r->shape, 1);
    ASSERT_EQ_INT(r->equal, 1);
    ckpt_diff_report_free(r);
    o.exclude = exclude;
    o.names_only = 1;
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
    ASSERT_EQ_INT(r->n, 4);
    ASSERT_TRUE(entry(r, "x.skip") == NULL);
    ASSERT_EQ_INT(entry(r, "same")->status, CKPT_DIFF_UNREAD);
    ASSERT_EQ_INT(r->bytes_a, 0);
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(a_name_twice_is_refused)
{
    float v[1] = { 1 };
    pool a;
    ckpt_diff_report *r = NULL;

    pool_open(&a);
    add_f32(&a, "w", 1, 1, v);
    add_f32(&a, "w", 1, 1, v);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_diff(a.in, a.n, a.in, 1, NULL, &r));
    ASSERT_ERROR_MENTIONS("A holds two tensors named 'w'");
    ASSERT_TRUE(r == NULL);
    pool_close(&a);
}

/* A tensor of many pieces (the least memory there is): whatever the thread count, the
 * first difference is the smallest index and the counts add up. */
CKPT_TEST(pieces_merge_the_same_for_any_thread_count)
{
    enum { N = 100009 };
    float *va = malloc(N * sizeof *va), *vb = malloc(N * sizeof *vb);
    static const int at[] = { 99999, 50000, 4097, 77 };
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    int64_t shape[2] = { 7, N / 7 }, threads;
    pool a, b;
    ckpt_diff_report *r;
    size_t k;
    int i;

    ASSERT_TRUE(N % 7 == 0 && va && vb);
    for (i = 0; i < N; i++)
        va[i] = vb[i] = (float)i;
    for (k = 0; k < sizeof at / sizeof at[0]; k++)
        vb[at[k]] += (float)(k + 1);
    pool_open(&a);
    pool_open(&b);
    add(&a, "big", CKPT_DTYPE_F32, 2, shape, va);
    add(&b, "big", CKPT_DTYPE_F32, 2, shape, vb);
    o.memory = 1;
    for (threads = 1; threads <= 4; threads++) {
        const ckpt_diff_entry *e;
        o.threads = (int)threads;
        ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
        e = &r->entries[0];
        ASSERT_EQ_INT(e->elements, N);
        ASSERT_EQ_INT(e->unequal, 4);
        ASSERT_EQ_INT(e->first, 77);
        ASSERT_EQ_INT(e->first_index[0], 77 / (N / 7));
        ASSERT_EQ_INT(e->first_index[1], 77 % (N / 7));
        ASSERT_TRUE(e->max_abs == 4 && e->first_b == 81);
        ckpt_diff_report_free(r);
    }
    pool_close(&a);
    pool_close(&b);
    free(va);
    free(vb);
}

CKPT_TEST(the_first_difference_is_found_across_piece_boundaries)
{
    enum { N = 3 * 4096 + 5 };
    float *va = malloc(N * sizeof *va), *vb = malloc(N * sizeof *vb);
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    int64_t shape[1] = { N };
    pool a, b;
    ckpt_diff_report *r;
    int i, threads;

    ASSERT_TRUE(va && vb);
    for (i = 0; i < N; i++)
        va[i] = vb[i] = (float)i;
    /* the first element of the second piece and the last of the third, nothing before */
    vb[4096] += 1;
    vb[3 * 4096 - 1] += 2;
    vb[N - 1] += 3;
    pool_open(&a);
    pool_open(&b);
    add(&a, "v", CKPT_DTYPE_F32, 1, shape, va);
    add(&b, "v", CKPT_DTYPE_F32, 1, shape, vb);
    o.memory = 1; /* the smallest pieces: 4096 elements */
    for (threads = 1; threads <= 4; threads++) {
        const ckpt_diff_entry *e;
        o.threads = threads;
        ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
        e = &r->entries[0];
        ASSERT_EQ_INT(e->unequal, 3);
        ASSERT_EQ_INT(e->first, 4096);
        ASSERT_EQ_INT(e->first_index[0], 4096);
        ASSERT_TRUE(e->first_a == 4096 && e->first_b == 4097 && e->max_abs == 3);
        ckpt_diff_report_free(r);
    }
    pool_close(&a);
    pool_close(&b);
    free(va);
    free(vb);
}

CKPT_TEST(int64_values_differ_beyond_float64_precision)
{
    int64_t va[2] = { 7, (int64_t)1 << 60 }, vb[2] = { 7, ((int64_t)1 << 60) + 1 }, shape[1] = { 2 };
    uint64_t ua[1] = { UINT64_MAX }, ub[1] = { UINT64_MAX - 1 }, ushape[1] = { 1 };
    int64_t neg_a[1] = { INT64_MIN }, neg_b[1] = { INT64_MAX };
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    pool a, b;
    ckpt_diff_report *r;

    pool_open(&a);
    pool_open(&b);
    add(&a, "i", CKPT_DTYPE_I64, 1, shape, va);
    add(&b, "i", CKPT_DTYPE_I64, 1, shape, vb);
    add(&a, "u", CKPT_DTYPE_U64, 1, (const int64_t *)ushape, ua);
    add(&b, "u", CKPT_DTYPE_U64, 1, (const int64_t *)ushape, ub);
    add(&a, "far", CKPT_DTYPE_I64, 1, (const int64_t *)ushape, neg_a);
    add(&b, "far", CKPT_DTYPE_I64, 1, (const int64_t *)ushape, neg_b);
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
    ASSERT_EQ_INT(entry(r, "i")->status, CKPT_DIFF_DIFFERENT);
    ASSERT_EQ_INT(entry(r, "i")->first, 1);
    ASSERT_TRUE(entry(r, "i")->max_abs == 1);
    ASSERT_EQ_INT(entry(r, "u")->status, CKPT_DIFF_DIFFERENT);
    ASSERT_TRUE(entry(r, "u")->max_abs == 1);
    ASSERT_TRUE(entry(r, "far")->max_abs == ldexp(1, 64));
    ASSERT_TRUE(!ckpt_diff_report_same(r, 0));
    ckpt_diff_report_free(r);
    o.atol = 1;
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
    ASSERT_EQ_INT(entry(r, "i")->status, CKPT_DIFF_CLOSE);
    ASSERT_EQ_INT(entry(r, "u")->status, CKPT_DIFF_CLOSE);
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(empty_scalar_bool_and_float8_tensors)
{
    int64_t empty[2] = { 0, 4 }, two[1] = { 2 }, none[1] = { 0 };
    float sa = 1.5f, sb = 2.5f;
    unsigned char ba[2] = { 1, 0 }, bb[2] = { 1, 1 };
    unsigned char e4a[2] = { 0x38, 0x40 }, e4b[2] = { 0x38, 0x42 }; /* e4m3fn: 1, 2 | 1, 2.5 */
    unsigned char e5a[2] = { 0x3c, 0x40 };                           /* e5m2: 1, 2 */
    float f32[2] = { 1, 2 };
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    const ckpt_diff_entry *e;
    pool a, b;
    ckpt_diff_report *r;

    pool_open(&a);
    pool_open(&b);
    add(&a, "empty", CKPT_DTYPE_F32, 2, empty, &sa);
    add(&b, "empty", CKPT_DTYPE_F32, 2, empty, &sb);
    add(&a, "scalar", CKPT_DTYPE_F32, 0, none, &sa);
    add(&b, "scalar", CKPT_DTYPE_F32, 0, none, &sb);
    add(&a, "mask", CKPT_DTYPE_BOOL, 1, two, ba);
    add(&b, "mask", CKPT_DTYPE_BOOL, 1, two, bb);
    add(&a, "e4", CKPT_DTYPE_F8_E4M3FN, 1, two, e4a);
    add(&b, "e4", CKPT_DTYPE_F8_E4M3FN, 1, two, e4b);
    add(&a, "e5", CKPT_DTYPE_F8_E5M2, 1, two, e5a);
    add(&b, "e5", CKPT_DTYPE_F32, 1, two, f32);
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, &o, &r));
    e = entry(r, "empty");
    ASSERT_TRUE(e->status == CKPT_DIFF_EQUAL && e->elements == 0 && e->first == -1);
    e = entry(r, "scalar");
    ASSERT_TRUE(e->status == CKPT_DIFF_DIFFERENT && e->ndim_a == 0 && e->first == 0 && e->max_abs == 1);
    e = entry(r, "mask");
    ASSERT_TRUE(e->status == CKPT_DIFF_DIFFERENT && e->first == 1 && e->first_a == 0 && e->first_b == 1);
    e = entry(r, "e4");
    ASSERT_TRUE(e->status == CKPT_DIFF_DIFFERENT && e->first == 1 && e->first_a == 2 && e->first_b == 2.5);
    e = entry(r, "e5");
    ASSERT_TRUE(e->status == CKPT_DIFF_EQUAL && e->dtype_a != e->dtype_b);
    ASSERT_EQ_INT(r->dtype_changed, 1);
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(state_entries_on_one_side_are_not_differences)
{
    float w[1] = { 1 };
    unsigned char sa[3] = { 1, 2, 3 }, sb[3] = { 1, 2, 4 };
    int64_t three[1] = { 3 };
    pool a, b;
    ckpt_diff_report *r;

    pool_open(&a);
    pool_open(&b);
    add_f32(&a, "w", 1, 1, w);
    add_f32(&b, "w", 1, 1, w);
    add(&b, "fc._extra_state", CKPT_DTYPE_U8, 1, three, sb);
    b.in[b.n - 1].state = 1;
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, NULL, &r));
    ASSERT_EQ_INT(entry(r, "fc._extra_state")->status, CKPT_DIFF_STATE_ONLY_B);
    ASSERT_EQ_INT(r->state_only_b, 1);
    ASSERT_EQ_INT(r->only_b, 0);
    ASSERT_TRUE(ckpt_diff_report_same(r, 0));
    ckpt_diff_report_free(r);
    /* on both sides it is compared, byte for byte */
    add(&a, "fc._extra_state", CKPT_DTYPE_U8, 1, three, sa);
    a.in[a.n - 1].state = 1;
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, NULL, &r));
    ASSERT_EQ_INT(entry(r, "fc._extra_state")->status, CKPT_DIFF_DIFFERENT);
    ASSERT_TRUE(!ckpt_diff_report_same(r, 0));
    ckpt_diff_report_free(r);
    /* a weight only one side has is a difference, whatever the other side's state */
    add_f32(&a, "lm_head.weight", 1, 1, w);
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, NULL, &r));
    ASSERT_EQ_INT(entry(r, "lm_head.weight")->status, CKPT_DIFF_ONLY_A);
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(complex_values_differ_by_their_modulus)
{
    float ca[4] = { 1, 2, 3, 4 }, cb[4] = { 1, 2, 6, 8 };
    double cc[4] = { 1, 2, 3, 4 };
    float re[2] = { 1, 3 };
    int64_t shape[1] = { 2 };
    const ckpt_diff_entry *e;
    pool a, b;
    ckpt_diff_report *r;

    pool_open(&a);
    pool_open(&b);
    add(&a, "c", CKPT_DTYPE_C64, 1, shape, ca);
    add(&a, "w", CKPT_DTYPE_C64, 1, shape, ca);
    add(&a, "r", CKPT_DTYPE_C64, 1, shape, ca);
    add(&b, "c", CKPT_DTYPE_C64, 1, shape, cb);
    add(&b, "w", CKPT_DTYPE_C128, 1, shape, cc);
    add(&b, "r", CKPT_DTYPE_F32, 1, shape, re);
    ASSERT_OK(ckpt_diff(a.in, a.n, b.in, b.n, NULL, &r));
    e = entry(r, "c");
    ASSERT_EQ_INT(e->status, CKPT_DIFF_DIFFERENT);
    ASSERT_EQ_INT(e->first, 1);
    /* |(3+4i) - (6+8i)| = 5, |6+8i| = 10 */
    ASSERT_TRUE(e->max_abs == 5 && e->max_rel == 0.5);
    ASSERT_EQ_INT(entry(r, "w")->status, CKPT_DIFF_CLOSE);
    ASSERT_EQ_INT(entry(r, "w")->unequal, 0);
    ASSERT_EQ_INT(entry(r, "r")->status, CKPT_DIFF_INCOMPARABLE);
    ckpt_diff_report_free(r);
    pool_close(&a);
    pool_close(&b);
}

CKPT_TEST(bad_options_are_refused)
{
    float v[1] = { 1 };
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    pool a;
    ckpt_diff_report *r = NULL;

    pool_open(&a);
    add_f32(&a, "w", 1, 1, v);
    o.rtol = -1;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_diff(a.in, a.n, a.in, a.n, &o, &r));
    ASSERT_ERROR_MENTIONS("tolerances");
    o.rtol = 0;
    o.atol = NAN;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_diff(a.in, a.n, a.in, a.n, &o, &r));
    o.atol = 0;
    o.version = 99;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_diff(a.in, a.n, a.in, a.n, &o, &r));
    ASSERT_TRUE(r == NULL);
    pool_close(&a);
}
