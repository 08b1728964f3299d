/* The CPU backend against plain double-precision references written here, and against
 * itself at another thread count (results must be bit-identical). */
#include "test.h"

#include <ckpt/sys/backend.h>

#include <math.h>
#include <stdlib.h>

static uint64_t state = 0x853c49e6748fea9bull;

static double uniform(void) /* [-1, 1) */
{
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(state >> 11) * 0x1.0p-52 - 1.0;
}

static float *randf(int64_t n)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    int64_t i;
    for (i = 0; i < n; i++)
        p[i] = (float)uniform();
    return p;
}

/* Largest |a - b| relative to max(1, |b|). */
static double max_err(const float *a, const double *b, int64_t n)
{
    double worst = 0;
    int64_t i;
    for (i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / fmax(1.0, fabs(b[i]));
        if (!(e <= worst))
            worst = e;
    }
    return worst;
}

typedef struct be {
    ckpt_backend *b;
    const ckpt_backend_vtable *vt;
    void *ctx;
} be;

static int open_cpu(be *x, int threads)
{
    if (ckpt_backend_open(&x->b, "cpu", threads) < 0)
        return -1;
    x->vt = ckpt_backend_vt(x->b);
    x->ctx = ckpt_backend_ctx(x->b);
    return 0;
}

/* y = x w^T + bias for every weight type, odd sizes (the 3x4 tiles' and 8-lane tails),
 * accumulate on and off. */
CKPT_TEST(test_backend_cpu_linear)
{
    static const int64_t shapes[][3] = { { 1, 1, 1 }, { 3, 4, 8 }, { 7, 13, 29 }, { 5, 70, 515 }, { 33, 65, 1031 } };
    static const ckpt_dtype types[] = { CKPT_DTYPE_F32, CKPT_DTYPE_BF16, CKPT_DTYPE_F16 };
    be cpu;
    size_t s, t;

    ASSERT_OK(open_cpu(&cpu, 0));
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (t = 0; t < 3; t++) {
            int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], i, j, l;
            float *x = randf(m * k), *wf = randf(n * k), *bias = randf(n), *y = randf(m * n);
            void *w = malloc((size_t)(n * k) * 4);
            float *wr = malloc((size_t)(n * k) * sizeof *wr);
            double *ref = malloc((size_t)(m * n) * sizeof *ref);
            int acc;
            ASSERT_OK(ckpt_dtype_convert(types[t], w, CKPT_DTYPE_F32, wf, (size_t)(n * k)));
            ASSERT_OK(ckpt_dtype_convert(CKPT_DTYPE_F32, wr, types[t], w, (size_t)(n * k)));
            for (acc = 0; acc < 2; acc++) {
                ckpt_backend_linear op = { m, n, k, x, w, types[t], acc ? NULL : bias, y, acc };
                for (i = 0; i < m; i++)
                    for (j = 0; j < n; j++) {
                        double sum = acc ? y[i * n + j] : bias[j];
                        for (l = 0; l < k; l++)
                            sum += (double)x[i * k + l] * wr[j * k + l];
                        ref[i * n + j] = sum;
                    }
                ASSERT_OK(cpu.vt->linear(cpu.ctx, &op));
                if (max_err(y, ref, m * n) > 4e-7 * sqrt((double)k) + 1e-6) {
                    ckpt_test_fail(__FILE__, __LINE__, "linear %lldx%lldx%lld %s acc %d: error %g", (long long)m,
                                   (long long)n, (long long)k, ckpt_dtype_name(types[t]), acc, max_err(y, ref, m * n));
                    return;
                }
            }
            free(x), free(wf), free(bias), free(y), free(w), free(wr), free(ref);
        }
    ckpt_backend_close(cpu.b);
}

