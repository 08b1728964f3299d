/* Writing the logical model of a Megatron checkpoint at another TP/PP/VPP layout.
 *
 * Each target rank file takes its top-level entries from a template: the source rank file
 * at the same coordinates, a coordinate beyond the source's layout taken as 0 (so rng states
 * stay per rank where the rank exists, and tensor-parallel streams stay distinct). `args` is rewritten, the model chunks are built from the logical model, the
 * optimizer state is written from its parameters' moments (megatron_optim_plain.c, the
 * distributed optimizer's megatron_distopt_write.c) or dropped, and every other entry is
 * carried as it is. */
#include "optimizer/megatron_distopt.h"
#include "megatron_private.h"

#include <ckpt/sys/framework.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXTRA_STATE_SUFFIX "._extra_state"
#define OUTPUT_WEIGHT "output_layer.weight"
#define EMBEDDING_WEIGHT "embedding.word_embeddings.weight"

typedef struct target_ctx {
    ckpt_megatron *m;
    const ckpt_megatron_target *t;
    ckpt_plan *plan;
    ckpt_arena *arena;
    int64_t padded_vocab;
    ckpt_fw_ranks *ranks;     /* the rank loop; its parts: [entry][tp'] */
    size_t file;              /* the plan file being built */
    const mg_rank *template_rank;
    int drop_output;          /* tied embeddings at one stage: no output_layer.weight */
    int mtp;                  /* multi-token prediction layers: the last stage keeps the embedding too */
    int ep_size;              /* the target's EP */
    int tp, pp, ep;           /* the rank being written */
    int etp;                  /* its expert TP rank */
    int dense_rank;           /* its rank in the dense optimizer's data-parallel group */
    mg_split split;           /* the target's layers per chunk */
} target_ctx;

/* TP rank c->tp's part of entry i (ckpt_megatron__grouped_part's callback). */
static int part_at(void *state, size_t i, const ckpt_node **out);

static int resize_vocab(const ckpt_megatron *m, int64_t padded, const mg_entry *e, const ckpt_node *full,
                        const ckpt_node **out)
{
    int64_t rows = ckpt_node_shape(full)[0];
    int64_t true_vocab = m->info.true_vocab_size;

    *out = full;
    if (rows == padded)
        return 0;
    if (rows < padded)
        return ckpt_node_pad(m->g, full, 0, padded, out);
    if (!true_vocab)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: cutting %lld vocabulary rows to %lld needs the true vocabulary size, which args "
                               "do not hold; give it (--true-vocab-size)",
                               e->name, (long long)rows, (long long)padded);
    if (true_vocab > padded)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: padded vocabulary size %lld is smaller than the true vocabulary (%lld rows)",
                               e->name, (long long)padded, (long long)true_vocab);
    return ckpt_node_slice(m->g, full, 0, 0, padded, out);
}

int ckpt_megatron__split(const ckpt_megatron *m, const ckpt_megatron_target *t, int64_t padded_vocab,
                         const mg_entry *e, const ckpt_node *full, const ckpt_node **outs)
{
    int rc;

    if (e->layout.tp == CKPT_TP_VOCAB && (rc = resize_vocab(m, padded_vocab, e, full, &full)) < 0)
        return rc;
    return ckpt_parallel_split(m->g, &e->layout, e->name, full, (size_t)t->tp, outs);
}

static int split_entry(void *state, size_t i, size_t slot, int n_tp, const ckpt_node **parts)
{
    target_ctx *c = state;

    (void)slot;
    (void)n_tp;
    return ckpt_megatron__split(c->m, c->t, c->padded_vocab, &c->m->entries[i], c->m->entries[i].full, parts);
}

/* The target TP rank's part of entry i. */
static int shard_of(target_ctx *c, size_t i, int tp, const ckpt_node **out)
{
    const mg_entry *e = &c->m->entries[i];

    /* experts cut over their own TP size */
    if (e->layout.expert && ckpt_megatron__etp(c->t) != c->t->tp)
        return ckpt_megatron__part(c->m, c->t, c->padded_vocab, e, e->full, tp, c->etp, out);
    return ckpt_fw_ranks_part(c->ranks, i, 0, tp, out);
}

