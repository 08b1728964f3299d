/* The forward pass verify runs for a model of a family: the sizes from the config's
 * canonical fields, the math from the family's verify.features, a closed vocabulary whose
 * every word is math the verify backends have. */
#include "family_private.h"

#include <string.h>

static const char *feature(const ckpt_family *f, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f->verify, "features"), name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int flag(const ckpt_family *f, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f->verify, "features"), name));
}

static int word(const ckpt_family *f, const char *name, const char *const *words, int *out)
{
    const char *w = feature(f, name);
    int i;

    for (i = 0; w && words[i]; i++)
        if (strcmp(words[i], w) == 0) {
            *out = i;
            return 0;
        }
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "family %s: verify.features.%s %s is not one verify runs",
                           f->name, name, w ? w : "(none)");
}

int ckpt_family_model_config(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out)
{
    /* in the order of ckpt_norm_kind, ckpt_act_kind, ckpt_position_kind */
    static const char *const norms[] = { "rms", "layernorm", NULL };
    static const char *const acts[] = { "swiglu", "gelu", "gelu_tanh", "relu", "silu", NULL };
    static const char *const positions[] = { "rope", "learned", "none", NULL };
    const char *rope, *window;
    const ckpt_value *w;
    int rc;

    if (!f || !c || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_model_config: NULL argument");
    ckpt_model_config_unset(out);
    if ((rc = word(f, "norm", norms, &out->norm)) < 0 || (rc = word(f, "act", acts, &out->act)) < 0 ||
        (rc = word(f, "position", positions, &out->position)) < 0)
        return rc;
    /* a window the backends do not mask would be verified as full attention */
    window = feature(f, "window");
    if (window && (w = ckpt_family__get(c, window)) && w->kind == CKPT_VAL_INT && w->u.integer > 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: %s %lld: verify does not run sliding-window attention", c->where, window,
                               (long long)w->u.integer);
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
    if (rope && strcmp(rope, "llama3") == 0) {
        out->rope_scaling_factor = ckpt_family__real(c, "rope_factor", 1.0);
        out->rope_low_freq_factor = ckpt_family__real(c, "rope_low_freq_factor", 1.0);
        out->rope_high_freq_factor = ckpt_family__real(c, "rope_high_freq_factor", 4.0);
        out->rope_original_max_positions = ckpt_family__int(c, "rope_original_max_positions", 8192);
    }
    return 0;
}
