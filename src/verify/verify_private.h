/* Internals of src/verify: the CPU backend's pieces and what the model and the runner
 * share. */
#ifndef CKPT_VERIFY_PRIVATE_H
#define CKPT_VERIFY_PRIVATE_H

#ifndef CKPT_BUILD
#error "verify_private.h is private to the ckpt library"
#endif

#include <ckpt/sys/backend.h>

/* Hot loops get an AVX2 clone picked at load time (the plain one runs everywhere). */
#if defined(__x86_64__) && defined(__GNUC__)
#define CKPT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CKPT_SIMD_CLONES
#endif

extern const ckpt_backend_vtable ckpt_backend__cpu;
const ckpt_backend_host *ckpt_backend__host(void);

/* The CPU backend (cpu_backend.c, cpu_gemm.c, cpu_attention.c). */
int ckpt_cpu__threads(void *ctx);
int ckpt_cpu__linear(void *ctx, const ckpt_backend_linear *op);
int ckpt_cpu__attention(void *ctx, const ckpt_backend_attention *op);

#endif
