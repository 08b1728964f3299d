/* attention with bfloat16/float16 compute: tensor cores through mma.sync.m16n8k16 (sm_80+),
 * float32 accumulators, flash-attention 2 style (online softmax as described in
 * attention.cu; the softmax runs in the log2 domain: s = scale * log2(e) * q.k, p = 2^(s - m)).
 *
 * Work split. One block of 4 warps per (block of 64 query rows, head); warp w owns rows
 * 16w .. 16w + 15 of the block for the whole kernel. Key blocks of kBlockN keys (64, or 32
 * for head_dim 256 to bound registers) are walked in order, up to the block's last row when
 * causal; the grid runs the heaviest query blocks first.
 *
 * Data. q is read as float32 and rounded to the compute type by the block as it stores it in
 * shared memory (rows past the last token are zero). k and v arrive already rounded
 * (attention.cu); each key block is copied with cp.async into one of two shared-memory
 * buffers while the other is being used, rows past the last token zero-filled (a NaN left
 * in shared memory would otherwise survive p = 0 in the PV product). Every shared row is
 * head_dim + 8 elements long: the 8 rows one ldmatrix reads then start 16 bytes apart
 * modulo 128 and hit 8 different bank groups (head_dim / 8 + 1 is odd for every supported
 * head_dim, all multiples of 16).
 *
 * Fragments (PTX ISA, mma.m16n8k16 with .bf16/.f16: g = lane / 4, t = lane % 4):
 *   A (16x16, row-major): a0a1 = (g, 2t..2t+1), a2a3 = (g+8, 2t..), a4a5 = (g, 2t+8..),
 *                         a6a7 = (g+8, 2t+8..)
 *   B (16x8, "col"):      b0b1 = (k 2t..2t+1, n g), b2b3 = (k 2t+8.., n g)
 *   C/D (16x8, float):    c0c1 = (g, 2t..2t+1), c2c3 = (g+8, 2t..2t+1)
 * ldmatrix.x4 loads four 8x8 matrices; lanes 8i .. 8i+7 give the row addresses of matrix i
 * and each lane receives (row g, columns 2t, 2t+1) of every matrix (with .trans: rows 2t,
 * 2t+1 of column g). So:
 *   Q (A of S = Q K^T, k-slice kk): lane addresses row (lane & 15), column 16kk + 8(lane >> 4):
 *     matrices (rows 0-7, dims lo), (rows 8-15, lo), (0-7, hi), (8-15, hi) = a0a1..a6a7.
 *   K (B of S, keys 16jj.., dims 16kk..): lane addresses key 16jj + 8(lane >> 4) + (lane & 7),
 *     dim 16kk + 8((lane >> 3) & 1): matrices (keys lo, dims lo), (keys lo, hi), (hi, lo),
 *     (hi, hi) = {b0b1, b2b3} of key block 2jj, then of key block 2jj + 1.
 *   P (A of O += P V, keys 16kk..): straight from the S accumulators of key blocks 2kk and
 *     2kk + 1, whose layout is A's: (c0c1, c2c3 of block 2kk, c0c1, c2c3 of block 2kk + 1).
 *   V (B of O, keys 16kk.., dims 16nn..), with .trans: lane addresses key 16kk + (lane & 15),
 *     dim 16nn + 8(lane >> 4): matrices (keys lo, dims lo), (keys hi, lo), (lo, hi), (hi, hi)
 *     = {b0b1, b2b3} of dim block 2nn, then of dim block 2nn + 1.
 * A thread thus holds rows g and g + 8 of its warp's strip; row statistics are reduced over
 * the 4 lanes of a quad (shuffles with xor 1 and 2). l is kept per thread (its columns only)
 * and summed over the quad at the end: every term of a row is scaled by the same factors.
 *
 * Masking. Scores of keys past the last token, after the row when causal, or at or before
 * row - W with a sliding window W, become -inf, only in key blocks that contain such keys
 * for some row of the warp (the test is uniform per warp). A warp skips a key block whose
 * first key is after its last row (causal), or whose last key is before its first row's
 * window: all its scores would be masked, which changes nothing. With a window the walk
 * starts at the block holding the first row's first visible key; a row can still meet a
 * block with all its keys masked before its first visible one, where its running maximum is
 * -inf: exponentials are then taken against 0 instead of the maximum (exp2(-inf - -inf)
 * would be NaN), leaving l = 0 and o = 0 for that row. Rows past the last token are computed
 * on zeros and never stored. */
#include "cuda_private.h"
#include "ptx.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <math.h>

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockM = kWarps * 16; /* query rows per block */

