/* Mixture-of-experts models written at another EP (megatron_plan.c): the args a run at that
 * EP has, and what becomes of the optimizer state. */
#include "megatron_private.h"

#include <stdlib.h>
#include <string.h>

static int set_attr(ckpt_arena *a, ckpt_value *dict, const char *name, ckpt_value *v)
{
    ckpt_value *key = ckpt_value_new_str(a, name, strlen(name));
    return key && v ? ckpt_value_dict_set(a, dict, key, v) : CKPT_ENOMEM;
}

/* A mixture of experts at another EP: its size, and the rank that saves each file, the
 * expert data-parallel rank 0 of its (TP, PP, EP) ranks (megatron-core 0.16.1 parallel_state,
 * the expert ranks in order tp-cp-ep-dp-pp: etp + ETP * ep + world / PP * pp); a local_rank
 * equal to the rank (one node) stays equal to it. moe_grouped_gemm: `grouped`. rerank: d is
 * the args of another rank's file (a source at expert TP below its TP has no file for some
 * ranks), so the rank is the target's even at the same layout. */
int ckpt_megatron__ep_args(ckpt_arena *a, ckpt_value *d, const ckpt_megatron_target *t, int grouped, int ep_size,
                           int etp, int pp, int ep, int rerank)
{
    int64_t src_ep = ckpt_megatron__arg_int(d, "expert_model_parallel_size", 1), world, rank;
    int64_t dp = t->dp > 0 ? t->dp : ckpt_megatron__arg_int(d, "data_parallel_size", 0);
    int rc;

    if (ckpt_megatron__num_experts(d) > 0 && !ckpt_megatron__arg_int(d, "moe_grouped_gemm", 0) != !grouped &&
        (rc = set_attr(a, d, "moe_grouped_gemm", ckpt_value_new_bool(a, grouped))) < 0)
        return rc;
    if (ckpt_megatron__num_experts(d) <= 0 || (src_ep == ep_size && t->etp <= 0 && !rerank))
        return 0;
    if ((rc = set_attr(a, d, "expert_model_parallel_size", ckpt_value_new_int(a, ep_size))) < 0)
        return rc;
    world = (int64_t)t->tp * t->pp * dp * ckpt_megatron__arg_int(d, "context_parallel_size", 1);
    if (dp < 1 || !ckpt_value_dict_get(d, "rank") || t->pp < 1)
        return 0;
    rank = etp + (int64_t)ckpt_megatron__etp(t) * ep + world / t->pp * pp;
    if (ckpt_megatron__arg_int(d, "local_rank", -1) == ckpt_megatron__arg_int(d, "rank", -2) &&
        (rc = set_attr(a, d, "local_rank", ckpt_value_new_int(a, rank))) < 0)
        return rc;
    return set_attr(a, d, "rank", ckpt_value_new_int(a, rank));
}

static int number(const ckpt_value *group, const char *key, double *out)
{
    const ckpt_value *v = ckpt_value_dict_get(group, key);

    if (v && v->kind == CKPT_VAL_FLOAT)
        *out = v->u.real;
    else if (v && (v->kind == CKPT_VAL_INT || v->kind == CKPT_VAL_BOOL))
        *out = v->kind == CKPT_VAL_INT ? (double)v->u.integer : v->u.boolean;
    else
        return 0;
    return 1;
}

const ckpt_value *ckpt_megatron__param_groups(const ckpt_value *opt, size_t i)
{
    const ckpt_value *o = opt, *in;

    if (o && (o->kind == CKPT_VAL_LIST || o->kind == CKPT_VAL_TUPLE))
        o = i < o->u.seq.n ? o->u.seq.items[i] : NULL;
    else if (i > 0)
        return NULL;
    if (o && o->kind == CKPT_VAL_DICT && (in = ckpt_value_dict_get(o, "optimizer")) != NULL)
        o = in;
    o = o && o->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(o, "param_groups") : NULL;
    return o && o->kind == CKPT_VAL_LIST ? o : NULL;
}

/* At EP 1 the experts join the dense optimizer's param groups (megatron-core 0.16.1
 * optimizer/__init__.py keys them by their overrides and is_expert_parallel): each expert
 * group must have a dense one of the same hyper-parameters to go to. */
