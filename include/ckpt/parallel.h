/* Parallel layouts as data: how a model's tensors are spread over tensor-parallel (TP) ranks
 * and pipeline (PP) stages, so that one description gives both directions — merging the
 * shards of any layout into full tensors and splitting full tensors into any other layout.
 *
 * A layout spec is the `"parallel"` section of a map (formats/maps/README.md): each entry
 * matches tensor names by pattern and says how the tensor is split over TP ranks:
 *
 *   replicated   every rank holds the whole tensor (norms, row-parallel biases)
 *   column       cut along axis 0 (column-parallel weights and their biases; Megatron's fused
 *                QKV, whose per-query-group rows are cut contiguously even when there are
 *                fewer groups than ranks)
 *   row          cut along axis 1 (row-parallel weights)
 *   vocab        cut along axis 0, like column (embedding and output tables, whose rows are the
 *                vocabulary padded to a multiple of the TP size); merge and split never change a
 *                length, so re-padding to another padded vocabulary size is the caller's job
 *   swiglu       cut along axis 0 into [gate_r; up_r] per rank: the gate and up halves of the
 *                full tensor are cut separately and each rank holds its part of both
 *   sections     the same for any number of sections in a given ratio ("parts": parameter
 *                names or integers): Transformer Engine's fused QKV [q; k; v], whose sections
 *                are in the ratio of the head counts, is [q_r; k_r; v_r] on rank r
 *
 * (the axes are the defaults; an entry may name another), plus which names hold a layer index
 * (renumbered when pipeline stages change), which live on the first or the last stage only,
 * and which belong to experts. */
#ifndef CKPT_PARALLEL_H
#define CKPT_PARALLEL_H

#include "graph.h"
#include "rules.h"

CKPT_BEGIN_DECL

/* Append-only. */
typedef enum ckpt_tp_kind {
    CKPT_TP_REPLICATED = 0,
    CKPT_TP_COLUMN,
    CKPT_TP_ROW,
    CKPT_TP_VOCAB,
    CKPT_TP_SWIGLU,
    CKPT_TP_SECTIONS
} ckpt_tp_kind;

/* Sections a `sections` entry may name. */
#define CKPT_TP_SECTIONS_MAX 8

/* Where a tensor lives along the pipeline. */
typedef enum ckpt_stage {
    CKPT_STAGE_LAYER = 0, /* in a transformer layer: on the stage that holds the layer */
    CKPT_STAGE_FIRST,     /* first stage only (embeddings) */
    CKPT_STAGE_LAST,      /* last stage only (final norm, output layer) */
    CKPT_STAGE_EVERY      /* on every stage */
} ckpt_stage;

typedef struct ckpt_tensor_layout {
    ckpt_tp_kind tp;
    int axis;          /* the TP axis of split kinds: 1 for row, else 0, unless the entry gives
                          "axis"; 0 for replicated */
    ckpt_stage stage;
    int64_t layer;     /* the layer index in the name, -1 when the name has none */
    int expert;        /* an expert-parallel tensor (spread over EP ranks, not TP-merged across them) */
    const char *entry; /* the spec entry that matched, for messages; borrowed from the spec */
    int place;         /* that entry's place in the spec's list (its state-dict order), -1 for
                          the default */
    int n_sections;    /* sections: how many, and their ratio along the axis */
    int64_t sections[CKPT_TP_SECTIONS_MAX];
} ckpt_tensor_layout;

/* The map's "parallel" section; NULL when it has none. Borrowed from the map. */
typedef struct ckpt_parallel_spec ckpt_parallel_spec;
CKPT_EXTERN(const ckpt_parallel_spec *) ckpt_map_parallel(const ckpt_map *m);

/* How the tensor `name` (of `ndim` dimensions; 0 when unknown, e.g. a value that is not a
 * tensor) is laid out. Entries are tried in order; an entry with "when": P applies only when
 * parameter P is set and non-zero (P unset is CKPT_ENOTFOUND with class
 * CKPT_ERRCLASS_MAP_PARAM naming it, so a missing `swiglu` is never guessed; so is a
 * parameter a `sections` entry's parts name, or a part that is not positive). CKPT_ENOTFOUND
 * when no entry matches and the spec has no default; CKPT_EFORMAT when the entry cuts an axis
 * the tensor does not have (a `row` entry for a 1-D tensor). The stage is FIRST, LAST or
 * EVERY when a prefix of that list matches (tried in that order), else LAYER when the name
 * holds a layer index, else EVERY. */
CKPT_EXTERN(int) ckpt_parallel_classify(const ckpt_parallel_spec *s, const ckpt_map_params *params, const char *name,
                                        int ndim, ckpt_tensor_layout *out);

/* `name` with its layer index replaced by `layer`, in decimal (appended to out); nothing else
 * in the name changes. CKPT_EINVALID when the name holds no layer index or layer < 0. */
CKPT_EXTERN(int) ckpt_parallel_rename_layer(const ckpt_parallel_spec *s, const char *name, int64_t layer,
                                            ckpt_buf *out);

/* The full tensor from the shards of ranks 0..n-1 (n >= 1), lazily. Replicated tensors are
 * shard 0 (their bytes are not compared); split kinds concatenate, swiglu regroups the
 * per-rank [gate_r; up_r] into [gate; up], sections the per-rank [a_r; b_r; ...] into
 * [a; b; ...] (a shard whose length is not in the sections' ratio is CKPT_EFORMAT). Shards that differ in dtype or shape (or a swiglu
 * shard of odd length) are CKPT_EFORMAT with class CKPT_ERRCLASS_LAYOUT naming `name` and
 * the shapes. */
CKPT_EXTERN(int) ckpt_parallel_merge(ckpt_graph *g, const ckpt_tensor_layout *l, const char *name,
                                     const ckpt_node *const *shards, size_t n, const ckpt_node **out);

/* The shards of ranks 0..n-1 of a full tensor, lazily (replicated: the full tensor n times).
 * The split axis must divide by n (swiglu, sections: each section must), else CKPT_EINVALID with class
 * CKPT_ERRCLASS_LAYOUT naming `name`, the length and n. */
CKPT_EXTERN(int) ckpt_parallel_split(ckpt_graph *g, const ckpt_tensor_layout *l, const char *name,
                                     const ckpt_node *full, size_t n, const ckpt_node **outs);

CKPT_END_DECL

#endif
