/* Reading a map from JSON. Everything a map says is checked here, before any tensor is
 * seen: unknown keys (a typo would otherwise silently change what a map does), patterns,
 * expressions, and how many tensors each op leaves, so that a rule whose ops do not end
 * with as many tensors as it names in "to" fails at load time, naming the rule. */
#include "parallel_private.h"

#include <ckpt/sys/io.h>
#include <cjson/cJSON.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAP_VERSION 1

static const char *const top_keys[] = { "ckptconv_map", "name", "description", "source_kind", "target_kind",
                                        "inverse", "detect", "params", "strict", "inverse_strict",
                                        "normalize", "rules", "variants", "parallel", "comment", NULL };
static const char *const rule_keys[] = { "name", "from", "to", "ops", "when_present", "inverse_when_present",
                                         "comment", NULL };
static const char *const name_keys[] = { "name", "description", NULL };
static const char *const detect_keys[] = { "source", "target", NULL };
static const char *const variant_keys[] = { "name", "description", "inverse", "rules", "comment", NULL };

static int parse_patterns(ckpt_arena *a, const cJSON *item, const char *key, const char *where, size_t *n_out,
                          map_pattern **out)
{
    char sub[MAP_WHERE_MAX];
    const cJSON *c;
    size_t n, i, k;
    int rc;

    if (cJSON_IsString(item)) {
        n = 1;
    } else if (cJSON_IsArray(item) && cJSON_GetArraySize(item) > 0) {
        n = (size_t)cJSON_GetArraySize(item);
    } else {
        return ckpt_rules__json_fail(where, "\"%s\" must be a pattern or a non-empty list of patterns", key);
    }
    if (!(*out = ckpt_arena_alloc(a, n * sizeof **out)))
        return CKPT_ENOMEM;
    for (i = 0; i < n; i++) {
        const char *text = NULL;
        c = cJSON_IsString(item) ? item : cJSON_GetArrayItem(item, (int)i);
        ckpt_rules__where(sub, sizeof sub, "%s: %s[%zu]", where, key, i);
        if ((rc = ckpt_rules__json_string(a, c, key, sub, &text)) < 0 ||
            (rc = ckpt_rules__pattern_parse(a, text, sub, &(*out)[i])) < 0)
            return rc;
        for (k = 0; k < i; k++)
            if (strcmp((*out)[k].text, text) == 0)
                return ckpt_rules__json_fail(sub, "\"%s\" is listed twice", text);
    }
    *n_out = n;
    return 0;
}

/* "when_present": one pattern, its captures the anchor's (by: the inverse's anchor for
 * "inverse_when_present"); absent: NULL. */
static int parse_condition(ckpt_arena *a, const cJSON *obj, const char *key, const char *where, const map_pattern *by,
                           map_pattern **out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    size_t n;
    int rc;

    *out = NULL;
    if (!item)
        return 0;
    if (!cJSON_IsString(item))
        return ckpt_rules__json_fail(where, "\"%s\" must be one pattern", key);
    if ((rc = parse_patterns(a, item, key, where, &n, out)) < 0)
        return rc;
    if (!ckpt_rules__pattern_covered(*out, by))
        return ckpt_rules__json_fail(where, "\"%s\" uses a capture that \"%s\" does not have", (*out)->text, by->text);
    return 0;
}

