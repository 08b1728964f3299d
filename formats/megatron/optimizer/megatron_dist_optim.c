/* The optimizer state of a Megatron torch_dist checkpoint, read into the logical model: each
 * parameter's fp32 master copy and Adam moments at its full shape (mg_entry.moment[]).
 *
 * megatron-core 0.16.1 saves three forms (common.pt's optimizer['param_state_sharding_type']
 * says which of the distributed optimizer's; the non-distributed optimizer has none):
 * - plain (optimizer.py sharded_state_dict, dist_checkpointing/optimizer.py): per parameter
 *   `optimizer.state.{exp_avg,exp_avg_sq}.<model key>` at the model tensor's global shape
 *   and chunking, plus `optimizer.state.fp32_param.<key>` with bf16/fp16 parameters (an fp32
 *   model is its own master); the step is common.pt's optimizer[...]['state']['common_step'].
 * - fully_reshardable (distrib_optimizer.py sharded_param_state_fully_reshardable):
 *   `optimizer.state.{param,exp_avg,exp_avg_sq}.<model key>`, fp32, shaped and chunked like the
 *   model tensor; common.pt holds {'optimizer': {'param_groups' (each with 'step')}, ...}.
 * - dp_reshardable (sharded_param_state_dp_reshardable): per model-parallel rank g = tp + TP * pp
 *   (the rank in the TP x PP group), grad buffer and bucket,
 *   `optimizer.distributed.dp_group_idx_<g>.gbuf_idx_<b>.dtype_(<param dtype>, <grad dtype>).
 *   bucket_idx_<k>.{param,exp_avg,exp_avg_sq}`: 1-D fp32 of the bucket's numel_unpadded, the
 *   parameters at their buffer offsets less the bucket's start (megatron_distopt.h's layout).
 * megatron-core 0.13 adds fully_sharded_model_space (per parameter, N-D flattened items:
 * megatron_dist_optim_nd.c) and dp_zero_gather_scatter (per rank a legacy distrib_optim.pt
 * state as a saved object, placed by the same layout as dp_reshardable's buckets:
 * megatron_dist_optim_zero.c). A state that cannot be read leaves its error for what needs
 * the state (ckpt_megatron__dist_optim_unread): a model-only target goes on without it.
 *
 * The fully_reshardable save is wrong for a buffer of several buckets in every megatron-core
 * up to core_v0.19.0 (fixed by Megatron-LM PR #5077): get_parameter_state_dp_zero gathers
 * each bucket and concatenates the buckets' UNPADDED parts (a bucket's end padding to
 * lcm(DP, 128) dropped), but the save then slices that vector at each parameter's PADDED
 * buffer offset (buffer.param_index_map). A parameter of bucket k > 0 thus gets the elements
 * that lie (sum of the end paddings of buckets 0..k-1) further on: part of the parameters
 * that follow it in the buffer, and zeros where the slice runs past the vector's end. The
 * file does not say which version wrote it: megatron_dist_optim_pr5077.c tells a defective
 * save from a right one by its content. */
#include "megatron_dist_optim.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_PREFIX "optimizer.state."
#define DIST_PREFIX CKPT_MEGATRON_DIST_PREFIX

static const char *const plain_names[MG_N_MOMENTS] = { "fp32_param", "exp_avg", "exp_avg_sq" };
static const char *const dist_names[MG_N_MOMENTS] = { "param", "exp_avg", "exp_avg_sq" };

typedef struct read_ctx {
    ckpt_megatron *m;
    const ckpt_ckpt *ck;
    const ckpt_value *root; /* ck's, with its common state */
    int nd;                 /* fully_sharded_model_space: items N-D flattened, read as fully_reshardable */
    int zero;               /* dp_zero_gather_scatter: per rank a legacy state, read as dp_reshardable */
    int local;
    unsigned char *used; /* per tensor of ck: taken by a parameter's state */
    ckpt_buf key, name;
    mg_dist_sizes z;     /* the source layout, from args */
    int chained;         /* a MoE model's ChainedOptimizer: [dense, expert] */
    const char *prefix[2]; /* the items' prefix per inner optimizer ("chained_<i>." or "") */
    int64_t ep;          /* the EP size */
} read_ctx;

static void mark_used(read_ctx *c, const ckpt_tensor *t)
{
    c->used[t - ckpt_tensor_at(c->ck, 0)] = 1;
}

