/* Reading a legacy distributed optimizer's state (iter_N/mp_rank_TT[_PPP][_EEE]/distrib_optim.pt,
 * written by DP rank 0 of each TP x PP (x EP) rank with DistributedOptimizer.save_parameter_state)
 * into the logical model: each parameter's fp32 master copy and Adam moments, cut from the
 * rank's flat tensors at the range the grad buffer layout gives it and merged over TP like the
 * parameter, lazily.
 *
 * The file (get_parameter_state_dp_zero, megatron-core >= 0.6):
 *   {'buckets_coalesced': True,
 *    gbuf_idx: {(param dtype, grad dtype): {'param', 'exp_avg', 'exp_avg_sq': fp32 1-D of the
 *               buffer's numel_unpadded, 'numel_unpadded': int}}}
 * A mixture-of-experts model trains dense and expert parameters with two optimizers
 * (ChainedOptimizer); its file is the list [dense state, expert state], an entry None where the
 * rank is not that optimizer's data-parallel rank 0: EP rank 0 writes [dense, expert], the others
 * [None, expert] (the dense state is EP rank 0's; each EP rank's experts are its own).
 * Everything it says of itself is checked against the layout computed from args and the
 * model's shapes before a byte of state is trusted. */
#include "megatron_distopt.h"
#include "../megatron_private.h"

#include <stdlib.h>
#include <string.h>

#define EMBEDDING_WEIGHT "embedding.word_embeddings.weight"
#define OUTPUT_WEIGHT "output_layer.weight"

static const char *const state_keys[MG_N_MOMENTS] = { "param", "exp_avg", "exp_avg_sq" };

int ckpt_megatron__dopt_shared_embedding(const ckpt_value *args, int pp, const char *name)
{
    const ckpt_value *untie = ckpt_megatron_arg(args, "untie_embeddings_and_output_weights");

    if (pp <= 1 || (untie && untie->kind == CKPT_VAL_BOOL && untie->u.boolean))
        return 0;
    return strcmp(name, EMBEDDING_WEIGHT) == 0 || strcmp(name, OUTPUT_WEIGHT) == 0;
}

int ckpt_megatron__dopt_params(const ckpt_megatron *m, const mg_entry *const *entries, const int *chunks,
                               const ckpt_node *const *shards, size_t n, int pp_size, int ep_size,
                               mg_dopt_param **out)
{
    size_t i;

    *out = calloc(n ? n : 1, sizeof **out);
    if (!*out)
        return ckpt_error_oom();
    for (i = 0; i < n; i++) {
        mg_dopt_param *p = &(*out)[i];
        p->chunk = chunks[i];
        p->numel = ckpt_node_numel(shards[i]);
        p->dtype = ckpt_node_dtype(shards[i]);
        /* at EP 1 the experts are dense parameters (allreduce: megatron-core 0.16.1
         * tensor_parallel/layers.py), in the dense buffers and optimizer */
        p->expert = entries[i]->layout.expert && ep_size > 1;
        p->shared_embedding = ckpt_megatron__dopt_shared_embedding(m->args, pp_size, entries[i]->name);
    }
    return 0;
}

/* The parameters of source rank (tp, pp, ep): entries in named_parameters() order, chunk by
 * chunk (the model's entries are in chunk order, each chunk's in its state dict's; the dense
 * ones before an EP rank's experts, which only the order within a buffer sees). */
static int source_rank(const ckpt_megatron *m, int tp, int pp, int ep, const mg_entry ***entries,
                       const ckpt_node ***shards, int **chunks, size_t *n)
{
    size_t i, k = 0;

    *n = 0;
    *entries = calloc(m->n_entries + 1, sizeof **entries);
    *shards = calloc(m->n_entries + 1, sizeof **shards);
    *chunks = calloc(m->n_entries + 1, sizeof **chunks);
    if (!*entries || !*shards || !*chunks)
        return ckpt_error_oom();
    for (i = 0; i < m->n_entries; i++) {
        const mg_entry *e = &m->entries[i];
        if (!e->param || !e->full || !e->shards || e->src_pp != pp || (e->ep >= 0 && e->ep != ep))
            continue;
        (*entries)[k] = e;
        (*shards)[k] = e->shards[tp];
        (*chunks)[k++] = e->src_vp;
    }
    *n = k;
    return 0;
}

