/* Statistics over a tensor's values: min, max, mean and population standard deviation
 * (divisor n, numpy's default, torch.std(unbiased=False)) over the finite values, and
 * counts of elements, NaNs and infinities. `count` is the number of elements examined
 * (numel), so count - nan - inf values enter min/max/mean/std.
 *
 * Values are read as double in chunks of STATS_CHUNK elements. Each chunk gives a partial
 * result (corrected two-pass: its own mean, then sums of deviations from it) and partials
 * are merged in chunk order with Chan et al.'s pairwise formulas, so the result is the
 * same for any number of threads. Memory stays bounded: one chunk per thread when the
 * values can be read straight from a mapped file, one round of chunks otherwise. */
#include "storage_private.h"

#include <ckpt/checkpoint.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

#define STATS_CHUNK 65536
/* Chunks summarised in parallel before their partials are merged; storages that cannot
 * be mapped are decoded a round at a time. */
#define STATS_ROUND 32

typedef struct partial {
    uint64_t n, nan, inf; /* n: finite values */
    double min, max;
    double mean, m2;      /* mean relative to the shift; sum of squared deviations */
} partial;

/* Deviations are taken from `shift` (a value of the tensor), so that the partial means
 * keep full precision when the values sit far from zero: merged as absolute doubles, the
 * means of 1e8 + 1e-3 * noise would lose the digits the deviation lives in. */
static void partial_of(partial *p, const double *x, size_t n, double shift)
{
    double sum = 0, s1 = 0, s2 = 0, mean0;
    size_t i;

    memset(p, 0, sizeof *p);
    p->min = INFINITY;
    p->max = -INFINITY;
    for (i = 0; i < n; i++) {
        double v = x[i];
        if (isnan(v)) {
            p->nan++;
        } else if (isinf(v)) {
            p->inf++;
        } else {
            p->n++;
            sum += v - shift;
            p->min = v < p->min ? v : p->min;
            p->max = v > p->max ? v : p->max;
        }
    }
    if (!p->n)
        return;
    mean0 = sum / (double)p->n;
    for (i = 0; i < n; i++) {
        if (isfinite(x[i])) {
            double d = (x[i] - shift) - mean0;
            s1 += d;
            s2 += d * d;
        }
    }
    p->mean = mean0 + s1 / (double)p->n;
    p->m2 = s2 - s1 * s1 / (double)p->n;
    if (p->m2 < 0)
        p->m2 = 0;
}

static void partial_merge(partial *a, const partial *b)
{
    uint64_t n = a->n + b->n;
    double delta;

    a->nan += b->nan;
    a->inf += b->inf;
    if (!b->n)
        return;
    if (!a->n) {
        a->n = b->n;
        a->min = b->min;
        a->max = b->max;
        a->mean = b->mean;
        a->m2 = b->m2;
        return;
    }
    delta = b->mean - a->mean;
    a->mean += delta * ((double)b->n / (double)n);
    a->m2 += b->m2 + delta * delta * ((double)a->n * ((double)b->n / (double)n));
    a->min = b->min < a->min ? b->min : a->min;
    a->max = b->max > a->max ? b->max : a->max;
    a->n = n;
}

