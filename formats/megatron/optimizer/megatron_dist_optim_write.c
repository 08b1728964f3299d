/* The optimizer state of a torch_dist target: which form it takes, the key of each moment,
 * and what common.pt holds for it, as megatron-core 0.16.1 saves them (facts:
 * optimizer/distrib_optimizer.py state_dict and sharded_state_dict, optimizer/optimizer.py
 * FP32Optimizer / Float16OptimizerWithFloat16Params sharded_state_dict, Megatron-LM
 * training/checkpointing.py _build_sharded_state_dict_metadata):
 * - plain: optimizer = the torch optimizer's {'param_groups' (without 'params'), 'state':
 *   {'common_step': tensor}} (wrapped as {'optimizer': ..., 'grad_scaler'?} for bf16/fp16
 *   models), kept as a torch_dist source has it, made from a legacy source's
 *   (megatron_dist_optim_legacy_plain.c);
 * - fully_reshardable: optimizer = {'optimizer': {'param_groups': [... each with 'step']},
 *   'param_state_sharding_type': 'fully_reshardable'}; content_metadata =
 *   {'distrib_optim_sharding_type': 'fully_reshardable',
 *   'distrib_optim_fully_reshardable_mem_efficient': False, 'singleton_local_shards': False,
 *   'chained_optim_avoid_prefix': True}. */
#include "megatron_dist_optim.h"

#include <string.h>

static ckpt_value *new_str(ckpt_arena *a, const char *s)
{
    return ckpt_value_new_str(a, s, strlen(s));
}

void ckpt_megatron__dist_source(const ckpt_megatron *m, const ckpt_ckpt **ck, const ckpt_value **root)
{
    const mg_rank *r = m->set && m->ranks ? mg_rank_at(m, 0, 0, 0) : NULL;

    *ck = m->dist_ck ? m->dist_ck : r ? r->ck : NULL;
    *root = m->dist_ck ? m->dist_root : r ? r->root : NULL;
}

int ckpt_megatron__dist_target_form(ckpt_megatron *m, const ckpt_megatron_target *t, int *form)
{
    const char *src = m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model";
    /* the source's state, torch_dist or legacy (then read into moment[] here), is the plain form */
    int plain = m->dist_ck ? m->dist_form == MG_DIST_PLAIN : !m->info.distributed_optimizer;
    int distributed, rc;

    *form = MG_DIST_NONE;
    if (t->optimizer == CKPT_MEGATRON_OPTIM_DROP)
        return 0;
    if ((rc = ckpt_megatron__dist_optim_unread(m)) < 0 || !(m->info.has_optimizer || m->info.distributed_optimizer))
        return rc;
    if (!m->dist_ck && ((rc = ckpt_megatron__distopt_missing(m)) < 0 || (rc = ckpt_megatron__moments(m)) < 0))
        return rc;
    if (!m->moments)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: its optimizer state is in no form read here; --no-optimizer writes the model "
                               "(load it with --no-load-optim, or --finetune)",
                               src);
    /* an explicit form of the distributed optimizer's state asks for the distributed optimizer */
    distributed = t->optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED ||
                  (t->optimizer == CKPT_MEGATRON_OPTIM_KEEP && (!plain || t->sharding != CKPT_MEGATRON_SHARDING_AUTO));
    if (!distributed && !plain)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: the distributed optimizer's state is not written as the non-distributed "
                               "optimizer's in the torch_dist format yet",
                               src);
    if (!distributed) {
        *form = MG_DIST_PLAIN;
        return 0;
    }
    switch (t->sharding) {
    case CKPT_MEGATRON_SHARDING_FULLY_RESHARDABLE:
        *form = MG_DIST_FULLY;
        break;
    case CKPT_MEGATRON_SHARDING_DP_RESHARDABLE:
        *form = MG_DIST_DP;
        break;
    default: /* megatron-core 0.13's fully_sharded_model_space: today's default form */
        *form = m->dist_form == MG_DIST_FULLY && !m->dist_nd ? MG_DIST_FULLY : MG_DIST_DP;
        break;
    }
    return 0;
}

