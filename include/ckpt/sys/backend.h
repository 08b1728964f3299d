/* For compute-backend implementers: the operations `ckptconv verify` runs a decoder layer
 * with, behind one vtable (ggml's backend interface is the model). The CPU backend is built
 * into the library; the CUDA backend (kernels/) is a loadable module, so that the library
 * and the CLI never link against the CUDA runtime and run on machines without it.
 *
 * Conventions for every operation:
 *  - pointers marked "device" come from the backend's own `alloc`; shapes are row-major and
 *    dense; activations are float32;
 *  - operations run in order (a backend may queue them, as CUDA does on one stream); `download`
 *    waits for everything queued before it;
 *  - every operation returns 0, or a negative ckpt_error_code after reporting the failure with
 *    host->error (naming the operation, the sizes and the backend's own reason);
 *  - results must not depend on how many threads or blocks a backend uses. */
#ifndef CKPT_SYS_BACKEND_H
#define CKPT_SYS_BACKEND_H

#include "../verify.h"

CKPT_BEGIN_DECL

/* Bumped whenever this header changes the vtable or the structures it passes. */
#define CKPT_BACKEND_ABI_VERSION 2

/* What the library gives a backend. */
typedef struct ckpt_backend_host {
    unsigned abi_version; /* CKPT_BACKEND_ABI_VERSION */
    /* Record a failure and return `code` (ckpt_error_setc: klass is a ckpt_error_class). */
    int (*error)(int code, int klass, const char *fmt, ...) CKPT_FORMAT_PRINTF(3, 4);
} ckpt_backend_host;

/* y[m][n] = sum_k x[m][k] * w[n][k] + bias[n], or y += that with `accumulate`.
 * Weights are stored as checkpoints store linear layers ([out, in], one row per output).
 * A backend may round x to w_dtype before multiplying when w_dtype is bfloat16 or float16
 * (tensor cores take both operands in one type); products are accumulated in float32 or
 * better. float32 weights are multiplied in float32 (no TF32). */
typedef struct ckpt_backend_linear {
    int64_t m, n, k;
    const float *x;    /* device, m x k */
    const void *w;     /* device, n x k in w_dtype: float32, bfloat16 or float16 */
    ckpt_dtype w_dtype;
    const float *bias; /* device, n; NULL for none */
    float *y;          /* device, m x n */
    int accumulate;
} ckpt_backend_linear;

/* Causal (or full) softmax attention with grouped KV heads: query head h uses KV head
 * h / (heads / kv_heads). out = softmax(scale * q k^T) v per head, softmax in float32.
 * A causal window W > 0 leaves query t the keys j with t - W < j <= t (W >= tokens: causal).
 * q and out are tokens x heads x head_dim, k and v tokens x kv_heads x head_dim. With
 * `compute` bfloat16 or float16 a backend may round q, k, v and the probabilities to that
 * type for the products (as flash attention does); with float32 everything stays float32. */
typedef struct ckpt_backend_attention {
    int64_t tokens, heads, kv_heads, head_dim;
    const float *q, *k, *v; /* device */
    float *out;             /* device */
    double scale;
    int causal;
    ckpt_dtype compute;
    int64_t window; /* causal only; 0: none */
} ckpt_backend_attention;

/* Sums over a pair of equally long float32 arrays a (the reference) and b, in double. */
typedef struct ckpt_backend_compare_stats {
    double sum_sq_a, sum_sq_b, sum_sq_diff, dot; /* over elements finite in both */
    double max_abs_diff;                         /* over elements finite in both */
    uint64_t nonfinite_a, nonfinite_b;           /* NaN or Inf elements */
} ckpt_backend_compare_stats;

typedef struct ckpt_backend_vtable {
    unsigned abi_version; /* CKPT_BACKEND_ABI_VERSION */
    const char *name;     /* "cpu", "cuda" */

    /* A context on device `device` (the CPU backend: `device` is the thread count, 0 for
     * OpenMP's default). `description` receives one line for people ("NVIDIA H100 80GB HBM3,
     * sm_90, 79.1 GiB"). CKPT_ENOTFOUND when no such device exists (no GPU, no driver). */
    int (*init)(void **ctx, const ckpt_backend_host *host, int device, char *description,
                size_t description_size);
    void (*free)(void *ctx);

    int (*alloc)(void *ctx, size_t bytes, void **out);
    void (*release)(void *ctx, void *p); /* NULL-safe */
    int (*upload)(void *ctx, void *dst, const void *src, size_t bytes);   /* host -> device */
    int (*download)(void *ctx, void *dst, const void *src, size_t bytes); /* device -> host, waits */
    /* Bytes of device memory free and in total (optional: NULL when unknown). */
    int (*memory)(void *ctx, size_t *free_bytes, size_t *total_bytes);
    /* Wait for every queued operation (optional: NULL for a backend that runs each operation
     * as it is called). Used to time work apart from reading weights. */
    int (*synchronize)(void *ctx);

    int (*linear)(void *ctx, const ckpt_backend_linear *op);
    /* Normalise each of `rows` rows of `cols` values; bias only for CKPT_NORM_LAYER (may be
     * NULL). weight and bias are float32, device. x and y may be the same buffer. */
    int (*norm)(void *ctx, ckpt_norm_kind kind, int64_t rows, int64_t cols, const float *x, const float *weight,
                const float *bias, double eps, float *y);
    /* Rotary embedding in place on x (tokens x heads x head_dim): the first rotary_dim values
     * of each head are rotated by the angles whose cosines and sines are given per token
     * (cos, sin: device, tokens x rotary_dim/2). Rotate-half pairs value i with i + rotary_dim/2
     * (HF, Megatron's default); interleaved pairs 2i with 2i + 1. */
    int (*rope)(void *ctx, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, float *x,
                const float *cos, const float *sin, int interleaved);
    int (*attention)(void *ctx, const ckpt_backend_attention *op);
    /* out[i] = act(gate[i]) (* up[i] for the gated kinds CKPT_ACT_SWIGLU and
     * CKPT_ACT_GEGLU_TANH; up is NULL otherwise). out may be gate. */
    int (*act)(void *ctx, ckpt_act_kind kind, int64_t n, const float *gate, const float *up, float *out);
    /* out[i] = a[i] + b[i]; out may be a or b. */
    int (*add)(void *ctx, int64_t n, const float *a, const float *b, float *out);
    /* Statistics of a against b (device arrays of n floats), into host memory; waits. */
    int (*compare)(void *ctx, int64_t n, const float *a, const float *b, ckpt_backend_compare_stats *out);
} ckpt_backend_vtable;

/* The symbol a loadable backend module exports: its vtable (static, never freed). */
#define CKPT_BACKEND_ENTRY "ckpt_backend_entry"
typedef const ckpt_backend_vtable *(*ckpt_backend_entry_fn)(void);

/* An opened backend (ckpt_backend_open, ckpt/verify.h): its vtable and context. */
CKPT_EXTERN(const ckpt_backend_vtable *) ckpt_backend_vt(const ckpt_backend *b);
CKPT_EXTERN(void *) ckpt_backend_ctx(const ckpt_backend *b);

CKPT_END_DECL

#endif
