/* The CUDA backend against the CPU backend, op by op (ggml's test-backend-ops is the model):
 * every operation runs on both over seeded random data and a grid of shapes, and the results
 * must agree within a tolerance that each check derives from the data and justifies below.
 * A failure names the operation, the shape, the dtype, the worst element (where, both
 * values), the maximum absolute and relative L2 errors, and the tolerances; every case runs,
 * so one GPU run lists everything that is wrong.
 *
 * With no CUDA module or no device it says why and exits 77 (ctest: skipped). It has its own
 * main (not test_main.c) for that exit code. Timing is tests/bench/verify_gpu.sh's job.
 *
 * Error bounds use u = 2^-24 (float32 unit roundoff), gamma(n) = n u / (1 - n u) (the bound
 * on the relative error of an n-term float32 sum or dot product in any order, Higham 3.1),
 * and Cauchy-Schwarz, sum |x_k w_k| <= |x| |w|, to bound sums of magnitudes by norms. Each
 * element must be within its bound; the relative L2 error (|got - ref| / |ref|) must also be
 * below a statistical limit, which catches a systematically lower precision (TF32, a wrong
 * rounding) that the worst-case bounds would let through. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SKIPPED 77

#include "backend_pair.h"

/* ---- linear ------------------------------------------------------------------------------ */

/* dev: x, w, bias, y; arg: the operation with sizes and flags */
static int call_linear(side *s, void *const *dev, void *arg)
{
    ckpt_backend_linear op = *(const ckpt_backend_linear *)arg;
    op.x = dev[0];
    op.w = dev[1];
    op.bias = dev[2];
    op.y = dev[3];
    return s->vt->linear(s->ctx, &op);
}

static void linear_case(int64_t m, int64_t n, int64_t k, ckpt_dtype wt, int accumulate, int with_bias, int exact)
{
    static const char *const names[] = {"row", "col"};
    const int64_t dims[] = {m, n};
    const size_t wsz = ckpt_dtype_size(wt);
    float *x = floats(m * k), *w = floats(n * k), *bias = floats(n), *y0 = floats(m * n);
    float *ref = floats(m * n), *got = floats(m * n);
    double *tol = doubles(m * n);
    void *wbuf = case_alloc((size_t)(n * k) * wsz);
    ckpt_backend_linear op = {m, n, k, NULL, NULL, wt, NULL, NULL, accumulate};
    const void *in[] = {x, wbuf, with_bias ? bias : NULL, y0};
    const size_t bytes[] = {(size_t)(m * k) * 4, (size_t)(n * k) * wsz, (size_t)n * 4, (size_t)(m * n) * 4};
    char desc[160];

    snprintf(desc, sizeof desc, "m=%lld n=%lld k=%lld, %s weights%s%s, %s x", (long long)m, (long long)n,
             (long long)k, ckpt_dtype_name(wt), with_bias ? ", bias" : "", accumulate ? ", accumulate" : "",
             exact ? "exact" : "random");
    rng_seed((uint64_t)(m * 1000003 + n * 1009 + k) * 31 + (uint64_t)wt * 7 + (uint64_t)(accumulate * 2 + with_bias));
    if (exact)
        fill_exact(x, m * k, 2.0);
    else
        fill_uniform(x, m * k, -1.0, 1.0);
    fill_uniform(w, n * k, -1.0, 1.0);
    fill_uniform(bias, n, -1.0, 1.0);
    if (accumulate)
        fill_uniform(y0, m * n, -4.0, 4.0);
    else
        for (int64_t i = 0; i < m * n; i++)
            y0[i] = NAN; /* must never be read */
    /* The weights as stored, and their exact float32 values for the bounds. */
    ckpt_dtype_convert(wt, wbuf, CKPT_DTYPE_F32, w, (size_t)(n * k));
    ckpt_dtype_convert(CKPT_DTYPE_F32, w, wt, wbuf, (size_t)(n * k));

    if (run_both(OP_LINEAR, desc, 4, in, bytes, 3, ref, got, call_linear, &op) == 0) {
        /* Per element, with S = |x_i| |w_j| >= sum_k |x_ik w_jk|:
         *  - each side's float32 dot product: gamma(k) S (cuBLAS pedantic float32: IEEE FMAs;
         *    tensor cores: their adders may truncate, 2u a step: 2 gamma(k) S); 4 gamma(k) S for
         *    both sides together;
         *  - the additions of y0 and bias, and the CPU's sum of its two k-slices: 4u (|y0| + |b| + S);
         *  - random x with bfloat16/float16 weights: the GPU rounds x to that type, relative
         *    error ut per product: ut S (plus, for float16, 2^-25 per subnormal x: 2^-25 sqrt(k) |w_j|).
         * Relative L2: float32 (or x exact in the weight type) gives ~u sqrt(k) << 1e-5, while
         * TF32 would give ~2e-4; rounding x gives ~0.4 ut rms, limit 2 ut. */
        const double ut = exact ? 0.0 : unit_of(wt);
        for (int64_t i = 0; i < m; i++) {
            const double xn = norm2(x + i * k, k);
            for (int64_t j = 0; j < n; j++) {
                const double wn = norm2(w + j * k, k), sx = xn * wn;
                double t = (4.0 * gamma_n(k) + ut + 4.0 * U32) * sx +
                           4.0 * U32 * ((with_bias ? fabs(bias[j]) : 0.0) + (accumulate ? fabs(y0[i * n + j]) : 0.0));
                if (wt == CKPT_DTYPE_F16 && !exact)
                    t += 0x1.0p-25 * sqrt((double)k) * wn;
                tol[i * n + j] = t;
            }
        }
        check(OP_LINEAR, desc, ref, got, m * n, tol, ut > 0.0 ? 2.0 * ut : 1e-5, dims, names, 2);
    }
    case_done();
}

