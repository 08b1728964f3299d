/* Whether a Megatron model can be laid out at a target TP/PP/VPP, by megatron-core's own
 * rules (TransformerConfig.__post_init__, the column-parallel layers' divide(), the vocabulary
 * padding of megatron/training): attention heads split over the TP ranks, query groups a
 * multiple or a divisor of TP (fewer groups than ranks replicate them), the MLP's hidden
 * size and the padded vocabulary cut into equal parts, and the layers over the pipeline
 * stages and their virtual chunks as megatron-core splits them (megatron_split.c). A plan
 * would otherwise write a checkpoint that Megatron refuses to build a model for, or one cut
 * where no head boundary is. */
#include "megatron_private.h"

#include <stdint.h>
#include <stdio.h>

/* Bound on TP x PP x VPP x EP of a target: each rank is a file, each file a plan entry. */
#define MAX_TARGET_RANKS (1 << 20)

typedef struct mg_dims {
    int64_t layers, heads, groups, ffn, moe_ffn, experts;
} mg_dims;

static void dims_of(const ckpt_value *args, mg_dims *d)
{
    int64_t hidden = ckpt_megatron__arg_int(args, "hidden_size", 0);

    d->layers = ckpt_megatron__arg_int(args, "num_layers", 0);
    d->heads = ckpt_megatron__arg_int(args, "num_attention_heads", 0);
    /* num_query_groups means something only with --group-query-attention (its default is 1) */
    d->groups = ckpt_megatron__arg_int(args, "group_query_attention", 0)
                    ? ckpt_megatron__arg_int(args, "num_query_groups", d->heads)
                    : d->heads;
    d->ffn = ckpt_megatron__arg_int(args, "ffn_hidden_size", hidden > 0 && hidden <= INT64_MAX / 4 ? 4 * hidden : 0);
    d->experts = ckpt_megatron__num_experts(args);
    d->moe_ffn = d->experts > 0
                     ? ckpt_megatron__arg_int(args, "moe_ffn_hidden_size", 0)
                     : 0;
}

static int refuse(const char *fmt, long long a, long long b, long long c)
{
    return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, fmt, a, b, c);
}

static int check_tp(const mg_dims *d, const ckpt_megatron_target *t)
{
    long long tp = t->tp;

    if (d->heads > 0 && d->heads % tp)
        return refuse("TP %lld: %lld attention heads cannot be split over %lld tensor-parallel ranks "
                      "(num_attention_heads %% TP != 0)",
                      tp, (long long)d->heads, tp);
    if (d->groups > 0 && d->groups % tp && tp % d->groups)
        return refuse("TP %lld: %lld query groups are neither a multiple nor a divisor of %lld tensor-parallel "
                      "ranks (num_query_groups)",
                      tp, (long long)d->groups, tp);
    if (d->ffn > 0 && d->ffn % tp)
        return refuse("TP %lld: an MLP hidden size of %lld cannot be split over %lld tensor-parallel ranks "
                      "(ffn_hidden_size %% TP != 0)",
                      tp, (long long)d->ffn, tp);
    if (d->moe_ffn > 0 && d->moe_ffn % tp)
        return refuse("TP %lld: an expert hidden size of %lld cannot be split over %lld tensor-parallel ranks "
                      "(moe_ffn_hidden_size %% TP != 0)",
                      tp, (long long)d->moe_ffn, tp);
    if (t->padded_vocab_size > 0 && t->padded_vocab_size % tp)
        return refuse("TP %lld: a padded vocabulary of %lld rows cannot be split over %lld tensor-parallel ranks "
                      "(padded_vocab_size %% TP != 0)",
                      tp, (long long)t->padded_vocab_size, tp);
    return 0;
}

