/* Two compute backends side by side (backend_pair.h). */
#include "backend_pair.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double U32 = 5.9604644775390625e-08; /* 2^-24 */

side cuda = {"cuda", NULL, NULL, NULL}, cpu = {"cpu", NULL, NULL, NULL};

op_stats stats[] = {{.name = "linear"}, {.name = "attention"}, {.name = "norm"},    {.name = "rope"},
                    {.name = "act"},    {.name = "add"},       {.name = "compare"}, {.name = "errors"}};

static int printed;

void report(const char *fmt, ...)
{
    va_list ap;
    if (++printed > 300) {
        if (printed == 301)
            fprintf(stderr, "(further failures not printed)\n");
        return;
    }
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- data ----------------------------------------------------------------------------- */

static uint64_t rng_state;

void rng_seed(uint64_t seed)
{
    rng_state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}

double rng_unit(void) /* [0, 1) */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

void fill_uniform(float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * rng_unit());
}

/* Multiples of 1/64 in [-limit, limit] (limit <= 2): exact in bfloat16 and float16, and
 * their products and sums of up to 4096 products are exact in float32. */
void fill_exact(float *x, int64_t n, double limit)
{
    const int64_t steps = (int64_t)(limit * 64);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)((int64_t)(rng_unit() * (double)(2 * steps + 1)) - steps) / 64.0f;
}

/* Host buffers of the current case, freed together by case_done. */
static void *case_bufs[24];
static int n_case_bufs;

void *case_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p || n_case_bufs == (int)(sizeof case_bufs / sizeof case_bufs[0])) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return case_bufs[n_case_bufs++] = p;
}

float *floats(int64_t n)
{
    return case_alloc((size_t)n * sizeof(float));
}

double *doubles(int64_t n)
{
    return case_alloc((size_t)n * sizeof(double));
}

void case_done(void)
{
    while (n_case_bufs > 0)
        free(case_bufs[--n_case_bufs]);
}

/* ---- one operation on one side ---------------------------------------------------------- */


/* Uploads the host arrays in[i] (bytes[i] long; NULL stays NULL), runs `call`, downloads
 * array `out_index` (if >= 0) into out, and releases the device copies. 0, or -1 after
 * reporting what failed. */
int run_op(side *s, int op, const char *desc, int n, const void *const *in, const size_t *bytes, int out_index,
                  void *out, call_fn call, void *arg)
{
    void *dev[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    const char *what = "alloc";
    int rc = 0, i;

    for (i = 0; i < n && rc >= 0; i++)
        if (in[i] && ((rc = s->vt->alloc(s->ctx, bytes[i], &dev[i])) < 0 ||
                      (what = "upload", rc = s->vt->upload(s->ctx, dev[i], in[i], bytes[i])) < 0))
            break;
    if (rc >= 0 && (what = stats[op].name, rc = call(s, dev, arg)) >= 0 && out_index >= 0)
        what = "download", rc = s->vt->download(s->ctx, out, dev[out_index], bytes[out_index]);
    if (rc < 0) {
        stats[op].cases++;
        stats[op].failed++;
        report("FAIL %s %s: %s %s returned %d: %s", stats[op].name, desc, s->name, what, rc,
               ckpt_error_last()->message);
    }
    for (i = 0; i < n; i++)
        s->vt->release(s->ctx, dev[i]);
    return rc < 0 ? -1 : 0;
}

/* The same operation on both sides: 0 when both ran. */
int run_both(int op, const char *desc, int n, const void *const *in, const size_t *bytes, int out_index,
                    void *ref, void *got, call_fn call, void *arg)
{
    return run_op(&cpu, op, desc, n, in, bytes, out_index, ref, call, arg) < 0 ||
                   run_op(&cuda, op, desc, n, in, bytes, out_index, got, call, arg) < 0
               ? -1
               : 0;
}

/* ---- checking ---------------------------------------------------------------------------- */

/* Index i of a row-major array of `nd` dimensions, in words ("token 5, head 3, dim 7"). */
void where(char *buf, size_t cap, int64_t i, const int64_t *dims, const char *const *names, int nd)
{
    int64_t idx[4];
    size_t used = 0;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = dims[d] > 0 ? i % dims[d] : 0;
        i = dims[d] > 0 ? i / dims[d] : 0;
    }
    buf[0] = '\0';
    for (int d = 0; d < nd && used < cap; d++) {
        int w = snprintf(buf + used, cap - used, "%s%s %lld", d ? ", " : "", names[d], (long long)idx[d]);
        if (w > 0)
            used += (size_t)w;
    }
}

