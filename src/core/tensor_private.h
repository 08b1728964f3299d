/* Shared by tensor.c and tensor_strided.c. */
#ifndef CKPT_CORE_TENSOR_PRIVATE_H
#define CKPT_CORE_TENSOR_PRIVATE_H

#ifndef CKPT_BUILD
#error "tensor_private.h is internal to the library"
#endif

#include <ckpt/tensor.h>

/* count elements of the validated, non-contiguous view t from element first, converted to
 * dst_type, into dst. */
int ckpt_tensor__read_strided(const ckpt_tensor *t, int64_t first, int64_t count, ckpt_dtype dst_type,
                              unsigned char *dst);

/* The fewest elements that one read of t must cover for the input pages it touches to hold
 * nothing that a read of the elements after them needs again: for a view that transposes (a
 * dimension of stride 1 before the last one), enough consecutive indices of that dimension
 * to span a page of every source line, with all that follows them. 1 for views whose reads
 * already run along the source. */
int64_t ckpt_tensor__page_band(const ckpt_tensor *t, uint64_t page);

#endif
