/* The family of a Hugging Face config.json and what it says beyond LLaMA's sizes: biases,
 * RoPE scaling, a sliding window. A conversion carries all of it or refuses the config, so
 * that the model written computes what the model read did. */
#include "hf_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <string.h>

static const struct {
    const char *model_type, *arch_prefix, *causal_lm, *title;
} families[] = {
    [CKPT_HF_LLAMA] = { "llama", "LlamaFor", "LlamaForCausalLM", "LLaMA" },
    [CKPT_HF_MISTRAL] = { "mistral", "MistralFor", "MistralForCausalLM", "Mistral" },
    [CKPT_HF_QWEN2] = { "qwen2", "Qwen2For", "Qwen2ForCausalLM", "Qwen2" },
};
#define N_FAMILIES (sizeof families / sizeof families[0])
#define KNOWN_FAMILIES "llama, mistral, qwen2"
#define KNOWN_ROPE_TYPES "default, llama3"

const char *ckpt_hf_family_name(ckpt_hf_family f)
{
    return (unsigned)f < N_FAMILIES ? families[f].model_type : NULL;
}

const char *ckpt_hf_family_title(ckpt_hf_family f)
{
    return (unsigned)f < N_FAMILIES ? families[f].title : NULL;
}

const char *ckpt_hf__class_name(ckpt_hf_family f)
{
    return (unsigned)f < N_FAMILIES ? families[f].causal_lm : NULL;
}

int ckpt_hf_family_parse(const char *what, const char *name, ckpt_hf_family *out)
{
    size_t i;

    for (i = 0; i < N_FAMILIES; i++)
        if (strcmp(name, families[i].model_type) == 0) {
            *out = (ckpt_hf_family)i;
            return 0;
        }
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: model_type %s is not one of " KNOWN_FAMILIES,
                           what, name);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* model_type names the family; architectures, when there, names a class of it. Without a
 * model_type the class decides (LLaMA when there is neither, as configs of old tools). */
static int get_family(const cJSON *cfg, const char *path, ckpt_hf_family *out)
{
    const cJSON *type = ckpt_hf__field(cfg, "model_type"), *arch = ckpt_hf__field(cfg, "architectures"), *a;
    int found = 0, rc;
    size_t i;

    *out = CKPT_HF_LLAMA;
    if (type && !cJSON_IsString(type))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: model_type is not a string", path);
    if (type && (rc = ckpt_hf_family_parse(path, type->valuestring, out)) < 0)
        return rc;
    if (!arch)
        return 0;
    if (!cJSON_IsArray(arch))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: architectures is not a list", path);
    for (i = 0; i < N_FAMILIES && !found; i++) {
        if (type && i != (size_t)*out)
            continue;
        cJSON_ArrayForEach(a, arch)
            if (cJSON_IsString(a) && starts_with(a->valuestring, families[i].arch_prefix)) {
                *out = (ckpt_hf_family)i;
                found = 1;
            }
    }
    a = cJSON_GetArrayItem(arch, 0);
    if (!found && type)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: architectures names %s, not a %s model (%s...)", path,
                               cJSON_IsString(a) ? a->valuestring : "no class", type->valuestring,
                               families[*out].arch_prefix);
    if (!found)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: architectures names %s, not a model of " KNOWN_FAMILIES, path,
                               cJSON_IsString(a) ? a->valuestring : "no class");
    return 0;
}

/* One RoPE description (rope_scaling or rope_parameters). */
typedef struct rope {
    int llama3;
    double factor, low, high;
    int64_t original;
} rope;

static int rope_number(const cJSON *r, const char *path, const char *where, const char *name, double lo, double *out)
{
    const cJSON *v = ckpt_hf__field(r, name);

    if (!v)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s.%s is missing (rope_type llama3)", path,
                               where, name);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > 1e300)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s.%s is not a number >= %g", path, where,
                               name, lo);
    *out = v->valuedouble;
    return 0;
}

