/* Transposing copies of small blocks, in plain C.
 *
 * Elements of 1, 2 and 4 bytes move as whole 64-bit words: a square of 8, 4 or 2 source
 * rows is loaded as one word per row, its lanes are swapped in log2 steps of shifts and
 * masks, and one word per output row is stored. That is a quarter to an eighth of the
 * loads and stores of an element-by-element copy, which matters once the block is in
 * cache. Lanes are numbered by significance, so the words are used only where the first
 * byte in memory is the least significant one; elsewhere, and for 8 and 16-byte
 * elements, the copy goes element by element. */
#include "transpose.h"

#include <stdint.h>
#include <string.h>

/* Source rows per pass. A pass reads `rows` elements from each of them and writes
 * STRIPE elements into each output row; the next pass's source lines are asked for
 * ahead of time, since rows far apart in memory defeat the hardware's own prefetching. */
#define STRIPE 32

#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

static int little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;

    memcpy(&first, &one, 1);
    return first == 1;
}

/* Swap the upper lane of every pair of `bits`-wide lanes in *a with the lower lane of
 * the same pair in *b (mask selects the lower lanes). */
static inline void swap_lanes(uint64_t *a, uint64_t *b, unsigned bits, uint64_t mask)
{
    uint64_t lo = (*a & mask) | ((*b & mask) << bits);
    uint64_t hi = ((*a >> bits) & mask) | (*b & ~mask);

    *a = lo;
    *b = hi;
}

#define M8 0x00FF00FF00FF00FFull
#define M16 0x0000FFFF0000FFFFull
#define M32 0x00000000FFFFFFFFull

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t x;

    memcpy(&x, p, 8);
    return x;
}

static inline void store64(unsigned char *p, uint64_t x)
{
    memcpy(p, &x, 8);
}

/* Squares of n = 8 / es elements each way: word x[b] is loaded from source line b (lane a
 * bound for output row a); after the swaps x[a] holds output row a, lane b from line b. */
static void square1(unsigned char *out, size_t pitch, const unsigned char *src, size_t step)
{
    uint64_t x[8];
    int b;

    for (b = 0; b < 8; b++)
        x[b] = load64(src + (size_t)b * step);
    for (b = 0; b < 8; b += 2)
        swap_lanes(&x[b], &x[b + 1], 8, M8);
    for (b = 0; b < 8; b += 4) {
        swap_lanes(&x[b], &x[b + 2], 16, M16);
        swap_lanes(&x[b + 1], &x[b + 3], 16, M16);
    }
    for (b = 0; b < 4; b++)
        swap_lanes(&x[b], &x[b + 4], 32, M32);
    for (b = 0; b < 8; b++)
        store64(out + (size_t)b * pitch, x[b]);
}

static void square2(unsigned char *out, size_t pitch, const unsigned char *src, size_t step)
{
    uint64_t x0 = load64(src), x1 = load64(src + step), x2 = load64(src + 2 * step), x3 = load64(src + 3 * step);

    swap_lanes(&x0, &x1, 16, M16);
    swap_lanes(&x2, &x3, 16, M16);
    swap_lanes(&x0, &x2, 32, M32);
    swap_lanes(&x1, &x3, 32, M32);
    store64(out, x0);
    store64(out + pitch, x1);
    store64(out + 2 * pitch, x2);
    store64(out + 3 * pitch, x3);
}

static void square4(unsigned char *out, size_t pitch, const unsigned char *src, size_t step)
{
    uint64_t x0 = load64(src), x1 = load64(src + step);

    swap_lanes(&x0, &x1, 32, M32);
    store64(out, x0);
    store64(out + pitch, x1);
}

/* Rows [i0, i1) x columns [j0, j1), element by element. */
static inline void scalar(unsigned char *out, size_t pitch, const unsigned char *src, size_t step, size_t i0,
                          size_t i1, size_t j0, size_t j1, size_t es)
{
    size_t i, j;

    for (i = i0; i < i1; i++)
        for (j = j0; j < j1; j++)
            memcpy(out + (i * pitch + j) * es, src + (i + j * step) * es, es);
}

static inline void transpose_sized(unsigned char *out, size_t pitch, const unsigned char *src, size_t step,
                                   size_t rows, size_t cols, size_t es, int words)
{
    size_t n = words ? 8 / es : 1, whole = rows - rows % n, i, j, j0, j1, jw, off;

    for (j0 = 0; j0 < cols; j0 = j1) {
        j1 = cols - j0 < STRIPE ? cols : j0 + STRIPE;
        for (j = j1; j < cols && j < j1 + STRIPE; j++)
            for (off = 0; off < rows * es; off += 64)
                PREFETCH(src + j * step * es + off);
        if (!words) {
            scalar(out, pitch, src, step, 0, rows, j0, j1, es);
            continue;
        }
        jw = j0 + (j1 - j0) / n * n;
        for (i = 0; i < whole; i += n) {
            for (j = j0; j < jw; j += n)
                if (es == 1)
                    square1(out + i * pitch + j, pitch, src + i + j * step, step);
                else if (es == 2)
                    square2(out + (i * pitch + j) * 2, pitch * 2, src + (i + j * step) * 2, step * 2);
                else
                    square4(out + (i * pitch + j) * 4, pitch * 4, src + (i + j * step) * 4, step * 4);
            scalar(out, pitch, src, step, i, i + n, jw, j1, es);
        }
        scalar(out, pitch, src, step, whole, rows, j0, j1, es);
    }
}

void ckpt_tensor__transpose(unsigned char *out, size_t pitch, const unsigned char *src, size_t step, size_t rows,
                            size_t cols, size_t es)
{
    int words = little_endian();

    switch (es) {
    case 1: transpose_sized(out, pitch, src, step, rows, cols, 1, words); break;
    case 2: transpose_sized(out, pitch, src, step, rows, cols, 2, words); break;
    case 4: transpose_sized(out, pitch, src, step, rows, cols, 4, words); break;
    case 8: transpose_sized(out, pitch, src, step, rows, cols, 8, 0); break;
    default: transpose_sized(out, pitch, src, step, rows, cols, es, 0); break;
    }
}