static int same_shape(const ckpt_tensor *t, int skip, const ckpt_node *full)
{
    return t->ndim - skip == ckpt_node_ndim(full) &&
           memcmp(t->shape + skip, ckpt_node_shape(full), (size_t)ckpt_node_ndim(full) * sizeof *t->shape) == 0;
}

/* `optimizer.state.<moment>.<key of e>` as a full fp32 node: a layer of the stacked tensor,
 * or the per-layer tensor older versions save; *out NULL when the file has none. */
static int moment_node(read_ctx *c, const mg_entry *e, const char *moment, const ckpt_node **out)
{
    const char *prefix = c->prefix[e->layout.expert ? 1 : 0];
    const ckpt_tensor *t = NULL;
    int64_t expert = -1;
    int stacked = 0, rc;

    *out = NULL;
    ckpt_buf_clear(&c->name);
    if ((rc = ckpt_megatron__dist_expert_key(c->m, e, &c->key, &expert)) < 0)
        return rc;
    if (!rc && ckpt_buf_printf(&c->name, "%s" STATE_PREFIX "%s.%s", prefix, moment, e->name) < 0)
        return CKPT_ENOMEM;
    if ((expert >= 0 || !(t = ckpt_tensor_find(c->ck, (const char *)c->name.data))) && e->layout.layer >= 0) {
        ckpt_buf_clear(&c->name);
        if (ckpt_buf_printf(&c->name, "%s" STATE_PREFIX "%s.%s", prefix, moment, (const char *)c->key.data) < 0)
            return CKPT_ENOMEM;
        stacked = (t = ckpt_tensor_find(c->ck, (const char *)c->name.data)) != NULL;
    }
    if (!t)
        return 0;
    mark_used(c, t);
    if (expert >= 0) {
        /* [num_layers, num_experts, <the expert's shape>]; megatron-core 0.13's N-D flattened
           form: [num_layers, num_experts, <the expert's fragment grid>, fragment elements] */
        const ckpt_tensor *v;
        int64_t at[2] = { e->layout.layer, expert };
        if (t->ndim < 3 || t->shape[0] != c->m->info.num_layers ||
            t->shape[1] != ckpt_megatron__num_experts(c->m->args) || (!c->nd && !same_shape(t, 2, e->full)))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: '%s' is not [num_layers, num_experts] of the expert '%s' it is the state of",
                                   c->m->dist, t->name, e->name);
        if ((rc = ckpt_megatron__stacked_view(c->m, t, 2, at, t->name, &v)) == 0)
            rc = c->nd ? ckpt_megatron__nd_flattened(c->m, v, -1, e->full, out) : ckpt_node_tensor(c->m->g, v, out);
    } else if (c->nd)
        rc = ckpt_megatron__nd_flattened(c->m, t, stacked ? e->layout.layer : -1, e->full, out);
    else if (!same_shape(t, stacked, e->full) || (stacked && t->shape[0] != c->m->info.num_layers))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s' does not have the shape of the parameter '%s' it is the state of",
                               c->m->dist, t->name, e->name);
    else
        rc = stacked ? ckpt_megatron__layer_of(c->m, t, e->layout.layer, t->name, out) : ckpt_node_tensor(c->m->g, t, out);
    if (rc == 0 && ckpt_node_dtype(*out) != CKPT_DTYPE_F32)
        rc = ckpt_node_cast(c->m->g, *out, CKPT_DTYPE_F32, out);
    return rc;
}

static int missing(read_ctx *c, const mg_entry *e, const char *moment)
{
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                           "%s: no optimizer state '%s" STATE_PREFIX "%s.%s' for the parameter '%s'", c->m->dist,
                           c->prefix[e->layout.expert ? 1 : 0], moment, (const char *)c->key.data, e->name);
}

