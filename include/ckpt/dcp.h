/* Writing PyTorch Distributed Checkpoints (torch.distributed.checkpoint; Megatron's
 * --ckpt-format torch_dist) as files of a plan.
 *
 * A checkpoint is a directory of data files and `.metadata`. Each tensor has a global shape
 * and is given in chunks (a box of it, at its offsets), each chunk in the data file of the
 * rank that would have saved it; `.metadata` records every tensor's dtype, size and chunks
 * and where each chunk's bytes lie. Nothing is written until the plan is executed; the data
 * files are laid out here already, so that `.metadata` can say where every chunk will be. */
#ifndef CKPT_DCP_H
#define CKPT_DCP_H

#include "graph.h"
#include "plan.h"

CKPT_BEGIN_DECL

typedef struct ckpt_dcp_out ckpt_dcp_out;

/* A checkpoint in directory `dir` of the plan ("" for the plan's top). */
CKPT_EXTERN(int) ckpt_dcp_out_new(ckpt_dcp_out **out, ckpt_plan *plan, const char *dir);
CKPT_EXTERN(void) ckpt_dcp_out_free(ckpt_dcp_out *d);

/* A chunk of tensor `key`, whose global shape is `shape` (ndim dimensions; every chunk of a
 * key must give the same): the node, of the chunk's shape and the tensor's dtype, at
 * `offsets`, in the data file of `rank`. Chunks of one key must not overlap and must cover
 * it (checked by ckpt_dcp_out_finish). */
CKPT_EXTERN(int) ckpt_dcp_out_chunk(ckpt_dcp_out *d, const char *key, int ndim, const int64_t *shape,
                                    const int64_t *offsets, const ckpt_node *chunk, int rank);
/* A bytes item: `len` bytes (copied), in the bytes file of `rank`. What DCP saves for a
 * Python object is a torch.save archive of it: see ckpt_dcp_saved_value. */
CKPT_EXTERN(int) ckpt_dcp_out_bytes(ckpt_dcp_out *d, const char *key, const void *data, size_t len, int rank);
/* The bytes torch.save writes for `v`, a value tree without tensors (appended to out). */
CKPT_EXTERN(int) ckpt_dcp_saved_value(const ckpt_value *v, ckpt_buf *out);
/* The same for a value whose tensor leaf i is nodes[i] (of n), saved as storage "i" of the
 * archive (a grad scaler's scale in a saved optimizer object). */
CKPT_EXTERN(int) ckpt_dcp_saved_value_tensors(const ckpt_value *v, const ckpt_node *const *nodes, size_t n,
                                              ckpt_buf *out);

/* Add the files: per rank `__<rank>_0.distcp` (its chunks, each a torch.save archive, in
 * the order given) and `__<rank>_1.distcp` (its bytes items), then `.metadata`. */
CKPT_EXTERN(int) ckpt_dcp_out_finish(ckpt_dcp_out *d);

CKPT_END_DECL

#endif