static int parse_rule(ckpt_arena *a, const cJSON *obj, const char *where, int need_name, map_rule *r)
{
    const cJSON *ops, *c;
    char sub[MAP_WHERE_MAX];
    size_t i, n_nodes;
    int rc;

    if (!cJSON_IsObject(obj))
        return ckpt_rules__json_fail(where, "%s", "a rule must be an object with \"from\" and \"to\"");
    if ((rc = ckpt_rules__json_keys(obj, rule_keys, where)) < 0 ||
        (rc = ckpt_rules__json_optional(a, obj, "name", NULL, where, &r->name)) < 0)
        return rc;
    if (r->name && !ckpt_rules__is_name(r->name, 1))
        return ckpt_rules__json_fail(where, "rule name \"%s\" may hold only letters, digits, '_', '-' and '.'",
                                     r->name);
    if (need_name && !r->name)
        return ckpt_rules__json_fail(where, "%s", "needs a \"name\" (it names the layout)");
    if (r->name) {
        ckpt_rules__where(sub, sizeof sub, "%s (%s)", where, r->name);
        where = sub;
    }
    if ((rc = parse_patterns(a, cJSON_GetObjectItemCaseSensitive(obj, "from"), "from", where, &r->n_from,
                             &r->from)) < 0 ||
        (rc = parse_patterns(a, cJSON_GetObjectItemCaseSensitive(obj, "to"), "to", where, &r->n_to, &r->to)) < 0)
        return rc;
    if ((rc = parse_condition(a, obj, "when_present", where, &r->from[0], &r->when_present)) < 0 ||
        (rc = parse_condition(a, obj, "inverse_when_present", where, &r->to[0], &r->inverse_when_present)) < 0)
        return rc;
    for (i = 1; i < r->n_from; i++)
        if (!ckpt_rules__pattern_covered(&r->from[i], &r->from[0]))
            return ckpt_rules__json_fail(where, "\"%s\" uses a capture that the first \"from\" pattern does not "
                                         "have", r->from[i].text);
    for (i = 0; i < r->n_to; i++)
        if (!ckpt_rules__pattern_covered(&r->to[i], &r->from[0]))
            return ckpt_rules__json_fail(where, "\"%s\" uses a capture that the first \"from\" pattern does not "
                                         "have", r->to[i].text);
    ops = cJSON_GetObjectItemCaseSensitive(obj, "ops");
    if (ops && !cJSON_IsArray(ops))
        return ckpt_rules__json_fail(where, "%s", "\"ops\" must be a list");
    r->n_ops = ops ? (size_t)cJSON_GetArraySize(ops) : 0;
    if (r->n_ops && !(r->ops = ckpt_arena_alloc(a, r->n_ops * sizeof *r->ops)))
        return CKPT_ENOMEM;
    n_nodes = r->n_from;
    i = 0;
    if (ops) {
        cJSON_ArrayForEach(c, ops) {
            char opwhere[MAP_WHERE_MAX + 32];
            ckpt_rules__where(opwhere, sizeof opwhere, "%s: ops[%zu]", where, i);
            if ((rc = ckpt_rules__parse_op(a, c, opwhere, &r->ops[i], &n_nodes)) < 0)
                return rc;
            i++;
        }
    }
    if (n_nodes != r->n_to)
        return ckpt_error_set(CKPT_EFORMAT, "%s: takes %zu tensor%s and its ops leave %zu, but \"to\" names %zu",
                              where, r->n_from, r->n_from == 1 ? "" : "s", n_nodes, r->n_to);
    return ckpt_rules__rule_label(a, r);
}

static int parse_rules(ckpt_map *m, const cJSON *root, const char *key, const char *origin, int need_name,
                       map_rule_list *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key), *c;
    char where[MAP_WHERE_MAX];
    size_t i = 0, k;
    int rc;

    if (!item)
        return 0;
    if (!cJSON_IsArray(item))
        return ckpt_error_set(CKPT_EFORMAT, "%s: \"%s\" must be a list of rules", origin, key);
    out->n = (size_t)cJSON_GetArraySize(item);
    if (out->n && !(out->v = ckpt_arena_alloc(m->arena, out->n * sizeof *out->v)))
        return CKPT_ENOMEM;
    cJSON_ArrayForEach(c, item) {
        ckpt_rules__where(where, sizeof where, "%s: %s[%zu]", origin, key, i);
        if ((rc = parse_rule(m->arena, c, where, need_name, &out->v[i])) < 0)
            return rc;
        /* normalize rules of one name are one layout (a fused weight and its fused bias): they
         * must take different tensors */
        for (k = 0; need_name && k < i; k++)
            if (strcmp(out->v[k].name, out->v[i].name) == 0 &&
                strcmp(out->v[k].from[0].text, out->v[i].from[0].text) == 0)
                return ckpt_rules__json_fail(where, "two rules named \"%s\" take %s", out->v[i].name,
                                             out->v[i].from[0].text);
        i++;
    }
    return 0;
}

/* The rule of m a variant's rule r stands in for: the one named alike, or for an unnamed rule
 * the one with the same anchor. */
static map_rule *replaced(ckpt_map *m, const map_rule *r)
{
    size_t i;

    for (i = 0; i < m->rules.n; i++) {
        map_rule *o = &m->rules.v[i];
        if (r->name ? o->name && strcmp(o->name, r->name) == 0
                    : !o->name && strcmp(o->from[0].text, r->from[0].text) == 0)
            return o;
    }
    return NULL;
}