static int parse_rope(const cJSON *r, const char *path, const char *where, rope *out)
{
    static const char *const keys[] = { "rope_type", "type", "rope_theta", "factor", "low_freq_factor",
                                        "high_freq_factor", "original_max_position_embeddings" };
    const cJSON *type = ckpt_hf__field(r, "rope_type"), *c;
    size_t i;
    int rc;

    memset(out, 0, sizeof *out);
    if (!type)
        type = ckpt_hf__field(r, "type");
    if (!cJSON_IsObject(r))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not an object", path, where);
    if (type && !cJSON_IsString(type))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s.rope_type is not a string", path, where);
    if (type && strcmp(type->valuestring, "default") != 0 && strcmp(type->valuestring, "llama3") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: %s.rope_type %s is not one of " KNOWN_ROPE_TYPES, path, where, type->valuestring);
    /* every other key of a RoPE description changes the frequencies */
    for (c = r->child; c; c = c->next) {
        for (i = 0; i < sizeof keys / sizeof keys[0] && strcmp(c->string, keys[i]) != 0; i++)
            ;
        if (i == sizeof keys / sizeof keys[0])
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "%s: %s.%s is not a field of RoPE types " KNOWN_ROPE_TYPES, path, where, c->string);
    }
    if (!type || strcmp(type->valuestring, "llama3") != 0)
        return 0;
    out->llama3 = 1;
    if ((rc = rope_number(r, path, where, "factor", 1, &out->factor)) < 0 ||
        (rc = rope_number(r, path, where, "low_freq_factor", 0, &out->low)) < 0 ||
        (rc = rope_number(r, path, where, "high_freq_factor", 0, &out->high)) < 0)
        return rc;
    if (!(out->low < out->high))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: %s.low_freq_factor %g is not below high_freq_factor %g", path, where, out->low,
                               out->high);
    if (!ckpt_hf__field(r, "original_max_position_embeddings"))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: %s.original_max_position_embeddings is missing (rope_type llama3)", path, where);
    out->original = 0;
    return ckpt_hf__get_int(r, path, "original_max_position_embeddings", 1, 1, &out->original);
}

/* transformers 5 reads rope_parameters, 4 rope_scaling: where both are there they must say
 * the same, or the two would build different models. */
static int rope_fields(const cJSON *cfg, const char *path, ckpt_hf_llama_dims *d)
{
    const cJSON *scaling = ckpt_hf__field(cfg, "rope_scaling"), *params = ckpt_hf__field(cfg, "rope_parameters");
    rope s, p, *use = NULL;
    int rc;

    if (scaling && (rc = parse_rope(scaling, path, "rope_scaling", &s)) < 0)
        return rc;
    if (params && (rc = parse_rope(params, path, "rope_parameters", &p)) < 0)
        return rc;
    if (scaling && params && (s.llama3 != p.llama3 || s.factor != p.factor || s.low != p.low || s.high != p.high ||
                              s.original != p.original))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: rope_scaling and rope_parameters describe different RoPE scalings", path);
    use = params ? &p : scaling ? &s : NULL;
    if (use && use->llama3) {
        d->rope_factor = use->factor;
        d->rope_low_freq_factor = use->low;
        d->rope_high_freq_factor = use->high;
        d->rope_original_max_positions = use->original;
    }
    return 0;
}

/* layer_types (transformers >= 4.53): every layer as the sliding window says. */
static int check_layer_types(const cJSON *cfg, const char *path, const ckpt_hf_llama_dims *d)
{
    const cJSON *types = ckpt_hf__field(cfg, "layer_types"), *t;
    const char *want = d->sliding_window ? "sliding_attention" : "full_attention";

    if (!types)
        return 0;
    if (!cJSON_IsArray(types))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: layer_types is not a list", path);
    cJSON_ArrayForEach(t, types)
        if (!cJSON_IsString(t) || strcmp(t->valuestring, want) != 0)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "%s: layer_types has %s, not %s in every layer (%s)", path,
                                   cJSON_IsString(t) ? t->valuestring : "a value that is not a string", want,
                                   d->sliding_window ? "sliding_window is set" : "no sliding window");
    return 0;
}

