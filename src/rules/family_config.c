/* A model's config read through its family's rows: Hugging Face (or PaddleNLP) config.json
 * with every value typed, bounded and checked in the rows' order, or Megatron args read as
 * Megatron wrote them; what the family fixes (Qwen2's q/k/v biases) is checked against what
 * the args say. */
#include "family_private.h"

#include <ckpt/megatron.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *row_str(const cJSON *row, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The config.json keys of a row for this framework: PaddleNLP's where the row names them. */
static const cJSON *row_keys(const family_read *r, const cJSON *row)
{
    const cJSON *k = NULL;

    if (strcmp(r->framework, CKPT_FAMILY_PADDLE) == 0)
        k = cJSON_GetObjectItemCaseSensitive(row, "paddle");
    return k ? k : cJSON_GetObjectItemCaseSensitive(row, "hf");
}

const char *ckpt_family__key(const ckpt_family *f, const char *framework, const char *field)
{
    const cJSON *row, *k = NULL;

    cJSON_ArrayForEach(row, f->config) {
        if (strcmp(row_str(row, "f") ? row_str(row, "f") : "", field) != 0)
            continue;
        if (strcmp(framework, CKPT_FAMILY_PADDLE) == 0)
            k = cJSON_GetObjectItemCaseSensitive(row, "paddle");
        if (!k)
            k = cJSON_GetObjectItemCaseSensitive(row, "hf");
        if (cJSON_IsArray(k))
            k = cJSON_GetArrayItem(k, 0);
        if (cJSON_IsString(k))
            return strrchr(k->valuestring, '.') ? strrchr(k->valuestring, '.') + 1 : k->valuestring;
        return field;
    }
    return field;
}

static const char *last_part(const char *key)
{
    const char *dot = strrchr(key, '.');
    return dot ? dot + 1 : key;
}

static const char *key_of(const family_read *r, const char *field)
{
    return ckpt_family__key(r->f, r->framework, field);
}

static const char *first_key(const family_read *r, const cJSON *row)
{
    const cJSON *k = row_keys(r, row);
    if (cJSON_IsArray(k))
        k = cJSON_GetArrayItem(k, 0);
    return cJSON_IsString(k) ? last_part(k->valuestring) : row_str(row, "f");
}

typedef struct range {
    double lo, hi;
    int open_lo;
} range;

static void parse_range(const char *type, range *out)
{
    char *end;

    out->open_lo = type[5] == '(';
    out->lo = strtod(type + 6, &end);
    out->hi = *end == ',' && end[1] != ']' && end[1] != ')' ? strtod(end + 1, NULL) : 1e300;
}

static const cJSON *default_of(const family_read *r, const cJSON *row)
{
    if (r->args && cJSON_GetObjectItemCaseSensitive(row, "megatron_default"))
        return cJSON_GetObjectItemCaseSensitive(row, "megatron_default");
    return cJSON_GetObjectItemCaseSensitive(row, "default");
}

static int set_default_value(family_read *r, const cJSON *row, const char *type, const char *name)
{
    const cJSON *d = default_of(r, row);
    family_expr_fail why;
    int64_t v;
    int rc;

    if (!d || cJSON_IsNull(d)) {
        /* args Megatron did not write are zero, as Megatron's own readers take them; a row
         * whose null is "none" (q_lora_rank None: no query compression) keeps none */
        if (r->args && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(row, "null_is")) &&
            (strcmp(type, "size") == 0 || strcmp(type, "count") == 0))
            return ckpt_family__set_int(r->c, name, 0);
        if (r->args && strncmp(type, "real", 4) == 0)
            return ckpt_family__set_real(r->c, name, 0);
        if (r->args && strcmp(type, "bool") == 0)
            return ckpt_family__set_bool(r->c, name, 0);
        return ckpt_family__set_none(r->c, name);
    }
    if (cJSON_IsBool(d))
        return ckpt_family__set_bool(r->c, name, cJSON_IsTrue(d));
    if (cJSON_IsNumber(d))
        return strncmp(type, "real", 4) == 0 ? ckpt_family__set_real(r->c, name, d->valuedouble)
                                             : ckpt_family__set_int(r->c, name, (int64_t)d->valuedouble);
    if (!cJSON_IsString(d))
        return ckpt_error_set(CKPT_EFORMAT, "%s: the default of %s is no value", r->f->name, name);
    if (strcmp(type, "string") == 0 || type[0] == '$')
        return ckpt_family__set_str(r->c, name, d->valuestring);
    if ((rc = ckpt_family__expr(r->f, r->c, d->valuestring, r->where, &v, NULL, &why)) < 0) {
        if (!why.inexact)
            return rc;
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s %lld is not a multiple of %s %lld (and no %s)",
                               r->where, key_of(r, why.a), (long long)why.va, key_of(r, why.b), (long long)why.vb,
                               first_key(r, row));
    }
    return strcmp(type, "bool") == 0 ? ckpt_family__set_bool(r->c, name, v != 0) : ckpt_family__set_int(r->c, name, v);
}

