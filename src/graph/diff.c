/* Comparing two lists of named nodes (ckpt/diff.h).
 *
 * Every common tensor of equal shape is cut into pieces of at most `piece` elements; the
 * pieces of all tensors are shared among the threads (dynamic schedule), so one large tensor
 * keeps every thread busy as well as many small ones do. A thread holds one piece of each
 * side at a time. When both sides have the same dtype the pieces are first compared byte for
 * byte, and only pieces that differ are widened to float64 (complex128) for the statistics.
 * Each piece's result is merged into its tensor's under a lock; the merge takes maxima, sums
 * and the smallest index, so the result does not depend on the order or the thread count. */
#include <ckpt/diff.h>
#include <ckpt/sys/common.h>

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

#define DEFAULT_MEMORY (512ull << 20)
#define MIN_PIECE ((int64_t)4096)
#define MAX_PIECE ((int64_t)1 << 20)

/* The first element of a kind and its two values. */
typedef struct spot {
    int64_t at; /* -1: none */
    double a, b;
} spot;

/* What one piece (or a whole tensor, merged) found. */
typedef struct acc {
    uint64_t unequal, mismatched, nan_mismatched;
    double max_abs, max_rel;
    spot diff, bad;
    int bytes_differ;
} acc;

typedef struct item {
    size_t entry;
    int64_t lo, n;
} item;

typedef struct pair {
    const ckpt_node *a, *b;
} pair;

typedef struct job {
    const ckpt_diff_options *o;
    ckpt_diff_report *r;
    const pair *pairs; /* per entry */
    acc *accs;         /* per entry */
    item *items;
    size_t n_items;
    int64_t piece;
    size_t native, wide; /* buffer bytes per element: as stored (largest), widened */
    uint64_t done, total;
    ckpt_error_first error;
    int failed;
} job;

static void acc_init(acc *x)
{
    memset(x, 0, sizeof *x);
    x->diff.at = x->bad.at = -1;
}

static int is_complex(ckpt_dtype t)
{
    return t == CKPT_DTYPE_C64 || t == CKPT_DTYPE_C128;
}

static void note_spot(spot *s, int64_t at, double a, double b)
{
    if (s->at < 0) {
        s->at = at;
        s->a = a;
        s->b = b;
    }
}

/* The earlier of two pieces' spots. */
static void merge_spot(spot *into, const spot *x)
{
    if (x->at >= 0 && (into->at < 0 || x->at < into->at))
        *into = *x;
}

static void note_unequal(acc *x, int64_t at, double a, double b)
{
    x->unequal++;
    note_spot(&x->diff, at, a, b);
}

static void note_bad(acc *x, int64_t at, double a, double b)
{
    x->mismatched++;
    note_spot(&x->bad, at, a, b);
}

/* One value NaN and the other not: outside any tolerance. */
static void note_nan(acc *x, int64_t at, double a, double b)
{
    note_unequal(x, at, a, b);
    x->nan_mismatched++;
    note_bad(x, at, a, b);
}

/* One pair of values that are not equal: d = |a - b|, m = |b| (moduli for complex values). */
static void note_difference(acc *x, const ckpt_diff_options *o, int64_t at, double a, double b, double d, double m,
                            int infinite)
{
    double rel = m == 0 || isinf(d) ? INFINITY : d / m;

    note_unequal(x, at, a, b);
    x->max_abs = d > x->max_abs ? d : x->max_abs;
    x->max_rel = rel > x->max_rel ? rel : x->max_rel;
    /* numpy.isclose: an infinity is close only to itself, whatever the tolerance */
    if (infinite || !(d <= o->atol + o->rtol * m))
        note_bad(x, at, a, b);
}

static void compare_real(acc *x, const ckpt_diff_options *o, const double *a, const double *b, int64_t n, int64_t lo)
{
    int64_t i;

    for (i = 0; i < n; i++) {
        double p = a[i], q = b[i];
        if (p == q || (isnan(p) && isnan(q)))
            continue;
        if (isnan(p) || isnan(q)) {
            note_nan(x, lo + i, p, q);
            continue;
        }
        note_difference(x, o, lo + i, p, q, fabs(p - q), fabs(q), isinf(p) || isinf(q));
    }
}

