/* A model's configuration once its source has read what the files say: the caller's
 * overrides on top, what the tensors themselves tell, the defaults both LLaMA and Megatron
 * use, and an error naming every value that is still missing. */
#include "model_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SET_INT(dst, src) ((src) >= 0 ? ((dst) = (src), 1) : 0)
#define SET_DBL(dst, src) (!isnan(src) ? ((dst) = (src), 1) : 0)

static int apply_overrides(ckpt_model *m, const ckpt_model_config *o)
{
    ckpt_model_config *c = &m->cfg;
    int n = 0, rc;

    n += SET_INT(c->num_layers, o->num_layers);
    n += SET_INT(c->hidden_size, o->hidden_size);
    n += SET_INT(c->num_heads, o->num_heads);
    n += SET_INT(c->num_kv_heads, o->num_kv_heads);
    n += SET_INT(c->head_dim, o->head_dim);
    n += SET_INT(c->ffn_hidden_size, o->ffn_hidden_size);
    n += SET_INT(c->vocab_size, o->vocab_size);
    n += SET_DBL(c->norm_eps, o->norm_eps);
    n += SET_DBL(c->rope_theta, o->rope_theta);
    n += SET_DBL(c->rotary_percent, o->rotary_percent);
    n += SET_INT(c->rope_interleaved, o->rope_interleaved);
    n += SET_DBL(c->rope_scaling_factor, o->rope_scaling_factor);
    n += SET_DBL(c->rope_low_freq_factor, o->rope_low_freq_factor);
    n += SET_DBL(c->rope_high_freq_factor, o->rope_high_freq_factor);
    n += SET_INT(c->rope_original_max_positions, o->rope_original_max_positions);
    n += SET_INT(c->norm, o->norm);
    n += SET_INT(c->norm_weight_plus_one, o->norm_weight_plus_one);
    n += SET_INT(c->act, o->act);
    n += SET_INT(c->position, o->position);
    n += SET_INT(c->qk_norm, o->qk_norm);
    n += SET_INT(c->tied_embeddings, o->tied_embeddings);
    n += SET_INT(c->window, o->window);
    n += SET_INT(c->window_full_every, o->window_full_every);
    n += SET_DBL(c->rope_theta_local, o->rope_theta_local);
    n += SET_DBL(c->rope_linear_factor, o->rope_linear_factor);
    n += SET_DBL(c->attn_scale, o->attn_scale);
    n += SET_DBL(c->embed_scale, o->embed_scale);
    n += SET_INT(c->sandwich_norms, o->sandwich_norms);
    n += SET_INT(c->num_experts, o->num_experts);
    n += SET_INT(c->moe_top_k, o->moe_top_k);
    n += SET_INT(c->moe_ffn_hidden_size, o->moe_ffn_hidden_size);
    n += SET_INT(c->moe_layer_freq, o->moe_layer_freq);
    n += SET_INT(c->moe_score, o->moe_score);
    n += SET_DBL(c->moe_topk_scale, o->moe_topk_scale);
    n += SET_INT(c->moe_shared_ffn_hidden_size, o->moe_shared_ffn_hidden_size);
    n += SET_INT(c->q_lora_rank, o->q_lora_rank);
    n += SET_INT(c->kv_lora_rank, o->kv_lora_rank);
    n += SET_INT(c->qk_nope_head_dim, o->qk_nope_head_dim);
    n += SET_INT(c->qk_rope_head_dim, o->qk_rope_head_dim);
    n += SET_INT(c->v_head_dim, o->v_head_dim);
    n += SET_DBL(c->mla_norm_eps, o->mla_norm_eps);
    n += SET_DBL(c->rope_yarn_factor, o->rope_yarn_factor);
    n += SET_DBL(c->rope_yarn_beta_fast, o->rope_yarn_beta_fast);
    n += SET_DBL(c->rope_yarn_beta_slow, o->rope_yarn_beta_slow);
    n += SET_DBL(c->rope_yarn_mscale, o->rope_yarn_mscale);
    n += SET_DBL(c->rope_yarn_mscale_all_dim, o->rope_yarn_mscale_all_dim);
    n += SET_DBL(c->rope_attention_factor, o->rope_attention_factor);
    n += SET_INT(c->rope_yarn_truncate, o->rope_yarn_truncate);
    n += SET_INT(c->moe_first_dense, o->moe_first_dense);
    n += SET_INT(c->moe_expert_bias, o->moe_expert_bias);
    n += SET_INT(c->moe_n_group, o->moe_n_group);
    n += SET_INT(c->moe_topk_group, o->moe_topk_group);
    n += SET_INT(c->moe_group_top, o->moe_group_top);
    n += SET_INT(c->moe_topk_norm, o->moe_topk_norm);
    if (o->layer_window) {
        /* the caller's flags are for the layers the config (or its override) counts */
        if (c->num_layers < 1)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                                   "%s: per-layer window flags given, but not the number of layers", m->path);
        if ((rc = ckpt_model__set_layer_window(m, o->layer_window, c->num_layers)) < 0)
            return rc;
        n++;
    }
    if (o->layer_moe) {
        if (c->num_layers < 1)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                                   "%s: per-layer MoE flags given, but not the number of layers", m->path);
        if ((rc = ckpt_model__set_layer_moe(m, o->layer_moe, c->num_layers)) < 0)
            return rc;
        n++;
    }
    if (n)
        ckpt_model__note(m, "%d configuration value%s given by the caller", n, n == 1 ? "" : "s");
    return 0;
}

