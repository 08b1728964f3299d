/* The `$` generators of family rows: the config shapes a plain typed row cannot say (a RoPE
 * description, token ids that may be a list, a dtype name, per-layer attention kinds, and
 * their Megatron args), one function each. A new family costs C here only where its config
 * has a shape no family had. */
#include "family_private.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- RoPE ---- */

typedef struct rope {
    const char *type;
    double factor, low, high;
    int64_t original;
} rope;

/* A number of a RoPE description: finite, at least lo (above lo where `above`). */
static int rope_number(const family_read *r, const cJSON *j, const char *where, const char *type, const char *name,
                       double lo, int above, double *out)
{
    const cJSON *v = ckpt_family__field(j, name);

    if (!v)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s.%s is missing (rope_type %s)", r->where, where,
                               name, type);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || (above && v->valuedouble == lo) ||
        v->valuedouble > 1e300)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s.%s is not a number %s %g (rope_type %s)",
                               r->where, where, name, above ? ">" : ">=", lo, type);
    *out = v->valuedouble;
    return 0;
}

static void join(const cJSON *list, char *buf, size_t cap)
{
    const cJSON *t;
    size_t n = 0;

    buf[0] = 0;
    cJSON_ArrayForEach(t, list)
        if (cJSON_IsString(t) && n < cap)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", t->valuestring);
}

static int parse_rope(const family_read *r, const cJSON *row, const cJSON *j, const char *where, rope *out)
{
    static const char *const keys[] = { "rope_type", "type", "rope_theta", "factor", "low_freq_factor",
                                        "high_freq_factor", "original_max_position_embeddings" };
    const cJSON *type = ckpt_family__field(j, "rope_type"), *c, *types = cJSON_GetObjectItemCaseSensitive(row, "rope_types");
    char known[256];
    size_t i;
    int rc, ok = 0;

    memset(out, 0, sizeof *out);
    out->type = "default";
    join(types, known, sizeof known);
    if (!type)
        type = ckpt_family__field(j, "type");
    if (!cJSON_IsObject(j))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not an object", r->where, where);
    if (type && !cJSON_IsString(type))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s.%s is not a string", r->where, where,
                               type->string);
    cJSON_ArrayForEach(c, types)
        ok |= type && cJSON_IsString(c) && strcmp(c->valuestring, type->valuestring) == 0;
    if (type && !ok)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s.%s %s is not one of %s", r->where,
                               where, type->string, type->valuestring, known);
    /* every other key of a RoPE description changes the frequencies */
    for (c = j->child; c; c = c->next) {
        for (i = 0; i < sizeof keys / sizeof keys[0] && strcmp(c->string, keys[i]) != 0; i++)
            ;
        if (i == sizeof keys / sizeof keys[0])
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s.%s is not a field of RoPE types %s",
                                   r->where, where, c->string, known);
    }
    /* linear (Gemma 3's full-attention layers): positions divided by the factor */
    if (type && strcmp(type->valuestring, "linear") == 0) {
        out->type = "linear";
        return rope_number(r, j, where, "linear", "factor", 0, 1, &out->factor);
    }
    if (!type || strcmp(type->valuestring, "llama3") != 0)
        return 0;
    out->type = "llama3";
    if ((rc = rope_number(r, j, where, "llama3", "factor", 1, 0, &out->factor)) < 0 ||
        (rc = rope_number(r, j, where, "llama3", "low_freq_factor", 0, 0, &out->low)) < 0 ||
        (rc = rope_number(r, j, where, "llama3", "high_freq_factor", 0, 0, &out->high)) < 0)
        return rc;
    if (!(out->low < out->high))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s.low_freq_factor %g is not below high_freq_factor %g",
                               r->where, where, out->low, out->high);
    if (!ckpt_family__field(j, "original_max_position_embeddings"))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: %s.original_max_position_embeddings is missing (rope_type llama3)", r->where, where);
    return ckpt_family__get_int(ckpt_family__field(j, "original_max_position_embeddings"), r->where,
                                "original_max_position_embeddings", 1, &out->original);
}

