/* The CPU backend: the reference every other backend is compared with. Device memory is
 * host memory; operations run as they are called, in float32 with double where a sum over
 * a row or an array is taken, split across OpenMP threads in ways that do not change the
 * results. */
#include "verify_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

#ifdef __clang__
#pragma clang fp contract(off)
#endif

typedef struct cpu_ctx {
    int threads;
} cpu_ctx;

/* Fixed-size pieces for reductions over whole arrays: their partial sums are combined in
 * piece order, whichever thread computed them. */
enum { PIECE = 1 << 16 };

int ckpt_cpu__threads(void *ctx)
{
    return ((cpu_ctx *)ctx)->threads;
}

static int cpu_init(void **ctx, const ckpt_backend_host *host, int device, char *description, size_t cap)
{
    cpu_ctx *c = calloc(1, sizeof *c);

    (void)host;
    *ctx = NULL;
    if (!c)
        return ckpt_error_oom();
#ifdef CKPT_HAVE_OPENMP
    c->threads = device > 0 ? device : omp_get_max_threads();
#else
    c->threads = 1;
#endif
    snprintf(description, cap, "CPU, %d thread%s", c->threads, c->threads == 1 ? "" : "s");
    *ctx = c;
    return 0;
}

static void cpu_free(void *ctx)
{
    free(ctx);
}

static int cpu_alloc(void *ctx, size_t bytes, void **out)
{
    (void)ctx;
    /* 64-byte alignment for the vector loops; never a zero-size request. */
    if (posix_memalign(out, 64, bytes ? (bytes + 63) & ~(size_t)63 : 64) != 0) {
        *out = NULL;
        return ckpt_error_oom();
    }
    return 0;
}

static void cpu_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static int cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memcpy(dst, src, bytes);
    return 0;
}

static int cpu_norm(void *ctx, ckpt_norm_kind kind, int64_t rows, int64_t cols, const float *x, const float *w,
                    const float *b, double eps, float *y)
{
    int threads = ckpt_cpu__threads(ctx);
    int64_t r;

    (void)threads;
    if (kind != CKPT_NORM_RMS && kind != CKPT_NORM_LAYER)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_BACKEND, "cpu norm: unknown kind %d", (int)kind);
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        double mean = 0.0, sq = 0.0, inv;
        int64_t i;
        if (kind == CKPT_NORM_LAYER) {
            for (i = 0; i < cols; i++)
                mean += xr[i];
            mean /= (double)cols;
        }
        for (i = 0; i < cols; i++)
            sq += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        inv = 1.0 / sqrt(sq / (double)cols + eps);
        for (i = 0; i < cols; i++) {
            float v = (float)(((double)xr[i] - mean) * inv) * w[i];
            yr[i] = kind == CKPT_NORM_LAYER && b ? v + b[i] : v;
        }
    }
    return 0;
}

static int cpu_rope(void *ctx, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, float *x,
                    const float *cos_t, const float *sin_t, int interleaved)
{
    int threads = ckpt_cpu__threads(ctx);
    int64_t half = rotary_dim / 2, t;

    (void)threads;
    if (rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_BACKEND,
                               "cpu rope: rotary dimension %lld of head dimension %lld", (long long)rotary_dim,
                               (long long)head_dim);
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (t = 0; t < tokens; t++) {
        const float *c = cos_t + t * half, *s = sin_t + t * half;
        int64_t h, i;
        for (h = 0; h < heads; h++) {
            float *v = x + (t * heads + h) * head_dim;
            for (i = 0; i < half; i++) {
                int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
                float x1 = v[a], x2 = v[b];
                v[a] = x1 * c[i] - x2 * s[i];
                v[b] = x2 * c[i] + x1 * s[i];
            }
        }
    }
    return 0;
}

