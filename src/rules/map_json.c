/* JSON helpers for reading maps: every value is checked for its type, and every object
 * for keys the format does not have, so that a misspelt key is an error and not a rule
 * that silently does something else. */
#include "rules_private.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ckpt_rules__json_fail(const char *where, const char *fmt, ...)
{
    char why[MAP_WHERE_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ckpt_error_set(CKPT_EFORMAT, "%s: %s", where, why);
}

void ckpt_rules__where(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

int ckpt_rules__json_keys(const cJSON *obj, const char *const *allowed, const char *where)
{
    const cJSON *c, *d;
    size_t i;

    for (c = obj->child; c; c = c->next) {
        for (i = 0; allowed[i] && strcmp(allowed[i], c->string) != 0; i++)
            ;
        if (!allowed[i])
            return ckpt_rules__json_fail(where, "unknown key \"%s\"", c->string);
        for (d = obj->child; d != c; d = d->next)
            if (strcmp(d->string, c->string) == 0)
                return ckpt_rules__json_fail(where, "key \"%s\" appears twice", c->string);
    }
    return 0;
}

int ckpt_rules__json_string(ckpt_arena *a, const cJSON *item, const char *key, const char *where,
                            const char **out)
{
    if (!cJSON_IsString(item))
        return ckpt_rules__json_fail(where, "\"%s\" must be a string", key);
    *out = ckpt_arena_strndup(a, item->valuestring, strlen(item->valuestring));
    return *out ? 0 : CKPT_ENOMEM;
}

int ckpt_rules__json_optional(ckpt_arena *a, const cJSON *obj, const char *key, const char *dflt,
                              const char *where, const char **out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item) {
        *out = dflt;
        return 0;
    }
    return ckpt_rules__json_string(a, item, key, where, out);
}

/* Identifiers name rules on the command line (variants), and parameters in expressions. */
int ckpt_rules__is_name(const char *s, int allow_dash)
{
    if (!*s)
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              (allow_dash && (c == '-' || c == '.'))))
            return 0;
    }
    return 1;
}

/* JSON numbers are doubles to cJSON; beyond 2^53 they are no longer exact. */
int ckpt_rules__json_int(const cJSON *item, int64_t *out)
{
    double v;
    if (!cJSON_IsNumber(item))
        return 0;
    v = item->valuedouble;
    if (v != floor(v) || fabs(v) > 9007199254740992.0)
        return 0;
    *out = (int64_t)v;
    return 1;
}

int ckpt_rules__json_expr(ckpt_arena *a, const cJSON *item, const char *where, const map_expr **out)
{
    int64_t v;
    const char *text = NULL;
    int rc;

    if (ckpt_rules__json_int(item, &v)) {
        *out = ckpt_rules__expr_num(a, v);
        return *out ? 0 : CKPT_ENOMEM;
    }
    if (!cJSON_IsString(item))
        return ckpt_rules__json_fail(where, "%s", "expected an integer or an expression string");
    if ((rc = ckpt_rules__json_string(a, item, "expression", where, &text)) < 0)
        return rc;
    return ckpt_rules__expr_parse(a, text, where, out);
}

int ckpt_rules__json_expr_list(ckpt_arena *a, const cJSON *item, const char *key, const char *where,
                               size_t *n_out, const map_expr ***out)
{
    char sub[MAP_WHERE_MAX];
    const cJSON *c;
    size_t n, i = 0;
    int rc;

    if (!cJSON_IsArray(item) || (n = (size_t)cJSON_GetArraySize(item)) == 0)
        return ckpt_rules__json_fail(where, "\"%s\" must be a non-empty list", key);
    if (!(*out = ckpt_arena_alloc(a, n * sizeof **out)))
        return CKPT_ENOMEM;
    cJSON_ArrayForEach(c, item) {
        ckpt_rules__where(sub, sizeof sub, "%s: %s[%zu]", where, key, i);
        if ((rc = ckpt_rules__json_expr(a, c, sub, &(*out)[i])) < 0)
            return rc;
        i++;
    }
    *n_out = n;
    return 0;
}