static ckpt_value *new_str(ckpt_arena *a, const char *s)
{
    return ckpt_value_new_str(a, s, strlen(s));
}

typedef struct carry_ctx {
    ckpt_plan *plan;
    size_t file;
    ckpt_graph *g;
    const ckpt_ckpt *src;
} carry_ctx;

/* Tensors of carried values (rng states) become tensors of the output file. */
static int carry_tensor(const ckpt_value *leaf, size_t *index, void *payload)
{
    const carry_ctx *c = payload;
    const ckpt_tensor *t = c->src ? ckpt_tensor_at(c->src, leaf->u.tensor.index) : NULL;
    const ckpt_node *node;
    int rc;

    if (!t)
        return ckpt_error_set(CKPT_EFORMAT, "%s: tensor #%zu out of range", c->src ? ckpt_path(c->src) : "args",
                              leaf->u.tensor.index);
    ckpt_buf name = CKPT_BUF_INIT;

    if ((rc = ckpt_node_tensor(c->g, t, &node)) < 0)
        return rc;
    /* carried tensors of several source files meet in one output: named after their source */
    if ((rc = ckpt_buf_printf(&name, "%s:%s", ckpt_path(c->src), t->name)) == 0)
        rc = ckpt_plan_add_tensor(c->plan, c->file, (const char *)name.data, node, t->flags, index);
    ckpt_buf_dispose(&name);
    return rc;
}

int ckpt_megatron__carry(ckpt_plan *plan, size_t file, ckpt_graph *g, const ckpt_ckpt *src, const ckpt_value *v,
                         ckpt_value **out)
{
    carry_ctx c = { plan, file, g, src };
    return ckpt_value_clone(ckpt_plan_arena(plan), v, carry_tensor, &c, out);
}

static int carry(target_ctx *c, const ckpt_ckpt *src, const ckpt_value *v, ckpt_value **out)
{
    return ckpt_megatron__carry(c->plan, c->file, c->m->g, src, v, out);
}

static int set_attr(ckpt_arena *a, ckpt_value *dict, const char *name, ckpt_value *v)
{
    ckpt_value *key = new_str(a, name);
    return key && v ? ckpt_value_dict_set(a, dict, key, v) : CKPT_ENOMEM;
}

/* Whether entry e belongs to chunk (pp, vp) of the target, whose layers are [lo, hi). */
static int in_chunk(const target_ctx *c, const mg_entry *e, int pp, int vp, int ep, int64_t lo, int64_t hi)
{
    int first = pp == 0 && vp == 0, last = pp == c->t->pp - 1 && vp == c->t->vpp - 1;

    if (!ckpt_megatron__on_ep(c->m, e, c->ep_size, ep))
        return 0;
    switch (e->layout.stage) {
    case CKPT_STAGE_FIRST:
        /* GPTModel builds an embedding wherever the MTP block is (mtp_process), a copy of the
         * first stage's that the MTP layers read */
        return first || (last && c->mtp && strcmp(e->name, EMBEDDING_WEIGHT) == 0);
    case CKPT_STAGE_LAST:
        return last;
    case CKPT_STAGE_EVERY:
        return 1;
    default:
        return e->layout.layer >= lo && e->layout.layer < hi;
    }
}