const char *ckpt_megatron__dist_moment_name(int form, const mg_entry *e, int k)
{
    static const char *const plain[MG_N_MOMENTS] = { "fp32_param", "exp_avg", "exp_avg_sq" };
    static const char *const dist[MG_N_MOMENTS] = { "param", "exp_avg", "exp_avg_sq" };

    if (form == MG_DIST_PLAIN)
        /* an fp32 model is its own master copy */
        return k == MG_MASTER && ckpt_node_dtype(e->full) == CKPT_DTYPE_F32 ? NULL : plain[k];
    return dist[k];
}

/* The plain source's param groups and step count (common_step, a 0-d tensor). */
static int plain_groups(const ckpt_megatron *m, const ckpt_value *opt, const ckpt_value **groups, double *step)
{
    const ckpt_value *inner = ckpt_value_dict_get(opt, "optimizer"), *sd = inner ? inner : opt;
    const ckpt_value *state = ckpt_value_dict_get(sd, "state");
    const ckpt_value *cs = state ? ckpt_value_dict_get(state, "common_step") : NULL;
    const ckpt_tensor *t = cs && cs->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(m->dist_ck, cs->u.tensor.index) : NULL;
    const ckpt_node *node;
    int rc;

    *groups = ckpt_value_dict_get(sd, "param_groups");
    if (!*groups || (*groups)->kind != CKPT_VAL_LIST)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: common.pt optimizer has no param_groups list",
                               m->dist);
    *step = 0;
    if (cs && cs->kind == CKPT_VAL_INT)
        *step = (double)cs->u.integer;
    else if (cs && cs->kind == CKPT_VAL_FLOAT)
        *step = cs->u.real;
    else if (t && t->ndim == 0) {
        if ((rc = ckpt_node_tensor(m->g, t, &node)) < 0 || (rc = ckpt_node_read(node, 0, 1, CKPT_DTYPE_F64, step)) < 0)
            return rc;
    } else if (cs)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: common.pt optimizer state common_step is not a step count", m->dist);
    return 0;
}

/* {'param_groups': [group + 'step']} from the non-distributed optimizer's groups, as
 * DistributedOptimizer.state_dict() makes it. */
static int groups_from_plain(ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_value *opt, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const ckpt_value *groups;
    ckpt_value *list = ckpt_value_new(a, CKPT_VAL_LIST), *copy;
    double step;
    size_t i;
    int rc;

    *out = ckpt_value_new(a, CKPT_VAL_DICT);
    if (!*out || !list)
        return CKPT_ENOMEM;
    if ((rc = plain_groups(m, opt, &groups, &step)) < 0)
        return rc;
    for (i = 0; i < groups->u.seq.n && rc == 0; i++) {
        const ckpt_value *g = groups->u.seq.items[i];
        if (g->kind != CKPT_VAL_DICT)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: param group %zu is not a dict", m->dist, i);
        if ((rc = ckpt_megatron__carry(plan, file, m->g, m->dist_ck, g, &copy)) < 0 ||
            (rc = ckpt_value_dict_set(a, copy, new_str(a, "step"), ckpt_value_new_float(a, step))) < 0)
            break;
        rc = ckpt_value_append(a, list, copy);
    }
    if (rc == 0 && ckpt_value_dict_set(a, *out, new_str(a, "param_groups"), list) < 0)
        rc = CKPT_ENOMEM;
    return rc;
}

