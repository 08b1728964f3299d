/* Resharding the non-distributed optimizer state of a Megatron checkpoint.
 *
 * `optimizer` in model_optim_rng.pt is the torch optimizer's state dict ({state, param_groups};
 * Float16OptimizerWithFloat16Params wraps it as {optimizer, grad_scaler, fp32_from_fp16_params}).
 * Its state is keyed by the parameter's position in the param groups, which Megatron builds
 * from the model chunks' named_parameters() in order, split by weight decay: biases and 1-D
 * parameters (norms) have none (wd_mult 0), the others wd_mult 1. So each rank's positions are
 * matched to its state-dict keys by walking the parameters in order and dealing them to the
 * groups by that rule; every moment must then have its parameter's shape, which is checked.
 * A per-parameter tensor of the parameter's shape (exp_avg, exp_avg_sq) is merged over the TP
 * ranks and split again exactly like the parameter; anything else (step) is carried. */
#include "megatron_private.h"

#include <stdlib.h>
#include <string.h>

typedef struct optim_view {
    const ckpt_ckpt *ck;
    const ckpt_value *sd;      /* {state, param_groups} */
    const ckpt_value *masters; /* fp32_from_fp16_params: a list per group, or NULL */
    size_t n;
    const char **keys;         /* per parameter in state-dict order: its model key, */
    int *vp;                   /* its chunk, */
    int64_t *index;            /* its state index, */
    size_t *group, *pos;       /* its group and place in it */
} optim_view;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int no_weight_decay(const char *key, int ndim)
{
    return ends_with(key, ".bias") || ndim == 1;
}

/* Whether a group is the no-weight-decay one: wd_mult 0, else weight_decay 0. */
static int group_no_wd(const ckpt_value *group)
{
    const ckpt_value *v = ckpt_value_dict_get(group, "wd_mult");

    if (!v)
        v = ckpt_value_dict_get(group, "weight_decay");
    if (v && v->kind == CKPT_VAL_FLOAT)
        return v->u.real == 0.0;
    if (v && v->kind == CKPT_VAL_INT)
        return v->u.integer == 0;
    return -1;
}

static const ckpt_value *int_key_get(const ckpt_value *dict, int64_t key)
{
    size_t i;

    for (i = 0; dict && dict->kind == CKPT_VAL_DICT && i < dict->u.dict.map.n; i++)
        if (dict->u.dict.map.keys[i]->kind == CKPT_VAL_INT && dict->u.dict.map.keys[i]->u.integer == key)
            return dict->u.dict.map.vals[i];
    return NULL;
}

static const ckpt_value *seq_at(const ckpt_value *v, size_t i)
{
    return v && (v->kind == CKPT_VAL_LIST || v->kind == CKPT_VAL_TUPLE) && i < v->u.seq.n ? v->u.seq.items[i] : NULL;
}

static size_t seq_len(const ckpt_value *v)
{
    return v && (v->kind == CKPT_VAL_LIST || v->kind == CKPT_VAL_TUPLE) ? v->u.seq.n : 0;
}

static int unsupported(const ckpt_ckpt *ck, const char *why)
{
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                           "%s: optimizer state: %s; --no-optimizer writes a model-only checkpoint", ckpt_path(ck),
                           why);
}

static int find_state_dict(const ckpt_ckpt *ck, const ckpt_value *opt, const ckpt_value **sd, const ckpt_value **masters)
{
    const ckpt_value *inner = opt && opt->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(opt, "optimizer") : NULL;

    *masters = NULL;
    if (opt && opt->kind == CKPT_VAL_DICT && ckpt_value_dict_get(opt, "state") && ckpt_value_dict_get(opt, "param_groups")) {
        *sd = opt;
        return 0;
    }
    if (inner && inner->kind == CKPT_VAL_DICT && ckpt_value_dict_get(inner, "state") &&
        ckpt_value_dict_get(inner, "param_groups")) {
        *sd = inner;
        *masters = ckpt_value_dict_get(opt, "fp32_from_fp16_params");
        /* its kind is copied for the output's: only a list of per-group lists makes sense */
        if (*masters && (*masters)->kind != CKPT_VAL_LIST && (*masters)->kind != CKPT_VAL_TUPLE)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: fp32_from_fp16_params is not a list",
                                   ckpt_path(ck));
        return 0;
    }
    return unsupported(ck, "neither a torch optimizer state dict nor Megatron's fp16 wrapper of one (several "
                           "chained optimizers, e.g. for experts, are not resharded yet)");
}

static void view_free(optim_view *v)
{
    free(v->keys);
    free(v->vp);
    free(v->index);
    free(v->group);
    free(v->pos);
    memset(v, 0, sizeof *v);
}

