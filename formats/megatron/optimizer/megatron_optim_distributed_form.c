/* The `optimizer` entry of model_optim_rng.pt as the distributed optimizer saves it, from a
 * source of the non-distributed optimizer (megatron-core 0.16.1 distrib_optimizer.py
 * state_dict): the template's param groups without 'params', the common step added last (a
 * float: megatron-core takes it with .item() from the per-parameter float32 steps), nested
 * under 'optimizer' beside the grad scaler; a mixture of experts at EP > 1 the chained list
 * of the dense and the expert optimizer's. */
#include "megatron_dist_optim.h"
#include "megatron_distopt.h"
#include "../megatron_private.h"

#include <string.h>

static ckpt_value *new_str(ckpt_arena *a, const char *s)
{
    return ckpt_value_new_str(a, s, strlen(s));
}

/* A param group of the template without its 'params' and 'step'. */
static int bare_group(ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_ckpt *src, const ckpt_value *group,
                      ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    ckpt_value *dict = ckpt_value_new(a, CKPT_VAL_DICT);
    size_t i;
    int rc = dict ? 0 : CKPT_ENOMEM;

    if (rc == 0 && (!group || group->kind != CKPT_VAL_DICT))
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: optimizer: a param group is not a dict",
                             ckpt_path(src));
    for (i = 0; rc == 0 && i < group->u.dict.map.n; i++) {
        const ckpt_value *k = group->u.dict.map.keys[i];
        ckpt_value *copy;
        if (ckpt_value_is_str(k, "params") || ckpt_value_is_str(k, "step"))
            continue;
        if ((rc = ckpt_megatron__carry(plan, file, m->g, src, group->u.dict.map.vals[i], &copy)) == 0)
            rc = ckpt_value_dict_set(a, dict, (ckpt_value *)k, copy);
    }
    *out = dict;
    return rc;
}

/* Param group g of a plain template as the distributed optimizer saves it: no 'params', the
 * common step added last (a float: megatron-core takes it with .item() from the per-parameter
 * float32 steps). */
static int distributed_group(ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_ckpt *src,
                             const ckpt_value *group, double step, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    int rc = bare_group(m, plan, file, src, group, out);

    return rc < 0 ? rc : ckpt_value_dict_set(a, *out, new_str(a, "step"), ckpt_value_new_float(a, step));
}

/* {'param_groups': [...]} of the template's inner optimizer `inner` (its groups `groups`
 * instead when not NULL) as the distributed optimizer saves them. */
static int distributed_inner(ckpt_megatron *m, ckpt_plan *plan, size_t file, const mg_rank *tmpl, size_t inner,
                             const ckpt_value *groups, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const ckpt_value *opt = ckpt_value_dict_get(tmpl->root, "optimizer"), *sd, *masters;
    ckpt_value *groups_out = ckpt_value_new(a, CKPT_VAL_LIST), *group;
    double step;
    size_t g;
    int rc;

    *out = ckpt_value_new(a, CKPT_VAL_DICT);
    if (!groups_out || !*out)
        return CKPT_ENOMEM;
    if (opt && opt->kind == CKPT_VAL_LIST)
        opt = ckpt_megatron__seq_at(opt, inner < opt->u.seq.n ? inner : 0);
    if ((rc = ckpt_megatron__find_state_dict(tmpl->ck, opt, &sd, &masters)) < 0 ||
        (rc = ckpt_megatron__optim_step(m, &step)) < 0)
        return rc;
    if (!groups)
        groups = ckpt_value_dict_get(sd, "param_groups");
    for (g = 0; g < ckpt_megatron__seq_len(groups); g++)
        if ((rc = distributed_group(m, plan, file, tmpl->ck, ckpt_megatron__seq_at(groups, g), step, &group)) < 0 ||
            (rc = ckpt_value_append(a, groups_out, group)) < 0)
            return rc;
    return ckpt_value_dict_set(a, *out, new_str(a, "param_groups"), groups_out);
}

int ckpt_megatron__distributed_groups(ckpt_megatron *m, ckpt_plan *plan, size_t file, const mg_rank *tmpl,
                                      ckpt_value **out)
{
    return distributed_inner(m, plan, file, tmpl, 0, NULL, out);
}

/* {'optimizer': groups of inner optimizer `inner`, 'grad_scaler': its scaler}. */
static int distributed_wrap(ckpt_megatron *m, ckpt_plan *plan, size_t file, const mg_rank *tmpl, size_t inner,
                            const ckpt_value *groups, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const ckpt_value *opt = ckpt_value_dict_get(tmpl->root, "optimizer"), *scaler;
    ckpt_value *wrap = ckpt_value_new(a, CKPT_VAL_DICT), *inner_sd, *copy;
    int rc;

    *out = NULL;
    if (opt && opt->kind == CKPT_VAL_LIST)
        opt = ckpt_megatron__seq_at(opt, inner < opt->u.seq.n ? inner : 0);
    scaler = opt && opt->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(opt, "grad_scaler") : NULL;
    if (!wrap)
        return CKPT_ENOMEM;
    if ((rc = distributed_inner(m, plan, file, tmpl, inner, groups, &inner_sd)) < 0 ||
        (rc = ckpt_value_dict_set(a, wrap, new_str(a, "optimizer"), inner_sd)) < 0)
        return rc;
    if (scaler && ((rc = ckpt_megatron__carry(plan, file, m->g, tmpl->ck, scaler, &copy)) < 0 ||
                   (rc = ckpt_value_dict_set(a, wrap, new_str(a, "grad_scaler"), copy)) < 0))
        return rc;
    *out = wrap;
    return 0;
}

int ckpt_megatron__optimizer_distributed(ckpt_megatron *m, ckpt_plan *plan, size_t file, const mg_rank *tmpl,
                                         const ckpt_megatron_target *t, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const ckpt_value *opt = ckpt_value_dict_get(tmpl->root, "optimizer");
    ckpt_value *list, *experts = NULL, *one;
    int rc;

    /* a mixture of experts at EP > 1: the chained [dense, expert] list (ckpt_megatron__optimizer_plain) */
    if (ckpt_megatron__num_experts(m->args) <= 0 || ckpt_megatron__target_ep(m, t) <= 1)
        return distributed_wrap(m, plan, file, tmpl, 0, NULL, out);
    *out = NULL;
    if (!(list = ckpt_value_new(a, CKPT_VAL_LIST)))
        return CKPT_ENOMEM;
    if (!(opt && opt->kind == CKPT_VAL_LIST) &&
        (rc = ckpt_megatron__expert_groups(a, ckpt_megatron__param_groups(opt, 0), &experts)) < 0)
        return rc;
    if ((rc = distributed_wrap(m, plan, file, tmpl, 0, NULL, &one)) < 0 || (rc = ckpt_value_append(a, list, one)) < 0 ||
        (rc = distributed_wrap(m, plan, file, tmpl, 1, experts, &one)) < 0 || (rc = ckpt_value_append(a, list, one)) < 0)
        return rc;
    *out = list;
    return 0;
}
