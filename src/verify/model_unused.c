/* Every tensor a model holds must be one its config runs: a q/k norm of a model without one,
 * a norm bias under RMSNorm or a layer past the last would otherwise be read by nobody, and
 * verify would pass a checkpoint whose extra tensors a framework would load (or refuse). */
#include "model_private.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <string.h>

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Why the config does not run `name` (layer `layer`, -1 for model-level), or NULL. */
static const char *unused_because(const ckpt_model *m, const char *name, int64_t layer)
{
    const ckpt_model_config *c = &m->cfg;

    if (layer >= c->num_layers)
        return "a layer past the model's num_layers";
    if (!c->qk_norm && (strstr(name, ".attn.q_norm.") || strstr(name, ".attn.k_norm.")))
        return "the model has no q/k norm";
    if (!c->sandwich_norms && (strstr(name, ".attn_post_norm.") || strstr(name, ".mlp_post_norm.")))
        return "the model has no post-attention/post-MLP norms";
    if (c->norm != CKPT_NORM_LAYER && has_suffix(name, "norm.bias"))
        return "RMSNorm has no bias";
    if (strstr(name, ".moe.") && !ckpt_model__layer_moe(m, layer))
        return c->num_experts == 0        ? "the model has no experts (num_experts 0)"
               : layer < c->moe_first_dense ? "a dense layer before the first MoE layer"
               : c->layer_moe               ? "a dense layer by the config's list of MoE layers"
                                           : "a dense layer by moe_layer_freq";
    if (has_suffix(name, ".moe.router.expert_bias") && !c->moe_expert_bias)
        return "the model's router has no expert bias";
    if (c->kv_lora_rank == 0 && (strstr(name, ".attn.q_down") || strstr(name, ".attn.q_up.") ||
                                 strstr(name, ".attn.kv_")))
        return "the model has no latent attention (kv_lora_rank 0)";
    if (c->kv_lora_rank > 0 && (strstr(name, ".attn.k.") || strstr(name, ".attn.v.") || strstr(name, ".attn.q.bias")))
        return "latent attention has kv_down and kv_up instead";
    if (c->kv_lora_rank > 0 && c->q_lora_rank == 0 && (strstr(name, ".attn.q_down") || strstr(name, ".attn.q_up.")))
        return "the model's q has no down projection (q_lora_rank 0)";
    if (c->kv_lora_rank > 0 && c->q_lora_rank > 0 && strstr(name, ".attn.q.weight"))
        return "the model's q is q_up of q_down (q_lora_rank > 0)";
    if (strstr(name, ".moe.shared.") && c->moe_shared_ffn_hidden_size == 0)
        return "the model has no shared expert";
    if (ckpt_model__expert_of(name) >= c->num_experts)
        return "an expert past the model's num_experts";
    if (ckpt_model__layer_moe(m, layer) && strstr(name, ".mlp.fc"))
        return "a MoE layer's MLP is its experts";
    if (c->position != CKPT_POSITION_LEARNED && strcmp(name, "pos_embed.weight") == 0)
        return "the model has no learned position embeddings";
    return NULL;
}

int ckpt_model__check_unused(const ckpt_model *m)
{
    char list[768] = "";
    const char *why = NULL, *first = NULL;
    size_t n = 0, count = 0, i;
    int r;

    for (r = 0; r < m->ranks; r++)
        for (i = 0; i < m->rank[r].n; i++) {
            const char *name = m->rank[r].t[i].name, *because;
            int64_t layer = ckpt_model__canonical_layer(name);
            if (!(because = unused_because(m, name, layer)))
                continue;
            /* one name per tensor: the ranks hold the same ones */
            if (r > 0 && ckpt_model__find(m, 0, name))
                continue;
            if (!why) {
                why = because;
                first = name;
            }
            if (count++ < 8)
                n += (size_t)snprintf(list + n, n < sizeof list ? sizeof list - n : 0, "%s%s", count > 1 ? ", " : "",
                                      name);
        }
    if (!count)
        return 0;
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                           "%s: %zu tensor%s the model does not use: %s%s (%s: %s)", m->path, count,
                           count == 1 ? "" : "s", list, count > 8 ? ", ..." : "", first, why);
}
