/* For framework implementers (formats/<framework>/<framework>_framework.c): the vtable a
 * framework exports, the builder its open hook fills, and the one rank loop every framework
 * that writes ranked files plans through. */
#ifndef CKPT_SYS_FRAMEWORK_H
#define CKPT_SYS_FRAMEWORK_H

#include "../framework.h"
#include "layout.h"
#include "model.h"

CKPT_BEGIN_DECL

#define CKPT_FRAMEWORK_ABI_VERSION 1

typedef struct ckpt_fw_builder ckpt_fw_builder;
CKPT_EXTERN(ckpt_graph *) ckpt_fw_builder_graph(ckpt_fw_builder *b);
CKPT_EXTERN(ckpt_set *) ckpt_fw_builder_set(ckpt_fw_builder *b); /* NULL for ckpt_fw_new */
CKPT_EXTERN(const ckpt_fw_options *) ckpt_fw_builder_options(const ckpt_fw_builder *b);
CKPT_EXTERN(const char *) ckpt_fw_builder_path(const ckpt_fw_builder *b); /* ckpt_fw_open's; NULL for ckpt_fw_new */
/* ckpt_fw_new's family, and its config in *c (both borrowed; NULL for ckpt_fw_open until the
 * framework gives them with ckpt_fw_builder_family). */
CKPT_EXTERN(const ckpt_family *) ckpt_fw_builder_target_family(const ckpt_fw_builder *b, const ckpt_family_config **c);
/* The model's family and config; the builder takes c. */
CKPT_EXTERN(int) ckpt_fw_builder_family(ckpt_fw_builder *b, const ckpt_family *f, ckpt_family_config *c);
/* The family an opened model's source says, read with status rc: on success as
 * ckpt_fw_builder_family; on failure c is freed, and the failure is returned where the
 * options need a family (conversions), else cleared and the model opens without one. */
CKPT_EXTERN(int) ckpt_fw_builder_family_read(ckpt_fw_builder *b, int rc, const ckpt_family *f, ckpt_family_config *c);
CKPT_EXTERN(int) ckpt_fw_builder_info(ckpt_fw_builder *b, const ckpt_fw_info *info); /* strings copied */
CKPT_EXTERN(int) ckpt_fw_builder_add(ckpt_fw_builder *b, const char *name, const ckpt_node *full,
                                     const ckpt_tensor_layout *l);

typedef struct ckpt_fw_vtable {
    unsigned abi_version; /* CKPT_FRAMEWORK_ABI_VERSION */
    const char *name, *description;
    const ckpt_layout_vtable *layout;       /* its directory scheme; NULL: none */
    /* Its verify source; NULL: none. ckpt_model_open asks the sources' own bids, not `bid`:
     * they also take single weights files, and a Hugging Face directory (config.json and
     * weights) bids 70 there, above every layout's bid but DeepSpeed's with a `latest` tag. */
    const ckpt_model_source_vtable *verify;
    int (*bid)(const char *path, int is_dir); /* -1 not mine, else how sure; NULL: the layout's */
    int (*open)(ckpt_fw_builder *b, void **state);
    int (*create)(ckpt_fw_builder *b, const ckpt_fw_target *t, void **state); /* NULL: read-only */
    int (*add)(void *state, const char *name, const ckpt_node *full);
    int (*plan)(void *state, const ckpt_fw_target *t, ckpt_plan *plan);
    void (*free)(void *state);
    void *(*native)(void *state); /* what ckpt_fw_native gives; NULL: state itself */
    /* Conversions to another framework (ckpt_job_plan); each NULL where there is nothing to do. */
    /* Why the framework leaves `name` out of another framework's model (module metadata no
     * other framework has a place for), before the family's rules; NULL: it does not. */
    const char *(*left_out)(void *state, const char *name);
    /* The tensors kept for the conversion against the model's config: missing, extra and
     * misshapen ones refused by name. */
    int (*check)(void *state, const ckpt_map_input *kept, size_t n);
    /* A created model's own map parameters (megatron: padded_vocab_size for its TP). */
    int (*map_params)(void *state, ckpt_map_params *p);
    /* What a source keeps for a target of framework `to` beyond tensors (megatron -> Hugging
     * Face: generation_config.json, a note on config.json). */
    int (*carry)(void *state, const char *to, ckpt_plan *plan);
} ckpt_fw_vtable;

/* The one rank loop: target coordinates in the framework's order, and each entry's per-slot TP
 * parts computed once (slot 0 the parameter; more for optimizer state). A row of parts is cut
 * by `split` when its TP rank 0 part is first asked for. ckpt_fw_ranks_each calls on_stage
 * (when not NULL) before the TP ranks of each stage (of each EP rank, EP outermost, in
 * CKPT_FW_RANKS_EP_PP_TP order; ep is 0 in CKPT_FW_RANKS_PP_TP order) and stops at the first
 * error. */
typedef struct ckpt_fw_ranks ckpt_fw_ranks;
typedef int (*ckpt_fw_split_fn)(void *state, size_t entry, size_t slot, int n_tp, const ckpt_node **parts);
typedef int (*ckpt_fw_stage_fn)(void *state, int pp, ckpt_fw_ranks *r);
typedef int (*ckpt_fw_rank_fn)(void *state, int tp, int pp, int ep, ckpt_fw_ranks *r);
enum { CKPT_FW_RANKS_EP_PP_TP = 0 /* megatron */, CKPT_FW_RANKS_PP_TP = 1 /* paddle */ };
CKPT_EXTERN(int) ckpt_fw_ranks_new(ckpt_fw_ranks **out, size_t n_entries, size_t n_slots, int n_tp,
                                   ckpt_fw_split_fn split, void *state);
CKPT_EXTERN(int) ckpt_fw_ranks_part(ckpt_fw_ranks *r, size_t entry, size_t slot, int tp, const ckpt_node **out);
CKPT_EXTERN(int) ckpt_fw_ranks_each(ckpt_fw_ranks *r, int order, int pp, int ep, ckpt_fw_stage_fn on_stage,
                                    ckpt_fw_rank_fn on_rank, void *state);
CKPT_EXTERN(void) ckpt_fw_ranks_free(ckpt_fw_ranks *r);

/* The tensors a created model is given (ckpt_fw_add) before it is planned, in the order given:
 * names copied, nodes borrowed from the graph. Zero-initialised is empty. */
typedef struct ckpt_fw_tensor_list {
    char **names;
    const ckpt_node **nodes;
    size_t n, cap;
} ckpt_fw_tensor_list;
CKPT_EXTERN(int) ckpt_fw_tensor_list_add(ckpt_fw_tensor_list *l, const char *name, const ckpt_node *node);
CKPT_EXTERN(void) ckpt_fw_tensor_list_dispose(ckpt_fw_tensor_list *l);

CKPT_END_DECL

#endif