template <int D>
struct tile_cfg {
    static constexpr int kBlockN = D <= 128 ? 64 : 32; /* keys per block */
    static constexpr int kStride = D + 8;              /* elements per shared-memory row */
    static constexpr bool kQInRegs = D <= 128;         /* else Q fragments are reloaded per key block */
    static constexpr size_t kSmemBytes = (size_t)(kBlockM + 4 * kBlockN) * kStride * 2; /* Q, 2 x (K, V) */
    static_assert(D % 16 == 0, "head_dim must be a multiple of 16");
    static_assert(kBlockN % 16 == 0, "key blocks are processed 16 keys at a time");
};

struct mma_args {
    const float *q;
    const void *k, *v; /* rounded to the compute type, laid out as the op's k and v */
    float *out;
    int tokens, heads, kv_heads, group;
    float scale_log2; /* scale * log2(e) */
    int causal;
    int window; /* 0: none */
};

/* The compute type: rounding two floats into one register (lo in the low half, which is the
 * lower column of a fragment pair) and d += a b on the tensor cores. */
template <typename T>
struct elem;

template <>
struct elem<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
               ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
    {
        ptx::mma_bf16(d, a, b0, b1);
    }
};

template <>
struct elem<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        return (uint32_t)__half_as_ushort(__float2half_rn(lo)) | ((uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16);
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
    {
        ptx::mma_f16(d, a, b0, b1);
    }
};

/* Key block `tile` (keys tile * kBlockN ..) of K and V into shared buffers dk, dv, by all
 * threads of the block, asynchronously (the caller commits and waits). */
