/* attention: the hook (validation, dispatch) and the float32 path.
 *
 * out[t][h] = softmax_j(scale * q[t][h] . k[j][h / group]) v[j][h / group], j <= t when
 * causal (and t - W < j with a window W), group = heads / kv_heads. Both paths are
 * flash-attention style: one program per
 * (query block, head) walks the key blocks (up to the diagonal when causal) and keeps, per
 * query row, a running maximum m, a running sum l and an unnormalised output o:
 *     m' = max(m, max_j s_j),  a = exp(m - m'),  p_j = exp(s_j - m'),
 *     l' = a l + sum_j p_j,    o' = a o + sum_j p_j v_j,    out = o / l at the end.
 * Masked scores are -inf, so their p_j is exactly 0. With a sliding window W (key j visible
 * from row t iff t - W < j <= t) the walk starts at the key block holding the block's first
 * row's first visible key, and a warp skips key blocks wholly before its rows' windows; a
 * row may still meet blocks with every key masked before its first visible one, where its
 * maximum is -inf: the exponentials are then taken against 0 instead (m' = -inf would give
 * exp(-inf - -inf) = NaN), which leaves the row at l = 0, o = 0. Every row sees its own key,
 * so l >= 1 at the end (the maximum's own term), and out is finite.
 *
 * float32 path (this file): CUDA cores, float32 throughout, expf; the reference the tensor
 * -core path (attention_mma.cu, bfloat16/float16) is checked against. 8 warps per block,
 * 4 query rows per warp (32 rows), key blocks of 32: lane j scores key j of the block for
 * the warp's 4 rows (K rows padded to D + 1 floats, so the 32 lanes read 32 different
 * banks; Q values are broadcast), the softmax statistics are warp reductions, and for the
 * PV product lane d owns output dimensions d, d + 32, ... while p_j is broadcast from lane j
 * by a shuffle. Rows past the last token are computed on zeros and never stored. */
#include "cuda_private.h"

#include <math.h>
#include <stdio.h>

namespace {

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 4;
constexpr int kBlockM = kWarps * kRowsPerWarp; /* query rows per block */
constexpr int kBlockN = 32;                    /* keys per block: one per lane */
constexpr int kMaxTokens = 1 << 30;
constexpr int kMaxHeads = 65535;               /* grid.y */

struct f32_args {
    const float *q, *k, *v;
    float *out;
    int tokens, heads, kv_heads, group;
    float scale;
    int causal;
    int window; /* 0: none */
};

template <int D>
constexpr size_t f32_smem_bytes()
{
    return (size_t)(kBlockM * D + kBlockN * (D + 1) + kBlockN * D) * sizeof(float);
}

template <int D>
__global__ void __launch_bounds__(kWarps * 32) attention_f32_kernel(const f32_args p)
{
    constexpr int KS = D + 1;            /* K row stride in shared memory */
    constexpr int DC = (D + 31) / 32;    /* output dimensions per lane */
    constexpr int R = kRowsPerWarp;
    extern __shared__ float smem[];
    float *sq = smem;                    /* [kBlockM][D] */
    float *sk = sq + kBlockM * D;        /* [kBlockN][KS] */
    float *sv = sk + kBlockN * KS;       /* [kBlockN][D] */

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * kBlockM; /* heaviest causal blocks first */
    const int h = blockIdx.y, kvh = h / p.group;
    const int64_t q_stride = (int64_t)p.heads * D, kv_stride = (int64_t)p.kv_heads * D;
    const float *qh = p.q + (int64_t)h * D;
    const float *kh = p.k + (int64_t)kvh * D;
    const float *vh = p.v + (int64_t)kvh * D;
    const int row0 = q0 + warp * R;      /* this warp's first row */
    const int key_end = p.causal ? min(q0 + kBlockM, p.tokens) : p.tokens;
    const int key_begin = p.window > 0 ? max(0, q0 - p.window + 1) / kBlockN * kBlockN : 0;

    for (int i = tid; i < kBlockM * D; i += blockDim.x) {
        const int r = i / D, d = i % D, row = q0 + r;
        sq[i] = row < p.tokens ? qh[row * q_stride + d] : 0.0f;
    }

    float m[R], l[R], o[R][DC];
#pragma unroll
    for (int r = 0; r < R; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < DC; c++)
            o[r][c] = 0.0f;
    }

