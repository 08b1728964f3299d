/* The model config of a family verify knows from its data (formats/families/<name>.json,
 * ckpt_family_model_config), for the families beyond the three whose config the model sources
 * read in C (llama, mistral, qwen2: verify_common.c, kept as they were). */
#include "verify_common.h"

#include <ckpt/hf.h>

#include <math.h>
#include <string.h>

static void release_family_config(void *p) { ckpt_family_config_free(p); }

/* The family's values over what the source read generically: sizes only where the source
 * has none (a Megatron source knows the true vocabulary, the args only the padded one), the
 * math (norms, activation, positions, scales, window) from the family wherever it says it,
 * as only the family knows some of it (Gemma 3's embedding scale and local RoPE base). */
static int overlay(ckpt_model_builder *b, const ckpt_model_config *f)
{
    ckpt_model_config *c = ckpt_model_builder_config(b);

#define FILL_I(x)             \
    if (c->x < 0 && f->x >= 0) \
    c->x = f->x
#define FILL_D(x)                       \
    if (isnan(c->x) && !isnan(f->x)) \
    c->x = f->x
#define TAKE_I(x) \
    if (f->x >= 0) \
    c->x = f->x
#define TAKE_D(x)      \
    if (!isnan(f->x)) \
    c->x = f->x
    FILL_I(num_layers);
    FILL_I(hidden_size);
    FILL_I(num_heads);
    FILL_I(num_kv_heads);
    FILL_I(head_dim);
    FILL_I(ffn_hidden_size);
    FILL_I(vocab_size);
    FILL_D(norm_eps);
    FILL_D(rope_theta);
    FILL_D(rotary_percent);
    FILL_I(rope_interleaved);
    FILL_D(rope_scaling_factor);
    FILL_D(rope_low_freq_factor);
    FILL_D(rope_high_freq_factor);
    FILL_I(rope_original_max_positions);
    FILL_I(tied_embeddings);
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
    if (f->layer_window && f->num_layers > 0)
        return ckpt_model_builder_layer_window(b, f->layer_window, f->num_layers);
    return 0;
}

int ckpt_vsrc__family_config(ckpt_model_builder *b, const ckpt_family *f, const char *framework, const char *where,
                             const void *src, const ckpt_family_config **out)
{
    ckpt_family_config *fc = NULL;
    ckpt_model_config mc;
    int rc;

    if ((rc = ckpt_family_config_read(&fc, f, framework, where, src)) < 0)
        return rc;
    if ((rc = ckpt_model_builder_keep(b, fc, release_family_config)) < 0)
        return rc;
    if ((rc = ckpt_family_model_config(f, fc, &mc)) < 0 || (rc = overlay(b, &mc)) < 0)
        return rc;
    if (out)
        *out = fc;
    return 0;
}

const ckpt_family *ckpt_vsrc__data_family(const char *model_type)
{
    ckpt_hf_family i;

    if (!model_type || ckpt_hf_family_parse("", model_type, &i) < 0) {
        ckpt_error_clear();
        return NULL;
    }
    return i > CKPT_HF_QWEN2 ? ckpt_family_builtin_at((size_t)i) : NULL;
}
