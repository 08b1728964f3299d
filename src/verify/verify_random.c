/* verify's random inputs: xoshiro256**, seeded per purpose with splitmix64, so that both
 * models of a comparison get the same numbers whatever the thread count. */
#include "verify_private.h"

#include <math.h>

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A generator of its own for each block of a stream, so that blocks can be drawn in
 * parallel and the numbers do not depend on the number of threads. */
void ckpt_rng__seed(ckpt_rng *g, uint64_t seed, uint64_t stream, uint64_t block)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull) ^ (block * 0x8CB92BA72F3D8DD7ull);
    int i;
    for (i = 0; i < 4; i++)
        g->s[i] = splitmix(&x);
}

uint64_t ckpt_rng__next(ckpt_rng *g)
{
    uint64_t *s = g->s, result = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3] << 45 | s[3] >> 19;
    return result;
}

static double rng_unit(ckpt_rng *g) /* (0, 1] */
{
    return ((double)(ckpt_rng__next(g) >> 11) + 1.0) * 0x1.0p-53;
}

/* Standard normal values (Box-Muller), drawn in blocks of RANDN_BLOCK on `threads` threads:
 * a 7B layer's input at 2048 tokens is 8M values, 0.2 s on one thread. */
#define RANDN_BLOCK ((int64_t)1 << 16)
void ckpt_rng__randn(uint64_t seed, uint64_t stream, float *out, int64_t n, int threads)
{
    int64_t blocks = (n + RANDN_BLOCK - 1) / RANDN_BLOCK, b;

    (void)threads;
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (b = 0; b < blocks; b++) {
        int64_t end = (b + 1) * RANDN_BLOCK < n ? (b + 1) * RANDN_BLOCK : n, i;
        ckpt_rng g;
        ckpt_rng__seed(&g, seed, stream, (uint64_t)b);
        for (i = b * RANDN_BLOCK; i < end; i += 2) {
            double r = sqrt(-2.0 * log(rng_unit(&g))), th = 2.0 * M_PI * rng_unit(&g);
            out[i] = (float)(r * cos(th));
            if (i + 1 < end)
                out[i + 1] = (float)(r * sin(th));
        }
    }
}
