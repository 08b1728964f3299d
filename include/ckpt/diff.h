/* Comparing two checkpoints tensor by tensor: which names only one side has, which dtypes
 * and shapes changed, and for every common tensor whether its values are equal, how far
 * apart they are (largest absolute and relative difference) and where they first differ.
 *
 * Both sides are given as named graph nodes at full shape, so a checkpoint of many files
 * (a Megatron-LM or PaddleNLP set) is compared as the model its files make together, and a
 * map (ckpt/rules.h) can bring one side's names and layout to the other's. ckpt_whole_open
 * gives any path ckpt_open or ckpt_set_open reads as such a list. Values are read in chunks,
 * in parallel, in the memory the options allow; nothing is held whole. */
#ifndef CKPT_DIFF_H
#define CKPT_DIFF_H

#include "graph.h"
#include "rules.h"

CKPT_BEGIN_DECL

/* ---- a checkpoint as whole tensors ---- */

typedef struct ckpt_whole ckpt_whole;

/* Open path as named full tensors: a file or directory a format reads (ckpt_open: a single
 * file of any format, a sharded safetensors index, a DeepSpeed ZeRO directory, consolidated);
 * a PaddleNLP directory (the model its TP/PP/sharding ranks make, optimizer files not read);
 * a Hugging Face directory (its model.safetensors[.index.json] or pytorch_model.bin); a
 * Megatron-LM checkpoint root or iteration directory, --ckpt-format torch or torch_dist (the
 * model its ranks make). Errors name the path and why; a directory none of these reads is
 * CKPT_EUNSUPPORTED of class CKPT_ERRCLASS_LAYOUT. Nothing but metadata is read. */
CKPT_EXTERN(int) ckpt_whole_open(ckpt_whole **out, const char *path);
/* NULL-safe. */
CKPT_EXTERN(void) ckpt_whole_close(ckpt_whole *w);

/* What was opened, in words: "safetensors", "Megatron-LM set (TP 2, PP 1)", ... */
CKPT_EXTERN(const char *) ckpt_whole_kind(const ckpt_whole *w);
/* The config.json of the directory (Hugging Face, PaddleNLP), or NULL. */
CKPT_EXTERN(const char *) ckpt_whole_config(const ckpt_whole *w);
/* The graph the tensors' nodes live in (a map applied to them builds there). */
CKPT_EXTERN(ckpt_graph *) ckpt_whole_graph(ckpt_whole *w);
CKPT_EXTERN(size_t) ckpt_whole_count(const ckpt_whole *w);
/* Name of tensor i, its node in *node; borrowed until ckpt_whole_close. */
CKPT_EXTERN(const char *) ckpt_whole_at(const ckpt_whole *w, size_t i, const ckpt_node **node);
/* Whether tensor i is a module's state rather than a weight: a `_extra_state` entry
 * (PyTorch's Module.get_extra_state; Transformer Engine keeps its FP8 metadata there). */
CKPT_EXTERN(int) ckpt_whole_is_state(const ckpt_whole *w, size_t i);
/* The model parameters the checkpoint states about itself, for a map: every top-level
 * integer of its config.json (Hugging Face, PaddleNLP), or of a Megatron-LM checkpoint's
 * args under the names the maps use (num_attention_heads, num_key_value_heads from
 * num_query_groups, hidden_size, head_dim from kv_channels, vocab_size, padded_vocab_size
 * from the rows of the stored vocabulary; and num_layers, ffn_hidden_size,
 * num_query_groups, kv_channels, tensor_ and pipeline_model_parallel_size as args name
 * them). Values already set in p win. */
CKPT_EXTERN(int) ckpt_whole_map_params(const ckpt_whole *w, ckpt_map_params *p);
/* Where ckpt_whole_map_params takes them from, in words ("config.json", "Megatron-LM
 * args"); "no config.json or args" for a checkpoint that states none. */
CKPT_EXTERN(const char *) ckpt_whole_params_source(const ckpt_whole *w);
/* Replace the tensors by what `map` makes of them (names matched by no rule pass through).
 * State entries (ckpt_whole_is_state) do not go through the map: they stay as they are,
 * after the mapped tensors. Errors are the map's: a missing parameter, a tensor a strict
 * rule needs. */
CKPT_EXTERN(int) ckpt_whole_apply_map(ckpt_whole *w, const ckpt_map *map, const ckpt_map_params *params);
/* Bring one of two checkpoints to the other's names through `map`. The side it renames is
 * A (*mapped 0), unless A's names are the map's target kind and B's its source kind, then
 * B (*mapped 1): `diff MEGATRON HF --map hf_llama_megatron` works either way round. The
 * map's parameters are those already in `params` (the caller's), then what the renamed
 * side, then the other, states of itself (ckpt_whole_map_params). A parameter neither
 * states is CKPT_EINVALID of class CKPT_ERRCLASS_ARGUMENT, naming it and where it would
 * come from. */
CKPT_EXTERN(int) ckpt_whole_map_pair(ckpt_whole *const w[2], const ckpt_map *map, ckpt_map_params *params,
                                     int *mapped);

