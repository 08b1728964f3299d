/* The PTX instructions the tensor-core attention uses (sm_80+), one wrapper each, with the
 * operand layouts spelled out in attention_mma.cu. Every wrapper that touches shared memory
 * is `asm volatile` with a "memory" clobber, so the compiler keeps it in program order with
 * __syncthreads() and with ordinary loads and stores. */
#ifndef CKPT_KERNELS_PTX_CUH
#define CKPT_KERNELS_PTX_CUH

#include <stdint.h>

namespace ptx {

/* The shared-memory address of a generic pointer into shared memory. */
__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously, bypassing L1; src_bytes 0 writes 16 zero bytes
 * and reads nothing. Both addresses 16-byte aligned. */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

/* Close the group of this thread's cp.async issued since the last commit. */
__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Wait until at most N of this thread's committed groups are still in flight (other
 * threads' copies need a barrier afterwards). */
template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Four 8x8 matrices of 16-bit elements; lanes 8i .. 8i + 7 give the 16-byte-aligned row
 * addresses of matrix i, and register i of lane l receives row l / 4, columns 2 (l % 4) and
 * 2 (l % 4) + 1 of matrix i (the lower column in the low half). */
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

/* The same, transposed: register i of lane l receives rows 2 (l % 4) and 2 (l % 4) + 1 of
 * column l / 4 of matrix i. */
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

/* d += a b for a 16x16 A (row-major fragments), a 16x8 B (column fragments), float32 C/D. */
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

} // namespace ptx

#endif