/* A JSON default in the row's type; a string is an expression (sizes, bools) or the text.
 * key: what the source lacks, marked (ckpt_family_config_defaulted) where the default is the
 * family's own value, not one an expression computes from the other fields as the framework
 * itself does (head_dim from hidden_size). */
static int set_default(family_read *r, const cJSON *row, const char *type, const char *name, const char *key)
{
    const cJSON *d = default_of(r, row);
    int computed = cJSON_IsString(d) && (strcmp(type, "size") == 0 || strcmp(type, "count") == 0 ||
                                         strcmp(type, "bool") == 0),
        rc = set_default_value(r, row, type, name);

    return rc < 0 || !key || computed ? rc : ckpt_family__mark_default(r->c, name, key);
}

/* One config.json value of the row's type. */
static int typed(family_read *r, const cJSON *v, const char *type, const char *key, ckpt_value **out)
{
    ckpt_arena *a = r->c->arena;
    int64_t i;
    int rc;

    if (strcmp(type, "size") == 0 || strcmp(type, "count") == 0) {
        if ((rc = ckpt_family__get_int(v, r->where, key, type[0] == 's' ? 1 : 0, &i)) < 0)
            return rc;
        *out = ckpt_value_new_int(a, i);
    } else if (strncmp(type, "real", 4) == 0) {
        range g;
        parse_range(type, &g);
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < g.lo ||
            (g.open_lo && v->valuedouble == g.lo) || v->valuedouble > g.hi)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not a number %s %g and <= %g",
                                   r->where, key, g.open_lo ? ">" : ">=", g.lo, g.hi);
        *out = ckpt_value_new_float(a, v->valuedouble);
    } else if (strcmp(type, "bool") == 0) {
        if (!cJSON_IsBool(v))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not true or false", r->where, key);
        *out = ckpt_value_new_bool(a, cJSON_IsTrue(v));
    } else if (strcmp(type, "string") == 0) {
        if (!cJSON_IsString(v))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not a string", r->where, key);
        *out = ckpt_value_new_str(a, v->valuestring, strlen(v->valuestring));
    } else {
        *out = ckpt_value_new(a, CKPT_VAL_NONE); /* "any": checks only */
    }
    return *out ? 0 : CKPT_ENOMEM;
}

static int is_set(const cJSON *v)
{
    return v && !cJSON_IsFalse(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0);
}

static int equal(const cJSON *a, const cJSON *b)
{
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
        return a->valuedouble == b->valuedouble;
    return cJSON_Compare(a, b, 1);
}