/* e's key in its target chunk: its layer and its expert local to it. */
static int local_name(const target_ctx *c, const mg_entry *e, int64_t lo, ckpt_buf *out)
{
    ckpt_buf layer = CKPT_BUF_INIT;
    int rc;

    /* a multi-token prediction layer's experts (mtp.layers.<i>.transformer_layer.mlp.experts.)
     * are numbered per EP rank as the decoder's */
    if (e->layout.layer < 0)
        return e->expert < 0 ? ckpt_buf_puts(out, e->name)
                             : ckpt_megatron__local_expert_name(c->m, e, c->ep_size, e->name, out);
    if (e->expert < 0)
        return ckpt_parallel_rename_layer(c->m->spec, e->name, e->layout.layer - lo, out);
    if ((rc = ckpt_parallel_rename_layer(c->m->spec, e->name, e->layout.layer - lo, &layer)) == 0)
        rc = ckpt_megatron__local_expert_name(c->m, e, c->ep_size, (const char *)layer.data, out);
    ckpt_buf_dispose(&layer);
    return rc;
}

static int empty_extra_state(target_ctx *c, const char *key, size_t *index)
{
    const ckpt_node *node;
    int64_t zero = 0;
    int rc = ckpt_node_zeros(c->m->g, CKPT_DTYPE_U8, 1, &zero, &node);
    return rc < 0 ? rc : ckpt_plan_add_tensor(c->plan, c->file, key, node, 0, index);
}

/* The model dict of target chunk (pp, vp) at TP rank tp; params collects its parameters in
 * state-dict order, for the optimizer. */
static int build_chunk(target_ctx *c, int tp, int pp, int vp, int ep, const char *chunk, const ckpt_value *cls,
                       ckpt_value **out, mg_param_out **params, size_t *n_params)
{
    int64_t lo = ckpt_megatron__split_offset(&c->split, pp, vp);
    int64_t hi = lo + ckpt_megatron__split_layers(&c->split, pp, vp);
    ckpt_arena *a = c->arena;
    ckpt_value *dict = ckpt_value_new(a, CKPT_VAL_DICT);
    ckpt_buf key = CKPT_BUF_INIT, tname = CKPT_BUF_INIT;
    size_t i;
    int rc = dict ? 0 : CKPT_ENOMEM;

    if (dict)
        dict->u.dict.cls = (ckpt_value *)cls;
    for (i = 0; i < c->m->n_entries && rc == 0; i++) {
        const mg_entry *e = &c->m->entries[i];
        int extra = strlen(e->name) > strlen(EXTRA_STATE_SUFFIX) &&
                    strcmp(e->name + strlen(e->name) - strlen(EXTRA_STATE_SUFFIX), EXTRA_STATE_SUFFIX) == 0;
        ckpt_value *v = NULL;
        size_t index;

        if (!in_chunk(c, e, pp, vp, ep, lo, hi) || (extra && c->t->extra_state == CKPT_MEGATRON_EXTRA_DROP) ||
            (c->drop_output && strcmp(e->name, OUTPUT_WEIGHT) == 0))
            continue;
        if (e->expert >= 0 && ckpt_megatron__grouped_out(c->m, c->t) && !c->m->te_out) {
            const char *which = NULL;
            const ckpt_node *w = NULL;
            if (e->layout.layer < 0) {
                rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                     "%s: a multi-token prediction layer's experts are not written as grouped GEMM "
                                     "weights (--moe-grouped-gemm off)", e->name);
                break;
            }
            c->tp = tp;
            if ((rc = ckpt_megatron__grouped_part(c->m, i, c->ep_size, part_at, c, &which, &w)) <= 0)
                continue;
            ckpt_buf_clear(&key);
            ckpt_buf_clear(&tname);
            if ((rc = ckpt_buf_printf(&key, "decoder.layers.%lld.mlp.experts.%s", (long long)(e->layout.layer - lo),
                                      which)) == 0 &&
                (rc = ckpt_buf_printf(&tname, "%s/%s", chunk, (const char *)key.data)) == 0 &&
                (rc = ckpt_plan_add_tensor(c->plan, c->file, (const char *)tname.data, w, 0, &index)) == 0)
                rc = set_attr(a, dict, (const char *)key.data, ckpt_value_new_tensor(a, index));
            continue;
        }
        ckpt_buf_clear(&key);
        ckpt_buf_clear(&tname);
        if ((rc = local_name(c, e, lo, &key)) < 0)
            break;
        ckpt_buf_printf(&tname, "%s/%s", chunk, (const char *)key.data);
        if (extra && c->t->extra_state == CKPT_MEGATRON_EXTRA_EMPTY) {
            rc = empty_extra_state(c, (const char *)tname.data, &index);
            v = rc == 0 ? ckpt_value_new_tensor(a, index) : NULL;
        } else if (e->full) {
            const ckpt_node *shard;
            rc = shard_of(c, i, tp, &shard);
            if (rc == 0)
                rc = ckpt_plan_add_tensor(c->plan, c->file, (const char *)tname.data, shard, 0, &index);
            v = rc == 0 ? ckpt_value_new_tensor(a, index) : NULL;
            if (rc == 0 && e->param) {
                mg_param_out *grown = realloc(*params, (*n_params + 1) * sizeof **params);
                if (!grown) {
                    rc = ckpt_error_oom();
                    break;
                }
                *params = grown;
                grown[*n_params].entry = e;
                grown[*n_params].chunk = vp;
                grown[(*n_params)++].shard = shard;
            }
        } else {
            rc = carry(c, e->src, e->value, &v);
        }
        if (rc == 0)
            rc = set_attr(a, dict, (const char *)key.data, v);
    }
    ckpt_buf_dispose(&key);
    ckpt_buf_dispose(&tname);
    *out = dict;
    return rc;
}