static int expert_groups_fit(const ckpt_megatron *m, const char *src)
{
    static const char *const keys[] = { "wd_mult", "lr_mult", "max_lr", "min_lr", "weight_decay", "is_decoupled_lr" };
    const ckpt_value *opt = m->dist ? m->dist_optim_sd : ckpt_value_dict_get(mg_rank_at(m, 0, 0, 0)->root, "optimizer");
    const ckpt_value *dense, *expert;
    size_t i, j, k;

    if (!opt || opt->kind != CKPT_VAL_LIST || opt->u.seq.n != 2 || !(dense = ckpt_megatron__param_groups(opt, 0)) ||
        !(expert = ckpt_megatron__param_groups(opt, 1)))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: optimizer is not the chained optimizer's [{'optimizer': {'param_groups': ...}}] x 2 "
                               "a mixture of experts at EP > 1 saves",
                               src);
    for (i = 0; i < expert->u.seq.n; i++) {
        int found = 0;
        for (j = 0; j < dense->u.seq.n && !found; j++)
            for (k = 0, found = 1; k < sizeof keys / sizeof *keys && found; k++) {
                double x = 0, y = 0;
                found = number(expert->u.seq.items[i], keys[k], &x) == number(dense->u.seq.items[j], keys[k], &y) &&
                        x == y;
            }
        if (!found)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                   "%s: the expert optimizer's param group %zu has hyper-parameters no dense group has; "
                                   "at EP 1 megatron-core gives those experts a group of their own, not made yet; "
                                   "--no-optimizer writes the model",
                                   src, i);
    }
    return 0;
}

static int default_group(const ckpt_value *groups, const char *src, const ckpt_value **out);

/* A mixture of experts' optimizer state at another EP: the distributed optimizer's follows
 * its parameters, into the expert buffers (expert data-parallel group) at EP > 1 and the dense
 * ones at EP 1, where the experts are dense parameters; from EP 1 the expert optimizer's
 * param group is the dense group the experts' weights are in (ckpt_megatron__ep_chain). */
int ckpt_megatron__ep_optimizer(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    int ep = ckpt_megatron__target_ep(m, t);
    const char *src = m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model";

    if (ckpt_megatron__num_experts(m->args) <= 0 || ep == m->info.ep || t->optimizer == CKPT_MEGATRON_OPTIM_DROP ||
        !m->info.has_optimizer)
        return 0;
    if (m->info.ep == 1 && m->dist)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: EP 1 -> %d: a torch_dist checkpoint's optimizer at EP 1 is not chained to an "
                               "expert optimizer yet; --no-optimizer writes the model",
                               src, ep);
    if (m->info.ep == 1)
        return default_group(ckpt_megatron__param_groups(ckpt_value_dict_get(mg_rank_at(m, 0, 0, 0)->root, "optimizer"),
                                                         0),
                             src, NULL);
    return ep == 1 ? expert_groups_fit(m, src) : 0;
}

/* The dense optimizer's param group the experts' weights are in at EP 1: weight decay, no
 * overrides (megatron-core 0.16.1 optimizer/__init__.py _get_param_groups: 2-D weights decay,
 * biases and 1-D parameters do not); exactly one, else the experts' group is unknown. */
static int default_group(const ckpt_value *groups, const char *src, const ckpt_value **out)
{
    const ckpt_value *found = NULL;
    size_t i, n = 0;

    for (i = 0; groups && groups->kind == CKPT_VAL_LIST && i < groups->u.seq.n; i++) {
        const ckpt_value *g = groups->u.seq.items[i];
        double wd = 0, lr = 0, dec = 0;
        if (g && g->kind == CKPT_VAL_DICT && number(g, "wd_mult", &wd) && wd == 1.0 && number(g, "lr_mult", &lr) &&
            lr == 1.0 && (!number(g, "is_decoupled_lr", &dec) || dec == 0)) {
            found = g;
            n++;
        }
    }
    if (n != 1)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: EP 1 -> N: the optimizer's param groups hold %zu with weight decay and no "
                               "overrides, where the experts' weights are; the expert optimizer a run at EP > 1 chains "
                               "to the dense one is made from exactly one; --no-optimizer writes the model",
                               src, n);
    if (out)
        *out = found;
    return 0;
}

/* The key object of `dict` that reads `name` (the pickler then writes a reference to the one
 * it wrote, as torch.save does for the source's shared strings). */
static ckpt_value *key_of(const ckpt_value *dict, const char *name)
{
    size_t i;

    for (i = 0; i < dict->u.dict.map.n; i++)
        if (ckpt_value_is_str(dict->u.dict.map.keys[i], name))
            return dict->u.dict.map.keys[i];
    return NULL;
}

