/* The verify features of DeepSeek-V3 style families (formats/families/README.md, `verify`):
 * multi-head latent attention, YaRN RoPE, and the router's expert bias, groups, scaling and
 * shared experts behind dense first layers. Each size is a feature naming an integer
 * expression over the family's fields, so that the family's data, not this file, says where
 * a value lives. */
#include "family_private.h"

#include <math.h>
#include <string.h>

static const cJSON *features(const ckpt_family *f)
{
    return cJSON_GetObjectItemCaseSensitive(f->verify, "features");
}

static int refuse(const ckpt_family *f, const char *name, const char *why)
{
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "family %s: verify.features.%s %s", f->name, name,
                           why);
}

/* Feature `name` of `obj`, an integer expression over the fields of c, into *out; absent:
 * *out untouched. A field that is none (q_lora_rank null) gives `none`. */
static int expr_feature(const ckpt_family *f, const ckpt_family_config *c, const cJSON *obj, const char *name,
                        int64_t none, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    family_expr_fail fail;
    int is_bool = 0, rc;

    if (!v)
        return 0;
    if (!cJSON_IsString(v))
        return refuse(f, name, "is not a field or an expression over fields");
    if (cJSON_IsString(v) && ckpt_family__get(c, v->valuestring) &&
        ckpt_family__get(c, v->valuestring)->kind == CKPT_VAL_NONE) {
        *out = none;
        return 0;
    }
    memset(&fail, 0, sizeof fail);
    rc = ckpt_family__expr(f, c, v->valuestring, "verify.features", out, &is_bool, &fail);
    if (rc < 0)
        return ckpt_error_setc(rc, CKPT_ERRCLASS_MODEL, "family %s: verify.features.%s %s: %s has no value", f->name,
                               name, v->valuestring, fail.a[0] ? fail.a : v->valuestring);
    return 0;
}

/* Feature `name` of `obj`, a real field of c, into *out; absent feature or none field: untouched. */
static void real_feature(const ckpt_family_config *c, const cJSON *obj, const char *name, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (cJSON_IsNumber(v))
        *out = v->valuedouble;
    else if (cJSON_IsString(v))
        *out = ckpt_family__real(c, v->valuestring, *out);
}

/* The RoPE type the family's `rope` field says: every type verify runs, anything else refused
 * (never run as plain RoPE). YaRN's parameters from the `yarn` feature's fields. */
int ckpt_family__rope_features(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out)
{
    /* "rope" is Megatron's rope_type for unscaled RoPE (DeepSeek-V3 without rope_scaling) */
    static const char *const known[] = { "default", "rope", "llama3", "linear", "yarn", NULL };
    const char *rope = ckpt_family__str(c, "rope");
    const cJSON *yarn = cJSON_GetObjectItemCaseSensitive(features(f), "yarn");
    int64_t positions = -1;
    size_t i;
    int rc;

    for (i = 0; rope && known[i] && strcmp(known[i], rope) != 0; i++)
        ;
    if (rope && !known[i])
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: RoPE type %s is not one verify runs (default, rope, llama3, linear, yarn)",
                               ckpt_family__where(f, c), rope);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(features(f), "rope_interleaved")))
        out->rope_interleaved = 1;
    if (!rope || strcmp(rope, "yarn") != 0)
        return 0;
    if (!cJSON_IsObject(yarn))
        return refuse(f, "yarn", "is missing: the family's RoPE is yarn, and verify needs its fields");
    out->rope_yarn_factor = NAN;
    real_feature(c, yarn, "factor", &out->rope_yarn_factor);
    real_feature(c, yarn, "beta_fast", &out->rope_yarn_beta_fast);
    real_feature(c, yarn, "beta_slow", &out->rope_yarn_beta_slow);
    real_feature(c, yarn, "mscale", &out->rope_yarn_mscale);
    real_feature(c, yarn, "mscale_all_dim", &out->rope_yarn_mscale_all_dim);
    if ((rc = expr_feature(f, c, yarn, "original_max_positions", -1, &positions)) < 0)
        return rc;
    out->rope_original_max_positions = positions;
    if (isnan(out->rope_yarn_factor))
        return refuse(f, "yarn.factor", "gives no factor");
    return 0;
}

/* MLA's sizes (q_lora none: q straight from the input) and the latent norms' epsilon; the
 * head size is qk_nope + qk_rope (the config's head_dim, DeepSeek's qk_rope_head_dim, is the
 * RoPE part only). */
