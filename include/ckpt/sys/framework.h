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
/* The model's family and config; the builder takes c. */
CKPT_EXTERN(int) ckpt_fw_builder_family(ckpt_fw_builder *b, const ckpt_family *f, ckpt_family_config *c);
CKPT_EXTERN(int) ckpt_fw_builder_info(ckpt_fw_builder *b, const ckpt_fw_info *info); /* strings copied */
CKPT_EXTERN(int) ckpt_fw_builder_add(ckpt_fw_builder *b, const char *name, const ckpt_node *full,
                                     const ckpt_tensor_layout *l);

typedef struct ckpt_fw_vtable {
    unsigned abi_version; /* CKPT_FRAMEWORK_ABI_VERSION */
    const char *name, *description;
    const ckpt_layout_vtable *layout;       /* its directory scheme; NULL: none */
    const ckpt_model_source_vtable *verify; /* its verify source; NULL: none */
    int (*bid)(const char *path, int is_dir); /* -1 not mine, else how sure */
    int (*open)(ckpt_fw_builder *b, void **state);
    int (*create)(ckpt_fw_builder *b, const ckpt_fw_target *t, void **state); /* NULL: read-only */
    int (*add)(void *state, const char *name, const ckpt_node *full);
    int (*plan)(void *state, const ckpt_fw_target *t, ckpt_plan *plan);
    void (*free)(void *state);
} ckpt_fw_vtable;

/* The one rank loop: target coordinates in the framework's order, and each entry's per-slot TP
 * parts computed once (slot 0 the parameter; more for optimizer state). */
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

CKPT_END_DECL

#endif