static void ref_attention(const ckpt_backend_attention *a, double *out)
{
    int64_t t, h, j, c, d = a->head_dim, g = a->heads / a->kv_heads;
    double *s = malloc((size_t)a->tokens * sizeof *s);

    for (t = 0; t < a->tokens; t++)
        for (h = 0; h < a->heads; h++) {
            int64_t vis = a->causal ? t + 1 : a->tokens, kv = h / g;
            int64_t first = a->window > 0 && t >= a->window ? t - a->window + 1 : 0;
            double mx = -INFINITY, sum = 0;
            for (j = 0; j < first; j++)
                s[j] = 0;
            for (j = first; j < vis; j++) {
                double dot = 0;
                for (c = 0; c < d; c++)
                    dot += (double)a->q[(t * a->heads + h) * d + c] * a->k[(j * a->kv_heads + kv) * d + c];
                s[j] = dot * a->scale;
                mx = fmax(mx, s[j]);
            }
            for (j = first; j < vis; j++)
                sum += (s[j] = exp(s[j] - mx));
            for (c = 0; c < d; c++) {
                double o = 0;
                for (j = first; j < vis; j++)
                    o += s[j] * a->v[(j * a->kv_heads + kv) * d + c];
                out[(t * a->heads + h) * d + c] = o / sum;
            }
        }
    free(s);
}

CKPT_TEST(test_backend_cpu_attention)
{
    static const int64_t cases[][4] = { { 1, 4, 4, 16 }, { 7, 8, 2, 16 }, { 33, 4, 1, 13 }, { 70, 6, 3, 64 } };
    be cpu;
    size_t c;
    int causal;

    ASSERT_OK(open_cpu(&cpu, 0));
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (causal = 0; causal < 2; causal++) {
            int64_t T = cases[c][0], H = cases[c][1], KV = cases[c][2], D = cases[c][3];
            float *q = randf(T * H * D), *k = randf(T * KV * D), *v = randf(T * KV * D), *o = randf(T * H * D);
            double *ref = malloc((size_t)(T * H * D) * sizeof *ref);
            ckpt_backend_attention a = { T, H, KV, D, q, k, v, o, 1.0 / sqrt((double)D), causal, CKPT_DTYPE_F32, 0 };
            ref_attention(&a, ref);
            ASSERT_OK(cpu.vt->attention(cpu.ctx, &a));
            if (max_err(o, ref, T * H * D) > 1e-6) {
                ckpt_test_fail(__FILE__, __LINE__, "attention T%lld H%lld KV%lld D%lld causal %d: error %g",
                               (long long)T, (long long)H, (long long)KV, (long long)D, causal,
                               max_err(o, ref, T * H * D));
                return;
            }
            free(q), free(k), free(v), free(o), free(ref);
        }
    ASSERT_FAILS(CKPT_EINVALID, cpu.vt->attention(cpu.ctx, &(ckpt_backend_attention){ 4, 6, 4, 8, NULL, NULL, NULL,
                                                                                        NULL, 1, 1, CKPT_DTYPE_F32, 0 }));
    ckpt_backend_close(cpu.b);
}

/* A sliding window: query t sees keys t - W < j <= t. W = 1 is each token's own value; a
 * window as long as the sequence is causal attention, bit for bit. */
