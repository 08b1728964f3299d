/* Graph nodes, private to src/graph.
 *
 * A node has a core and a grouping. The core is what gets read: a strided view on an
 * input storage (LEAF), zeros, or a concatenation of other nodes along one axis. Its
 * shape is the "physical" shape. The logical shape, which users see, groups runs of
 * consecutive physical dimensions into one dimension each. Because both shapes list the
 * same elements in the same C order, regrouping is free. That is what lets reshape,
 * permute and slice stay lazy where a plain strided view could not express the result,
 * e.g. the transpose of one query block out of a per-KV-group interleaved QKV matrix. */
#ifndef CKPT_GRAPH_NODE_H
#define CKPT_GRAPH_NODE_H

#ifndef CKPT_BUILD
#error "node.h is private to the ckpt library"
#endif

#include <ckpt/graph.h>
#include <ckpt/value.h>

#define NODE_MAX_CASTS 4

typedef enum node_kind { NODE_LEAF, NODE_ZEROS, NODE_CONCAT } node_kind;

struct ckpt_graph {
    ckpt_arena *arena;
};

struct ckpt_node {
    node_kind kind;
    ckpt_dtype dtype; /* element type of the node's values */
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    int pndim;
    int64_t pshape[CKPT_MAX_DIMS];
    int group_end[CKPT_MAX_DIMS]; /* logical dim i covers physical [group_end[i-1], group_end[i]) */

    /* NODE_LEAF: the input tensor, the physical view on its storage, and the roundings
     * applied to the stored values, in order (the last one is dtype). */
    const ckpt_tensor *source;
    ckpt_tensor view;
    int n_casts;
    ckpt_dtype casts[NODE_MAX_CASTS];
    /* A block-scaled leaf (ckpt_node_block_dequant): each stored value, in float32, times the
     * scale of its block of the source, then the casts. The scales are read when the node is
     * made (one per block: a small fraction of the source). */
    const float *scale;
    int64_t scale_cols, block_rows, block_cols;

    /* NODE_ZEROS: every element is `fill` (one element of dtype; all-zero bits for zeros). */
    unsigned char fill[16];

    /* NODE_CONCAT: children whose logical shapes equal pshape except along axis. */
    int axis;
    size_t n_children;
    const ckpt_node **children;

    /* How the user built it, for ckpt_node_describe. */
    const char *op; /* NULL for a leaf as it was made */
    size_t n_inputs;
    const ckpt_node **inputs;
};

/* A copy of x without its history. */
int ckpt_node__copy(ckpt_graph *g, const ckpt_node *x, ckpt_node **out);
/* A copy of x with its physical dimensions as the logical ones. */
int ckpt_node__explode(ckpt_graph *g, const ckpt_node *x, ckpt_node **out);
/* A copy of x (any grouping) whose logical dims are x's logical dims grouped by
 * ends[0..n): new dim i covers old dims [ends[i-1], ends[i]). */
int ckpt_node__regroup(ckpt_graph *g, const ckpt_node *x, int n, const int *ends, ckpt_node **out);
/* A new zeroed node of the given kind, in the graph's arena. */
ckpt_node *ckpt_node__alloc(ckpt_graph *g, node_kind kind);
/* Identity grouping over pshape[0..pndim). */
void ckpt_node__set_identity(ckpt_node *x);
/* Record the user-level operation that produced x. */
int ckpt_node__history(ckpt_graph *g, ckpt_node *x, const char *op, const ckpt_node *const *inputs, size_t n);
/* The strided view a leaf reads with no rounding, else NULL: what the writer can copy
 * or stream without going through ckpt_node_read. */
const ckpt_tensor *ckpt_node__plain_view(const ckpt_node *x);
/* From element `first` of x (at most `count`): the run of elements stored as they are, in
 * `dtype`, contiguous in one mapped input file, at least `min_run` long: returns its length,
 * with *file and the byte offset *off where it starts. Otherwise *file is NULL and the
 * length returned is of elements to read with ckpt_node_read before asking again. */
int64_t ckpt_node__direct_run(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, int64_t min_run,
                              const ckpt_file **file, uint64_t *off);
/* The fewest elements of x, read into `dtype`, that one ckpt_node_read must cover for the
 * input pages it touches to be used up by it (ckpt_tensor__page_band): more than 1 where a
 * part of x transposes its input, so that reading x in steps shorter than this would map
 * each input page again for every step. */
int64_t ckpt_node__page_band(const ckpt_node *x, ckpt_dtype dtype, uint64_t page);
/* Multiply the float32 values of elements [first, first + count) of a block-scaled leaf
 * by their blocks' scales. */
void ckpt_node__scale(const ckpt_node *x, int64_t first, int64_t count, float *vals);
/* Hand back the mapped input pages a node reads (after its bytes were written), so that
 * strided reads do not keep whole tensors resident. */
void ckpt_node__release(const ckpt_node *x);
/* Normalise a possibly negative axis; error naming the op otherwise. */
int ckpt_node__axis(const ckpt_node *x, int axis, const char *op, int *out);

#endif
