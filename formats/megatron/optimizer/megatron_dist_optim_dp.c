/* The distributed optimizer's state written in torch_dist's dp_reshardable form (megatron-core
 * 0.16.1 distrib_optimizer.py sharded_param_state_dp_reshardable and sharded_state_dict):
 * per target model-parallel rank g = tp + TP * pp, per grad buffer and bucket of the layout
 * the target's TP/PP/VPP/DP and the args give (megatron_distopt.h),
 *   optimizer.distributed.dp_group_idx_<g>.gbuf_idx_<b>.dtype_(<param>, <grad>).bucket_idx_<k>.
 *   {param,exp_avg,exp_avg_sq}
 * 1-D fp32 of the bucket's numel_unpadded: each parameter's part of this rank at its buffer
 * offset less the bucket's start, zeros between (the 64-element alignment), the end padding
 * left out; and the saved objects (torch.save([value]) bytes items, "<key>/shard_0_1")
 * dp_group_idx_<g>.optimizer ({'param_groups': [... each with 'step']}), .per_bucket_numel and
 * .per_bucket_numel_unpadded ([{(param dtype, grad dtype): [numel per bucket]}] per buffer).
 * Megatron's DP ranks each save their slice of a bucket; here each bucket is one chunk in the
 * data file of the rank's DP rank 0, which DCP loads the same at any DP.
 * A MoE model's chained optimizer writes the dense optimizer's state so with the prefix
 * "chained_0." and the expert one's, per EP rank, with "chained_1." (its group index
 * ckpt_megatron__dist_group's), each with its own saved objects. */
#include "megatron_dist_optim.h"

#include <ckpt/dcp.h>

#include <stdlib.h>
#include <string.h>

typedef struct dp_out {
    ckpt_megatron *m;
    const ckpt_megatron_target *t;
    int64_t padded_vocab;
    ckpt_dcp_out *d;
    ckpt_arena *a;
    const ckpt_value *sd, *scaler; /* sd: a chained optimizer's the list [dense, expert] */
    int chained, ep;               /* ep: the EP rank being written */
    int64_t ep_size;
    ckpt_buf key, bytes;
} dp_out;

static int64_t group(const dp_out *o, int tp, int pp, int expert)
{
    return ckpt_megatron__dist_group(o->t->tp, o->ep_size, tp, o->ep, pp, expert);
}

typedef struct by_start {
    int64_t start;
    size_t i;
} by_start;

static int cmp_start(const void *pa, const void *pb)
{
    const by_start *a = pa, *b = pb;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* Every TP rank's flat part of each moment of the stage's parameters:
 * parts[(i * MG_N_MOMENTS + k) * TP + tp]. */
static int split_moments(dp_out *o, const mg_dist_stage *s, const ckpt_node **parts)
{
    const ckpt_node **outs = calloc((size_t)o->t->tp, sizeof *outs);
    size_t i;
    int k, tp, rc = outs ? 0 : ckpt_error_oom();

    for (i = 0; i < s->n && rc == 0; i++) {
        const mg_entry *e = NULL;
        size_t j;
        if (s->idx[i] >= 0) {
            e = &o->m->entries[s->idx[i]];
        } else {
            /* a tied embedding's copy holds the embedding's state */
            for (j = 0; j < s->n && !e; j++)
                if (s->idx[j] >= 0 && s->params[j].shared_embedding)
                    e = &o->m->entries[s->idx[j]];
            for (j = 0; j < o->m->n_entries && !e; j++)
                if (strcmp(o->m->entries[j].name, "embedding.word_embeddings.weight") == 0)
                    e = &o->m->entries[j];
        }
        if (!e)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "no word embedding for the tied output layer");
        for (k = 0; k < MG_N_MOMENTS && rc == 0; k++) {
            if ((rc = ckpt_megatron__split(o->m, o->t, o->padded_vocab, e, e->moment[k], outs)) < 0)
                break;
            for (tp = 0; tp < o->t->tp && rc == 0; tp++) {
                int64_t n = ckpt_node_numel(outs[tp]);
                rc = ckpt_node_reshape(o->m->g, outs[tp], 1, &n,
                                       &parts[(i * MG_N_MOMENTS + (size_t)k) * (size_t)o->t->tp + (size_t)tp]);
            }
        }
    }
    free(outs);
    return rc;
}