static int set_rope(family_read *r, const char *name, const rope *p)
{
    int rc;

    if ((rc = ckpt_family__set_str(r->c, name, p->type)) < 0 ||
        (rc = ckpt_family__set_real(r->c, "rope_factor", p->factor)) < 0 ||
        (rc = ckpt_family__set_real(r->c, "rope_low_freq_factor", p->low)) < 0 ||
        (rc = ckpt_family__set_real(r->c, "rope_high_freq_factor", p->high)) < 0)
        return rc;
    return ckpt_family__set_int(r->c, "rope_original_max_positions", p->original);
}

/* transformers 5 reads rope_parameters, 4 rope_scaling: where both are there they must say
 * the same, or the two would build different models. */
static int hf_rope(family_read *r, const cJSON *row, const char *name)
{
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(row, "hf"), *k, *j;
    const char *prev = NULL, *last;
    rope got, use;
    int rc;

    memset(&use, 0, sizeof use);
    use.type = "default";
    cJSON_ArrayForEach(k, keys) {
        if (!cJSON_IsString(k) || !(j = ckpt_family__path(r->cfg, k->valuestring, &last)))
            continue;
        if ((rc = parse_rope(r, row, j, k->valuestring, &got)) < 0)
            return rc;
        if (prev && (strcmp(got.type, use.type) != 0 || got.factor != use.factor || got.low != use.low ||
                     got.high != use.high || got.original != use.original))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s and %s describe different RoPE scalings",
                                   r->where, prev, k->valuestring);
        prev = k->valuestring;
        use = got;
    }
    return set_rope(r, name, &use);
}

/* Megatron-LM's llama3 scaling: only the factor is an argument. */
static int megatron_rope(family_read *r, const char *name)
{
    const ckpt_value *on = ckpt_family__arg(r->args, "use_rope_scaling"), *f = ckpt_family__arg(r->args, "rope_scaling_factor");
    rope p;

    memset(&p, 0, sizeof p);
    p.type = "default";
    if (on && ((on->kind == CKPT_VAL_BOOL && on->u.boolean) || (on->kind == CKPT_VAL_INT && on->u.integer))) {
        p.type = "llama3";
        p.factor = f && f->kind == CKPT_VAL_FLOAT ? f->u.real : f && f->kind == CKPT_VAL_INT ? (double)f->u.integer : 8.0;
        p.low = 1.0;
        p.high = 4.0;
        p.original = 8192;
    }
    return set_rope(r, name, &p);
}

/* Gemma 3's linear scaling, which Megatron-LM's args cannot say (its rope_scaling_factor is
 * llama3's, its rotary_seq_len_interpolation_factor an integer for every layer): the factor
 * hf2mcore keeps in hf_rope_scaling_factor, as Megatron-Bridge's Gemma3ModelProvider keeps it
 * in rope_scaling_factor, for the full-attention layers only. Absent: no scaling. */
static int megatron_linear_rope(family_read *r, const char *name)
{
    const ckpt_value *f = ckpt_family__arg(r->args, "hf_rope_scaling_factor");
    rope p;

    memset(&p, 0, sizeof p);
    p.type = "default";
    if (f && f->kind != CKPT_VAL_NONE) {
        p.type = "linear";
        p.factor = f->kind == CKPT_VAL_FLOAT ? f->u.real : f->kind == CKPT_VAL_INT ? (double)f->u.integer : NAN;
        if (!(p.factor > 0) || !isfinite(p.factor) || p.factor > 1e300)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                   "args.hf_rope_scaling_factor is not a number > 0 (the linear RoPE scaling of the "
                                   "full-attention layers)");
    }
    return set_rope(r, name, &p);
}

/* ---- token ids ---- */

static int token_id(const family_read *r, const cJSON *v, const char *name, int64_t vocab, int64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < -1 ||
        v->valuedouble >= (double)vocab)
        return cJSON_IsNumber(v) ? ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                                   "%s: %s is %.15g, not a token id below vocab_size %lld", r->where,
                                                   name, v->valuedouble, (long long)vocab)
                                 : ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                                   "%s: %s is not a token id (an integer)", r->where, name);
    *out = (int64_t)v->valuedouble;
    return 0;
}

static const char *const token_fields[] = { "bos_token_id", "eos_token_id", "pad_token_id" };

/* A token id is an integer below vocab_size; -1 and null are none. The second (eos) may be a
 * list, kept as it is for the way back. */
