/* The copy kernel behind reads of transposed views (tensor.c). */
#ifndef CKPT_CORE_TRANSPOSE_H
#define CKPT_CORE_TRANSPOSE_H

#ifndef CKPT_BUILD
#error "transpose.h is private to the library"
#endif

#include <stddef.h>

/* out[i * pitch + j] = src[i + j * step] for i < rows and j < cols, counting in elements
 * of es bytes (any size; none of the pointers need be aligned). Meant for blocks that
 * fit in L2: at most a few hundred rows and columns. */
void ckpt_tensor__transpose(unsigned char *out, size_t pitch, const unsigned char *src, size_t step, size_t rows,
                            size_t cols, size_t es);

#endif