int ckpt_megatron__dopt_source_layout(const ckpt_megatron *m, int tp, int pp, int ep, const mg_entry ***entries,
                                      const ckpt_node ***shards, size_t *n, mg_dopt_layout *l)
{
    const ckpt_ckpt *ck = mg_rank_at(m, tp, pp, ep)->ck;
    mg_dopt_param *params = NULL;
    mg_dopt_config cfg;
    int *chunks = NULL;
    int rc;

    memset(l, 0, sizeof *l);
    if ((rc = source_rank(m, tp, pp, ep, entries, shards, &chunks, n)) == 0 &&
        (rc = ckpt_megatron__dopt_config(m->args, 0, pp, ckpt_path(ck), &cfg)) == 0 &&
        (rc = ckpt_megatron__dopt_params(m, *entries, chunks, *shards, *n, m->info.pp, m->info.ep, &params)) == 0)
        rc = ckpt_megatron__dopt_layout(params, *n, &cfg, l);
    free(params);
    free(chunks);
    return rc;
}

static const ckpt_value *int_key(const ckpt_value *d, int64_t key)
{
    size_t i;

    for (i = 0; i < d->u.dict.map.n; i++)
        if (d->u.dict.map.keys[i]->kind == CKPT_VAL_INT && d->u.dict.map.keys[i]->u.integer == key)
            return d->u.dict.map.vals[i];
    return NULL;
}

static int dtype_pair_is(const ckpt_value *k, const mg_dopt_buffer *b)
{
    return k->kind == CKPT_VAL_TUPLE && k->u.seq.n == 2 &&
           ckpt_value_is_global(k->u.seq.items[0], "torch", ckpt_dtype_name(b->param_dtype)) &&
           ckpt_value_is_global(k->u.seq.items[1], "torch", ckpt_dtype_name(b->grad_dtype));
}

/* One optimizer's state: the coalesced format, with exactly `want` grad buffers. */
static int check_state(const ckpt_ckpt *ck, const ckpt_value *root, const char *which, size_t want)
{
    const ckpt_value *coalesced;
    size_t i, ints = 0;

    if (!root || root->kind != CKPT_VAL_DICT)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: not a distributed optimizer state (the %s is not a dict)", ckpt_path(ck), which);
    coalesced = ckpt_value_dict_get(root, "buckets_coalesced");
    if (!coalesced)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT,
                               "%s: no 'buckets_coalesced': the per-bucket format megatron-core wrote before "
                               "February 2024; load it once with Megatron's --ckpt-convert-update-legacy-dist-opt-"
                               "format and save it again",
                               ckpt_path(ck));
    if (coalesced->kind != CKPT_VAL_BOOL || !coalesced->u.boolean)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: 'buckets_coalesced' is not True",
                               ckpt_path(ck));
    for (i = 0; i < root->u.dict.map.n; i++)
        ints += root->u.dict.map.keys[i]->kind == CKPT_VAL_INT;
    if (ints != want || ints + 1 != root->u.dict.map.n)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: %s: %zu grad buffers (and %zu other keys); the model's parameters at this rank "
                               "make %zu",
                               ckpt_path(ck), which, ints, root->u.dict.map.n - ints - 1, want);
    return 0;
}

/* The file's top level: states[0] the dense optimizer's, states[1] the expert one's (one dict
 * for both when the rank's parameters are of one kind; NULL for what the file of dense
 * data-parallel rank `dense_dp` does not hold: the dense state unless dense_dp is 0). */
