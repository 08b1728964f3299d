/* Mixture-of-experts models in torch_dist checkpoints (megatron-core 0.16.1
 * transformer/moe/experts.py SequentialMLP.sharded_state_dict, the local spec's experts):
 * every expert tensor is one item "decoder.layers.mlp.experts.experts.<module key>" of shape
 * [num_layers, num_experts, <the expert's own shape>], the experts at their GLOBAL index
 * (EP rank r holds experts r * E/EP .. (r + 1) * E/EP - 1 as its local experts 0 ..); their
 * `_extra_state` are sharded objects per (layer, expert). The legacy model names them
 * "decoder.layers.<l>.mlp.experts.local_experts.<local index>.<module key>" in the file of
 * their EP rank; this is that model: each expert of each layer a view of the item, an entry
 * of its EP rank. The distributed optimizer keeps its state per parameter under the same key
 * (fully_reshardable: "optimizer.state.<moment>.decoder.layers.mlp.experts.experts.<key>"). */
#include "optimizer/megatron_dist_optim.h"

#include <stdlib.h>
#include <string.h>

#define DIST_EXPERTS CKPT_MEGATRON_LAYERS CKPT_MEGATRON_DIST_EXPERTS
#define LOCAL_EXPERTS "mlp.experts.local_experts."

int ckpt_megatron__dist_is_expert(const char *name)
{
    return strncmp(name, DIST_EXPERTS, strlen(DIST_EXPERTS)) == 0;
}

int64_t ckpt_megatron__experts_per_rank(const ckpt_megatron *m)
{
    int64_t experts = ckpt_megatron__num_experts(m->args);
    return m->info.ep > 0 && experts > 0 ? experts / m->info.ep : 0;
}

int ckpt_megatron__dist_moe_setup(ckpt_megatron *m)
{
    int64_t experts = ckpt_megatron__num_experts(m->args);
    int64_t ep = ckpt_megatron__arg_int(m->args, "expert_model_parallel_size", 1), tp, etp;
    mg_rank *ranks;
    int64_t r;

    if (experts <= 0)
        return 0;
    if (ep < 1 || ep > 4096 || experts % ep != 0)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: args: %lld experts over expert_model_parallel_size %lld", m->dist,
                               (long long)experts, (long long)ep);
    /* megatron-core's expert tensor-parallel size, when args do not give it, is the TP size */
    tp = ckpt_megatron__arg_int(m->args, "tensor_model_parallel_size", 1);
    etp = ckpt_megatron__arg_int(m->args, "expert_tensor_parallel_size", tp);
    if (etp != tp)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: expert_tensor_parallel_size %lld differs from the tensor-parallel size %lld; "
                               "resharding experts with their own TP size is not supported yet",
                               m->dist, (long long)etp, (long long)tp);
    /* a legacy target is written per EP rank from the one template a built model has */
    if (!(ranks = calloc((size_t)ep, sizeof *ranks)))
        return ckpt_error_oom();
    for (r = 0; r < ep; r++)
        ranks[r] = m->ranks[0];
    free(m->ranks);
    m->ranks = ranks;
    m->info.ep = (int)ep;
    return 0;
}

int ckpt_megatron__dist_add_experts(ckpt_megatron *m, const ckpt_tensor *t, const char *owner, const char *rest)
{
    int64_t per_rank = ckpt_megatron__experts_per_rank(m), experts = ckpt_megatron__num_experts(m->args), l, g;
    int lead = owner ? 1 : 2; /* one layer's item: [num_experts, ...] */
    int64_t layers = owner ? 1 : m->info.num_layers;
    ckpt_buf name = CKPT_BUF_INIT;
    const ckpt_node *view;
    int rc = 0;

    if (per_rank < 1 || t->ndim < lead + 1 || (!owner && t->shape[0] != layers) || t->shape[lead - 1] != experts)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: '%s' is not [%snum_experts %lld, ...] as its args say", m->dist, t->name,
                               owner ? "" : "num_layers, ", (long long)experts);
    for (l = 0; l < layers && rc == 0; l++)
        for (g = 0; g < experts && rc == 0; g++) {
            size_t before = m->n_entries;
            int64_t at[2] = { l, g };
            const ckpt_tensor *v;
            ckpt_buf_clear(&name);
            if ((rc = owner ? ckpt_buf_printf(&name, "%s" LOCAL_EXPERTS "%lld.%s", owner, (long long)g, rest)
                            : ckpt_buf_printf(&name, CKPT_MEGATRON_LAYERS "%lld." LOCAL_EXPERTS "%lld.%s",
                                              (long long)l, (long long)g, rest)) < 0 ||
                (rc = ckpt_megatron__stacked_view(m, t, lead, at + 2 - lead, (const char *)name.data, &v)) < 0 ||
                (rc = ckpt_node_tensor(m->g, v, &view)) < 0 ||
                (rc = ckpt_megatron__dist_add_named(m, (const char *)name.data, view)) < 0)
                break;
            if (m->n_entries > before)
                m->entries[m->n_entries - 1].ep = m->info.ep > 1 ? (int)(g / per_rank) : -1;
        }
    ckpt_buf_dispose(&name);
    return rc;
}

