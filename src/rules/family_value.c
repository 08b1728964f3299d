/* A model's config in its family's canonical fields: named values in one arena, and the
 * small helpers every reader and writer of them shares. */
#include "family_private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ckpt_family__new_config(ckpt_family_config **out, const ckpt_family *f, const char *where)
{
    ckpt_family_config *c = calloc(1, sizeof *c);
    int rc;

    *out = NULL;
    if (!c)
        return ckpt_error_oom();
    if ((rc = ckpt_arena_new(&c->arena)) < 0) {
        free(c);
        return rc;
    }
    c->family = f;
    if (!(c->where = ckpt_arena_strndup(c->arena, where ? where : "config", strlen(where ? where : "config")))) {
        ckpt_family_config_free(c);
        return CKPT_ENOMEM;
    }
    *out = c;
    return 0;
}

int ckpt_family_config_new(ckpt_family_config **out, const ckpt_family *f, const char *where)
{
    if (!out || !f)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_config_new: NULL argument");
    return ckpt_family__new_config(out, f, where);
}

/* A copy of v in c's arena, strings included (ckpt_value_clone shares them). */
static int copy_value(ckpt_arena *a, const ckpt_value *v, unsigned depth, ckpt_value **out)
{
    ckpt_value *item = NULL;
    size_t i;
    int rc;

    *out = NULL;
    switch (depth > 8 ? CKPT_VAL_OBJECT : v->kind) {
    case CKPT_VAL_STR:
        *out = ckpt_value_new_str(a, v->u.str.ptr, v->u.str.len);
        break;
    case CKPT_VAL_LIST:
    case CKPT_VAL_TUPLE:
        if (!(*out = ckpt_value_new(a, v->kind)))
            return ckpt_error_oom();
        for (i = 0; i < v->u.seq.n; i++)
            if ((rc = copy_value(a, v->u.seq.items[i], depth + 1, &item)) < 0 ||
                (rc = ckpt_value_append(a, *out, item)) < 0)
                return rc;
        break;
    case CKPT_VAL_NONE:
    case CKPT_VAL_BOOL:
    case CKPT_VAL_INT:
    case CKPT_VAL_FLOAT:
        if ((*out = ckpt_value_new(a, v->kind)))
            (*out)->u = v->u;
        break;
    default:
        return ckpt_error_set(CKPT_EINVALID, "a config field is a number, a bool, a string, None or a list of them");
    }
    return *out ? 0 : ckpt_error_oom();
}

int ckpt_family_config_set(ckpt_family_config *c, const char *field, const ckpt_value *v)
{
    ckpt_value *copy = NULL;
    int rc;

    if (!c || !field || !v)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_config_set: NULL argument");
    if ((rc = copy_value(c->arena, v, 0, &copy)) < 0)
        return rc;
    return ckpt_family__set(c, field, copy);
}

void ckpt_family_config_free(ckpt_family_config *c)
{
    if (!c)
        return;
    ckpt_arena_free(c->arena);
    free(c->fields);
    free(c);
}

static family_field *slot(const ckpt_family_config *c, const char *name)
{
    size_t i;

    for (i = 0; c && i < c->n; i++)
        if (strcmp(c->fields[i].name, name) == 0)
            return &c->fields[i];
    return NULL;
}

const ckpt_value *ckpt_family__get(const ckpt_family_config *c, const char *name)
{
    family_field *s = slot(c, name);
    return s ? s->value : NULL;
}

const char *ckpt_family__where(const ckpt_family *f, const ckpt_family_config *c)
{
    return c && c->where ? c->where : f->name;
}