static int part_at(void *state, size_t i, const ckpt_node **out)
{
    target_ctx *c = state;
    return shard_of(c, i, c->tp, out);
}

static int rank_rel(const target_ctx *c, int tp, int pp, int ep, const char *file, ckpt_buf *out)
{
    int rc = c->m->release ? ckpt_buf_puts(out, "release/")
                         : ckpt_buf_printf(out, "iter_%07lld/", (long long)c->m->info.iteration);

    if (rc == 0)
        rc = ckpt_buf_printf(out, "mp_rank_%02d", tp);
    if (rc == 0 && c->t->pp > 1)
        rc = ckpt_buf_printf(out, "_%03d", pp);
    if (rc == 0 && c->ep_size > 1)
        rc = ckpt_buf_printf(out, "_%03d", ep);
    return rc == 0 ? ckpt_buf_printf(out, "/%s", file) : rc;
}

/* A torch_dist source's distributed optimizer state, read per parameter (megatron_dist_optim.c):
 * its rank files get model_optim_rng.pt's optimizer and scheduler from its common.pt. */
static int dist_distributed(const ckpt_megatron *m)
{
    return m->dist && m->moments && (m->dist_form == MG_DIST_FULLY || m->dist_form == MG_DIST_DP);
}

/* The distributed optimizer's state written (the source's kept, or asked for): distrib_optim.pt
 * beside each rank file. */
static int distributed_target(const target_ctx *c)
{
    return (c->t->optimizer == CKPT_MEGATRON_OPTIM_KEEP &&
            ((c->m->info.distributed_optimizer && !c->m->dist) || dist_distributed(c->m))) ||
           c->t->optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED;
}

