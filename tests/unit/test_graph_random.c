/* Random chains of graph operations over real input tensors, checked against a reference
 * computed here on arrays of doubles by plain index arithmetic.
 *
 * The inputs are one safetensors file written by the test: a pool of values per dtype.
 * Leaves are views on a pool with random shapes, strides (any memory order, gaps,
 * broadcast dimensions) and offsets, or zeros. Each graph applies up to MAX_OPS random
 * operations (permute, transpose, reshape, slice, split, concat, cast, pad, deinterleave,
 * interleave); every node made is read with ckpt_node_read whole and in random pieces,
 * as float64 and as its own dtype, and some are written with ckpt_graph_write (batches of
 * graphs into one safetensors or torch file), read back and compared too.
 *
 * The run is seeded: CKPT_GRAPH_SEED (default below) and CKPT_GRAPH_COUNT graphs; a
 * failure prints the seed, the graph and its chain, and CKPT_GRAPH_ONLY=<graph> reruns
 * that graph alone. Operations the graph may refuse by design (a reshape or a slice that
 * no strided view can express, a fifth successive cast) are counted, not failed. */
#include "test.h"

#include <ckpt/graph.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SEED 0x5eed2026ull
#define DEFAULT_GRAPHS 3000
#define POOL 4096      /* elements per dtype in the input file */
#define MAX_NUMEL 1024 /* operations that grow a tensor are left out above this */
#define MAX_OPS 8
#define MAX_NDIM 6     /* what the test makes; the library takes CKPT_MAX_DIMS */
#define BATCH 48       /* graphs per written file */
#define MAX_PARTS 4

/* The pools, in the file's order; casts go to any of them but U8 (negative values). */
static const ckpt_dtype pool_types[] = {
    CKPT_DTYPE_F64, CKPT_DTYPE_F32,  CKPT_DTYPE_F16,        CKPT_DTYPE_BF16,
    CKPT_DTYPE_I64, CKPT_DTYPE_I32,  CKPT_DTYPE_I16,        CKPT_DTYPE_U8,
    CKPT_DTYPE_BOOL, CKPT_DTYPE_F8_E4M3FN, CKPT_DTYPE_F8_E5M2,
};
static const char *const pool_st_names[] = { "F64", "F32", "F16", "BF16", "I64", "I32",
                                             "I16", "U8",  "BOOL", "F8_E4M3", "F8_E5M2" };
#define N_POOLS (sizeof pool_types / sizeof pool_types[0])

/* ---- random numbers ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t rnd(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(splitmix(s) % (uint64_t)(hi - lo + 1));
}

/* ---- reference tensors ---- */

typedef struct ref {
    ckpt_dtype dtype;
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    int64_t n;
    double *v; /* C order */
} ref;

typedef struct item {
    const ckpt_node *node;
    ref r;
} item;

typedef struct output {
    char name[32];
    item it;
    const char *chain; /* of its graph, up to this node */
} output;

typedef struct ctx {
    uint64_t seed, s;
    int graph;
    ckpt_ckpt *in;
    const ckpt_tensor *pool[N_POOLS];
    double pool_vals[N_POOLS][POOL];
    ckpt_graph *g;
    void **allocs; /* freed with the batch's graph */
    size_t n_allocs, cap_allocs;
    ckpt_buf chain;
    output outs[2 * BATCH];
    size_t n_outs;
    int batches, failed;
    long ops, nodes, pieces, written, refused_reshape, refused_slice, refused_cast;
} ctx;

static void *keep(ctx *c, size_t size)
{
    void *p = calloc(1, size ? size : 1);

    if (!p)
        abort();
    if (c->n_allocs == c->cap_allocs) {
        c->cap_allocs = c->cap_allocs ? 2 * c->cap_allocs : 256;
        c->allocs = realloc(c->allocs, c->cap_allocs * sizeof *c->allocs);
        if (!c->allocs)
            abort();
    }
    c->allocs[c->n_allocs++] = p;
    return p;
}

static void fail(ctx *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ckpt_test_fail(__FILE__, __LINE__, "seed %#llx graph %d: %s%s%s%s\n  chain: %s\n  rerun: CKPT_GRAPH_SEED=%#llx CKPT_GRAPH_ONLY=%d",
                   (unsigned long long)c->seed, c->graph, msg, *ckpt_error_last()->message ? " (" : "",
                   ckpt_error_last()->message, *ckpt_error_last()->message ? ")" : "",
                   c->chain.data ? (const char *)c->chain.data : "", (unsigned long long)c->seed, c->graph);
    c->failed = 1;
}

