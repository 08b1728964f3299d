/* Writing a legacy distributed optimizer's state for a target rank: distrib_optim.pt beside its
 * model_optim_rng.pt, laid out for the target's grad buffers (its chunks' parameters, the
 * target DP's bucket padding), as DistributedOptimizer.save_parameter_state writes it: per
 * buffer the fp32 master copies and Adam moments of its parameters at their flat offsets
 * (the buckets' padding removed), zeros in the alignment gaps between them, and
 * numel_unpadded. The state of each parameter is its logical moment[] split for the target
 * TP rank exactly like the parameter. */
#include "megatron_distopt.h"
#include "../megatron_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_keys[MG_N_MOMENTS] = { "param", "exp_avg", "exp_avg_sq" };

typedef struct write_ctx {
    ckpt_megatron *m;
    const ckpt_megatron_target *t;
    ckpt_plan *plan;
    size_t file;
    int64_t padded_vocab;
    int tp, etp;
    const mg_param_out *params;
    size_t n;
    const mg_dopt_layout *l;
} write_ctx;

/* Parameter i's moment k at the target TP rank, flattened to fp32. */
static int flat_part(write_ctx *c, size_t i, int k, const ckpt_node **out)
{
    const mg_entry *e = c->params[i].entry;
    const ckpt_node *part;
    int64_t numel;
    int rc = ckpt_megatron__part(c->m, c->t, c->padded_vocab, e, e->moment[k], c->tp, c->etp, &part);

    if (rc < 0)
        return rc;
    numel = ckpt_node_numel(part);
    if (numel != ckpt_node_numel(c->params[i].shard))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: optimizer state '%s' has %lld elements at TP rank %d, the parameter %lld", e->name,
                               state_keys[k], (long long)numel, c->tp, (long long)ckpt_node_numel(c->params[i].shard));
    if (ckpt_node_dtype(part) != CKPT_DTYPE_F32 && (rc = ckpt_node_cast(c->m->g, part, CKPT_DTYPE_F32, &part)) < 0)
        return rc;
    return ckpt_node_reshape(c->m->g, part, 1, &numel, out);
}

/* Insertion sort by flat offset: a buffer's parameters arrive in reverse offset order, so this
 * is linear in practice. */
static void sort_by_flat(size_t *idx, size_t n, const mg_dopt_layout *l)
{
    size_t i, j;

    for (i = 1; i < n; i++)
        for (j = i; j > 0 && l->ranges[idx[j - 1]].flat > l->ranges[idx[j]].flat; j--) {
            size_t tmp = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = tmp;
        }
}

/* The flat tensor of moment k of buffer b: its parameters' parts, zeros between. */
static int flat_tensor(write_ctx *c, size_t b, int k, const size_t *idx, size_t n, const ckpt_node **out)
{
    const ckpt_node **pieces = calloc(2 * n + 2, sizeof *pieces);
    size_t i, np = 0;
    int64_t at = 0;
    int rc = 0;

    if (!pieces)
        return ckpt_error_oom();
    for (i = 0; i <= n && rc == 0; i++) {
        int64_t next = i < n ? c->l->ranges[idx[i]].flat : c->l->buffers[b].numel_unpadded;
        if (next > at) {
            int64_t gap = next - at;
            rc = ckpt_node_zeros(c->m->g, CKPT_DTYPE_F32, 1, &gap, &pieces[np++]);
        }
        if (rc == 0 && i < n) {
            rc = flat_part(c, idx[i], k, &pieces[np++]);
            next = c->l->ranges[idx[i]].flat + (c->l->ranges[idx[i]].end - c->l->ranges[idx[i]].start);
        }
        at = next;
    }
    if (rc == 0)
        rc = np == 1 ? (*out = pieces[0], 0) : ckpt_node_concat(c->m->g, pieces, np, 0, out);
    free(pieces);
    return rc;
}

static int set_key(ckpt_arena *a, ckpt_value *dict, const char *key, ckpt_value *v)
{
    ckpt_value *k = ckpt_value_new_str(a, key, strlen(key));
    return k && v ? ckpt_value_dict_set(a, dict, k, v) : CKPT_ENOMEM;
}

/* {(param dtype, grad dtype): {param, exp_avg, exp_avg_sq, numel_unpadded}} of buffer b. */
static int buffer_value(write_ctx *c, size_t b, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(c->plan);
    const mg_dopt_buffer *buf = &c->l->buffers[b];
    ckpt_value *outer = ckpt_value_new(a, CKPT_VAL_DICT), *st = ckpt_value_new(a, CKPT_VAL_DICT);
    ckpt_value *key = ckpt_value_new(a, CKPT_VAL_TUPLE);
    size_t *idx = calloc(c->n + 1, sizeof *idx), i, n = 0, index;
    int k, rc = outer && st && key ? 0 : CKPT_ENOMEM;

    if (!idx)
        return ckpt_error_oom();
    for (i = 0; i < c->n; i++)
        if (c->l->ranges[i].buffer == b)
            idx[n++] = i;
    sort_by_flat(idx, n, c->l);
    for (k = 0; k < MG_N_MOMENTS && rc == 0; k++) {
        const ckpt_node *flat;
        char name[96];
        /* the chained optimizer's expert state numbers its buffers from 0 as well */
        snprintf(name, sizeof name, "distrib_optim/%s%zu/%s", buf->expert ? "expert/" : "", buf->gbuf,
                 state_keys[k]);
        if ((rc = flat_tensor(c, b, k, idx, n, &flat)) == 0 &&
            (rc = ckpt_plan_add_tensor(c->plan, c->file, name, flat, 0, &index)) == 0)
            rc = set_key(a, st, state_keys[k], ckpt_value_new_tensor(a, index));
    }
    if (rc == 0)
        rc = set_key(a, st, "numel_unpadded", ckpt_value_new_int(a, buf->numel_unpadded));
    for (k = 0; k < 2 && rc == 0; k++) {
        ckpt_value *dt = ckpt_value_new_global(a, "torch", ckpt_dtype_name(k ? buf->grad_dtype : buf->param_dtype));
        rc = dt ? ckpt_value_append(a, key, dt) : CKPT_ENOMEM;
    }
    if (rc == 0)
        rc = ckpt_value_dict_set(a, outer, key, st);
    free(idx);
    *out = outer;
    return rc;
}