/* Plain and fully_reshardable: a global tensor per parameter and moment. */
static int read_per_param(read_ctx *c, int form)
{
    size_t i;
    int k, rc = 0;

    for (i = 0; i < c->m->n_entries && rc == 0; i++) {
        mg_entry *e = &c->m->entries[i];
        if (!e->param || !e->full)
            continue;
        int64_t expert;
        int stacked;
        if ((rc = ckpt_megatron__dist_key(e, c->local, 0, &c->key, &expert, &stacked)) < 0)
            break;
        for (k = 0; k < MG_N_MOMENTS && rc == 0; k++) {
            const char *name = form == MG_DIST_PLAIN || c->nd ? plain_names[k] : dist_names[k];
            if ((rc = moment_node(c, e, name, &e->moment[k])) < 0)
                break;
            /* an fp32 model is its own master copy (no fp32_param in the file) */
            if (!e->moment[k] && k == MG_MASTER && form == MG_DIST_PLAIN &&
                ckpt_node_dtype(e->full) == CKPT_DTYPE_F32)
                e->moment[k] = e->full;
            if (!e->moment[k])
                rc = missing(c, e, name);
        }
    }
    return rc;
}

/* ---- dp_reshardable ----------------------------------------------------------- */

static int saved_object(read_ctx *c, const char *key, const ckpt_value **out)
{
    return ckpt_megatron__saved_object(c->m->dist, c->m->arena, c->root, key, out);
}

static int64_t group_idx(const read_ctx *c, int tp, int pp, int expert)
{
    return ckpt_megatron__dist_group(c->z.tp, c->ep, tp, c->z.ep, pp, expert);
}

/* The sizes a dp_reshardable save records per bucket (per_bucket_numel[_unpadded]: a list
 * over grad buffers of {(param dtype, grad dtype): [numel per bucket]}), each against the
 * layout the args give. */
static int check_numels(read_ctx *c, int tp, int pp, const mg_dist_stage *s, int expert, int unpadded)
{
    const char *what = unpadded ? "per_bucket_numel_unpadded" : "per_bucket_numel";
    size_t first = expert ? s->l.n_dense : 0, nb = expert ? s->l.n_buffers - s->l.n_dense : s->l.n_dense;
    const ckpt_value *v, *d, *list;
    size_t b, k;
    int rc;

    ckpt_buf_clear(&c->name);
    if (ckpt_buf_printf(&c->name, "%s" DIST_PREFIX "dp_group_idx_%lld.%s/shard_0_1", c->prefix[expert],
                        (long long)group_idx(c, tp, pp, expert), what) < 0)
        return CKPT_ENOMEM;
    if ((rc = saved_object(c, (const char *)c->name.data, &v)) < 0)
        return rc;
    if (!v)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no '%s' (dp_reshardable bucket sizes)",
                               c->m->dist, (const char *)c->name.data);
    if (v->kind != CKPT_VAL_LIST || v->u.seq.n != nb)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s' lists %zu grad buffers, the layout from its args has %zu", c->m->dist,
                               (const char *)c->name.data, v->kind == CKPT_VAL_LIST ? v->u.seq.n : 0, nb);
    for (b = 0; b < nb; b++) {
        const mg_dopt_buffer *buf = &s->l.buffers[first + b];
        d = v->u.seq.items[b];
        list = d->kind == CKPT_VAL_DICT && d->u.dict.map.n == 1 ? d->u.dict.map.vals[0] : NULL;
        if (!list || list->kind != CKPT_VAL_LIST || list->u.seq.n != buf->n_buckets)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: '%s' buffer %zu: %zu buckets, the layout from its args (DP %lld) has %zu",
                                   c->m->dist, (const char *)c->name.data, b,
                                   list && list->kind == CKPT_VAL_LIST ? list->u.seq.n : 0,
                                   (long long)ckpt_megatron__arg_int(c->m->args, "data_parallel_size", 1),
                                   buf->n_buckets);
        for (k = 0; k < buf->n_buckets; k++) {
            const mg_dopt_bucket *bk = &s->l.buckets[buf->first_bucket + k];
            const ckpt_value *n = list->u.seq.items[k];
            int64_t want = unpadded ? bk->numel_unpadded : bk->end - bk->start;
            if (n->kind != CKPT_VAL_INT || n->u.integer != want)
                return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                       "%s: '%s' buffer %zu bucket %zu: %lld elements, the layout from its args (DP "
                                       "%lld) has %lld",
                                       c->m->dist, (const char *)c->name.data, b, k,
                                       n->kind == CKPT_VAL_INT ? (long long)n->u.integer : -1ll,
                                       (long long)ckpt_megatron__arg_int(c->m->args, "data_parallel_size", 1),
                                       (long long)want);
        }
    }
    return 0;
}