static void compare_complex(acc *x, const ckpt_diff_options *o, const double *a, const double *b, int64_t n,
                            int64_t lo)
{
    int64_t i;

    for (i = 0; i < n; i++) {
        double pr = a[2 * i], pi = a[2 * i + 1], qr = b[2 * i], qi = b[2 * i + 1];
        int pn = isnan(pr) || isnan(pi), qn = isnan(qr) || isnan(qi);
        if ((pr == qr && pi == qi) || (pn && qn))
            continue;
        if (pn || qn) {
            note_nan(x, lo + i, pr, qr);
            continue;
        }
        note_difference(x, o, lo + i, pr, qr, hypot(pr - qr, pi - qi), hypot(qr, qi),
                        isinf(pr) || isinf(pi) || isinf(qr) || isinf(qi));
    }
}

/* 64-bit integers of one dtype, compared as integers: float64 holds them only up to 2^53,
 * and two values it rounds to one must still differ. */
static void compare_int64(acc *x, const ckpt_diff_options *o, int is_signed, const void *a, const void *b, int64_t n,
                          int64_t lo)
{
    int64_t i;

    for (i = 0; i < n; i++) {
        uint64_t p, q, gap;
        double pv, qv;
        memcpy(&p, (const unsigned char *)a + 8 * i, 8);
        memcpy(&q, (const unsigned char *)b + 8 * i, 8);
        if (p == q)
            continue;
        if (is_signed) {
            int64_t sp = (int64_t)p, sq = (int64_t)q;
            gap = sp > sq ? p - q : q - p; /* the modular difference is exact for the larger minus the smaller */
            pv = (double)sp;
            qv = (double)sq;
        } else {
            gap = p > q ? p - q : q - p;
            pv = (double)p;
            qv = (double)q;
        }
        note_difference(x, o, lo + i, pv, qv, (double)gap, fabs(qv), 0);
    }
}

/* n complex values of type t at src as complex128 pairs at dst. */
static void widen_complex(ckpt_dtype t, const void *src, double *dst, int64_t n)
{
    int64_t i;

    if (t == CKPT_DTYPE_C128) {
        memcpy(dst, src, (size_t)n * 16);
        return;
    }
    for (i = 0; i < 2 * n; i++)
        dst[i] = ((const float *)src)[i];
}

/* A thread's buffers: each side's piece as stored and widened. */
typedef struct bufs {
    unsigned char *na, *nb;
    double *fa, *fb;
} bufs;

static int compare_piece(const job *j, const item *it, const bufs *b, acc *x)
{
    const pair *p = &j->pairs[it->entry];
    ckpt_dtype ta = ckpt_node_dtype(p->a), tb = ckpt_node_dtype(p->b);
    size_t n = (size_t)it->n;
    int rc;

    if (ta == tb || is_complex(ta)) {
        if ((rc = ckpt_node_read(p->a, it->lo, it->n, ta, b->na)) < 0 ||
            (rc = ckpt_node_read(p->b, it->lo, it->n, tb, b->nb)) < 0)
            return rc;
        if (ta == tb && memcmp(b->na, b->nb, n * ckpt_dtype_size(ta)) == 0)
            return 0;
        x->bytes_differ = 1;
        if (ta == tb && (ta == CKPT_DTYPE_I64 || ta == CKPT_DTYPE_U64)) {
            compare_int64(x, j->o, ta == CKPT_DTYPE_I64, b->na, b->nb, it->n, it->lo);
            return 0;
        }
        if (is_complex(ta)) {
            widen_complex(ta, b->na, b->fa, it->n);
            widen_complex(tb, b->nb, b->fb, it->n);
            compare_complex(x, j->o, b->fa, b->fb, it->n, it->lo);
            return 0;
        }
        if ((rc = ckpt_dtype_convert(CKPT_DTYPE_F64, b->fa, ta, b->na, n)) < 0 ||
            (rc = ckpt_dtype_convert(CKPT_DTYPE_F64, b->fb, tb, b->nb, n)) < 0)
            return rc;
    } else if ((rc = ckpt_node_read(p->a, it->lo, it->n, CKPT_DTYPE_F64, b->fa)) < 0 ||
               (rc = ckpt_node_read(p->b, it->lo, it->n, CKPT_DTYPE_F64, b->fb)) < 0) {
        return rc;
    }
    compare_real(x, j->o, b->fa, b->fb, it->n, it->lo);
    return 0;
}

static void merge(acc *into, const acc *x)
{
    into->unequal += x->unequal;
    into->mismatched += x->mismatched;
    into->nan_mismatched += x->nan_mismatched;
    into->max_abs = x->max_abs > into->max_abs ? x->max_abs : into->max_abs;
    into->max_rel = x->max_rel > into->max_rel ? x->max_rel : into->max_rel;
    into->bytes_differ |= x->bytes_differ;
    merge_spot(&into->diff, &x->diff);
    merge_spot(&into->bad, &x->bad);
}

