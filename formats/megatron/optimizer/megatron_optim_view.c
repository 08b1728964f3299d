/* The non-distributed optimizer state of a Megatron rank file, matched to its parameters.
 *
 * `optimizer` in model_optim_rng.pt is the torch optimizer's state dict ({state, param_groups};
 * Float16OptimizerWithFloat16Params wraps it as {optimizer, grad_scaler, fp32_from_fp16_params}).
 * Its state is keyed by the parameter's position in the param groups, which Megatron builds
 * from the model chunks' named_parameters() in order, split by weight decay: biases and 1-D
 * parameters (norms) have none (wd_mult 0), the others wd_mult 1. So each rank's positions are
 * matched to its state-dict keys by walking the parameters in order and dealing them to the
 * groups by that rule; every moment must then have its parameter's shape, which is checked.
 * Its reading into the per-parameter form (megatron_optim_plain.c) goes through this
 * matching. */
#include "../megatron_private.h"

#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int ckpt_megatron__no_weight_decay(const char *key, int ndim)
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

void ckpt_megatron__group_flags(const ckpt_value *groups, int *flags)
{
    size_t g, h, n = ckpt_megatron__seq_len(groups);

    for (g = 0; g < n; g++) {
        flags[g] = n == 1 ? 2 : group_no_wd(ckpt_megatron__seq_at(groups, g));
        for (h = 0; h < g && flags[g] >= 0; h++)
            if (flags[h] == flags[g])
                flags[g] = -1;
    }
}

const ckpt_value *ckpt_megatron__int_key_get(const ckpt_value *dict, int64_t key)
{
    size_t i;

    for (i = 0; dict && dict->kind == CKPT_VAL_DICT && i < dict->u.dict.map.n; i++)
        if (dict->u.dict.map.keys[i]->kind == CKPT_VAL_INT && dict->u.dict.map.keys[i]->u.integer == key)
            return dict->u.dict.map.vals[i];
    return NULL;
}

const ckpt_value *ckpt_megatron__seq_at(const ckpt_value *v, size_t i)
{
    return v && (v->kind == CKPT_VAL_LIST || v->kind == CKPT_VAL_TUPLE) && i < v->u.seq.n ? v->u.seq.items[i] : NULL;
}

size_t ckpt_megatron__seq_len(const ckpt_value *v)
{
    return v && (v->kind == CKPT_VAL_LIST || v->kind == CKPT_VAL_TUPLE) ? v->u.seq.n : 0;
}

int ckpt_megatron__optim_unsupported(const ckpt_ckpt *ck, const char *why)
{
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                           "%s: optimizer state: %s; --no-optimizer writes a model-only checkpoint", ckpt_path(ck),
                           why);
}

int ckpt_megatron__find_state_dict(const ckpt_ckpt *ck, const ckpt_value *opt, const ckpt_value **sd,
                                   const ckpt_value **masters)
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
    return ckpt_megatron__optim_unsupported(ck, "neither a torch optimizer state dict nor Megatron's fp16 wrapper "
                                                "of one (chained optimizers other than a mixture of experts' dense "
                                                "and expert ones are not resharded yet)");
}

void ckpt_megatron__optim_view_free(mg_optim_view *v)
{
    free(v->keys);
    free(v->vp);
    free(v->which);
    free(v->index);
    free(v->group);
    free(v->pos);
    memset(v, 0, sizeof *v);
}