/* Megatron's experts: num_experts over the EP ranks, each cut over the expert TP ranks. */
static int check_ep(const mg_dims *d, const ckpt_megatron_target *t, int64_t ep)
{
    if (ep < 1 || ep > 4096)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "EP %lld: the expert-parallel size is 1 to 4096",
                               (long long)ep);
    if (ep > 1 && d->experts <= 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "EP %lld: the model has no experts to split (args.num_experts %lld)", (long long)ep,
                               (long long)d->experts);
    if (d->experts > 0 && d->experts % ep)
        return refuse("EP %lld: %lld experts cannot be split over %lld expert-parallel ranks (num_experts %% EP != 0)",
                      (long long)ep, (long long)d->experts, (long long)ep);
    if (t->etp && t->etp != t->tp && d->experts <= 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "expert TP %d: the model has no experts to cut (args.num_experts %lld)", t->etp,
                               (long long)d->experts);
    /* megatron-core 0.16.1's legacy save: the ranks of expert data-parallel rank 0 write
     * mp_rank_TT[_PPP]_EEE, TT their dense TP rank; above the TP two expert TP ranks write
     * each file (one survives), and below it the first expert TP x EP ranks of a stage hold
     * only that many dense TP ranks */
    if (t->etp > t->tp)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "expert TP %d above the TP %d: megatron-core's legacy save cannot hold it (the expert "
                               "TP ranks of one dense TP rank all write its mp_rank file, and one survives)",
                               t->etp, t->tp);
    if (t->etp && t->tp % t->etp)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "expert TP %d: an expert tensor-parallel size that does not divide the TP (%d) is not "
                               "written",
                               t->etp, t->tp);
    if (t->etp && t->etp < t->tp && (int64_t)t->etp * ep < t->tp)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "expert TP %d x EP %lld below the TP %d: megatron-core's legacy save is written by the "
                               "ranks of expert data-parallel rank 0, which hold dense TP ranks 0 to %lld only; the "
                               "other dense TP ranks would be in no file",
                               t->etp, (long long)ep, t->tp, (long long)t->etp * ep - 1);
    return 0;
}

static int check_dims(const ckpt_value *args, const mg_dims *d, const ckpt_megatron_target *t, int64_t ep)
{
    mg_split split;
    int64_t chunks;
    int rc;

    if (t->tp < 1 || t->pp < 1 || t->vpp < 1)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "target layout TP %d, PP %d, VPP %d: sizes must be at least 1", t->tp, t->pp, t->vpp);
    if (CKPT_MUL_OVERFLOWS((int64_t)t->tp * t->pp, (int64_t)t->vpp * (ep > 0 && ep <= INT32_MAX ? ep : 1), &chunks) ||
        chunks > MAX_TARGET_RANKS)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "target layout TP %d, PP %d, VPP %d: more than %d model chunks", t->tp, t->pp, t->vpp,
                               MAX_TARGET_RANKS);
    if ((rc = check_tp(d, t)) < 0 || (rc = check_ep(d, t, ep)) < 0)
        return rc;
    return ckpt_megatron__split_of_target(args, d->layers, t, &split);
}

int ckpt_megatron_check_layout(const ckpt_value *args, const ckpt_megatron_target *t)
{
    mg_dims d;

    if (!t || t->version != CKPT_MEGATRON_TARGET_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_megatron_target version %u, expected %u", t ? t->version : 0,
                              CKPT_MEGATRON_TARGET_VERSION);
    if (!ckpt_megatron__namespace_dict(args))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_megatron_check_layout: args is not a Namespace");
    dims_of(args, &d);
    return check_dims(args, &d, t, t->ep ? t->ep : ckpt_megatron__arg_int(args, "expert_model_parallel_size", 1));
}

/* A padded vocabulary only aligns the table: it holds every true row and adds no more padding
 * than true rows (Megatron's own rule may add more to a tiny vocabulary, and is let through). */
static int check_padded_vocab(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    int64_t base = m->info.true_vocab_size ? m->info.true_vocab_size : m->info.padded_vocab_size;
    int64_t rule = ckpt_megatron_padded_vocab(base, m->info.make_vocab_size_divisible_by, t->tp);
    int64_t v = t->padded_vocab_size;
    const char *src = m->set ? ckpt_set_info_of(m->set)->root : "the checkpoint";
    const char *which = m->info.true_vocab_size ? "true" : "stored";

    if (!v || base < 1)
        return 0;
    if (v < base)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: padded vocabulary size %lld is smaller than the %s vocabulary (%lld rows)", src,
                               (long long)v, which, (long long)base);
    if (v - base > base && v > rule)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: padded vocabulary size %lld is more than twice the %s vocabulary (%lld rows) and "
                               "more than Megatron's padding of it (%lld)",
                               src, (long long)v, which, (long long)base, (long long)rule);
    return 0;
}

int ckpt_megatron__check_sizes(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    mg_dims d;
    int rc = check_padded_vocab(m, t);

    if (rc < 0)
        return rc;
    dims_of(m->args, &d);
    /* the layers the model holds: args' count where the files agree with it (checked at open),
     * the tensors' own where args do not say */
    if (m->info.num_layers > 0)
        d.layers = m->info.num_layers;
    /* the sizes that forbid the layout are the checkpoint's: name it */
    if ((rc = check_dims(m->args, &d, t, ckpt_megatron__target_ep(m, t))) < 0 && (m->set || m->dist))
        ckpt_error_prefix("%s", m->set ? ckpt_set_info_of(m->set)->root : m->dist);
    return rc;
}

int ckpt_megatron__target_ep(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    return t->ep > 0 ? t->ep : m->info.ep > 0 ? m->info.ep : 1;
}
