/* Megatron's `args` rewritten for a target layout (megatron_plan.c): the parallel sizes, the
 * padded vocabulary, the kind of optimizer and its data-parallel layout, the pipeline split
 * and the layers per virtual stage, and for a mixture of experts its EP, expert TP and the saving rank. */
#include "megatron_private.h"

#include <string.h>

static int set_attr(ckpt_arena *a, ckpt_value *dict, const char *name, ckpt_value *v)
{
    ckpt_value *key = ckpt_value_new_str(a, name, strlen(name));
    return key && v ? ckpt_value_dict_set(a, dict, key, v) : CKPT_ENOMEM;
}

/* The data-parallel settings a distributed optimizer's buffers are laid out by, which its
 * reader takes from args: the DP (and the world it implies), the optimizer instances and the
 * buckets. */
static int rewrite_ddp_args(ckpt_arena *a, const ckpt_megatron_target *t, ckpt_value *d)
{
    int64_t bucket = t->ddp_bucket_size;
    int rc = 0;

    if (t->dp > 0) {
        int64_t world = (int64_t)t->tp * t->pp * t->dp * ckpt_megatron__arg_int(d, "context_parallel_size", 1);
        if ((rc = set_attr(a, d, "data_parallel_size", ckpt_value_new_int(a, t->dp))) == 0 &&
            ckpt_value_dict_get(d, "world_size"))
            rc = set_attr(a, d, "world_size", ckpt_value_new_int(a, world));
    }
    if (rc == 0 && t->dist_opt_instances > 0)
        rc = set_attr(a, d, "num_distributed_optimizer_instances", ckpt_value_new_int(a, t->dist_opt_instances));
    if (rc < 0 || !bucket)
        return rc;
    if ((rc = set_attr(a, d, "overlap_grad_reduce", ckpt_value_new_bool(a, bucket > 0))) < 0 || bucket < 0)
        return rc;
    /* Megatron takes either a bucket size or a number of buckets */
    if ((rc = set_attr(a, d, "ddp_bucket_size", ckpt_value_new_int(a, bucket))) == 0 &&
        ckpt_value_dict_get(d, "ddp_num_buckets"))
        rc = set_attr(a, d, "ddp_num_buckets", ckpt_value_new(a, CKPT_VAL_NONE));
    return rc;
}

/* The target's pipeline split under the names Megatron's argparse stores it: the first/last
 * stage sizes an int or None, the account-for flags bools; all four, as a Namespace of
 * Megatron's holds them, unless args hold none and the split is even (args built from a
 * config, not a run, stay as they were). */