static int check_row(family_read *r, const cJSON *row)
{
    const cJSON *keys = row_keys(r, row), *is = cJSON_GetObjectItemCaseSensitive(row, "is"),
                *set = cJSON_GetObjectItemCaseSensitive(row, "refuse_set"), *k, *v;
    const char *last;
    ckpt_buf known = CKPT_BUF_INIT;
    int rc = 0;

    cJSON_ArrayForEach(k, set)
        if (cJSON_IsString(k) && is_set(ckpt_family__field(r->cfg, k->valuestring))) {
            rc = ckpt_buf_puts(&known, ckpt_family_known());
            rc = rc < 0 ? rc
                        : ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                          "%s: %s is set, which ckptconv's %s family does not convert (its families: %s)",
                                          r->where, k->valuestring, r->f->name, (const char *)known.data);
            ckpt_buf_dispose(&known);
            return rc;
        }
    if (!is || !cJSON_IsString(keys))
        return 0;
    if ((v = ckpt_family__path(r->cfg, keys->valuestring, &last)) && !equal(v, is)) {
        /* the value is named, and the one wanted unless "is": null refuses every value */
        char *got = cJSON_PrintUnformatted(v), *want = cJSON_PrintUnformatted(is);
        if (!got || !want)
            rc = ckpt_error_oom();
        else if (cJSON_IsNull(is))
            rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s is %s (%s)", r->where, last, got,
                                 row_str(row, "why") ? row_str(row, "why") : "");
        else
            rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s is %s, not %s (%s)", r->where, last,
                                 got, want, row_str(row, "why") ? row_str(row, "why") : "");
        free(got);
        free(want);
    }
    return rc;
}

/* After a value is read: refuse, divides, at_most. */
static int row_checks(family_read *r, const cJSON *row, const char *name)
{
    const cJSON *refuse = cJSON_GetObjectItemCaseSensitive(row, "refuse");
    const char *div = row_str(row, "divides"), *most = row_str(row, "at_most");
    const ckpt_value *v = ckpt_family__get(r->c, name);

    if (cJSON_IsBool(refuse) && v && v->kind == CKPT_VAL_BOOL && (v->u.boolean != 0) == cJSON_IsTrue(refuse))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s is %s (%s)", r->where,
                               first_key(r, row), v->u.boolean ? "true" : "false",
                               row_str(row, "why") ? row_str(row, "why") : "");
    if (div && v && v->kind == CKPT_VAL_INT) {
        int64_t whole = ckpt_family__int(r->c, div, 0), part = v->u.integer;
        if (part <= 0 || part > whole || whole % part)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s %lld is not a multiple of %s %lld",
                                   r->where, key_of(r, div), (long long)whole, first_key(r, row), (long long)part);
    }
    if (most && v && v->kind == CKPT_VAL_INT && v->u.integer > ckpt_family__int(r->c, most, 0))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s %lld is more than %s %lld", r->where,
                               first_key(r, row), (long long)v->u.integer, key_of(r, most),
                               (long long)ckpt_family__int(r->c, most, 0));
    return 0;
}

/* A config.json string a row reads through "values" (activation_function "gelu_new": true);
 * NULL, with the error set, for a string it does not list. */
static const cJSON *through_values(family_read *r, const cJSON *row, const cJSON *v, const char *key)
{
    const cJSON *values = cJSON_GetObjectItemCaseSensitive(row, "values"), *m;
    ckpt_buf known = CKPT_BUF_INIT;

    if (!values)
        return v;
    if (cJSON_IsString(v) && (m = cJSON_GetObjectItemCaseSensitive(values, v->valuestring)))
        return m;
    cJSON_ArrayForEach(m, values)
        ckpt_buf_printf(&known, "%s%s", m == values->child ? "" : ", ", m->string);
    if (!known.data)
        ckpt_error_oom();
    else if (cJSON_IsString(v))
        ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s is %s, not one of %s (%s)", r->where, key,
                        v->valuestring, (const char *)known.data, row_str(row, "why") ? row_str(row, "why") : "");
    else
        ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not one of %s", r->where, key,
                        (const char *)known.data);
    ckpt_buf_dispose(&known);
    return NULL;
}

/* "required": true, or "required_if": [F, V], the string field F (an earlier row's) being V:
 * DeepSeek-V3's YaRN numbers with a yarn RoPE only. */
