/* linear: y[m][n] = sum_k x[m][k] * w[n][k] (+ bias[n]), or y += that, through cuBLAS.
 *
 * Row-major to cuBLAS's column-major. A row-major r x c matrix with leading dimension c is,
 * byte for byte, the column-major c x r matrix (its transpose) with the same leading
 * dimension. So:
 *   x (row-major m x k)  is column-major X^T, k x m, ld k;
 *   w (row-major n x k)  is column-major W^T, k x n, ld k;
 *   y (row-major m x n)  is column-major Y^T, n x m, ld n.
 * We want Y = X W^T, i.e. Y^T = W X^T: an (n x k)(k x m) product. In cuBLAS terms
 *   C = op(A) op(B), C = Y^T (M = n, N = m, ldc = n),
 *   A = w with op T (the stored k x n matrix transposed gives W, n x k; lda = k),
 *   B = x with op N (the stored k x m matrix is X^T already; ldb = k),
 *   K = k.
 * That is cublasGemmEx(T, N, n, m, k, w, k, x, k, y, n): the "TN" layout, which is what
 * tensor-core kernels prefer.
 *
 * Precision. float32 weights: A, B, C float32 with CUBLAS_COMPUTE_32F_PEDANTIC, which
 * rules out TF32 and any other reduced-precision stage. bfloat16/float16 weights: x is
 * first rounded to the weight type (round to nearest even, elementwise.cu) into scratch
 * memory, then A, B in that type, C float32, CUBLAS_COMPUTE_32F (tensor cores, float32
 * accumulation). Accumulate: beta = 1 (C is read); otherwise beta = 0 (C is never read, so
 * garbage or NaN in y cannot leak in). Bias: added by a kernel after the GEMM. */
#include "cuda_private.h"

#include <limits.h>

namespace {

/* y[i][j] += bias[j]. I is uint32_t when every index fits (64-bit division is slow on a
 * GPU), int64_t otherwise. */
template <typename I>
__global__ void add_bias_kernel(I total, I n, const float *__restrict__ bias, float *__restrict__ y)
{
    for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < total; i += (I)(gridDim.x * blockDim.x))
        y[i] += bias[i % n];
}

const char *dtype_str(ckpt_dtype t)
{
    switch (t) {
    case CKPT_DTYPE_F32: return "float32";
    case CKPT_DTYPE_BF16: return "bfloat16";
    case CKPT_DTYPE_F16: return "float16";
    default: return "unsupported dtype";
    }
}

} // namespace

int ckpt_cuda_linear(void *ctx, const ckpt_backend_linear *op)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    const int64_t m = op->m, n = op->n, k = op->k;
    const char *wt = dtype_str(op->w_dtype);
    const float one = 1.0f, zero = 0.0f;
    const float *beta = op->accumulate ? &one : &zero;
    cudaDataType_t ab_type;
    cublasComputeType_t compute;
    const void *b_ptr = op->x;
    int rc;

#define LINEAR_FMT "CUDA linear (m=%lld n=%lld k=%lld, %s weights%s%s)"
#define LINEAR_ARGS (long long)m, (long long)n, (long long)k, wt, op->bias ? ", bias" : "", \
                    op->accumulate ? ", accumulate" : ""

    if (m < 0 || n < 0 || k < 0)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, LINEAR_FMT ": negative size", LINEAR_ARGS);
    switch (op->w_dtype) {
    case CKPT_DTYPE_F32: ab_type = CUDA_R_32F; compute = CUBLAS_COMPUTE_32F_PEDANTIC; break;
    case CKPT_DTYPE_BF16: ab_type = CUDA_R_16BF; compute = CUBLAS_COMPUTE_32F; break;
    case CKPT_DTYPE_F16: ab_type = CUDA_R_16F; compute = CUBLAS_COMPUTE_32F; break;
    default:
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED,
                              LINEAR_FMT ": weight dtype %d (float32, bfloat16 or float16 only)", LINEAR_ARGS,
                              (int)op->w_dtype);
    }
    /* cuBLAS takes int sizes and leading dimensions (k and n are also lda/ldb and ldc). */
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED, LINEAR_FMT ": sizes above %d are not supported",
                              LINEAR_ARGS, INT_MAX);
    if (m == 0 || n == 0)
        return 0;
    if (!op->y || (k > 0 && (!op->x || !op->w)))
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, LINEAR_FMT ": missing x, w or y", LINEAR_ARGS);
    if ((rc = ckpt_cuda_enter(c, "linear")) < 0)
        return rc;

    if (k == 0) {
        /* An empty sum: y = 0 (+ bias), or y unchanged (+ bias). */
        if (!op->accumulate &&
            (rc = ckpt_cuda_check(c, cudaMemsetAsync(op->y, 0, (size_t)m * (size_t)n * sizeof(float), c->stream),
                                  LINEAR_FMT ": clearing y", LINEAR_ARGS)) < 0)
            return rc;
    } else {
        if (op->w_dtype != CKPT_DTYPE_F32) {
            void *x16;
            if ((rc = ckpt_cuda_scratch(c, (size_t)m * (size_t)k * 2, &x16, "linear")) < 0 ||
                (rc = ckpt_cuda_cast_f32(c, op->w_dtype, op->x, x16, m * k, "linear")) < 0)
                return rc;
            b_ptr = x16;
        }
        rc = ckpt_cuda_check_blas(c,
                                  cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one,
                                               op->w, ab_type, (int)k, b_ptr, ab_type, (int)k, beta, op->y,
                                               CUDA_R_32F, (int)n, compute, CUBLAS_GEMM_DEFAULT),
                                  LINEAR_FMT ": cublasGemmEx", LINEAR_ARGS);
        if (rc < 0)
            return rc;
    }
    if (op->bias) {
        const unsigned blocks = ckpt_cuda_blocks(c, m * n, 256);
        if (m * n + (int64_t)blocks * 256 <= (int64_t)UINT32_MAX)
            add_bias_kernel<uint32_t><<<blocks, 256, 0, c->stream>>>((uint32_t)(m * n), (uint32_t)n, op->bias, op->y);
        else
            add_bias_kernel<int64_t><<<blocks, 256, 0, c->stream>>>(m * n, n, op->bias, op->y);
        if ((rc = ckpt_cuda_check(c, cudaGetLastError(), LINEAR_FMT ": bias kernel launch", LINEAR_ARGS)) < 0)
            return rc;
    }
    return 0;
#undef LINEAR_FMT
#undef LINEAR_ARGS
}
