/* The CPU backend's linear layer: y = x wᵀ (+ bias), blocked for the caches.
 *
 * Both operands run along k (checkpoints store linear weights [out, in]), so the kernel
 * takes dot products: a block of NB weight rows is converted to float32 once per KC-long
 * slice of k, and every group of 3 rows of x is dotted with every group of 4 of those rows,
 * 8 lanes at a time. Threads take whole blocks of output columns, and each output element's
 * sum is formed in the same order whatever the thread count, so results are reproducible.
 * Products and sums are separate operations (no FMA contraction), which also makes the
 * vector clones below give the same bits as the plain one. */
#include "verify_private.h"

#include <ckpt/sys/common.h>

#include <stdlib.h>
#include <string.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

#ifdef __clang__
#pragma clang fp contract(off)
#endif

enum { NB = 64, KC = 512, MR = 3, NR = 4 };

typedef float v8f __attribute__((vector_size(32)));
#define V8_LOAD(dst, p) memcpy(&(dst), (p), sizeof(v8f))

static float hsum8(const float *lanes)
{
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

/* y[r][c] += x[r][0..kc) . w[c][0..kc) for r < mr (<= MR), c < nr (<= NR). */
CKPT_SIMD_CLONES
static void dot_tile(int64_t mr, int64_t nr, int64_t kc, const float *x, int64_t ldx, const float *w, float *y,
                     int64_t ldy)
{
    v8f acc[MR][NR];
    float lanes[8], tail;
    int64_t kv = kc & ~(int64_t)7, kk, r, c;

    memset(acc, 0, sizeof acc);
    if (mr == MR && nr == NR) {
        const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx;
        for (kk = 0; kk < kv; kk += 8) {
            v8f a0, a1, a2, b;
            V8_LOAD(a0, x0 + kk);
            V8_LOAD(a1, x1 + kk);
            V8_LOAD(a2, x2 + kk);
            for (c = 0; c < NR; c++) {
                V8_LOAD(b, w + c * kc + kk);
                acc[0][c] += a0 * b;
                acc[1][c] += a1 * b;
                acc[2][c] += a2 * b;
            }
        }
    } else {
        for (r = 0; r < mr; r++)
            for (c = 0; c < nr; c++)
                for (kk = 0; kk < kv; kk += 8) {
                    v8f a, b;
                    V8_LOAD(a, x + r * ldx + kk);
                    V8_LOAD(b, w + c * kc + kk);
                    acc[r][c] += a * b;
                }
    }
    for (r = 0; r < mr; r++)
        for (c = 0; c < nr; c++) {
            memcpy(lanes, &acc[r][c], sizeof lanes);
            tail = 0.0f;
            for (kk = kv; kk < kc; kk++)
                tail += x[r * ldx + kk] * w[c * kc + kk];
            y[r * ldy + c] += hsum8(lanes) + tail;
        }
}

/* Rows [n0, n0+nb) of the output, all of k. */
static int column_block(const ckpt_backend_linear *op, int64_t n0, int64_t nb, float *wp)
{
    size_t esz = ckpt_dtype_size(op->w_dtype);
    int64_t k0, kc, i, j, c;
    int rc;

    for (k0 = 0; k0 < op->k; k0 += KC) {
        kc = op->k - k0 < KC ? op->k - k0 : KC;
        for (c = 0; c < nb; c++) {
            const uint8_t *src = (const uint8_t *)op->w + ((size_t)(n0 + c) * (size_t)op->k + (size_t)k0) * esz;
            if ((rc = ckpt_dtype_convert(CKPT_DTYPE_F32, wp + c * kc, op->w_dtype, src, (size_t)kc)) < 0)
                return rc;
        }
        for (i = 0; i < op->m; i += MR)
            for (j = 0; j < nb; j += NR)
                dot_tile(op->m - i < MR ? op->m - i : MR, nb - j < NR ? nb - j : NR, kc, op->x + i * op->k + k0,
                         op->k, wp + j * kc, op->y + i * op->n + n0 + j, op->n);
    }
    return 0;
}

int ckpt_cpu__linear(void *ctx, const ckpt_backend_linear *op)
{
    int threads = ckpt_cpu__threads(ctx), rc = 0;
    int64_t blocks, b, i;

    if (op->w_dtype != CKPT_DTYPE_F32 && op->w_dtype != CKPT_DTYPE_BF16 && op->w_dtype != CKPT_DTYPE_F16)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_BACKEND, "cpu linear: weights of type %s",
                               ckpt_dtype_name(op->w_dtype));
    if (op->m < 0 || op->n < 0 || op->k < 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_BACKEND, "cpu linear: negative size");
    if (!op->accumulate)
        for (i = 0; i < op->m; i++) {
            if (op->bias)
                memcpy(op->y + i * op->n, op->bias, (size_t)op->n * sizeof(float));
            else
                memset(op->y + i * op->n, 0, (size_t)op->n * sizeof(float));
        }
    else if (op->bias)
        for (i = 0; i < op->m * op->n; i++)
            op->y[i] += op->bias[i % op->n];
    blocks = (op->n + NB - 1) / NB;
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel num_threads(threads) reduction(min : rc)
#endif
    {
        float *wp = malloc((size_t)NB * KC * sizeof(float));
        if (!wp)
            rc = CKPT_ENOMEM;
#ifdef CKPT_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (b = 0; b < blocks; b++) {
            int r;
            if (!wp)
                continue;
            r = column_block(op, b * NB, op->n - b * NB < NB ? op->n - b * NB : NB, wp);
            if (r < rc)
                rc = r;
        }
        free(wp);
    }
    (void)threads;
    if (rc == CKPT_ENOMEM)
        return ckpt_error_oom();
    return rc < 0 ? ckpt_error_setc(rc, CKPT_ERRCLASS_BACKEND, "cpu linear: converting %s weights failed",
                                    ckpt_dtype_name(op->w_dtype))
                  : 0;
}