/* One bucket's state `k` on rank (tp, pp): its parameters' parts with zeros between. */
static int add_bucket(dp_out *o, const mg_dist_stage *s, const ckpt_node **parts, const mg_dopt_buffer *b, size_t bk,
                      int k, int tp, int pp, by_start *order, const ckpt_node **pieces)
{
    static const char *const names[MG_N_MOMENTS] = { "param", "exp_avg", "exp_avg_sq" };
    const mg_dopt_bucket *bucket = &s->l.buckets[b->first_bucket + bk];
    size_t i, n = 0, np = 0;
    int64_t at = bucket->start, zero = 0, len = bucket->numel_unpadded;
    const ckpt_node *flat;
    int rc;

    for (i = 0; i < s->n; i++)
        if (&s->l.buffers[s->l.ranges[i].buffer] == b && s->l.ranges[i].bucket == bk) {
            order[n].start = s->l.ranges[i].start;
            order[n++].i = i;
        }
    qsort(order, n, sizeof *order, cmp_start);
    for (i = 0; i < n; i++) {
        const mg_dopt_range *r = &s->l.ranges[order[i].i];
        if (r->start > at) {
            int64_t gap = r->start - at;
            if ((rc = ckpt_node_zeros(o->m->g, CKPT_DTYPE_F32, 1, &gap, &pieces[np++])) < 0)
                return rc;
        }
        pieces[np++] = parts[(order[i].i * MG_N_MOMENTS + (size_t)k) * (size_t)o->t->tp + (size_t)tp];
        at = r->end;
    }
    if ((rc = ckpt_node_concat(o->m->g, pieces, np, 0, &flat)) < 0)
        return rc;
    if (ckpt_node_dtype(flat) != CKPT_DTYPE_F32 && (rc = ckpt_node_cast(o->m->g, flat, CKPT_DTYPE_F32, &flat)) < 0)
        return rc;
    if (ckpt_node_numel(flat) != len)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "distributed optimizer bucket %zu of TP rank %d, stage %d: %lld elements laid out, "
                               "%lld expected",
                               bk, tp, pp, (long long)ckpt_node_numel(flat), (long long)len);
    if ((rc = ckpt_megatron__dist_bucket_key(group(o, tp, pp, b->expert), b, bk, names[k], &o->bytes)) < 0)
        return rc;
    ckpt_buf_clear(&o->key);
    if (ckpt_buf_printf(&o->key, "%s%s", ckpt_megatron__chained_prefix(o->chained, b->expert),
                        (const char *)o->bytes.data) < 0)
        return CKPT_ENOMEM;
    return ckpt_dcp_out_chunk(o->d, (const char *)o->key.data, 1, &len, &zero, flat, tp + o->t->tp * pp);
}

static ckpt_value *torch_dtype_value(ckpt_arena *a, ckpt_dtype d)
{
    const char *name = ckpt_megatron__torch_dtype(d);
    ckpt_value *v = name ? ckpt_value_new(a, CKPT_VAL_GLOBAL) : NULL;

    if (v) {
        v->u.global.module = "torch";
        v->u.global.name = name + strlen("torch.");
    }
    return v;
}

/* [{(param dtype, grad dtype): [numel per bucket]}] over the stage's buffers of one optimizer. */
static int numels_value(dp_out *o, const mg_dist_stage *s, int expert, int unpadded, ckpt_value **out)
{
    ckpt_value *list = ckpt_value_new(o->a, CKPT_VAL_LIST);
    size_t b, k;

    *out = list;
    for (b = 0; list && b < s->l.n_buffers; b++) {
        const mg_dopt_buffer *buf = &s->l.buffers[b];
        if (!buf->expert != !expert)
            continue;
        ckpt_value *d = ckpt_value_new(o->a, CKPT_VAL_DICT), *key = ckpt_value_new(o->a, CKPT_VAL_TUPLE);
        ckpt_value *sizes = ckpt_value_new(o->a, CKPT_VAL_LIST);
        if (!d || !key || !sizes || ckpt_value_append(o->a, key, torch_dtype_value(o->a, buf->param_dtype)) < 0 ||
            ckpt_value_append(o->a, key, torch_dtype_value(o->a, buf->grad_dtype)) < 0)
            return CKPT_ENOMEM;
        for (k = 0; k < buf->n_buckets; k++) {
            const mg_dopt_bucket *bk = &s->l.buckets[buf->first_bucket + k];
            if (ckpt_value_append(o->a, sizes,
                                  ckpt_value_new_int(o->a, unpadded ? bk->numel_unpadded : bk->end - bk->start)) < 0)
                return CKPT_ENOMEM;
        }
        if (ckpt_value_dict_set(o->a, d, key, sizes) < 0 || ckpt_value_append(o->a, list, d) < 0)
            return CKPT_ENOMEM;
    }
    return list ? 0 : CKPT_ENOMEM;
}

/* Saved object `name` of rank (tp, pp) of one optimizer: torch.save([v]); the grad scaler's with
 * its tensors. */