static void test_linear(void)
{
    /* Odd sizes and tails around cuBLAS's tile sizes; k = 0 (an empty sum); one larger shape. */
    static const int64_t shapes[][3] = {{1, 1, 1},     {1, 17, 64},   {7, 130, 15}, {33, 257, 301},
                                        {129, 64, 128}, {130, 96, 33}, {4, 9, 0},    {64, 512, 1024}};
    static const ckpt_dtype types[] = {CKPT_DTYPE_F32, CKPT_DTYPE_BF16, CKPT_DTYPE_F16};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < 3; t++)
            for (int acc = 0; acc < 2; acc++)
                for (int bias = 0; bias < 2; bias++)
                    for (int exact = 0; exact < 2; exact++)
                        linear_case(shapes[s][0], shapes[s][1], shapes[s][2], types[t], acc, bias, exact);
}

/* ---- attention -------------------------------------------------------------------------- */

/* dev: q, k, v, out; arg: the operation with sizes and flags */
static int call_attention(side *s, void *const *dev, void *arg)
{
    ckpt_backend_attention op = *(const ckpt_backend_attention *)arg;
    op.q = dev[0];
    op.k = dev[1];
    op.v = dev[2];
    op.out = dev[3];
    return s->vt->attention(s->ctx, &op);
}

static double max_row_norm(const float *x, int64_t rows, int64_t len)
{
    double best = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double v = norm2(x + r * len, len);
        if (v > best)
            best = v;
    }
    return best;
}

static void attention_case(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t d, int causal, ckpt_dtype compute,
                           int exact, int64_t window)
{
    static const char *const names[] = {"token", "head", "dim"};
    const int64_t dims[] = {tokens, heads, d}, nq = tokens * heads * d, nk = tokens * kv_heads * d;
    float *q = floats(nq), *k = floats(nk), *v = floats(nk), *out = floats(nq), *ref = floats(nq), *got = floats(nq);
    double *tol = doubles(nq);
    ckpt_backend_attention op = {tokens, heads, kv_heads, d, NULL, NULL, NULL, NULL, 1.0 / sqrt((double)d),
                                 causal, compute, window};
    const void *in[] = {q, k, v, out};
    const size_t bytes[] = {(size_t)nq * 4, (size_t)nk * 4, (size_t)nk * 4, (size_t)nq * 4};
    char desc[160];

    snprintf(desc, sizeof desc, "tokens=%lld heads=%lld/%lld head_dim=%lld, %s, window %lld, %s compute, %s data",
             (long long)tokens, (long long)heads, (long long)kv_heads, (long long)d, causal ? "causal" : "full",
             (long long)window, ckpt_dtype_name(compute), exact ? "exact" : "random");
    rng_seed((uint64_t)(tokens * 7919 + heads * 131 + kv_heads * 17 + d) * 3 + (uint64_t)causal + 5 * (uint64_t)compute +
             (uint64_t)window * 101);
    if (exact) {
        fill_exact(q, nq, 2.0);
        fill_exact(k, nk, 2.0);
        fill_exact(v, nk, 1.0);
    } else {
        fill_uniform(q, nq, -2.0, 2.0);
        fill_uniform(k, nk, -2.0, 2.0);
        fill_uniform(v, nk, -1.0, 1.0);
    }
    for (int64_t i = 0; i < nq; i++)
        out[i] = NAN; /* every element must be written */

    if (run_both(OP_ATTENTION, desc, 4, in, bytes, 3, ref, got, call_attention, &op) == 0) {
        /* out is a convex combination of v rows, so errors scale with vmax = max |v|.
         *  - Scores: exact data makes q.k exact in float32 on both sides (products of 1/64
         *    multiples, sums far below 2^24 / 64^2); scaling, the log2 change and exp add
         *    eps = 4u (|s| + |m|) + 4u <= 8u S + 4u relative error to each p (S = |scale|
         *    max|q| max|k| >= |s|); random data adds gamma(D) S. Perturbing the weights of a
         *    normalised sum by eps moves it by <= 2 eps vmax; the float32 sums over the keys
         *    and the online rescaling add <= 3 gamma(T) vmax; the division u. Both sides: twice.
         *  - bfloat16/float16: P rounded to the type on the GPU only (the CPU stays float32):
         *    <= ut vmax, plus 2^-25 per key for float16 subnormals. Random data: q and k
         *    rounded move each score by <= 2.01 ut S (all p by expm1 of that, both ways),
         *    v rounded moves out by <= ut vmax.
         * Relative L2: float32 ~1e-6 (limit 1e-5); P rounding ~0.4 ut rms (limit 2 ut); with
         * q, k, v rounded ~1-1.5 ut (limit 6 ut). */
        const double u = U32, ut = unit_of(compute);
        const double vmax = max_row_norm(v, nk, 1);
        const double smax = fabs(op.scale) * max_row_norm(q, tokens * heads, d) * max_row_norm(k, tokens * kv_heads, d);
        const double eps = 8.0 * u * smax + 4.0 * u + (exact ? 0.0 : gamma_n(d) * smax);
        double t = 2.0 * (2.0 * eps + 3.0 * gamma_n(tokens) + u), l2_tol = 1e-5;
        if (compute != CKPT_DTYPE_F32) {
            t += ut + (compute == CKPT_DTYPE_F16 ? (double)tokens * 0x1.0p-25 : 0.0);
            l2_tol = 2.0 * ut;
            if (!exact) {
                t += 2.0 * expm1(2.01 * ut * smax) + ut;
                l2_tol = 6.0 * ut;
            }
        }
        for (int64_t i = 0; i < nq; i++)
            tol[i] = vmax * t;
        check(OP_ATTENTION, desc, ref, got, nq, tol, l2_tol, dims, names, 3);
    }
    case_done();
}