int ckpt_megatron__dist_optim_sd(ckpt_megatron *m, ckpt_plan *plan, size_t file, ckpt_value **sd,
                                 const ckpt_value **scaler)
{
    const ckpt_ckpt *ck;
    const ckpt_value *root, *opt;
    int rc;

    ckpt_megatron__dist_source(m, &ck, &root);
    opt = root ? ckpt_value_dict_get(root, "optimizer") : NULL;
    if ((rc = ckpt_megatron__dist_scaler(m, scaler)) < 0)
        return rc;
    if (m->dist_form == MG_DIST_PLAIN)
        return groups_from_plain(m, plan, file, opt, sd);
    if (!m->dist_ck && !m->info.distributed_optimizer)
        return ckpt_megatron__distributed_groups(m, plan, file, mg_rank_at(m, 0, 0, 0), sd);
    if (m->dist_form == MG_DIST_DP)
        return ckpt_megatron__carry(plan, file, m->g, ck, m->dist_optim_sd, sd);
    if (m->dist_chained || (opt && opt->kind == CKPT_VAL_LIST))
        return ckpt_megatron__dist_chained_sd(m, plan, file, opt, sd);
    /* fully_reshardable's common.pt and legacy model_optim_rng.pt: DistributedOptimizer.state_dict() */
    opt = opt ? ckpt_value_dict_get(opt, "optimizer") : NULL;
    if (!opt || opt->kind != CKPT_VAL_DICT || !ckpt_value_dict_get(opt, "param_groups"))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: no optimizer['optimizer']['param_groups'] (the distributed optimizer's step and "
                               "hyper-parameters)",
                               ck ? ckpt_path(ck) : "the model");
    return ckpt_megatron__carry(plan, file, m->g, ck, opt, sd);
}

/* The source's DistributedOptimizer.state_dict() sd for a mixture of experts at EP ep_size:
 * at EP 1 one optimizer, the experts in the dense groups (the dense one's of a chained
 * source); at EP > 1 the chained [dense, expert], the expert one's groups from a source at EP
 * 1 the dense group of the experts' weights (ckpt_megatron__expert_groups). */
static int at_ep(ckpt_megatron *m, ckpt_arena *a, int ep_size, ckpt_value **sd)
{
    ckpt_value *list, *expert, *groups;
    int rc;

    if (ckpt_megatron__num_experts(m->args) <= 0)
        return 0;
    if (ep_size == 1 && (*sd)->kind == CKPT_VAL_LIST && (*sd)->u.seq.n > 0) {
        *sd = (*sd)->u.seq.items[0];
        return 0;
    }
    if (ep_size == 1 || (*sd)->kind == CKPT_VAL_LIST)
        return 0;
    if ((rc = ckpt_megatron__expert_groups(a, ckpt_megatron__param_groups(*sd, 0), &groups)) < 0)
        return rc;
    list = ckpt_value_new(a, CKPT_VAL_LIST);
    expert = ckpt_value_new(a, CKPT_VAL_DICT);
    if (!list || !expert || ckpt_value_dict_set(a, expert, new_str(a, "param_groups"), groups) < 0 ||
        ckpt_value_append(a, list, *sd) < 0 || ckpt_value_append(a, list, expert) < 0)
        return CKPT_ENOMEM;
    *sd = list;
    return 0;
}

/* common.pt's optimizer: fully_reshardable keeps DistributedOptimizer.state_dict() there,
 * beside its sharding type; dp_reshardable the sharding type only. A chained optimizer's is
 * {0: the dense one's, 1: the expert one's}. */
static int distributed_common(ckpt_megatron *m, int form, int ep_size, ckpt_plan *plan, size_t file,
                              ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const ckpt_value *scaler;
    ckpt_value *sd, *copy, *inner;
    int64_t i;
    int rc;

    if (!(*out = ckpt_value_new(a, CKPT_VAL_DICT)))
        return CKPT_ENOMEM;
    if ((rc = ckpt_megatron__dist_optim_sd(m, plan, file, &sd, &scaler)) < 0 || (rc = at_ep(m, a, ep_size, &sd)) < 0)
        return rc;
    if (sd->kind == CKPT_VAL_LIST) {
        for (i = 0; i < (int64_t)sd->u.seq.n; i++) {
            if (!(inner = ckpt_value_new(a, CKPT_VAL_DICT)) ||
                (form != MG_DIST_DP &&
                 ckpt_value_dict_set(a, inner, new_str(a, "optimizer"), sd->u.seq.items[i]) < 0) ||
                ckpt_value_dict_set(a, inner, new_str(a, "param_state_sharding_type"),
                                    new_str(a, form == MG_DIST_FULLY ? "fully_reshardable" : "dp_reshardable")) < 0 ||
                ckpt_value_dict_set(a, *out, ckpt_value_new_int(a, i), inner) < 0)
                return CKPT_ENOMEM;
        }
        return 0;
    }
    if (form != MG_DIST_DP) {
        if (ckpt_value_dict_set(a, *out, new_str(a, "optimizer"), sd) < 0)
            return CKPT_ENOMEM;
        if (scaler && ((rc = ckpt_megatron__scaler_carry(m, plan, file, scaler, &copy)) < 0 ||
                       (rc = ckpt_value_dict_set(a, *out, new_str(a, "grad_scaler"), copy)) < 0))
            return rc;
    }
    return ckpt_value_dict_set(a, *out, new_str(a, "param_state_sharding_type"),
                               new_str(a, form == MG_DIST_FULLY ? "fully_reshardable" : "dp_reshardable")) < 0
               ? CKPT_ENOMEM
               : 0;
}