CKPT_TEST(test_backend_cpu_attention_window)
{
    static const int64_t cases[][4] = { { 1, 4, 4, 16 }, { 7, 8, 2, 16 }, { 33, 4, 1, 13 }, { 70, 6, 3, 64 } };
    static const int64_t windows[] = { 1, 3, 4, 32 };
    be cpu;
    size_t c, w;

    ASSERT_OK(open_cpu(&cpu, 0));
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t T = cases[c][0], H = cases[c][1], KV = cases[c][2], D = cases[c][3], i, t, h;
        float *q = randf(T * H * D), *k = randf(T * KV * D), *v = randf(T * KV * D), *o = randf(T * H * D);
        float *causal = randf(T * H * D);
        double *ref = malloc((size_t)(T * H * D) * sizeof *ref);
        ckpt_backend_attention a = { T, H, KV, D, q, k, v, causal, 0.3, 1, CKPT_DTYPE_F32, 0 };
        ASSERT_OK(cpu.vt->attention(cpu.ctx, &a));
        for (w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            a.out = o;
            a.window = windows[w];
            ref_attention(&a, ref);
            ASSERT_OK(cpu.vt->attention(cpu.ctx, &a));
            if (max_err(o, ref, T * H * D) > 1e-6) {
                ckpt_test_fail(__FILE__, __LINE__, "attention T%lld H%lld KV%lld D%lld window %lld: error %g",
                               (long long)T, (long long)H, (long long)KV, (long long)D, (long long)a.window,
                               max_err(o, ref, T * H * D));
                return;
            }
            if (a.window >= T)
                ASSERT_TRUE(memcmp(o, causal, (size_t)(T * H * D) * sizeof *o) == 0);
        }
        /* window 1: out = v of the token itself (its KV head's) */
        a.window = 1;
        ASSERT_OK(cpu.vt->attention(cpu.ctx, &a));
        for (t = 0; t < T; t++)
            for (h = 0; h < H; h++)
                for (i = 0; i < D; i++)
                    ASSERT_TRUE(o[(t * H + h) * D + i] == v[(t * KV + h / (H / KV)) * D + i]);
        /* a window that cuts: the last token sees fewer keys than causal attention gives it */
        if (T > 3) {
            a.window = 3;
            ASSERT_OK(cpu.vt->attention(cpu.ctx, &a));
            ASSERT_TRUE(memcmp(o + (T - 1) * H * D, causal + (T - 1) * H * D, (size_t)(H * D) * sizeof *o) != 0);
            ASSERT_TRUE(memcmp(o, causal, (size_t)(3 * H * D) * sizeof *o) == 0);
        }
        free(q), free(k), free(v), free(o), free(causal), free(ref);
    }
    ASSERT_FAILS(CKPT_EINVALID, cpu.vt->attention(cpu.ctx, &(ckpt_backend_attention){ 4, 4, 4, 8, NULL, NULL, NULL,
                                                                                        NULL, 1, 0, CKPT_DTYPE_F32, 2 }));
    ASSERT_FAILS(CKPT_EINVALID, cpu.vt->attention(cpu.ctx, &(ckpt_backend_attention){ 4, 4, 4, 8, NULL, NULL, NULL,
                                                                                        NULL, 1, 1, CKPT_DTYPE_F32, -1 }));
    ckpt_backend_close(cpu.b);
}