template <typename T, int D>
__device__ __forceinline__ void load_kv(const mma_args &p, const T *kh, const T *vh, int64_t kv_stride, int tile,
                                        T *dk, T *dv)
{
    using cfg = tile_cfg<D>;
    constexpr int kChunks = D / 8; /* 16-byte chunks per row */
    const int n0 = tile * cfg::kBlockN;
    for (int i = threadIdx.x; i < cfg::kBlockN * kChunks; i += kThreads) {
        const int r = i / kChunks, col = (i % kChunks) * 8, key = n0 + r;
        const bool inside = key < p.tokens;
        const int64_t off = inside ? key * kv_stride + col : 0; /* a valid address either way */
        ptx::cp_async16(ptx::smem_addr(dk + r * cfg::kStride + col), kh + off, inside ? 16 : 0);
        ptx::cp_async16(ptx::smem_addr(dv + r * cfg::kStride + col), vh + off, inside ? 16 : 0);
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_mma_kernel(const mma_args p)
{
    using cfg = tile_cfg<D>;
    constexpr int BN = cfg::kBlockN, S = cfg::kStride;
    constexpr int KD = D / 16; /* 16-wide slices of the head dimension */
    constexpr int NB = BN / 8; /* 8-key column blocks of S */
    constexpr int OB = D / 8;  /* 8-dim column blocks of O */

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sq = (T *)smem_raw;    /* [kBlockM][S] */
    T *sk = sq + kBlockM * S; /* [2][BN][S] */
    T *sv = sk + 2 * BN * S;  /* [2][BN][S] */

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t4 = lane % 4;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * kBlockM; /* heaviest causal blocks first */
    const int h = blockIdx.y, kvh = h / p.group;
    const int64_t q_stride = (int64_t)p.heads * D, kv_stride = (int64_t)p.kv_heads * D;
    const T *kh = (const T *)p.k + (int64_t)kvh * D;
    const T *vh = (const T *)p.v + (int64_t)kvh * D;
    const int wrow0 = q0 + warp * 16; /* this warp's first row */
    const int key_end = p.causal ? min(q0 + kBlockM, p.tokens) : p.tokens;
    const int n_tiles = (key_end + BN - 1) / BN;
    const int first_tile = p.window > 0 ? max(0, q0 - p.window + 1) / BN : 0;

    /* Q, rounded, two values per 32-bit store. */
    const float *qh = p.q + (int64_t)h * D;
    for (int i = tid; i < kBlockM * (D / 2); i += kThreads) {
        const int r = i / (D / 2), col = (i % (D / 2)) * 2, row = q0 + r;
        float lo = 0.0f, hi = 0.0f;
        if (row < p.tokens) {
            const float *src = qh + row * q_stride + col;
            lo = src[0];
            hi = src[1];
        }
        *(uint32_t *)(sq + r * S + col) = elem<T>::pack(lo, hi);
    }
    load_kv<T, D>(p, kh, vh, kv_stride, first_tile, sk + (first_tile & 1) * BN * S, sv + (first_tile & 1) * BN * S);
    ptx::cp_async_commit();
    __syncthreads(); /* Q is in shared memory */

    const T *wq = sq + (warp * 16 + (lane & 15)) * S + (lane >> 4) * 8; /* this lane's Q row address */
    uint32_t qf[cfg::kQInRegs ? KD : 1][4];
    if constexpr (cfg::kQInRegs) {
#pragma unroll
        for (int kk = 0; kk < KD; kk++)
            ptx::ldsm_x4(qf[kk], ptx::smem_addr(wq + kk * 16));
    }

    float o[OB][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int ob = 0; ob < OB; ob++)
        o[ob][0] = o[ob][1] = o[ob][2] = o[ob][3] = 0.0f;

    for (int tile = first_tile; tile < n_tiles; tile++) {
        const int buf = tile & 1;
        if (tile + 1 < n_tiles) {
            /* The other buffer was last read in the previous iteration, before its final barrier. */
            load_kv<T, D>(p, kh, vh, kv_stride, tile + 1, sk + (buf ^ 1) * BN * S, sv + (buf ^ 1) * BN * S);
            ptx::cp_async_commit();
            ptx::cp_async_wait<1>(); /* this key block's copies are done, the next one's may be in flight */
        } else {
            ptx::cp_async_wait<0>();
        }
        __syncthreads(); /* ... and so are every other thread's */

        const int n0 = tile * BN;
        if ((!p.causal || n0 <= wrow0 + 15) && (p.window <= 0 || n0 + BN > wrow0 - p.window + 1)) {
            const T *kb = sk + buf * BN * S, *vb = sv + buf * BN * S;

            /* S = Q K^T for the warp's 16 rows and the block's BN keys. */
            float s[NB][4];
#pragma unroll
            for (int nb = 0; nb < NB; nb++)
                s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
            const T *wk = kb + ((lane >> 4) * 8 + (lane & 7)) * S + ((lane >> 3) & 1) * 8;
#pragma unroll
            for (int kk = 0; kk < KD; kk++) {
                uint32_t a[4];
                if constexpr (cfg::kQInRegs) {
                    a[0] = qf[kk][0];
                    a[1] = qf[kk][1];
                    a[2] = qf[kk][2];
                    a[3] = qf[kk][3];
                } else {
                    ptx::ldsm_x4(a, ptx::smem_addr(wq + kk * 16));
                }
#pragma unroll
                for (int jj = 0; jj < NB / 2; jj++) {
                    uint32_t b[4];
                    ptx::ldsm_x4(b, ptx::smem_addr(wk + jj * 16 * S + kk * 16));
                    elem<T>::mma(s[2 * jj], a, b[0], b[1]);
                    elem<T>::mma(s[2 * jj + 1], a, b[2], b[3]);
                }
            }

            /* Scale into the log2 domain; mask. Element e of block nb: key n0 + 8nb + 2t4 + (e & 1),
             * row wrow0 + g + 8(e >> 1). */
            const bool need_mask = n0 + BN > p.tokens || (p.causal && n0 + BN - 1 > wrow0) ||
                                   (p.window > 0 && n0 <= wrow0 + 15 - p.window);
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = s[nb][e] * p.scale_log2;
                    if (need_mask) {
                        const int key = n0 + nb * 8 + 2 * t4 + (e & 1), row = wrow0 + g + 8 * (e >> 1);
                        if (key >= p.tokens || (p.causal && key > row) || (p.window > 0 && key <= row - p.window))
                            x = -INFINITY;
                    }
                    s[nb][e] = x;
                }
            }

            /* Online softmax for rows g (i = 0) and g + 8 (i = 1). */
            float mx[2] = {m[0], m[1]};
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
                mx[0] = fmaxf(mx[0], fmaxf(s[nb][0], s[nb][1]));
                mx[1] = fmaxf(mx[1], fmaxf(s[nb][2], s[nb][3]));
            }
            float alpha[2], ref[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                ref[i] = mx[i] == -INFINITY ? 0.0f : mx[i]; /* a row with nothing visible yet */
                alpha[i] = exp2f(m[i] - ref[i]); /* 0 on the row's first visible block: m = -inf */
                m[i] = mx[i];
                l[i] *= alpha[i];
            }
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
                s[nb][0] = exp2f(s[nb][0] - ref[0]);
                s[nb][1] = exp2f(s[nb][1] - ref[0]);
                s[nb][2] = exp2f(s[nb][2] - ref[1]);
                s[nb][3] = exp2f(s[nb][3] - ref[1]);
                l[0] += s[nb][0] + s[nb][1];
                l[1] += s[nb][2] + s[nb][3];
            }
#pragma unroll
            for (int ob = 0; ob < OB; ob++) {
                o[ob][0] *= alpha[0];
                o[ob][1] *= alpha[0];
                o[ob][2] *= alpha[1];
                o[ob][3] *= alpha[1];
            }

            /* O += P V, P rounded to the compute type. */
            const T *wv = vb + (lane & 15) * S + (lane >> 4) * 8;
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                uint32_t a[4];
                a[0] = elem<T>::pack(s[2 * kk][0], s[2 * kk][1]);
                a[1] = elem<T>::pack(s[2 * kk][2], s[2 * kk][3]);
                a[2] = elem<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                a[3] = elem<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
                for (int nn = 0; nn < KD; nn++) {
                    uint32_t b[4];
                    ptx::ldsm_x4_trans(b, ptx::smem_addr(wv + kk * 16 * S + nn * 16));
                    elem<T>::mma(o[2 * nn], a, b[0], b[1]);
                    elem<T>::mma(o[2 * nn + 1], a, b[2], b[3]);
                }
            }
        }
        __syncthreads(); /* every warp is done with this buffer before it is refilled */
    }

    /* out = o / l; l summed over the quad (l >= 1: the maximum's own term). */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
    const int r0 = wrow0 + g, r1 = r0 + 8;
    float *out0 = p.out + r0 * q_stride + (int64_t)h * D + 2 * t4;
    float *out1 = p.out + r1 * q_stride + (int64_t)h * D + 2 * t4;
