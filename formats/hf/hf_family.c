/* The family of a Hugging Face config.json as hf.h has always said it (ckpt_hf_family, a
 * ckpt_hf_llama_dims), over the families of formats/families: llama, mistral and qwen2 are
 * their rows there, not code here. */
#include "hf_private.h"

#include <ckpt/sys/common.h>

#include <string.h>

const ckpt_family *ckpt_hf__family(ckpt_hf_family f)
{
    return (unsigned)f < ckpt_family_builtin_count() ? ckpt_family_builtin_at((size_t)f) : NULL;
}

const char *ckpt_hf_family_name(ckpt_hf_family f)
{
    return ckpt_family_string(ckpt_hf__family(f), "hf.model_type");
}

const char *ckpt_hf_family_title(ckpt_hf_family f)
{
    return ckpt_family_title(ckpt_hf__family(f));
}

int ckpt_hf_family_parse(const char *what, const char *name, ckpt_hf_family *out)
{
    size_t i;

    for (i = 0; i < ckpt_family_builtin_count(); i++)
        if (ckpt_hf_family_name((ckpt_hf_family)i) && strcmp(name, ckpt_hf_family_name((ckpt_hf_family)i)) == 0) {
            *out = (ckpt_hf_family)i;
            return 0;
        }
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: model_type %s is not one of %s", what, name,
                           ckpt_family_known());
}

/* ---- dims <-> family config ---- */

static int64_t get_int(const ckpt_family_config *c, const char *field, int64_t none)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0) {
        ckpt_error_clear();
        return none;
    }
    return v->kind == CKPT_VAL_INT ? v->u.integer : v->kind == CKPT_VAL_BOOL ? v->u.boolean != 0 : none;
}

static double get_real(const ckpt_family_config *c, const char *field, double none)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0) {
        ckpt_error_clear();
        return none;
    }
    return v->kind == CKPT_VAL_FLOAT ? v->u.real : v->kind == CKPT_VAL_INT ? (double)v->u.integer : none;
}

static const ckpt_value *get(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v = NULL;

    if (ckpt_family_config_get(c, field, &v) < 0)
        ckpt_error_clear();
    return v;
}

int ckpt_hf__dims_of(const ckpt_family_config *c, ckpt_hf_llama_dims *d)
{
    const ckpt_value *rope = get(c, "rope"), *dtype = get(c, "dtype"), *eos = get(c, "eos_token_id");
    ckpt_dtype t;
    size_t i;

    for (i = 0; i < ckpt_family_builtin_count() && ckpt_family_builtin_at(i) != ckpt_family_config_family(c); i++)
        ;
    d->family = (ckpt_hf_family)i;
    d->hidden_size = get_int(c, "hidden_size", 0);
    d->intermediate_size = get_int(c, "ffn_size", 0);
    d->num_layers = get_int(c, "num_layers", 0);
    d->num_heads = get_int(c, "num_heads", 0);
    d->num_kv_heads = get_int(c, "num_kv_heads", 0);
    d->head_dim = get_int(c, "head_dim", 0);
    d->vocab_size = get_int(c, "vocab_size", 0);
    d->max_positions = get_int(c, "max_positions", 0);
    d->rms_norm_eps = get_real(c, "norm_eps", d->rms_norm_eps);
    d->rope_theta = get_real(c, "rope_theta", d->rope_theta);
    d->initializer_range = get_real(c, "init_std", d->initializer_range);
    d->tied = get_int(c, "tied", 0) != 0;
    d->attention_bias = get_int(c, "attention_bias", 0) != 0;
    d->mlp_bias = get_int(c, "mlp_bias", 0) != 0;
    d->qkv_bias = get_int(c, "qkv_bias", 0) != 0 && !d->attention_bias;
    d->sliding_window = get_int(c, "sliding_window", 0);
    d->bos_token_id = get_int(c, "bos_token_id", -1);
    d->pad_token_id = get_int(c, "pad_token_id", -1);
    d->eos_token_id = get_int(c, "eos_token_id", -1);
    d->n_eos_token_list = 0;
    if (eos && eos->kind == CKPT_VAL_LIST)
        for (i = 0; i < eos->u.seq.n && i < CKPT_HF_MAX_EOS_TOKENS; i++)
            d->eos_token_list[d->n_eos_token_list++] = eos->u.seq.items[i]->u.integer;
    d->rope_factor = d->rope_low_freq_factor = d->rope_high_freq_factor = 0;
    d->rope_original_max_positions = 0;
    if (rope && rope->kind == CKPT_VAL_STR && strcmp(rope->u.str.ptr, "llama3") == 0) {
        d->rope_factor = get_real(c, "rope_factor", 0);
        d->rope_low_freq_factor = get_real(c, "rope_low_freq_factor", 0);
        d->rope_high_freq_factor = get_real(c, "rope_high_freq_factor", 0);
        d->rope_original_max_positions = get_int(c, "rope_original_max_positions", 0);
    }
    if (dtype && dtype->kind == CKPT_VAL_STR && (t = ckpt_dtype_from_name(dtype->u.str.ptr)) != CKPT_DTYPE_INVALID)
        d->dtype = t;
    return 0;
}