static int view_push(optim_view *v, const char *key, int vp, int ndim, size_t *cap)
{
    (void)ndim;
    if (v->n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        const char **keys = realloc(v->keys, c * sizeof *keys);
        int *vps = keys ? realloc(v->vp, c * sizeof *vps) : NULL;
        if (keys)
            v->keys = keys;
        if (vps)
            v->vp = vps;
        if (!keys || !vps)
            return ckpt_error_oom();
        *cap = c;
    }
    v->keys[v->n] = key;
    v->vp[v->n++] = vp;
    return 0;
}

/* A source rank's parameters in state-dict order, dealt to its param groups. */
static int view_open(const ckpt_megatron *m, const mg_rank *r, optim_view *v)
{
    const ckpt_value *groups, *state;
    size_t cap = 0, i, g, *taken;
    int *flags = NULL, vp, rc;

    memset(v, 0, sizeof *v);
    v->ck = r->ck;
    if ((rc = find_state_dict(r->ck, ckpt_value_dict_get(r->root, "optimizer"), &v->sd, &v->masters)) < 0)
        return rc;
    groups = ckpt_value_dict_get(v->sd, "param_groups");
    state = ckpt_value_dict_get(v->sd, "state");
    for (vp = 0; vp < m->info.vpp; vp++) {
        const ckpt_value *d = ckpt_megatron__chunk_dict(r->root, m->info.vpp, vp);
        for (i = 0; d && i < d->u.dict.map.n; i++) {
            const ckpt_value *k = d->u.dict.map.keys[i], *val = d->u.dict.map.vals[i];
            if (k->kind != CKPT_VAL_STR || val->kind != CKPT_VAL_TENSOR || ends_with(k->u.str.ptr, "._extra_state"))
                continue;
            if ((rc = view_push(v, k->u.str.ptr, vp, 0, &cap)) < 0)
                goto fail;
        }
    }
    v->index = calloc(v->n + 1, sizeof *v->index);
    v->group = calloc(v->n + 1, sizeof *v->group);
    v->pos = calloc(v->n + 1, sizeof *v->pos);
    flags = calloc(seq_len(groups) + 1, sizeof *flags);
    taken = calloc(seq_len(groups) + 1, sizeof *taken);
    if (!v->index || !v->group || !v->pos || !flags || !taken) {
        free(taken);
        rc = ckpt_error_oom();
        goto fail;
    }
    for (g = 0; g < seq_len(groups); g++) {
        size_t h;
        flags[g] = seq_len(groups) == 1 ? 2 : group_no_wd(seq_at(groups, g));
        for (h = 0; h < g && flags[g] >= 0; h++)
            if (flags[h] == flags[g])
                flags[g] = -1;
    }
    for (i = 0, rc = 0; i < v->n && rc == 0; i++) {
        const ckpt_value *d = ckpt_megatron__chunk_dict(r->root, m->info.vpp, v->vp[i]);
        /* looked up again by its C string: a key with a NUL byte finds another entry, or none */
        const ckpt_value *leaf = ckpt_value_dict_get(d, v->keys[i]);
        const ckpt_tensor *t = leaf && leaf->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(r->ck, leaf->u.tensor.index)
                                                                     : NULL;
        const ckpt_value *idx, *entry, *moment;
        int want;
        if (!t) {
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: model key '%s' does not name one tensor",
                                 ckpt_path(r->ck), v->keys[i]);
            break;
        }
        want = no_weight_decay(v->keys[i], t->ndim);
        for (g = 0; g < seq_len(groups); g++)
            if (flags[g] == 2 || flags[g] == want)
                break;
        if (g == seq_len(groups)) {
            rc = unsupported(r->ck, "its param groups are not Megatron's weight-decay split");
            break;
        }
        idx = seq_at(ckpt_value_dict_get(seq_at(groups, g), "params"), taken[g]);
        if (!idx || idx->kind != CKPT_VAL_INT) {
            rc = unsupported(r->ck, "a param group holds fewer parameters than the model");
            break;
        }
        v->group[i] = g;
        v->pos[i] = taken[g]++;
        v->index[i] = idx->u.integer;
        entry = int_key_get(state, idx->u.integer);
        moment = entry ? ckpt_value_dict_get(entry, "exp_avg") : NULL;
        if (moment && moment->kind == CKPT_VAL_TENSOR) {
            const ckpt_tensor *mt = ckpt_tensor_at(r->ck, moment->u.tensor.index);
            if (mt->ndim != t->ndim || memcmp(mt->shape, t->shape, (size_t)t->ndim * sizeof *t->shape) != 0)
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                     "%s: optimizer state %lld does not have the shape of '%s', the parameter it "
                                     "should belong to by Megatron's ordering",
                                     ckpt_path(r->ck), (long long)idx->u.integer, v->keys[i]);
        }
    }
    for (g = 0; rc == 0 && g < seq_len(groups); g++)
        if (taken[g] != seq_len(ckpt_value_dict_get(seq_at(groups, g), "params")))
            rc = unsupported(r->ck, "a param group holds more parameters than the model");
    free(taken);
    if (rc != 0)
        goto fail;
    free(flags);
    return 0;