static int build_rank(target_ctx *c, int tp, int pp, int ep)
{
    const mg_rank *tmpl = mg_rank_at(c->m, tp < c->m->info.tp ? tp : 0, pp < c->m->info.pp ? pp : 0,
                                     ep < c->m->info.ep ? ep : 0);
    const ckpt_value *troot = tmpl->root;
    ckpt_value *root = ckpt_value_new(c->arena, CKPT_VAL_DICT);
    mg_param_out *params = NULL;
    const ckpt_value *targs = NULL;
    size_t i, n_params = 0;
    ckpt_buf rel = CKPT_BUF_INIT;
    int rc, models_done = 0;

    if (!root)
        return CKPT_ENOMEM;
    root->u.dict.cls = troot->u.dict.cls;
    c->template_rank = tmpl;
    c->tp = tp;
    c->pp = pp;
    c->ep = ep;
    if ((rc = rank_rel(c, tp, pp, ep, "model_optim_rng.pt", &rel)) < 0 || (rc = ckpt_plan_add_file(c->plan, (const char *)rel.data, "torch", &c->file)) < 0)
        goto done;
    for (i = 0; i < troot->u.dict.map.n && rc == 0; i++) {
        const ckpt_value *k = troot->u.dict.map.keys[i], *v = troot->u.dict.map.vals[i];
        const char *key = k->kind == CKPT_VAL_STR ? k->u.str.ptr : "";
        ckpt_value *copy = NULL;

        if (strcmp(key, "args") == 0) {
            mg_args_at at = { c->template_rank, c->padded_vocab, c->ep_size, c->etp, c->pp, c->ep };
            rc = ckpt_megatron__rewrite_args(c->m, c->t, c->plan, c->file, &at, v, &copy);
            targs = copy;
        } else if (strncmp(key, "model", 5) == 0 && (!key[5] || (key[5] >= '0' && key[5] <= '9'))) {
            const ckpt_value *cls = v->kind == CKPT_VAL_DICT ? v->u.dict.cls : NULL;
            int vp;
            if (models_done++)
                continue;
            for (vp = 0; vp < c->t->vpp && rc == 0; vp++) {
                char name[32];
                if (c->t->vpp > 1)
                    snprintf(name, sizeof name, "model%d", vp);
                else
                    snprintf(name, sizeof name, "model");
                if ((rc = build_chunk(c, tp, pp, vp, ep, name, cls, &copy, &params, &n_params)) == 0)
                    rc = set_attr(c->arena, root, name, copy);
            }
            continue;
        } else if (strcmp(key, "optimizer") == 0 || strcmp(key, "opt_param_scheduler") == 0) {
            if (c->t->optimizer == CKPT_MEGATRON_OPTIM_DROP || v->kind == CKPT_VAL_NONE)
                continue;
            /* the distributed optimizer's holds no parameter state: hyper-parameters and
             * steps per group, the grad scaler */
            if (strcmp(key, "optimizer") == 0 && distributed_target(c) && c->m->info.distributed_optimizer)
            {
                rc = carry(c, tmpl->ck, ckpt_megatron__ep_optimizer_value(c->m, c->ep_size, v), &copy);
                /* EP 1 -> N: the experts get an optimizer of their own */
                if (rc == 0 && c->m->info.ep == 1 && c->ep_size > 1 && ckpt_megatron__num_experts(c->m->args) > 0)
                    rc = ckpt_megatron__ep_chain(c->m, c->arena, copy, &copy);
            }
            else if (strcmp(key, "optimizer") == 0 && distributed_target(c))
                rc = ckpt_megatron__optimizer_distributed(c->m, c->plan, c->file, tmpl, c->t, &copy);
            else if (strcmp(key, "optimizer") == 0)
                rc = ckpt_megatron__optimizer_plain(c->m, c->plan, c->file, c->arena, tmpl, params, n_params, tp,
                                                    c->etp, c->t, c->padded_vocab, &copy);
            else
                rc = carry(c, tmpl->ck, v, &copy);
        } else {
            rc = carry(c, tmpl->ck, v, &copy);
        }
        if (rc == 0)
            rc = ckpt_value_dict_set(c->arena, root, (ckpt_value *)k, copy);
    }
    /* a model built from a torch_dist checkpoint: its optimizer is not in the template */
    if (rc == 0 && c->m->dist && c->m->moments && c->t->optimizer != CKPT_MEGATRON_OPTIM_DROP)
        rc = ckpt_megatron__optimizer_from_dist(c->m, c->plan, c->file, params, n_params, tp, c->t, c->padded_vocab,
                                                root);
    if (rc == 0)
        rc = ckpt_plan_set_root(c->plan, c->file, root);
    if (rc == 0 && distributed_target(c)) {
        ckpt_buf_clear(&rel);
        if ((rc = rank_rel(c, tp, pp, ep, "distrib_optim.pt", &rel)) == 0)
            rc = ckpt_megatron__distopt_write(c->m, c->t, targs ? targs : c->m->args, c->plan, (const char *)rel.data,
                                              params, n_params, tp, c->etp, pp, c->dense_rank, c->padded_vocab);
    }
done:
    free(params);
    ckpt_buf_dispose(&rel);
    return rc;
}