static void note(ctx *c, const char *fmt, ...)
{
    char text[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ckpt_buf_puts(&c->chain, text);
}

static void note_shape(ctx *c, const ref *r)
{
    int d;

    note(c, "[");
    for (d = 0; d < r->ndim; d++)
        note(c, d ? "x%lld" : "%lld", (long long)r->shape[d]);
    note(c, "] %s", ckpt_dtype_name(r->dtype));
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    int d;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

static void ref_init(ctx *c, ref *r, ckpt_dtype dtype, int ndim, const int64_t *shape)
{
    r->dtype = dtype;
    r->ndim = ndim;
    memset(r->shape, 0, sizeof r->shape);
    if (ndim)
        memcpy(r->shape, shape, (size_t)ndim * sizeof *shape);
    r->n = numel_of(ndim, shape);
    r->v = keep(c, (size_t)r->n * sizeof *r->v);
}

/* Elements before axis (outer) and after it (inner). */
static void around(const ref *r, int axis, int64_t *outer, int64_t *inner)
{
    int d;

    *outer = *inner = 1;
    for (d = 0; d < axis; d++)
        *outer *= r->shape[d];
    for (d = axis + 1; d < r->ndim; d++)
        *inner *= r->shape[d];
}

/* dst[.., dst_at + k, ..] = src[.., src_at + k, ..] for k in [0, len) along axis. */
static void copy_along(ref *dst, int64_t dst_at, const ref *src, int64_t src_at, int64_t len, int axis)
{
    int64_t outer, inner, o;

    around(src, axis, &outer, &inner);
    for (o = 0; o < outer; o++)
        memcpy(dst->v + (o * dst->shape[axis] + dst_at) * inner, src->v + (o * src->shape[axis] + src_at) * inner,
               (size_t)(len * inner) * sizeof(double));
}

/* What ckpt_dtype_convert makes of v as dtype, back as a double. */
static double cast_value(double v, ckpt_dtype dtype)
{
    unsigned char b[16];

    if (ckpt_dtype_convert(dtype, b, CKPT_DTYPE_F64, &v, 1) != 0)
        abort();
    return ckpt_dtype_load_f64(dtype, b);
}

/* ---- checking a node ---- */

static int same_doubles(const double *a, const double *b, int64_t n)
{
    return n == 0 || memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* "element i is x, expected y" for the first difference. */
static const char *first_diff(const double *got, const double *want, int64_t n)
{
    static char text[96];
    int64_t i;

    for (i = 0; i < n && memcmp(&got[i], &want[i], sizeof *got) == 0; i++)
        ;
    snprintf(text, sizeof text, "element %lld is %g, expected %g", (long long)i, i < n ? got[i] : 0.0,
             i < n ? want[i] : 0.0);
    return text;
}

/* Shape, then the values read whole and in random pieces, as float64 and as the node's
 * own dtype. */
static int check_node(ctx *c, const ckpt_node *x, const ref *r, const char *what)
{
    size_t es = ckpt_dtype_size(r->dtype);
    double *got = keep(c, (size_t)r->n * sizeof *got);
    unsigned char *own = keep(c, (size_t)r->n * es), *want = keep(c, (size_t)r->n * es);
    int64_t first, count, i;
    ckpt_buf text = CKPT_BUF_INIT;
    int d;

    c->nodes++;
    if (ckpt_node_dtype(x) != r->dtype || ckpt_node_ndim(x) != r->ndim || ckpt_node_numel(x) != r->n) {
        fail(c, "%s: node is %s with %d dims and %lld elements, expected %s with %d and %lld", what,
             ckpt_dtype_name(ckpt_node_dtype(x)), ckpt_node_ndim(x), (long long)ckpt_node_numel(x),
             ckpt_dtype_name(r->dtype), r->ndim, (long long)r->n);
        return -1;
    }
    for (d = 0; d < r->ndim; d++)
        if (ckpt_node_shape(x)[d] != r->shape[d]) {
            fail(c, "%s: dimension %d is %lld, expected %lld", what, d, (long long)ckpt_node_shape(x)[d],
                 (long long)r->shape[d]);
            return -1;
        }
    if (ckpt_node_describe(x, &text) < 0 || text.len == 0) {
        ckpt_buf_dispose(&text);
        fail(c, "%s: no description", what);
        return -1;
    }
    ckpt_buf_dispose(&text);
    if (ckpt_node_read(x, 0, r->n, CKPT_DTYPE_F64, got) < 0) {
        fail(c, "%s: reading it whole failed", what);
        return -1;
    }
    if (!same_doubles(got, r->v, r->n)) {
        fail(c, "%s: values read whole differ: %s", what, first_diff(got, r->v, r->n));
        return -1;
    }
    for (i = 0; i < r->n; i++)
        if (ckpt_dtype_convert(r->dtype, want + (size_t)i * es, CKPT_DTYPE_F64, &r->v[i], 1) != 0)
            abort();
    if (ckpt_node_read(x, 0, r->n, r->dtype, own) < 0 || (r->n && memcmp(own, want, (size_t)r->n * es) != 0)) {
        fail(c, "%s: values read whole as %s differ", what, ckpt_dtype_name(r->dtype));
        return -1;
    }
    /* consecutive pieces covering everything, each as float64 or as the node's dtype */
    memset(got, 0, (size_t)r->n * sizeof *got);
    memset(own, 0, (size_t)r->n * es);
    for (first = 0; first < r->n; first += count) {
        int as_own = (int)rnd(&c->s, 0, 1);
        count = rnd(&c->s, 1, r->n - first < 2 ? 1 : (r->n - first) / 2 + 1);
        c->pieces++;
        if (ckpt_node_read(x, first, count, as_own ? r->dtype : CKPT_DTYPE_F64,
                           as_own ? (void *)(own + (size_t)first * es) : (void *)(got + first)) < 0) {
            fail(c, "%s: reading [%lld, +%lld) failed", what, (long long)first, (long long)count);
            return -1;
        }
        if (as_own)
            for (i = first; i < first + count; i++)
                got[i] = ckpt_dtype_load_f64(r->dtype, own + (size_t)i * es);
    }
    if (!same_doubles(got, r->v, r->n)) {
        fail(c, "%s: values read in pieces differ: %s", what, first_diff(got, r->v, r->n));
        return -1;
    }
    /* and a few pieces anywhere, empty ones included */
    for (i = 0; i < 3; i++) {
        first = rnd(&c->s, 0, r->n);
        count = rnd(&c->s, 0, r->n - first);
        if (ckpt_node_read(x, first, count, CKPT_DTYPE_F64, got) < 0 || !same_doubles(got, r->v + first, count)) {
            fail(c, "%s: values read at [%lld, +%lld) differ", what, (long long)first, (long long)count);
            return -1;
        }
    }
    return 0;
}

/* ---- leaves ---- */

static size_t pool_index(ckpt_dtype t)
{
    size_t i;

    for (i = 0; i < N_POOLS && pool_types[i] != t; i++)
        ;
    if (i == N_POOLS)
        abort();
    return i;
}

/* A view on the pool of dtype, or zeros, with the given shape. */
static int make_leaf(ctx *c, ckpt_dtype dtype, int ndim, const int64_t *shape, item *out)
{
    size_t p = pool_index(dtype);
    ckpt_tensor *t;
    int64_t reach = 0, run = 1, idx[CKPT_MAX_DIMS], i;
    int order[CKPT_MAX_DIMS], d, k, rc;

    ref_init(c, &out->r, dtype, ndim, shape);
    if (rnd(&c->s, 0, 5) == 0 || out->r.n > POOL) {
        note(c, "zeros");
        note_shape(c, &out->r);
        rc = ckpt_node_zeros(c->g, dtype, ndim, shape, &out->node);
        return rc;
    }
    t = keep(c, sizeof *t);
    *t = *c->pool[p];
    t->ndim = ndim;
    for (d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        order[d] = d;
    }
    /* the memory order of the dimensions: C order, or shuffled (a permuted view) */
    if (rnd(&c->s, 0, 1))
        for (d = ndim - 1; d > 0; d--) {
            int j = (int)rnd(&c->s, 0, d), tmp = order[d];
            order[d] = order[j];
            order[j] = tmp;
        }
    for (k = ndim - 1; k >= 0; k--) {
        d = order[k];
        if (shape[d] > 1 && rnd(&c->s, 0, 9) == 0) {
            t->stride[d] = 0; /* broadcast */
            continue;
        }
        t->stride[d] = run;
        run *= shape[d] + (rnd(&c->s, 0, 3) == 0 ? rnd(&c->s, 1, 2) : 0);
    }
    for (d = 0; d < ndim; d++)
        reach += shape[d] ? (shape[d] - 1) * t->stride[d] : 0;
    if (reach >= POOL) { /* too sparse: C order without gaps fits, since numel <= POOL */
        reach = 0;
        for (d = ndim - 1, run = 1; d >= 0; d--) {
            t->stride[d] = run;
            run *= shape[d];
            reach += shape[d] ? (shape[d] - 1) * t->stride[d] : 0;
        }
    }
    t->offset = out->r.n ? rnd(&c->s, 0, POOL - 1 - reach) : 0;
    note(c, "leaf %s(offset %lld, strides", t->name, (long long)t->offset);
    for (d = 0; d < ndim; d++)
        note(c, "%s%lld", d ? "," : " ", (long long)t->stride[d]);
    note(c, ")");
    note_shape(c, &out->r);
    for (i = 0; i < out->r.n; i++) {
        int64_t rest = i, at = t->offset;
        for (d = ndim - 1; d >= 0; d--) {
            idx[d] = rest % shape[d];
            rest /= shape[d];
            at += idx[d] * t->stride[d];
        }
        out->r.v[i] = c->pool_vals[p][at];
    }
    return ckpt_node_tensor(c->g, t, &out->node);
}

static void random_shape(ctx *c, int *ndim, int64_t *shape)
{
    int d;

    *ndim = (int)rnd(&c->s, 0, 4);
    for (d = 0; d < *ndim; d++)
        shape[d] = rnd(&c->s, 0, 9) == 0 ? 0 : rnd(&c->s, 1, 7);
}

/* An axis of x as the API takes it: from the start or from the end. */
static int api_axis(ctx *c, int axis, int ndim)
{
    return rnd(&c->s, 0, 1) ? axis - ndim : axis;
}

/* ---- operations: each returns 0 and fills out[] (*n_out items), 1 when the graph refused
 * it by design, -1 on failure ---- */

static int refused(ctx *c, int rc, long *counter, const char *op)
{
    if (rc == CKPT_EUNSUPPORTED) {
        (*counter)++;
        note(c, " (%s refused)", op);
        ckpt_error_clear();
        return 1;
    }
    fail(c, "%s failed with %d", op, rc);
    return -1;
}

static int op_permute(ctx *c, const item *x, item *out, int transpose)
{
    int perm[CKPT_MAX_DIMS], api[CKPT_MAX_DIMS], d, a = 0, b = 0, rc;
    int64_t shape[CKPT_MAX_DIMS], idx[CKPT_MAX_DIMS], i;

    for (d = 0; d < x->r.ndim; d++)
        perm[d] = d;
    if (transpose) {
        a = (int)rnd(&c->s, 0, x->r.ndim - 1);
        b = (int)rnd(&c->s, 0, x->r.ndim - 1);
        perm[a] = b;
        perm[b] = a;
    } else {
        for (d = x->r.ndim - 1; d > 0; d--) {
            int j = (int)rnd(&c->s, 0, d), tmp = perm[d];
            perm[d] = perm[j];
            perm[j] = tmp;
        }
    }
    for (d = 0; d < x->r.ndim; d++) {
        shape[d] = x->r.shape[perm[d]];
        api[d] = api_axis(c, perm[d], x->r.ndim);
    }
    if (transpose) {
        int aa = api_axis(c, a, x->r.ndim), bb = api_axis(c, b, x->r.ndim);
        note(c, " -> transpose(%d,%d)", aa, bb);
        rc = ckpt_node_transpose(c->g, x->node, aa, bb, &out->node);
    } else {
        note(c, " -> permute(");
        for (d = 0; d < x->r.ndim; d++)
            note(c, d ? ",%d" : "%d", api[d]);
        note(c, ")");
        rc = ckpt_node_permute(c->g, x->node, api, &out->node);
    }
    if (rc < 0) {
        fail(c, "permute failed");
        return -1;
    }
    ref_init(c, &out->r, x->r.dtype, x->r.ndim, shape);
    for (i = 0; i < out->r.n; i++) {
        int64_t rest = i, at = 0;
        for (d = x->r.ndim - 1; d >= 0; d--) {
            idx[perm[d]] = rest % shape[d];
            rest /= shape[d];
        }
        for (d = 0; d < x->r.ndim; d++)
            at = at * x->r.shape[d] + idx[d];
        out->r.v[i] = x->r.v[at];
    }
    return 0;
}

static int op_reshape(ctx *c, const item *x, item *out)
{
    int64_t shape[CKPT_MAX_DIMS], api[CKPT_MAX_DIMS], n = x->r.n, f;
    int ndim = (int)rnd(&c->s, 0, MAX_NDIM), d, rc;

    if (n != 1 && ndim == 0)
        ndim = 1;
    for (d = 0; d < ndim; d++)
        shape[d] = 1;
    if (n == 0) {
        shape[rnd(&c->s, 0, ndim - 1)] = 0;
        for (d = 0; d < ndim; d++)
            if (shape[d] && rnd(&c->s, 0, 1))
                shape[d] = rnd(&c->s, 0, 5);
    } else {
        /* the prime factors of n, each to a random dimension */
        for (f = 2; n > 1; f++)
            while (n % f == 0) {
                shape[rnd(&c->s, 0, ndim - 1)] *= f;
                n /= f;
            }
    }
    memcpy(api, shape, sizeof api);
    if (x->r.n && ndim && rnd(&c->s, 0, 3) == 0)
        api[rnd(&c->s, 0, ndim - 1)] = -1;
    note(c, " -> reshape(");
    for (d = 0; d < ndim; d++)
        note(c, d ? ",%lld" : "%lld", (long long)api[d]);
    note(c, ")");
    rc = ckpt_node_reshape(c->g, x->node, ndim, api, &out->node);
    if (rc < 0)
        return refused(c, rc, &c->refused_reshape, "reshape");
    ref_init(c, &out->r, x->r.dtype, ndim, shape);
    if (out->r.n)
        memcpy(out->r.v, x->r.v, (size_t)out->r.n * sizeof(double));
    return 0;
}

static int op_slice(ctx *c, const item *x, item *out)
{
    int axis = (int)rnd(&c->s, 0, x->r.ndim - 1), rc;
    int64_t size = x->r.shape[axis], start = rnd(&c->s, 0, size), len = rnd(&c->s, 0, size - start);
    int64_t shape[CKPT_MAX_DIMS];
    int a = api_axis(c, axis, x->r.ndim);

    note(c, " -> slice(%d, %lld, %lld)", a, (long long)start, (long long)len);
    rc = ckpt_node_slice(c->g, x->node, a, start, len, &out->node);
    if (rc < 0)
        return refused(c, rc, &c->refused_slice, "slice");
    memcpy(shape, x->r.shape, sizeof shape);
    shape[axis] = len;
    ref_init(c, &out->r, x->r.dtype, x->r.ndim, shape);
    copy_along(&out->r, 0, &x->r, start, len, axis);
    return 0;
}

/* sizes[0..n) >= 0 adding up to total (or >= 1 each when positive is set, n <= total). */
static void composition(ctx *c, int64_t total, int n, int positive, int64_t *sizes)
{
    int64_t left = total - (positive ? n : 0);
    int i;

    for (i = 0; i < n; i++) {
        int64_t s = i == n - 1 ? left : rnd(&c->s, 0, left);
        sizes[i] = s + (positive ? 1 : 0);
        left -= s;
    }
}

static int op_split(ctx *c, const item *x, item *out, int *n_out)
{
    int axis = (int)rnd(&c->s, 0, x->r.ndim - 1), n = (int)rnd(&c->s, 1, MAX_PARTS), i, rc;
    int64_t sizes[MAX_PARTS], shape[CKPT_MAX_DIMS], at = 0;
    const ckpt_node *nodes[MAX_PARTS];
    int a = api_axis(c, axis, x->r.ndim);

    composition(c, x->r.shape[axis], n, 0, sizes);
    note(c, " -> split(%d, ", a);
    for (i = 0; i < n; i++)
        note(c, i ? "/%lld" : "%lld", (long long)sizes[i]);
    note(c, ")");
    rc = ckpt_node_split(c->g, x->node, a, (size_t)n, sizes, nodes);
    if (rc < 0)
        return refused(c, rc, &c->refused_slice, "split");
    memcpy(shape, x->r.shape, sizeof shape);
    for (i = 0; i < n; at += sizes[i], i++) {
        shape[axis] = sizes[i];
        out[i].node = nodes[i];
        ref_init(c, &out[i].r, x->r.dtype, x->r.ndim, shape);
        copy_along(&out[i].r, 0, &x->r, at, sizes[i], axis);
    }
    *n_out = n;
    return 0;
}

/* A node with x's dtype and shape but `len` along axis: x itself when that fits, else a
 * new leaf. */
static int partner(ctx *c, const item *x, int axis, int64_t len, item *out)
{
    int64_t shape[CKPT_MAX_DIMS];

    if (len == x->r.shape[axis] && rnd(&c->s, 0, 2) == 0) {
        *out = *x;
        note(c, "itself");
        return 0;
    }
    memcpy(shape, x->r.shape, sizeof shape);
    shape[axis] = len;
    return make_leaf(c, x->r.dtype, x->r.ndim, shape, out) < 0 ? -1 : 0;
}

static int op_concat(ctx *c, const item *x, item *out)
{
    int axis = (int)rnd(&c->s, 0, x->r.ndim - 1), n = (int)rnd(&c->s, 1, MAX_PARTS), mine = (int)rnd(&c->s, 0, n - 1);
    int a = api_axis(c, axis, x->r.ndim), i, rc;
    item parts[MAX_PARTS];
    const ckpt_node *nodes[MAX_PARTS];
    int64_t shape[CKPT_MAX_DIMS], at = 0;

    memcpy(shape, x->r.shape, sizeof shape);
    shape[axis] = 0;
    note(c, " -> concat(%d: ", a);
    for (i = 0; i < n; i++) {
        if (i)
            note(c, ", ");
        if (i == mine) {
            parts[i] = *x;
            note(c, "x");
        } else if (partner(c, x, axis, rnd(&c->s, 0, 1) ? x->r.shape[axis] : rnd(&c->s, 0, 4), &parts[i]) < 0) {
            fail(c, "making a concat input failed");
            return -1;
        }
        nodes[i] = parts[i].node;
        shape[axis] += parts[i].r.shape[axis];
    }
    note(c, ")");
    rc = ckpt_node_concat(c->g, nodes, (size_t)n, a, &out->node);
    if (rc < 0) {
        fail(c, "concat failed");
        return -1;
    }
    ref_init(c, &out->r, x->r.dtype, x->r.ndim, shape);
    for (i = 0; i < n; at += parts[i].r.shape[axis], i++)
        copy_along(&out->r, at, &parts[i].r, 0, parts[i].r.shape[axis], axis);
    return 0;
}

static int op_pad(ctx *c, const item *x, item *out)
{
    int axis = (int)rnd(&c->s, 0, x->r.ndim - 1), a = api_axis(c, axis, x->r.ndim), rc;
    int64_t len = x->r.shape[axis] + rnd(&c->s, 0, 3), shape[CKPT_MAX_DIMS];

    note(c, " -> pad(%d, %lld)", a, (long long)len);
    rc = ckpt_node_pad(c->g, x->node, a, len, &out->node);
    if (rc < 0) {
        fail(c, "pad failed");
        return -1;
    }
    memcpy(shape, x->r.shape, sizeof shape);
    shape[axis] = len;
    ref_init(c, &out->r, x->r.dtype, x->r.ndim, shape); /* zeroed */
    copy_along(&out->r, 0, &x->r, 0, x->r.shape[axis], axis);
    return 0;
}

static int op_cast(ctx *c, const item *x, item *out)
{
    ckpt_dtype t;
    int64_t i;
    int rc;

    do
        t = pool_types[rnd(&c->s, 0, N_POOLS - 1)];
    while (t == CKPT_DTYPE_U8);
    note(c, " -> cast(%s)", ckpt_dtype_name(t));
    rc = ckpt_node_cast(c->g, x->node, t, &out->node);
    if (rc < 0)
        return refused(c, rc, &c->refused_cast, "cast");
    ref_init(c, &out->r, t, x->r.ndim, x->r.shape);
    for (i = 0; i < out->r.n; i++)
        out->r.v[i] = cast_value(x->r.v[i], t);
    return 0;
}

/* A number of groups that divides size (> 0). */
static int64_t some_divisor(ctx *c, int64_t size)
{
    int64_t g;

    do
        g = rnd(&c->s, 1, size);
    while (size % g);
    return g;
}

static int op_deinterleave(ctx *c, const item *x, item *out, int *n_out)
{
    int axis = (int)rnd(&c->s, 0, x->r.ndim - 1), a = api_axis(c, axis, x->r.ndim), n, i, rc;
    int64_t size = x->r.shape[axis], groups, total, blocks[MAX_PARTS], shape[CKPT_MAX_DIMS], k, off;
    const ckpt_node *nodes[MAX_PARTS];

    if (size == 0)
        return 1;
    groups = some_divisor(c, size);
    total = size / groups;
    n = (int)rnd(&c->s, 1, total < MAX_PARTS ? total : MAX_PARTS);
    composition(c, total, n, 1, blocks);
    note(c, " -> deinterleave(%d, ", a);
    for (i = 0; i < n; i++)
        note(c, i ? "/%lld" : "%lld", (long long)blocks[i]);
    note(c, ")");
    rc = ckpt_node_deinterleave(c->g, x->node, a, (size_t)n, blocks, nodes);
    if (rc < 0)
        return refused(c, rc, &c->refused_slice, "deinterleave");
    memcpy(shape, x->r.shape, sizeof shape);
    for (off = 0, i = 0; i < n; off += blocks[i], i++) {
        shape[axis] = groups * blocks[i];
        out[i].node = nodes[i];
        ref_init(c, &out[i].r, x->r.dtype, x->r.ndim, shape);
        for (k = 0; k < groups; k++)
            copy_along(&out[i].r, k * blocks[i], &x->r, k * total + off, blocks[i], axis);
    }
    *n_out = n;
    return 0;
}

static int op_interleave(ctx *c, const item *x, item *out)
{
    int axis = (int)rnd(&c->s, 0, x->r.ndim - 1), a = api_axis(c, axis, x->r.ndim), n, mine, i, rc;
    int64_t size = x->r.shape[axis], groups, blocks[MAX_PARTS], shape[CKPT_MAX_DIMS], k, at = 0;
    const ckpt_node *nodes[MAX_PARTS];
    item parts[MAX_PARTS];

    if (size == 0)
        return 1;
    groups = some_divisor(c, size);
    n = (int)rnd(&c->s, 1, MAX_PARTS);
    mine = (int)rnd(&c->s, 0, n - 1);
    note(c, " -> interleave(%d, groups %lld: ", a, (long long)groups);
    memcpy(shape, x->r.shape, sizeof shape);
    shape[axis] = 0;
    for (i = 0; i < n; i++) {
        if (i)
            note(c, ", ");
        if (i == mine) {
            parts[i] = *x;
            blocks[i] = size / groups;
            note(c, "x");
        } else {
            blocks[i] = rnd(&c->s, 0, 1) ? size / groups : rnd(&c->s, 1, 3);
            if (partner(c, x, axis, groups * blocks[i], &parts[i]) < 0) {
                fail(c, "making an interleave input failed");
                return -1;
            }
        }
        note(c, " /%lld", (long long)blocks[i]);
        nodes[i] = parts[i].node;
        shape[axis] += groups * blocks[i];
    }
    note(c, ")");
    rc = ckpt_node_interleave(c->g, nodes, (size_t)n, a, blocks, &out->node);
    if (rc < 0)
        return refused(c, rc, &c->refused_slice, "interleave");
    ref_init(c, &out->r, x->r.dtype, x->r.ndim, shape);
    for (k = 0; k < groups; k++)
        for (i = 0; i < n; at += blocks[i], i++)
            copy_along(&out->r, at, &parts[i].r, k * blocks[i], blocks[i], axis);
    return 0;
}

/* ---- graphs and batches ---- */

static void add_output(ctx *c, const item *x, int k)
{
    output *o = &c->outs[c->n_outs++];

    snprintf(o->name, sizeof o->name, "g%d.n%d", c->graph, k);
    o->it = *x;
    o->chain = memcpy(keep(c, c->chain.len + 1), c->chain.data ? (const char *)c->chain.data : "", c->chain.len);
}

static int one_graph(ctx *c)
{
    item cur, outs[MAX_PARTS];
    int64_t shape[CKPT_MAX_DIMS];
    int ndim, ops = (int)rnd(&c->s, 1, MAX_OPS), k, n_out, rc, kept = 0;
    char what[32];

    ckpt_buf_clear(&c->chain);
    random_shape(c, &ndim, shape);
    if (make_leaf(c, pool_types[rnd(&c->s, 0, N_POOLS - 1)], ndim, shape, &cur) < 0) {
        fail(c, "making the leaf failed");
        return -1;
    }
    if (check_node(c, cur.node, &cur.r, "leaf") < 0)
        return -1;
    for (k = 0; k < ops; k++) {
        int op = (int)rnd(&c->s, 0, 9), grows = op == 5 || op == 6 || op == 9;
        n_out = 1;
        if (cur.r.ndim == 0 && op != 2 && op != 7)
            op = rnd(&c->s, 0, 1) ? 2 : 7; /* a scalar can be reshaped or cast */
        if (grows && cur.r.n > MAX_NUMEL)
            op = 3;
        if (cur.r.ndim >= MAX_NDIM && (op == 2 || op == 8))
            op = 0;
        c->ops++;
        switch (op) {
        case 0: rc = op_permute(c, &cur, outs, 0); break;
        case 1: rc = op_permute(c, &cur, outs, 1); break;
        case 2: rc = op_reshape(c, &cur, outs); break;
        case 3: rc = op_slice(c, &cur, outs); break;
        case 4: rc = op_split(c, &cur, outs, &n_out); break;
        case 5: rc = op_concat(c, &cur, outs); break;
        case 6: rc = op_pad(c, &cur, outs); break;
        case 7: rc = op_cast(c, &cur, outs); break;
        case 8: rc = op_deinterleave(c, &cur, outs, &n_out); break;
        default: rc = op_interleave(c, &cur, outs); break;
        }
        if (rc < 0)
            return -1;
        if (rc > 0)
            continue;
        note_shape(c, &outs[0].r);
        for (rc = 0; rc < n_out; rc++) {
            snprintf(what, sizeof what, "op %d output %d", k + 1, rc);
            if (check_node(c, outs[rc].node, &outs[rc].r, what) < 0)
                return -1;
        }
        cur = outs[rnd(&c->s, 0, n_out - 1)];
        if (!kept && k + 1 < ops && rnd(&c->s, 0, 3) == 0) {
            add_output(c, &cur, k + 1);
            kept = 1;
        }
    }
    add_output(c, &cur, ops);
    return 0;
}

/* Write the batch's outputs into one file, read it back, compare. */
static int flush(ctx *c)
{
    static const char *const paths[] = { "batch.safetensors", "batch.pt" };
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_graph_output *outs = calloc(c->n_outs + 1, sizeof *outs);
    const char *path = paths[c->batches % 2];
    ckpt_ckpt *back = NULL;
    size_t i;
    int rc = 0, d;

    if (!outs)
        abort();
    for (i = 0; i < c->n_outs; i++) {
        outs[i].name = c->outs[i].name;
        outs[i].node = c->outs[i].it.node;
    }
    o.overwrite = 1;
    o.threads = 1;
    o.memory = 1;
    c->batches++;
    if (ckpt_graph_write(outs, c->n_outs, path, &o, NULL) < 0 || ckpt_open(&back, path, NULL) < 0) {
        fail(c, "writing or reading back %s failed", path);
        rc = -1;
    }
    for (i = 0; rc == 0 && i < c->n_outs; i++) {
        const output *out = &c->outs[i];
        const ckpt_tensor *t = ckpt_tensor_find(back, out->name);
        double *got = keep(c, (size_t)out->it.r.n * sizeof *got);
        c->graph = atoi(out->name + 1);
        ckpt_buf_clear(&c->chain);
        ckpt_buf_puts(&c->chain, out->chain);
        c->written++;
        if (!t || t->dtype != out->it.r.dtype || t->ndim != out->it.r.ndim) {
            fail(c, "%s: %s in %s is %s with %d dimensions, expected %s with %d", out->name, t ? "tensor" : "no tensor",
                 path, t ? ckpt_dtype_name(t->dtype) : "-", t ? t->ndim : -1, ckpt_dtype_name(out->it.r.dtype),
                 out->it.r.ndim);
            rc = -1;
            break;
        }
        for (d = 0; d < t->ndim; d++)
            if (t->shape[d] != out->it.r.shape[d])
                rc = -1;
        if (rc == 0 && (ckpt_tensor_read(t, 0, out->it.r.n, CKPT_DTYPE_F64, got) < 0 ||
                        !same_doubles(got, out->it.r.v, out->it.r.n)))
            rc = -1;
        if (rc < 0)
            fail(c, "%s: shape or values written to %s differ", out->name, path);
    }
    ckpt_close(back);
    free(outs);
    c->n_outs = 0;
    return rc;
}

static void batch_end(ctx *c)
{
    size_t i;

    ckpt_graph_free(c->g);
    c->g = NULL;
    for (i = 0; i < c->n_allocs; i++)
        free(c->allocs[i]);
    c->n_allocs = 0;
}

/* The input file: one 1-D tensor per dtype, pool_<dtype>, of values that the dtype holds. */
static int write_pools(ctx *c, const char *path)
{
    ckpt_buf header = CKPT_BUF_INIT, file = CKPT_BUF_INIT;
    unsigned char *data;
    uint64_t at = 0, total = 0;
    size_t i, k;
    uint64_t s = c->seed ^ 0x9001;

    for (i = 0; i < N_POOLS; i++)
        total += POOL * ckpt_dtype_size(pool_types[i]);
    data = malloc(total);
    if (!data)
        abort();
    ckpt_buf_puts(&header, "{");
    for (i = 0; i < N_POOLS; i++) {
        ckpt_dtype t = pool_types[i];
        size_t es = ckpt_dtype_size(t);
        for (k = 0; k < POOL; k++) {
            double v;
            if (t == CKPT_DTYPE_BOOL)
                v = (double)rnd(&s, 0, 1);
            else if (t == CKPT_DTYPE_U8)
                v = (double)rnd(&s, 0, 255);
            else if (!ckpt_dtype_is_float(t))
                v = (double)rnd(&s, -200, 200);
            else
                v = (double)rnd(&s, -320, 320) / 8.0;
            if (ckpt_dtype_convert(t, data + at + k * es, CKPT_DTYPE_F64, &v, 1) != 0)
                abort();
            c->pool_vals[i][k] = ckpt_dtype_load_f64(t, data + at + k * es);
        }
        ckpt_buf_printf(&header, "%s\"pool_%s\":{\"dtype\":\"%s\",\"shape\":[%d],\"data_offsets\":[%llu,%llu]}",
                        i ? "," : "", ckpt_dtype_name(t), pool_st_names[i], POOL, (unsigned long long)at,
                        (unsigned long long)(at + POOL * es));
        at += POOL * es;
    }
    ckpt_buf_puts(&header, "}");
    while (header.len % 8)
        ckpt_buf_putc(&header, ' ');
    ckpt_buf_put_u64le(&file, header.len);
    ckpt_buf_append(&file, header.data, header.len);
    ckpt_buf_append(&file, data, total);
    ckpt_test_write_file(path, file.data, file.len);
    ckpt_buf_dispose(&header);
    ckpt_buf_dispose(&file);
    free(data);
    return 0;
}

static uint64_t env_u64(const char *name, uint64_t fallback)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : fallback;
}

CKPT_TEST(random_chains_against_reference)
{
    static ctx c; /* the pools are large */
    int graphs, only, i;
    size_t p;

    memset(&c, 0, sizeof c);
    c.seed = env_u64("CKPT_GRAPH_SEED", DEFAULT_SEED);
    graphs = (int)env_u64("CKPT_GRAPH_COUNT", DEFAULT_GRAPHS);
    only = (int)env_u64("CKPT_GRAPH_ONLY", (uint64_t)-1);
    printf("     seed %#llx, %d graphs\n", (unsigned long long)c.seed, graphs);
    ASSERT_OK(write_pools(&c, "pools.safetensors"));
    ASSERT_OK(ckpt_open(&c.in, "pools.safetensors", NULL));
    for (p = 0; p < N_POOLS; p++) {
        char name[32];
        snprintf(name, sizeof name, "pool_%s", ckpt_dtype_name(pool_types[p]));
        c.pool[p] = ckpt_tensor_find(c.in, name);
        ASSERT_TRUE(c.pool[p] != NULL && c.pool[p]->dtype == pool_types[p]);
    }
    for (i = 0; i < graphs && !c.failed; i++) {
        if (only >= 0 && i != only)
            continue;
        if (!c.g && ckpt_graph_new(&c.g) < 0)
            abort();
        c.graph = i;
        c.s = c.seed * 0x100000001b3ull + (uint64_t)i; /* each graph on its own stream */
        splitmix(&c.s);
        if (one_graph(&c) < 0)
            break;
        if (c.n_outs + 2 > 2 * BATCH || (i + 1) % BATCH == 0) {
            if (flush(&c) < 0)
                break;
            batch_end(&c);
        }
    }
    if (!c.failed && c.n_outs)
        flush(&c);
    batch_end(&c);
    free(c.allocs);
    ckpt_buf_dispose(&c.chain);
    ckpt_close(c.in);
    printf("     %ld operations, %ld nodes read whole and in %ld pieces, %ld written in %d files; "
           "refused by design: %ld reshapes, %ld slices (split, (de)interleave), %ld casts\n",
           c.ops, c.nodes, c.pieces, c.written, c.batches, c.refused_reshape, c.refused_slice, c.refused_cast);
    ASSERT_TRUE(!c.failed);
}
