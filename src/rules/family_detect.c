/* Which family a model is: a config.json by model_type and architectures, Megatron args by
 * the hf_model_type hf2mcore recorded or, for args Megatron trained, by what they compute
 * (each family's megatron.require and detect). */
#include "family_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *hf_str(const ckpt_family *f, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->hf, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int by_model_type(const char *what, const char *type, const ckpt_family **out)
{
    size_t i;

    for (i = 0; i < ckpt_family__builtin_n(); i++) {
        const ckpt_family *f = ckpt_family_builtin_at(i);
        if (f && strcmp(hf_str(f, "model_type"), type) == 0) {
            *out = f;
            return 0;
        }
    }
    /* a model_type close to a family's (Gemma 3's vision-language gemma3) says which converts */
    for (i = 0; i < ckpt_family__builtin_n(); i++) {
        const ckpt_family *f = ckpt_family_builtin_at(i);
        const cJSON *why = f ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f->hf, "refuse_model_type"), type) : NULL;
        if (cJSON_IsString(why))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: model_type %s is %s", what, type,
                                   why->valuestring);
    }
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: model_type %s is not one of %s", what, type,
                           ckpt_family_known());
}

/* model_type names the family; architectures, when there, names a class of it. Without a
 * model_type the class decides (the first family when there is neither, as configs of old
 * tools). */
static int detect_json(const ckpt_family **out, const cJSON *cfg, const char *where)
{
    const cJSON *type = ckpt_family__field(cfg, "model_type"), *arch = ckpt_family__field(cfg, "architectures"), *a;
    const ckpt_family *f = ckpt_family_builtin_at(0);
    size_t i;
    int rc;

    *out = f;
    if (type && !cJSON_IsString(type))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: model_type is not a string", where);
    if (type && (rc = by_model_type(where, type->valuestring, out)) < 0)
        return rc;
    if (!arch)
        return *out ? 0 : ckpt_error_set(CKPT_ENOTFOUND, "no built-in family");
    if (!cJSON_IsArray(arch))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: architectures is not a list", where);
    for (i = 0; i < ckpt_family__builtin_n(); i++) {
        const ckpt_family *g = ckpt_family_builtin_at(i);
        if (!g || (type && g != *out))
            continue;
        cJSON_ArrayForEach(a, arch)
            if (cJSON_IsString(a) && starts_with(a->valuestring, hf_str(g, "arch_prefix"))) {
                *out = g;
                return 0;
            }
    }
    a = cJSON_GetArrayItem(arch, 0);
    if (type)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: architectures names %s, not a %s model (%s...)",
                               where, cJSON_IsString(a) ? a->valuestring : "no class", type->valuestring,
                               hf_str(*out, "arch_prefix"));
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: architectures names %s, not a model of %s",
                           where, cJSON_IsString(a) ? a->valuestring : "no class", ckpt_family_known());
}

int ckpt_family__parse_config(cJSON **out, const char *where, const char *json, size_t len)
{
    *out = NULL;
    if (len > FAMILY_MAX_CONFIG_BYTES)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: larger than %u bytes; not a config.json", where,
                               FAMILY_MAX_CONFIG_BYTES);
    if (!json || !(*out = cJSON_ParseWithLength(json, len)))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not valid JSON", where);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not a JSON object", where);
    }
    return 0;
}

int ckpt_family__detect_text(const ckpt_family **out, const char *where, const char *json, size_t len)
{
    cJSON *cfg;
    int rc = ckpt_family__parse_config(&cfg, where, json, len);

    if (rc < 0)
        return rc;
    rc = detect_json(out, cfg, where);
    cJSON_Delete(cfg);
    return rc;
}

/* ---- Megatron args ---- */

/* A number is also said per layer, as a list (Megatron's moe_layer_freq [1, 1] is 1 on every
 * layer): the list is of the number's kind, and equal when every element is. */
static int same_kind(const ckpt_value *v, const cJSON *want)
{
    if (cJSON_IsArray(want)) /* strings, any of them */
        return v->kind == CKPT_VAL_STR;
    if (cJSON_IsBool(want))
        return v->kind == CKPT_VAL_BOOL;
    if (cJSON_IsString(want))
        return v->kind == CKPT_VAL_STR;
    return cJSON_IsNumber(want) && (v->kind == CKPT_VAL_INT || v->kind == CKPT_VAL_FLOAT || v->kind == CKPT_VAL_LIST);
}

static int equal(const ckpt_value *v, const cJSON *want)
{
    const cJSON *w;
    size_t i;

    if (cJSON_IsArray(want)) {
        cJSON_ArrayForEach(w, want)
            if (cJSON_IsString(w) && strcmp(v->u.str.ptr, w->valuestring) == 0)
                return 1;
        return 0;
    }
    if (cJSON_IsBool(want))
        return (v->u.boolean != 0) == cJSON_IsTrue(want);
    if (cJSON_IsString(want))
        return strcmp(v->u.str.ptr, want->valuestring) == 0;
    if (v->kind == CKPT_VAL_LIST) {
        for (i = 0; i < v->u.seq.n; i++)
            if (!same_kind(v->u.seq.items[i], want) || v->u.seq.items[i]->kind == CKPT_VAL_LIST ||
                !equal(v->u.seq.items[i], want))
                return 0;
        return 1;
    }
    return (v->kind == CKPT_VAL_INT ? (double)v->u.integer : v->u.real) == want->valuedouble;
}