static int add_object(dp_out *o, int tp, int pp, int expert, const char *name, const ckpt_value *v)
{
    ckpt_value *wrap = ckpt_value_new(o->a, CKPT_VAL_LIST);
    int rc;

    if (!wrap || ckpt_value_append(o->a, wrap, (ckpt_value *)v) < 0)
        return CKPT_ENOMEM;
    ckpt_buf_clear(&o->key);
    ckpt_buf_clear(&o->bytes);
    if (ckpt_buf_printf(&o->key, "%s" CKPT_MEGATRON_DIST_PREFIX "dp_group_idx_%lld.%s/shard_0_1",
                        ckpt_megatron__chained_prefix(o->chained, expert), (long long)group(o, tp, pp, expert),
                        name) < 0)
        return CKPT_ENOMEM;
    if ((rc = v == o->scaler ? ckpt_megatron__scaler_object(o->m, wrap, &o->bytes)
                             : ckpt_dcp_saved_value(wrap, &o->bytes)) < 0)
        return rc;
    return ckpt_dcp_out_bytes(o->d, (const char *)o->key.data, o->bytes.data, o->bytes.len, tp + o->t->tp * pp);
}

static int add_stage(dp_out *o, const mg_dist_stage *s, int pp)
{
    size_t n = s->n * MG_N_MOMENTS * (size_t)o->t->tp + 1, b, bk;
    const ckpt_node **parts = calloc(n, sizeof *parts), **pieces = calloc(2 * s->n + 2, sizeof *pieces);
    by_start *order = calloc(s->n + 1, sizeof *order);
    ckpt_value *numel = NULL, *unpadded = NULL;
    int tp, k, x, rc = parts && pieces && order ? 0 : ckpt_error_oom();

    if (!o->chained && s->l.n_buffers > s->l.n_dense)
        rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                             "expert grad buffers without the chained optimizer's [dense, expert] state");
    if (rc == 0)
        rc = split_moments(o, s, parts);
    for (tp = 0; tp < o->t->tp && rc == 0; tp++) {
        for (b = 0; b < s->l.n_buffers && rc == 0; b++)
            for (bk = 0; bk < s->l.buffers[b].n_buckets && rc == 0; bk++)
                for (k = 0; k < MG_N_MOMENTS && rc == 0 && (o->ep == 0 || s->l.buffers[b].expert); k++)
                    rc = add_bucket(o, s, parts, &s->l.buffers[b], bk, k, tp, pp, order, pieces);
        /* per optimizer: the dense one's at EP rank 0 only, the expert one's at every EP rank */
        for (x = o->ep > 0; x < 1 + o->chained && rc == 0; x++) {
            const ckpt_value *sd = o->chained ? ckpt_megatron__seq_at(o->sd, (size_t)x) : o->sd;
            if (!sd) {
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                     "the source's chained optimizer has no state of optimizer %d", x);
                break;
            }
            if ((rc = numels_value(o, s, x, 0, &numel)) < 0 || (rc = numels_value(o, s, x, 1, &unpadded)) < 0)
                break;
            if ((rc = add_object(o, tp, pp, x, "optimizer", sd)) == 0 && o->scaler)
                rc = add_object(o, tp, pp, x, "grad_scaler", o->scaler);
            if (rc == 0 && (rc = add_object(o, tp, pp, x, "per_bucket_numel", numel)) == 0)
                rc = add_object(o, tp, pp, x, "per_bucket_numel_unpadded", unpadded);
        }
    }
    free(parts);
    free(pieces);
    free(order);
    return rc;
}

int ckpt_megatron__dist_write_dp(ckpt_megatron *m, const ckpt_megatron_target *t, int64_t padded_vocab,
                                 ckpt_plan *plan, size_t file, ckpt_dcp_out *d)
{
    /* the target's args say its data-parallel size and buckets (--dp, --ddp-bucket-size) */
    mg_dist_sizes z = { t->tp, t->pp, t->vpp < 1 ? 1 : t->vpp, 0, padded_vocab, 0 };
    dp_out o;
    mg_dist_stage s;
    ckpt_value *sd = NULL, *targs = NULL;
    int pp, rc;

    memset(&o, 0, sizeof o);
    o.m = m;
    o.t = t;
    o.padded_vocab = padded_vocab;
    o.d = d;
    o.a = ckpt_plan_arena(plan);
    if ((rc = ckpt_megatron__dist_optim_sd(m, plan, file, &sd, &o.scaler)) < 0 ||
        (rc = ckpt_megatron__target_args(m, t, plan, file, &targs)) < 0)
        return rc;
    o.sd = sd;
    o.chained = sd && sd->kind == CKPT_VAL_LIST;
    o.ep_size = m->info.ep > 1 ? m->info.ep : 1;
    for (o.ep = 0; o.ep < o.ep_size && rc == 0; o.ep++)
        for (pp = 0; pp < t->pp && rc == 0; pp++) {
            z.ep = o.ep;
            if ((rc = ckpt_megatron__dist_stage(m, targs, &z, pp, &s)) == 0)
                rc = add_stage(&o, &s, pp);
            ckpt_megatron__dist_stage_free(&s);
        }
    ckpt_buf_dispose(&o.key);
    ckpt_buf_dispose(&o.bytes);
    return rc;
}
