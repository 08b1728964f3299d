/* A model's config for `ckptconv verify` as its family's data says it (formats/families,
 * include/ckpt/family.h): config.json detected and read through the family's rows, Megatron
 * args that name a family read through them over what the Megatron source reads from any
 * args, each default taken said in a note. */
#include "verify_source.h"

#include <ckpt/buf.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void release_family_config(void *p) { ckpt_family_config_free(p); }

/* A field the family gave its default, with the value the model is built with (`where`
 * names the source: a config.json, or "<path>: args"). */
static int note_default(ckpt_model_builder *b, const ckpt_family *f, const ckpt_family_config *fc, const char *where,
                        const char *field)
{
    const char *key = field ? ckpt_family_config_defaulted(fc, field) : NULL;
    const ckpt_value *v;
    char text[64];

    if (!key || ckpt_family_config_get(fc, field, &v) < 0)
        return 0;
    if (v->kind == CKPT_VAL_INT)
        snprintf(text, sizeof text, "%lld", (long long)v->u.integer);
    else if (v->kind == CKPT_VAL_FLOAT)
        snprintf(text, sizeof text, "%g", v->u.real);
    else if (v->kind == CKPT_VAL_BOOL)
        snprintf(text, sizeof text, "%s", v->u.boolean ? "true" : "false");
    else if (v->kind == CKPT_VAL_NONE)
        snprintf(text, sizeof text, "none");
    else
        return 0;
    return ckpt_model_builder_note(b, "%s: %s is not given: %s (%s's default)", where, key, text, ckpt_family_title(f));
}

/* The family's values over what the source read generically: sizes only where the source
 * has none (a Megatron source knows the true vocabulary, the args only the padded one), the
 * math (norms, activation, positions, scales, window) from the family wherever it says it,
 * as only the family knows some of it (Gemma 3's embedding scale and local RoPE base). A
 * value the family took as its default is noted where the model runs with it. */
static int overlay(ckpt_model_builder *b, const ckpt_family *fam, const ckpt_family_config *fc, const char *where,
                   const ckpt_model_config *f)
{
    static const char *const features[] = { "verify.features.window", "verify.features.layer_window",
                                            "verify.features.rope_theta_local", "verify.features.attn_scale" };
    ckpt_model_config *c = ckpt_model_builder_config(b);
    size_t i;
    int rc = 0;

#define FILL_I(x, field)                                            \
    if (c->x < 0 && f->x >= 0 && rc == 0) {                         \
        c->x = f->x;                                                \
        rc = note_default(b, fam, fc, where, field);                \
    }
#define FILL_D(x, field)                                            \
    if (isnan(c->x) && !isnan(f->x) && rc == 0) {                   \
        c->x = f->x;                                                \
        rc = note_default(b, fam, fc, where, field);                \
    }
#define TAKE_I(x) \
    if (f->x >= 0) \
    c->x = f->x
#define TAKE_D(x)      \
    if (!isnan(f->x)) \
    c->x = f->x
    FILL_I(num_layers, "num_layers");
    FILL_I(hidden_size, "hidden_size");
    FILL_I(num_heads, "num_heads");
    FILL_I(num_kv_heads, "num_kv_heads");
    FILL_I(head_dim, "head_dim");
    FILL_I(ffn_hidden_size, "ffn_size");
    FILL_I(vocab_size, "vocab_size");
    FILL_D(norm_eps, "norm_eps");
    FILL_D(rope_theta, "rope_theta");
    FILL_D(rotary_percent, NULL);
    FILL_I(rope_interleaved, NULL);
    FILL_D(rope_scaling_factor, NULL);
    FILL_D(rope_low_freq_factor, NULL);
    FILL_D(rope_high_freq_factor, NULL);
    FILL_I(rope_original_max_positions, NULL);
    FILL_I(tied_embeddings, "tied");
    FILL_I(num_experts, NULL);
    FILL_I(moe_top_k, NULL);
    FILL_I(moe_ffn_hidden_size, NULL);
    FILL_I(moe_layer_freq, NULL);
    FILL_I(moe_score, NULL);
    FILL_D(moe_topk_scale, NULL);
    FILL_I(moe_shared_ffn_hidden_size, NULL);
    FILL_I(moe_first_dense, NULL);
    FILL_I(moe_expert_bias, NULL);
    FILL_I(moe_n_group, NULL);
    FILL_I(moe_topk_group, NULL);
    FILL_I(moe_group_top, NULL);
    FILL_I(moe_topk_norm, NULL);
    FILL_I(q_lora_rank, NULL);
    FILL_I(kv_lora_rank, NULL);
    FILL_I(qk_nope_head_dim, NULL);
    FILL_I(qk_rope_head_dim, NULL);
    FILL_I(v_head_dim, NULL);
    FILL_D(mla_norm_eps, NULL);
    FILL_D(rope_yarn_factor, NULL);
    FILL_D(rope_yarn_beta_fast, NULL);
    FILL_D(rope_yarn_beta_slow, NULL);
    FILL_D(rope_yarn_mscale, NULL);
    FILL_D(rope_yarn_mscale_all_dim, NULL);
    FILL_D(rope_attention_factor, NULL);
    FILL_I(rope_yarn_truncate, NULL);
    /* MLA's head is qk_nope + qk_rope (Megatron's kv_channels is v_head_dim there), and its
     * RoPE is interleaved whatever rotary_interleaved says (Megatron's MLA always is) */
    if (f->kv_lora_rank > 0)
        c->head_dim = f->head_dim;
    if (f->rope_interleaved > 0)
        c->rope_interleaved = 1;
    TAKE_I(norm);
    TAKE_I(norm_weight_plus_one);
    TAKE_I(act);
    TAKE_I(position);
    TAKE_I(qk_norm);
    TAKE_I(window);
    TAKE_I(window_full_every);
    TAKE_D(rope_theta_local);
    TAKE_D(rope_linear_factor);
    TAKE_D(attn_scale);
    TAKE_D(embed_scale);
    TAKE_I(sandwich_norms);
#undef FILL_I
#undef FILL_D
#undef TAKE_I
#undef TAKE_D
    /* the fields the family's math is read from (Mistral's sliding_window, Gemma 3's scales) */
    for (i = 0; i < sizeof features / sizeof features[0] && rc == 0; i++)
        rc = note_default(b, fam, fc, where, ckpt_family_string(fam, features[i]));
    if (rc == 0 && f->layer_window && f->num_layers > 0)
        rc = ckpt_model_builder_layer_window(b, f->layer_window, f->num_layers);
    if (rc == 0 && !c->layer_moe && f->layer_moe && f->num_layers > 0)
        rc = ckpt_model_builder_layer_moe(b, f->layer_moe, f->num_layers);
    return rc;
}