/* says with {} replaced by the arg's value */
static int require_fail(const char *says, const ckpt_value *v)
{
    const char *hole = strstr(says, "{}");
    char value[128] = "";

    if (!hole)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s", says);
    if (v && v->kind == CKPT_VAL_STR)
        snprintf(value, sizeof value, "%s", v->u.str.ptr);
    else if (v)
        ckpt_value_repr(v, value, sizeof value);
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%.*s%s%s", (int)(hole - says), says, value, hole + 2);
}

/* A require entry {"gen": "$window_size"}: the args the generator reads have its shape. */
static int gen_reads(const ckpt_family *f, const ckpt_value *args, const cJSON *req, const char *gen)
{
    family_read r;
    int rc;

    memset(&r, 0, sizeof r);
    r.f = f;
    r.framework = CKPT_FAMILY_MEGATRON;
    r.where = "args";
    r.args = args;
    if ((rc = ckpt_family__new_config(&r.c, f, r.where)) < 0)
        return rc;
    rc = ckpt_family__gen_read(&r, req, gen);
    ckpt_family_config_free(r.c);
    return rc;
}

int ckpt_family__megatron_require(const ckpt_family *f, const ckpt_value *args)
{
    const cJSON *req, *a;
    int rc;

    cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(f->megatron, "require")) {
        const cJSON *gen = cJSON_GetObjectItemCaseSensitive(req, "gen");
        if (cJSON_IsString(gen)) {
            if ((rc = gen_reads(f, args, req, gen->valuestring)) < 0)
                return rc;
            continue;
        }
        const cJSON *arg = cJSON_GetObjectItemCaseSensitive(req, "arg"), *is = cJSON_GetObjectItemCaseSensitive(req, "is"),
                    *says = cJSON_GetObjectItemCaseSensitive(req, "says");
        const ckpt_value *v;
        cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(req, "refuse_set"))
            if (cJSON_IsString(a) && ckpt_family__arg_set(args, a->valuestring))
                return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "args.%s is set, %s", a->valuestring,
                                       says->valuestring);
        if (!cJSON_IsString(arg) || !is)
            continue;
        v = ckpt_family__arg(args, arg->valuestring);
        if (v && same_kind(v, is) ? !equal(v, is) : cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "required")))
            return require_fail(says->valuestring, v);
    }
    return 0;
}

static int detect_count(const ckpt_family *f, const ckpt_value *args)
{
    const cJSON *d;
    int n = 0;

    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(f->megatron, "detect")) {
        const cJSON *arg = cJSON_GetObjectItemCaseSensitive(d, "arg");
        int want = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(d, "set"));
        if (!cJSON_IsString(arg) || ckpt_family__arg_set(args, arg->valuestring) != want)
            return -1;
        n++;
    }
    return n;
}

static const char *detect_says(const ckpt_family *f)
{
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(f->megatron, "detect"), 0),
                *s = cJSON_GetObjectItemCaseSensitive(d, "says");
    return cJSON_IsString(s) ? s->valuestring : f->name;
}

static int detect_args(const ckpt_family **out, const ckpt_value *args)
{
    const ckpt_value *named = ckpt_family__arg(args, "hf_model_type");
    const ckpt_family *best = NULL, *tie = NULL, *first = ckpt_family_builtin_at(0);
    ckpt_buf known = CKPT_BUF_INIT;
    int best_n = -1, n, rc;
    size_t i;

    /* what the args compute is weighed first: args two families claim alike are refused
     * even where hf_model_type names one */
    for (i = 0; i < ckpt_family__builtin_n(); i++) {
        const ckpt_family *f = ckpt_family_builtin_at(i);
        if (!f || !f->megatron || ckpt_family__megatron_require(f, args) < 0 || (n = detect_count(f, args)) < 0)
            continue;
        if (n > best_n) {
            best = f;
            best_n = n;
            tie = NULL;
        } else if (n == best_n && !tie) {
            tie = f;
        }
    }
    ckpt_error_clear();
    if (tie) {
        rc = ckpt_family__known_or(&known);
        rc = rc < 0 ? rc
                    : ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                      "args have %s and %s: no Hugging Face %s config has both", detect_says(tie),
                                      detect_says(best), (const char *)known.data);
        ckpt_buf_dispose(&known);
        return rc;
    }
    if (named && named->kind != CKPT_VAL_STR)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "args.hf_model_type is not a string");
    if (named)
        return by_model_type("args.hf_model_type", named->u.str.ptr, out);
    if (!best)
        /* none matches: the first family's first failing condition says why */
        return first ? ckpt_family__megatron_require(first, args) : ckpt_error_set(CKPT_ENOTFOUND, "no built-in family");
    *out = best;
    return 0;
}

int ckpt_family_detect(const ckpt_family **out, const char *framework, const char *where, const void *src)
{
    if (!out || !framework || !src)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_detect: NULL argument");
    *out = NULL;
    if (strcmp(framework, CKPT_FAMILY_MEGATRON) == 0)
        return detect_args(out, src);
    return ckpt_family__detect_text(out, where ? where : "config.json", src, strlen(src));
}

int ckpt_family_args_check(const ckpt_family *f, const ckpt_value *args)
{
    if (!f || !args)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_args_check: NULL argument");
    return ckpt_family__megatron_require(f, args);
}