static int variant_names(ckpt_map *m, const cJSON *v, const char *where)
{
    const cJSON *inv = cJSON_GetObjectItemCaseSensitive(v, "inverse");
    int rc;

    if ((rc = ckpt_rules__json_optional(m->arena, v, "name", m->name, where, &m->name)) < 0 ||
        (rc = ckpt_rules__json_optional(m->arena, v, "description", m->description, where, &m->description)) < 0)
        return rc;
    if (inv && (!cJSON_IsObject(inv) || (rc = ckpt_rules__json_keys(inv, name_keys, where)) < 0 ||
                (rc = ckpt_rules__json_optional(m->arena, inv, "name", m->inverse_name, where, &m->inverse_name)) < 0 ||
                (rc = ckpt_rules__json_optional(m->arena, inv, "description", m->inverse_description, where,
                                                &m->inverse_description)) < 0))
        return rc < 0 ? rc : ckpt_rules__json_fail(where, "%s", "\"inverse\" must be an object with \"name\" and \"description\"");
    if (!ckpt_rules__is_name(m->name, 1) || !ckpt_rules__is_name(m->inverse_name, 1))
        return ckpt_rules__json_fail(where, "%s", "map names may hold only letters, digits, '_', '-' and '.'");
    return 0;
}

/* "variants": {"local": {"name", "description", "inverse", "rules"}}: implementations of the
 * same conversion that differ in a few rules (Megatron's local and Transformer Engine layer
 * names). Every variant is checked; the one asked for (m->variant) replaces the map's names
 * and its rules the rules they stand in for. */
static int parse_variants(ckpt_map *m, const cJSON *root, const char *origin)
{
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(root, "variants"), *v, *c;
    char where[MAP_WHERE_MAX], rwhere[MAP_WHERE_MAX];
    int found = 0, rc;
    size_t i;

    if (all && !cJSON_IsObject(all))
        return ckpt_error_set(CKPT_EFORMAT, "%s: \"variants\" must be an object of variants", origin);
    cJSON_ArrayForEach(v, all) {
        int chosen = m->variant && strcmp(m->variant, v->string) == 0;
        ckpt_rules__where(where, sizeof where, "%s: variants.%s", origin, v->string);
        if (!cJSON_IsObject(v) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(v, "rules")))
            return ckpt_rules__json_fail(where, "%s", "a variant is an object with \"rules\"");
        if ((rc = ckpt_rules__json_keys(v, variant_keys, where)) < 0 || (chosen && (rc = variant_names(m, v, where)) < 0))
            return rc;
        i = 0;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(v, "rules")) {
            map_rule r, *o;
            ckpt_rules__where(rwhere, sizeof rwhere, "%s: rules[%zu]", where, i++);
            if ((rc = parse_rule(m->arena, c, rwhere, 0, &r)) < 0)
                return rc;
            if (!(o = replaced(m, &r)))
                return ckpt_rules__json_fail(rwhere, "%s", "replaces no rule of the map (none has its name or anchor)");
            if (chosen)
                *o = r;
        }
        found |= chosen;
    }
    if (m->variant && !found)
        return ckpt_error_set(CKPT_ENOTFOUND, "%s: no variant %s", origin, m->variant);
    return 0;
}

static int parse_params(ckpt_map *m, const cJSON *root, const char *origin)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, "params"), *c;
    char where[MAP_WHERE_MAX];
    size_t i = 0, k;
    int rc;

    if (!item)
        return 0;
    ckpt_rules__where(where, sizeof where, "%s: params", origin);
    if (!cJSON_IsObject(item))
        return ckpt_rules__json_fail(where, "%s", "must be an object of name: expression");
    m->n_params = (size_t)cJSON_GetArraySize(item);
    if (m->n_params && !(m->params = ckpt_arena_alloc(m->arena, m->n_params * sizeof *m->params)))
        return CKPT_ENOMEM;
    cJSON_ArrayForEach(c, item) {
        char sub[MAP_WHERE_MAX + 64];
        map_param_def *d = &m->params[i++];
        if (!ckpt_rules__is_name(c->string, 0) || (c->string[0] >= '0' && c->string[0] <= '9'))
            return ckpt_rules__json_fail(where, "\"%s\" is not a parameter name", c->string);
        ckpt_rules__where(sub, sizeof sub, "%s: %s", where, c->string);
        if (!(d->name = ckpt_arena_strndup(m->arena, c->string, strlen(c->string))))
            return CKPT_ENOMEM;
        if ((rc = ckpt_rules__json_expr(m->arena, c, sub, &d->expr)) < 0)
            return rc;
        for (k = 0; k + 1 < i; k++)
            if (strcmp(m->params[k].name, d->name) == 0)
                return ckpt_rules__json_fail(where, "\"%s\" is defined twice", d->name);
    }
    return 0;
}