static int rewrite_split_args(ckpt_arena *a, const mg_split *s, ckpt_value *d)
{
    static const char *const names[] = {
        "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
        "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    };
    int64_t sizes[2] = { s->first, s->last };
    int flags[2] = { s->embedding, s->loss };
    size_t i;
    int rc = 0, any = !ckpt_megatron__split_even(s);

    for (i = 0; i < 4; i++)
        any |= ckpt_value_dict_get(d, names[i]) != NULL;
    for (i = 0; i < 4 && rc == 0 && any; i++) {
        int set = i < 2 ? sizes[i] > 0 : flags[i - 2];
        ckpt_value *v = i >= 2 ? ckpt_value_new_bool(a, set)
                        : set  ? ckpt_value_new_int(a, sizes[i])
                               : ckpt_value_new(a, CKPT_VAL_NONE);
        rc = set_attr(a, d, names[i], v);
    }
    return rc;
}

int ckpt_megatron__rewrite_args(ckpt_megatron *m, const ckpt_megatron_target *t, ckpt_plan *plan, size_t file,
                                const mg_args_at *at, const ckpt_value *args, ckpt_value **out)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    ckpt_value *copy, *d;
    int64_t layers = m->info.num_layers;
    /* the layout the args were written for: a torch_dist model's own is TP 1, PP 1 */
    int64_t src_tp = m->dist ? ckpt_megatron__arg_int(args, "tensor_model_parallel_size", 1) : m->info.tp;
    int64_t src_pp = m->dist ? ckpt_megatron__arg_int(args, "pipeline_model_parallel_size", 1) : m->info.pp;
    mg_split split;
    int rc;

    if ((rc = ckpt_megatron__carry(plan, file, m->g, at->tmpl->ck, args, &copy)) < 0)
        return rc;
    /* only rank 0's args were checked at open; the template may be another rank's */
    if (!(d = (ckpt_value *)ckpt_megatron__namespace_dict(copy)))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: args is not a Namespace",
                               at->tmpl->ck ? ckpt_path(at->tmpl->ck) : "args");
    if ((rc = set_attr(a, d, "tensor_model_parallel_size", ckpt_value_new_int(a, t->tp))) < 0 ||
        (rc = set_attr(a, d, "pipeline_model_parallel_size", ckpt_value_new_int(a, t->pp))) < 0 ||
        (rc = set_attr(a, d, "virtual_pipeline_model_parallel_size",
                       t->vpp > 1 ? ckpt_value_new_int(a, t->vpp) : ckpt_value_new(a, CKPT_VAL_NONE))) < 0 ||
        (rc = set_attr(a, d, "padded_vocab_size", ckpt_value_new_int(a, at->padded_vocab))) < 0)
        return rc;
    /* Megatron builds the kind of optimizer args name, and loads only the state it saves */
    if ((t->optimizer == CKPT_MEGATRON_OPTIM_PLAIN || t->optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED) &&
        (rc = set_attr(a, d, "use_distributed_optimizer",
                       ckpt_value_new_bool(a, t->optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED))) < 0)
        return rc;
    if ((rc = rewrite_ddp_args(a, t, d)) < 0 ||
        (rc = ckpt_megatron__split_of_target(m->args, layers, t, &split)) < 0 ||
        (rc = rewrite_split_args(a, &split, d)) < 0)
        return rc;
    /* derived from the layout by Megatron at start-up (one stage less with a standalone
     * embedding stage); kept consistent with it here */
    if (ckpt_value_dict_get(d, "transformer_pipeline_model_parallel_size") &&
        (rc = set_attr(a, d, "transformer_pipeline_model_parallel_size",
                       ckpt_value_new_int(a, t->pp - (src_pp - ckpt_megatron__arg_int(
                                                                       d, "transformer_pipeline_model_parallel_size",
                                                                       src_pp))))) < 0)
        return rc;
    if ((rc = ckpt_megatron__ep_args(a, d, t, ckpt_megatron__grouped_out(m, t), at->ep_size, at->etp, at->pp, at->ep,
                                      at->tmpl->stand_in)) < 0)
        return rc;
    /* an expert tensor-parallel size left to its default follows the tensor-parallel size; a
     * MoE model's args always say it, as Megatron-LM's do */
    if ((ckpt_megatron__arg_int(d, "expert_tensor_parallel_size", -1) == src_tp ||
         ((t->etp > 0 || ckpt_megatron__arg_int(d, "expert_tensor_parallel_size", -1) < 0) &&
          ckpt_megatron__num_experts(d) > 0)) &&
        (rc = set_attr(a, d, "expert_tensor_parallel_size", ckpt_value_new_int(a, ckpt_megatron__etp(t)))) < 0)
        return rc;
    /* the multi-token prediction layers the model holds (none where they were left out) */
    if ((ckpt_megatron__mtp_layers(m) > 0 || ckpt_megatron__arg_int(d, "mtp_num_layers", 0) > 0) &&
        (rc = set_attr(a, d, "mtp_num_layers",
                       ckpt_megatron__mtp_layers(m) > 0 ? ckpt_value_new_int(a, ckpt_megatron__mtp_layers(m))
                                                        : ckpt_value_new(a, CKPT_VAL_NONE))) < 0)
        return rc;
    if (ckpt_value_dict_get(d, "num_layers_per_virtual_pipeline_stage") &&
        (rc = set_attr(a, d, "num_layers_per_virtual_pipeline_stage",
                       t->vpp > 1 ? ckpt_value_new_int(a, layers / (t->pp * t->vpp))
                                     : ckpt_value_new(a, CKPT_VAL_NONE))) < 0)
        return rc;
    *out = copy;
    return 0;
}

int ckpt_megatron__target_args(ckpt_megatron *m, const ckpt_megatron_target *t, ckpt_plan *plan, size_t file,
                               ckpt_value **out)
{
    mg_args_at at;

    memset(&at, 0, sizeof at);
    at.tmpl = mg_rank_at(m, 0, 0, 0);
    at.padded_vocab = ckpt_megatron__target_vocab(m, t);
    at.ep_size = ckpt_megatron__target_ep(m, t);
    return ckpt_megatron__rewrite_args(m, t, plan, file, &at, m->args, out);
}