static void fail(job *j, int rc)
{
    ckpt_error_first_record(&j->error, rc);
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

static void run_items(job *j, int threads)
{
    long k, n = (long)j->n_items;
    size_t native = (size_t)j->piece * j->native, wide = (size_t)j->piece * j->wide;

#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel num_threads(threads)
#else
    (void)threads;
#endif
    {
        bufs b;

        b.na = malloc(native ? native : 1);
        b.nb = malloc(native ? native : 1);
        b.fa = malloc(wide);
        b.fb = malloc(wide);
        if (!b.na || !b.nb || !b.fa || !b.fb)
            fail(j, ckpt_error_oom());
#ifdef CKPT_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (k = 0; k < n; k++) {
            const item *it = &j->items[k];
            acc x;
            int rc;
            if (__atomic_load_n(&j->failed, __ATOMIC_RELAXED))
                continue;
            acc_init(&x);
            if ((rc = compare_piece(j, it, &b, &x)) < 0) {
                ckpt_error_prefix("tensor '%s'", j->r->entries[it->entry].name);
                fail(j, rc);
                continue;
            }
#ifdef CKPT_HAVE_OPENMP
#pragma omp critical(ckpt_diff_merge)
#endif
            {
                merge(&j->accs[it->entry], &x);
                j->done += (uint64_t)it->n * ckpt_dtype_size(ckpt_node_dtype(j->pairs[it->entry].a));
                if (j->o->progress)
                    j->o->progress(j->done, j->total, j->o->progress_payload);
            }
        }
        free(b.na);
        free(b.nb);
        free(b.fa);
        free(b.fb);
    }
}

/* ---- matching names ---- */

typedef struct keyed {
    const char *name;
    size_t i;
} keyed;

typedef struct side {
    keyed *k; /* the names kept, sorted */
    size_t n;
} side;

static int by_name(const void *x, const void *y)
{
    return strcmp(((const keyed *)x)->name, ((const keyed *)y)->name);
}

static int excluded(const ckpt_diff_options *o, const char *name)
{
    const char *const *p;

    for (p = o->exclude; p && *p; p++)
        if (fnmatch(*p, name, 0) == 0)
            return 1;
    return 0;
}

static int side_index(side *s, const ckpt_diff_input *in, size_t n, const ckpt_diff_options *o, const char *which)
{
    size_t i;

    s->n = 0;
    if (!(s->k = malloc((n ? n : 1) * sizeof *s->k)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++) {
        if (!in[i].name || !in[i].node)
            return ckpt_error_set(CKPT_EINVALID, "ckpt_diff: %s's tensor %zu has no name or node", which, i);
        if (!excluded(o, in[i].name)) {
            s->k[s->n].name = in[i].name;
            s->k[s->n++].i = i;
        }
    }
    qsort(s->k, s->n, sizeof *s->k, by_name);
    for (i = 1; i < s->n; i++)
        if (strcmp(s->k[i - 1].name, s->k[i].name) == 0)
            return ckpt_error_set(CKPT_EINVALID, "%s holds two tensors named '%s'", which, s->k[i].name);
    return 0;
}

static long side_find(const side *s, const char *name)
{
    keyed key, *hit;

    key.name = name;
    key.i = 0;
    hit = s->n ? bsearch(&key, s->k, s->n, sizeof *s->k, by_name) : NULL;
    return hit ? (long)hit->i : -1;
}

/* ---- the report ---- */

static void set_shape(int *ndim, int64_t *shape, const ckpt_node *x)
{
    *ndim = ckpt_node_ndim(x);
    memcpy(shape, ckpt_node_shape(x), (size_t)*ndim * sizeof *shape);
}

static int same_shape(const ckpt_diff_entry *e)
{
    return e->ndim_a == e->ndim_b && memcmp(e->shape_a, e->shape_b, (size_t)e->ndim_a * sizeof *e->shape_a) == 0;
}

/* The entries in report order, each common one's pair of nodes. */
static int match(const ckpt_diff_input *a, size_t na, const ckpt_diff_input *b, size_t nb, const ckpt_diff_options *o,
                 ckpt_diff_report *r, pair **pairs_out)
{
    side sa, sb;
    unsigned char *used = calloc(nb ? nb : 1, 1);
    pair *pairs = calloc(na + nb ? na + nb : 1, sizeof *pairs);
    size_t i;
    int rc;

    memset(&sa, 0, sizeof sa);
    memset(&sb, 0, sizeof sb);
    r->entries = calloc(na + nb ? na + nb : 1, sizeof *r->entries);
    if (!used || !pairs || !r->entries) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = side_index(&sa, a, na, o, "A")) < 0 || (rc = side_index(&sb, b, nb, o, "B")) < 0)
        goto done;
    for (i = 0; i < na; i++) {
        ckpt_diff_entry *e = &r->entries[r->n];
        long j;
        if (excluded(o, a[i].name))
            continue;
        e->name = a[i].name;
        e->first = -1;
        e->dtype_a = ckpt_node_dtype(a[i].node);
        set_shape(&e->ndim_a, e->shape_a, a[i].node);
        pairs[r->n].a = a[i].node;
        if ((j = side_find(&sb, a[i].name)) >= 0) {
            used[j] = 1;
            e->dtype_b = ckpt_node_dtype(b[j].node);
            set_shape(&e->ndim_b, e->shape_b, b[j].node);
            pairs[r->n].b = b[j].node;
        } else {
            e->status = a[i].state ? CKPT_DIFF_STATE_ONLY_A : CKPT_DIFF_ONLY_A;
        }
        r->n++;
    }
    for (i = 0; i < nb; i++) {
        ckpt_diff_entry *e = &r->entries[r->n];
        if (used[i] || excluded(o, b[i].name))
            continue;
        e->name = b[i].name;
        e->first = -1;
        e->status = b[i].state ? CKPT_DIFF_STATE_ONLY_B : CKPT_DIFF_ONLY_B;
        e->dtype_b = ckpt_node_dtype(b[i].node);
        set_shape(&e->ndim_b, e->shape_b, b[i].node);
        pairs[r->n++].b = b[i].node;
    }
