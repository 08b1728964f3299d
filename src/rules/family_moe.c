/* Which layers of a mixture-of-experts model are MoE layers and which are dense: a list, one
 * 0/1 entry per layer, that the tensor check reads per layer (a dense layer's MLP tensors, a
 * MoE layer's router and experts) and Megatron's moe_layer_freq is. Hugging Face configs say
 * it with the number of dense layers before the first MoE layer (DeepSeek-V3's
 * first_k_dense_replace); Megatron with moe_layer_freq (N: layer i is MoE where i % N == 0;
 * or the list itself). */
#include "family_private.h"

#include <stdio.h>
#include <string.h>

static int new_list(family_read *r, int64_t n, const char *what, ckpt_value **out)
{
    *out = NULL;
    if (n < 1 || n > FAMILY_MAX_LAYERS)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s %lld is not from 1 to %d", r->where, what,
                               (long long)n, FAMILY_MAX_LAYERS);
    return (*out = ckpt_value_new(r->c->arena, CKPT_VAL_LIST)) ? 0 : CKPT_ENOMEM;
}

static int append(family_read *r, ckpt_value *list, int moe)
{
    return ckpt_value_append(r->c->arena, list, ckpt_value_new_int(r->c->arena, moe));
}

/* The row's "hf": [dense layer list key, sparse step key] (Qwen3-MoE's mlp_only_layers and
 * decoder_sparse_step): *dense the list (NULL: none), *step the step (1: none). */
static int sparse_keys(family_read *r, const cJSON *row, int64_t n, const cJSON **dense, int64_t *step)
{
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(row, "hf"), *k, *v, *e;
    int i = 0;

    *dense = NULL;
    *step = 1;
    if (!cJSON_IsArray(keys))
        return 0;
    if (cJSON_IsString(k = cJSON_GetArrayItem(keys, 0)) && (v = ckpt_family__field(r->cfg, k->valuestring))) {
        if (!cJSON_IsArray(v))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not a list of layers", r->where,
                                   k->valuestring);
        cJSON_ArrayForEach(e, v) {
            if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int64_t)e->valuedouble || e->valuedouble < 0 ||
                e->valuedouble >= (double)n)
                return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s[%d] is not a layer from 0 to %lld",
                                       r->where, k->valuestring, i, (long long)n - 1);
            i++;
        }
        *dense = v;
    }
    if (cJSON_IsString(k = cJSON_GetArrayItem(keys, 1)) && (v = ckpt_family__field(r->cfg, k->valuestring)))
        return ckpt_family__get_int(v, r->where, k->valuestring, 1, step);
    return 0;
}

static int listed(const cJSON *dense, int64_t i)
{
    const cJSON *e;

    cJSON_ArrayForEach(e, dense)
        if ((int64_t)e->valuedouble == i)
            return 1;
    return 0;
}

/* $moe_layers (config.json): layer i is a MoE layer from the row's dense_first field on
 * (transformers' DeepseekV3DecoderLayer: layer_idx >= first_k_dense_replace), or, with the
 * row's "hf" keys, unless the dense list names it and where (i + 1) % step == 0
 * (Qwen3MoeDecoderLayer: mlp_only_layers, decoder_sparse_step). */
static int hf_moe_layers(family_read *r, const cJSON *row, const char *name)
{
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(row, "dense_first"), *dense_list;
    int64_t n = ckpt_family__int(r->c, "num_layers", 0), dense = 0, step, i;
    ckpt_value *list;
    int rc;

    if (cJSON_IsString(field))
        dense = ckpt_family__int(r->c, field->valuestring, 0);
    if ((rc = new_list(r, n, ckpt_family__key(r->f, CKPT_FAMILY_HF, "num_layers"), &list)) < 0 ||
        (rc = sparse_keys(r, row, n, &dense_list, &step)) < 0)
        return rc;
    for (i = 0; i < n; i++)
        if ((rc = append(r, list, i >= dense && !listed(dense_list, i) && (i + 1) % step == 0)) < 0)
            return rc;
    return ckpt_family__set(r->c, name, list);
}

/* $moe_layer_freq (args): megatron-core's moe_layer_freq, an int N (layer i is MoE where
 * i % N == 0) or a 0/1 list of num_layers; absent: 1. With dense_first (DeepSeek-V3), the layers
 * must be dense layers and then MoE layers only, and the field gets the number of dense ones;
 * without (Qwen3-MoE's mlp_only_layers), any list. */
static int megatron_moe_layers(family_read *r, const cJSON *row, const char *name)
{
    const ckpt_value *v = ckpt_family__arg(r->args, "moe_layer_freq");
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(row, "dense_first");
    int64_t n = ckpt_family__int(r->c, "num_layers", 0), dense = 0, i, moe;
    ckpt_value *list;
    int rc;

    if ((rc = new_list(r, n, "args.num_layers", &list)) < 0)
        return rc;
    if (v && !(v->kind == CKPT_VAL_INT && v->u.integer > 0) &&
        !((v->kind == CKPT_VAL_LIST || v->kind == CKPT_VAL_TUPLE) && (int64_t)v->u.seq.n == n))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: args.moe_layer_freq is neither a positive integer nor a list of num_layers %lld",
                               r->where, (long long)n);
    for (i = 0; i < n; i++) {
        if (!v) {
            moe = 1;
        } else if (v->kind == CKPT_VAL_INT) {
            moe = i % v->u.integer == 0;
        } else {
            const ckpt_value *x = v->u.seq.items[i];
            if (!(x->kind == CKPT_VAL_INT && (x->u.integer == 0 || x->u.integer == 1)) && x->kind != CKPT_VAL_BOOL)
                return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: args.moe_layer_freq[%lld] is not 0 or 1",
                                       r->where, (long long)i);
            moe = x->kind == CKPT_VAL_INT ? x->u.integer != 0 : x->u.boolean != 0;
        }
        if (moe == 0 && dense < i && cJSON_IsString(field))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "%s: args.moe_layer_freq makes layer %lld dense after a MoE layer, which %s "
                                   "(dense layers before the first MoE layer only) cannot say",
                                   r->where, (long long)i, ckpt_family__key(r->f, CKPT_FAMILY_HF, field->valuestring));
        dense += moe == 0;
        if ((rc = append(r, list, moe)) < 0)
            return rc;
    }
    if (cJSON_IsString(field) && (rc = ckpt_family__set_int(r->c, field->valuestring, dense)) < 0)
        return rc;
    return ckpt_family__set(r->c, name, list);
}

int ckpt_family__moe_layers(family_read *r, const cJSON *row, const char *gen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(row, "f");
    const char *name = cJSON_IsString(f) ? f->valuestring : "?";

    if (r->args && strcmp(gen, "$moe_layer_freq") == 0)
        return megatron_moe_layers(r, row, name);
    if (!r->args && strcmp(gen, "$moe_layers") == 0)
        return hf_moe_layers(r, row, name);
    return 1;
}