fail:
    free(flags);
    view_free(v);
    return rc;
}

typedef struct optim_ctx {
    ckpt_megatron *m;
    const ckpt_megatron_target *t;
    int64_t padded_vocab;
    optim_view *views; /* [ep][pp][tp] like the ranks, opened on demand */
    int *opened;
} optim_ctx;

static int view_of(optim_ctx *c, int tp, int pp, int ep, optim_view **out)
{
    size_t i = ((size_t)ep * (size_t)c->m->info.pp + (size_t)pp) * (size_t)c->m->info.tp + (size_t)tp;
    int rc;

    if (!c->opened[i]) {
        if ((rc = view_open(c->m, mg_rank_at(c->m, tp, pp, ep), &c->views[i])) < 0)
            return rc;
        c->opened[i] = 1;
    }
    *out = &c->views[i];
    return 0;
}

static long view_find(const optim_view *v, const mg_entry *e)
{
    size_t i;
    for (i = 0; i < v->n; i++)
        if (v->vp[i] == e->src_vp && strcmp(v->keys[i], e->local) == 0)
            return (long)i;
    return -1;
}

/* The state of entry e on source TP rank tp: its state dict entry and master copy. */
static int source_state(optim_ctx *c, const mg_entry *e, int tp, const optim_view **view, const ckpt_value **entry,
                        const ckpt_value **master)
{
    optim_view *v;
    long i;
    int rc;

    if ((rc = view_of(c, tp, e->src_pp, e->ep >= 0 ? e->ep : 0, &v)) < 0)
        return rc;
    i = view_find(v, e);
    if (i < 0)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no optimizer state for '%s'", ckpt_path(v->ck),
                               e->local);
    *view = v;
    *entry = int_key_get(ckpt_value_dict_get(v->sd, "state"), v->index[i]);
    *master = v->masters ? seq_at(seq_at(v->masters, v->group[i]), v->pos[i]) : NULL;
    return 0;
}

/* Merge over the source TP ranks the per-parameter tensor that `pick` selects, and split it
 * for the target; outs gets t->tp nodes. */
typedef const ckpt_value *(*pick_fn)(const ckpt_value *entry, const ckpt_value *master, const char *key);

static const ckpt_value *pick_state(const ckpt_value *entry, const ckpt_value *master, const char *key)
{
    (void)master;
    return entry ? ckpt_value_dict_get(entry, key) : NULL;
}

static const ckpt_value *pick_master(const ckpt_value *entry, const ckpt_value *master, const char *key)
{
    (void)entry;
    (void)key;
    return master;
}

static int reshard_state(optim_ctx *c, const mg_entry *e, pick_fn pick, const char *key, const ckpt_node **outs)
{
    int n = c->m->info.tp, tp, rc = 0;
    const ckpt_node **shards = calloc((size_t)n, sizeof *shards), *full;

    if (!shards)
        return ckpt_error_oom();
    for (tp = 0; tp < n && rc == 0; tp++) {
        const optim_view *v;
        const ckpt_value *entry, *master, *leaf;
        if ((rc = source_state(c, e, tp, &v, &entry, &master)) < 0)
            break;
        leaf = pick(entry, master, key);
        if (!leaf || leaf->kind != CKPT_VAL_TENSOR)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: optimizer state '%s' of '%s' is missing",
                                 ckpt_path(v->ck), key, e->local);
        else
            rc = ckpt_node_tensor(c->m->g, ckpt_tensor_at(v->ck, leaf->u.tensor.index), &shards[tp]);
    }
    if (rc == 0)
        rc = ckpt_parallel_merge(c->m->g, &e->layout, e->name, shards, (size_t)n, &full);
    if (rc == 0)
        rc = ckpt_megatron__split(c->m, c->t, c->padded_vocab, e, full, outs);
    free(shards);
    return rc;
}

static ckpt_value *new_str(ckpt_arena *a, const char *s)
{
    return ckpt_value_new_str(a, s, strlen(s));
}