CKPT_TEST(test_backend_cpu_norm_rope_act)
{
    int64_t rows = 5, cols = 37, i, j, T = 6, heads = 3, d = 10, rd = 8;
    float *x = randf(rows * cols), *w = randf(cols), *b = randf(cols), *y = randf(rows * cols);
    float *r = randf(T * heads * d), *r0 = malloc((size_t)(T * heads * d) * sizeof *r0);
    float *cs = randf(T * rd / 2), *sn = randf(T * rd / 2), *g = randf(50), *u = randf(50), *o = randf(50);
    double *ref = malloc((size_t)(rows * cols) * sizeof *ref);
    be cpu;
    int kind, inter;

    ASSERT_OK(open_cpu(&cpu, 0));
    for (kind = 0; kind < 2; kind++) {
        for (i = 0; i < rows; i++) {
            double mean = 0, var = 0;
            for (j = 0; j < cols; j++)
                mean += kind ? x[i * cols + j] / (double)cols : 0;
            for (j = 0; j < cols; j++)
                var += pow(x[i * cols + j] - mean, 2) / (double)cols;
            for (j = 0; j < cols; j++)
                ref[i * cols + j] = (x[i * cols + j] - mean) / sqrt(var + 1e-5) * w[j] + (kind ? b[j] : 0);
        }
        ASSERT_OK(cpu.vt->norm(cpu.ctx, (ckpt_norm_kind)kind, rows, cols, x, w, kind ? b : NULL, 1e-5, y));
        ASSERT_TRUE(max_err(y, ref, rows * cols) < 1e-6);
    }
    for (inter = 0; inter < 2; inter++) {
        int64_t t, h, p;
        for (i = 0; i < T * heads * d; i++)
            r0[i] = r[i];
        ASSERT_OK(cpu.vt->rope(cpu.ctx, T, heads, d, rd, r, cs, sn, inter));
        for (t = 0; t < T; t++)
            for (h = 0; h < heads; h++)
                for (p = 0; p < rd / 2; p++) {
                    const float *in = r0 + (t * heads + h) * d;
                    const float *out = r + (t * heads + h) * d;
                    int64_t a = inter ? 2 * p : p, c = inter ? 2 * p + 1 : p + rd / 2;
                    double cc = cs[t * rd / 2 + p], ss = sn[t * rd / 2 + p];
                    ASSERT_TRUE(fabs(out[a] - (in[a] * cc - in[c] * ss)) < 1e-6);
                    ASSERT_TRUE(fabs(out[c] - (in[c] * cc + in[a] * ss)) < 1e-6);
                }
        for (t = 0; t < T * heads; t++)
            for (p = rd; p < d; p++)
                ASSERT_TRUE(r[t * d + p] == r0[t * d + p]);
    }
    for (kind = 0; kind <= CKPT_ACT_GEGLU_TANH; kind++) {
        int gated = kind == CKPT_ACT_SWIGLU || kind == CKPT_ACT_GEGLU_TANH;
        ASSERT_OK(cpu.vt->act(cpu.ctx, (ckpt_act_kind)kind, 50, g, gated ? u : NULL, o));
        for (i = 0; i < 50; i++) {
            double z = g[i], e = kind == CKPT_ACT_SWIGLU ? z / (1 + exp(-z)) * u[i]
                                 : kind == CKPT_ACT_GELU  ? 0.5 * z * (1 + erf(z / sqrt(2)))
                                 : kind == CKPT_ACT_GELU_TANH || kind == CKPT_ACT_GEGLU_TANH
                                     ? 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)))
                                 : kind == CKPT_ACT_RELU ? fmax(z, 0)
                                                         : z / (1 + exp(-z));
            if (kind == CKPT_ACT_GEGLU_TANH)
                e *= u[i];
            ASSERT_TRUE(fabs(o[i] - e) < 1e-6);
        }
    }
    ASSERT_FAILS(CKPT_EINVALID, cpu.vt->act(cpu.ctx, CKPT_ACT_SWIGLU, 50, g, NULL, o));
    ASSERT_FAILS(CKPT_EINVALID, cpu.vt->act(cpu.ctx, CKPT_ACT_GEGLU_TANH, 50, g, NULL, o));
    ASSERT_FAILS(CKPT_EINVALID, cpu.vt->act(cpu.ctx, (ckpt_act_kind)(CKPT_ACT_GEGLU_TANH + 1), 50, g, u, o));
    ASSERT_FAILS(CKPT_EINVALID, cpu.vt->rope(cpu.ctx, T, heads, d, 12, r, cs, sn, 0));
    free(x), free(w), free(b), free(y), free(r), free(r0), free(cs), free(sn), free(g), free(u), free(o), free(ref);
    ckpt_backend_close(cpu.b);
}