/* Read src as family f's config (kept alive by the model) and lay it over the builder's. */
static int family_config(ckpt_model_builder *b, const ckpt_family *f, const char *framework, const char *where,
                         const void *src, const ckpt_family_config **out)
{
    int args = strcmp(framework, CKPT_FAMILY_MEGATRON) == 0;
    ckpt_family_config *fc = NULL;
    ckpt_model_config mc;
    char source[4200];
    int rc;

    /* the rows name the args as "args.<name>" and no file: the refusal is given the path */
    snprintf(source, sizeof source, "%s%s", where, args ? ": args" : "");
    if ((rc = ckpt_family_config_read(&fc, f, framework, args ? "args" : where, src)) < 0) {
        if (args)
            ckpt_error_prefix("%s", where);
        return rc;
    }
    if ((rc = ckpt_model_builder_keep(b, fc, release_family_config)) < 0)
        return rc;
    if ((rc = ckpt_family_model_config(f, fc, &mc)) < 0 || (rc = overlay(b, f, fc, source, &mc)) < 0)
        return rc;
    if (out)
        *out = fc;
    return 0;
}

int ckpt_vsrc__family_args(ckpt_model_builder *b, const char *where, const ckpt_value *args, const char *model_type)
{
    size_t i;

    for (i = 0; model_type && i < ckpt_family_builtin_count(); i++) {
        const ckpt_family *f = ckpt_family_builtin_at(i);
        const char *t = ckpt_family_string(f, "hf.model_type");
        if (t && strcmp(t, model_type) == 0)
            return family_config(b, f, CKPT_FAMILY_MEGATRON, where, args, NULL);
    }
    return 0;
}

/* "LLaMA (model_type llama)": the families whose weights verify reads in this framework. */
static int readers(const char *framework, ckpt_buf *out)
{
    char path[64];
    size_t i, n = 0;
    int rc = 0;

    snprintf(path, sizeof path, "verify.maps.%s", framework);
    for (i = 0; i < ckpt_family_builtin_count() && rc == 0; i++) {
        const ckpt_family *f = ckpt_family_builtin_at(i);
        if (f && ckpt_family_string(f, path))
            rc = ckpt_buf_printf(out, "%s%s (model_type %s)", n++ ? ", " : "", ckpt_family_title(f),
                                 ckpt_family_string(f, "hf.model_type"));
    }
    return rc;
}

/* A model_type whose weights verify has no map for in this framework (PaddleNLP's Qwen2). */
static int no_map(const char *path, const ckpt_family *f, const char *framework)
{
    ckpt_buf known = CKPT_BUF_INIT;
    int rc = readers(framework, &known);

    if (rc == 0)
        rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: model_type %s: verify reads %s's %s only",
                             path, ckpt_family_string(f, "hf.model_type"),
                             strcmp(framework, CKPT_FAMILY_PADDLE) == 0 ? "PaddleNLP" : "Hugging Face",
                             known.data ? (const char *)known.data : "none");
    ckpt_buf_dispose(&known);
    return rc;
}

static int read_text(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    long len = 0;
    int rc = 0;

    *out = NULL;
    if (!f)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_OS, "%s: cannot open", path);
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || len > (1 << 24) || fseek(f, 0, SEEK_SET) != 0 ||
        !(*out = malloc((size_t)len + 1)) || fread(*out, 1, (size_t)len, f) != (size_t)len)
        rc = ckpt_error_setc(CKPT_EIO, CKPT_ERRCLASS_OS, "%s: cannot read", path);
    fclose(f);
    if (rc == 0)
        (*out)[len] = '\0';
    return rc;
}

int ckpt_vsrc__config_json(ckpt_model_builder *b, const char *path, const char *framework,
                           vsrc_config_prepare prepare, void *payload, vsrc_config *out)
{
    char map_path[64], *text = NULL;
    int rc;

    memset(out, 0, sizeof *out);
    snprintf(map_path, sizeof map_path, "verify.maps.%s", framework);
    if ((rc = read_text(path, &text)) == 0 &&
        (!prepare || (rc = prepare(path, &text, payload)) == 0) &&
        (rc = ckpt_family_detect(&out->family, framework, path, text)) == 0) {
        out->verify_map = ckpt_family_string(out->family, map_path);
        rc = out->verify_map ? family_config(b, out->family, framework, path, text, &out->config)
                             : no_map(path, out->family, framework);
    }
    free(text);
    return rc < 0 ? rc : ckpt_model_builder_config_source(b, path);
}