static int required(const family_read *r, const cJSON *row)
{
    const cJSON *when = cJSON_GetObjectItemCaseSensitive(row, "required_if");
    const char *field = cJSON_GetStringValue(cJSON_GetArrayItem(when, 0)), *want = cJSON_GetStringValue(cJSON_GetArrayItem(when, 1));
    const char *is = field ? ckpt_family__str(r->c, field) : NULL;

    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "required")) || (is && want && strcmp(is, want) == 0);
}

/* What makes a required_if row required, for its message ("rope yarn"). */
static const char *required_for(family_read *r, const cJSON *row)
{
    const cJSON *when = cJSON_GetObjectItemCaseSensitive(row, "required_if");
    const char *field = cJSON_GetStringValue(cJSON_GetArrayItem(when, 0));
    char *say = ckpt_arena_alloc(r->c->arena, 256);

    if (!say)
        return "";
    snprintf(say, 256, "%s %s", field ? ckpt_family__key(r->f, CKPT_FAMILY_HF, field) : "?",
             cJSON_GetStringValue(cJSON_GetArrayItem(when, 1)));
    return say;
}

static int read_json_row(family_read *r, const cJSON *row)
{
    const char *type = row_str(row, "type"), *name = row_str(row, "f"), *last = NULL, *key = NULL;
    const cJSON *keys = row_keys(r, row), *k, *v, *null_is = cJSON_GetObjectItemCaseSensitive(row, "null_is");
    const char *prev = NULL;
    ckpt_value *val = NULL, *got = NULL;
    int rc, none = 0, agree = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "agree"));

    if (!type)
        return check_row(r, row);
    if (type[0] == '$')
        return ckpt_family__gen_read(r, row, type);
    for (k = cJSON_IsArray(keys) ? keys->child : keys; k; k = cJSON_IsArray(keys) ? k->next : NULL) {
        if (!cJSON_IsString(k))
            continue;
        if (!key)
            key = last_part(k->valuestring);
        if (cJSON_IsString(null_is) && !strchr(k->valuestring, '.')) {
            const cJSON *raw = NULL, *c;
            for (c = r->cfg->child; c; c = c->next)
                if (c->string && strcmp(c->string, k->valuestring) == 0)
                    raw = c;
            if (raw && cJSON_IsNull(raw)) {
                none = 1;
                continue;
            }
        }
        if (!(v = ckpt_family__path(r->cfg, k->valuestring, &last)))
            continue;
        if (!(v = through_values(r, row, v, last)))
            return ckpt_error_last()->code;
        if ((rc = typed(r, v, type, last, &got)) < 0)
            return rc;
        /* keys that different transformers versions read: two values would be two models */
        if (agree && prev && val && val->kind == CKPT_VAL_FLOAT && got->kind == CKPT_VAL_FLOAT &&
            val->u.real != got->u.real)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                   "%s: %s %.15g and %s %.15g differ (transformers versions that read one or the "
                                   "other would build different models)",
                                   r->where, prev, val->u.real, k->valuestring, got->u.real);
        prev = k->valuestring;
        val = got;
        none = 0;
    }
    if (val)
        rc = ckpt_family__set(r->c, name, val);
    else if (none)
        rc = ckpt_family__set_none(r->c, name);
    else if (required(r, row))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is missing%s%s", r->where, key ? key : name,
                               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "required")) ? "" : " for ",
                               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "required")) ? "" : required_for(r, row));
    else
        rc = set_default(r, row, type, name, key);
    return rc < 0 ? rc : row_checks(r, row, name);
}

/* ---- Megatron args ---- */

const ckpt_value *ckpt_family__arg(const ckpt_value *args, const char *name)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);
    return v && v->kind != CKPT_VAL_NONE ? v : NULL;
}

int ckpt_family__arg_set(const ckpt_value *args, const char *name)
{
    const ckpt_value *v = ckpt_family__arg(args, name);
    return v && !(v->kind == CKPT_VAL_BOOL && !v->u.boolean) && !(v->kind == CKPT_VAL_INT && v->u.integer == 0);
}