/* Depth-first over derived parameters: 1 = being expanded, 2 = done. */
typedef struct cycle_walk {
    const ckpt_map *m;
    unsigned char *color;
    const char *bad;
} cycle_walk;

static int cycle_visit(const char *name, void *payload)
{
    cycle_walk *w = payload;
    const map_param_def *d = ckpt_rules__param_def(w->m, name);
    size_t i;
    int rc;

    if (!d)
        return 0;
    i = (size_t)(d - w->m->params);
    if (w->color[i] == 2)
        return 0;
    if (w->color[i] == 1) {
        w->bad = d->name;
        return CKPT_EFORMAT;
    }
    w->color[i] = 1;
    if ((rc = ckpt_rules__expr_walk(d->expr, cycle_visit, w)) < 0)
        return rc;
    w->color[i] = 2;
    return 0;
}

static int check_param_cycles(ckpt_map *m, const char *origin)
{
    cycle_walk w = { m, NULL, NULL };
    size_t i;

    if (!m->n_params)
        return 0;
    if (!(w.color = ckpt_arena_alloc(m->arena, m->n_params)))
        return CKPT_ENOMEM;
    for (i = 0; i < m->n_params; i++)
        if (cycle_visit(m->params[i].name, &w) < 0)
            return ckpt_error_set(CKPT_EFORMAT, "%s: params: \"%s\" is defined in terms of itself", origin, w.bad);
    return 0;
}

static int parse_strict(ckpt_map *m, const cJSON *root, const char *key, const char *origin, size_t *n,
                        map_pattern **out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    char where[MAP_WHERE_MAX];

    if (!item)
        return 0;
    ckpt_rules__where(where, sizeof where, "%s", origin);
    if (!cJSON_IsArray(item))
        return ckpt_rules__json_fail(where, "\"%s\" must be a list of patterns", key);
    if (cJSON_GetArraySize(item) == 0)
        return 0;
    return parse_patterns(m->arena, item, key, where, n, out);
}

