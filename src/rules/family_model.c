/* The forward pass verify runs for a model of a family: the sizes from the config's
 * canonical fields, the math from the family's verify.features, a closed vocabulary whose
 * every word is math the verify backends have. */
#include "family_private.h"

#include <math.h>
#include <string.h>

/* A feature's word, or where it is {"by": F, "true": W, "false": W'} the one bool field F of
 * c chooses (GPT-2's activation by openai_gelu). */
static const char *feature(const ckpt_family *f, const ckpt_family_config *c, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f->verify, "features"), name),
                *by = cJSON_GetObjectItemCaseSensitive(v, "by");

    if (cJSON_IsString(by))
        v = cJSON_GetObjectItemCaseSensitive(v, ckpt_family__int(c, by->valuestring, 0) ? "true" : "false");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int flag(const ckpt_family *f, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f->verify, "features"), name));
}

static int word(const ckpt_family *f, const ckpt_family_config *c, const char *name, const char *const *words,
                int *out)
{
    const char *w = feature(f, c, name);
    int i;

    for (i = 0; w && words[i]; i++)
        if (strcmp(words[i], w) == 0) {
            *out = i;
            return 0;
        }
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "family %s: verify.features.%s %s is not one verify runs",
                           f->name, name, w ? w : "(none)");
}

/* A feature naming a field of c: its value, NULL where the feature or the field is not there. */
static const ckpt_value *feature_field(const ckpt_family *f, const ckpt_family_config *c, const char *name)
{
    const char *field = feature(f, c, name);
    const ckpt_value *v = field ? ckpt_family__get(c, field) : NULL;
    return v && v->kind != CKPT_VAL_NONE ? v : NULL;
}

/* The sliding window (a field: none is no window), the layers that use it (a field of
 * layer_types strings; without one, every layer), the windowed layers' RoPE base, and the
 * scales and norms Gemma 3 adds. Only what the family says is set: the rest stays "not
 * given" for the model source to fill. */
static int window_features(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out)
{
    const ckpt_value *w = feature_field(f, c, "window"), *layers = feature_field(f, c, "layer_window"),
                     *local = feature_field(f, c, "rope_theta_local"), *attn = feature_field(f, c, "attn_scale");
    const char *embed = feature(f, c, "embed_scale");
    unsigned char *flags;
    size_t i;

    if (feature(f, c, "window")) {
        out->window = w && w->kind == CKPT_VAL_INT && w->u.integer > 0 ? w->u.integer : 0;
        out->window_full_every = 0;
    }
    if (layers && layers->kind == CKPT_VAL_LIST && out->window > 0) {
        if (!(flags = ckpt_arena_alloc(c->arena, layers->u.seq.n + 1)))
            return ckpt_error_oom();
        for (i = 0; i < layers->u.seq.n; i++)
            flags[i] = layers->u.seq.items[i]->kind == CKPT_VAL_STR &&
                       strcmp(layers->u.seq.items[i]->u.str.ptr, "sliding_attention") == 0;
        out->layer_window = flags;
    }
    if (local)
        out->rope_theta_local = local->kind == CKPT_VAL_FLOAT ? local->u.real : (double)local->u.integer;
    if (attn && attn->kind == CKPT_VAL_INT && attn->u.integer > 0)
        out->attn_scale = 1.0 / sqrt((double)attn->u.integer);
    if (embed && strcmp(embed, "sqrt_hidden_size") == 0)
        out->embed_scale = sqrt((double)ckpt_family__int(c, "hidden_size", 0));
    if (flag(f, "sandwich_norms"))
        out->sandwich_norms = 1;
    return 0;
}

static int64_t feature_int(const ckpt_family *f, const ckpt_family_config *c, const char *name)
{
    const ckpt_value *v = feature_field(f, c, name);
    return v && v->kind == CKPT_VAL_INT ? v->u.integer : -1;
}

/* Mixture of experts on every layer: the fields holding the expert count, the top-k and an
 * expert's FFN width, and the routing, a word or {"by": F, ...} as for the activation. */
static int moe_features(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out)
{
    /* in the order of ckpt_moe_score_kind */
    static const char *const scores[] = { "topk_softmax", "softmax_topk", "sigmoid", NULL };
    if (!feature(f, c, "moe_experts"))
        return 0;
    out->num_experts = feature_int(f, c, "moe_experts");
    out->moe_top_k = feature_int(f, c, "moe_top_k");
    out->moe_ffn_hidden_size = feature_int(f, c, "moe_ffn");
    out->moe_layer_freq = 1;
    out->moe_topk_scale = 1.0;
    out->moe_shared_ffn_hidden_size = 0;
    return word(f, c, "moe_score", scores, &out->moe_score);
}

int ckpt_family_model_config(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out)
{
    /* in the order of ckpt_norm_kind, ckpt_act_kind, ckpt_position_kind */
    static const char *const norms[] = { "rms", "layernorm", NULL };
    static const char *const acts[] = { "swiglu", "gelu", "gelu_tanh", "relu", "silu", "geglu_tanh", NULL };
    static const char *const positions[] = { "rope", "learned", "none", NULL };
    const char *rope;
    int rc;

    if (!f || !c || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_model_config: NULL argument");
    ckpt_model_config_unset(out);
    if ((rc = word(f, c, "norm", norms, &out->norm)) < 0 || (rc = word(f, c, "act", acts, &out->act)) < 0 ||
        (rc = word(f, c, "position", positions, &out->position)) < 0)
        return rc;
    if ((rc = window_features(f, c, out)) < 0 || (rc = moe_features(f, c, out)) < 0)
        return rc;
    out->norm_weight_plus_one = flag(f, "norm_plus_one");
    out->qk_norm = flag(f, "qk_norm");
    out->num_layers = ckpt_family__int(c, "num_layers", -1);
    out->hidden_size = ckpt_family__int(c, "hidden_size", -1);
    out->num_heads = ckpt_family__int(c, "num_heads", -1);
    out->num_kv_heads = ckpt_family__int(c, "num_kv_heads", out->num_heads);
    out->head_dim = ckpt_family__int(c, "head_dim", -1);
    out->ffn_hidden_size = ckpt_family__int(c, "ffn_size", -1);
    out->vocab_size = ckpt_family__int(c, "vocab_size", -1);
    out->norm_eps = ckpt_family__real(c, "norm_eps", out->norm_eps);
    out->tied_embeddings = ckpt_family__int(c, "tied", 0) != 0;
    out->rotary_percent = 1.0;
    out->rope_interleaved = 0;
    out->rope_theta = ckpt_family__real(c, "rope_theta", out->rope_theta);
    out->rope_scaling_factor = 1.0;
    rope = ckpt_family__str(c, "rope");
    /* linear scaling divides the positions of the layers of rope_theta (the windowed layers
     * of a family with a local base keep theirs unscaled) */
    out->rope_linear_factor = rope && strcmp(rope, "linear") == 0 ? ckpt_family__real(c, "rope_factor", 1.0) : 1.0;
    if (rope && strcmp(rope, "llama3") == 0) {
        out->rope_scaling_factor = ckpt_family__real(c, "rope_factor", 1.0);
        out->rope_low_freq_factor = ckpt_family__real(c, "rope_low_freq_factor", 1.0);
        out->rope_high_freq_factor = ckpt_family__real(c, "rope_high_freq_factor", 4.0);
        out->rope_original_max_positions = ckpt_family__int(c, "rope_original_max_positions", 8192);
    }
    if ((rc = ckpt_family__rope_features(f, c, out)) < 0)
        return rc;
    return ckpt_family__mla_features(f, c, out);
}
