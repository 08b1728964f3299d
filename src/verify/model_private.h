/* Internals of models (src/verify/model*.c, run.c, verify.c): the canonical tensors of
 * each tensor-parallel rank, and a layer's weights as the runner takes them. */
#ifndef CKPT_MODEL_PRIVATE_H
#define CKPT_MODEL_PRIVATE_H

#ifndef CKPT_BUILD
#error "model_private.h is private to the ckpt library"
#endif

#include <ckpt/sys/model.h>

typedef struct mtensor {
    const char *name; /* in the model's arena */
    const ckpt_node *node;
} mtensor;

/* One rank's tensors, sorted by name once the source is done. */
typedef struct mrank {
    mtensor *t;
    size_t n, cap;
} mrank;

typedef struct mkeep {
    void *resource;
    void (*release)(void *);
} mkeep;

struct ckpt_model {
    ckpt_model_config cfg;
    char *path;
    char kind[256];
    char config_source[512];
    const char *source; /* the model source's name */
    ckpt_graph *g;
    ckpt_arena *arena;
    int ranks;
    mrank *rank;
    mkeep *keep;
    size_t n_keep, cap_keep;
    char **notes;
    size_t n_notes;
    int64_t n_layer_window; /* flags cfg.layer_window points to (in the arena) */
    int64_t n_layer_moe;    /* flags cfg.layer_moe points to (in the arena) */
    int64_t *layers; /* sorted global indices */
    size_t n_layers;
    ckpt_dtype dtype;
    const ckpt_node *embed, *pos_embed, *final_w, *final_b, *output; /* vocabulary parts joined */
};

struct ckpt_model_builder {
    ckpt_model *m;
    const ckpt_model_options *opts;
};

/* A rank's part of a layer, in the runner's terms: gated MLPs have fc1 cut into its gate
 * and up halves. */
typedef struct vmlp {
    const ckpt_node *gate, *up, *bgate, *bup, *fc2; /* not gated: gate is fc1, up NULL */
    int64_t ffn;
} vmlp;

typedef struct vrank {
    const ckpt_node *attn_norm_w, *attn_norm_b, *mlp_norm_w, *mlp_norm_b;
    const ckpt_node *attn_post_w, *attn_post_b, *mlp_post_w, *mlp_post_b; /* sandwich norms */
    const ckpt_node *q_norm_w, *q_norm_b, *k_norm_w, *k_norm_b;
    const ckpt_node *q, *k, *v, *bq, *bk, *bv, *o; /* MLA: q is q_up (or q), k and v NULL */
    const ckpt_node *q_down, *q_down_norm, *kv_down, *kv_down_norm, *kv_up; /* MLA */
    vmlp mlp;        /* a dense layer's */
    vmlp *experts;   /* a MoE layer's: num_experts, this rank's part of each */
    vmlp shared;     /* a MoE layer's shared expert (ffn 0: none) */
    int64_t heads, kv_heads;
} vrank;

typedef struct vlayer {
    int64_t index;
    const ckpt_node *bo, *bfc2; /* row-parallel biases (rank 0's): added once */
    const ckpt_node *router;    /* a MoE layer's [experts, hidden] (rank 0's: every rank routes alike); NULL: dense */
    const ckpt_node *expert_bias; /* rank 0's [experts] where the config has one */
    int64_t n_experts;
    int n_ranks;
    vrank *rank;
} vlayer;

/* A model from `path` read by source `src` (ckpt_model_open: the source that bids highest;
 * opts not NULL, of this library's version). */
int ckpt_model__open_source(ckpt_model **out, const char *path, const ckpt_model_source_vtable *src,
                            const ckpt_model_options *opts);
/* Each way the configs of a and b differ, one sentence at a time to say (stops at its first
 * negative return, which it returns) (config_diff.c). */
int ckpt_model__config_diff(const ckpt_model *a, const ckpt_model *b, int (*say)(void *, const char *), void *payload);
/* The expert index of a canonical expert tensor's name (layers.L.moe.experts.E.*), else -1 (model.c). */
int64_t ckpt_model__expert_of(const char *name);
/* Whether layer L of the config is a MoE layer (model_config.c). */
int ckpt_model__layer_moe(const ckpt_model *m, int64_t L);
/* The layer index of a canonical layer name (-1 for a model-level name); -2 when the name is
 * not in the scheme (model.c). */
int64_t ckpt_model__canonical_layer(const char *name);
/* cfg.layer_window from n flags, copied into the model. */
int ckpt_model__set_layer_window(ckpt_model *m, const unsigned char *windowed, int64_t n);
/* cfg.layer_moe from n flags, copied into the model. */
int ckpt_model__set_layer_moe(ckpt_model *m, const unsigned char *moe, int64_t n);
/* Whether layer L attends through the sliding window (model_config.c). */
int ckpt_model__layer_windowed(const ckpt_model *m, int64_t L);
/* CKPT_EFORMAT naming the tensors the model holds but its config does not run (model_unused.c). */
int ckpt_model__check_unused(const ckpt_model *m);
/* The canonical tensor `name` of rank r, or NULL. */
const ckpt_node *ckpt_model__find(const ckpt_model *m, int r, const char *name);
/* Layer `index`'s weights, checked against the config (model_layer.c). Free with
 * ckpt_model__layer_dispose. */
int ckpt_model__layer(ckpt_model *m, int64_t index, vlayer *out);
void ckpt_model__layer_dispose(vlayer *l);
/* Pick the model-level tensors and check them against the config (model_layer.c). */
int ckpt_model__model_parts(ckpt_model *m);
/* Defaults, overrides and checks of the config once the source is done (model_config.c). */
int ckpt_model__finish_config(ckpt_model *m, const ckpt_model_config *overrides);
int ckpt_model__note(ckpt_model *m, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
/* The ranks merged into one (model_merge.c), for merge_tp. */
int ckpt_model__merge_ranks(ckpt_model *m);

#endif
