/* Memory-bound operations: the float32 -> bfloat16/float16 cast the tensor-core paths use,
 * norm (RMSNorm, LayerNorm), rope, act and add.
 *
 * Elementwise kernels are grid-stride loops with 64-bit indices, so any n works with a
 * launch sized to the device. norm uses one block per row and reduces in double in a fixed
 * order (thread-strided partial sums, then a fixed tree), so its result depends on nothing
 * but the input. Arithmetic that torch does in plain float32 is written with _rn
 * intrinsics where a fused multiply-add would change the rounding (rope). */
#include "cuda_private.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <math.h>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t first_index()
{
    return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ int64_t grid_stride()
{
    return (int64_t)gridDim.x * blockDim.x;
}

/* ---- cast ---------------------------------------------------------------------------- */

__global__ void cast_bf16_kernel(int64_t n, const float *__restrict__ src, __nv_bfloat16 *__restrict__ dst)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void cast_f16_kernel(int64_t n, const float *__restrict__ src, __half *__restrict__ dst)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        dst[i] = __float2half_rn(src[i]);
}

/* Four at a time, for 16-byte aligned sources and 8-byte aligned destinations. */
__global__ void cast_bf16_x4_kernel(int64_t n4, const float4 *__restrict__ src, uint2 *__restrict__ dst)
{
    for (int64_t i = first_index(); i < n4; i += grid_stride()) {
        const float4 f = src[i];
        uint2 o;
        o.x = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(f.x)) |
              ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(f.y)) << 16);
        o.y = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(f.z)) |
              ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(f.w)) << 16);
        dst[i] = o;
    }
}

__global__ void cast_f16_x4_kernel(int64_t n4, const float4 *__restrict__ src, uint2 *__restrict__ dst)
{
    for (int64_t i = first_index(); i < n4; i += grid_stride()) {
        const float4 f = src[i];
        uint2 o;
        o.x = (uint32_t)__half_as_ushort(__float2half_rn(f.x)) | ((uint32_t)__half_as_ushort(__float2half_rn(f.y)) << 16);
        o.y = (uint32_t)__half_as_ushort(__float2half_rn(f.z)) | ((uint32_t)__half_as_ushort(__float2half_rn(f.w)) << 16);
        dst[i] = o;
    }
}

/* ---- norm ----------------------------------------------------------------------------- */

/* The sum of v over the block, in the same order every time; every thread gets it.
 * `sh` holds one value per warp; the trailing barrier lets the caller reuse it at once. */
__device__ double block_sum(double v, double *sh)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off); /* every lane ends with the same sum */
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    double total = 0.0;
    for (int i = 0; i < warps; i++)
        total += sh[i];
    __syncthreads();
    return total;
}

/* One block per row (grid-stride over rows); blockDim.x == kThreads. x and y may alias:
 * each row is read completely before any of it is written. */
template <bool kLayer>
__global__ void __launch_bounds__(kThreads) norm_kernel(int64_t rows, int64_t cols, const float *x, const float *weight,
                                                        const float *bias, double eps, float *y)
{
    __shared__ double sh[kThreads / 32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *xr = x + row * cols;
        float *yr = y + row * cols;
        double mean = 0.0, sq = 0.0;
        if (kLayer) {
            double s = 0.0;
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
                s += xr[j];
            mean = block_sum(s, sh) / (double)cols;
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
                const double d = (double)xr[j] - mean;
                sq += d * d;
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
                sq += (double)xr[j] * (double)xr[j];
        }
        /* LayerNorm: biased variance, as torch; RMSNorm: mean of squares. */
        const double var = block_sum(sq, sh) / (double)cols;
        const float rstd = (float)(1.0 / sqrt(var + eps));
        const float mean_f = (float)mean;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float v = (xr[j] - mean_f) * rstd * weight[j];
            if (kLayer && bias)
                v += bias[j];
            yr[j] = v;
        }
        /* block_sum's last barrier separates this row's reads from the writes above; the
         * next row touches other memory. */
    }
}

/* ---- rope ------------------------------------------------------------------------------ */

/* One thread per rotated pair: pairs = tokens * heads * half, half = rotary_dim / 2.
 * Pair i of a head is (i, i + half) for rotate-half, (2i, 2i + 1) interleaved; both use
 * angle i of the token: a' = a cos - b sin, b' = b cos + a sin. I is uint32_t when every
 * index fits (64-bit division is slow on a GPU), int64_t otherwise. */
