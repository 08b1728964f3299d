/* Megatron-LM args for a model of a family: megatron.args_out in Megatron's order (a pickled
 * Namespace keeps its order, so the order is part of the bytes), after refusing what
 * Megatron's args cannot say. */
#include "family_private.h"

#include <ckpt/megatron.h>

#include <math.h>
#include <string.h>

/* What Megatron-LM's llama3 scaling can say: only the factor is an argument. */
static int rope_fits(const ckpt_family_config *c)
{
    const char *type = ckpt_family__str(c, "rope");
    double low = ckpt_family__real(c, "rope_low_freq_factor", 0), high = ckpt_family__real(c, "rope_high_freq_factor", 0);
    int64_t original = ckpt_family__int(c, "rope_original_max_positions", 0);

    if (!type || strcmp(type, "llama3") != 0 || (low == 1.0 && high == 4.0 && original == 8192))
        return 0;
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                           "%s: llama3 RoPE scaling with low_freq_factor %g, high_freq_factor %g, "
                           "original_max_position_embeddings %lld: Megatron-LM applies it with 1, 4 and 8192 only",
                           c->where, low, high, (long long)original);
}

/* Each row's megatron_refuse, in row order. */
static int refusals(const ckpt_family *f, const ckpt_family_config *c)
{
    const cJSON *row;

    cJSON_ArrayForEach(row, f->config) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(row, "megatron_refuse"),
                    *name = cJSON_GetObjectItemCaseSensitive(row, "f"), *when, *says, *unless;
        if (!r || !cJSON_IsString(name))
            continue;
        when = cJSON_GetObjectItemCaseSensitive(r, "when");
        says = cJSON_GetObjectItemCaseSensitive(r, "says");
        unless = cJSON_GetObjectItemCaseSensitive(r, "unless");
        /* a number field Megatron can hold one value of only (DeepSeek-V3's rms_norm_eps) */
        if (cJSON_IsNumber(unless)) {
            const ckpt_value *v = ckpt_family__get(c, name->valuestring);
            double x = v && v->kind == CKPT_VAL_FLOAT ? v->u.real
                       : v && v->kind == CKPT_VAL_INT ? (double)v->u.integer
                                                      : unless->valuedouble;
            if (x != unless->valuedouble)
                return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s", c->where,
                                       cJSON_IsString(says) ? says->valuestring : name->valuestring);
            continue;
        }
        if ((ckpt_family__int(c, name->valuestring, 0) != 0) == cJSON_IsTrue(when))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s", c->where,
                                   cJSON_IsString(says) ? says->valuestring : name->valuestring);
    }
    return rope_fits(c);
}

/* megatron-core's moe_layer_freq from the field moe_layers: 1 when every layer is a MoE layer
 * (as Megatron-LM's default writes it), else the 0/1 list. */
static int moe_layer_freq(ckpt_arena *a, ckpt_value *args, const char *name, const ckpt_family_config *c)
{
    const ckpt_value *v = ckpt_family__get(c, "moe_layers");
    int64_t *flags;
    size_t i, all = 1;

    if (!v || v->kind != CKPT_VAL_LIST)
        return ckpt_megatron_args_set_int(a, args, name, 1);
    if (!(flags = ckpt_arena_alloc(a, (v->u.seq.n ? v->u.seq.n : 1) * sizeof *flags)))
        return ckpt_error_oom();
    for (i = 0; i < v->u.seq.n; i++) {
        flags[i] = v->u.seq.items[i]->kind == CKPT_VAL_INT && v->u.seq.items[i]->u.integer != 0;
        all &= flags[i] != 0;
    }
    return all ? ckpt_megatron_args_set_int(a, args, name, 1)
               : ckpt_megatron_args_set_int_list(a, args, name, flags, v->u.seq.n);
}

static int set_value(ckpt_arena *a, ckpt_value *args, const char *name, const ckpt_value *v)
{
    switch (v ? v->kind : CKPT_VAL_NONE) {
    case CKPT_VAL_INT: return ckpt_megatron_args_set_int(a, args, name, v->u.integer);
    case CKPT_VAL_FLOAT: return ckpt_megatron_args_set_float(a, args, name, v->u.real);
    case CKPT_VAL_BOOL: return ckpt_megatron_args_set_bool(a, args, name, v->u.boolean);
    case CKPT_VAL_STR: return ckpt_megatron_args_set_str(a, args, name, v->u.str.ptr);
    default: return ckpt_megatron_args_set_none(a, args, name);
    }
}

static ckpt_dtype dtype_of(const ckpt_family_config *c)
{
    const char *name = ckpt_family__str(c, "dtype");
    ckpt_dtype t = name ? ckpt_dtype_from_name(name) : CKPT_DTYPE_INVALID;
    return t == CKPT_DTYPE_INVALID ? CKPT_DTYPE_BF16 : t;
}