done:
    free(sa.k);
    free(sb.k);
    free(used);
    if (rc < 0)
        free(pairs);
    else
        *pairs_out = pairs;
    return rc;
}

/* Classify the common entries; the ones whose values are compared get pieces. */
static int plan_items(job *j, int threads)
{
    ckpt_diff_report *r = j->r;
    uint64_t memory = j->o->memory ? j->o->memory : DEFAULT_MEMORY;
    size_t i, n_items = 0, per_element = 1;
    int64_t piece;

    j->wide = 8;
    for (i = 0; i < r->n; i++) {
        ckpt_diff_entry *e = &r->entries[i];
        if (e->status != CKPT_DIFF_EQUAL)
            continue;
        if (!same_shape(e))
            e->status = CKPT_DIFF_SHAPE;
        else if (is_complex(e->dtype_a) != is_complex(e->dtype_b))
            e->status = CKPT_DIFF_INCOMPARABLE;
        else if (j->o->names_only)
            e->status = CKPT_DIFF_UNREAD;
        if (e->status != CKPT_DIFF_EQUAL)
            continue;
        if (is_complex(e->dtype_a))
            j->wide = 16;
        if (e->dtype_a == e->dtype_b || is_complex(e->dtype_a)) {
            size_t s = ckpt_dtype_size(e->dtype_a) > ckpt_dtype_size(e->dtype_b) ? ckpt_dtype_size(e->dtype_a)
                                                                                 : ckpt_dtype_size(e->dtype_b);
            j->native = s > j->native ? s : j->native;
        }
    }
    per_element = 2 * (j->native + j->wide);
    piece = (int64_t)(memory / (uint64_t)threads / per_element);
    piece = piece < MIN_PIECE ? MIN_PIECE : piece > MAX_PIECE ? MAX_PIECE : piece;
    j->piece = piece;
    for (i = 0; i < r->n; i++) {
        int64_t numel;
        if (r->entries[i].status != CKPT_DIFF_EQUAL)
            continue;
        numel = ckpt_node_numel(j->pairs[i].a);
        n_items += (size_t)((numel + piece - 1) / piece);
    }
    if (!(j->items = malloc((n_items ? n_items : 1) * sizeof *j->items)))
        return ckpt_error_oom();
    for (i = 0; i < r->n; i++) {
        int64_t numel, lo;
        if (r->entries[i].status != CKPT_DIFF_EQUAL)
            continue;
        numel = ckpt_node_numel(j->pairs[i].a);
        r->entries[i].elements = (uint64_t)numel;
        r->bytes_a += (uint64_t)numel * ckpt_dtype_size(r->entries[i].dtype_a);
        r->bytes_b += (uint64_t)numel * ckpt_dtype_size(r->entries[i].dtype_b);
        for (lo = 0; lo < numel; lo += piece) {
            item *it = &j->items[j->n_items++];
            it->entry = i;
            it->lo = lo;
            it->n = numel - lo < piece ? numel - lo : piece;
        }
    }
    j->total = r->bytes_a;
    return 0;
}