static int hf_tokens(family_read *r, const cJSON *row)
{
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(row, "hf");
    int64_t vocab = ckpt_family__int(r->c, "vocab_size", 0), id = -1;
    int i, rc, n;

    for (i = 0; i < 3; i++) {
        const cJSON *k = cJSON_GetArrayItem(keys, i), *v = cJSON_IsString(k) ? ckpt_family__field(r->cfg, k->valuestring) : NULL, *e;
        ckpt_value *list;
        if (!v) {
            rc = ckpt_family__set_none(r->c, token_fields[i]);
        } else if (i != 1 || !cJSON_IsArray(v)) {
            if ((rc = token_id(r, v, k->valuestring, vocab, &id)) < 0)
                return rc;
            rc = id < 0 ? ckpt_family__set_none(r->c, token_fields[i]) : ckpt_family__set_int(r->c, token_fields[i], id);
        } else {
            if (!(list = ckpt_value_new(r->c->arena, CKPT_VAL_LIST)))
                return CKPT_ENOMEM;
            n = 0;
            cJSON_ArrayForEach(e, v) {
                if (n == FAMILY_MAX_EOS_TOKENS)
                    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s lists more than %d tokens",
                                           r->where, k->valuestring, FAMILY_MAX_EOS_TOKENS);
                if ((rc = token_id(r, e, k->valuestring, vocab, &id)) < 0)
                    return rc;
                if (id >= 0 && ((rc = ckpt_value_append(r->c->arena, list, ckpt_value_new_int(r->c->arena, id))) < 0))
                    return rc;
                n += id >= 0;
            }
            rc = n ? ckpt_family__set(r->c, token_fields[i], list) : ckpt_family__set_none(r->c, token_fields[i]);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int arg_token(family_read *r, const char *arg, const ckpt_value *v, int64_t vocab, int64_t *out)
{
    if (v->kind != CKPT_VAL_INT || v->u.integer < 0 || v->u.integer >= vocab)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "args.%s is not a token id below the vocabulary size %lld",
                               arg, (long long)vocab);
    (void)r;
    *out = v->u.integer;
    return 0;
}

static int megatron_tokens(family_read *r)
{
    static const char *const args[] = { "hf_bos_token_id", "hf_eos_token_id", "hf_pad_token_id" };
    int64_t vocab = ckpt_family__int(r->c, "vocab_size", 0), id = -1;
    size_t i, j;
    int rc;

    for (i = 0; i < 3; i++) {
        const ckpt_value *v = ckpt_family__arg(r->args, args[i]);
        ckpt_value *list;
        if (!v) {
            rc = ckpt_family__set_none(r->c, token_fields[i]);
        } else if (i != 1 || (v->kind != CKPT_VAL_LIST && v->kind != CKPT_VAL_TUPLE)) {
            if ((rc = arg_token(r, args[i], v, vocab, &id)) < 0)
                return rc;
            rc = ckpt_family__set_int(r->c, token_fields[i], id);
        } else {
            if (v->u.seq.n > FAMILY_MAX_EOS_TOKENS)
                return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "args.%s lists more than %d tokens", args[i],
                                       FAMILY_MAX_EOS_TOKENS);
            if (!(list = ckpt_value_new(r->c->arena, CKPT_VAL_LIST)))
                return CKPT_ENOMEM;
            for (j = 0; j < v->u.seq.n; j++)
                if ((rc = arg_token(r, args[i], v->u.seq.items[j], vocab, &id)) < 0 ||
                    (rc = ckpt_value_append(r->c->arena, list, ckpt_value_new_int(r->c->arena, id))) < 0)
                    return rc;
            rc = v->u.seq.n ? ckpt_family__set(r->c, token_fields[i], list) : ckpt_family__set_none(r->c, token_fields[i]);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- dtype, layer types, window ---- */

/* transformers 5 writes "dtype", 4 "torch_dtype"; an unknown name keeps the default. */
static int hf_dtype(family_read *r, const cJSON *row, const char *name)
{
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(row, "hf"), *k, *v, *use = NULL,
                *d = cJSON_GetObjectItemCaseSensitive(row, "default");
    ckpt_dtype t;

    cJSON_ArrayForEach(k, keys)
        if (cJSON_IsString(k) && cJSON_IsString(v = ckpt_family__field(r->cfg, k->valuestring)))
            use = v;
    if (use && (t = ckpt_dtype_from_name(use->valuestring)) != CKPT_DTYPE_INVALID && ckpt_dtype_is_float(t))
        return ckpt_family__set_str(r->c, name, ckpt_dtype_name(t));
    return cJSON_IsString(d) ? ckpt_family__set_str(r->c, name, d->valuestring) : ckpt_family__set_none(r->c, name);
}

/* A row with a "pattern" field (Gemma 3): layers of both kinds, from layer_types or, without
 * it, the pattern N (layer i full attention when (i + 1) % N == 0, transformers' own rule),
 * kept as a list of the layer_types strings. */
static int mixed_layer_types(family_read *r, const cJSON *types, const char *pattern_field, const char *name)
{
    int64_t n = ckpt_family__int(r->c, "num_layers", 0), every = ckpt_family__int(r->c, pattern_field, 0), i = 0;
    ckpt_value *list = ckpt_value_new(r->c->arena, CKPT_VAL_LIST);
    const cJSON *t;
    int rc, full;

    if (!list)
        return CKPT_ENOMEM;
    if (n < 1 || n > FAMILY_MAX_LAYERS || (!types && every < 1))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: no layer_types for %lld layers", r->where,
                               (long long)n);
    if (types && (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != n))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: layer_types is not a list of num_hidden_layers %lld",
                               r->where, (long long)n);
    for (i = 0; i < n; i++) {
        full = (i + 1) % (every > 0 ? every : 1) == 0;
        if (types) {
            t = cJSON_GetArrayItem(types, (int)i);
            if (!cJSON_IsString(t) ||
                (strcmp(t->valuestring, "sliding_attention") != 0 && strcmp(t->valuestring, "full_attention") != 0))
                return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                       "%s: layer_types[%lld] is %s, not sliding_attention or full_attention", r->where,
                                       (long long)i, cJSON_IsString(t) ? t->valuestring : "not a string");
            full = t->valuestring[0] == 'f';
        }
        if ((rc = ckpt_value_append(r->c->arena, list,
                                    ckpt_value_new_str(r->c->arena, full ? "full_attention" : "sliding_attention",
                                                       full ? 14 : 17))) < 0)
            return rc;
    }
    return ckpt_family__set(r->c, name, list);
}

