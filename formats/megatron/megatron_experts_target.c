/* Mixture-of-experts models written at another EP (megatron_plan.c): the args a run at that
 * EP has, and what becomes of the optimizer state. */
#include "megatron_private.h"

#include <string.h>

static int set_attr(ckpt_arena *a, ckpt_value *dict, const char *name, ckpt_value *v)
{
    ckpt_value *key = ckpt_value_new_str(a, name, strlen(name));
    return key && v ? ckpt_value_dict_set(a, dict, key, v) : CKPT_ENOMEM;
}

/* A mixture of experts at another EP: its size, and the rank that saves each file, the
 * expert data-parallel rank 0 of its (TP, PP, EP) ranks (megatron-core 0.16.1 parallel_state,
 * the expert ranks in order tp-cp-ep-dp-pp: tp + TP * ep + world / PP * pp); a local_rank
 * equal to the rank (one node) stays equal to it. moe_grouped_gemm: `grouped`. */
int ckpt_megatron__ep_args(ckpt_arena *a, ckpt_value *d, const ckpt_megatron_target *t, int grouped, int ep_size,
                           int tp, int pp, int ep)
{
    int64_t src_ep = ckpt_megatron__arg_int(d, "expert_model_parallel_size", 1), world, rank;
    int64_t dp = t->dp > 0 ? t->dp : ckpt_megatron__arg_int(d, "data_parallel_size", 0);
    int rc;

    if (ckpt_megatron__num_experts(d) > 0 && !ckpt_megatron__arg_int(d, "moe_grouped_gemm", 0) != !grouped &&
        (rc = set_attr(a, d, "moe_grouped_gemm", ckpt_value_new_bool(a, grouped))) < 0)
        return rc;
    if (ckpt_megatron__num_experts(d) <= 0 || src_ep == ep_size)
        return 0;
    if ((rc = set_attr(a, d, "expert_model_parallel_size", ckpt_value_new_int(a, ep_size))) < 0)
        return rc;
    world = (int64_t)t->tp * t->pp * dp * ckpt_megatron__arg_int(d, "context_parallel_size", 1);
    if (dp < 1 || !ckpt_value_dict_get(d, "rank") || t->pp < 1)
        return 0;
    rank = tp + (int64_t)t->tp * ep + world / t->pp * pp;
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

/* The param groups of inner optimizer i of a chained optimizer's state: legacy
 * model_optim_rng.pt's [{'optimizer': {...}}, ...], torch_dist's [{'param_groups': ...}, ...]. */
static const ckpt_value *groups_of(const ckpt_value *chained, size_t i)
{
    const ckpt_value *o = chained->u.seq.items[i], *in;

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

    if (!opt || opt->kind != CKPT_VAL_LIST || opt->u.seq.n != 2 || !(dense = groups_of(opt, 0)) ||
        !(expert = groups_of(opt, 1)))
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

/* A mixture of experts' optimizer state at another EP: the distributed optimizer's follows
 * its parameters, into the expert buffers (expert data-parallel group) at EP > 1 and the dense
 * ones at EP 1, where the experts are dense parameters; the chained optimizer's expert param
 * groups of a run at EP > 1 are not made from EP 1's. */
int ckpt_megatron__ep_optimizer(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    int ep = ckpt_megatron__target_ep(m, t);
    const char *src = m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model";

    if (ckpt_megatron__num_experts(m->args) <= 0 || ep == m->info.ep || t->optimizer == CKPT_MEGATRON_OPTIM_DROP ||
        !m->info.has_optimizer)
        return 0;
    if (m->info.ep == 1)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: EP 1 -> %d: at EP 1 megatron-core keeps the experts in the dense optimizer, and "
                               "the expert optimizer a run at EP %d chains to it (its param groups) is not made from "
                               "it yet; --no-optimizer writes the model",
                               src, ep, ep);
    return ep == 1 ? expert_groups_fit(m, src) : 0;
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