/* Bucket tensor `moment` of a buffer of source rank (tp, pp), checked against the layout. */
static int bucket_tensor(read_ctx *c, int tp, int pp, const mg_dist_stage *s, const mg_dopt_buffer *b, size_t k,
                         const char *moment, const ckpt_tensor **out)
{
    const mg_dopt_bucket *bk = &s->l.buckets[b->first_bucket + k];
    const ckpt_tensor *t;
    int rc = ckpt_megatron__dist_bucket_key(group_idx(c, tp, pp, b->expert), b, k, moment, &c->key);

    if (rc < 0)
        return rc;
    ckpt_buf_clear(&c->name);
    if (ckpt_buf_printf(&c->name, "%s%s", c->prefix[b->expert != 0], (const char *)c->key.data) < 0)
        return CKPT_ENOMEM;
    if (!(t = ckpt_tensor_find(c->ck, (const char *)c->name.data)))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: no '%s': the grad buffer layout of TP rank %d, pipeline stage %d (from its "
                               "args) has %zu bucket%s in buffer %zu",
                               c->m->dist, (const char *)c->name.data, tp, pp, b->n_buckets,
                               b->n_buckets == 1 ? "" : "s", b->gbuf);
    if (t->ndim != 1 || t->shape[0] != bk->numel_unpadded)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s' holds %lld elements, the grad buffer layout from its args (DP %lld) has "
                               "%lld in that bucket",
                               c->m->dist, t->name, t->ndim == 1 ? (long long)t->shape[0] : -1ll,
                               (long long)ckpt_megatron__arg_int(c->m->args, "data_parallel_size", 1),
                               (long long)bk->numel_unpadded);
    mark_used(c, t);
    *out = t;
    return 0;
}

/* Source rank (tp, pp)'s part of every parameter of the stage, per moment, into
 * parts[entry * MG_N_MOMENTS * TP + moment * TP + tp]: from its bucket tensors, or from the
 * flat tensors of its buffers (zflat: dp_zero_gather_scatter). */
static int read_dp_rank(read_ctx *c, int tp, int pp, const mg_dist_stage *s, const ckpt_tensor *const *zflat,
                        const ckpt_node **parts)
{
    const ckpt_node **split = calloc((size_t)c->z.tp, sizeof *split);
    size_t i;
    int k, rc = split ? 0 : ckpt_error_oom();

    for (i = 0; i < s->n && rc == 0; i++) {
        const mg_dopt_range *r = &s->l.ranges[i];
        const mg_dopt_buffer *b = &s->l.buffers[r->buffer];
        const mg_dopt_bucket *bk = &s->l.buckets[b->first_bucket + r->bucket];
        const mg_entry *e = s->idx[i] >= 0 ? &c->m->entries[s->idx[i]] : NULL;
        const ckpt_node *flat;
        if (c->z.ep > 0 && !b->expert)
            continue; /* the dense state: EP rank 0's */
        if (!e) {
            /* a tied embedding's copy: the embedding's state, its bucket checked only */
            const ckpt_tensor *t;
            for (k = 0; k < MG_N_MOMENTS && rc == 0 && !zflat; k++)
                rc = bucket_tensor(c, tp, pp, s, b, r->bucket, dist_names[k], &t);
            continue;
        }
        if ((rc = ckpt_parallel_split(c->m->g, &e->layout, e->name, e->full, (size_t)c->z.tp, split)) < 0)
            break;
        for (k = 0; k < MG_N_MOMENTS && rc == 0; k++) {
            const ckpt_tensor *t = zflat ? zflat[r->buffer * MG_N_MOMENTS + (size_t)k] : NULL;
            const ckpt_node *shard = split[tp];
            if ((!zflat && (rc = bucket_tensor(c, tp, pp, s, b, r->bucket, dist_names[k], &t)) < 0) ||
                (rc = ckpt_node_tensor(c->m->g, t, &flat)) < 0 ||
                (rc = ckpt_node_slice(c->m->g, flat, 0, zflat ? r->flat : r->start - bk->start, r->end - r->start,
                                      &flat)) < 0 ||
                (rc = ckpt_node_reshape(c->m->g, flat, ckpt_node_ndim(shard), ckpt_node_shape(shard), &flat)) < 0)
                break;
            if (ckpt_node_dtype(flat) != CKPT_DTYPE_F32 &&
                (rc = ckpt_node_cast(c->m->g, flat, CKPT_DTYPE_F32, &flat)) < 0)
                break;
            parts[((size_t)s->idx[i] * MG_N_MOMENTS + (size_t)k) * (size_t)c->z.tp + (size_t)tp] = flat;
        }
    }
    free(split);
    return rc;
}