static int thread_count(void)
{
#ifdef CKPT_HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_index(void)
{
#ifdef CKPT_HAVE_OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Every thread reads its own chunks straight from the mapped file. */
static void round_direct(const ckpt_tensor *t, int64_t first, int64_t numel, double shift, partial *parts, int n,
                         double **bufs, ckpt_error_first *fail)
{
    int k;

#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic)
#endif
    for (k = 0; k < n; k++) {
        int64_t at = first + (int64_t)k * STATS_CHUNK;
        int64_t m = numel - at < STATS_CHUNK ? numel - at : STATS_CHUNK;
        double *buf = bufs[thread_index()];
        int rc = ckpt_tensor_read(t, at, m, CKPT_DTYPE_F64, buf);
        if (rc)
            ckpt_error_first_record(fail, rc);
        else
            partial_of(&parts[k], buf, (size_t)m, shift);
    }
}

/* The round was decoded into `values` already; the chunks are summarised in parallel. */
static void round_decoded(const double *values, int64_t count, double shift, partial *parts, int n)
{
    int k;

#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (k = 0; k < n; k++) {
        int64_t at = (int64_t)k * STATS_CHUNK;
        int64_t m = count - at < STATS_CHUNK ? count - at : STATS_CHUNK;
        partial_of(&parts[k], values + at, (size_t)m, shift);
    }
}

/* Whether the elements of the view can be read straight from a mapped file, and where
 * they are in it. */
static int view_is_mapped(const ckpt_tensor *t, const ckpt_file **file, uint64_t *file_off)
{
    size_t es = ckpt_dtype_size(t->dtype);
    uint64_t span = 1;
    int d;

    for (d = 0; d < t->ndim; d++)
        span += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->stride[d];
    return ckpt_storage__map(t->storage, (uint64_t)t->offset * es, span * es, file, file_off) != NULL;
}

typedef struct stats_run {
    const ckpt_tensor *t;
    int direct;
    const ckpt_file *file; /* direct reads of a contiguous view: pages to hand back */
    uint64_t file_off;
    double **bufs;       /* per thread, direct reads */
    int n_bufs;
    double *values;      /* a round of values, otherwise */
    unsigned char *raw;  /* a round of stored values, contiguous views */
    ckpt_storage_cursor cursor;
    int cursor_open;
} stats_run;

static int stats_setup(stats_run *r)
{
    size_t es = ckpt_dtype_size(r->t->dtype);
    int i;

    r->direct = view_is_mapped(r->t, &r->file, &r->file_off);
    if (r->direct) {
        if (!ckpt_tensor_is_contiguous(r->t))
            r->file = NULL;
        r->n_bufs = thread_count();
        if (!(r->bufs = calloc((size_t)r->n_bufs, sizeof *r->bufs)))
            return ckpt_error_oom();
        for (i = 0; i < r->n_bufs; i++)
            if (!(r->bufs[i] = malloc(STATS_CHUNK * sizeof(double))))
                return ckpt_error_oom();
        return 0;
    }
    if (!(r->values = malloc((size_t)STATS_ROUND * STATS_CHUNK * sizeof(double))))
        return ckpt_error_oom();
    /* A contiguous view is decoded through one cursor: compressed and encoded extents are
     * then decoded once, not once per round. */
    if (ckpt_tensor_is_contiguous(r->t)) {
        if (!(r->raw = malloc((size_t)STATS_ROUND * STATS_CHUNK * es)))
            return ckpt_error_oom();
        ckpt_storage__cursor_open(&r->cursor, r->t->storage, (uint64_t)r->t->offset * es);
        r->cursor_open = 1;
    }
    return 0;
}

static void stats_cleanup(stats_run *r)
{
    int i;

    for (i = 0; r->bufs && i < r->n_bufs; i++)
        free(r->bufs[i]);
    free(r->bufs);
    free(r->values);
    free(r->raw);
    if (r->cursor_open)
        ckpt_storage__cursor_close(&r->cursor);
}

/* Decode `count` values from `first` into r->values. */
static int stats_decode(stats_run *r, int64_t first, int64_t count)
{
    int rc;

    if (!r->cursor_open)
        return ckpt_tensor_read(r->t, first, count, CKPT_DTYPE_F64, r->values);
    rc = ckpt_storage__cursor_read(&r->cursor, r->raw, (uint64_t)count * ckpt_dtype_size(r->t->dtype));
    if (rc) {
        ckpt_error_prefix("tensor '%s'", r->t->name ? r->t->name : "(unnamed)");
        return rc;
    }
    return ckpt_dtype_convert(CKPT_DTYPE_F64, r->values, r->t->dtype, r->raw, (size_t)count);
}

/* The first finite value among the first few elements, or 0. */
static int stats_shift(const ckpt_tensor *t, int64_t numel, double *shift)
{
    double head[64];
    int64_t n = numel < 64 ? numel : 64, i;
    int rc = ckpt_tensor_read(t, 0, n, CKPT_DTYPE_F64, head);

    *shift = 0;
    for (i = 0; !rc && i < n; i++)
        if (isfinite(head[i])) {
            *shift = head[i];
            break;
        }
    return rc;
}

/* A storage whose bytes are one element repeated: every extent a fill of zeros or of that
 * element, or every tile's source such a storage (tiles sharing a source, as the chunks an
 * HDF5 file never wrote do, are looked at once). Its statistics are known without reading
 * it, however large it says it is. *pattern (es bytes) receives the element. */
typedef struct uniform {
    size_t es;
    unsigned char pattern[16];
    int known;
} uniform;

#define UNIFORM_MAX_NESTING 4

static int uniform_storage(const ckpt_storage *s, uniform *u, int nesting)
{
    const ckpt_storage *last = NULL;
    unsigned char value[sizeof u->pattern];
    size_t i;

    if (!s || nesting > UNIFORM_MAX_NESTING)
        return 0;
    if (s->tiling) {
        for (i = 0; i < s->tiling->n_tiles; i++) {
            const ckpt_storage *src = s->tiling->tiles[i].source;
            if (src == last)
                continue;
            if (!uniform_storage(src, u, nesting + 1))
                return 0;
            last = src;
        }
        return 1;
    }
    for (i = 0; i < s->n_extents; i++) {
        const ckpt_extent *e = &s->extents[i];
        if (e->encoding != CKPT_EXTENT_FILL || e->shuffle > 1 || e->flags || e->size % u->es)
            return 0;
        memset(value, 0, sizeof value);
        if (e->stored_size &&
            (e->stored_size != u->es || !e->file || ckpt_file_read(e->file, e->offset, value, u->es) < 0)) {
            ckpt_error_clear();
            return 0;
        }
        if (u->known && memcmp(value, u->pattern, u->es) != 0)
            return 0;
        memcpy(u->pattern, value, u->es);
        u->known = 1;
    }
    return 1;
}

/* The statistics of numel copies of the tensor's first element. */
static int stats_uniform(const ckpt_tensor *t, int64_t numel, ckpt_tensor_stats *out)
{
    double v;
    int rc = ckpt_tensor_read(t, 0, 1, CKPT_DTYPE_F64, &v);

    if (rc)
        return rc;
    out->count = (uint64_t)numel;
    out->nan = isnan(v) ? (uint64_t)numel : 0;
    out->inf = isinf(v) ? (uint64_t)numel : 0;
    out->min = out->max = out->mean = isfinite(v) ? v : NAN;
    out->std = isfinite(v) ? 0 : NAN;
    return 0;
}

int ckpt_tensor_stats_compute(const ckpt_tensor *t, ckpt_tensor_stats *out)
{
    uniform u;
    partial parts[STATS_ROUND], total;
    double shift = 0;
    stats_run run;
    ckpt_error_first fail;
    int64_t numel, first, count;
    size_t es;
    int rc, k, n;

    if (!out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_tensor_stats_compute: no output");
    if ((rc = ckpt_tensor_validate(t)))
        return rc;
    if (!ckpt_dtype_can_convert(CKPT_DTYPE_F64, t->dtype))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "tensor '%s': no statistics for %s values",
                              t->name ? t->name : "(unnamed)", ckpt_dtype_name(t->dtype));
    numel = ckpt_tensor_numel(t);
    es = ckpt_dtype_size(t->dtype);
    memset(&u, 0, sizeof u);
    u.es = es;
    if (numel > 0 && es <= sizeof u.pattern && uniform_storage(t->storage, &u, 0) && u.known)
        return stats_uniform(t, numel, out);
    memset(&total, 0, sizeof total);
    memset(&run, 0, sizeof run);
    memset(&fail, 0, sizeof fail);
    run.t = t;
    if (numel > 0 && ((rc = stats_shift(t, numel, &shift)) || (rc = stats_setup(&run))))
        goto done;
    for (first = 0; first < numel; first += count) {
        count = numel - first < (int64_t)STATS_ROUND * STATS_CHUNK ? numel - first : (int64_t)STATS_ROUND * STATS_CHUNK;
        n = (int)((count + STATS_CHUNK - 1) / STATS_CHUNK);
        if (run.direct) {
            round_direct(t, first, numel, shift, parts, n, run.bufs, &fail);
            if (fail.code) {
                rc = ckpt_error_first_raise(&fail);
                goto done;
            }
            if (run.file)
                ckpt_storage__release(run.file, run.file_off, run.file_off + (uint64_t)first * es,
                                      run.file_off + (uint64_t)(first + count) * es);
        } else {
            if ((rc = stats_decode(&run, first, count)))
                goto done;
            round_decoded(run.values, count, shift, parts, n);
        }
        for (k = 0; k < n; k++)
            partial_merge(&total, &parts[k]);
    }
    out->count = (uint64_t)numel;
    out->nan = total.nan;
    out->inf = total.inf;
    if (total.n) {
        out->min = total.min;
        out->max = total.max;
        out->mean = shift + total.mean;
        out->std = sqrt(total.m2 / (double)total.n);
    } else {
        out->min = out->max = out->mean = out->std = NAN;
    }
done:
    stats_cleanup(&run);
    return rc;
}