/* An arg as the row's type, leniently (an int where a float is wanted); NULL: not there. */
static ckpt_value *arg_typed(family_read *r, const char *arg, const char *type)
{
    const ckpt_value *v = ckpt_family__arg(r->args, arg);
    ckpt_arena *a = r->c->arena;

    if (!v)
        return NULL;
    if ((strcmp(type, "size") == 0 || strcmp(type, "count") == 0) && (v->kind == CKPT_VAL_INT || v->kind == CKPT_VAL_BOOL))
        return ckpt_value_new_int(a, v->kind == CKPT_VAL_INT ? v->u.integer : v->u.boolean);
    if (strncmp(type, "real", 4) == 0 && (v->kind == CKPT_VAL_FLOAT || v->kind == CKPT_VAL_INT))
        return ckpt_value_new_float(a, v->kind == CKPT_VAL_FLOAT ? v->u.real : (double)v->u.integer);
    if (strcmp(type, "bool") == 0 && (v->kind == CKPT_VAL_BOOL || v->kind == CKPT_VAL_INT))
        return ckpt_value_new_bool(a, v->kind == CKPT_VAL_BOOL ? v->u.boolean != 0 : v->u.integer != 0);
    if (strcmp(type, "string") == 0 && v->kind == CKPT_VAL_STR)
        return ckpt_value_new_str(a, v->u.str.ptr, v->u.str.len);
    return NULL;
}

/* The arg a row's megatron source names first ("untie_embeddings_and_output_weights" of its
 * negation), NULL where it names none. */
static const char *arg_name(const cJSON *src)
{
    if (cJSON_IsArray(src))
        src = cJSON_GetArrayItem(src, 0);
    if (cJSON_IsObject(src))
        src = cJSON_GetObjectItemCaseSensitive(src, "arg");
    if (!cJSON_IsString(src))
        return NULL;
    return src->valuestring[0] == '!' ? src->valuestring + 1 : src->valuestring;
}

static int same(const ckpt_value *v, const cJSON *want)
{
    if (cJSON_IsNull(want))
        return !v || v->kind == CKPT_VAL_NONE;
    if (!v || v->kind == CKPT_VAL_NONE)
        return 0;
    if (cJSON_IsBool(want))
        return (v->kind == CKPT_VAL_BOOL ? v->u.boolean != 0 : v->kind == CKPT_VAL_INT && v->u.integer != 0) ==
               cJSON_IsTrue(want);
    if (cJSON_IsNumber(want))
        return (v->kind == CKPT_VAL_INT && (double)v->u.integer == want->valuedouble) ||
               (v->kind == CKPT_VAL_FLOAT && v->u.real == want->valuedouble);
    return 0;
}

static int read_args_row(family_read *r, const cJSON *row)
{
    const char *type = row_str(row, "type"), *name = row_str(row, "f");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(row, "megatron"), *k,
                *must = cJSON_GetObjectItemCaseSensitive(row, "megatron_must"),
                *refuse = cJSON_GetObjectItemCaseSensitive(row, "megatron_refuse"), *when;
    ckpt_value *val = NULL;
    int rc;

    if (!type)
        return 0;
    if (cJSON_IsString(src) && src->valuestring[0] == '$') {
        if ((rc = ckpt_family__gen_read(r, row, src->valuestring)) < 0)
            return rc;
    } else {
        if (cJSON_IsString(src) && src->valuestring[0] == '!')
            val = ckpt_value_new_bool(r->c->arena, !ckpt_family__arg_set(r->args, src->valuestring + 1));
        else if (cJSON_IsString(src))
            val = arg_typed(r, src->valuestring, type);
        else if (cJSON_IsArray(src))
            cJSON_ArrayForEach(k, src)
                if (!val && cJSON_IsString(k))
                    val = arg_typed(r, k->valuestring, type);
        if (cJSON_IsObject(src) && ckpt_family__arg_set(r->args, row_str(src, "when") ? row_str(src, "when") : ""))
            val = arg_typed(r, row_str(src, "arg") ? row_str(src, "arg") : "", type);
        if ((rc = val ? ckpt_family__set(r->c, name, val) : set_default(r, row, type, name, arg_name(src))) < 0)
            return rc;
    }
    /* a bool derived from other fields (no config.json key) that says a model one side cannot
     * compute: refused from args as well as into them */
    when = cJSON_GetObjectItemCaseSensitive(refuse, "when");
    if (!cJSON_GetObjectItemCaseSensitive(row, "hf") && cJSON_IsBool(when) &&
        (ckpt_family__int(r->c, name, 0) != 0) == cJSON_IsTrue(when))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: %s", r->where,
                               row_str(refuse, "says") ? row_str(refuse, "says") : name);
    if (r->named && cJSON_IsObject(must) && !same(ckpt_family__get(r->c, name), cJSON_GetObjectItemCaseSensitive(must, "value")))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "args.hf_model_type is %s but args %s",
                               r->f->hf ? row_str(r->f->hf, "model_type") : r->f->name,
                               row_str(must, "says") ? row_str(must, "says") : "disagree");
    return 0;
}