    for (int n0 = key_begin; n0 < key_end; n0 += kBlockN) {
        __syncthreads(); /* the previous block's K and V are no longer read (and Q is stored) */
        for (int i = tid; i < kBlockN * D; i += blockDim.x) {
            const int j = i / D, d = i % D, key = n0 + j;
            float kx = 0.0f, vx = 0.0f;
            if (key < p.tokens) {
                kx = kh[key * kv_stride + d];
                vx = vh[key * kv_stride + d];
            }
            sk[j * KS + d] = kx;
            sv[j * D + d] = vx;
        }
        __syncthreads();
        if (p.causal && n0 > row0 + R - 1)
            continue; /* every key of this block is after every row of this warp */
        if (p.window > 0 && n0 + kBlockN <= row0 - p.window + 1)
            continue; /* ... or before every row's window */

        /* Scores: lane j, key n0 + j, against the warp's R rows. */
        float s[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            s[r] = 0.0f;
        const float *kr = sk + lane * KS;
        const float *qr = sq + warp * R * D;
#pragma unroll 8
        for (int d = 0; d < D; d++) {
            const float kd = kr[d];
#pragma unroll
            for (int r = 0; r < R; r++)
                s[r] = fmaf(qr[r * D + d], kd, s[r]);
        }

        const int key = n0 + lane;
        float pr[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const bool visible = key < p.tokens && (!p.causal || key <= row0 + r) &&
                                 (p.window <= 0 || key > row0 + r - p.window);
            const float x = visible ? s[r] * p.scale : -INFINITY;
            float mx = x;
#pragma unroll
            for (int off = 16; off > 0; off /= 2)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float m_new = fmaxf(m[r], mx);
            const float m_ref = m_new == -INFINITY ? 0.0f : m_new; /* see the top of the file */
            const float alpha = expf(m[r] - m_ref);
            const float pj = expf(x - m_ref);
            float sum = pj;
#pragma unroll
            for (int off = 16; off > 0; off /= 2)
                sum += __shfl_xor_sync(0xffffffffu, sum, off);
            l[r] = l[r] * alpha + sum;
            m[r] = m_new;
#pragma unroll
            for (int c = 0; c < DC; c++)
                o[r][c] *= alpha;
            pr[r] = pj;
        }

        /* o += p V: lane owns dimensions lane + 32 c; p_j comes from lane j. */
#pragma unroll 4
        for (int j = 0; j < kBlockN; j++) {
            float vj[DC];
#pragma unroll
            for (int c = 0; c < DC; c++) {
                const int d = lane + 32 * c;
                vj[c] = d < D ? sv[j * D + d] : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float pj = __shfl_sync(0xffffffffu, pr[r], j);
#pragma unroll
                for (int c = 0; c < DC; c++)
                    o[r][c] = fmaf(pj, vj[c], o[r][c]);
            }
        }
    }

#pragma unroll
    for (int r = 0; r < R; r++) {
        const int row = row0 + r;
        if (row >= p.tokens)
            continue;
        float *dst = p.out + row * q_stride + (int64_t)h * D;
#pragma unroll
        for (int c = 0; c < DC; c++) {
            const int d = lane + 32 * c;
            if (d < D)
                dst[d] = o[r][c] / l[r];
        }
    }
}

template <int D>
int launch_f32(ckpt_cuda *c, const f32_args &p, const char *what)
{
    const size_t smem = f32_smem_bytes<D>();
    const dim3 grid((unsigned)((p.tokens + kBlockM - 1) / kBlockM), (unsigned)p.heads);
    int rc;

    if (smem > c->smem_optin)
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED,
                              "%s: needs %zu bytes of shared memory per block, the device allows %zu", what, smem,
                              c->smem_optin);
    if ((rc = ckpt_cuda_check(c,
                              cudaFuncSetAttribute(attention_f32_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)smem),
                              "%s: setting the kernel's shared memory size", what)) < 0)
        return rc;
    attention_f32_kernel<D><<<grid, kWarps * 32, smem, c->stream>>>(p);
    return ckpt_cuda_check(c, cudaGetLastError(), "%s: kernel launch", what);
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