/* Megatron's window_attn_skip_freq (megatron-core's is_layer_window_attention, layers numbered
 * from 1): N, layer l full attention when l % N == 0; a list, 1 where the layer uses the
 * window; None, the window on every layer there is one. */
static int megatron_layer_types(family_read *r, const char *name)
{
    const ckpt_value *v = ckpt_family__arg(r->args, "window_attn_skip_freq"), *w = ckpt_family__get(r->c, "sliding_window");
    int64_t n = ckpt_family__int(r->c, "num_layers", 0), i;
    ckpt_value *list = ckpt_value_new(r->c->arena, CKPT_VAL_LIST);
    int rc, full;

    if (!list)
        return CKPT_ENOMEM;
    if (n < 1 || n > FAMILY_MAX_LAYERS)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "args.num_layers %lld is not from 1 to %d",
                               (long long)n, FAMILY_MAX_LAYERS);
    if (v && !(v->kind == CKPT_VAL_INT && v->u.integer > 0) &&
        !((v->kind == CKPT_VAL_LIST || v->kind == CKPT_VAL_TUPLE) && (int64_t)v->u.seq.n == n))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "args.window_attn_skip_freq is neither a positive integer nor a list of num_layers %lld",
                               (long long)n);
    for (i = 0; i < n; i++) {
        full = !(w && w->kind == CKPT_VAL_INT && w->u.integer > 0);
        if (v && v->kind == CKPT_VAL_INT)
            full = full || (i + 1) % v->u.integer == 0;
        else if (v) {
            const ckpt_value *x = v->u.seq.items[i];
            if (x->kind != CKPT_VAL_INT && x->kind != CKPT_VAL_BOOL)
                return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                       "args.window_attn_skip_freq[%lld] is not 0 or 1", (long long)i);
            full = full || (x->kind == CKPT_VAL_INT ? x->u.integer == 0 : !x->u.boolean);
        }
        if ((rc = ckpt_value_append(r->c->arena, list,
                                    ckpt_value_new_str(r->c->arena, full ? "full_attention" : "sliding_attention",
                                                       full ? 14 : 17))) < 0)
            return rc;
    }
    return ckpt_family__set(r->c, name, list);
}