static void test_attention(void)
{
    static const int64_t tokens[] = {1, 7, 129, 300};
    static const int64_t heads[][2] = {{4, 4}, {8, 2}, {32, 8}};
    static const int64_t dims[] = {16, 32, 64, 80, 96, 128, 256};
    static const ckpt_dtype computes[] = {CKPT_DTYPE_F32, CKPT_DTYPE_BF16, CKPT_DTYPE_F16};

    for (size_t t = 0; t < 4; t++)
        for (size_t h = 0; h < 3; h++)
            for (size_t d = 0; d < 7; d++)
                for (int causal = 0; causal < 2; causal++)
                    for (size_t c = 0; c < 3; c++)
                        attention_case(tokens[t], heads[h][0], heads[h][1], dims[d], causal, computes[c], 1, 0);
    /* Values that the compute type must round, on fewer shapes. */
    for (size_t d = 0; d < 7; d++)
        for (int causal = 0; causal < 2; causal++)
            for (size_t c = 0; c < 3; c++)
                attention_case(129, 8, 2, dims[d], causal, computes[c], 0, 0);
    /* Sliding windows: 1 (each token alone), 3, one tile long and one past it (tiles wholly
     * outside the window skipped, rows whose first visible key is in a later tile), and >= the
     * tokens (causal). */
    static const int64_t windows[] = {1, 3, 32, 64, 65, 300};
    for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++)
        for (size_t t = 1; t < 4; t++)
            for (size_t d = 0; d < 7; d += 2)
                for (size_t c = 0; c < 3; c++)
                    attention_case(tokens[t], 8, 2, dims[d], 1, computes[c], 1, windows[w]);
    for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++)
        for (size_t c = 0; c < 3; c++)
            attention_case(300, 8, 2, 128, 1, computes[c], 0, windows[w]);
}

/* ---- norm ---------------------------------------------------------------------------------- */

typedef struct norm_arg {
    ckpt_norm_kind kind;
    int64_t rows, cols;
    double eps;
    int in_place;
} norm_arg;

/* dev: x, weight, bias, y */
static int call_norm(side *s, void *const *dev, void *arg)
{
    const norm_arg *a = arg;
    return s->vt->norm(s->ctx, a->kind, a->rows, a->cols, dev[0], dev[1], dev[2], a->eps, a->in_place ? dev[0] : dev[3]);
}