typedef struct rank_out {
    optim_ctx *c;
    ckpt_plan *plan;
    size_t file;
    ckpt_arena *a;
    int tp;
} rank_out;

static int add_shard(rank_out *r, const mg_entry *e, const char *what, const ckpt_node *node, ckpt_value **out)
{
    ckpt_buf name = CKPT_BUF_INIT;
    size_t index;
    int rc = ckpt_buf_printf(&name, "optimizer/%s/%s", e->name, what);

    if (rc == 0)
        rc = ckpt_plan_add_tensor(r->plan, r->file, (const char *)name.data, node, 0, &index);
    ckpt_buf_dispose(&name);
    *out = rc == 0 ? ckpt_value_new_tensor(r->a, index) : NULL;
    return rc < 0 ? rc : *out ? 0 : CKPT_ENOMEM;
}

/* The state dict entry of one target parameter. */
static int state_entry(rank_out *r, const mg_entry *e, ckpt_value **out)
{
    const optim_view *v;
    const ckpt_value *src, *master;
    const ckpt_node **outs = calloc((size_t)r->c->t->tp, sizeof *outs);
    ckpt_value *dict = ckpt_value_new(r->a, CKPT_VAL_DICT);
    int ndim = ckpt_node_ndim(e->full);
    size_t i;
    int rc = outs && dict ? 0 : ckpt_error_oom();

    if (rc == 0)
        rc = source_state(r->c, e, 0, &v, &src, &master);
    if (rc == 0 && src && src->kind != CKPT_VAL_DICT)
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: the optimizer state of '%s' is not a dict",
                             ckpt_path(v->ck), e->local);
    for (i = 0; rc == 0 && src && i < src->u.dict.map.n; i++) {
        const ckpt_value *k = src->u.dict.map.keys[i], *val = src->u.dict.map.vals[i];
        const ckpt_tensor *t = val->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(v->ck, val->u.tensor.index) : NULL;
        ckpt_value *copy = NULL;
        if (t && t->ndim == ndim && ndim > 0 && k->kind == CKPT_VAL_STR) {
            rc = reshard_state(r->c, e, pick_state, k->u.str.ptr, outs);
            if (rc == 0)
                rc = add_shard(r, e, k->u.str.ptr, outs[r->tp], &copy);
        } else {
            rc = ckpt_megatron__carry(r->plan, r->file, r->c->m->g, v->ck, val, &copy);
        }
        if (rc == 0)
            rc = ckpt_value_dict_set(r->a, dict, (ckpt_value *)k, copy);
    }
    free(outs);
    *out = dict;
    return rc;
}

static int group_flags(const ckpt_value *groups, int *flags)
{
    size_t g, h, n = seq_len(groups);

    for (g = 0; g < n; g++) {
        flags[g] = n == 1 ? 2 : group_no_wd(seq_at(groups, g));
        for (h = 0; h < g && flags[g] >= 0; h++)
            if (flags[h] == flags[g])
                flags[g] = -1;
    }
    return 0;
}

/* New param_groups, state and master copies for the target rank's parameters. */
static int build_state(rank_out *r, const optim_view *tv, const mg_param_out *params, size_t n_params,
                       ckpt_value **groups_out, ckpt_value **state_out, ckpt_value **masters_out)
{
    const ckpt_value *groups = ckpt_value_dict_get(tv->sd, "param_groups");
    size_t g, i, n_groups = seq_len(groups);
    int64_t next = 0;
    int *flags = calloc(n_groups + 1, sizeof *flags);
    int rc = flags ? 0 : ckpt_error_oom();

    *groups_out = ckpt_value_new(r->a, CKPT_VAL_LIST);
    *state_out = ckpt_value_new(r->a, CKPT_VAL_DICT);
    *masters_out = tv->masters ? ckpt_value_new(r->a, tv->masters->kind) : NULL;
    if (!*groups_out || !*state_out || (tv->masters && !*masters_out))
        rc = CKPT_ENOMEM;
    if (rc == 0)
        group_flags(groups, flags);
    for (g = 0; rc == 0 && g < n_groups; g++) {
        ckpt_value *group, *ids = ckpt_value_new(r->a, CKPT_VAL_LIST);
        ckpt_value *masters = tv->masters ? ckpt_value_new(r->a, CKPT_VAL_LIST) : NULL;
        if ((rc = ckpt_megatron__carry(r->plan, r->file, r->c->m->g, tv->ck, seq_at(groups, g), &group)) < 0)
            break;
        for (i = 0; rc == 0 && i < n_params; i++) {
            const mg_entry *e = params[i].entry;
            int want = no_weight_decay(e->name, ckpt_node_ndim(params[i].shard));
            ckpt_value *entry, *master;
            if (flags[g] != 2 && flags[g] != want)
                continue;
            if ((rc = ckpt_value_append(r->a, ids, ckpt_value_new_int(r->a, next))) < 0 ||
                (rc = state_entry(r, e, &entry)) < 0 ||
                (rc = ckpt_value_dict_set(r->a, *state_out, ckpt_value_new_int(r->a, next), entry)) < 0)
                break;
            next++;
            if (masters) {
                const ckpt_node **outs = calloc((size_t)r->c->t->tp, sizeof *outs);
                rc = outs ? reshard_state(r->c, e, pick_master, "fp32_from_fp16_params", outs) : ckpt_error_oom();
                if (rc == 0 && (rc = add_shard(r, e, "fp32_from_fp16_params", outs[r->tp], &master)) == 0)
                    rc = ckpt_value_append(r->a, masters, master);
                free(outs);
            }
        }
        if (rc == 0)
            rc = ckpt_value_dict_set(r->a, group, new_str(r->a, "params"), ids);
        if (rc == 0)
            rc = ckpt_value_append(r->a, *groups_out, group);
        if (rc == 0 && masters)
            rc = ckpt_value_append(r->a, *masters_out, masters);
    }
    if (rc == 0 && (size_t)next != n_params)
        rc = unsupported(tv->ck, "the target's parameters do not all fall into the source's param groups");
    free(flags);
    return rc;
}

