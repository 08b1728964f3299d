/* common.pt's `optimizer` of a torch_dist target that keeps the non-distributed optimizer of a
 * legacy source (its state is written per parameter from mg_entry.moment[]). Facts
 * (megatron-core 0.16.1 optimizer/optimizer.py FP32Optimizer and
 * Float16OptimizerWithFloat16Params sharded_state_dict, dist_checkpointing/optimizer.py
 * optim_state_to_sharding_state, dict_utils.py extract_matching_values): the saved state dict
 * is the one model_optim_rng.pt holds, with every per-parameter tensor and master copy moved
 * to sharded items, the groups' 'params' left out (local objects), and the step of the first
 * parameter's state kept as state['common_step']; what is left of fp32_from_fp16_params (lists
 * of sharded items only) is dropped. Rank 0 (TP 0, PP 0) writes common.pt. */
#include "../megatron_private.h"

#include <string.h>

static ckpt_value *new_str(ckpt_arena *a, const char *s)
{
    return ckpt_value_new_str(a, s, strlen(s));
}

/* {'common_step': the first parameter's step} (empty when the state has none). */
static int common_state(ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_ckpt *ck, const ckpt_value *state,
                        ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const ckpt_value *first = state && state->kind == CKPT_VAL_DICT && state->u.dict.map.n ? state->u.dict.map.vals[0]
                                                                                           : NULL;
    const ckpt_value *step = first && first->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(first, "step") : NULL;
    ckpt_value *copy;
    int rc;

    if (!(*out = ckpt_value_new(a, CKPT_VAL_DICT)))
        return CKPT_ENOMEM;
    if (!step)
        return 0;
    if ((rc = ckpt_megatron__carry(plan, file, m->g, ck, step, &copy)) < 0)
        return rc;
    return ckpt_value_dict_set(a, *out, new_str(a, "common_step"), copy);
}

/* The groups, copied whole (values shared between them stay shared), without 'params'. */
static int bare_groups(ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_ckpt *ck, const ckpt_value *groups,
                       ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    ckpt_value *copy;
    size_t g, i;
    int rc;

    if ((rc = ckpt_megatron__carry(plan, file, m->g, ck, groups, &copy)) < 0)
        return rc;
    if (!(*out = ckpt_value_new(a, CKPT_VAL_LIST)))
        return CKPT_ENOMEM;
    for (g = 0; g < ckpt_megatron__seq_len(copy); g++) {
        const ckpt_value *group = ckpt_megatron__seq_at(copy, g);
        ckpt_value *dict = ckpt_value_new(a, CKPT_VAL_DICT);
        if (!dict)
            return CKPT_ENOMEM;
        if (!group || group->kind != CKPT_VAL_DICT)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: optimizer: param group %zu is not a dict",
                                   ckpt_path(ck), g);
        for (i = 0; i < group->u.dict.map.n; i++)
            if (!ckpt_value_is_str(group->u.dict.map.keys[i], "params") &&
                (rc = ckpt_value_dict_set(a, dict, group->u.dict.map.keys[i], group->u.dict.map.vals[i])) < 0)
                return rc;
        if ((rc = ckpt_value_append(a, *out, dict)) < 0)
            return rc;
    }
    return 0;
}

int ckpt_megatron__dist_plain_common_legacy(ckpt_megatron *m, ckpt_plan *plan, size_t file, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const mg_rank *r = mg_rank_at(m, 0, 0, 0);
    const ckpt_value *opt = ckpt_value_dict_get(r->root, "optimizer"), *sd, *masters;
    ckpt_value *inner, *val, *copy;
    size_t i;
    int rc;

    if (opt && opt->kind == CKPT_VAL_LIST)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: a mixture of experts' non-distributed optimizer (the chained [dense, expert] "
                               "state) is not written in the torch_dist format yet; --to-optimizer distributed or "
                               "--no-optimizer writes it, the legacy layout (--to torch) keeps it",
                               ckpt_path(r->ck));
    if ((rc = ckpt_megatron__find_state_dict(r->ck, opt, &sd, &masters)) < 0)
        return rc;
    if (!(inner = ckpt_value_new(a, CKPT_VAL_DICT)))
        return CKPT_ENOMEM;
    /* torch's key order: state, param_groups */
    for (i = 0; i < sd->u.dict.map.n; i++) {
        const ckpt_value *k = sd->u.dict.map.keys[i], *v = sd->u.dict.map.vals[i];
        if (ckpt_value_is_str(k, "state"))
            rc = common_state(m, plan, file, r->ck, v, &val);
        else if (ckpt_value_is_str(k, "param_groups"))
            rc = bare_groups(m, plan, file, r->ck, v, &val);
        else
            rc = ckpt_megatron__carry(plan, file, m->g, r->ck, v, &val);
        if (rc < 0 || (rc = ckpt_value_dict_set(a, inner, (ckpt_value *)k, val)) < 0)
            return rc;
    }
    if (sd == opt) {
        *out = inner;
        return 0;
    }
    /* Float16OptimizerWithFloat16Params: {optimizer, grad_scaler?, fp32_from_fp16_params} */
    if (!(*out = ckpt_value_new(a, CKPT_VAL_DICT)))
        return CKPT_ENOMEM;
    for (i = 0; i < opt->u.dict.map.n; i++) {
        const ckpt_value *k = opt->u.dict.map.keys[i], *v = opt->u.dict.map.vals[i];
        if (ckpt_value_is_str(k, "fp32_from_fp16_params"))
            continue;
        if (ckpt_value_is_str(k, "optimizer"))
            copy = inner;
        else if ((rc = ckpt_megatron__carry(plan, file, m->g, r->ck, v, &copy)) < 0)
            return rc;
        if ((rc = ckpt_value_dict_set(a, *out, (ckpt_value *)k, copy)) < 0)
            return rc;
    }
    return 0;
}