static long find_entry(const ckpt_megatron *m, const char *name)
{
    size_t i;
    for (i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* Tied embeddings: with one stage the output layer uses the embedding itself and has no
 * weight of its own; with several, the last stage holds a copy that Megatron keeps equal to
 * the embedding (same gradients, so the same optimizer state). A copy is made for a target
 * with several stages from a source without one; a target with one stage drops it. */
static int tie_output_layer(ckpt_megatron *m, const ckpt_megatron_target *t, int *drop_output)
{
    const ckpt_value *untie = ckpt_megatron_arg(m->args, "untie_embeddings_and_output_weights");
    long emb, out;
    mg_entry *e = NULL;
    int rc;

    *drop_output = 0;
    if (!untie || untie->kind != CKPT_VAL_BOOL || untie->u.boolean)
        return 0;
    emb = find_entry(m, EMBEDDING_WEIGHT);
    out = find_entry(m, OUTPUT_WEIGHT);
    if (t->pp == 1) {
        *drop_output = out >= 0;
        return 0;
    }
    if (out >= 0 || emb < 0)
        return 0;
    if ((rc = ckpt_megatron__push_entry(m, &e)) < 0)
        return rc;
    *e = m->entries[emb];
    e->shards = NULL; /* the embedding's; no file holds this copy */
    e->layout.stage = CKPT_STAGE_LAST;
    e->name = strdup(OUTPUT_WEIGHT);
    e->local = strdup(m->entries[emb].local);
    return e->name && e->local ? 0 : ckpt_error_oom();
}

static int check_target(ckpt_megatron *m, const ckpt_megatron_target *t)
{
    int rc = ckpt_megatron__check_sizes(m, t);

    if (rc < 0 || (t->optimizer != CKPT_MEGATRON_OPTIM_DROP && (rc = ckpt_megatron__dist_optim_unread(m)) < 0) ||
        (rc = ckpt_megatron__ep_optimizer(m, t)) < 0 || (rc = ckpt_megatron__grouped_check(m, t)) < 0)
        return rc;
    if (t->dp < 0 || t->ddp_bucket_size < CKPT_MEGATRON_NO_BUCKETS)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT,
                               "data-parallel size %d, bucket size %lld: out of range", t->dp,
                               (long long)t->ddp_bucket_size);
    if (m->dist && m->info.has_optimizer && t->optimizer == CKPT_MEGATRON_OPTIM_KEEP && !dist_distributed(m))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: the legacy layout takes the non-distributed optimizer's state of a torch_dist "
                               "checkpoint (optimizer.state.* keys) as the kind of optimizer named: --to-optimizer "
                               "plain or distributed (--no-optimizer writes a model-only checkpoint)",
                               m->dist);
    /* the per-parameter form, tied output layer copies included, before the copies are made */
    if (t->optimizer == CKPT_MEGATRON_OPTIM_PLAIN || t->optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED)
        return ckpt_megatron__moments(m);
    if (t->optimizer == CKPT_MEGATRON_OPTIM_KEEP && (rc = ckpt_megatron__distopt_missing(m)) < 0)
        return rc;
    if (m->left_out_params && m->info.has_optimizer && t->optimizer == CKPT_MEGATRON_OPTIM_KEEP)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: %zu parameter%s left out (--drop), and the optimizer state follows the "
                               "parameters in order: --no-optimizer writes a model-only checkpoint",
                               m->set ? ckpt_set_info_of(m->set)->root : "", m->left_out_params,
                               m->left_out_params == 1 ? " is" : "s are");
    /* a plain source's state is written from the per-parameter form too */
    if (!m->info.distributed_optimizer && !m->dist && m->info.has_optimizer && t->optimizer == CKPT_MEGATRON_OPTIM_KEEP)
        return ckpt_megatron__moments(m);
    /* read at open when it could be; again here for the reason it could not */
    if (m->info.distributed_optimizer && !m->dist && t->optimizer == CKPT_MEGATRON_OPTIM_KEEP && !m->moments &&
        (rc = ckpt_megatron__read_distopt(m)) < 0)
        return rc;
    return 0;
}

