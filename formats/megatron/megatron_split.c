/* How megatron-core 0.16.1 splits the decoder's layers over pipeline stages and virtual
 * chunks (transformer_block.py get_num_layers_to_build, transformer_layer.py
 * get_transformer_layer_offset, the checks of TransformerConfig.__post_init__):
 *  - even: num_layers / (PP x VPP) in every chunk;
 *  - --decoder-first/last-pipeline-num-layers F, L: the first (last) stage holds F (L), split
 *    into VPP equal chunks, the other stages share the rest equally;
 *  - --account-for-embedding/loss-in-pipeline-split: the embedding (loss) counts as a layer of
 *    the first (last) chunk, which holds one decoder layer less.
 * Chunk (pp, vp) holds its layers after those of every chunk of a smaller virtual index, and of
 * the same one on an earlier stage; its first layer's global index is their count. A legacy
 * file numbers its chunk's layers from 0, torch_dist's items have the global layer axis. */
#include "megatron_private.h"

#include <stdio.h>

static int refuse(const char *fmt, long long a, long long b, long long c)
{
    return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, fmt, a, b, c);
}

int ckpt_megatron__split_even(const mg_split *s)
{
    return !s->first && !s->last && !s->embedding && !s->loss;
}

/* The layers of each stage before the virtual split. */
static int64_t stage_layers(const mg_split *s, int pp)
{
    int64_t middle = s->layers - s->first - s->last;
    int middle_stages = s->pp - (s->first > 0) - (s->last > 0);

    if (s->first && pp == 0)
        return s->first;
    if (s->last && pp == s->pp - 1)
        return s->last;
    if (s->first || s->last)
        return middle_stages > 0 ? middle / middle_stages : 0;
    return (s->layers + s->embedding + s->loss) / s->pp;
}

int64_t ckpt_megatron__split_layers(const mg_split *s, int pp, int vp)
{
    int64_t n = stage_layers(s, pp) / s->vpp;

    if (s->embedding && pp == 0 && vp == 0)
        n--;
    if (s->loss && pp == s->pp - 1 && vp == s->vpp - 1)
        n--;
    return n;
}

int64_t ckpt_megatron__split_offset(const mg_split *s, int pp, int vp)
{
    int64_t offset = 0;
    int v, p;

    for (v = 0; v <= vp; v++)
        for (p = 0; p < (v < vp ? s->pp : pp); p++)
            offset += ckpt_megatron__split_layers(s, p, v);
    return offset;
}

void ckpt_megatron__split_chunk_of(const mg_split *s, int64_t layer, int *pp, int *vp)
{
    int v, p;

    for (v = 0; v < s->vpp; v++)
        for (p = 0; p < s->pp; p++) {
            layer -= ckpt_megatron__split_layers(s, p, v);
            if (layer < 0) {
                *pp = p;
                *vp = v;
                return;
            }
        }
    *pp = s->pp - 1;
    *vp = s->vpp - 1;
}

int ckpt_megatron__split_stage_of(const mg_split *s, int64_t layer)
{
    int pp, vp;

    ckpt_megatron__split_chunk_of(s, layer, &pp, &vp);
    return pp;
}

static int check_even(const mg_split *s)
{
    long long L = s->layers, pp = s->pp, vpp = s->vpp;

    if (L < pp)
        return refuse("PP %lld: %lld layers cannot fill %lld pipeline stages (num_layers < PP)", pp, L, pp);
    if (L % pp)
        return refuse("PP %lld: %lld layers do not split evenly over %lld pipeline stages (num_layers %% PP != 0)",
                      pp, L, pp);
    if ((L / pp) % vpp)
        return refuse("VPP %lld: the %lld layers of each pipeline stage do not split evenly into %lld virtual "
                      "chunks ((num_layers / PP) %% VPP != 0)",
                      vpp, L / pp, vpp);
    return 0;
}

/* --decoder-first/last-pipeline-num-layers: each a multiple of VPP, the rest over the middle
 * stages in equal multiples of VPP, middle layers exactly where middle stages are. */
static int check_first_last(const mg_split *s)
{
    long long middle = s->layers - s->first - s->last, stages = s->pp - (s->first > 0) - (s->last > 0);

    if (s->first % s->vpp || s->last % s->vpp)
        return refuse("VPP %lld: %lld layers on the first or last pipeline stage do not split into %lld virtual "
                      "chunks (decoder_first/last_pipeline_num_layers %% VPP != 0)",
                      s->vpp, s->first % s->vpp ? s->first : s->last, s->vpp);
    if (middle < 0 || stages < 0 || (middle > 0) != (stages > 0))
        return refuse("PP %lld: %lld layers leave %lld for the middle pipeline stages "
                      "(num_layers - decoder_first_pipeline_num_layers - decoder_last_pipeline_num_layers), which "
                      "need as many stages with layers",
                      s->pp, s->layers, middle);
    if (stages > 0 && (middle % stages || (middle / stages) % s->vpp))
        return refuse("PP %lld: %lld middle layers do not split evenly over %lld middle pipeline stages and their "
                      "virtual chunks",
                      s->pp, middle, stages);
    return 0;
}