/* ---- the comparison ---- */

typedef struct ckpt_diff_input {
    const char *name;
    const ckpt_node *node;
    int state;              /* not a weight (ckpt_whole_is_state): compared when both sides
                               have it; on one side only, CKPT_DIFF_STATE_ONLY_A/_B */
} ckpt_diff_input;

typedef enum ckpt_diff_status {
    CKPT_DIFF_EQUAL = 0,    /* every element equal: the same bytes when the dtypes are the same */
    CKPT_DIFF_CLOSE,        /* values differ, every one within the tolerance */
    CKPT_DIFF_DIFFERENT,    /* some element outside the tolerance */
    CKPT_DIFF_ONLY_A,       /* the name is only in A */
    CKPT_DIFF_ONLY_B,
    CKPT_DIFF_SHAPE,        /* the shapes differ: values not compared */
    CKPT_DIFF_INCOMPARABLE, /* complex against real values: not compared */
    CKPT_DIFF_UNREAD,       /* names only: values not read */
    CKPT_DIFF_STATE_ONLY_A, /* a state entry (not a weight) only A has: listed, not a difference */
    CKPT_DIFF_STATE_ONLY_B
} ckpt_diff_status;

typedef struct ckpt_diff_entry {
    const char *name;              /* borrowed from the inputs */
    ckpt_diff_status status;
    ckpt_dtype dtype_a, dtype_b;   /* CKPT_DTYPE_INVALID on the side that lacks the name */
    int ndim_a, ndim_b;
    int64_t shape_a[CKPT_MAX_DIMS], shape_b[CKPT_MAX_DIMS];
    /* compared values (CKPT_DIFF_EQUAL, _CLOSE, _DIFFERENT) */
    uint64_t elements;             /* compared */
    uint64_t unequal;              /* elements not equal (NaN against NaN counts equal) */
    uint64_t mismatched;           /* elements outside the tolerance */
    uint64_t nan_mismatched;       /* NaN on one side only (outside any tolerance) */
    double max_abs;                /* max |a - b| over the elements where neither is NaN */
    double max_rel;                /* max |a - b| / |b|; a difference where b is 0 is +inf */
    int64_t first;                 /* C-order index of the first element outside the tolerance,
                                      else of the first unequal one; -1 when all are equal */
    int64_t first_index[CKPT_MAX_DIMS]; /* `first` as an index into shape_a */
    double first_a, first_b;       /* the values there (complex: the real parts) */
} ckpt_diff_entry;

typedef struct ckpt_diff_options {
    unsigned version;
    double rtol, atol;             /* |a - b| <= atol + rtol * |b| is within the tolerance
                                      (numpy.allclose); both 0: exact */
    int names_only;                /* compare names, dtypes and shapes; read no values */
    const char *const *exclude;    /* NULL-terminated glob patterns (fnmatch): names left out on
                                      both sides; NULL: none */
    uint64_t memory;               /* bytes of buffers for all threads (at least 4096 elements
                                      of each side per thread); 0: 512 MiB */
    int threads;                   /* 0: OpenMP's default */
    ckpt_progress_fn progress;     /* bytes of A compared so far, of all */
    void *progress_payload;
} ckpt_diff_options;

#define CKPT_DIFF_OPTIONS_VERSION 1
#define CKPT_DIFF_OPTIONS_INIT { CKPT_DIFF_OPTIONS_VERSION, 0.0, 0.0, 0, NULL, 0, 0, NULL, NULL }

typedef struct ckpt_diff_report {
    ckpt_diff_entry *entries;      /* A's names in A's order, then those only in B in B's order */
    size_t n;
    size_t equal, close, different, only_a, only_b, shape, incomparable, unread, state_only_a, state_only_b;
    size_t dtype_changed;          /* common names whose dtypes differ */
    uint64_t bytes_a, bytes_b;     /* tensor data compared on each side */
} ckpt_diff_report;

/* Compare b against a. Names must be unique on each side (CKPT_EINVALID naming the name and
 * the side). Values of different dtypes are compared as float64; complex ones as complex128,
 * |a - b| their modulus. Read errors name the tensor. *out is set on success; free it with
 * ckpt_diff_report_free. */
CKPT_EXTERN(int) ckpt_diff(const ckpt_diff_input *a, size_t na, const ckpt_diff_input *b, size_t nb,
                           const ckpt_diff_options *opts, ckpt_diff_report **out);
CKPT_EXTERN(void) ckpt_diff_report_free(ckpt_diff_report *r);
/* Whether the report says A and B hold the same tensors with the same shapes and values
 * within the tolerance; a dtype change counts unless ignore_dtype. State entries one side
 * lacks do not count: they hold no weights. */
CKPT_EXTERN(int) ckpt_diff_report_same(const ckpt_diff_report *r, int ignore_dtype);
/* "equal", "close", "DIFFERENT", "only in A", "only in B", "shape", "incomparable", "unread",
 * "state only A", "state only B" */
CKPT_EXTERN(const char *) ckpt_diff_status_name(ckpt_diff_status s);

CKPT_END_DECL

#endif