static int read_dp(read_ctx *c)
{
    const ckpt_node **parts = calloc(c->m->n_entries * MG_N_MOMENTS * (size_t)c->z.tp + 1, sizeof *parts);
    const ckpt_tensor **zflat = NULL;
    mg_dist_stage s;
    size_t i;
    int pp, tp, k, rc = parts ? 0 : ckpt_error_oom();

    for (c->z.ep = 0; c->z.ep < c->ep && rc == 0; c->z.ep++)
        for (pp = 0; pp < c->z.pp && rc == 0; pp++) {
            if ((rc = ckpt_megatron__dist_stage(c->m, c->m->args, &c->z, pp, &s)) < 0)
                break;
            if (!c->chained && s.l.n_buffers > s.l.n_dense)
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                     "%s: the model has experts, common.pt's optimizer is not the chained "
                                     "optimizer's {0: dense, 1: expert}", c->m->dist);
            free(zflat);
            zflat = NULL;
            if (rc == 0 && c->zero && !(zflat = calloc(s.l.n_buffers * MG_N_MOMENTS + 1, sizeof *zflat)))
                rc = ckpt_error_oom();
            for (tp = 0; tp < c->z.tp && rc == 0; tp++) {
                if (c->zero)
                    rc = ckpt_megatron__dist_zero_flat(c->m, c->ck, c->root, tp + (int64_t)c->z.tp * pp, &s.l,
                                                       zflat);
                for (k = c->z.ep > 0; k < 1 + c->chained && rc == 0 && !c->zero; k++)
                    if ((rc = check_numels(c, tp, pp, &s, k, 0)) == 0)
                        rc = check_numels(c, tp, pp, &s, k, 1);
                if (rc == 0)
                    rc = read_dp_rank(c, tp, pp, &s, zflat, parts);
            }
            ckpt_megatron__dist_stage_free(&s);
        }
    c->z.ep = 0;
    free(zflat);
    for (i = 0; i < c->m->n_entries && rc == 0; i++) {
        mg_entry *e = &c->m->entries[i];
        if (!e->param || !e->full)
            continue;
        for (k = 0; k < MG_N_MOMENTS && rc == 0; k++) {
            const ckpt_node **row = &parts[(i * MG_N_MOMENTS + (size_t)k) * (size_t)c->z.tp];
            if (!row[0])
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                     "%s: the grad buffer layout from its args places no state of '%s'", c->m->dist,
                                     e->name);
            else
                rc = ckpt_parallel_merge(c->m->g, &e->layout, e->name, row, (size_t)c->z.tp, &e->moment[k]);
        }
    }
    free(parts);
    return rc;
}

/* DistributedOptimizer.state_dict() of model-parallel rank 0, a saved object; a chained
 * optimizer's as the list [dense, expert]. */
static int step_and_groups(read_ctx *c)
{
    ckpt_value *list = c->chained ? ckpt_value_new(c->m->arena, CKPT_VAL_LIST) : NULL;
    const ckpt_value *sd;
    int k, rc = 0;

    if (c->chained && !list)
        return CKPT_ENOMEM;
    for (k = 0; k < 1 + c->chained && rc == 0; k++) {
        ckpt_buf_clear(&c->name);
        if (ckpt_buf_printf(&c->name, "%s" DIST_PREFIX "dp_group_idx_0.optimizer/shard_0_1", c->prefix[k]) < 0)
            return CKPT_ENOMEM;
        if ((rc = saved_object(c, (const char *)c->name.data, &sd)) < 0)
            break;
        if (!sd)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: no '%s' (the step and param groups)",
                                   c->m->dist, (const char *)c->name.data);
        if (c->chained) {
            const ckpt_value *scaler;
            ckpt_buf_clear(&c->name);
            if (ckpt_buf_printf(&c->name, "%s" DIST_PREFIX "dp_group_idx_0.grad_scaler/shard_0_1", c->prefix[k]) < 0)
                return CKPT_ENOMEM;
            if ((rc = saved_object(c, (const char *)c->name.data, &scaler)) < 0)
                break;
            if (scaler)
                return ckpt_megatron__chained_scaler(c->m->dist);
        }
        if (!c->chained)
            c->m->dist_optim_sd = sd;
        else if (ckpt_value_append(c->m->arena, list, (ckpt_value *)sd) < 0)
            return CKPT_ENOMEM;
    }
    if (rc == 0 && c->chained)
        c->m->dist_optim_sd = list;
    return rc;
}