static int view_push(mg_optim_view *v, const char *key, int vp, size_t *cap)
{
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

/* Parameter i of the view dealt to its group (of its optimizer: flags and taken are that
 * optimizer's); its state checked against its shape. */
static int view_deal(const ckpt_megatron *m, const mg_rank *r, mg_optim_view *v, size_t i, const int *flags,
                     size_t *taken)
{
    const ckpt_value *sd = v->sds[v->which[i]], *groups = ckpt_value_dict_get(sd, "param_groups");
    const ckpt_value *d = ckpt_megatron__chunk_dict(r->root, m->info.vpp, v->vp[i]);
    /* looked up again by its C string: a key with a NUL byte finds another entry, or none */
    const ckpt_value *leaf = ckpt_value_dict_get(d, v->keys[i]);
    const ckpt_tensor *t = leaf && leaf->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(r->ck, leaf->u.tensor.index) : NULL;
    const ckpt_value *idx, *entry, *moment;
    size_t g;
    int want;

    if (!t)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: model key '%s' does not name one tensor",
                               ckpt_path(r->ck), v->keys[i]);
    want = ckpt_megatron__no_weight_decay(v->keys[i], t->ndim);
    for (g = 0; g < ckpt_megatron__seq_len(groups); g++)
        if (flags[g] == 2 || flags[g] == want)
            break;
    if (g == ckpt_megatron__seq_len(groups))
        return ckpt_megatron__optim_unsupported(r->ck, "its param groups are not Megatron's weight-decay split");
    idx = ckpt_megatron__seq_at(ckpt_value_dict_get(ckpt_megatron__seq_at(groups, g), "params"), taken[g]);
    if (!idx || idx->kind != CKPT_VAL_INT)
        return ckpt_megatron__optim_unsupported(r->ck, "a param group holds fewer parameters than the model");
    v->group[i] = g;
    v->pos[i] = taken[g]++;
    v->index[i] = idx->u.integer;
    entry = ckpt_megatron__int_key_get(ckpt_value_dict_get(sd, "state"), idx->u.integer);
    moment = entry ? ckpt_value_dict_get(entry, "exp_avg") : NULL;
    if (moment && moment->kind == CKPT_VAL_TENSOR) {
        const ckpt_tensor *mt = ckpt_tensor_at(r->ck, moment->u.tensor.index);
        if (!mt || mt->ndim != t->ndim || memcmp(mt->shape, t->shape, (size_t)t->ndim * sizeof *t->shape) != 0)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: optimizer state %lld does not have the shape of '%s', the parameter it "
                                   "should belong to by Megatron's ordering",
                                   ckpt_path(r->ck), (long long)idx->u.integer, v->keys[i]);
    }
    return 0;
}

/* The state dicts of `opt`: one, or a mixture of experts' chained [dense, expert] list. */
static int view_states(const ckpt_megatron *m, const mg_rank *r, const ckpt_value *opt, mg_optim_view *v)
{
    size_t i;
    int rc;

    if (m->info.ep > 1 && ckpt_megatron__num_experts(m->args) > 0 && opt && opt->kind == CKPT_VAL_LIST) {
        if (opt->u.seq.n != 2)
            return ckpt_megatron__optim_unsupported(r->ck, "a list of other than the two chained optimizers, dense "
                                                           "and expert, of a mixture of experts");
        for (i = 0; i < 2; i++)
            if ((rc = ckpt_megatron__find_state_dict(r->ck, opt->u.seq.items[i], &v->sds[i], &v->masters_of[i])) < 0)
                return rc;
        v->n_opt = 2;
    } else {
        if ((rc = ckpt_megatron__find_state_dict(r->ck, opt, &v->sds[0], &v->masters_of[0])) < 0)
            return rc;
        v->n_opt = 1;
    }
    v->sd = v->sds[0];
    v->masters = v->masters_of[0];
    return 0;
}

/* Which optimizer key i's parameter is in: the expert one for an expert's. */
static int view_which(const ckpt_megatron *m, const mg_optim_view *v, const char *key)
{
    ckpt_tensor_layout l;

    if (v->n_opt < 2)
        return 0;
    if (ckpt_parallel_classify(m->spec, m->params, key, 2, &l) < 0) {
        ckpt_error_clear();
        return 0;
    }
    return l.expert != 0;
}