static int read_rows(family_read *r)
{
    const cJSON *row;
    int rc;

    if (r->args && (rc = ckpt_family__megatron_require(r->f, r->args)) < 0)
        return rc;
    cJSON_ArrayForEach(row, r->f->config)
        if ((rc = r->args ? read_args_row(r, row) : read_json_row(r, row)) < 0)
            return rc;
    return 0;
}

int ckpt_family_config_complete(ckpt_family_config *c)
{
    family_read r;
    const cJSON *row;
    int rc;

    if (!c)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_config_complete: NULL argument");
    memset(&r, 0, sizeof r);
    r.f = c->family;
    r.c = c;
    r.framework = CKPT_FAMILY_HF;
    r.where = c->where;
    cJSON_ArrayForEach(row, r.f->config) {
        const char *type = row_str(row, "type"), *name = row_str(row, "f");
        const cJSON *keys = row_keys(&r, row);
        const char *key = cJSON_IsString(keys) || cJSON_IsArray(keys) ? first_key(&r, row) : NULL;
        if (type && name && !ckpt_family__get(c, name) && (rc = set_default(&r, row, type, name, key)) < 0)
            return rc;
    }
    return 0;
}

int ckpt_family__read_text(ckpt_family_config **out, const ckpt_family *f, const char *framework, const char *where,
                           const char *json, size_t len)
{
    family_read r;
    cJSON *cfg;
    int rc;

    *out = NULL;
    if ((rc = ckpt_family__parse_config(&cfg, where, json, len)) < 0)
        return rc;
    memset(&r, 0, sizeof r);
    r.f = f;
    r.framework = framework;
    r.where = where;
    r.cfg = cfg;
    if ((rc = ckpt_family__new_config(&r.c, f, where)) == 0 && (rc = read_rows(&r)) < 0)
        ckpt_family_config_free(r.c);
    cJSON_Delete(cfg);
    if (rc == 0)
        *out = r.c;
    return rc;
}

int ckpt_family_config_read(ckpt_family_config **out, const ckpt_family *f, const char *framework, const char *where,
                            const void *src)
{
    family_read r;
    int rc;

    if (!out || !f || !framework || !src)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_config_read: NULL argument");
    *out = NULL;
    if (strcmp(framework, CKPT_FAMILY_MEGATRON) != 0)
        return ckpt_family__read_text(out, f, framework, where ? where : "config.json", src, strlen(src));
    memset(&r, 0, sizeof r);
    r.f = f;
    r.framework = framework;
    r.where = where ? where : "args";
    r.args = src;
    r.named = ckpt_family__arg(src, "hf_model_type") != NULL;
    if ((rc = ckpt_family__new_config(&r.c, f, r.where)) < 0)
        return rc;
    if ((rc = read_rows(&r)) < 0) {
        ckpt_family_config_free(r.c);
        return rc;
    }
    *out = r.c;
    return 0;
}