/* A copy of `src` (a dict) whose entries named in keys[] are replaced by vals[]. */
static int replace_entries(rank_out *r, const ckpt_ckpt *ck, const ckpt_value *src, const char *const *keys,
                           ckpt_value *const *vals, size_t n, ckpt_value **out)
{
    ckpt_value *dict = ckpt_value_new(r->a, CKPT_VAL_DICT);
    size_t i, j;
    int rc = dict ? 0 : CKPT_ENOMEM;

    if (dict)
        dict->u.dict.cls = src->u.dict.cls;
    for (i = 0; rc == 0 && i < src->u.dict.map.n; i++) {
        const ckpt_value *k = src->u.dict.map.keys[i];
        ckpt_value *copy = NULL;
        for (j = 0; j < n; j++)
            if (vals[j] && ckpt_value_is_str(k, keys[j]))
                break;
        if (j < n)
            copy = vals[j];
        else
            rc = ckpt_megatron__carry(r->plan, r->file, r->c->m->g, ck, src->u.dict.map.vals[i], &copy);
        if (rc == 0)
            rc = ckpt_value_dict_set(r->a, dict, (ckpt_value *)k, copy);
    }
    *out = dict;
    return rc;
}

int ckpt_megatron__optimizer(ckpt_megatron *m, ckpt_plan *plan, size_t file, ckpt_arena *arena,
                             const mg_rank *tmpl, const mg_param_out *params, size_t n_params, int tp,
                             const ckpt_megatron_target *t, int64_t padded_vocab, ckpt_value **out)
{
    size_t n_ranks = (size_t)m->info.tp * (size_t)m->info.pp * (size_t)m->info.ep, i;
    optim_ctx c = { m, t, padded_vocab, calloc(n_ranks, sizeof(optim_view)), calloc(n_ranks, sizeof(int)) };
    rank_out r = { &c, plan, file, arena, tp };
    const ckpt_value *opt = ckpt_value_dict_get(tmpl->root, "optimizer");
    ckpt_value *groups, *state, *masters, *sd;
    optim_view tv;
    int rc;

    *out = NULL;
    if (!c.views || !c.opened) {
        free(c.views);
        free(c.opened);
        return ckpt_error_oom();
    }
    if ((rc = view_open(m, tmpl, &tv)) == 0) {
        static const char *const sd_keys[] = { "state", "param_groups" };
        static const char *const wrap_keys[] = { "optimizer", "fp32_from_fp16_params" };
        rc = build_state(&r, &tv, params, n_params, &groups, &state, &masters);
        if (rc == 0) {
            ckpt_value *sd_vals[2] = { state, groups };
            rc = replace_entries(&r, tv.ck, tv.sd, sd_keys, sd_vals, 2, &sd);
        }
        if (rc == 0 && tv.sd == opt) {
            *out = sd;
        } else if (rc == 0) {
            ckpt_value *wrap_vals[2] = { sd, masters };
            rc = replace_entries(&r, tv.ck, opt, wrap_keys, wrap_vals, 2, out);
        }
        view_free(&tv);
    }
    for (i = 0; i < n_ranks; i++)
        view_free(&c.views[i]);
    free(c.views);
    free(c.opened);
    return rc;
}
