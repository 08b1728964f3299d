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

#endif