/* ---- the whole ---------------------------------------------------------------- */

static int form_of(const ckpt_megatron *m, const ckpt_value *root, int *form, int *nd, int *zero, int *chained)
{
    const ckpt_value *opt = root ? ckpt_value_dict_get(root, "optimizer") : NULL, *type, *expert;

    *form = MG_DIST_NONE;
    /* ChainedOptimizer of a MoE model: {0: the dense optimizer's, 1: the expert one's} */
    if ((expert = ckpt_megatron__int_key_get(opt, 1)) != NULL) {
        const ckpt_value *t0, *t1;
        opt = ckpt_megatron__int_key_get(opt, 0);
        t0 = opt ? ckpt_value_dict_get(opt, "param_state_sharding_type") : NULL;
        t1 = ckpt_value_dict_get(expert, "param_state_sharding_type");
        if (!opt || ckpt_megatron__int_key_get(root ? ckpt_value_dict_get(root, "optimizer") : NULL, 2) || !t0 ||
            !t1 || t0->kind != CKPT_VAL_STR || !ckpt_value_is_str(t1, t0->u.str.ptr))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                   "%s: common.pt optimizer is a chained optimizer other than a distributed "
                                   "optimizer's [dense, expert] of one sharding type; --no-optimizer writes a "
                                   "model-only checkpoint",
                                   m->dist);
        *chained = 1;
    }
    if (!opt || opt->kind != CKPT_VAL_DICT)
        return m->info.has_optimizer ? ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                                                       "%s: optimizer state tensors, but no optimizer dict in "
                                                       "common.pt",
                                                       m->dist)
                                     : 0;
    if (!(type = ckpt_value_dict_get(opt, "param_state_sharding_type"))) {
        *form = MG_DIST_PLAIN;
        return 0;
    }
    /* megatron-core 0.13's default: per parameter as fully_reshardable, N-D flattened, the
       step and param groups where fully_reshardable keeps them (optimizer['optimizer']) */
    *nd = ckpt_value_is_str(type, "fully_sharded_model_space");
    /* megatron-core 0.13's dp_zero_gather_scatter: the legacy state per rank, placed by the
       same buffer layout as dp_reshardable's buckets, its param groups saved as dp_reshardable's */
    *zero = ckpt_value_is_str(type, "dp_zero_gather_scatter");
    if (*zero && *chained)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: a mixture-of-experts model's chained optimizer saved as dp_zero_gather_scatter "
                               "is not read (its expert grad buffers' per-rank state); --no-optimizer writes a "
                               "model-only checkpoint",
                               m->dist);
    if (ckpt_value_is_str(type, "fully_reshardable") || *nd)
        *form = MG_DIST_FULLY;
    else if (ckpt_value_is_str(type, "dp_reshardable") || *zero)
        *form = MG_DIST_DP;
    else
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: distributed optimizer state of a sharding type other than fully_reshardable, "
                               "dp_reshardable, fully_sharded_model_space and dp_zero_gather_scatter (common.pt "
                               "optimizer['param_state_sharding_type'] %s%s%s) is not read; "
                               "--no-optimizer writes a model-only checkpoint",
                               m->dist, type->kind == CKPT_VAL_STR ? "'" : "",
                               type->kind == CKPT_VAL_STR ? type->u.str.ptr : "(not a string)",
                               type->kind == CKPT_VAL_STR ? "'" : "");
    return 0;
}

/* Every optimizer tensor must be the state of a parameter: another is a model part this
 * reader does not know (experts, ...) and would be lost. */
static int check_all_used(read_ctx *c)
{
    size_t i;

    for (i = 0; i < ckpt_tensor_count(c->ck); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c->ck, i);
        if (!c->used[i] && !strchr(t->name, '/') &&
            (strncmp(t->name, "optimizer.", 10) == 0 || strncmp(t->name, "chained_", 8) == 0))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                   "%s: '%s' is not the optimizer state of a parameter of the model read; "
                                   "--no-optimizer writes a model-only checkpoint",
                                   c->m->dist, t->name);
    }
    return 0;
}