static int check_top(const ckpt_ckpt *ck, const ckpt_value *root, const mg_dopt_layout *l, int dense_dp,
                     const ckpt_value **states)
{
    size_t n_expert = l->n_buffers - l->n_dense;
    int rc;

    states[0] = states[1] = NULL;
    if (!l->n_dense || !n_expert) {
        if (root && (root->kind == CKPT_VAL_LIST || root->kind == CKPT_VAL_TUPLE))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: a list of %zu optimizers' states, but the rank has only %s parameters (one "
                                   "optimizer)",
                                   ckpt_path(ck), root->u.seq.n, l->n_dense ? "dense" : "expert");
        if ((rc = check_state(ck, root, "top level", l->n_buffers)) < 0)
            return rc;
        states[0] = states[1] = root;
        return 0;
    }
    if (!root || root->kind != CKPT_VAL_LIST || root->u.seq.n != 2)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: the rank has dense and expert parameters, so its state is the chained optimizer's "
                               "list [dense, expert]; the top level is %s",
                               ckpt_path(ck),
                               !root                                                        ? "missing"
                               : root->kind == CKPT_VAL_LIST || root->kind == CKPT_VAL_TUPLE ? "a list of another length"
                                                                                            : "not a list");
    /* the files of dense data-parallel ranks > 0 (EP ranks > 0 at an expert TP equal to the
     * TP): Megatron writes None */
    if (dense_dp == 0 && (rc = check_state(ck, root->u.seq.items[0], "dense optimizer's state (list entry 0)",
                                     l->n_dense)) < 0)
        return rc;
    if (dense_dp > 0 && root->u.seq.items[0]->kind != CKPT_VAL_NONE)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: list entry 0 (the dense optimizer's state) is not None in the file of dense "
                               "data-parallel rank %d; Megatron saves it at data-parallel rank 0 only",
                               ckpt_path(ck), dense_dp);
    if ((rc = check_state(ck, root->u.seq.items[1], "expert optimizer's state (list entry 1)", n_expert)) < 0)
        return rc;
    states[0] = dense_dp == 0 ? root->u.seq.items[0] : NULL;
    states[1] = root->u.seq.items[1];
    return 0;
}

/* The state of grad buffer b: its dict, checked against the layout. */
static int buffer_state(const ckpt_ckpt *ck, const mg_dopt_layout *l, const ckpt_value *const *states, size_t b,
                        const ckpt_tensor **flat)
{
    const mg_dopt_buffer *buf = &l->buffers[b];
    const ckpt_value *d = int_key(states[buf->expert != 0], (int64_t)buf->gbuf), *st, *nu;
    int k;

    if (!d || d->kind != CKPT_VAL_DICT || d->u.dict.map.n != 1 || !dtype_pair_is(d->u.dict.map.keys[0], buf))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: grad buffer %zu: expected one state keyed (torch.%s, torch.%s) (chunk %d)",
                               ckpt_path(ck), buf->gbuf, ckpt_dtype_name(buf->param_dtype),
                               ckpt_dtype_name(buf->grad_dtype), buf->chunk);
    st = d->u.dict.map.vals[0];
    nu = st->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(st, "numel_unpadded") : NULL;
    if (!nu || nu->kind != CKPT_VAL_INT)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: grad buffer %zu: no integer numel_unpadded",
                               ckpt_path(ck), buf->gbuf);
    if (nu->u.integer != buf->numel_unpadded)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: grad buffer %zu: numel_unpadded %lld, but the rank's parameters laid out as "
                               "megatron-core does (args' DP, bucket size, padding) make %lld in %zu bucket%s",
                               ckpt_path(ck), buf->gbuf, (long long)nu->u.integer, (long long)buf->numel_unpadded,
                               buf->n_buckets, buf->n_buckets == 1 ? "" : "s");
    for (k = 0; k < MG_N_MOMENTS; k++) {
        const ckpt_value *v = ckpt_value_dict_get(st, state_keys[k]);
        const ckpt_tensor *t = v && v->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(ck, v->u.tensor.index) : NULL;
        if (!t || t->dtype != CKPT_DTYPE_F32 || t->ndim != 1 || t->shape[0] != buf->numel_unpadded)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: grad buffer %zu: '%s' is %s, expected a float32 tensor of %lld elements",
                                   ckpt_path(ck), buf->gbuf, state_keys[k],
                                   !t ? "missing" : t->dtype != CKPT_DTYPE_F32 ? ckpt_dtype_name(t->dtype)
                                   : t->ndim != 1                         ? "not 1-D"
                                                                          : "of another size",
                                   (long long)buf->numel_unpadded);
        flat[b * MG_N_MOMENTS + (size_t)k] = t;
    }
    return 0;
}

int ckpt_megatron__dopt_flat(const ckpt_ckpt *ck, const ckpt_value *root, const mg_dopt_layout *l, int dense_dp,
                             const ckpt_tensor **flat)
{
    const ckpt_value *states[2];
    size_t i;
    int rc = check_top(ck, root, l, dense_dp, states);

    for (i = 0; i < l->n_buffers && rc == 0; i++)
        if (states[l->buffers[i].expert != 0])
            rc = buffer_state(ck, l, states, i, flat);
    return rc;
}