CKPT_TEST(test_backend_cpu_compare)
{
    int64_t n = 200000, i;
    float *a = randf(n), *b = malloc((size_t)n * sizeof *b);
    double sa = 0, sd = 0, dot = 0, mx = 0;
    ckpt_backend_compare_stats s;
    be cpu;

    ASSERT_OK(open_cpu(&cpu, 0));
    for (i = 0; i < n; i++) {
        b[i] = a[i] + (float)(1e-3 * uniform());
        sa += (double)a[i] * a[i];
        sd += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        dot += (double)a[i] * b[i];
        mx = fmax(mx, fabs((double)a[i] - b[i]));
    }
    b[17] = NAN;
    a[99] = INFINITY;
    ASSERT_OK(cpu.vt->compare(cpu.ctx, n, a, b, &s));
    ASSERT_EQ_INT(s.nonfinite_a, 1);
    ASSERT_EQ_INT(s.nonfinite_b, 1);
    ASSERT_TRUE(fabs(s.sum_sq_a - (sa - (double)a[17] * a[17] - 0)) / sa < 1e-3);
    ASSERT_TRUE(s.max_abs_diff <= mx && s.max_abs_diff > 0.9 * mx);
    ASSERT_TRUE(s.sum_sq_diff > 0 && s.sum_sq_diff <= sd);
    ASSERT_TRUE(s.dot > 0 && fabs(s.dot - dot) / dot < 1e-3);
    free(a), free(b);
    ckpt_backend_close(cpu.b);
}

/* The same results, bit for bit, with 1 thread and with 3. */
CKPT_TEST(test_backend_cpu_threads)
{
    int64_t m = 37, n = 211, k = 333, T = 41, H = 8, KV = 2, D = 32;
    float *x = randf(m * k), *w = randf(n * k), *y1 = malloc((size_t)(m * n) * 4), *y3 = malloc((size_t)(m * n) * 4);
    float *q = randf(T * H * D), *kk = randf(T * KV * D), *v = randf(T * KV * D);
    float *o1 = malloc((size_t)(T * H * D) * 4), *o3 = malloc((size_t)(T * H * D) * 4);
    ckpt_backend_compare_stats s1, s3;
    be one, three;

    ASSERT_OK(open_cpu(&one, 1));
    ASSERT_OK(open_cpu(&three, 3));
    ASSERT_OK(one.vt->linear(one.ctx, &(ckpt_backend_linear){ m, n, k, x, w, CKPT_DTYPE_F32, NULL, y1, 0 }));
    ASSERT_OK(three.vt->linear(three.ctx, &(ckpt_backend_linear){ m, n, k, x, w, CKPT_DTYPE_F32, NULL, y3, 0 }));
    ASSERT_TRUE(memcmp(y1, y3, (size_t)(m * n) * 4) == 0);
    ASSERT_OK(one.vt->attention(one.ctx, &(ckpt_backend_attention){ T, H, KV, D, q, kk, v, o1, 0.2, 1, CKPT_DTYPE_F32, 0 }));
    ASSERT_OK(three.vt->attention(three.ctx,
                                  &(ckpt_backend_attention){ T, H, KV, D, q, kk, v, o3, 0.2, 1, CKPT_DTYPE_F32, 0 }));
    ASSERT_TRUE(memcmp(o1, o3, (size_t)(T * H * D) * 4) == 0);
    ASSERT_OK(one.vt->compare(one.ctx, m * n, y1, x, &s1));
    ASSERT_OK(three.vt->compare(three.ctx, m * n, y1, x, &s3));
    ASSERT_TRUE(memcmp(&s1, &s3, sizeof s1) == 0);
    ASSERT_EQ_STR(ckpt_backend_description(one.b), "CPU, 1 thread");
    free(x), free(w), free(y1), free(y3), free(q), free(kk), free(v), free(o1), free(o3);
    ckpt_backend_close(one.b);
    ckpt_backend_close(three.b);
}

CKPT_TEST(test_backend_open_errors)
{
    ckpt_backend *b = (ckpt_backend *)1;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_backend_open(&b, "../x", 0));
    ASSERT_TRUE(b == NULL);
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_backend_open(&b, "nosuchdevice", 0));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_BACKEND);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "libckpt_nosuchdevice.so") != NULL);
    ckpt_backend_close(NULL);
}