int ckpt_megatron__read_dist_optim(ckpt_megatron *m, const ckpt_ckpt *ck, const ckpt_value *root, int local)
{
    read_ctx c;
    int form, nd = 0, zero = 0, chained = 0, rc;

    if ((rc = form_of(m, root, &form, &nd, &zero, &chained)) < 0 || form == MG_DIST_NONE)
        return rc;
    if (ckpt_megatron__dist_per_layer(m->args) || ckpt_megatron__mtp_layers(m) > 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: optimizer state of a model with %s is not read from torch_dist yet; "
                               "--no-optimizer reads the model",
                               m->dist, ckpt_megatron__mtp_layers(m) > 0
                                            ? "multi-token prediction layers"
                                            : "layers keyed one by one (dense and MoE layers, moe_layer_freq)");
    memset(&c, 0, sizeof c);
    c.chained = chained;
    c.ep = m->info.ep > 1 ? m->info.ep : 1;
    c.prefix[0] = c.prefix[1] = "";
    if (chained && ckpt_megatron__dist_chained_prefix(root, form)) {
        c.prefix[0] = "chained_0.";
        c.prefix[1] = "chained_1.";
    }
    c.m = m;
    c.ck = ck;
    c.root = root;
    c.nd = nd;
    c.zero = zero;
    c.local = local;
    c.z.tp = (int)ckpt_megatron__arg_int(m->args, "tensor_model_parallel_size", 1);
    c.z.pp = (int)ckpt_megatron__arg_int(m->args, "pipeline_model_parallel_size", 1);
    c.z.vpp = (int)ckpt_megatron__arg_int(m->args, "virtual_pipeline_model_parallel_size", 1);
    if (c.z.vpp < 1)
        c.z.vpp = 1;
    if (c.z.tp < 1 || c.z.pp < 1 || c.z.tp > 4096 || c.z.pp > 4096 || c.z.vpp > 4096)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: args: TP %d, PP %d, VPP %d", m->dist, c.z.tp,
                               c.z.pp, c.z.vpp);
    if (!(c.used = calloc(ckpt_tensor_count(ck) + 1, 1)))
        return ckpt_error_oom();
    rc = ckpt_megatron__sort(m);
    if (rc == 0)
        rc = form == MG_DIST_DP ? read_dp(&c) : read_per_param(&c, form);
    if (rc == 0 && form == MG_DIST_FULLY && !nd) /* each rank sliced its own parameters: no defect */
        rc = ckpt_megatron__dist_check_pr5077(m, &c.z);
    if (rc == 0)
        rc = check_all_used(&c);
    /* the step and param groups (the same on every rank): model-parallel rank 0's */
    if (rc == 0 && form == MG_DIST_DP && (rc = step_and_groups(&c)) == 0)
        rc = ckpt_megatron__read_dp_scaler(m, c.root);
    free(c.used);
    ckpt_buf_dispose(&c.key);
    ckpt_buf_dispose(&c.name);
    if (rc < 0)
        return rc;
    m->dist_form = form;
    m->dist_nd = nd;
    m->dist_chained = chained;
    m->dist_ck = ck;
    m->moments = 1;
    m->info.distributed_optimizer = form != MG_DIST_PLAIN;
    m->info.has_optimizer |= zero; /* its state is in saved objects, no tensor names it */
    return 0;
}

int ckpt_megatron__dist_optim_failed(ckpt_megatron *m, int rc)
{
    const ckpt_error *e = ckpt_error_last();
    size_t i;

    if (rc == CKPT_ENOMEM)
        return rc;
    for (i = 0; i < m->n_entries; i++)
        memset(m->entries[i].moment, 0, sizeof m->entries[i].moment);
    m->moments = 0;
    m->dist_optim_sd = NULL;
    m->dist_optim_rc = rc;
    m->dist_optim_class = e->klass;
    if (!(m->dist_optim_why = ckpt_arena_strndup(m->arena, e->message, strlen(e->message))))
        return CKPT_ENOMEM;
    ckpt_error_clear();
    return 0;
}

int ckpt_megatron__dist_optim_unread(const ckpt_megatron *m)
{
    return m->dist_optim_why ? ckpt_error_setc(m->dist_optim_rc, m->dist_optim_class, "%s", m->dist_optim_why) : 0;
}