static int set_tokens(ckpt_arena *a, ckpt_value *args, const ckpt_family_config *c)
{
    static const char *const fields[] = { "bos_token_id", "eos_token_id", "pad_token_id" };
    static const char *const names[] = { "hf_bos_token_id", "hf_eos_token_id", "hf_pad_token_id" };
    int64_t ids[FAMILY_MAX_EOS_TOKENS];
    size_t i, j;
    int rc = 0;

    for (i = 0; i < 3 && rc == 0; i++) {
        const ckpt_value *v = ckpt_family__get(c, fields[i]);
        if (v && v->kind == CKPT_VAL_INT && v->u.integer >= 0) {
            rc = ckpt_megatron_args_set_int(a, args, names[i], v->u.integer);
        } else if (v && v->kind == CKPT_VAL_LIST && v->u.seq.n && v->u.seq.n <= FAMILY_MAX_EOS_TOKENS) {
            for (j = 0; j < v->u.seq.n; j++)
                ids[j] = v->u.seq.items[j]->kind == CKPT_VAL_INT ? v->u.seq.items[j]->u.integer : -1;
            rc = ckpt_megatron_args_set_int_list(a, args, names[i], ids, v->u.seq.n);
        }
    }
    return rc;
}

static int full_layer(const ckpt_value *v)
{
    return v->kind == CKPT_VAL_STR && strcmp(v->u.str.ptr, "full_attention") == 0;
}

int64_t ckpt_family__layer_every(const ckpt_family_config *c)
{
    const ckpt_value *types = ckpt_family__get(c, "attention_layers");
    int64_t n = types && types->kind == CKPT_VAL_LIST ? (int64_t)types->u.seq.n : 0, first = 0, every, i, k;

    while (first < n && !full_layer(types->u.seq.items[first]))
        first++;
    if (first == n)
        return 0;
    /* the only N the first full layer allows, or the config's own pattern */
    for (k = 0; k < 2; k++) {
        every = k == 0 ? ckpt_family__int(c, "window_pattern", 0) : first + 1;
        for (i = 0; every > 0 && i < n && full_layer(types->u.seq.items[i]) == ((i + 1) % every == 0); i++)
            ;
        if (every > 0 && i == n)
            return every;
    }
    return -1;
}

/* Megatron's window_attn_skip_freq from the layers' kinds (megatron-core's
 * is_layer_window_attention, layers numbered from 1): N where "every Nth layer full" says them,
 * else a list with 1 where the layer uses the window; None when every layer uses it. */