static float act_one(ckpt_act_kind kind, float g)
{
    double x = g;
    switch (kind) {
    case CKPT_ACT_SWIGLU:
    case CKPT_ACT_SILU: return (float)(x / (1.0 + exp(-x)));
    case CKPT_ACT_GELU: return (float)(0.5 * x * (1.0 + erf(x / sqrt(2.0))));
    case CKPT_ACT_GELU_TANH:
    case CKPT_ACT_GEGLU_TANH: return (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    case CKPT_ACT_RELU: return g > 0.0f ? g : 0.0f;
    }
    return g;
}

static int cpu_act(void *ctx, ckpt_act_kind kind, int64_t n, const float *gate, const float *up, float *out)
{
    int threads = ckpt_cpu__threads(ctx), gated = kind == CKPT_ACT_SWIGLU || kind == CKPT_ACT_GEGLU_TANH;
    int64_t i;

    (void)threads;
    if (kind > CKPT_ACT_GEGLU_TANH || (gated && !up))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_BACKEND, "cpu act: kind %d%s", (int)kind,
                               gated ? " without its up half" : " is unknown");
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (i = 0; i < n; i++) {
        float a = act_one(kind, gate[i]);
        out[i] = gated ? a * up[i] : a;
    }
    return 0;
}

static int cpu_add(void *ctx, int64_t n, const float *a, const float *b, float *out)
{
    int threads = ckpt_cpu__threads(ctx);
    int64_t i;

    (void)threads;
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (i = 0; i < n; i++)
        out[i] = a[i] + b[i];
    return 0;
}

static void compare_piece(const float *a, const float *b, int64_t n, ckpt_backend_compare_stats *s)
{
    int64_t i;

    memset(s, 0, sizeof *s);
    for (i = 0; i < n; i++) {
        int fa = isfinite(a[i]), fb = isfinite(b[i]);
        double d;
        s->nonfinite_a += !fa;
        s->nonfinite_b += !fb;
        if (!fa || !fb)
            continue;
        d = (double)a[i] - (double)b[i];
        s->sum_sq_a += (double)a[i] * a[i];
        s->sum_sq_b += (double)b[i] * b[i];
        s->sum_sq_diff += d * d;
        s->dot += (double)a[i] * b[i];
        if (fabs(d) > s->max_abs_diff)
            s->max_abs_diff = fabs(d);
    }
}

static int cpu_compare(void *ctx, int64_t n, const float *a, const float *b, ckpt_backend_compare_stats *out)
{
    int threads = ckpt_cpu__threads(ctx);
    int64_t pieces = (n + PIECE - 1) / PIECE, p;
    ckpt_backend_compare_stats *part = calloc((size_t)(pieces ? pieces : 1), sizeof *part);

    (void)threads;
    if (!part)
        return ckpt_error_oom();
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (p = 0; p < pieces; p++)
        compare_piece(a + p * PIECE, b + p * PIECE, n - p * PIECE < PIECE ? n - p * PIECE : PIECE, &part[p]);
    memset(out, 0, sizeof *out);
    for (p = 0; p < pieces; p++) {
        out->sum_sq_a += part[p].sum_sq_a;
        out->sum_sq_b += part[p].sum_sq_b;
        out->sum_sq_diff += part[p].sum_sq_diff;
        out->dot += part[p].dot;
        out->nonfinite_a += part[p].nonfinite_a;
        out->nonfinite_b += part[p].nonfinite_b;
        if (part[p].max_abs_diff > out->max_abs_diff)
            out->max_abs_diff = part[p].max_abs_diff;
    }
    free(part);
    return 0;
}

const ckpt_backend_vtable ckpt_backend__cpu = {
    .abi_version = CKPT_BACKEND_ABI_VERSION,
    .name = "cpu",
    .init = cpu_init,
    .free = cpu_free,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .memory = NULL,
    .synchronize = NULL,
    .linear = ckpt_cpu__linear,
    .norm = cpu_norm,
    .rope = cpu_rope,
    .attention = ckpt_cpu__attention,
    .act = cpu_act,
    .add = cpu_add,
    .compare = cpu_compare,
};