/* Rank (tp, pp, ep)'s part of each of its parameters' state, into parts[entry][moment][tp]
 * (an expert's at its expert TP rank; dense parameters from the file of dense data-parallel
 * rank 0). */
static int read_rank(ckpt_megatron *m, int tp, int pp, int ep, const ckpt_node **parts)
{
    ckpt_coords at = CKPT_COORDS_NONE;
    const mg_entry **entries = NULL;
    const ckpt_node **shards = NULL;
    const ckpt_tensor **flat = NULL;
    const ckpt_ckpt *ck;
    mg_dopt_layout l;
    size_t i, n = 0;
    long member;
    int k, rc;

    memset(&l, 0, sizeof l);
    at.tp = tp;
    at.pp = pp;
    at.ep = ep;
    member = ckpt_set_find(m->set, &at, "distrib_optim");
    if (member < 0)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                               "%s: no distrib_optim.pt beside %s (TP %d, PP %d, EP %d); every rank of a distributed "
                               "optimizer has one",
                               ckpt_set_info_of(m->set)->root, ckpt_path(mg_rank_at(m, tp, pp, ep)->ck), tp, pp, ep);
    if ((rc = ckpt_set_member_open(m->set, (size_t)member, &ck)) < 0 ||
        (rc = ckpt_megatron__dopt_source_layout(m, tp, pp, ep, &entries, &shards, &n, &l)) < 0)
        goto done;
    if (!(flat = calloc(l.n_buffers * MG_N_MOMENTS + 1, sizeof *flat))) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = ckpt_megatron__dopt_flat(ck, ckpt_root(ck), &l, mg_dense_dp(m, tp, ep), flat)) < 0)
        goto done;
    for (i = 0; i < n && rc == 0; i++) {
        const mg_dopt_range *r = &l.ranges[i];
        size_t e = (size_t)(entries[i] - m->entries);
        int part = entries[i]->layout.expert ? tp % mg_etp(m) : tp;
        if (!flat[r->buffer * MG_N_MOMENTS])
            continue;
        for (k = 0; k < MG_N_MOMENTS && rc == 0; k++) {
            const ckpt_node *whole, *cut;
            if ((rc = ckpt_node_tensor(m->g, flat[r->buffer * MG_N_MOMENTS + (size_t)k], &whole)) == 0 &&
                (rc = ckpt_node_slice(m->g, whole, 0, r->flat, r->end - r->start, &cut)) == 0)
                rc = ckpt_node_reshape(m->g, cut, ckpt_node_ndim(shards[i]), ckpt_node_shape(shards[i]),
                                       &parts[(e * MG_N_MOMENTS + (size_t)k) * (size_t)m->info.tp + (size_t)part]);
        }
        if (rc < 0)
            ckpt_error_prefix("%s: %s", ckpt_path(ck), entries[i]->name);
    }
done:
    ckpt_megatron__dopt_layout_free(&l);
    free(flat);
    free(entries);
    free(shards);
    return rc;
}

int ckpt_megatron__read_distopt(ckpt_megatron *m)
{
    const ckpt_node **parts;
    size_t i;
    int tp, pp, ep, k, rc = 0;

    parts = calloc(m->n_entries * MG_N_MOMENTS * (size_t)m->info.tp + 1, sizeof *parts);
    if (!parts)
        return ckpt_error_oom();
    for (pp = 0; pp < m->info.pp && rc == 0; pp++)
        for (ep = 0; ep < m->info.ep && rc == 0; ep++)
            for (tp = 0; tp < m->info.tp && rc == 0; tp++)
                if (!mg_rank_at(m, tp, pp, ep)->stand_in)
                    rc = read_rank(m, tp, pp, ep, parts);
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        mg_entry *e = &m->entries[i];
        if (!e->param || !e->full)
            continue;
        for (k = 0; k < MG_N_MOMENTS && rc == 0; k++) {
            const ckpt_node *const *row = &parts[(i * MG_N_MOMENTS + (size_t)k) * (size_t)m->info.tp];
            rc = ckpt_parallel_merge(m->g, &e->layout, e->name, row, (size_t)mg_read_ways(m, e->layout.expert),
                                     &e->moment[k]);
        }
    }
    free(parts);
    for (i = 0; i < m->n_entries && rc < 0; i++)
        memset(m->entries[i].moment, 0, sizeof m->entries[i].moment);
    m->moments = rc == 0;
    return rc;
}