static int skip_freq(ckpt_arena *a, ckpt_value *args, const char *name, const ckpt_family_config *c)
{
    const ckpt_value *types = ckpt_family__get(c, "attention_layers");
    int64_t n = types && types->kind == CKPT_VAL_LIST ? (int64_t)types->u.seq.n : 0, every = ckpt_family__layer_every(c), i,
            *flags;

    if (every == 0)
        return ckpt_megatron_args_set_none(a, args, name);
    if (every > 0)
        return ckpt_megatron_args_set_int(a, args, name, every);
    if (!(flags = ckpt_arena_alloc(a, (size_t)n * sizeof *flags)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++)
        flags[i] = !full_layer(types->u.seq.items[i]);
    return ckpt_megatron_args_set_int_list(a, args, name, flags, (size_t)n);
}

static int generated(ckpt_arena *a, ckpt_value *args, const char *name, const char *gen, const ckpt_family *f,
                     const ckpt_family_config *c, int tp, const char *impl)
{
    const char *rope = ckpt_family__str(c, "rope");
    int llama3 = rope && strcmp(rope, "llama3") == 0;
    const ckpt_value *w;

    if (strcmp(gen, "$padded_vocab") == 0)
        return ckpt_megatron_args_set_int(a, args, name,
                                          ckpt_megatron_padded_vocab(ckpt_family__int(c, "vocab_size", 0), 128, tp));
    if (strcmp(gen, "$window_size") == 0) {
        w = ckpt_family__get(c, "sliding_window");
        return w && w->kind == CKPT_VAL_INT && w->u.integer > 0
                   ? ckpt_megatron_args_set_int_pair(a, args, name, w->u.integer - 1, 0)
                   : ckpt_megatron_args_set_none(a, args, name);
    }
    if (strcmp(gen, "$window_attn_skip_freq") == 0)
        return skip_freq(a, args, name, c);
    if (strcmp(gen, "$moe_layer_freq") == 0)
        return moe_layer_freq(a, args, name, c);
    if (strcmp(gen, "$softmax_scale") == 0)
        return ckpt_megatron_args_set_float(a, args, name, 1.0 / sqrt((double)ckpt_family__int(c, "query_pre_attn_scalar", 1)));
    if (strcmp(gen, "$use_rope_scaling") == 0)
        return ckpt_megatron_args_set_bool(a, args, name, llama3);
    if (strcmp(gen, "$rope_scaling_factor") == 0)
        return ckpt_megatron_args_set_float(a, args, name, llama3 ? ckpt_family__real(c, "rope_factor", 8.0) : 8.0);
    /* only a linearly scaled model has the arg, so that the args of one without are as before */
    if (strcmp(gen, "$rope_linear_factor") == 0)
        return rope && strcmp(rope, "linear") == 0
                   ? ckpt_megatron_args_set_float(a, args, name, ckpt_family__real(c, "rope_factor", 1.0))
                   : 0;
    if (strcmp(gen, "$token_ids") == 0)
        return set_tokens(a, args, c);
    if (strcmp(gen, "$dtype") == 0)
        return ckpt_megatron_args_set_dtype(a, args, name, dtype_of(c));
    if (strcmp(gen, "$bf16") == 0)
        return ckpt_megatron_args_set_bool(a, args, name, dtype_of(c) == CKPT_DTYPE_BF16);
    if (strcmp(gen, "$fp16") == 0)
        return ckpt_megatron_args_set_bool(a, args, name, dtype_of(c) == CKPT_DTYPE_F16);
    if (strcmp(gen, "$impl") == 0)
        return ckpt_megatron_args_set_str(a, args, name, impl);
    if (strcmp(gen, "$family") == 0)
        return ckpt_megatron_args_set_str(a, args, name, ckpt_family_string(f, "hf.model_type"));
    return ckpt_error_set(CKPT_EINVALID, "%s: megatron.args_out %s: unknown generator %s", f->name, name, gen);
}

static int one_arg(ckpt_arena *a, ckpt_value *args, const cJSON *pair, const ckpt_family *f,
                   const ckpt_family_config *c, int tp, const char *impl)
{
    const char *name = cJSON_GetArrayItem(pair, 0)->valuestring;
    const cJSON *src = cJSON_GetArrayItem(pair, 1);
    int64_t v;
    int is_bool, rc;

    if (cJSON_IsBool(src))
        return ckpt_megatron_args_set_bool(a, args, name, cJSON_IsTrue(src));
    if (cJSON_IsNumber(src))
        return ckpt_megatron_args_set_int(a, args, name, (int64_t)src->valuedouble);
    if (cJSON_IsObject(src) && cJSON_GetObjectItemCaseSensitive(src, "if")) {
        /* {"field": F, "if": [G, V]}: F's value where the string field G is V, else no arg */
        const cJSON *when = cJSON_GetObjectItemCaseSensitive(src, "if");
        const char *g = ckpt_family__str(c, cJSON_GetStringValue(cJSON_GetArrayItem(when, 0)));
        const char *want = cJSON_GetStringValue(cJSON_GetArrayItem(when, 1));
        const ckpt_value *x = ckpt_family__get(c, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(src, "field")));
        return g && want && strcmp(g, want) == 0 && x ? set_value(a, args, name, x) : 0;
    }
    if (cJSON_IsObject(src))
        return ckpt_megatron_args_set_float(a, args, name, cJSON_GetObjectItemCaseSensitive(src, "float")->valuedouble);
    if (!cJSON_IsString(src))
        return ckpt_megatron_args_set_none(a, args, name);
    if (src->valuestring[0] == '=')
        return ckpt_megatron_args_set_str(a, args, name, src->valuestring + 1);
    if (src->valuestring[0] == '$')
        return generated(a, args, name, src->valuestring, f, c, tp, impl);
    if (ckpt_family__get(c, src->valuestring))
        return set_value(a, args, name, ckpt_family__get(c, src->valuestring));
    if ((rc = ckpt_family__expr(f, c, src->valuestring, ckpt_family__where(f, c), &v, &is_bool, NULL)) < 0)
        return rc;
    return is_bool ? ckpt_megatron_args_set_bool(a, args, name, v != 0) : ckpt_megatron_args_set_int(a, args, name, v);
}

int ckpt_family_config_args(const ckpt_family *f, const ckpt_family_config *c, ckpt_arena *a, int tp, const char *impl,
                            ckpt_value **out)
{
    static const char *const sizes[] = { "hidden_size", "num_heads", "num_kv_heads", "head_dim", "num_layers",
                                         "ffn_size", "vocab_size" };
    const cJSON *pair;
    ckpt_value *args = NULL;
    size_t i;
    int rc;

    if (!f || !c || !a || !impl || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_config_args: NULL argument");
    *out = NULL;
    if (!f->megatron)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: family %s has no Megatron-LM args", c->where,
                               f->name);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (ckpt_family__int(c, sizes[i], 0) < 1)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                                   "%s: %s is not given or not positive (a %s config needs positive hidden_size, "
                                   "num_attention_heads, num_key_value_heads, head_dim, num_hidden_layers, "
                                   "intermediate_size and vocab_size)",
                                   ckpt_family__where(f, c), ckpt_family__key(f, CKPT_FAMILY_HF, sizes[i]), f->title);
    if ((rc = refusals(f, c)) < 0 || (rc = ckpt_megatron_args_new(a, &args)) < 0)
        return rc;
    cJSON_ArrayForEach(pair, cJSON_GetObjectItemCaseSensitive(f->megatron, "args_out"))
        if ((rc = one_arg(a, args, pair, f, c, tp, impl)) < 0)
            return rc;
    *out = args;
    return 0;
}