template <typename I>
__global__ void rope_kernel(I pairs, I heads, I head_dim, I half, float *x, const float *__restrict__ cos_t,
                            const float *__restrict__ sin_t, int interleaved)
{
    for (I p = (I)first_index(); p < pairs; p += (I)grid_stride()) {
        const I i = p % half;
        const I th = p / half;         /* token * heads + head */
        const I token = th / heads;
        float *hx = x + (int64_t)th * head_dim; /* this head's values */
        const I ia = interleaved ? 2 * i : i;
        const I ib = interleaved ? 2 * i + 1 : i + half;
        const float c = cos_t[(int64_t)token * half + i], s = sin_t[(int64_t)token * half + i];
        const float a = hx[ia], b = hx[ib];
        hx[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
        hx[ib] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    }
}

/* ---- act ---------------------------------------------------------------------------------- */

__device__ __forceinline__ float silu(float g)
{
    return g / (1.0f + expf(-g));
}

template <ckpt_act_kind kKind>
__device__ __forceinline__ float activate(float g)
{
    if (kKind == CKPT_ACT_SWIGLU || kKind == CKPT_ACT_SILU)
        return silu(g);
    /* The gelus in forms without the cancellation of 1 + erf(x) and 1 + tanh(x) for negative
     * x, which would lose all relative accuracy in the tail (the CPU reference is in double):
     * 1 + erf(x / sqrt 2) = erfc(-x / sqrt 2), and (1 + tanh z) / 2 = 1 / (1 + e^(-2z)). */
    if (kKind == CKPT_ACT_GELU)
        return 0.5f * g * erfcf(-g * 0.70710678118654752440f);
    if (kKind == CKPT_ACT_GELU_TANH || kKind == CKPT_ACT_GEGLU_TANH) {
        const float kBeta = 0.79788456080286535588f; /* sqrt(2 / pi) */
        return g / (1.0f + expf(-2.0f * kBeta * (g + 0.044715f * g * g * g)));
    }
    /* relu, NaN kept as torch keeps it */
    return g > 0.0f ? g : (g != g ? g : 0.0f);
}

/* out may be gate (or up): each element is read before it is written, by the same thread. */
template <ckpt_act_kind kKind>
__global__ void act_kernel(int64_t n, const float *gate, const float *up, float *out)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        float v = activate<kKind>(gate[i]);
        if (kKind == CKPT_ACT_SWIGLU || kKind == CKPT_ACT_GEGLU_TANH)
            v *= up[i];
        out[i] = v;
    }
}

__global__ void add_kernel(int64_t n, const float *a, const float *b, float *out)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = a[i] + b[i];
}

/* n * m without overflow, for sizes that are products of two non-negative dimensions. */
bool product_fits(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

} // namespace

/* ---- hooks ------------------------------------------------------------------------------- */

int ckpt_cuda_cast_f32(ckpt_cuda *c, ckpt_dtype to, const float *src, void *dst, int64_t n, const char *op)
{
    const bool x4 = n % 4 == 0 && (uintptr_t)src % 16 == 0 && (uintptr_t)dst % 8 == 0;
    const int64_t items = x4 ? n / 4 : n;
    const unsigned blocks = ckpt_cuda_blocks(c, items, kThreads);

    if (n <= 0)
        return 0;
    if (to == CKPT_DTYPE_BF16) {
        if (x4)
            cast_bf16_x4_kernel<<<blocks, kThreads, 0, c->stream>>>(items, (const float4 *)src, (uint2 *)dst);
        else
            cast_bf16_kernel<<<blocks, kThreads, 0, c->stream>>>(n, src, (__nv_bfloat16 *)dst);
    } else if (to == CKPT_DTYPE_F16) {
        if (x4)
            cast_f16_x4_kernel<<<blocks, kThreads, 0, c->stream>>>(items, (const float4 *)src, (uint2 *)dst);
        else
            cast_f16_kernel<<<blocks, kThreads, 0, c->stream>>>(n, src, (__half *)dst);
    } else {
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED, "CUDA %s: cannot round to dtype %d", op, (int)to);
    }
    return ckpt_cuda_check(c, cudaGetLastError(), "CUDA %s: rounding %lld values to %s: kernel launch", op,
                           (long long)n, to == CKPT_DTYPE_BF16 ? "bfloat16" : "float16");
}

int ckpt_cuda_norm(void *ctx, ckpt_norm_kind kind, int64_t rows, int64_t cols, const float *x, const float *weight,
                   const float *bias, double eps, float *y)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    const char *name = kind == CKPT_NORM_RMS ? "rms" : "layer";
    int64_t total;
    unsigned blocks;
    int rc;

    if (kind != CKPT_NORM_RMS && kind != CKPT_NORM_LAYER)
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED, "CUDA norm: unknown kind %d", (int)kind);
    if (rows < 0 || cols < 0 || !product_fits(rows, cols, &total))
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "CUDA norm (%s, rows=%lld cols=%lld): bad size", name,
                              (long long)rows, (long long)cols);
    if (total == 0)
        return 0;
    if (!x || !weight || !y)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "CUDA norm (%s, rows=%lld cols=%lld): missing x, weight or y",
                              name, (long long)rows, (long long)cols);
    if ((rc = ckpt_cuda_enter(c, "norm")) < 0)
        return rc;
    blocks = rows > (int64_t)c->sm_count * 64 ? (unsigned)c->sm_count * 64 : (unsigned)rows;
    if (kind == CKPT_NORM_LAYER)
        norm_kernel<true><<<blocks, kThreads, 0, c->stream>>>(rows, cols, x, weight, bias, eps, y);
    else
        norm_kernel<false><<<blocks, kThreads, 0, c->stream>>>(rows, cols, x, weight, NULL, eps, y);
    return ckpt_cuda_check(c, cudaGetLastError(), "CUDA norm (%s, rows=%lld cols=%lld): kernel launch", name,
                           (long long)rows, (long long)cols);
}

