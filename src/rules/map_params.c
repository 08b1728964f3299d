/* Model hyper-parameters that rules refer to by name. They come from command-line flags
 * first, then from the model's config.json, so a flag can correct a config. */
#include "rules_private.h"

#include <ckpt/sys/io.h>
#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A list of parameter names fits easily; a longer one is cut with "...". */
#define MISSING_MAX 1024

typedef struct param_entry {
    char *name;
    int64_t value;
} param_entry;

struct ckpt_map_params {
    size_t n, cap;
    param_entry *v;
};

int ckpt_map_params_new(ckpt_map_params **out)
{
    if (!out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_params_new: NULL argument");
    if (!(*out = calloc(1, sizeof **out)))
        return ckpt_error_oom();
    return 0;
}

void ckpt_map_params_free(ckpt_map_params *p)
{
    size_t i;

    if (!p)
        return;
    for (i = 0; i < p->n; i++)
        free(p->v[i].name);
    free(p->v);
    free(p);
}

static param_entry *find(const ckpt_map_params *p, const char *name)
{
    size_t i;

    for (i = 0; p && i < p->n; i++)
        if (strcmp(p->v[i].name, name) == 0)
            return &p->v[i];
    return NULL;
}

int ckpt_map_params_set(ckpt_map_params *p, const char *name, int64_t value)
{
    param_entry *e;
    size_t len;

    if (!p || !name || !*name)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_params_set: NULL argument or empty name");
    if ((e = find(p, name))) {
        e->value = value;
        return 0;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        param_entry *v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return ckpt_error_oom();
        p->v = v;
        p->cap = cap;
    }
    len = strlen(name);
    if (!(p->v[p->n].name = malloc(len + 1)))
        return ckpt_error_oom();
    memcpy(p->v[p->n].name, name, len + 1);
    p->v[p->n].value = value;
    p->n++;
    return 0;
}

int ckpt_map_params_get(const ckpt_map_params *p, const char *name, int64_t *value)
{
    const param_entry *e = find(p, name);

    if (!e)
        return 0;
    if (value)
        *value = e->value;
    return 1;
}

/* Integral numbers a double holds exactly; true/false, fractions and huge values are not
 * the sizes a rule can use. */
static int json_integer(const cJSON *item, int64_t *out)
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

int ckpt_map_params_load_json(ckpt_map_params *p, const char *path)
{
    ckpt_file *f = NULL;
    cJSON *root = NULL;
    const cJSON *c;
    size_t preset;
    int64_t v;
    int rc;

    if (!p || !path)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_params_load_json: NULL argument");
    if ((rc = ckpt_file_open(&f, path)) < 0)
        return rc;
    root = f->size ? cJSON_ParseWithLength((const char *)f->data, (size_t)f->size) : NULL;
    if (!root) {
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: not valid JSON", path);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: not a JSON object", path);
        goto done;
    }
    /* Values set before win; among the file's own, the last of a repeated key wins, as
     * when Python reads the file. */
    preset = p->n;
    cJSON_ArrayForEach(c, root) {
        const param_entry *e = find(p, c->string);
        if (!json_integer(c, &v) || (e && (size_t)(e - p->v) < preset))
            continue;
        if ((rc = ckpt_map_params_set(p, c->string, v)) < 0)
            goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    ckpt_file_close(f);
    return rc;
}

typedef struct missing_walk {
    const ckpt_map *m;
    const ckpt_map_params *p;
    char *out;
    size_t len;
    int depth;
} missing_walk;

static int add_missing(missing_walk *w, const char *name)
{
    size_t n = strlen(name), pos = 0;

    /* Already listed? Names are separated by ", ". */
    while (pos < w->len) {
        const char *end = strstr(w->out + pos, ", ");
        size_t item = end ? (size_t)(end - (w->out + pos)) : w->len - pos;
        if (item == n && memcmp(w->out + pos, name, n) == 0)
            return 0;
        pos += item + 2;
    }
    if (w->len + n + 6 >= MISSING_MAX) {
        if (w->len + 4 < MISSING_MAX && !strstr(w->out, "..."))
            w->len += (size_t)snprintf(w->out + w->len, MISSING_MAX - w->len, "%s...", w->len ? ", " : "");
        return 0;
    }
    w->len += (size_t)snprintf(w->out + w->len, MISSING_MAX - w->len, "%s%s", w->len ? ", " : "", name);
    return 0;
}

/* A derived parameter is there when given, or when everything it is made of is. */
static int visit(const char *name, void *payload)
{
    missing_walk *w = payload;
    const map_param_def *def;
    int rc;

    if (ckpt_map_params_get(w->p, name, NULL))
        return 0;
    def = ckpt_rules__param_def(w->m, name);
    if (!def)
        return add_missing(w, name);
    if (w->depth > (int)w->m->n_params)
        return 0;
    w->depth++;
    rc = ckpt_rules__expr_walk(def->expr, visit, w);
    w->depth--;
    return rc;
}

static int visit_exprs(missing_walk *w, const map_expr *const *es, size_t n)
{
    size_t i;
    int rc;

    for (i = 0; i < n; i++)
        if (es[i] && (rc = ckpt_rules__expr_walk(es[i], visit, w)) < 0)
            return rc;
    return 0;
}

static int visit_rules(missing_walk *w, const map_rule_list *list)
{
    size_t i, k;
    int rc;

    for (i = 0; i < list->n; i++) {
        for (k = 0; k < list->v[i].n_ops; k++) {
            const map_op *op = &list->v[i].ops[k];
            const map_expr *lengths[2] = { op->from, op->to };
            if ((rc = visit_exprs(w, op->exprs, op->n_exprs)) < 0 ||
                (rc = visit_exprs(w, op->inverse, op->n_inverse)) < 0 || (rc = visit_exprs(w, lengths, 2)) < 0)
                return rc;
        }
    }
    return 0;
}

int ckpt_map_params_complete(const ckpt_map *m, const ckpt_map_params *p, const char **missing)
{
    static _Thread_local char buf[MISSING_MAX];
    missing_walk w = { m, p, buf, 0, 0 };
    int rc;

    if (!m)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_params_complete: NULL map");
    buf[0] = '\0';
    if ((rc = visit_rules(&w, &m->normalize)) < 0 || (rc = visit_rules(&w, &m->rules)) < 0 ||
        (rc = visit_rules(&w, &m->variants)) < 0)
        return rc;
    if (missing)
        *missing = buf;
    return w.len == 0;
}
