/* compare: statistics of a (the reference) against b, in double, deterministic.
 *
 * Two passes, no atomics: pass 1 runs a number of blocks that depends on n alone; each
 * thread sums a fixed grid-strided subset of the elements in index order, then the block
 * combines its threads' sums in a fixed tree and writes one partial. Pass 2, one block,
 * combines the partials the same way. The same n and data give the same bits on every run
 * and every device. Sums cover the elements finite in both arrays; NaN and Inf are counted
 * per side. */
#include "cuda_private.h"

#include <math.h>
#include <string.h>

namespace {

constexpr int kThreads = 256;   /* a power of two: the tree below halves it */
constexpr int kMaxBlocks = 1024;

struct acc {
    double sum_sq_a, sum_sq_b, sum_sq_diff, dot, max_abs_diff;
    unsigned long long nonfinite_a, nonfinite_b;
};

__device__ __forceinline__ void acc_zero(acc &s)
{
    s.sum_sq_a = s.sum_sq_b = s.sum_sq_diff = s.dot = s.max_abs_diff = 0.0;
    s.nonfinite_a = s.nonfinite_b = 0;
}

__device__ __forceinline__ void acc_add(acc &s, const acc &o)
{
    s.sum_sq_a += o.sum_sq_a;
    s.sum_sq_b += o.sum_sq_b;
    s.sum_sq_diff += o.sum_sq_diff;
    s.dot += o.dot;
    s.max_abs_diff = fmax(s.max_abs_diff, o.max_abs_diff);
    s.nonfinite_a += o.nonfinite_a;
    s.nonfinite_b += o.nonfinite_b;
}

/* Combine the block's kThreads values of `mine` in a fixed tree; thread 0 gets the sum. */
__device__ void block_reduce(acc &mine, acc *sh)
{
    sh[threadIdx.x] = mine;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            acc_add(sh[threadIdx.x], sh[threadIdx.x + half]);
        __syncthreads();
    }
    mine = sh[0];
}

__global__ void __launch_bounds__(kThreads) compare_pass1(int64_t n, const float *__restrict__ a,
                                                          const float *__restrict__ b, acc *__restrict__ partials)
{
    __shared__ acc sh[kThreads];
    acc s;
    acc_zero(s);
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n; i += (int64_t)gridDim.x * kThreads) {
        const float x = a[i], y = b[i];
        const bool fx = isfinite(x), fy = isfinite(y);
        s.nonfinite_a += !fx;
        s.nonfinite_b += !fy;
        if (fx && fy) {
            const double dx = x, dy = y, d = dx - dy;
            s.sum_sq_a += dx * dx;
            s.sum_sq_b += dy * dy;
            s.sum_sq_diff += d * d;
            s.dot += dx * dy;
            s.max_abs_diff = fmax(s.max_abs_diff, fabs(d));
        }
    }
    block_reduce(s, sh);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kThreads) compare_pass2(int blocks, const acc *__restrict__ partials,
                                                          ckpt_backend_compare_stats *__restrict__ out)
{
    __shared__ acc sh[kThreads];
    acc s;
    acc_zero(s);
    for (int i = threadIdx.x; i < blocks; i += kThreads)
        acc_add(s, partials[i]);
    block_reduce(s, sh);
    if (threadIdx.x == 0) {
        out->sum_sq_a = s.sum_sq_a;
        out->sum_sq_b = s.sum_sq_b;
        out->sum_sq_diff = s.sum_sq_diff;
        out->dot = s.dot;
        out->max_abs_diff = s.max_abs_diff;
        out->nonfinite_a = s.nonfinite_a;
        out->nonfinite_b = s.nonfinite_b;
    }
}

} // namespace

int ckpt_cuda_compare(void *ctx, int64_t n, const float *a, const float *b, ckpt_backend_compare_stats *out)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    ckpt_backend_compare_stats *dev_out;
    acc *partials;
    void *scratch;
    int64_t blocks64;
    int blocks, rc;
    size_t out_offset;

    memset(out, 0, sizeof *out);
    if (n < 0)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "CUDA compare (n=%lld): negative size", (long long)n);
    if (n == 0)
        return 0;
    if (!a || !b)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "CUDA compare (n=%lld): missing a or b", (long long)n);
    if ((rc = ckpt_cuda_enter(c, "compare")) < 0)
        return rc;
    blocks64 = (n + kThreads - 1) / kThreads;
    blocks = blocks64 > kMaxBlocks ? kMaxBlocks : (int)blocks64; /* a function of n only */
    out_offset = ((size_t)blocks * sizeof(acc) + 255) / 256 * 256;
    if ((rc = ckpt_cuda_scratch(c, out_offset + sizeof *dev_out, &scratch, "compare")) < 0)
        return rc;
    partials = (acc *)scratch;
    dev_out = (ckpt_backend_compare_stats *)((char *)scratch + out_offset);

    compare_pass1<<<blocks, kThreads, 0, c->stream>>>(n, a, b, partials);
    if ((rc = ckpt_cuda_check(c, cudaGetLastError(), "CUDA compare (n=%lld): kernel launch", (long long)n)) < 0)
        return rc;
    compare_pass2<<<1, kThreads, 0, c->stream>>>(blocks, partials, dev_out);
    if ((rc = ckpt_cuda_check(c, cudaGetLastError(), "CUDA compare (n=%lld): kernel launch", (long long)n)) < 0 ||
        (rc = ckpt_cuda_check(c, cudaMemcpyAsync(out, dev_out, sizeof *out, cudaMemcpyDeviceToHost, c->stream),
                              "CUDA compare (n=%lld): copying the result", (long long)n)) < 0)
        return rc;
    rc = ckpt_cuda_check(c, cudaStreamSynchronize(c->stream), "CUDA compare (n=%lld): waiting for the result",
                         (long long)n);
    if (rc < 0)
        memset(out, 0, sizeof *out);
    return rc;
}