int ckpt_megatron__split_check(const mg_split *s)
{
    long long total = s->layers + s->embedding + s->loss;

    if (s->vpp > 1 && s->pp < 2)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "VPP %d: a virtual pipeline needs at least 2 pipeline stages, not %d", s->vpp, s->pp);
    if (s->layers <= 0)
        return 0;
    if (s->first < 0 || s->last < 0)
        return refuse("PP %lld: a first or last pipeline stage of %lld layers (decoder_first/last_pipeline_num_layers "
                      "must be at least 1)",
                      s->pp, s->first < 0 ? s->first : s->last, 0);
    if ((s->first || s->last) && (s->embedding || s->loss))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "PP %d: decoder_first/last_pipeline_num_layers and account_for_embedding/"
                               "loss_in_pipeline_split cannot be set together (megatron-core refuses it)",
                               s->pp);
    if (s->first || s->last)
        return check_first_last(s);
    if (!s->embedding && !s->loss)
        return check_even(s);
    if (total % s->pp || (total / s->pp) % s->vpp)
        return refuse("PP %lld: %lld layers with the embedding and loss accounted for do not split evenly over %lld "
                      "pipeline stages and their virtual chunks (account_for_embedding/loss_in_pipeline_split)",
                      s->pp, total, s->pp);
    if (ckpt_megatron__split_layers(s, 0, 0) < 0 || ckpt_megatron__split_layers(s, s->pp - 1, s->vpp - 1) < 0)
        return refuse("PP %lld: %lld layers leave no layer for the embedding or loss to replace in its chunk "
                      "(account_for_embedding/loss_in_pipeline_split)",
                      s->pp, s->layers, 0);
    return 0;
}

/* A first/last stage size in args: None or absent (0), else a positive integer. */
static int split_arg(const ckpt_value *args, const char *name, const char *alias, const char *where, int64_t *out)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);

    if (!v || v->kind == CKPT_VAL_NONE)
        v = ckpt_megatron_arg(args, alias);
    *out = 0;
    if (!v || v->kind == CKPT_VAL_NONE)
        return 0;
    if (v->kind != CKPT_VAL_INT || v->u.integer < 1)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: args.%s is not None or a positive integer",
                               where, name);
    *out = v->u.integer;
    return 0;
}

/* The splits args may give that are not read: a custom layout string (its stages could hold
 * embedding, loss and MTP layers anywhere), a standalone embedding stage. */
static int unread_split(const ckpt_value *args, const char *where)
{
    const ckpt_value *layout = ckpt_megatron_arg(args, "pipeline_model_parallel_layout");

    if (layout && layout->kind != CKPT_VAL_NONE)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: args.pipeline_model_parallel_layout %s%s%s: a custom pipeline layout is not read "
                               "(decoder_first/last_pipeline_num_layers and account_for_embedding/"
                               "loss_in_pipeline_split are)",
                               where, layout->kind == CKPT_VAL_STR ? "'" : "",
                               layout->kind == CKPT_VAL_STR ? layout->u.str.ptr : "(not a string)",
                               layout->kind == CKPT_VAL_STR ? "'" : "");
    if (ckpt_megatron__arg_int(args, "standalone_embedding_stage", 0))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: args.standalone_embedding_stage: a stage without layers is not read", where);
    return 0;
}

int ckpt_megatron__split_of_args(const ckpt_value *args, int64_t layers, int pp, int vpp, const char *where,
                                 mg_split *out)
{
    int rc;

    out->layers = layers;
    out->pp = pp;
    out->vpp = vpp;
    if ((rc = unread_split(args, where)) < 0 ||
        (rc = split_arg(args, "decoder_first_pipeline_num_layers", "num_layers_in_first_pipeline_stage", where,
                        &out->first)) < 0 ||
        (rc = split_arg(args, "decoder_last_pipeline_num_layers", "num_layers_in_last_pipeline_stage", where,
                        &out->last)) < 0)
        return rc;
    out->embedding = ckpt_megatron__arg_int(args, "account_for_embedding_in_pipeline_split", 0) != 0;
    out->loss = ckpt_megatron__arg_int(args, "account_for_loss_in_pipeline_split", 0) != 0;
    if ((rc = ckpt_megatron__split_check(out)) < 0)
        ckpt_error_prefix("%s: args", where);
    return rc;
}

int ckpt_megatron__split_of_target(const ckpt_value *args, int64_t layers, const ckpt_megatron_target *t,
                                   mg_split *out)
{
    int rc;

    out->layers = layers;
    out->pp = t->pp;
    out->vpp = t->vpp;
    out->first = t->first_stage_layers;
    out->last = t->last_stage_layers;
    out->embedding = t->account_for_embedding != 0;
    out->loss = t->account_for_loss != 0;
    /* args would keep what is not read, for another split */
    if ((rc = unread_split(args, "the source")) < 0)
        return rc;
    /* no split asked for at the source's own stages: the source's */
    if (ckpt_megatron__split_even(out) && t->pp == ckpt_megatron__arg_int(args, "pipeline_model_parallel_size", 1) &&
        t->vpp == ckpt_megatron__arg_int(args, "virtual_pipeline_model_parallel_size", 1) &&
        (rc = ckpt_megatron__split_of_args(args, layers, t->pp, t->vpp, "the source", out)) < 0)
        return rc;
    if ((rc = ckpt_megatron__split_check(out)) < 0)
        return rc;
    if (!ckpt_megatron__split_even(out) && t->vpp > 1)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "VPP %d with an uneven pipeline split: not written (Megatron takes it with "
                               "--num-virtual-stages-per-pipeline-rank, which ckptconv does not set)",
                               t->vpp);
    return 0;
}