static void unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *index)
{
    int d;

    for (d = ndim - 1; d >= 0; d--) {
        index[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
}

static void finish_entry(ckpt_diff_entry *e, const acc *x)
{
    const spot *first = x->bad.at >= 0 ? &x->bad : &x->diff;

    if (e->status != CKPT_DIFF_EQUAL)
        return;
    e->unequal = x->unequal;
    e->mismatched = x->mismatched;
    e->nan_mismatched = x->nan_mismatched;
    e->max_abs = x->max_abs;
    e->max_rel = x->max_rel;
    e->first = first->at;
    e->first_a = first->a;
    e->first_b = first->b;
    if (e->first >= 0)
        unravel(e->first, e->ndim_a, e->shape_a, e->first_index);
    e->status = x->mismatched ? CKPT_DIFF_DIFFERENT
              : x->unequal || x->bytes_differ ? CKPT_DIFF_CLOSE : CKPT_DIFF_EQUAL;
}

static void count(ckpt_diff_report *r)
{
    size_t i;

    for (i = 0; i < r->n; i++) {
        const ckpt_diff_entry *e = &r->entries[i];
        size_t *c[] = { &r->equal, &r->close, &r->different, &r->only_a, &r->only_b, &r->shape, &r->incomparable,
                        &r->unread, &r->state_only_a, &r->state_only_b };
        (*c[e->status])++;
        if (e->dtype_a != CKPT_DTYPE_INVALID && e->dtype_b != CKPT_DTYPE_INVALID && e->dtype_a != e->dtype_b)
            r->dtype_changed++;
    }
}

int ckpt_diff(const ckpt_diff_input *a, size_t na, const ckpt_diff_input *b, size_t nb,
              const ckpt_diff_options *opts, ckpt_diff_report **out)
{
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    ckpt_diff_report *r;
    pair *pairs = NULL;
    job j;
    size_t i;
    int threads, rc;

    if (!out || (na && !a) || (nb && !b))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_diff: NULL argument");
    *out = NULL;
    if (opts) {
        if (opts->version != CKPT_DIFF_OPTIONS_VERSION)
            return ckpt_error_set(CKPT_EINVALID, "ckpt_diff_options version %u, expected %u", opts->version,
                                  CKPT_DIFF_OPTIONS_VERSION);
        o = *opts;
    }
    if (!(o.rtol >= 0) || !(o.atol >= 0) || isinf(o.rtol) || isinf(o.atol))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_diff: tolerances must be finite and not negative (rtol %g, atol %g)",
                              o.rtol, o.atol);
#ifdef CKPT_HAVE_OPENMP
    threads = o.threads > 0 ? o.threads : omp_get_max_threads();
#else
    threads = 1;
#endif
    if (!(r = calloc(1, sizeof *r)))
        return ckpt_error_oom();
    memset(&j, 0, sizeof j);
    j.o = &o;
    j.r = r;
    if ((rc = match(a, na, b, nb, &o, r, &pairs)) < 0)
        goto done;
    j.pairs = pairs;
    if (!(j.accs = malloc((r->n ? r->n : 1) * sizeof *j.accs))) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < r->n; i++)
        acc_init(&j.accs[i]);
    if ((rc = plan_items(&j, threads)) < 0)
        goto done;
    run_items(&j, threads);
    if ((rc = ckpt_error_first_raise(&j.error)) < 0)
        goto done;
    for (i = 0; i < r->n; i++)
        finish_entry(&r->entries[i], &j.accs[i]);
    count(r);
done:
    free(j.items);
    free(j.accs);
    free(pairs);
    if (rc < 0) {
        ckpt_diff_report_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void ckpt_diff_report_free(ckpt_diff_report *r)
{
    if (!r)
        return;
    free(r->entries);
    free(r);
}

int ckpt_diff_report_same(const ckpt_diff_report *r, int ignore_dtype)
{
    return r->different == 0 && r->only_a == 0 && r->only_b == 0 && r->shape == 0 && r->incomparable == 0 &&
           (ignore_dtype || r->dtype_changed == 0);
}

const char *ckpt_diff_status_name(ckpt_diff_status s)
{
    static const char *const names[] = { "equal", "close", "DIFFERENT", "only in A", "only in B",
                                         "shape", "incomparable", "unread", "state only A", "state only B" };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}