int ckpt_cuda_head_dim_supported(int64_t head_dim)
{
    switch (head_dim) {
    case 16: case 32: case 64: case 80: case 96: case 128: case 256: return 1;
    default: return 0;
    }
}

int ckpt_cuda_attention(void *ctx, const ckpt_backend_attention *op)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    char what[192];
    int rc;

    snprintf(what, sizeof what,
             "CUDA attention (tokens=%lld heads=%lld kv_heads=%lld head_dim=%lld, %s, window %lld, %s)",
             (long long)op->tokens, (long long)op->heads, (long long)op->kv_heads, (long long)op->head_dim,
             op->causal ? "causal" : "full", (long long)op->window, dtype_str(op->compute));
    if (op->compute != CKPT_DTYPE_F32 && op->compute != CKPT_DTYPE_BF16 && op->compute != CKPT_DTYPE_F16)
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED, "%s: compute dtype %d (float32, bfloat16 or float16 only)",
                              what, (int)op->compute);
    if (op->tokens < 0 || op->heads < 1 || op->kv_heads < 1 || op->heads % op->kv_heads)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "%s: heads must be a positive multiple of kv_heads", what);
    if (!ckpt_cuda_head_dim_supported(op->head_dim))
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED,
                              "%s: head_dim %lld is not supported (16, 32, 64, 80, 96, 128 or 256)", what,
                              (long long)op->head_dim);
    if (op->tokens > kMaxTokens || op->heads > kMaxHeads)
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED, "%s: at most %d tokens and %d heads", what, kMaxTokens,
                              kMaxHeads);
    if (op->window < 0 || (op->window > 0 && !op->causal))
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "%s: window %lld (a positive one with causal masking only)", what,
                              (long long)op->window);
    if (op->tokens == 0)
        return 0;
    if (!op->q || !op->k || !op->v || !op->out)
        return ckpt_cuda_fail(c->host, CKPT_EINVALID, "%s: missing q, k, v or out", what);
    if ((rc = ckpt_cuda_enter(c, "attention")) < 0)
        return rc;

    if (op->compute != CKPT_DTYPE_F32) {
        /* k and v rounded once into scratch (q is rounded by the kernel as it loads it). */
        const int64_t kv_elems = op->tokens * op->kv_heads * op->head_dim;
        const size_t kv_bytes = ((size_t)kv_elems * 2 + 255) / 256 * 256;
        void *scratch;
        if ((rc = ckpt_cuda_scratch(c, 2 * kv_bytes, &scratch, "attention")) < 0 ||
            (rc = ckpt_cuda_cast_f32(c, op->compute, op->k, scratch, kv_elems, "attention")) < 0 ||
            (rc = ckpt_cuda_cast_f32(c, op->compute, op->v, (char *)scratch + kv_bytes, kv_elems, "attention")) < 0)
            return rc;
        return ckpt_cuda_attention_mma(c, op, scratch, (const char *)scratch + kv_bytes, what);
    }

    f32_args p;
    p.q = op->q;
    p.k = op->k;
    p.v = op->v;
    p.out = op->out;
    p.tokens = (int)op->tokens;
    p.heads = (int)op->heads;
    p.kv_heads = (int)op->kv_heads;
    p.group = (int)(op->heads / op->kv_heads);
    p.scale = (float)op->scale;
    p.causal = op->causal != 0;
    p.window = op->window >= op->tokens ? 0 : (int)op->window;
    switch (op->head_dim) {
    case 16: return launch_f32<16>(c, p, what);
    case 32: return launch_f32<32>(c, p, what);
    case 64: return launch_f32<64>(c, p, what);
    case 80: return launch_f32<80>(c, p, what);
    case 96: return launch_f32<96>(c, p, what);
    case 128: return launch_f32<128>(c, p, what);
    case 256: return launch_f32<256>(c, p, what);
    default: return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED, "%s: head_dim not supported", what);
    }
}
