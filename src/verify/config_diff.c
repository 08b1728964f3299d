/* How two models' configs differ, field by field, in words for verify's notes: what the two
 * compute differently (the RoPE fields of a model without RoPE, the MoE fields of a dense one
 * are whatever its reader left there, and are not compared). */
#include "model_private.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static int differ(int (*say)(void *, const char *), void *payload, const char *fmt, ...) CKPT_FORMAT_PRINTF(3, 4);
static int differ(int (*say)(void *, const char *), void *payload, const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "the configs differ: ");
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    return say(payload, buf);
}

int ckpt_model__config_diff(const ckpt_model *a, const ckpt_model *b, int (*say)(void *, const char *), void *payload)
{
    const ckpt_model_config *x = &a->cfg, *y = &b->cfg;
    int rope = x->position == CKPT_POSITION_ROPE || y->position == CKPT_POSITION_ROPE, rc = 0;
    int64_t L;

#define DIFF_I(f)                                                                                       \
    if (rc == 0 && x->f != y->f)                                                                        \
    rc = differ(say, payload, "%s is %lld in A, %lld in B", #f, (long long)x->f, (long long)y->f)
#define DIFF_D(f)                                                                                       \
    if (rc == 0 && x->f != y->f && !(isnan(x->f) && isnan(y->f)))                                       \
    rc = differ(say, payload, "%s is %g in A, %g in B", #f, x->f, y->f)
    DIFF_I(num_layers);
    DIFF_I(num_heads);
    DIFF_I(num_kv_heads);
    DIFF_I(head_dim);
    DIFF_I(ffn_hidden_size);
    DIFF_I(vocab_size);
    DIFF_D(norm_eps);
    if (rope) {
        DIFF_D(rope_theta);
        DIFF_D(rotary_percent);
        DIFF_I(rope_interleaved);
        DIFF_D(rope_scaling_factor);
    }
    DIFF_I(norm);
    DIFF_I(norm_weight_plus_one);
    DIFF_I(act);
    DIFF_I(position);
    DIFF_I(qk_norm);
    DIFF_I(tied_embeddings);
    DIFF_I(window);
    if (rope) {
        DIFF_D(rope_theta_local);
        DIFF_D(rope_linear_factor);
    }
    DIFF_D(attn_scale);
    DIFF_D(embed_scale);
    DIFF_I(sandwich_norms);
    DIFF_I(num_experts);
    if (x->num_experts > 0 || y->num_experts > 0) {
        DIFF_I(moe_top_k);
        DIFF_I(moe_ffn_hidden_size);
        DIFF_I(moe_layer_freq);
        DIFF_I(moe_score);
        DIFF_D(moe_topk_scale);
        DIFF_I(moe_shared_ffn_hidden_size);
        DIFF_I(moe_first_dense);
        DIFF_I(moe_expert_bias);
        DIFF_I(moe_n_group);
        DIFF_I(moe_topk_group);
        DIFF_I(moe_group_top);
        DIFF_I(moe_topk_norm);
    }
    DIFF_I(kv_lora_rank);
    if (x->kv_lora_rank > 0 || y->kv_lora_rank > 0) {
        DIFF_I(q_lora_rank);
        DIFF_I(qk_nope_head_dim);
        DIFF_I(qk_rope_head_dim);
        DIFF_I(v_head_dim);
        DIFF_D(mla_norm_eps);
    }
    if (rope) {
        DIFF_D(rope_yarn_factor);
        DIFF_D(rope_attention_factor);
    }
    for (L = 0; rc == 0 && L < x->num_layers && L < y->num_layers; L++)
        if (ckpt_model__layer_windowed(a, L) != ckpt_model__layer_windowed(b, L)) {
            rc = differ(say, payload, "layer %lld uses the window in %s only", (long long)L,
                        ckpt_model__layer_windowed(a, L) ? "A" : "B");
            break;
        }
    for (L = 0; rc == 0 && L < x->num_layers && L < y->num_layers; L++)
        if (ckpt_model__layer_moe(a, L) != ckpt_model__layer_moe(b, L)) {
            rc = differ(say, payload, "layer %lld is a MoE layer in %s only", (long long)L,
                        ckpt_model__layer_moe(a, L) ? "A" : "B");
            break;
        }
#undef DIFF_I
#undef DIFF_D
    return rc;
}