int ckpt_family__set(ckpt_family_config *c, const char *name, ckpt_value *v)
{
    family_field *s = slot(c, name);

    if (!v)
        return CKPT_ENOMEM;
    if (s) {
        s->value = v;
        s->absent = NULL;
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 32;
        family_field *grown = realloc(c->fields, cap * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        c->fields = grown;
        c->cap = cap;
    }
    if (!(name = ckpt_arena_strndup(c->arena, name, strlen(name))))
        return CKPT_ENOMEM;
    c->fields[c->n].name = name;
    c->fields[c->n].absent = NULL;
    c->fields[c->n++].value = v;
    return 0;
}

int ckpt_family__mark_default(ckpt_family_config *c, const char *name, const char *key)
{
    family_field *s = slot(c, name);

    if (s && key && !(s->absent = ckpt_arena_strndup(c->arena, key, strlen(key))))
        return CKPT_ENOMEM;
    return 0;
}

const char *ckpt_family_config_defaulted(const ckpt_family_config *c, const char *field)
{
    family_field *s = field ? slot(c, field) : NULL;
    return s ? s->absent : NULL;
}

int ckpt_family__set_int(ckpt_family_config *c, const char *name, int64_t v)
{
    return ckpt_family__set(c, name, ckpt_value_new_int(c->arena, v));
}

int ckpt_family__set_real(ckpt_family_config *c, const char *name, double v)
{
    return ckpt_family__set(c, name, ckpt_value_new_float(c->arena, v));
}

int ckpt_family__set_bool(ckpt_family_config *c, const char *name, int v)
{
    return ckpt_family__set(c, name, ckpt_value_new_bool(c->arena, v != 0));
}

int ckpt_family__set_str(ckpt_family_config *c, const char *name, const char *s)
{
    return ckpt_family__set(c, name, ckpt_value_new_str(c->arena, s, strlen(s)));
}

int ckpt_family__set_none(ckpt_family_config *c, const char *name)
{
    return ckpt_family__set(c, name, ckpt_value_new(c->arena, CKPT_VAL_NONE));
}

int64_t ckpt_family__int(const ckpt_family_config *c, const char *name, int64_t fallback)
{
    const ckpt_value *v = ckpt_family__get(c, name);

    if (v && v->kind == CKPT_VAL_INT)
        return v->u.integer;
    if (v && v->kind == CKPT_VAL_BOOL)
        return v->u.boolean != 0;
    return fallback;
}

double ckpt_family__real(const ckpt_family_config *c, const char *name, double fallback)
{
    const ckpt_value *v = ckpt_family__get(c, name);

    if (v && v->kind == CKPT_VAL_FLOAT)
        return v->u.real;
    if (v && v->kind == CKPT_VAL_INT)
        return (double)v->u.integer;
    return fallback;
}

const char *ckpt_family__str(const ckpt_family_config *c, const char *name)
{
    const ckpt_value *v = ckpt_family__get(c, name);
    return v && v->kind == CKPT_VAL_STR ? v->u.str.ptr : NULL;
}

int ckpt_family_config_get(const ckpt_family_config *c, const char *field, const ckpt_value **out)
{
    const ckpt_value *v;

    if (!c || !field || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_config_get: NULL argument");
    if (!(v = ckpt_family__get(c, field)))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "family %s has no config field %s",
                               ckpt_family_name(c->family), field);
    *out = v;
    return 0;
}

int ckpt_family_config_set_int(ckpt_family_config *c, const char *field, int64_t v)
{
    if (!c || !field)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_config_set_int: NULL argument");
    return ckpt_family__set_int(c, field, v);
}

const ckpt_family *ckpt_family_config_family(const ckpt_family_config *c)
{
    return c ? c->family : NULL;
}

/* ---- JSON and args lookups ---- */

const cJSON *ckpt_family__field(const cJSON *cfg, const char *name)
{
    const cJSON *v = NULL, *c;

    for (c = cJSON_IsObject(cfg) ? cfg->child : NULL; c; c = c->next)
        if (c->string && strcmp(c->string, name) == 0)
            v = c;
    return v && !cJSON_IsNull(v) ? v : NULL;
}

const cJSON *ckpt_family__path(const cJSON *cfg, const char *path, const char **last)
{
    char part[128];
    const char *dot;

    while ((dot = strchr(path, '.')) && cfg) {
        size_t n = (size_t)(dot - path);
        if (n >= sizeof part)
            return NULL;
        memcpy(part, path, n);
        part[n] = 0;
        cfg = ckpt_family__field(cfg, part);
        if (!cJSON_IsObject(cfg))
            cfg = NULL;
        path = dot + 1;
    }
    *last = path;
    return cfg ? ckpt_family__field(cfg, path) : NULL;
}

int ckpt_family__get_int(const cJSON *v, const char *where, const char *name, int64_t lo, int64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not an integer", where, name);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)FAMILY_MAX_SIZE)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is %.15g, not an integer from %lld to %lld",
                               where, name, v->valuedouble, (long long)lo, FAMILY_MAX_SIZE);
    *out = (int64_t)v->valuedouble;
    return 0;
}

int ckpt_family__known_or(ckpt_buf *b)
{
    const char *k = ckpt_family_known(), *last = strrchr(k, ',');

    if (!last)
        return ckpt_buf_puts(b, k);
    ckpt_buf_append(b, k, (size_t)(last - k));
    return ckpt_buf_printf(b, " or%s", last + 1);
}
