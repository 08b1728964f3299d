/* Resharding the non-distributed optimizer state of a Megatron checkpoint.
 *
 * Each source rank's state is matched to its parameters by Megatron's param-group order
 * (megatron_optim_view.c). A per-parameter tensor of the parameter's shape (exp_avg, exp_avg_sq) is merged over the TP
 * ranks and split again exactly like the parameter; anything else (step) is carried. */
#include "megatron_private.h"

#include <stdlib.h>
#include <string.h>

typedef struct optim_ctx {
    ckpt_megatron *m;
    const ckpt_megatron_target *t;
    int64_t padded_vocab;
    mg_optim_views views;
} optim_ctx;

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
        const mg_optim_view *v;
        const ckpt_value *entry, *master, *leaf;
        if ((rc = ckpt_megatron__optim_state(&c->views, e, tp, &v, &entry, &master)) < 0)
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
    const mg_optim_view *v;
    const ckpt_value *src, *master;
    const ckpt_node **outs = calloc((size_t)r->c->t->tp, sizeof *outs);
    ckpt_value *dict = ckpt_value_new(r->a, CKPT_VAL_DICT);
    int ndim = ckpt_node_ndim(e->full);
    size_t i;
    int rc = outs && dict ? 0 : ckpt_error_oom();

    if (rc == 0)
        rc = ckpt_megatron__optim_state(&r->c->views, e, 0, &v, &src, &master);
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

/* New param_groups, state and master copies for the target rank's parameters. */
static int build_state(rank_out *r, const mg_optim_view *tv, const mg_param_out *params, size_t n_params,
                       ckpt_value **groups_out, ckpt_value **state_out, ckpt_value **masters_out)
{
    const ckpt_value *groups = ckpt_value_dict_get(tv->sd, "param_groups");
    size_t g, i, n_groups = ckpt_megatron__seq_len(groups);
    int64_t next = 0;
    int *flags = calloc(n_groups + 1, sizeof *flags);
    int rc = flags ? 0 : ckpt_error_oom();

    *groups_out = ckpt_value_new(r->a, CKPT_VAL_LIST);
    *state_out = ckpt_value_new(r->a, CKPT_VAL_DICT);
    *masters_out = tv->masters ? ckpt_value_new(r->a, tv->masters->kind) : NULL;
    if (!*groups_out || !*state_out || (tv->masters && !*masters_out))
        rc = CKPT_ENOMEM;
    if (rc == 0)
        ckpt_megatron__group_flags(groups, flags);
    for (g = 0; rc == 0 && g < n_groups; g++) {
        ckpt_value *group, *ids = ckpt_value_new(r->a, CKPT_VAL_LIST);
        ckpt_value *masters = tv->masters ? ckpt_value_new(r->a, CKPT_VAL_LIST) : NULL;
        if ((rc = ckpt_megatron__carry(r->plan, r->file, r->c->m->g, tv->ck, ckpt_megatron__seq_at(groups, g), &group)) < 0)
            break;
        for (i = 0; rc == 0 && i < n_params; i++) {
            const mg_entry *e = params[i].entry;
            int want = ckpt_megatron__no_weight_decay(e->name, ckpt_node_ndim(params[i].shard));
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
        rc = ckpt_megatron__optim_unsupported(tv->ck, "the target's parameters do not all fall into the source's param groups");
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
    optim_ctx c = { m, t, padded_vocab, { NULL, NULL, NULL, 0 } };
    rank_out r = { &c, plan, file, arena, tp };
    const ckpt_value *opt = ckpt_value_dict_get(tmpl->root, "optimizer");
    ckpt_value *groups, *state, *masters, *sd;
    mg_optim_view tv;
    int rc;

    *out = NULL;
    if ((rc = ckpt_megatron__optim_views_init(&c.views, m)) < 0)
        return rc;
    if ((rc = ckpt_megatron__optim_view_open(m, tmpl, &tv)) == 0) {
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
        ckpt_megatron__optim_view_free(&tv);
    }
    ckpt_megatron__optim_views_dispose(&c.views);
    return rc;
}