static void norm_case(ckpt_norm_kind kind, int64_t rows, int64_t cols, int with_bias, int in_place, double eps)
{
    static const char *const names[] = {"row", "col"};
    const int64_t dims[] = {rows, cols}, n = rows * cols;
    float *x = floats(n), *w = floats(cols), *b = floats(cols), *y = floats(n), *ref = floats(n), *got = floats(n);
    double *tol = doubles(n);
    norm_arg a = {kind, rows, cols, eps, in_place};
    const void *in[] = {x, w, kind == CKPT_NORM_LAYER && with_bias ? b : NULL, in_place ? NULL : y};
    const size_t bytes[] = {(size_t)n * 4, (size_t)cols * 4, (size_t)cols * 4, (size_t)n * 4};
    char desc[160];

    snprintf(desc, sizeof desc, "%s rows=%lld cols=%lld eps=%g%s%s", kind == CKPT_NORM_RMS ? "rms" : "layer",
             (long long)rows, (long long)cols, eps, with_bias ? ", bias" : "", in_place ? ", in place" : "");
    rng_seed((uint64_t)(rows * 4099 + cols) * 5 + (uint64_t)(kind * 4 + with_bias * 2 + in_place));
    for (int64_t r = 0; r < rows; r++) /* rows off centre, so that LayerNorm's mean matters */
        fill_uniform(x + r * cols, cols, -2.0 + 0.05 * (double)r, 2.0 + 0.1 * (double)r);
    fill_uniform(w, cols, 0.5, 1.5);
    fill_uniform(b, cols, -1.0, 1.0);
    for (int64_t i = 0; i < n; i++)
        y[i] = NAN;
    if (run_both(OP_NORM, desc, 4, in, bytes, in_place ? 0 : 3, ref, got, call_norm, &a) == 0) {
        /* Statistics in double on both sides; what differs is float32 rounding: the mean
         * and 1/std rounded to float32 (GPU), x - mean, two products, + b: at most
         * 8u (|w| rstd (|x - mean| + |mean|) + |y| + |b|) for both sides together.
         * Relative L2: a few u rms, limit 2e-6. */
        for (int64_t r = 0; r < rows; r++) {
            double mean = 0.0, var = 0.0, rstd;
            for (int64_t j = 0; j < cols; j++)
                mean += x[r * cols + j];
            mean = kind == CKPT_NORM_LAYER ? mean / (double)cols : 0.0;
            for (int64_t j = 0; j < cols; j++)
                var += ((double)x[r * cols + j] - mean) * ((double)x[r * cols + j] - mean);
            rstd = 1.0 / sqrt(var / (double)cols + eps);
            for (int64_t j = 0; j < cols; j++) {
                const double bj = kind == CKPT_NORM_LAYER && with_bias ? fabs(b[j]) : 0.0;
                tol[r * cols + j] = 8.0 * U32 *
                                    (fabs(w[j]) * rstd * (fabs(x[r * cols + j] - mean) + fabs(mean)) +
                                     fabs(ref[r * cols + j]) + bj);
            }
        }
        check(OP_NORM, desc, ref, got, n, tol, 2e-6, dims, names, 2);
    }
    case_done();
}

static void test_norm(void)
{
    static const int64_t rows[] = {1, 7, 130}, cols[] = {1, 17, 256, 4097};
    for (size_t r = 0; r < 3; r++)
        for (size_t c = 0; c < 4; c++)
            for (int in_place = 0; in_place < 2; in_place++) {
                norm_case(CKPT_NORM_RMS, rows[r], cols[c], 0, in_place, 1e-6);
                norm_case(CKPT_NORM_LAYER, rows[r], cols[c], 0, in_place, 1e-5);
                norm_case(CKPT_NORM_LAYER, rows[r], cols[c], 1, in_place, 1e-5);
            }
}

/* ---- rope ---------------------------------------------------------------------------------- */

typedef struct rope_arg {
    int64_t tokens, heads, head_dim, rotary_dim;
    int interleaved;
} rope_arg;

/* dev: x, cos, sin */
static int call_rope(side *s, void *const *dev, void *arg)
{
    const rope_arg *a = arg;
    return s->vt->rope(s->ctx, a->tokens, a->heads, a->head_dim, a->rotary_dim, dev[0], dev[1], dev[2],
                       a->interleaved);
}

static void rope_case(int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, int interleaved)
{
    static const char *const names[] = {"token", "head", "dim"};
    const int64_t half = rotary_dim / 2, n = tokens * heads * head_dim, dims[] = {tokens, heads, head_dim};
    float *x = floats(n), *c = floats(tokens * half), *s = floats(tokens * half), *ref = floats(n), *got = floats(n);
    double *tol = doubles(n);
    rope_arg a = {tokens, heads, head_dim, rotary_dim, interleaved};
    const void *in[] = {x, c, s};
    const size_t bytes[] = {(size_t)n * 4, (size_t)(tokens * half) * 4, (size_t)(tokens * half) * 4};
    char desc[160];

    snprintf(desc, sizeof desc, "tokens=%lld heads=%lld head_dim=%lld rotary_dim=%lld, %s", (long long)tokens,
             (long long)heads, (long long)head_dim, (long long)rotary_dim, interleaved ? "interleaved" : "rotate-half");
    rng_seed((uint64_t)(tokens * 131 + heads * 17 + head_dim) * 7 + (uint64_t)(rotary_dim * 2 + interleaved));
    fill_uniform(x, n, -2.0, 2.0);
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t i = 0; i < half; i++) {
            const double angle = (double)t * pow(10000.0, -2.0 * (double)i / (double)rotary_dim);
            c[t * half + i] = (float)cos(angle);
            s[t * half + i] = (float)sin(angle);
        }
    if (run_both(OP_ROPE, desc, 3, in, bytes, 0, ref, got, call_rope, &a) == 0) {
        /* a' = a c - b s, b' = b c + a s: two products and a sum, <= 2u (|a c| + |b s|) a side
         * (both round each operation, no FMA; equal bits expected). Values past rotary_dim
         * are untouched: exact. */
        for (int64_t i = 0; i < n; i++)
            tol[i] = 0.0;
        for (int64_t th = 0; th < tokens * heads; th++)
            for (int64_t i = 0; i < half; i++) {
                const int64_t t = th / heads, ia = th * head_dim + (interleaved ? 2 * i : i),
                              ib = th * head_dim + (interleaved ? 2 * i + 1 : i + half);
                const double ca = fabs(c[t * half + i]), sa = fabs(s[t * half + i]);
                tol[ia] = tol[ib] = 4.0 * U32 * (fabs(x[ia]) + fabs(x[ib])) * (ca + sa);
            }
        check(OP_ROPE, desc, ref, got, n, tol, 1e-6, dims, names, 3);
    }
    case_done();
}