int ckpt_megatron__optim_view_open(const ckpt_megatron *m, const mg_rank *r, mg_optim_view *v)
{
    size_t cap = 0, i, g, o, n_groups[2], *taken[2] = { NULL, NULL };
    int *flags[2] = { NULL, NULL }, vp, rc;

    memset(v, 0, sizeof *v);
    v->ck = r->ck;
    if ((rc = view_states(m, r, ckpt_value_dict_get(r->root, "optimizer"), v)) < 0)
        return rc;
    for (vp = 0; vp < m->info.vpp; vp++) {
        const ckpt_value *d = ckpt_megatron__chunk_dict(r->root, m->info.vpp, vp);
        for (i = 0; d && i < d->u.dict.map.n; i++) {
            const ckpt_value *k = d->u.dict.map.keys[i], *val = d->u.dict.map.vals[i];
            if (k->kind != CKPT_VAL_STR || val->kind != CKPT_VAL_TENSOR || ends_with(k->u.str.ptr, "._extra_state"))
                continue;
            if ((rc = view_push(v, k->u.str.ptr, vp, &cap)) < 0)
                goto done;
        }
    }
    v->index = calloc(v->n + 1, sizeof *v->index);
    v->group = calloc(v->n + 1, sizeof *v->group);
    v->pos = calloc(v->n + 1, sizeof *v->pos);
    v->which = calloc(v->n + 1, sizeof *v->which);
    for (o = 0; o < v->n_opt; o++) {
        n_groups[o] = ckpt_megatron__seq_len(ckpt_value_dict_get(v->sds[o], "param_groups"));
        flags[o] = calloc(n_groups[o] + 1, sizeof *flags[o]);
        taken[o] = calloc(n_groups[o] + 1, sizeof *taken[o]);
        if (flags[o])
            ckpt_megatron__group_flags(ckpt_value_dict_get(v->sds[o], "param_groups"), flags[o]);
    }
    if (!v->index || !v->group || !v->pos || !v->which || !flags[0] || !taken[0] ||
        (v->n_opt > 1 && (!flags[1] || !taken[1]))) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0, rc = 0; i < v->n && rc == 0; i++) {
        v->which[i] = view_which(m, v, v->keys[i]);
        rc = view_deal(m, r, v, i, flags[v->which[i]], taken[v->which[i]]);
    }
    for (o = 0; o < v->n_opt; o++)
        for (g = 0; rc == 0 && g < n_groups[o]; g++)
            if (taken[o][g] != ckpt_megatron__seq_len(ckpt_value_dict_get(
                                   ckpt_megatron__seq_at(ckpt_value_dict_get(v->sds[o], "param_groups"), g), "params")))
                rc = ckpt_megatron__optim_unsupported(r->ck, "a param group holds more parameters than the model");
done:
    for (o = 0; o < 2; o++) {
        free(taken[o]);
        free(flags[o]);
    }
    if (rc < 0)
        ckpt_megatron__optim_view_free(v);
    return rc;
}

int ckpt_megatron__optim_views_init(mg_optim_views *c, const ckpt_megatron *m)
{
    size_t n = (size_t)m->info.tp * (size_t)m->info.pp * (size_t)m->info.ep;

    c->m = m;
    c->views = calloc(n + 1, sizeof *c->views);
    c->opened = calloc(n + 1, sizeof *c->opened);
    if (!c->views || !c->opened) {
        free(c->views);
        free(c->opened);
        return ckpt_error_oom();
    }
    c->n = n;
    return 0;
}

void ckpt_megatron__optim_views_dispose(mg_optim_views *c)
{
    size_t i;

    for (i = 0; c->views && i < c->n; i++)
        ckpt_megatron__optim_view_free(&c->views[i]);
    free(c->views);
    free(c->opened);
    memset(c, 0, sizeof *c);
}

int ckpt_megatron__optim_state(mg_optim_views *c, const mg_entry *e, int tp, const mg_optim_view **view,
                               const ckpt_value **entry, const ckpt_value **master)
{
    const ckpt_megatron *m = c->m;
    int ep = e->ep >= 0 ? e->ep : 0, rc;
    /* an expert's part tp of its expert TP ranks is in the file mg_expert_tp names */
    int at = e->layout.expert ? mg_expert_tp(m, tp % mg_etp(m), ep) : tp;
    size_t i = ((size_t)ep * (size_t)m->info.pp + (size_t)e->src_pp) * (size_t)m->info.tp + (size_t)at, k;
    mg_optim_view *v = &c->views[i];

    if (!c->opened[i]) {
        if ((rc = ckpt_megatron__optim_view_open(m, mg_rank_at(m, at, e->src_pp, ep), v)) < 0)
            return rc;
        c->opened[i] = 1;
    }
    for (k = 0; k < v->n; k++)
        if (v->vp[k] == e->src_vp && strcmp(v->keys[k], e->local) == 0)
            break;
    if (k == v->n)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no optimizer state for '%s'", ckpt_path(v->ck),
                               e->local);
    *view = v;
    *entry = ckpt_megatron__int_key_get(ckpt_value_dict_get(v->sds[v->which[k]], "state"), v->index[k]);
    *master = v->masters_of[v->which[k]]
                  ? ckpt_megatron__seq_at(ckpt_megatron__seq_at(v->masters_of[v->which[k]], v->group[k]), v->pos[k])
                  : NULL;
    return 0;
}