static int content_metadata(ckpt_arena *a, int form, ckpt_value **out)
{
    ckpt_value *d = ckpt_value_new(a, CKPT_VAL_DICT);

    *out = d;
    if (!d)
        return CKPT_ENOMEM;
    if ((form == MG_DIST_FULLY || form == MG_DIST_DP) &&
        ckpt_value_dict_set(a, d, new_str(a, "distrib_optim_sharding_type"),
                            new_str(a, form == MG_DIST_FULLY ? "fully_reshardable" : "dp_reshardable")) < 0)
        return CKPT_ENOMEM;
    if (form == MG_DIST_FULLY && ckpt_value_dict_set(a, d, new_str(a, "distrib_optim_fully_reshardable_mem_efficient"),
                                                     ckpt_value_new_bool(a, 0)) < 0)
        return CKPT_ENOMEM;
    if (ckpt_value_dict_set(a, d, new_str(a, "singleton_local_shards"), ckpt_value_new_bool(a, 0)) < 0 ||
        ckpt_value_dict_set(a, d, new_str(a, "chained_optim_avoid_prefix"), ckpt_value_new_bool(a, 1)) < 0)
        return CKPT_ENOMEM;
    return 0;
}

int ckpt_megatron__dist_optim_common(ckpt_megatron *m, int form, int ep_size, ckpt_plan *plan, size_t file,
                                     ckpt_value *root)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const ckpt_ckpt *ck;
    const ckpt_value *src, *sched;
    ckpt_value *copy = NULL, *args;
    int rc = 0;

    if (form == MG_DIST_NONE)
        return 0;
    ckpt_megatron__dist_source(m, &ck, &src);
    sched = src ? ckpt_value_dict_get(src, "opt_param_scheduler") : NULL;
    if (form == MG_DIST_PLAIN && !m->dist_ck)
        rc = ckpt_megatron__dist_plain_common_legacy(m, plan, file, &copy);
    else if (form == MG_DIST_PLAIN)
        rc = ckpt_megatron__carry(plan, file, m->g, ck, ckpt_value_dict_get(src, "optimizer"), &copy);
    else
        rc = distributed_common(m, form, ep_size, plan, file, &copy);
    if (rc == 0)
        rc = ckpt_value_dict_set(a, root, new_str(a, "optimizer"), copy);
    /* Megatron builds the kind of optimizer args name: the form written, also when only
     * --optim-format asked for the distributed one */
    if (rc == 0 && (args = (ckpt_value *)ckpt_megatron__namespace_dict(ckpt_value_dict_get(root, "args"))) &&
        ckpt_value_dict_get(args, "use_distributed_optimizer"))
        rc = ckpt_value_dict_set(a, args, new_str(a, "use_distributed_optimizer"),
                                 ckpt_value_new_bool(a, form != MG_DIST_PLAIN));
    if (rc == 0 && sched && (rc = ckpt_megatron__carry(plan, file, m->g, ck, sched, &copy)) == 0)
        rc = ckpt_value_dict_set(a, root, new_str(a, "opt_param_scheduler"), copy);
    return rc;
}

int ckpt_megatron__dist_content_metadata(ckpt_plan *plan, int form, ckpt_value *root)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    ckpt_value *md;
    int rc = content_metadata(a, form, &md);

    return rc < 0 ? rc : ckpt_value_dict_set(a, root, new_str(a, "content_metadata"), md) < 0 ? CKPT_ENOMEM : 0;
}
