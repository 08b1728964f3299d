/* The CUDA backend's shared state and helpers (the files of kernels/ only).
 *
 * One context per `init`: a device ordinal, one stream every operation is queued on, a
 * cuBLAS handle bound to that stream, and one scratch buffer that grows on demand (bf16
 * copies of activations for tensor-core GEMMs and attention, partial sums of `compare`).
 * Operations run in stream order, so one scratch buffer serves every operation: the next
 * operation's kernels cannot start before the previous one's have finished with it.
 *
 * Errors: every CUDA runtime call, kernel launch and cuBLAS call is checked; a failure is
 * reported through host->error (class CKPT_ERRCLASS_BACKEND) with the operation, its sizes
 * and CUDA's own words, and the hook returns the negative code. Nothing here prints or exits.
 *
 * Only ckpt_backend_entry leaves the module (-fvisibility=hidden and kernels/exports.map);
 * the ckpt_cuda_* functions below are shared between the module's files and nothing else. */
#ifndef CKPT_KERNELS_CUDA_PRIVATE_H
#define CKPT_KERNELS_CUDA_PRIVATE_H

#include <ckpt/dtype.h>
#include <ckpt/error.h>
#include <ckpt/sys/backend.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>

#define CKPT_CUDA_PRINTF(a, b) __attribute__((format(printf, a, b)))

typedef struct ckpt_cuda {
    const ckpt_backend_host *host;
    int device;           /* ordinal, made current at the start of every hook */
    int sm_count;         /* multiprocessors, for grid-stride launch sizes */
    size_t smem_optin;    /* most dynamic shared memory one block may ask for */
    cudaStream_t stream;  /* every operation of this context runs on it, in order */
    cublasHandle_t blas;  /* bound to `stream` */
    void *scratch;        /* device, `scratch_size` bytes, grown by ckpt_cuda_scratch */
    size_t scratch_size;
} ckpt_cuda;

/* Report a failure through the host (class CKPT_ERRCLASS_BACKEND) and return `code`. */
int ckpt_cuda_fail(const ckpt_backend_host *host, int code, const char *fmt, ...) CKPT_CUDA_PRINTF(3, 4);

/* 0 when `err` is cudaSuccess; otherwise report "<what>: <CUDA error name>: <CUDA's
 * description>" and return CKPT_ENOMEM for an allocation failure, CKPT_ERROR otherwise. */
int ckpt_cuda_check(const ckpt_cuda *c, cudaError_t err, const char *fmt, ...) CKPT_CUDA_PRINTF(3, 4);

/* Likewise for a cuBLAS status (cublasGetStatusString). */
int ckpt_cuda_check_blas(const ckpt_cuda *c, cublasStatus_t st, const char *fmt, ...) CKPT_CUDA_PRINTF(3, 4);

/* Make the context's device current (the calling thread may have used another). */
int ckpt_cuda_enter(const ckpt_cuda *c, const char *op);

/* A device buffer of at least `bytes` for the current operation, valid until the next
 * call. Growing it waits for the stream before freeing the old buffer. */
int ckpt_cuda_scratch(ckpt_cuda *c, size_t bytes, void **out, const char *op);

/* Blocks for a grid-stride loop over n items with `threads` threads per block: enough to
 * fill the device, never more than the items need (at least 1). */
unsigned ckpt_cuda_blocks(const ckpt_cuda *c, int64_t n, int threads);

/* Round n float32 values to bfloat16 or float16 (round to nearest even, as torch's
 * Tensor.to does) into dst, on the context's stream. `op` names the caller in errors. */
int ckpt_cuda_cast_f32(ckpt_cuda *c, ckpt_dtype to, const float *src, void *dst, int64_t n, const char *op);

/* The hooks, one file each (see backend.h for their contracts). */
int ckpt_cuda_linear(void *ctx, const ckpt_backend_linear *op);
int ckpt_cuda_attention(void *ctx, const ckpt_backend_attention *op);
int ckpt_cuda_norm(void *ctx, ckpt_norm_kind kind, int64_t rows, int64_t cols, const float *x, const float *weight,
                   const float *bias, double eps, float *y);
int ckpt_cuda_rope(void *ctx, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, float *x,
                   const float *cos, const float *sin, int interleaved);
int ckpt_cuda_act(void *ctx, ckpt_act_kind kind, int64_t n, const float *gate, const float *up, float *out);
int ckpt_cuda_add(void *ctx, int64_t n, const float *a, const float *b, float *out);
int ckpt_cuda_compare(void *ctx, int64_t n, const float *a, const float *b, ckpt_backend_compare_stats *out);

/* The tensor-core attention path (attention_mma.cu), called by ckpt_cuda_attention once the
 * operation is validated: k16 and v16 are k and v already rounded to `compute` (bfloat16
 * or float16), laid out as k and v are; `what` names the operation and its sizes in errors. */
int ckpt_cuda_attention_mma(ckpt_cuda *c, const ckpt_backend_attention *op, const void *k16, const void *v16,
                            const char *what);

/* Largest head_dim any path supports, and whether a head_dim is one of them. */
#define CKPT_CUDA_MAX_HEAD_DIM 256
int ckpt_cuda_head_dim_supported(int64_t head_dim);

#endif