static void test_rope(void)
{
    /* dim, rotary; the last two are verify's MLA heads (the tiny fixture's, DeepSeek-V3's 192
     * padded to 256 with its 64 RoPE values first) */
    static const int64_t shapes[][2] = {{16, 16}, {64, 32}, {128, 128}, {80, 64}, {128, 64}, {96, 8}, {16, 4}, {256, 64}};
    static const int64_t tokens[] = {1, 7, 129}, heads[] = {1, 4, 8};
    for (size_t t = 0; t < 3; t++)
        for (size_t h = 0; h < 3; h++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int il = 0; il < 2; il++)
                    rope_case(tokens[t], heads[h], shapes[s][0], shapes[s][1], il);
}

/* ---- act, add ----------------------------------------------------------------------------- */

typedef struct act_arg {
    ckpt_act_kind kind;
    int64_t n;
    int in_place; /* out = gate */
} act_arg;

/* dev: gate, up, out */
static int call_act(side *s, void *const *dev, void *arg)
{
    const act_arg *a = arg;
    return s->vt->act(s->ctx, a->kind, a->n, dev[0], dev[1], a->in_place ? dev[0] : dev[2]);
}

static void act_case(ckpt_act_kind kind, int64_t n, int in_place)
{
    static const char *const kinds[] = {"swiglu", "gelu", "gelu_tanh", "relu", "silu", "geglu_tanh"};
    const int gated = kind == CKPT_ACT_SWIGLU || kind == CKPT_ACT_GEGLU_TANH;
    static const char *const names[] = {"i"};
    const int64_t dims[] = {n};
    float *g = floats(n), *up = floats(n), *out = floats(n), *ref = floats(n), *got = floats(n);
    double *tol = doubles(n);
    act_arg a = {kind, n, in_place};
    const void *in[] = {g, gated ? up : NULL, in_place ? NULL : out};
    const size_t bytes[] = {(size_t)n * 4, (size_t)n * 4, (size_t)n * 4};
    char desc[120];

    snprintf(desc, sizeof desc, "%s n=%lld%s", kinds[kind], (long long)n, in_place ? ", in place" : "");
    rng_seed((uint64_t)n * 11 + (uint64_t)kind * 2 + (uint64_t)in_place);
    fill_uniform(g, n, -8.0, 8.0); /* into the saturated tails */
    fill_uniform(up, n, -2.0, 2.0);
    for (int64_t i = 0; i < n; i++)
        out[i] = NAN;
    if (run_both(OP_ACT, desc, 3, in, bytes, in_place ? 0 : 2, ref, got, call_act, &a) == 0) {
        /* The CPU evaluates in double and rounds once; the GPU in float32 with expf / erfcf
         * (2 / 4 ulp) and a few roundings: 16u |y| covers that. In the negative tails of the
         * gelus the argument's rounding (u relative) is amplified: erfc(z) changes by 2 z^2 u
         * relative (z^2 = x^2 / 2), e^(-2z) by 2|z| (3u) with z = sqrt(2/pi)(x + 0.044715 x^3).
         * The CPU's own 1 + erf / 1 + tanh cancels in double there: 2^-50 |x| absolute (times
         * |up| for geglu_tanh, whose product adds one more rounding, inside 16u). relu is exact. */
        for (int64_t i = 0; i < n; i++) {
            const double x = g[i], z = 0.7978845608 * fabs(x + 0.044715 * x * x * x);
            double amp = 1.0, floor = 0.0;
            if (kind == CKPT_ACT_GELU)
                amp += x * x, floor = 0x1.0p-50 * fabs(x);
            else if (kind == CKPT_ACT_GELU_TANH)
                amp += z, floor = 0x1.0p-50 * fabs(x);
            else if (kind == CKPT_ACT_GEGLU_TANH)
                amp += z, floor = 0x1.0p-50 * fabs(x) * fabs(up[i]);
            tol[i] = kind == CKPT_ACT_RELU ? 0.0 : 16.0 * U32 * fabs(ref[i]) * amp + floor;
        }
        check(OP_ACT, desc, ref, got, n, tol, 1e-6, dims, names, 1);
    }
    case_done();
}

static void test_act(void)
{
    static const int64_t sizes[] = {1, 7, 1000, 100003};
    for (int kind = CKPT_ACT_SWIGLU; kind <= CKPT_ACT_GEGLU_TANH; kind++)
        for (size_t i = 0; i < 4; i++)
            for (int in_place = 0; in_place < 2; in_place++)
                act_case((ckpt_act_kind)kind, sizes[i], in_place);
}

