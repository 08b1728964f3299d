/* The tensor graph: lazy operations on tensor metadata, and writing named results.
 *
 * A node stands for a tensor that is never materialised as a whole. Leaves are views on
 * input tensors (or zeros); operations build new nodes and read nothing. Transposes,
 * permutes, reshapes and slices of a view stay views; concatenation keeps its parts. When
 * the graph is written, each output tensor's bytes are produced once, in C order, straight
 * into their place in the output file, in bounded memory.
 *
 * Nodes belong to their graph and live until ckpt_graph_free. They are immutable, so one
 * node may feed any number of others. Input tensors must outlive the graph (keep their
 * checkpoint open). */
#ifndef CKPT_GRAPH_H
#define CKPT_GRAPH_H

#include "buf.h"
#include "checkpoint.h"

CKPT_BEGIN_DECL

typedef struct ckpt_graph ckpt_graph;
typedef struct ckpt_node ckpt_node;

CKPT_EXTERN(int) ckpt_graph_new(ckpt_graph **out);
CKPT_EXTERN(void) ckpt_graph_free(ckpt_graph *g);

/* ---- leaves ---- */

/* A view of an input tensor (any strides). The node keeps a pointer to t. */
CKPT_EXTERN(int) ckpt_node_tensor(ckpt_graph *g, const ckpt_tensor *t, const ckpt_node **out);
/* All-zero tensor. */
CKPT_EXTERN(int) ckpt_node_zeros(ckpt_graph *g, ckpt_dtype dtype, int ndim, const int64_t *shape,
                                 const ckpt_node **out);
/* A tensor whose every element is `value` rounded to dtype (a scalar step count, a constant
 * fill): zeros when value is 0. */
CKPT_EXTERN(int) ckpt_node_full(ckpt_graph *g, ckpt_dtype dtype, int ndim, const int64_t *shape, double value,
                                const ckpt_node **out);
/* Block-scaled dequantisation (FP8 weights with one scale per block): element [i][j] of the
 * 2-D C-contiguous input tensor `data`, as float32, times scale[i / block_rows][j / block_cols]
 * (float32 product), rounded to dtype. `scale` must be [ceil(rows / block_rows),
 * ceil(cols / block_cols)]; its values are read here, data's as the result is read. Transposes,
 * slices and casts of the result stay lazy. */
CKPT_EXTERN(int) ckpt_node_block_dequant(ckpt_graph *g, const ckpt_tensor *data, const ckpt_tensor *scale,
                                         int64_t block_rows, int64_t block_cols, ckpt_dtype dtype,
                                         const ckpt_node **out);

/* ---- operations (each returns a new node; axes may be negative, counting from the end) ---- */

CKPT_EXTERN(int) ckpt_node_permute(ckpt_graph *g, const ckpt_node *x, const int *perm, const ckpt_node **out);
/* Swap two axes; for a 2-D tensor ckpt_node_transpose(g, x, 0, 1, &y) is x.T. */
CKPT_EXTERN(int) ckpt_node_transpose(ckpt_graph *g, const ckpt_node *x, int a, int b, const ckpt_node **out);
/* Same elements in C order, new shape; one dimension may be -1. As in torch's view, the
 * result must be expressible without copying: CKPT_EUNSUPPORTED when a strided dimension
 * would have to be split by a size that does not divide it (e.g. after a transpose), or a
 * concatenation axis across its parts. */
CKPT_EXTERN(int) ckpt_node_reshape(ckpt_graph *g, const ckpt_node *x, int ndim, const int64_t *shape,
                                   const ckpt_node **out);
/* Elements [start, start+len) along axis. */
CKPT_EXTERN(int) ckpt_node_slice(ckpt_graph *g, const ckpt_node *x, int axis, int64_t start, int64_t len,
                                 const ckpt_node **out);
/* Join along axis; every other dimension and the dtype must agree. */
CKPT_EXTERN(int) ckpt_node_concat(ckpt_graph *g, const ckpt_node *const *xs, size_t n, int axis,
                                  const ckpt_node **out);
/* Round to dtype (exactly as ckpt_dtype_convert); a later cast converts the rounded values. */
CKPT_EXTERN(int) ckpt_node_cast(ckpt_graph *g, const ckpt_node *x, ckpt_dtype dtype, const ckpt_node **out);
/* Grow axis to new_len with zeros at the end (vocabulary padding); shrinking is a slice. */
CKPT_EXTERN(int) ckpt_node_pad(ckpt_graph *g, const ckpt_node *x, int axis, int64_t new_len, const ckpt_node **out);
/* Cut axis into n consecutive parts of the given sizes (they must sum to the axis). */
CKPT_EXTERN(int) ckpt_node_split(ckpt_graph *g, const ckpt_node *x, int axis, size_t n, const int64_t *sizes,
                                 const ckpt_node **outs);
/* Regrouping. The axis is a run of groups, each group n blocks of block_sizes[0..n) elements
 * (per-KV-group [q | k | v], per-rank [gate | up]); deinterleave gathers block j of every
 * group into outs[j]. interleave is its inverse: xs[j] holds the j-th blocks of all groups,
 * which are put back side by side, group by group. */
CKPT_EXTERN(int) ckpt_node_deinterleave(ckpt_graph *g, const ckpt_node *x, int axis, size_t n,
                                        const int64_t *block_sizes, const ckpt_node **outs);
CKPT_EXTERN(int) ckpt_node_interleave(ckpt_graph *g, const ckpt_node *const *xs, size_t n, int axis,
                                      const int64_t *block_sizes, const ckpt_node **out);

/* ---- queries ---- */

CKPT_EXTERN(ckpt_dtype) ckpt_node_dtype(const ckpt_node *x);
CKPT_EXTERN(int) ckpt_node_ndim(const ckpt_node *x);
CKPT_EXTERN(const int64_t *) ckpt_node_shape(const ckpt_node *x);
CKPT_EXTERN(int64_t) ckpt_node_numel(const ckpt_node *x);
/* Non-zero when the node is an input tensor as it is (same dtype and shape, C order):
 * writing it is a plain copy. */
CKPT_EXTERN(int) ckpt_node_is_copy(const ckpt_node *x);
/* One line saying how the node is computed, naming input tensors:
 * "transpose(concat[axis 0](q, k, v))". Appends to out. */
CKPT_EXTERN(int) ckpt_node_describe(const ckpt_node *x, ckpt_buf *out);
/* Elements [first, first+count) in C order, converted to dtype, into dst. */
CKPT_EXTERN(int) ckpt_node_read(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, void *dst);

/* ---- writing ---- */

typedef struct ckpt_graph_output {
    const char *name;
    const ckpt_node *node; /* outputs sharing one node share their storage where the format can */
    uint32_t flags;        /* CKPT_TENSOR_* */
} ckpt_graph_output;

/* Write the outputs, in this order, as one file of opts->format (or the format of path's
 * extension). opts->dtype casts floating-point outputs; opts->unknown and ->protocol apply as
 * in ckpt_convert. The same atomic guarantee and report rules as ckpt_convert. */
CKPT_EXTERN(int) ckpt_graph_write(const ckpt_graph_output *outputs, size_t n, const char *path,
                                  const ckpt_convert_options *opts, ckpt_convert_report *report);

CKPT_END_DECL

#endif