typedef struct setter {
    ckpt_family_config *c;
    ckpt_arena *a;
    int rc;
} setter;

static void set(setter *s, const char *field, ckpt_value *v)
{
    if (s->rc == 0)
        s->rc = v ? ckpt_family_config_set(s->c, field, v) : CKPT_ENOMEM;
}

static void set_id(setter *s, const char *field, int64_t id)
{
    set(s, field, id >= 0 ? ckpt_value_new_int(s->a, id) : ckpt_value_new(s->a, CKPT_VAL_NONE));
}

static void set_fields(setter *s, const ckpt_hf_llama_dims *d)
{
    ckpt_value *eos;
    int i;

    set(s, "hidden_size", ckpt_value_new_int(s->a, d->hidden_size));
    set(s, "ffn_size", ckpt_value_new_int(s->a, d->intermediate_size));
    set(s, "num_layers", ckpt_value_new_int(s->a, d->num_layers));
    set(s, "num_heads", ckpt_value_new_int(s->a, d->num_heads));
    set(s, "num_kv_heads", ckpt_value_new_int(s->a, d->num_kv_heads));
    set(s, "head_dim", ckpt_value_new_int(s->a, d->head_dim));
    set(s, "vocab_size", ckpt_value_new_int(s->a, d->vocab_size));
    set(s, "max_positions", ckpt_value_new_int(s->a, d->max_positions));
    set(s, "norm_eps", ckpt_value_new_float(s->a, d->rms_norm_eps));
    set(s, "rope_theta", ckpt_value_new_float(s->a, d->rope_theta));
    set(s, "init_std", ckpt_value_new_float(s->a, d->initializer_range));
    set(s, "tied", ckpt_value_new_bool(s->a, d->tied));
    set(s, "attention_bias", ckpt_value_new_bool(s->a, d->attention_bias));
    set(s, "mlp_bias", ckpt_value_new_bool(s->a, d->mlp_bias));
    set(s, "qkv_bias", ckpt_value_new_bool(s->a, d->qkv_bias || d->attention_bias));
    set(s, "sliding_window", d->sliding_window > 0 ? ckpt_value_new_int(s->a, d->sliding_window)
                                                   : ckpt_value_new(s->a, CKPT_VAL_NONE));
    set(s, "rope", ckpt_value_new_str(s->a, d->rope_factor ? "llama3" : "default", d->rope_factor ? 6 : 7));
    set(s, "rope_factor", ckpt_value_new_float(s->a, d->rope_factor));
    set(s, "rope_low_freq_factor", ckpt_value_new_float(s->a, d->rope_low_freq_factor));
    set(s, "rope_high_freq_factor", ckpt_value_new_float(s->a, d->rope_high_freq_factor));
    set(s, "rope_original_max_positions", ckpt_value_new_int(s->a, d->rope_original_max_positions));
    set(s, "dtype", ckpt_value_new_str(s->a, ckpt_dtype_name(d->dtype), strlen(ckpt_dtype_name(d->dtype))));
    set_id(s, "bos_token_id", d->bos_token_id);
    set_id(s, "pad_token_id", d->pad_token_id);
    if (d->n_eos_token_list > 0 && d->n_eos_token_list <= CKPT_HF_MAX_EOS_TOKENS) {
        eos = ckpt_value_new(s->a, CKPT_VAL_LIST);
        for (i = 0; eos && i < d->n_eos_token_list && s->rc == 0; i++)
            s->rc = ckpt_value_append(s->a, eos, ckpt_value_new_int(s->a, d->eos_token_list[i]));
        set(s, "eos_token_id", eos);
    } else {
        set_id(s, "eos_token_id", d->eos_token_id);
    }
}