int ckpt_cuda_rope(void *ctx, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, float *x,
                   const float *cos, const float *sin, int interleaved)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    int64_t th, elems, pairs;
    int rc;

#define ROPE_FMT "CUDA rope (tokens=%lld heads=%lld head_dim=%lld rotary_dim=%lld, %s)"
#define ROPE_ARGS (long long)tokens, (long long)heads, (long long)head_dim, (long long)rotary_dim, \
                  interleaved ? "interleaved" : "rotate-half"
    if (tokens < 0 || heads < 0 || head_dim < 0 || rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, ROPE_FMT ": rotary_dim must be even and at most head_dim",
                              ROPE_ARGS);
    if (!product_fits(tokens, heads, &th) || !product_fits(th, head_dim, &elems) ||
        !product_fits(th, rotary_dim / 2, &pairs))
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, ROPE_FMT ": size overflows", ROPE_ARGS);
    if (pairs == 0)
        return 0;
    if (!x || !cos || !sin)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, ROPE_FMT ": missing x, cos or sin", ROPE_ARGS);
    if ((rc = ckpt_cuda_enter(c, "rope")) < 0)
        return rc;
    if (elems + (int64_t)ckpt_cuda_blocks(c, pairs, kThreads) * kThreads <= (int64_t)UINT32_MAX)
        rope_kernel<uint32_t><<<ckpt_cuda_blocks(c, pairs, kThreads), kThreads, 0, c->stream>>>(
            (uint32_t)pairs, (uint32_t)heads, (uint32_t)head_dim, (uint32_t)(rotary_dim / 2), x, cos, sin, interleaved);
    else
        rope_kernel<int64_t><<<ckpt_cuda_blocks(c, pairs, kThreads), kThreads, 0, c->stream>>>(
            pairs, heads, head_dim, rotary_dim / 2, x, cos, sin, interleaved);
    return ckpt_cuda_check(c, cudaGetLastError(), ROPE_FMT ": kernel launch", ROPE_ARGS);
#undef ROPE_FMT
#undef ROPE_ARGS
}

int ckpt_cuda_act(void *ctx, ckpt_act_kind kind, int64_t n, const float *gate, const float *up, float *out)
{
    static const char *const names[] = {"swiglu", "gelu", "gelu_tanh", "relu", "silu", "geglu_tanh"};
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    const char *name = (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
    unsigned blocks;
    int rc;

    if ((unsigned)kind >= sizeof names / sizeof names[0])
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED, "CUDA act: unknown kind %d", (int)kind);
    if (n < 0)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "CUDA act (%s, n=%lld): negative size", name, (long long)n);
    if (n == 0)
        return 0;
    if (!gate || !out || ((kind == CKPT_ACT_SWIGLU || kind == CKPT_ACT_GEGLU_TANH) && !up))
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "CUDA act (%s, n=%lld): missing gate, up or out", name,
                              (long long)n);
    if ((rc = ckpt_cuda_enter(c, "act")) < 0)
        return rc;
    blocks = ckpt_cuda_blocks(c, n, kThreads);
    switch (kind) {
    case CKPT_ACT_SWIGLU: act_kernel<CKPT_ACT_SWIGLU><<<blocks, kThreads, 0, c->stream>>>(n, gate, up, out); break;
    case CKPT_ACT_GELU: act_kernel<CKPT_ACT_GELU><<<blocks, kThreads, 0, c->stream>>>(n, gate, up, out); break;
    case CKPT_ACT_GELU_TANH:
        act_kernel<CKPT_ACT_GELU_TANH><<<blocks, kThreads, 0, c->stream>>>(n, gate, up, out);
        break;
    case CKPT_ACT_RELU: act_kernel<CKPT_ACT_RELU><<<blocks, kThreads, 0, c->stream>>>(n, gate, up, out); break;
    case CKPT_ACT_SILU: act_kernel<CKPT_ACT_SILU><<<blocks, kThreads, 0, c->stream>>>(n, gate, up, out); break;
    case CKPT_ACT_GEGLU_TANH:
        act_kernel<CKPT_ACT_GEGLU_TANH><<<blocks, kThreads, 0, c->stream>>>(n, gate, up, out);
        break;
    }
    return ckpt_cuda_check(c, cudaGetLastError(), "CUDA act (%s, n=%lld): kernel launch", name, (long long)n);
}

int ckpt_cuda_add(void *ctx, int64_t n, const float *a, const float *b, float *out)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    int rc;

    if (n < 0)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "CUDA add (n=%lld): negative size", (long long)n);
    if (n == 0)
        return 0;
    if (!a || !b || !out)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "CUDA add (n=%lld): missing a, b or out", (long long)n);
    if ((rc = ckpt_cuda_enter(c, "add")) < 0)
        return rc;
    add_kernel<<<ckpt_cuda_blocks(c, n, kThreads), kThreads, 0, c->stream>>>(n, a, b, out);
    return ckpt_cuda_check(c, cudaGetLastError(), "CUDA add (n=%lld): kernel launch", (long long)n);
}