/* An expert's MLP size from the first layer holding expert 0, summed over the ranks. */
static void infer_moe_ffn(ckpt_model *m)
{
    ckpt_model_config *c = &m->cfg;
    char name[128];
    int64_t ffn = 0;
    const ckpt_node *x;
    size_t i;
    int r;

    for (i = 0; i < m->n_layers && c->moe_ffn_hidden_size < 0 && ffn == 0; i++) {
        snprintf(name, sizeof name, "layers.%lld.moe.experts.0.fc2.weight", (long long)m->layers[i]);
        for (r = 0; r < m->ranks; r++)
            if ((x = ckpt_model__find(m, r, name)) && ckpt_node_ndim(x) == 2)
                ffn += ckpt_node_shape(x)[1];
    }
    if (c->moe_ffn_hidden_size < 0 && ffn > 0)
        c->moe_ffn_hidden_size = ffn;
}

/* What the tensors say about values the files left out: q/k norms and sandwich norms are
 * there when their weights are. */
static void infer_from_tensors(ckpt_model *m)
{
    ckpt_model_config *c = &m->cfg;
    char name[96];
    int64_t first = m->n_layers ? m->layers[0] : -1, ffn = 0;
    const ckpt_node *x;
    int r;

    if (c->hidden_size < 0 && m->embed && ckpt_node_ndim(m->embed) == 2)
        c->hidden_size = ckpt_node_shape(m->embed)[1];
    if (first < 0)
        return;
    snprintf(name, sizeof name, "layers.%lld.attn.q_norm.weight", (long long)first);
    if (c->qk_norm < 0)
        c->qk_norm = ckpt_model__find(m, 0, name) != NULL;
    snprintf(name, sizeof name, "layers.%lld.attn_post_norm.weight", (long long)first);
    if (c->sandwich_norms < 0)
        c->sandwich_norms = ckpt_model__find(m, 0, name) != NULL;
    snprintf(name, sizeof name, "layers.%lld.attn_norm.weight", (long long)first);
    if (c->hidden_size < 0 && (x = ckpt_model__find(m, 0, name)) && ckpt_node_ndim(x) == 1)
        c->hidden_size = ckpt_node_shape(x)[0];
    snprintf(name, sizeof name, "layers.%lld.mlp.fc2.weight", (long long)first);
    for (r = 0; r < m->ranks; r++)
        if ((x = ckpt_model__find(m, r, name)) && ckpt_node_ndim(x) == 2)
            ffn += ckpt_node_shape(x)[1];
    if (c->ffn_hidden_size < 0 && ffn > 0)
        c->ffn_hidden_size = ffn;
    snprintf(name, sizeof name, "layers.%lld.attn.q.weight", (long long)first);
    if ((x = ckpt_model__find(m, 0, name)))
        m->dtype = ckpt_node_dtype(x);
    snprintf(name, sizeof name, "layers.%lld.attn.q_up.weight", (long long)first);
    if ((x = ckpt_model__find(m, 0, name)))
        m->dtype = ckpt_node_dtype(x);
    infer_moe_ffn(m);
}

