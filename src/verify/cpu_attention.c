/* The CPU backend's attention: one query row of one head at a time, all in float32 (the
 * `compute` hint is for backends that need a narrower type; the CPU never does). Scores are
 * formed for the visible keys, the softmax is taken with its sum in double, and the values
 * are weighted in float32 in key order, so results do not depend on the thread count. */
#include "verify_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

#ifdef __clang__
#pragma clang fp contract(off)
#endif

typedef float v8f __attribute__((vector_size(32)));
#define V8_LOAD(dst, p) memcpy(&(dst), (p), sizeof(v8f))

CKPT_SIMD_CLONES
static float dot(const float *a, const float *b, int64_t n)
{
    v8f acc = { 0 };
    float lanes[8], tail = 0.0f;
    int64_t i, nv = n & ~(int64_t)7;

    for (i = 0; i < nv; i += 8) {
        v8f x, y;
        V8_LOAD(x, a + i);
        V8_LOAD(y, b + i);
        acc += x * y;
    }
    for (; i < n; i++)
        tail += a[i] * b[i];
    memcpy(lanes, &acc, sizeof lanes);
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])) + tail;
}

CKPT_SIMD_CLONES
static void axpy(float *y, float a, const float *x, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void one_row(const ckpt_backend_attention *op, int64_t t, int64_t h, float *scores, float *acc)
{
    int64_t d = op->head_dim, group = op->heads / op->kv_heads, kvh = h / group;
    int64_t visible = op->causal ? t + 1 : op->tokens, first = 0, j;
    const float *q = op->q + (t * op->heads + h) * d;
    float *out = op->out + (t * op->heads + h) * d;
    float scale = (float)op->scale, max = -INFINITY;
    double sum = 0.0;

    if (op->causal && op->window > 0 && t >= op->window)
        first = t - op->window + 1;
    for (j = first; j < visible; j++) {
        scores[j] = scale * dot(q, op->k + (j * op->kv_heads + kvh) * d, d);
        if (scores[j] > max)
            max = scores[j];
    }
    for (j = first; j < visible; j++) {
        scores[j] = expf(scores[j] - max);
        sum += scores[j];
    }
    memset(acc, 0, (size_t)d * sizeof *acc);
    for (j = first; j < visible; j++)
        axpy(acc, scores[j], op->v + (j * op->kv_heads + kvh) * d, d);
    for (j = 0; j < d; j++)
        out[j] = (float)(acc[j] / sum);
}

int ckpt_cpu__attention(void *ctx, const ckpt_backend_attention *op)
{
    int threads = ckpt_cpu__threads(ctx), failed = 0;
    int64_t rows = op->tokens * op->heads, r;

    if (op->tokens < 0 || op->heads <= 0 || op->kv_heads <= 0 || op->head_dim <= 0 || op->heads % op->kv_heads)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_BACKEND,
                               "cpu attention: %lld heads do not share %lld KV heads evenly", (long long)op->heads,
                               (long long)op->kv_heads);
    if (op->window < 0 || (op->window > 0 && !op->causal))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_BACKEND, "cpu attention: window %lld%s",
                               (long long)op->window, op->window > 0 ? " without causal masking" : "");
    (void)threads;
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel num_threads(threads) reduction(| : failed)
#endif
    {
        float *scores = malloc((size_t)(op->tokens + 1) * sizeof *scores);
        float *acc = malloc((size_t)op->head_dim * sizeof *acc);
        if (!scores || !acc)
            failed = 1;
#ifdef CKPT_HAVE_OPENMP
#pragma omp for schedule(dynamic, 16)
#endif
        for (r = 0; r < rows; r++)
            if (scores && acc)
                one_row(op, r / op->heads, r % op->heads, scores, acc);
        free(scores);
        free(acc);
    }
    return failed ? ckpt_error_oom() : 0;
}