int ckpt_megatron__distopt_missing(const ckpt_megatron *m)
{
    if (!m->info.distributed_optimizer && !m->dist && m->info.has_optimizer &&
        ckpt_megatron__arg_int(m->args, "use_distributed_optimizer", 0))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                               "%s: args.use_distributed_optimizer is set, but no rank directory has its "
                               "distrib_optim.pt (the parameters' optimizer state); --no-optimizer writes a "
                               "model-only checkpoint",
                               m->set ? ckpt_set_info_of(m->set)->root : "");
    return 0;
}

int64_t ckpt_megatron__target_vocab(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    return t->padded_vocab_size ? t->padded_vocab_size
                                : ckpt_megatron_padded_vocab(m->info.true_vocab_size ? m->info.true_vocab_size
                                                                                     : m->info.padded_vocab_size,
                                                             m->info.make_vocab_size_divisible_by, t->tp);
}

static int on_rank(void *state, int tp, int pp, int ep, ckpt_fw_ranks *r)
{
    target_ctx *c = state;

    (void)r;
    /* the file of (tp, pp, ep) is written by the rank of expert data-parallel rank 0 whose
     * dense TP rank is tp (none: no such file), at its expert TP rank */
    if (!ckpt_megatron__saving_rank(c->t, tp, ep, &c->etp, &c->dense_rank))
        return 0;
    return build_rank(c, tp, pp, ep);
}

int ckpt_megatron_plan(ckpt_megatron *m, const ckpt_megatron_target *t, ckpt_plan *plan)
{
    target_ctx c;
    char tracker[32];
    int rc, drop_output;

    if (!t || t->version != CKPT_MEGATRON_TARGET_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_megatron_target version %u, expected %u", t ? t->version : 0,
                              CKPT_MEGATRON_TARGET_VERSION);
    if ((rc = check_target(m, t)) < 0 || (rc = tie_output_layer(m, t, &drop_output)) < 0 ||
        (!m->set && (rc = ckpt_megatron__sort(m)) < 0) || (rc = ckpt_megatron__te_prepare(m, t)) < 0 ||
        (rc = ckpt_megatron__dist_extra_refused(m, t)) < 0)
        return rc;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.t = t;
    c.plan = plan;
    c.arena = ckpt_plan_arena(plan);
    c.drop_output = drop_output;
    c.mtp = ckpt_megatron__mtp_layers(m) > 0;
    c.padded_vocab = ckpt_megatron__target_vocab(m, t);
    c.ep_size = ckpt_megatron__target_ep(m, t);
    if ((rc = ckpt_megatron__split_of_target(m->args, m->info.num_layers, t, &c.split)) < 0 ||
        (rc = ckpt_fw_ranks_new(&c.ranks, m->n_entries, 1, t->tp, split_entry, &c)) < 0)
        return rc;
    rc = ckpt_fw_ranks_each(c.ranks, CKPT_FW_RANKS_EP_PP_TP, t->pp, c.ep_size, NULL, on_rank, &c);
    if (rc == 0) {
        if (m->release)
            snprintf(tracker, sizeof tracker, "release");
        else
            snprintf(tracker, sizeof tracker, "%lld", (long long)m->info.iteration);
        rc = ckpt_plan_add_bytes(plan, "latest_checkpointed_iteration.txt", tracker, strlen(tracker));
    }
    ckpt_fw_ranks_free(c.ranks);
    return rc;
}