/* YaRN's magnitude correction of a factor (transformers' get_mscale, Megatron's _yarn_get_mscale). */
static double yarn_mscale(double factor, double mscale)
{
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

/* MLA's head sizes, YaRN's parameters and the softmax scale they give: (qk_nope + qk_rope)^-0.5,
 * times the square of YaRN's mscale of mscale_all_dim (transformers' DeepseekV3Attention,
 * Megatron's MLA softmax_scale). */
static void mla_yarn_defaults(ckpt_model *m)
{
    ckpt_model_config *c = &m->cfg;
    int yarn;

    if (c->kv_lora_rank < 0)
        c->kv_lora_rank = 0;
    if (c->kv_lora_rank > 0) {
        if (c->q_lora_rank < 0)
            c->q_lora_rank = 0;
        if (c->head_dim < 0 && c->qk_nope_head_dim >= 0 && c->qk_rope_head_dim > 0)
            c->head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
        if (isnan(c->mla_norm_eps))
            c->mla_norm_eps = c->norm_eps;
    } else {
        c->q_lora_rank = c->qk_nope_head_dim = c->qk_rope_head_dim = c->v_head_dim = 0;
        if (isnan(c->mla_norm_eps))
            c->mla_norm_eps = 0.0;
    }
    if (isnan(c->rope_yarn_factor))
        c->rope_yarn_factor = 1.0;
    yarn = c->rope_yarn_factor != 1.0;
    if (isnan(c->rope_yarn_beta_fast))
        c->rope_yarn_beta_fast = 32.0;
    if (isnan(c->rope_yarn_beta_slow))
        c->rope_yarn_beta_slow = 1.0;
    if (isnan(c->rope_yarn_mscale))
        c->rope_yarn_mscale = 0.0;
    if (isnan(c->rope_yarn_mscale_all_dim))
        c->rope_yarn_mscale_all_dim = 0.0;
    if (c->rope_yarn_truncate < 0)
        c->rope_yarn_truncate = 1;
    if (isnan(c->rope_attention_factor)) {
        if (!yarn)
            c->rope_attention_factor = 1.0;
        else if (c->rope_yarn_mscale != 0.0 && c->rope_yarn_mscale_all_dim != 0.0)
            c->rope_attention_factor = yarn_mscale(c->rope_yarn_factor, c->rope_yarn_mscale) /
                                       yarn_mscale(c->rope_yarn_factor, c->rope_yarn_mscale_all_dim);
        else
            c->rope_attention_factor = yarn_mscale(c->rope_yarn_factor, 1.0);
    }
    if (isnan(c->attn_scale) && c->head_dim > 0 && yarn && c->rope_yarn_mscale_all_dim != 0.0) {
        double s = yarn_mscale(c->rope_yarn_factor, c->rope_yarn_mscale_all_dim);
        c->attn_scale = s * s / sqrt((double)c->head_dim);
    }
}

static void defaults(ckpt_model *m)
{
    ckpt_model_config *c = &m->cfg;

    mla_yarn_defaults(m);

    if (c->num_kv_heads < 0 && c->num_heads > 0)
        c->num_kv_heads = c->num_heads;
    if (c->head_dim < 0 && c->num_heads > 0 && c->hidden_size > 0 && c->hidden_size % c->num_heads == 0)
        c->head_dim = c->hidden_size / c->num_heads;
    if (c->vocab_size < 0 && m->embed) {
        c->vocab_size = ckpt_node_shape(m->embed)[0];
        ckpt_model__note(m, "the vocabulary size is not given: all %lld rows of the embedding count",
                         (long long)c->vocab_size);
    }
    if (c->position == CKPT_POSITION_ROPE && isnan(c->rope_theta)) {
        c->rope_theta = 10000.0;
        ckpt_model__note(m, "the RoPE base is not given: 10000 (LLaMA's and Megatron's default)");
    }
    if (isnan(c->rotary_percent))
        c->rotary_percent = 1.0;
    if (c->rope_interleaved < 0)
        c->rope_interleaved = 0;
    if (isnan(c->rope_scaling_factor))
        c->rope_scaling_factor = 1.0;
    if (c->norm_weight_plus_one < 0)
        c->norm_weight_plus_one = 0;
    if (c->qk_norm < 0)
        c->qk_norm = 0;
    if (c->tied_embeddings < 0)
        c->tied_embeddings = !m->output && m->embed && m->final_w;
    if (c->num_layers < 0)
        c->num_layers = (int64_t)m->n_layers;
    if (c->window < 0)
        c->window = 0;
    if (c->window_full_every < 0)
        c->window_full_every = 0;
    if (isnan(c->rope_linear_factor))
        c->rope_linear_factor = 1.0;
    if (isnan(c->attn_scale) && c->head_dim > 0)
        c->attn_scale = 1.0 / sqrt((double)c->head_dim);
    if (isnan(c->embed_scale))
        c->embed_scale = 0.0;
    if (c->sandwich_norms < 0)
        c->sandwich_norms = 0;
    if (c->num_experts < 0)
        c->num_experts = 0;
    if (c->moe_layer_freq < 0)
        c->moe_layer_freq = 1;
    if (c->moe_score < 0)
        c->moe_score = CKPT_MOE_SOFTMAX_TOPK;
    if (isnan(c->moe_topk_scale))
        c->moe_topk_scale = 1.0;
    if (c->moe_shared_ffn_hidden_size < 0)
        c->moe_shared_ffn_hidden_size = 0;
    if (c->moe_first_dense < 0)
        c->moe_first_dense = 0;
    if (c->moe_expert_bias < 0)
        c->moe_expert_bias = 0;
    if (c->moe_n_group < 0)
        c->moe_n_group = 1;
    if (c->moe_topk_group < 0)
        c->moe_topk_group = c->moe_n_group;
    if (c->moe_topk_norm < 0)
        c->moe_topk_norm = 1;
    if (c->moe_group_top < 0)
        c->moe_group_top = 2;
}

static int missing(const ckpt_model *m)
{
    const ckpt_model_config *c = &m->cfg;
    char list[512] = "";
    size_t n = 0;

#define MISSING(cond, name) \
    if (cond)               \
        n += (size_t)snprintf(list + n, n < sizeof list ? sizeof list - n : 0, "%s%s", n ? ", " : "", name)
    MISSING(c->hidden_size < 0, "hidden_size");
    MISSING(c->num_heads < 0, "num_heads");
    MISSING(c->head_dim < 0 && c->num_heads >= 0, "head_dim");
    MISSING(c->ffn_hidden_size < 0, "ffn_hidden_size");
    MISSING(isnan(c->norm_eps), "norm_eps");
    MISSING(c->norm < 0, "norm");
    MISSING(c->act < 0, "act");
    MISSING(c->position < 0, "position");
    MISSING(c->num_experts > 0 && c->moe_top_k < 0, "moe_top_k");
    MISSING(c->num_experts > 0 && c->moe_ffn_hidden_size < 0, "moe_ffn_hidden_size");
    MISSING(c->kv_lora_rank > 0 && c->qk_nope_head_dim < 0, "qk_nope_head_dim");
    MISSING(c->kv_lora_rank > 0 && c->qk_rope_head_dim < 0, "qk_rope_head_dim");
    MISSING(c->kv_lora_rank > 0 && c->v_head_dim < 0, "v_head_dim");
    MISSING(c->rope_yarn_factor != 1.0 && c->rope_original_max_positions <= 0, "rope_original_max_positions");
#undef MISSING
    if (!n)
        return 0;
    return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                           "%s: the model's %s %s not given by %s; give %s as an override", m->path, list,
                           strchr(list, ',') ? "are" : "is", m->config_source[0] ? m->config_source : "its files",
                           strchr(list, ',') ? "them" : "it");
}