typedef struct add_arg {
    int64_t n;
    int out_is; /* 0: a separate out, 1: out = a, 2: out = b */
} add_arg;

/* dev: a, b, out */
static int call_add(side *s, void *const *dev, void *arg)
{
    const add_arg *a = arg;
    return s->vt->add(s->ctx, a->n, dev[0], dev[1], a->out_is ? dev[a->out_is - 1] : dev[2]);
}

static void add_case(int64_t n, int out_is)
{
    static const char *const names[] = {"i"};
    const int64_t dims[] = {n};
    float *x = floats(n), *y = floats(n), *out = floats(n), *ref = floats(n), *got = floats(n);
    double *tol = doubles(n);
    add_arg a = {n, out_is};
    const void *in[] = {x, y, out_is ? NULL : out};
    const size_t bytes[] = {(size_t)n * 4, (size_t)n * 4, (size_t)n * 4};
    char desc[80];

    snprintf(desc, sizeof desc, "n=%lld%s", (long long)n, out_is == 1 ? ", out = a" : out_is == 2 ? ", out = b" : "");
    rng_seed((uint64_t)n * 3 + (uint64_t)out_is);
    fill_uniform(x, n, -100.0, 100.0);
    fill_uniform(y, n, -1.0, 1.0);
    for (int64_t i = 0; i < n; i++) {
        out[i] = NAN;
        tol[i] = 0.0; /* one correctly rounded float32 sum: exact */
    }
    if (run_both(OP_ADD, desc, 3, in, bytes, out_is ? out_is - 1 : 2, ref, got, call_add, &a) == 0)
        check(OP_ADD, desc, ref, got, n, tol, 0.0, dims, names, 1);
    case_done();
}

static void test_add(void)
{
    static const int64_t sizes[] = {1, 7, 100003};
    for (size_t i = 0; i < 3; i++)
        for (int out_is = 0; out_is < 3; out_is++)
            add_case(sizes[i], out_is);
}

/* ---- compare ------------------------------------------------------------------------------ */

typedef struct compare_arg {
    int64_t n;
    ckpt_backend_compare_stats st;
} compare_arg;

/* dev: a, b */
static int call_compare(side *s, void *const *dev, void *arg)
{
    compare_arg *a = arg;
    return s->vt->compare(s->ctx, a->n, dev[0], dev[1], &a->st);
}

static void compare_case(int64_t n, int nonfinite)
{
    float *a = floats(n), *b = floats(n);
    compare_arg r = {.n = n}, g = {.n = n}, g2 = {.n = n};
    const void *in[] = {a, b};
    const size_t bytes[] = {(size_t)n * 4, (size_t)n * 4};
    char desc[80];

    snprintf(desc, sizeof desc, "n=%lld%s", (long long)n, nonfinite ? " with NaN and Inf" : "");
    rng_seed((uint64_t)n * 13 + (uint64_t)nonfinite);
    fill_uniform(a, n, -1.0, 1.0);
    for (int64_t i = 0; i < n; i++)
        b[i] = a[i] + (float)(1e-3 * (rng_unit() - 0.5));
    if (nonfinite)
        for (int64_t i = 0; i < n; i++) {
            if (i % 997 == 3)
                a[i] = NAN;
            if (i % 1009 == 5)
                b[i] = i % 2 ? INFINITY : -INFINITY;
            if (i % 4999 == 7)
                a[i] = b[i] = NAN;
        }
    if (run_op(&cpu, OP_COMPARE, desc, 2, in, bytes, -1, NULL, call_compare, &r) == 0 &&
        run_op(&cuda, OP_COMPARE, desc, 2, in, bytes, -1, NULL, call_compare, &g) == 0 &&
        run_op(&cuda, OP_COMPARE, desc, 2, in, bytes, -1, NULL, call_compare, &g2) == 0) {
        /* Counts and the maximum are exact on both sides. The sums are the same double
         * terms added in other orders: <= 2 gamma_double(n) sum |terms| apart; the squares
         * are non-negative and |dot| terms sum to <= sqrt(ssa ssb). The GPU must give the
         * same bits twice. */
        const ckpt_backend_compare_stats *x = &g.st, *y = &r.st;
        const double gd = 2.0 * (double)n * 0x1.0p-53 / (1.0 - (double)n * 0x1.0p-53);
        const double t_a = gd * y->sum_sq_a, t_b = gd * y->sum_sq_b, t_d = gd * y->sum_sq_diff,
                     t_dot = gd * sqrt(y->sum_sq_a * y->sum_sq_b);
        const int same = memcmp(&g.st, &g2.st, sizeof g.st) == 0;
        stats[OP_COMPARE].cases++;
        if (x->nonfinite_a != y->nonfinite_a || x->nonfinite_b != y->nonfinite_b || x->max_abs_diff != y->max_abs_diff ||
            fabs(x->sum_sq_a - y->sum_sq_a) > t_a || fabs(x->sum_sq_b - y->sum_sq_b) > t_b ||
            fabs(x->sum_sq_diff - y->sum_sq_diff) > t_d || fabs(x->dot - y->dot) > t_dot || !same) {
            stats[OP_COMPARE].failed++;
            report("FAIL compare %s: cuda {ssa %.17g, ssb %.17g, ssd %.17g, dot %.17g, max %.17g, nonfinite %llu/%llu}"
                   " vs cpu {%.17g, %.17g, %.17g, %.17g, %.17g, %llu/%llu}, sum tolerances %.3g %.3g %.3g %.3g%s",
                   desc, x->sum_sq_a, x->sum_sq_b, x->sum_sq_diff, x->dot, x->max_abs_diff,
                   (unsigned long long)x->nonfinite_a, (unsigned long long)x->nonfinite_b, y->sum_sq_a, y->sum_sq_b,
                   y->sum_sq_diff, y->dot, y->max_abs_diff, (unsigned long long)y->nonfinite_a,
                   (unsigned long long)y->nonfinite_b, t_a, t_b, t_d, t_dot, same ? "" : "; two CUDA runs differ");
        }
    }
    case_done();
}