/* The target rank's parameters as the layout takes them. */
static int target_layout(const ckpt_megatron *m, const ckpt_megatron_target *t, const ckpt_value *targs, int pp,
                         const mg_param_out *params, size_t n, const char *where, mg_dopt_layout *l)
{
    const mg_entry **entries = calloc(n + 1, sizeof *entries);
    const ckpt_node **shards = calloc(n + 1, sizeof *shards);
    int *chunks = calloc(n + 1, sizeof *chunks);
    mg_dopt_param *p = NULL;
    mg_dopt_config cfg;
    size_t i;
    int rc = entries && shards && chunks ? 0 : ckpt_error_oom();

    memset(l, 0, sizeof *l);
    for (i = 0; i < n && rc == 0; i++) {
        entries[i] = params[i].entry;
        shards[i] = params[i].shard;
        chunks[i] = params[i].chunk;
        if (!params[i].entry->moment[MG_MASTER] || !params[i].entry->moment[MG_EXP_AVG] ||
            !params[i].entry->moment[MG_EXP_AVG_SQ])
            rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                                 "%s: no optimizer state for parameter %s", where, params[i].entry->name);
    }
    if (rc == 0 && (rc = ckpt_megatron__dopt_config(targs, 0, pp, where, &cfg)) == 0 &&
        (rc = ckpt_megatron__dopt_params(m, entries, chunks, shards, n, t->pp, ckpt_megatron__target_ep(m, t), &p)) == 0)
        rc = ckpt_megatron__dopt_layout(p, n, &cfg, l);
    free(p);
    free(entries);
    free(shards);
    free(chunks);
    return rc;
}

/* One optimizer's state: the buffers of one kind (expert or dense), as
 * get_parameter_state_dp_zero returns it. */
static int optimizer_state(write_ctx *c, int expert, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(c->plan);
    ckpt_value *root = ckpt_value_new(a, CKPT_VAL_DICT), *v = NULL;
    size_t b;
    int rc;

    *out = root;
    if (!root)
        return CKPT_ENOMEM;
    rc = set_key(a, root, "buckets_coalesced", ckpt_value_new_bool(a, 1));
    for (b = 0; b < c->l->n_buffers && rc == 0; b++)
        if (!c->l->buffers[b].expert == !expert && (rc = buffer_value(c, b, &v)) == 0) {
            ckpt_value *gbuf = ckpt_value_new_int(a, (int64_t)c->l->buffers[b].gbuf);
            rc = gbuf ? ckpt_value_dict_set(a, root, gbuf, v) : CKPT_ENOMEM;
        }
    return rc;
}

/* A rank with dense and expert parameters (a mixture of experts) has two optimizers
 * (ChainedOptimizer.save_parameter_state): the list [dense, expert], the dense state None but
 * at the dense optimizer's data-parallel rank 0 (the file's writer, expert-DP rank 0, is dense
 * data-parallel rank `dense_rank`). */
static int chained_state(write_ctx *c, int dense_rank, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(c->plan);
    ckpt_value *dense = NULL, *expert = NULL;
    int rc;

    *out = ckpt_value_new(a, CKPT_VAL_LIST);
    if (!*out)
        return CKPT_ENOMEM;
    if (dense_rank == 0)
        rc = optimizer_state(c, 0, &dense);
    else
        rc = (dense = ckpt_value_new(a, CKPT_VAL_NONE)) ? 0 : CKPT_ENOMEM;
    if (rc == 0)
        rc = optimizer_state(c, 1, &expert);
    if (rc == 0)
        rc = ckpt_value_append(a, *out, dense);
    if (rc == 0)
        rc = ckpt_value_append(a, *out, expert);
    return rc;
}

int ckpt_megatron__distopt_write(ckpt_megatron *m, const ckpt_megatron_target *t, const ckpt_value *targs,
                                 ckpt_plan *plan, const char *rel, const mg_param_out *params, size_t n, int tp,
                                 int etp, int pp, int dense_rank, int64_t padded_vocab)
{
    ckpt_value *root = NULL;
    mg_dopt_layout l;
    write_ctx c;
    int rc;

    if ((rc = target_layout(m, t, targs, pp, params, n, rel, &l)) < 0) {
        ckpt_megatron__dopt_layout_free(&l);
        return rc;
    }
    memset(&c, 0, sizeof c);
    c.m = m;
    c.t = t;
    c.plan = plan;
    c.padded_vocab = padded_vocab;
    c.tp = tp;
    c.etp = etp;
    c.params = params;
    c.n = n;
    c.l = &l;
    if ((rc = ckpt_plan_add_file(plan, rel, "torch", &c.file)) == 0) {
        if (l.n_dense && l.n_buffers > l.n_dense)
            rc = chained_state(&c, dense_rank, &root);
        else
            rc = optimizer_state(&c, l.n_dense == 0, &root);
    }
    if (rc == 0)
        rc = ckpt_plan_set_root(plan, c.file, root);
    ckpt_megatron__dopt_layout_free(&l);
    return rc;
}