static int check(const ckpt_model *m)
{
    const ckpt_model_config *c = &m->cfg;
    double rotary = (double)c->head_dim * c->rotary_percent;

    if (c->num_heads <= 0 || c->num_kv_heads <= 0 || c->num_heads % c->num_kv_heads)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "%s: %lld attention heads do not share %lld KV heads evenly", m->path,
                               (long long)c->num_heads, (long long)c->num_kv_heads);
    if (c->norm > CKPT_NORM_LAYER || c->act > CKPT_ACT_GEGLU_TANH || c->position > CKPT_POSITION_NONE)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: unknown norm, activation or position kind",
                               m->path);
    if (c->position == CKPT_POSITION_ROPE && (rotary != (double)(int64_t)rotary || (int64_t)rotary % 2 ||
                                              rotary <= 0))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "%s: RoPE over %g of head_dim %lld is not an even number of values", m->path,
                               c->rotary_percent, (long long)c->head_dim);
    if (c->position == CKPT_POSITION_ROPE && c->rope_scaling_factor != 1.0 &&
        (isnan(c->rope_low_freq_factor) || isnan(c->rope_high_freq_factor) || c->rope_original_max_positions <= 0 ||
         c->rope_high_freq_factor <= c->rope_low_freq_factor))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                               "%s: RoPE scaling by %g needs rope_low_freq_factor < rope_high_freq_factor and "
                               "rope_original_max_positions",
                               m->path, c->rope_scaling_factor);
    if (c->window < 0 || c->window_full_every < 0 || !(c->rope_linear_factor > 0) || !(c->attn_scale > 0) ||
        !(c->embed_scale >= 0) || (!isnan(c->rope_theta_local) && !(c->rope_theta_local > 0)))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "%s: window %lld, full attention every %lld layers, RoPE linear factor %g, local base %g, "
                               "attention scale %g or embedding scale %g out of range",
                               m->path, (long long)c->window, (long long)c->window_full_every, c->rope_linear_factor,
                               c->rope_theta_local, c->attn_scale, c->embed_scale);
    if (c->num_experts > 0 && (c->moe_top_k < 1 || c->moe_top_k > c->num_experts || c->num_experts > (1 << 16) ||
                               c->moe_layer_freq < 1 || c->moe_score > CKPT_MOE_SIGMOID ||
                               !(c->moe_topk_scale > 0) || c->moe_ffn_hidden_size < 1))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "%s: %lld experts, top %lld, every %lld layers, score kind %d, scale %g or expert MLP %lld "
                               "out of range",
                               m->path, (long long)c->num_experts, (long long)c->moe_top_k, (long long)c->moe_layer_freq,
                               c->moe_score, c->moe_topk_scale, (long long)c->moe_ffn_hidden_size);
    if (c->num_experts > 0 && (c->moe_first_dense < 0 || c->moe_n_group < 1 || c->num_experts % c->moe_n_group ||
                               (c->moe_topk_group < c->moe_n_group && (c->moe_group_top < 1 ||
                                                       c->num_experts / c->moe_n_group < c->moe_group_top)) ||
                               c->moe_topk_group < 1 ||
                               c->moe_topk_group > c->moe_n_group ||
                               c->moe_top_k > c->moe_topk_group * (c->num_experts / c->moe_n_group)))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "%s: %lld experts in %lld groups, the best %lld groups, top %lld, first MoE layer %lld "
                               "out of range",
                               m->path, (long long)c->num_experts, (long long)c->moe_n_group,
                               (long long)c->moe_topk_group, (long long)c->moe_top_k, (long long)c->moe_first_dense);
    if (c->num_experts > 0 && (c->moe_expert_bias || c->moe_n_group > 1) && c->moe_score != CKPT_MOE_SIGMOID)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: an expert bias or group-limited routing with scores other than sigmoid is not "
                               "run by verify",
                               m->path);
    if (c->kv_lora_rank > 0 &&
        (c->q_lora_rank < 0 || c->qk_nope_head_dim < 0 || c->qk_rope_head_dim <= 0 || c->qk_rope_head_dim % 2 ||
         c->v_head_dim <= 0 || c->head_dim != c->qk_nope_head_dim + c->qk_rope_head_dim ||
         c->num_kv_heads != c->num_heads || c->qk_norm || !(c->mla_norm_eps >= 0) || c->rotary_percent != 1.0))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "%s: MLA with q_lora_rank %lld, qk_nope_head_dim %lld, qk_rope_head_dim %lld (even), "
                               "v_head_dim %lld, head_dim %lld (their sum), %lld heads of %lld KV heads (as many), "
                               "no q/k norm, RoPE on all of qk_rope: a value out of range",
                               m->path, (long long)c->q_lora_rank, (long long)c->qk_nope_head_dim,
                               (long long)c->qk_rope_head_dim, (long long)c->v_head_dim, (long long)c->head_dim,
                               (long long)c->num_heads, (long long)c->num_kv_heads);
    if (c->rope_yarn_factor != 1.0 &&
        (c->position != CKPT_POSITION_ROPE || !(c->rope_yarn_factor > 1.0) || c->rope_scaling_factor != 1.0 ||
         c->rope_linear_factor != 1.0 || !(c->rope_yarn_beta_fast > 0) || !(c->rope_yarn_beta_slow > 0) ||
         !(c->rope_attention_factor > 0) || c->rope_yarn_mscale < 0 || c->rope_yarn_mscale_all_dim < 0))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "%s: YaRN RoPE with factor %g (> 1, no other scaling), beta_fast %g, beta_slow %g, "
                               "mscale %g, mscale_all_dim %g, attention factor %g: a value out of range",
                               m->path, c->rope_yarn_factor, c->rope_yarn_beta_fast, c->rope_yarn_beta_slow,
                               c->rope_yarn_mscale, c->rope_yarn_mscale_all_dim, c->rope_attention_factor);
    if (c->layer_window && m->n_layer_window != c->num_layers)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: window flags for %lld layers, but %lld layers",
                               m->path, (long long)m->n_layer_window, (long long)c->num_layers);
    if (c->layer_moe && m->n_layer_moe != c->num_layers)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: MoE layer flags for %lld layers, but %lld layers",
                               m->path, (long long)m->n_layer_moe, (long long)c->num_layers);
    if (c->position == CKPT_POSITION_LEARNED && m->embed && !m->pos_embed)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: learned position embeddings, but no position table beside the word embeddings",
                               m->path);
    return 0;
}

int ckpt_model__layer_windowed(const ckpt_model *m, int64_t L)
{
    const ckpt_model_config *c = &m->cfg;

    if (c->window <= 0)
        return 0;
    if (c->layer_window)
        return L >= 0 && L < m->n_layer_window && c->layer_window[L];
    return c->window_full_every <= 0 || (L + 1) % c->window_full_every != 0;
}

int ckpt_model__layer_moe(const ckpt_model *m, int64_t L)
{
    if (m->cfg.num_experts <= 0)
        return 0;
    if (m->cfg.layer_moe)
        return L >= 0 && L < m->n_layer_moe && m->cfg.layer_moe[L];
    return L >= m->cfg.moe_first_dense && L % m->cfg.moe_layer_freq == 0;
}

int ckpt_model__finish_config(ckpt_model *m, const ckpt_model_config *overrides)
{
    int rc;

    if ((rc = apply_overrides(m, overrides)) < 0)
        return rc;
    infer_from_tensors(m);
    defaults(m);
    if ((rc = missing(m)) < 0 || (rc = check(m)) < 0)
        return rc;
    if (!m->n_layers && !m->embed && !m->output)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: no decoder layers and no embeddings", m->path);
    return 0;
}