/* got (cuda) against ref (cpu): element i within tol[i] (NaN where, and only where, ref is
 * NaN), and |got - ref| / |ref| <= l2_tol. The L2 limit is statistical (a typical error
 * times a margin), so it is enforced from 64 elements on; below that one element, or a few
 * that happen to cancel with a bias, would decide it. */
void check(int op, const char *desc, const float *ref, const float *got, int64_t n, const double *tol,
                  double l2_tol, const int64_t *dims, const char *const *names, int nd)
{
    double sq_err = 0.0, sq_ref = 0.0, worst = 0.0, worst_err = 0.0, l2;
    int64_t worst_i = -1;
    int bad = 0;

    for (int64_t i = 0; i < n; i++) {
        const int nan_r = isnan(ref[i]), nan_g = isnan(got[i]);
        double err, ratio;
        if (nan_r || nan_g) {
            if (nan_r != nan_g && !bad) {
                worst_i = i;
                bad = 1;
            }
            continue;
        }
        err = fabs((double)got[i] - (double)ref[i]);
        ratio = err == 0.0 ? 0.0 : tol[i] > 0.0 ? err / tol[i] : INFINITY;
        sq_err += err * err;
        sq_ref += (double)ref[i] * (double)ref[i];
        if (ratio > worst || (worst_i < 0 && !bad)) {
            worst = ratio;
            worst_err = err;
            if (!bad)
                worst_i = i;
        }
    }
    l2 = sq_ref > 0.0 ? sqrt(sq_err / sq_ref) : sqrt(sq_err);
    stats[op].cases++;
    if (worst > stats[op].worst_abs) {
        stats[op].worst_abs = worst;
        snprintf(stats[op].worst_abs_case, sizeof stats[op].worst_abs_case, "%s", desc);
    }
    if (n >= 64 && l2_tol > 0 && l2 / l2_tol > stats[op].worst_l2) {
        stats[op].worst_l2 = l2 / l2_tol;
        snprintf(stats[op].worst_l2_case, sizeof stats[op].worst_l2_case, "%s", desc);
    }
    if (bad || worst > 1.0 || (n >= 64 && l2 > l2_tol)) {
        char at[160];
        stats[op].failed++;
        where(at, sizeof at, worst_i < 0 ? 0 : worst_i, dims, names, nd);
        if (bad)
            report("FAIL %s %s: NaN in one result only, at [%s] (cuda %g, cpu %g)", stats[op].name, desc, at,
                   (double)got[worst_i], (double)ref[worst_i]);
        else
            report("FAIL %s %s: max abs error %.3g at [%s] (cuda %.9g, cpu %.9g), tolerance there %.3g; "
                   "relative L2 error %.3g, tolerance %.3g",
                   stats[op].name, desc, worst_err, at, (double)got[worst_i], (double)ref[worst_i],
                   tol[worst_i], l2, l2_tol);
    }
}

double gamma_n(int64_t n)
{
    const double nu = (double)n * U32;
    return nu / (1.0 - nu);
}

double norm2(const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return sqrt(s);
}

/* Unit roundoff of the compute/weight type: bfloat16 has 8 significant bits, float16 11. */
double unit_of(ckpt_dtype t)
{
    return t == CKPT_DTYPE_BF16 ? 0x1.0p-8 : t == CKPT_DTYPE_F16 ? 0x1.0p-11 : 0.0;
}