static void test_compare(void)
{
    static const int64_t sizes[] = {1, 7, 65539, 3000001};
    for (size_t i = 0; i < 4; i++)
        for (int nf = 0; nf < 2; nf++)
            compare_case(sizes[i], nf);
}

/* ---- the CUDA backend alone: refusals, memory, determinism ---------------------------------- */

static void expect(int ok, const char *what, int rc)
{
    stats[OP_ERRORS].cases++;
    if (!ok) {
        stats[OP_ERRORS].failed++;
        report("FAIL errors: %s (returned %d: %s)", what, rc, rc < 0 ? ckpt_error_last()->message : "");
    }
}

static void test_errors(void)
{
    const char *desc = ckpt_backend_description(cuda.b);
    size_t free_b = 0, total_b = 0;
    void *p = NULL, *big = NULL;
    int rc;

    expect(strstr(desc, "sm_") != NULL, "the description names the compute capability", 0);
    rc = cuda.vt->memory ? cuda.vt->memory(cuda.ctx, &free_b, &total_b) : -1;
    expect(rc == 0 && total_b > 0 && free_b <= total_b, "memory reports free <= total", rc);
    rc = cuda.vt->synchronize ? cuda.vt->synchronize(cuda.ctx) : -1;
    expect(rc == 0, "synchronize", rc);
    cuda.vt->release(cuda.ctx, NULL);
    rc = cuda.vt->alloc(cuda.ctx, (size_t)1 << 62, &big);
    expect(rc == CKPT_ENOMEM && !big, "a 4 EiB allocation fails with CKPT_ENOMEM", rc);
    if ((rc = cuda.vt->alloc(cuda.ctx, 4096, &p)) < 0) {
        expect(0, "alloc 4096 bytes", rc);
        return;
    }
    /* The failed allocation must not be reported again by the next kernel launch. */
    rc = cuda.vt->add(cuda.ctx, 16, p, p, p);
    expect(rc == 0, "a kernel launch after a failed allocation succeeds", rc);

    ckpt_backend_attention a = {8, 4, 4, 40, p, p, p, p, 0.125, 1, CKPT_DTYPE_BF16, 0};
    rc = cuda.vt->attention(cuda.ctx, &a);
    expect(rc == CKPT_EUNSUPPORTED && strstr(ckpt_error_last()->message, "head_dim 40"),
           "attention refuses head_dim 40, naming it", rc);
    a.head_dim = 64;
    a.heads = 6;
    rc = cuda.vt->attention(cuda.ctx, &a);
    expect(rc == CKPT_EINVALID, "attention refuses 6 heads over 4 KV heads", rc);
    a.heads = 4;
    a.compute = CKPT_DTYPE_F64;
    rc = cuda.vt->attention(cuda.ctx, &a);
    expect(rc == CKPT_EUNSUPPORTED, "attention refuses float64 compute", rc);
    a.compute = CKPT_DTYPE_BF16;
    a.causal = 0;
    a.window = 4;
    rc = cuda.vt->attention(cuda.ctx, &a);
    expect(rc == CKPT_EINVALID, "attention refuses a window without causal masking", rc);
    a.causal = 1;
    a.window = -1;
    rc = cuda.vt->attention(cuda.ctx, &a);
    expect(rc == CKPT_EINVALID, "attention refuses a negative window", rc);

    ckpt_backend_linear l = {(int64_t)INT_MAX + 1, 4, 4, p, p, CKPT_DTYPE_BF16, NULL, p, 0};
    rc = cuda.vt->linear(cuda.ctx, &l);
    expect(rc == CKPT_EUNSUPPORTED, "linear refuses m > INT_MAX (cuBLAS's int sizes)", rc);
    l.m = 4;
    l.w_dtype = CKPT_DTYPE_F64;
    rc = cuda.vt->linear(cuda.ctx, &l);
    expect(rc == CKPT_EUNSUPPORTED, "linear refuses float64 weights", rc);
    cuda.vt->release(cuda.ctx, p);
}

