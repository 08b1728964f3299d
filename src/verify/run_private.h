/* The runner shared by verify.c and run*.c: a backend with the device buffers in use, the
 * number of tokens, the type weights are brought to the device in, and the RoPE tables. */
#ifndef CKPT_RUN_PRIVATE_H
#define CKPT_RUN_PRIVATE_H

#ifndef CKPT_BUILD
#error "run_private.h is private to the ckpt library"
#endif

#include "model_private.h"
#include "verify_private.h"

typedef struct run_ctx {
    const ckpt_backend_vtable *vt;
    void *ctx;
    int threads;             /* for reading weights */
    int64_t tokens;
    ckpt_dtype wdtype;       /* linear weights and vocabulary tables are run in this type */
    int64_t rotary_dim;
    float *cos, *sin;        /* device, tokens x rotary_dim/2, for the model being run */
    float *cos_local, *sin_local; /* the same for its windowed layers (rope_theta_local); else cos, sin */
    void *live[64];          /* device buffers, released last-in first-out */
    size_t n_live;
    void *scratch[12];       /* activation buffers kept from layer to layer, grown on demand */
    size_t scratch_bytes[12];
    double seconds_load, seconds_run;
} run_ctx;

double ckpt_run__now(void);
int ckpt_run__alloc(run_ctx *r, size_t bytes, void **out);
/* Scratch buffer `slot` of at least `bytes`, kept until ckpt_run__release_all. */
int ckpt_run__scratch(run_ctx *r, int slot, size_t bytes, void **out);
/* Every buffer, live and scratch. */
void ckpt_run__release_all(run_ctx *r);

/* One tensor to bring to the device: as `dtype`, 1-D parameters plus one when asked. */
typedef struct upload_job {
    const ckpt_node *node;
    ckpt_dtype dtype;
    int plus_one;
    void **dst;
    void *host;
    size_t bytes;
} upload_job;

/* Read every job's tensor (in parallel: the reads are independent) into a live device buffer
 * of its own. */
int ckpt_run__upload(run_ctx *r, upload_job *jobs, size_t n);

/* Float32 values of a 1-D parameter (norm weight, bias) rounded through r->wdtype, as the
 * model's other weights are, then 1 added when the config stores norm weights minus one. */
int ckpt_run__round_f32(const run_ctx *r, float *v, int64_t n, int plus_one);
/* The RoPE cos/sin tables of model m for r->tokens positions (nothing for other position
 * kinds), a second pair for windowed layers of their own base; they stay until the buffers
 * allocated before them are released. */
int ckpt_run__rope(run_ctx *r, const ckpt_model *m);
/* delta = layer(x) - x, computed as what the layer adds to the residual stream; out = x +
 * delta when out is not NULL. x, delta, out: device, tokens x hidden. */
int ckpt_run__layer(run_ctx *r, const ckpt_model *m, const vlayer *l, const float *x, float *delta, float *out);
/* The attention half of layer l alone (its ranks' parts summed, the bias and a sandwich norm
 * applied) for x into y (device, tokens x hidden). */
int ckpt_run__attention(run_ctx *r, const ckpt_model *m, const vlayer *l, const float *x, float *y);
/* The embeddings of `ids` (host; every id below the vocabulary size), positions added when
 * learned, into out (device, tokens x hidden). */
int ckpt_run__embed(run_ctx *r, const ckpt_model *m, const int32_t *ids, float *out);
/* The final norm of x into y. */
int ckpt_run__final_norm(run_ctx *r, const ckpt_model *m, const float *x, float *y);
/* Logits over the first `vocab` rows of the output layer for normalised x into y (device,
 * tokens x vocab). */
int ckpt_run__logits(run_ctx *r, const ckpt_model *m, const float *x, int64_t vocab, float *y);

/* ---- multi-head latent attention (run_mla.c) ---- */

/* The head size MLA runs every head at: the larger of qk_nope + qk_rope and v_head_dim, raised
 * to a size every backend's attention runs. */
int64_t ckpt_run__mla_head(const ckpt_model_config *c);
/* Rank v's MLA output for normalised h1 (device, tokens x hidden) into attn (device, tokens x
 * hidden): its heads' row-parallel part, bo (device, or NULL) added by the first rank, the
 * other ranks' parts accumulated. */
int ckpt_run__mla(run_ctx *r, const ckpt_model *m, const vrank *v, const float *h1, const void *bo, int first,
                  float *attn);

/* ---- mixture of experts (run_moe.c) ---- */

/* Each token's top-k experts (idx: tokens x k, best first; of equal scores the lower index)
 * and their weights (w: tokens x k) from router logits (tokens x experts, host), by score
 * kind `score` (ckpt_moe_score_kind), times `scale`. NaN logits rank below every number. 0, or
 * CKPT_ENOMEM. */
int ckpt_moe__route(const float *logits, int64_t tokens, int64_t experts, int64_t k, int score, double scale,
                    int32_t *idx, float *w);
/* How a router chooses beyond its score kind and scale: DeepSeek-V3's expert bias (host, one
 * per expert, added to the sigmoid scores for the choice only; NULL: none) and group-limited
 * choice (the experts in n_group equal groups, each group scored by the sum of its group_top
 * best biased scores, the experts of the topk_group best groups only; n_group 1: none). */
typedef struct ckpt_moe_routing {
    int score;
    double scale;
    const float *bias;
    int64_t n_group, topk_group, group_top; /* group_top: how many best of a group sum to its score */
    int norm; /* CKPT_MOE_SIGMOID: divide the k weights by their sum when k > 1 */
} ckpt_moe_routing;
/* As ckpt_moe__route, by `how`. */
int ckpt_moe__route_with(const float *logits, int64_t tokens, int64_t experts, int64_t k, const ckpt_moe_routing *how,
                         int32_t *idx, float *w);
/* Layer l's routing as its model's config says, its expert bias (if any) read into `bias`
 * (host, l->n_experts floats). */
int ckpt_moe__routing_of(const ckpt_model *m, const vlayer *l, float *bias, ckpt_moe_routing *how);
/* Router logits of `rows` rows of x (device, rows x hidden) into y (device, rows x experts). */
int ckpt_run__router(run_ctx *r, const ckpt_model *m, const vlayer *l, int64_t rows, const float *x, float *y);
/* Expert e of MoE layer l (-1: its shared expert) on `rows` rows of x into y (device, rows x
 * hidden): its ranks' column parts side by side, their row parts summed. */
int ckpt_run__expert(run_ctx *r, const ckpt_model *m, const vlayer *l, int64_t e, int64_t rows, const float *x,
                     float *y);
/* A MoE layer's MLP output for normalised x (device, tokens x hidden) into y: each token
 * through its top-k experts, their outputs weighted by the router and summed, plus the
 * shared expert's output. */
int ckpt_run__moe(run_ctx *r, const ckpt_model *m, const vlayer *l, const float *x, float *y);

#endif