static int parse_names(ckpt_map *m, const cJSON *root, const char *origin)
{
    const cJSON *item;
    char where[MAP_WHERE_MAX];
    int rc;

    ckpt_rules__where(where, sizeof where, "%s", origin);
    item = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (!item)
        return ckpt_rules__json_fail(where, "%s", "needs a \"name\"");
    if ((rc = ckpt_rules__json_string(m->arena, item, "name", where, &m->name)) < 0)
        return rc;
    if (!ckpt_rules__is_name(m->name, 1))
        return ckpt_rules__json_fail(where, "map name \"%s\" may hold only letters, digits, '_', '-' and '.'", m->name);
    if ((rc = ckpt_rules__json_optional(m->arena, root, "description", "", where, &m->description)) < 0 ||
        (rc = ckpt_rules__json_optional(m->arena, root, "source_kind", "source", where, &m->source_kind)) < 0 ||
        (rc = ckpt_rules__json_optional(m->arena, root, "target_kind", "target", where, &m->target_kind)) < 0)
        return rc;
    item = cJSON_GetObjectItemCaseSensitive(root, "inverse");
    m->inverse_name = NULL;
    m->inverse_description = NULL;
    if (item) {
        ckpt_rules__where(where, sizeof where, "%s: inverse", origin);
        if (!cJSON_IsObject(item))
            return ckpt_rules__json_fail(where, "%s", "must be an object with \"name\" and \"description\"");
        if ((rc = ckpt_rules__json_keys(item, name_keys, where)) < 0 ||
            (rc = ckpt_rules__json_optional(m->arena, item, "name", NULL, where, &m->inverse_name)) < 0 ||
            (rc = ckpt_rules__json_optional(m->arena, item, "description", NULL, where,
                                            &m->inverse_description)) < 0)
            return rc;
        if (m->inverse_name && !ckpt_rules__is_name(m->inverse_name, 1))
            return ckpt_rules__json_fail(where, "map name \"%s\" may hold only letters, digits, '_', '-' and '.'",
                                         m->inverse_name);
    }
    if (!m->inverse_name || !m->inverse_description) {
        ckpt_buf b = CKPT_BUF_INIT;
        if (!m->inverse_name) {
            rc = ckpt_buf_printf(&b, "%s_inverse", m->name);
            m->inverse_name = rc < 0 ? NULL : ckpt_arena_strndup(m->arena, (const char *)b.data, b.len);
            ckpt_buf_clear(&b);
        }
        if (m->inverse_name && !m->inverse_description) {
            rc = ckpt_buf_printf(&b, "the inverse of %s", m->name);
            m->inverse_description = rc < 0 ? NULL : ckpt_arena_strndup(m->arena, (const char *)b.data, b.len);
        }
        ckpt_buf_dispose(&b);
        if (!m->inverse_name || !m->inverse_description)
            return CKPT_ENOMEM;
    }
    item = cJSON_GetObjectItemCaseSensitive(root, "detect");
    if (item) {
        ckpt_rules__where(where, sizeof where, "%s: detect", origin);
        if (!cJSON_IsObject(item))
            return ckpt_rules__json_fail(where, "%s", "must be an object with \"source\" and \"target\"");
        if ((rc = ckpt_rules__json_keys(item, detect_keys, where)) < 0 ||
            (rc = ckpt_rules__json_optional(m->arena, item, "source", NULL, where, &m->detect_source)) < 0 ||
            (rc = ckpt_rules__json_optional(m->arena, item, "target", NULL, where, &m->detect_target)) < 0)
            return rc;
        if (!m->detect_source || !m->detect_target || !*m->detect_source || !*m->detect_target)
            return ckpt_rules__json_fail(where, "%s", "needs non-empty \"source\" and \"target\" substrings");
    }
    return 0;
}

static int parse_root(ckpt_map *m, const cJSON *root, const char *origin)
{
    const cJSON *version;
    char where[MAP_WHERE_MAX];
    int64_t v;
    int rc;

    ckpt_rules__where(where, sizeof where, "%s", origin);
    if (!cJSON_IsObject(root))
        return ckpt_rules__json_fail(where, "%s", "a map must be a JSON object");
    if ((rc = ckpt_rules__json_keys(root, top_keys, where)) < 0)
        return rc;
    version = cJSON_GetObjectItemCaseSensitive(root, "ckptconv_map");
    if (!version)
        return ckpt_rules__json_fail(where, "%s", "not a ckptconv map (no \"ckptconv_map\": 1)");
    if (!ckpt_rules__json_int(version, &v) || v < 1)
        return ckpt_rules__json_fail(where, "%s", "\"ckptconv_map\" must be a version number");
    if (v != MAP_VERSION)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: map version %" PRId64 " is newer than this library reads (%d)",
                              origin, v, MAP_VERSION);
    if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "rules")))
        return ckpt_rules__json_fail(where, "%s", "needs \"rules\", a list of rules");
    m->has_inverse_strict = cJSON_GetObjectItemCaseSensitive(root, "inverse_strict") != NULL;
    if ((rc = parse_names(m, root, origin)) < 0 || (rc = parse_params(m, root, origin)) < 0 ||
        (rc = check_param_cycles(m, origin)) < 0 ||
        (rc = parse_strict(m, root, "strict", origin, &m->n_strict, &m->strict)) < 0 ||
        (rc = parse_strict(m, root, "inverse_strict", origin, &m->n_inverse_strict, &m->inverse_strict)) < 0 ||
        (rc = parse_rules(m, root, "normalize", origin, 1, &m->normalize)) < 0 ||
        (rc = parse_rules(m, root, "rules", origin, 0, &m->rules)) < 0 || (rc = parse_variants(m, root, origin)) < 0 ||
        (rc = ckpt_rules__parallel_parse(m, root, origin)) < 0)
        return rc;
    return 0;
}