int ckpt_megatron__expert_groups(ckpt_arena *a, const ckpt_value *dense, ckpt_value **out)
{
    const ckpt_value *group = NULL;
    ckpt_value *copy = ckpt_value_new(a, CKPT_VAL_DICT), *groups = ckpt_value_new(a, CKPT_VAL_LIST);
    size_t i;
    int rc;

    if ((rc = default_group(dense, "the optimizer", &group)) < 0)
        return rc;
    if (!copy || !groups)
        return CKPT_ENOMEM;
    /* the dense group's entries (values of their own, as the expert optimizer's are; keys
     * shared), is_expert_parallel True */
    for (i = 0; i < group->u.dict.map.n && rc == 0; i++) {
        ckpt_value *k = group->u.dict.map.keys[i], *v = NULL;
        if (ckpt_value_is_str(k, "is_expert_parallel"))
            v = ckpt_value_new_bool(a, 1);
        else if ((rc = ckpt_value_clone(a, group->u.dict.map.vals[i], NULL, NULL, &v)) < 0)
            break;
        rc = ckpt_value_dict_set(a, copy, k, v);
    }
    if (rc == 0 && (rc = ckpt_value_append(a, groups, copy)) == 0)
        *out = groups;
    return rc;
}

int ckpt_megatron__ep_chain(const ckpt_megatron *m, ckpt_arena *a, ckpt_value *opt, ckpt_value **out)
{
    const ckpt_value *inner;
    ckpt_value *groups, *sd, *wrap, *list, *k_opt, *k_groups;
    int rc;

    (void)m;
    if ((rc = ckpt_megatron__expert_groups(a, ckpt_megatron__param_groups(opt, 0), &groups)) < 0)
        return rc;
    inner = ckpt_value_dict_get(opt, "optimizer");
    k_opt = key_of(opt, "optimizer");
    k_groups = key_of(inner, "param_groups");
    sd = ckpt_value_new(a, CKPT_VAL_DICT);
    wrap = ckpt_value_new(a, CKPT_VAL_DICT);
    list = ckpt_value_new(a, CKPT_VAL_LIST);
    if (!sd || !wrap || !list || !k_opt || !k_groups)
        return CKPT_ENOMEM;
    if (ckpt_value_dict_set(a, sd, k_groups, groups) < 0 ||
        ckpt_value_dict_set(a, wrap, k_opt, sd) < 0 || ckpt_value_append(a, list, opt) < 0 ||
        ckpt_value_append(a, list, wrap) < 0)
        return CKPT_ENOMEM;
    *out = list;
    return 0;
}

/* A mixture of experts at EP 1 has no expert-parallel parameters, so no chained optimizer:
 * its [dense, expert] state's dense one holds the step and param groups (the experts' join
 * the dense groups: ckpt_megatron__ep_optimizer checks that they can). */
const ckpt_value *ckpt_megatron__ep_optimizer_value(const ckpt_megatron *m, int ep_size, const ckpt_value *v)
{
    if (ep_size == 1 && m->info.ep > 1 && v->kind == CKPT_VAL_LIST && v->u.seq.n == 2)
        return v->u.seq.items[0];
    return v;
}

int ckpt_megatron__etp(const ckpt_megatron_target *t)
{
    return t->etp > 0 ? t->etp : t->tp;
}

int ckpt_megatron__part(const ckpt_megatron *m, const ckpt_megatron_target *t, int64_t padded_vocab,
                        const mg_entry *e, const ckpt_node *full, int tp, int etp, const ckpt_node **out)
{
    int expert = e->layout.expert && ckpt_megatron__etp(t) != t->tp, n = expert ? ckpt_megatron__etp(t) : t->tp;
    const ckpt_node **parts = calloc((size_t)n, sizeof *parts);
    int rc;

    if (!parts)
        return ckpt_error_oom();
    rc = expert ? ckpt_parallel_split(m->g, &e->layout, e->name, full, (size_t)n, parts)
                : ckpt_megatron__split(m, t, padded_vocab, e, full, parts);
    *out = rc == 0 ? parts[expert ? etp : tp] : NULL;
    free(parts);
    return rc;
}

int ckpt_megatron__saving_rank(const ckpt_megatron_target *t, int tp, int ep, int *etp, int *dense_rank)
{
    int64_t e, etp_size = ckpt_megatron__etp(t);

    if (etp_size == t->tp) {
        *etp = tp;
        *dense_rank = ep;
        return 1;
    }
    for (e = 0; e < etp_size; e++) {
        int64_t r = e + etp_size * ep; /* its rank within the pipeline stage */
        if (r % t->tp == tp) {
            *etp = (int)e;
            *dense_rank = (int)(r / t->tp);
            return 1;
        }
    }
    return 0;
}