#pragma unroll
    for (int ob = 0; ob < OB; ob++) {
        if (r0 < p.tokens) {
            out0[ob * 8] = o[ob][0] / l[0];
            out0[ob * 8 + 1] = o[ob][1] / l[0];
        }
        if (r1 < p.tokens) {
            out1[ob * 8] = o[ob][2] / l[1];
            out1[ob * 8 + 1] = o[ob][3] / l[1];
        }
    }
}

template <typename T, int D>
int launch(ckpt_cuda *c, const mma_args &p, const char *what)
{
    const size_t smem = tile_cfg<D>::kSmemBytes;
    const dim3 grid((unsigned)((p.tokens + kBlockM - 1) / kBlockM), (unsigned)p.heads);
    int rc;

    if (smem > c->smem_optin)
        return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED,
                              "%s: needs %zu bytes of shared memory per block, the device allows %zu", what, smem,
                              c->smem_optin);
    if ((rc = ckpt_cuda_check(c,
                              cudaFuncSetAttribute(attention_mma_kernel<T, D>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                              "%s: setting the kernel's shared memory size", what)) < 0)
        return rc;
    attention_mma_kernel<T, D><<<grid, kThreads, smem, c->stream>>>(p);
    return ckpt_cuda_check(c, cudaGetLastError(), "%s: kernel launch", what);
}

template <typename T>
int dispatch(ckpt_cuda *c, const mma_args &p, int64_t head_dim, const char *what)
{
    switch (head_dim) {
    case 16: return launch<T, 16>(c, p, what);
    case 32: return launch<T, 32>(c, p, what);
    case 64: return launch<T, 64>(c, p, what);
    case 80: return launch<T, 80>(c, p, what);
    case 96: return launch<T, 96>(c, p, what);
    case 128: return launch<T, 128>(c, p, what);
    case 256: return launch<T, 256>(c, p, what);
    default: return ckpt_cuda_fail(c->host, CKPT_EUNSUPPORTED, "%s: head_dim not supported", what);
    }
}

} // namespace

int ckpt_cuda_attention_mma(ckpt_cuda *c, const ckpt_backend_attention *op, const void *k16, const void *v16,
                            const char *what)
{
    mma_args p;
    p.q = op->q;
    p.k = k16;
    p.v = v16;
    p.out = op->out;
    p.tokens = (int)op->tokens;
    p.heads = (int)op->heads;
    p.kv_heads = (int)op->kv_heads;
    p.group = (int)(op->heads / op->kv_heads);
    p.scale_log2 = (float)(op->scale * 1.4426950408889634074); /* log2(e) */
    p.causal = op->causal != 0;
    p.window = op->window >= op->tokens ? 0 : (int)op->window;
    if (op->compute == CKPT_DTYPE_BF16)
        return dispatch<__nv_bfloat16>(c, p, op->head_dim, what);
    return dispatch<__half>(c, p, op->head_dim, what);
}
