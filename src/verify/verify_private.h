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

/* Random inputs (verify_random.c). */
typedef struct ckpt_rng {
    uint64_t s[4];
} ckpt_rng;
void ckpt_rng__seed(ckpt_rng *g, uint64_t seed, uint64_t stream, uint64_t block);
uint64_t ckpt_rng__next(ckpt_rng *g);
/* n standard normal values of stream `stream` into out. */
void ckpt_rng__randn(uint64_t seed, uint64_t stream, float *out, int64_t n, int threads);

#endif