static int sliding_window(const cJSON *cfg, const char *path, ckpt_hf_llama_dims *d)
{
    const cJSON *c, *raw = NULL;
    int use = 0, rc;

    d->sliding_window = 0;
    if (d->family == CKPT_HF_QWEN2) {
        /* Qwen2 windows only the layers past max_window_layers, which Megatron cannot say */
        if ((rc = ckpt_hf__get_bool(cfg, path, "use_sliding_window", &use)) < 0)
            return rc;
        if (use)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "%s: use_sliding_window is true (Qwen2's window on some layers only)", path);
    } else if (d->family == CKPT_HF_MISTRAL) {
        for (c = cfg->child; c; c = c->next)
            if (c->string && strcmp(c->string, "sliding_window") == 0)
                raw = c;
        /* MistralConfig's default when the key is absent; null is no window */
        d->sliding_window = 4096;
        if (raw && cJSON_IsNull(raw))
            d->sliding_window = 0;
        else if (raw && (rc = ckpt_hf__get_int(cfg, path, "sliding_window", 1, 1, &d->sliding_window)) < 0)
            return rc;
    }
    return check_layer_types(cfg, path, d);
}

/* Fields of other families' configs that change what the model computes: a config of one of
 * ours that holds them was edited into something no conversion here carries. */
static int foreign_fields(const cJSON *cfg, const char *path)
{
    static const char *const present[] = { "attn_logit_softcapping", "final_logit_softcapping", "quantization_config",
                                           "num_experts", "num_local_experts", "n_routed_experts", "qk_layernorm",
                                           "use_qk_norm", "no_rope_layers" };
    const cJSON *v, *prf = ckpt_hf__field(cfg, "partial_rotary_factor");
    size_t i;

    for (i = 0; i < sizeof present / sizeof present[0]; i++)
        if ((v = ckpt_hf__field(cfg, present[i])) && !cJSON_IsFalse(v) &&
            !(cJSON_IsNumber(v) && v->valuedouble == 0))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "%s: %s is set, which no model of " KNOWN_FAMILIES " has", path, present[i]);
    if (prf && !(cJSON_IsNumber(prf) && prf->valuedouble == 1.0))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: partial_rotary_factor is not 1 (RoPE on part of each head)", path);
    return 0;
}

int ckpt_hf_config_describe(const char *path, ckpt_buf *out)
{
    ckpt_hf_llama_dims d;
    int rc = ckpt_hf_llama_dims_read(path, &d);

    if (rc < 0) {
        rc = ckpt_buf_printf(out, "not a model ckptconv converts: %s", ckpt_error_last()->message);
        ckpt_error_clear();
        return rc < 0 ? ckpt_error_oom() : 0;
    }
    ckpt_buf_printf(out, "Hugging Face %s (model_type %s): %lld layers, hidden %lld, %lld heads, %lld KV heads, vocab %lld",
                    families[d.family].causal_lm, families[d.family].model_type, (long long)d.num_layers, (long long)d.hidden_size,
                    (long long)d.num_heads, (long long)d.num_kv_heads, (long long)d.vocab_size);
    if (d.qkv_bias || d.attention_bias)
        ckpt_buf_puts(out, ", q/k/v biases");
    if (d.rope_factor)
        ckpt_buf_printf(out, ", llama3 RoPE scaling x%g", d.rope_factor);
    if (d.sliding_window)
        ckpt_buf_printf(out, ", sliding window %lld", (long long)d.sliding_window);
    return out->data ? 0 : ckpt_error_oom();
}

int ckpt_hf__family_fields(const cJSON *cfg, const char *path, ckpt_hf_llama_dims *d)
{
    const cJSON *act = ckpt_hf__field(cfg, "hidden_act");
    int rc;

    if ((rc = get_family(cfg, path, &d->family)) < 0)
        return rc;
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: hidden_act is not \"silu\" (LLaMA's SwiGLU)", path);
    d->attention_bias = d->mlp_bias = 0;
    /* Qwen2's attention has q/k/v biases always and no attention_bias field */
    d->qkv_bias = d->family == CKPT_HF_QWEN2;
    if (d->family == CKPT_HF_LLAMA && ((rc = ckpt_hf__get_bool(cfg, path, "attention_bias", &d->attention_bias)) < 0 ||
                                       (rc = ckpt_hf__get_bool(cfg, path, "mlp_bias", &d->mlp_bias)) < 0))
        return rc;
    d->rope_factor = d->rope_low_freq_factor = d->rope_high_freq_factor = 0;
    d->rope_original_max_positions = 0;
    if ((rc = rope_fields(cfg, path, d)) < 0 || (rc = sliding_window(cfg, path, d)) < 0)
        return rc;
    return foreign_fields(cfg, path);
}