static int mla_features(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out)
{
    const cJSON *mla = cJSON_GetObjectItemCaseSensitive(features(f), "mla");
    int rc;

    if (!mla)
        return 0;
    if ((rc = expr_feature(f, c, mla, "q_lora_rank", 0, &out->q_lora_rank)) < 0 ||
        (rc = expr_feature(f, c, mla, "kv_lora_rank", 0, &out->kv_lora_rank)) < 0 ||
        (rc = expr_feature(f, c, mla, "qk_nope_head_dim", -1, &out->qk_nope_head_dim)) < 0 ||
        (rc = expr_feature(f, c, mla, "qk_rope_head_dim", -1, &out->qk_rope_head_dim)) < 0 ||
        (rc = expr_feature(f, c, mla, "v_head_dim", -1, &out->v_head_dim)) < 0)
        return rc;
    real_feature(c, mla, "norm_eps", &out->mla_norm_eps);
    if (out->kv_lora_rank <= 0 || out->qk_nope_head_dim < 0 || out->qk_rope_head_dim <= 0)
        return refuse(f, "mla", "gives no kv_lora_rank, qk_nope_head_dim or qk_rope_head_dim");
    out->head_dim = out->qk_nope_head_dim + out->qk_rope_head_dim;
    return 0;
}

/* `moe_layers`: a field holding a 0/1 list, one per layer (1: MoE), dense layers anywhere
 * (Qwen3-MoE's mlp_only_layers); its leading zeros are also the dense layers before the first
 * MoE layer (first_k_dense_replace). */
static int moe_layers(const ckpt_family *f, const ckpt_family_config *c, const cJSON *ft, ckpt_model_config *out)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ft, "moe_layers");
    const ckpt_value *v = cJSON_IsString(name) ? ckpt_family__get(c, name->valuestring) : NULL;
    unsigned char *flags;
    size_t i, dense = 0;

    if (!name)
        return 0;
    if (!v || (v->kind != CKPT_VAL_LIST && v->kind != CKPT_VAL_TUPLE) || v->u.seq.n < 1 ||
        (out->num_layers >= 0 && (int64_t)v->u.seq.n != out->num_layers))
        return refuse(f, "moe_layers", "does not name a list field of the config, one entry a layer");
    if (!(flags = ckpt_arena_alloc(c->arena, v->u.seq.n)))
        return ckpt_error_oom();
    for (i = 0; i < v->u.seq.n; i++) {
        const ckpt_value *x = v->u.seq.items[i];
        if (x->kind != CKPT_VAL_INT || (x->u.integer != 0 && x->u.integer != 1))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s[%zu] is not 0 or 1",
                                   ckpt_family__where(f, c), name->valuestring, i);
        flags[i] = (unsigned char)x->u.integer;
    }
    while (dense < v->u.seq.n && !flags[dense])
        dense++;
    out->moe_first_dense = (int64_t)dense;
    out->moe_layer_freq = 1;
    out->layer_moe = flags;
    return 0;
}

/* The router and experts beyond moe_features': `moe_expert_bias` (bool), `moe_groups` and
 * `moe_topk_groups`, `moe_topk_norm` (a bool field), `moe_scale` (a real field),
 * `moe_shared_ffn` (an expression), `moe_layers`, `ffn` (the dense layers' MLP width). */
static int routing_features(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out)
{
    const cJSON *ft = features(f), *norm = cJSON_GetObjectItemCaseSensitive(ft, "moe_topk_norm");
    int rc;

    if ((rc = expr_feature(f, c, ft, "ffn", -1, &out->ffn_hidden_size)) < 0 || out->num_experts <= 0)
        return rc;
    out->moe_expert_bias = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ft, "moe_expert_bias"));
    if ((rc = expr_feature(f, c, ft, "moe_groups", 1, &out->moe_n_group)) < 0 ||
        (rc = expr_feature(f, c, ft, "moe_topk_groups", 1, &out->moe_topk_group)) < 0 ||
        (rc = expr_feature(f, c, ft, "moe_shared_ffn", 0, &out->moe_shared_ffn_hidden_size)) < 0 ||
        (rc = moe_layers(f, c, ft, out)) < 0)
        return rc;
    real_feature(c, ft, "moe_scale", &out->moe_topk_scale);
    if (cJSON_IsString(norm))
        out->moe_topk_norm = ckpt_family__int(c, norm->valuestring, 1) != 0;
    else if (cJSON_IsBool(norm))
        out->moe_topk_norm = cJSON_IsTrue(norm);
    return 0;
}

int ckpt_family__mla_features(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out)
{
    int rc = mla_features(f, c, out);
    return rc < 0 ? rc : routing_features(f, c, out);
}