/* The same operation twice on the GPU gives the same bits (fixed reduction orders). */
static void test_determinism(void)
{
    const int64_t m = 129, n = 257, k = 301, t = 300, h = 8, kvh = 2, d = 128;
    float *x = floats(m * k), *w = floats(n * k), *y1 = floats(m * n), *y2 = floats(m * n);
    float *q = floats(t * h * d), *kv = floats(t * kvh * d), *o1 = floats(t * h * d), *o2 = floats(t * h * d);
    uint16_t *wb = case_alloc((size_t)(n * k) * 2);
    ckpt_backend_linear l = {m, n, k, NULL, NULL, CKPT_DTYPE_BF16, NULL, NULL, 0};
    const void *lin[] = {x, wb, NULL, y1};
    const size_t lbytes[] = {(size_t)(m * k) * 4, (size_t)(n * k) * 2, 0, (size_t)(m * n) * 4};
    const void *ain[] = {q, kv, kv, o1};
    const size_t abytes[] = {(size_t)(t * h * d) * 4, (size_t)(t * kvh * d) * 4, (size_t)(t * kvh * d) * 4,
                             (size_t)(t * h * d) * 4};

    rng_seed(42);
    fill_uniform(x, m * k, -1.0, 1.0);
    fill_uniform(w, n * k, -1.0, 1.0);
    fill_uniform(q, t * h * d, -2.0, 2.0);
    fill_uniform(kv, t * kvh * d, -1.0, 1.0);
    ckpt_dtype_convert(CKPT_DTYPE_BF16, wb, CKPT_DTYPE_F32, w, (size_t)(n * k));
    memset(y1, 0, (size_t)(m * n) * 4);
    memset(o1, 0, (size_t)(t * h * d) * 4);
    if (run_op(&cuda, OP_ERRORS, "determinism", 4, lin, lbytes, 3, y1, call_linear, &l) == 0 &&
        run_op(&cuda, OP_ERRORS, "determinism", 4, lin, lbytes, 3, y2, call_linear, &l) == 0)
        expect(memcmp(y1, y2, lbytes[3]) == 0, "linear (bfloat16) gives the same bits twice", 0);
    for (int c = 0; c < 2; c++) {
        ckpt_backend_attention a = {t, h, kvh, d, NULL, NULL, NULL, NULL, 0.08838834764831845, 1,
                                    c ? CKPT_DTYPE_BF16 : CKPT_DTYPE_F32, 0};
        if (run_op(&cuda, OP_ERRORS, "determinism", 4, ain, abytes, 3, o1, call_attention, &a) == 0 &&
            run_op(&cuda, OP_ERRORS, "determinism", 4, ain, abytes, 3, o2, call_attention, &a) == 0)
            expect(memcmp(o1, o2, abytes[3]) == 0,
                   c ? "attention (bfloat16) gives the same bits twice" : "attention (float32) gives the same bits twice",
                   0);
    }
    case_done();
}

/* Groups named on the command line run alone ("test_backend_cuda attention rope"). */
static int selected(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int failed = 0;

    if (ckpt_backend_open(&cuda.b, "cuda", 0) < 0) {
        printf("skipped: no CUDA backend: %s\n", ckpt_error_last()->message);
        return SKIPPED;
    }
    cuda.vt = ckpt_backend_vt(cuda.b);
    cuda.ctx = ckpt_backend_ctx(cuda.b);
    if (ckpt_backend_open(&cpu.b, "cpu", 0) < 0) {
        fprintf(stderr, "FAIL: cannot open the CPU backend: %s\n", ckpt_error_last()->message);
        ckpt_backend_close(cuda.b);
        return 1;
    }
    cpu.vt = ckpt_backend_vt(cpu.b);
    cpu.ctx = ckpt_backend_ctx(cpu.b);
    printf("cuda: %s; reference: %s\n", ckpt_backend_description(cuda.b), ckpt_backend_description(cpu.b));

    if (selected(argc, argv, "errors"))
        test_errors();
    if (selected(argc, argv, "linear"))
        test_linear();
    if (selected(argc, argv, "attention"))
        test_attention();
    if (selected(argc, argv, "norm"))
        test_norm();
    if (selected(argc, argv, "rope"))
        test_rope();
    if (selected(argc, argv, "act"))
        test_act();
    if (selected(argc, argv, "add"))
        test_add();
    if (selected(argc, argv, "compare"))
        test_compare();
    if (selected(argc, argv, "determinism"))
        test_determinism();

    for (int op = 0; op < OP_COUNT; op++) {
        printf("%-4s %-9s %4d cases, %d failed", stats[op].failed ? "FAIL" : "ok", stats[op].name, stats[op].cases,
               stats[op].failed);
        printf("\n");
        if (stats[op].worst_abs > 0.0)
            printf("       worst error %.2g of its bound (%s)\n", stats[op].worst_abs, stats[op].worst_abs_case);
        if (stats[op].worst_l2 > 0.0)
            printf("       worst relative L2 %.2g of its limit (%s)\n", stats[op].worst_l2, stats[op].worst_l2_case);
        failed += stats[op].failed;
    }
    ckpt_backend_close(cpu.b);
    ckpt_backend_close(cuda.b);
    return failed ? 1 : 0;
}