/* Where cJSON stopped, as a line and column a person can find. */
static int json_fail(const char *origin, const char *json, size_t len, const char *end)
{
    size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : 0, i, line = 1, col = 1;

    for (i = 0; i < off; i++) {
        if (json[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return ckpt_error_set(CKPT_EFORMAT, "%s: invalid JSON at line %zu, column %zu", origin, line, col);
}

int ckpt_rules__map_parse(ckpt_map **out, const char *json, size_t len, const char *origin, int inverted)
{
    return ckpt_rules__map_parse_variant(out, json, len, origin, inverted, NULL);
}

int ckpt_rules__map_parse_variant(ckpt_map **out, const char *json, size_t len, const char *origin, int inverted,
                                  const char *variant)
{
    cJSON *root = NULL;
    const char *end = NULL;
    ckpt_map *m;
    char *text;
    int rc;

    *out = NULL;
    if (!(m = calloc(1, sizeof *m)))
        return ckpt_error_oom();
    if ((rc = ckpt_arena_new(&m->arena)) < 0)
        goto done;
    rc = CKPT_ENOMEM;
    if (!(text = ckpt_arena_strndup(m->arena, json ? json : "", json ? len : 0)) ||
        !(m->origin = ckpt_arena_strndup(m->arena, origin, strlen(origin))) ||
        (variant && !(m->variant = ckpt_arena_strndup(m->arena, variant, strlen(variant)))))
        goto done;
    m->json = text;
    m->json_len = json ? len : 0;
    root = cJSON_ParseWithLengthOpts(text, m->json_len, &end, 0);
    if (!root) {
        rc = json_fail(origin, text, m->json_len, end);
        goto done;
    }
    while (end < text + m->json_len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
        end++;
    if (end != text + m->json_len) {
        rc = json_fail(origin, text, m->json_len, end);
        goto done;
    }
    if ((rc = parse_root(m, root, m->origin)) < 0)
        goto done;
    if (inverted && (rc = ckpt_rules__map_invert_in_place(m)) < 0)
        goto done;
    *out = m;
    m = NULL;
    rc = 0;
done:
    cJSON_Delete(root);
    ckpt_map_free(m);
    return rc;
}

int ckpt_map_parse(ckpt_map **out, const char *json, size_t len, const char *origin)
{
    if (!out || (!json && len) || !origin)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_parse: NULL argument");
    return ckpt_rules__map_parse(out, json, len, origin, 0);
}

int ckpt_map_load(ckpt_map **out, const char *path)
{
    ckpt_file *f;
    int rc;

    if (!out || !path)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_load: NULL argument");
    *out = NULL;
    if ((rc = ckpt_file_open(&f, path)) < 0)
        return rc;
    if (f->size > SIZE_MAX / 2)
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: too large for a map", path);
    else
        rc = ckpt_rules__map_parse(out, (const char *)f->data, (size_t)f->size, path, 0);
    ckpt_file_close(f);
    return rc;
}

void ckpt_map_free(ckpt_map *m)
{
    if (!m)
        return;
    ckpt_arena_free(m->arena);
    free(m);
}

const map_param_def *ckpt_rules__param_def(const ckpt_map *m, const char *name)
{
    size_t i;
    for (i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return &m->params[i];
    return NULL;
}

const char *ckpt_map_name(const ckpt_map *m)
{
    return m->name;
}

const char *ckpt_map_description(const ckpt_map *m)
{
    return m->description;
}

const char *ckpt_map_source_kind(const ckpt_map *m)
{
    return m->source_kind;
}

const char *ckpt_map_target_kind(const ckpt_map *m)
{
    return m->target_kind;
}

/* Whether output variant rule i is the first of its name: rules sharing a name are one variant. */
static int first_of_name(const ckpt_map *m, size_t i)
{
    size_t k;

    for (k = 0; k < i; k++)
        if (strcmp(m->variants.v[k].name, m->variants.v[i].name) == 0)
            return 0;
    return 1;
}

size_t ckpt_map_variant_count(const ckpt_map *m)
{
    size_t i, n = 0;

    for (i = 0; i < m->variants.n; i++)
        n += first_of_name(m, i);
    return n;
}

const char *ckpt_map_variant_at(const ckpt_map *m, size_t at)
{
    size_t i;

    for (i = 0; i < m->variants.n; i++)
        if (first_of_name(m, i) && at-- == 0)
            return m->variants.v[i].name;
    return NULL;
}