/* layer_types (transformers >= 4.53): every layer as the sliding window says. */
static int hf_layer_types(family_read *r, const cJSON *row, const char *name)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(row, "hf"), *types, *t;
    const ckpt_value *w = ckpt_family__get(r->c, "sliding_window");
    int window = w && w->kind == CKPT_VAL_INT && w->u.integer > 0;
    const char *want = window ? "sliding_attention" : "full_attention";
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(row, "pattern");

    types = cJSON_IsString(k) ? ckpt_family__field(r->cfg, k->valuestring) : NULL;
    if (cJSON_IsString(pattern))
        return mixed_layer_types(r, types, pattern->valuestring, name);
    if (!types)
        return ckpt_family__set_none(r->c, name);
    if (!cJSON_IsArray(types))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: layer_types is not a list", r->where);
    cJSON_ArrayForEach(t, types)
        if (!cJSON_IsString(t) || strcmp(t->valuestring, want) != 0)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "%s: layer_types has %s, not %s in every layer (%s)", r->where,
                                   cJSON_IsString(t) ? t->valuestring : "a value that is not a string", want,
                                   window ? "sliding_window is set" : "no sliding window");
    return ckpt_family__set_str(r->c, name, want);
}

/* window_size (W - 1, 0) is HF's sliding_window W (Megatron-Bridge's mapping); None: none. */
static int megatron_window(family_read *r, const char *name)
{
    const ckpt_value *v = ckpt_family__arg(r->args, "window_size");

    if (!v)
        return ckpt_family__set_none(r->c, name);
    if ((v->kind != CKPT_VAL_TUPLE && v->kind != CKPT_VAL_LIST) || v->u.seq.n != 2 ||
        v->u.seq.items[0]->kind != CKPT_VAL_INT || v->u.seq.items[1]->kind != CKPT_VAL_INT ||
        v->u.seq.items[0]->u.integer < 0 || v->u.seq.items[0]->u.integer >= FAMILY_MAX_SIZE ||
        v->u.seq.items[1]->u.integer != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "args.window_size is not a causal window (W - 1, 0), which Hugging Face's "
                               "sliding_window W says");
    return ckpt_family__set_int(r->c, name, v->u.seq.items[0]->u.integer + 1);
}

int ckpt_family__gen_read(family_read *r, const cJSON *row, const char *gen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(row, "f");
    const char *name = cJSON_IsString(f) ? f->valuestring : "?";
    const ckpt_value *v;
    int rc;

    if ((rc = ckpt_family__moe_layers(r, row, gen)) <= 0)
        return rc;
    if (r->args) {
        if (strcmp(gen, "$true_vocab") == 0) {
            v = ckpt_family__arg(r->args, "vocab_size");
            return ckpt_family__set_int(r->c, name, v && v->kind == CKPT_VAL_INT ? v->u.integer : 0);
        }
        if (strcmp(gen, "$megatron_llama3_rope") == 0)
            return megatron_rope(r, name);
        if (strcmp(gen, "$megatron_linear_rope") == 0)
            return megatron_linear_rope(r, name);
        if (strcmp(gen, "$window_size") == 0)
            return megatron_window(r, name);
        if (strcmp(gen, "$window_attn_skip_freq") == 0)
            return megatron_layer_types(r, name);
        if (strcmp(gen, "$token_ids") == 0)
            return megatron_tokens(r);
    } else {
        if (strcmp(gen, "$rope") == 0)
            return hf_rope(r, row, name);
        if (strcmp(gen, "$token_ids") == 0)
            return hf_tokens(r, row);
        if (strcmp(gen, "$dtype") == 0)
            return hf_dtype(r, row, name);
        if (strcmp(gen, "$layer_types") == 0)
            return hf_layer_types(r, row, name);
    }
    return ckpt_error_set(CKPT_EINVALID, "%s: config row %s: generator %s is not one for %s", r->f->name, name, gen,
                          r->framework);
}