int ckpt_megatron__dist_expert_key(const ckpt_megatron *m, const mg_entry *e, ckpt_buf *key, int64_t *global)
{
    static const char layers[] = CKPT_MEGATRON_LAYERS;
    const char *p = strncmp(e->name, layers, sizeof layers - 1) == 0 ? strchr(e->name + sizeof layers - 1, '.') : NULL;

    (void)m;
    if (!p || strncmp(p + 1, LOCAL_EXPERTS, strlen(LOCAL_EXPERTS)) != 0 || e->expert < 0)
        return 0;
    p = strchr(p + 1 + strlen(LOCAL_EXPERTS), '.');
    if (!p)
        return 0;
    *global = e->expert;
    ckpt_buf_clear(key);
    return ckpt_buf_printf(key, DIST_EXPERTS "%s", p + 1) < 0 ? CKPT_ENOMEM : 1;
}

int ckpt_megatron__dist_chained_prefix(const ckpt_value *root, int form)
{
    const ckpt_value *md = root ? ckpt_value_dict_get(root, "content_metadata") : NULL;
    const ckpt_value *avoid = md && md->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(md, "chained_optim_avoid_prefix") : NULL;

    /* megatron-core 0.13 has no avoid flag: it always prefixes */
    return form == MG_DIST_DP || !avoid || avoid->kind != CKPT_VAL_BOOL || !avoid->u.boolean;
}

int ckpt_megatron__chained_scaler(const char *file)
{
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                           "%s: a mixture-of-experts model's chained optimizer with a grad scaler (fp16) is not "
                           "converted yet; --no-optimizer writes the model",
                           file);
}

int ckpt_megatron__dist_chained_sd(ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_value *opt,
                                   ckpt_value **sd)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    const ckpt_ckpt *ck;
    const ckpt_value *root;
    ckpt_value *copy;
    int64_t i;
    int rc;

    ckpt_megatron__dist_source(m, &ck, &root);
    if (!(*sd = ckpt_value_new(a, CKPT_VAL_LIST)))
        return CKPT_ENOMEM;
    for (i = 0; i < 2; i++) {
        /* torch_dist common.pt: {0: ..., 1: ...}; legacy model_optim_rng.pt: [..., ...] */
        const ckpt_value *inner = opt && opt->kind == CKPT_VAL_LIST ? ckpt_megatron__seq_at(opt, (size_t)i)
                                                                     : ckpt_megatron__int_key_get(opt, i);
        if (inner && inner->kind == CKPT_VAL_DICT && ckpt_value_dict_get(inner, "grad_scaler"))
            return ckpt_megatron__chained_scaler(ck ? ckpt_path(ck) : "the model");
        inner = inner && inner->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(inner, "optimizer") : NULL;
        if (!inner || inner->kind != CKPT_VAL_DICT || !ckpt_value_dict_get(inner, "param_groups"))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                                   "%s: no optimizer[%lld]['optimizer']['param_groups'] (the chained optimizer's "
                                   "step and hyper-parameters)",
                                   ck ? ckpt_path(ck) : "the model", (long long)i);
        if ((rc = ckpt_megatron__carry(plan, file, m->g, ck, inner, &copy)) < 0)
            return rc;
        if (ckpt_value_append(a, *sd, copy) < 0)
            return CKPT_ENOMEM;
    }
    return 0;
}

int64_t ckpt_megatron__dist_group(int tp_size, int64_t ep_size, int tp, int ep, int pp, int expert)
{
    return expert ? tp + (int64_t)tp_size * (ep + ep_size * pp) : tp + (int64_t)tp_size * pp;
}

const char *ckpt_megatron__chained_prefix(int chained, int expert)
{
    return !chained ? "" : expert ? "chained_1." : "chained_0.";
}