int ckpt_hf__config_of(const ckpt_hf_llama_dims *d, const char *where, ckpt_family_config **out)
{
    const ckpt_family *f = ckpt_hf__family(d->family);
    setter s;

    *out = NULL;
    if (!f)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: the family is not one of %s", where,
                               ckpt_family_known());
    memset(&s, 0, sizeof s);
    if ((s.rc = ckpt_family_config_new(&s.c, f, where)) < 0)
        return s.rc;
    if ((s.rc = ckpt_arena_new(&s.a)) == 0)
        set_fields(&s, d);
    if (s.rc == 0)
        s.rc = ckpt_family_config_complete(s.c);
    ckpt_arena_free(s.a);
    if (s.rc < 0) {
        ckpt_family_config_free(s.c);
        return s.rc;
    }
    *out = s.c;
    return 0;
}

int ckpt_hf_config_describe(const char *path, ckpt_buf *out)
{
    ckpt_family_config *c = NULL;
    const ckpt_value *rope, *factor, *experts, *topk;
    ckpt_hf_llama_dims d;
    int rc = ckpt_hf_llama_dims_read(path, &d);

    if (rc < 0) {
        rc = ckpt_buf_printf(out, "not a model ckptconv converts: %s", ckpt_error_last()->message);
        ckpt_error_clear();
        return rc < 0 ? ckpt_error_oom() : 0;
    }
    ckpt_buf_printf(out, "Hugging Face %s (model_type %s): %lld layers, hidden %lld, %lld heads, %lld KV heads, vocab %lld",
                    ckpt_family_string(ckpt_hf__family(d.family), "hf.class"), ckpt_hf_family_name(d.family),
                    (long long)d.num_layers, (long long)d.hidden_size, (long long)d.num_heads,
                    (long long)d.num_kv_heads, (long long)d.vocab_size);
    if (d.qkv_bias || d.attention_bias)
        ckpt_buf_puts(out, ", q/k/v biases");
    if (d.rope_factor)
        ckpt_buf_printf(out, ", llama3 RoPE scaling x%g", d.rope_factor);
    if (ckpt_hf__config_read(path, &c) == 0 && ckpt_family_config_get(c, "rope", &rope) == 0 &&
        ckpt_value_is_str(rope, "linear") && ckpt_family_config_get(c, "rope_factor", &factor) == 0 &&
        factor->kind == CKPT_VAL_FLOAT)
        ckpt_buf_printf(out, ", linear RoPE scaling x%g%s", factor->u.real,
                        ckpt_family_config_get(c, "rope_local_theta", &rope) == 0 ? " (full-attention layers)" : "");
    if (c && ckpt_family_config_get(c, "num_experts", &experts) == 0 && experts->kind == CKPT_VAL_INT &&
        ckpt_family_config_get(c, "moe_topk", &topk) == 0 && topk->kind == CKPT_VAL_INT)
        ckpt_buf_printf(out, ", %lld experts (top %lld)", (long long)experts->u.integer, (long long)topk->u.integer);
    ckpt_family_config_free(c);
    ckpt_error_clear();
    if (d.sliding_window)
        ckpt_buf_printf(out, ", sliding window %lld", (long long)d.sliding_window);
    return out->data ? 0 : ckpt_error_oom();
}
