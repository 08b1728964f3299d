/* Reading a map's "parallel" section. As with the rest of a map, everything is checked at
 * load time: unknown keys, patterns, split kinds, axes and parameter names, and entries that
 * an earlier one would always shadow, so that a typo cannot quietly change how a tensor is
 * cut across ranks. */
#include "parallel_private.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <string.h>

static const char *const section_keys[] = { "layer",     "expert",  "first_stage", "last_stage", "every_stage",
                                            "tensors",   "default", "comment",     NULL };
static const char *const entry_keys[] = { "match", "tp", "axis", "when", "parts", "name", "comment", NULL };

static const char *const kind_names[] = { "replicated", "column", "row", "vocab", "swiglu", "sections" };

static int parse_kind(const cJSON *item, const char *key, const char *where, ckpt_tp_kind *out)
{
    size_t i;

    if (!cJSON_IsString(item))
        return ckpt_rules__json_fail(where, "\"%s\" must be one of replicated, column, row, vocab, swiglu, sections",
                                     key);
    for (i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++)
        if (strcmp(item->valuestring, kind_names[i]) == 0) {
            *out = (ckpt_tp_kind)i;
            return 0;
        }
    return ckpt_rules__json_fail(where, "\"%s\": unknown kind \"%s\" (replicated, column, row, vocab, swiglu or sections)",
                                 key, item->valuestring);
}

static int parse_prefixes(ckpt_arena *a, const cJSON *sec, const char *key, const char *where, parallel_prefixes *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(sec, key), *c;
    char sub[MAP_WHERE_MAX];
    size_t i = 0;
    int rc;

    out->n = 0;
    out->v = NULL;
    if (!item)
        return 0;
    if (!cJSON_IsArray(item))
        return ckpt_rules__json_fail(where, "\"%s\" must be a list of patterns", key);
    out->n = (size_t)cJSON_GetArraySize(item);
    if (out->n && !(out->v = ckpt_arena_alloc(a, out->n * sizeof *out->v)))
        return CKPT_ENOMEM;
    cJSON_ArrayForEach(c, item) {
        const char *text = NULL;
        ckpt_rules__where(sub, sizeof sub, "%s: %s[%zu]", where, key, i);
        if ((rc = ckpt_rules__json_string(a, c, key, sub, &text)) < 0 ||
            (rc = ckpt_rules__pattern_parse(a, text, sub, &out->v[i])) < 0)
            return rc;
        i++;
    }
    return 0;
}

static int same_when(const parallel_entry *x, const parallel_entry *y)
{
    return (!x->when && !y->when) || (x->when && y->when && strcmp(x->when, y->when) == 0);
}

/* "parts" of a sections entry: 2 to CKPT_TP_SECTIONS_MAX parameter names or positive
 * integers, kept as text and looked up when a tensor is classified. */
static int parse_parts(ckpt_arena *a, const cJSON *parts, ckpt_tp_kind tp, const char *where, parallel_entry *e)
{
    const cJSON *c;
    char number[32];
    size_t i = 0;

    if (tp != CKPT_TP_SECTIONS)
        return parts ? ckpt_rules__json_fail(where, "%s", "\"parts\" belongs to a sections entry") : 0;
    if (!cJSON_IsArray(parts) || cJSON_GetArraySize(parts) < 2 || cJSON_GetArraySize(parts) > CKPT_TP_SECTIONS_MAX)
        return ckpt_rules__json_fail(where, "a sections entry needs \"parts\": 2 to %d parameter names or integers",
                                     CKPT_TP_SECTIONS_MAX);
    e->n_parts = (size_t)cJSON_GetArraySize(parts);
    if (!(e->parts = ckpt_arena_alloc(a, e->n_parts * sizeof *e->parts)))
        return CKPT_ENOMEM;
    cJSON_ArrayForEach(c, parts) {
        const char *text;
        if (cJSON_IsNumber(c) && c->valuedouble >= 1 && c->valuedouble == (double)(int64_t)c->valuedouble) {
            snprintf(number, sizeof number, "%lld", (long long)c->valuedouble);
            text = number;
        } else if (cJSON_IsString(c) && ckpt_rules__is_name(c->valuestring, 0) &&
                   !(c->valuestring[0] >= '0' && c->valuestring[0] <= '9')) {
            text = c->valuestring;
        } else {
            return ckpt_rules__json_fail(where, "\"parts\"[%zu] is neither a parameter name nor a positive integer", i);
        }
        if (!(e->parts[i++] = ckpt_arena_strndup(a, text, strlen(text))))
            return CKPT_ENOMEM;
    }
    return 0;
}

static int parse_entry(ckpt_arena *a, const cJSON *obj, const char *where, parallel_entry *e)
{
    const cJSON *axis;
    const char *text = NULL;
    char sub[MAP_WHERE_MAX];
    int64_t v;
    int rc;

    if (!cJSON_IsObject(obj))
        return ckpt_rules__json_fail(where, "%s", "an entry must be an object with \"match\" and \"tp\"");
    if ((rc = ckpt_rules__json_keys(obj, entry_keys, where)) < 0 ||
        (rc = ckpt_rules__json_optional(a, obj, "name", NULL, where, &e->label)) < 0 ||
        (rc = ckpt_rules__json_optional(a, obj, "when", NULL, where, &e->when)) < 0)
        return rc;
    if (e->label && !ckpt_rules__is_name(e->label, 1))
        return ckpt_rules__json_fail(where, "entry name \"%s\" may hold only letters, digits, '_', '-' and '.'",
                                     e->label);
    if (e->label) {
        ckpt_rules__where(sub, sizeof sub, "%s (%s)", where, e->label);
        where = sub;
    }
    if (!cJSON_GetObjectItemCaseSensitive(obj, "match"))
        return ckpt_rules__json_fail(where, "%s", "needs \"match\", a pattern");
    if ((rc = ckpt_rules__json_string(a, cJSON_GetObjectItemCaseSensitive(obj, "match"), "match", where, &text)) < 0 ||
        (rc = ckpt_rules__pattern_parse(a, text, where, &e->match)) < 0)
        return rc;
    if (!e->label)
        e->label = e->match.text;
    if (!cJSON_GetObjectItemCaseSensitive(obj, "tp"))
        return ckpt_rules__json_fail(where, "%s", "needs \"tp\": replicated, column, row, vocab, swiglu or sections");
    if ((rc = parse_kind(cJSON_GetObjectItemCaseSensitive(obj, "tp"), "tp", where, &e->tp)) < 0)
        return rc;
    if (e->when && (!ckpt_rules__is_name(e->when, 0) || (e->when[0] >= '0' && e->when[0] <= '9')))
        return ckpt_rules__json_fail(where, "\"when\": \"%s\" is not a parameter name", e->when);
    if ((rc = parse_parts(a, cJSON_GetObjectItemCaseSensitive(obj, "parts"), e->tp, where, e)) < 0)
        return rc;
    e->axis = -1;
    axis = cJSON_GetObjectItemCaseSensitive(obj, "axis");
    if (axis) {
        if (e->tp == CKPT_TP_REPLICATED)
            return ckpt_rules__json_fail(where, "%s", "\"axis\" means nothing for a replicated tensor");
        if (!ckpt_rules__json_int(axis, &v) || v < 0 || v >= CKPT_MAX_DIMS)
            return ckpt_rules__json_fail(where, "\"axis\" must be an integer from 0 to %d", CKPT_MAX_DIMS - 1);
        e->axis = (int)v;
    }
    return 0;
}

static int parse_entries(ckpt_parallel_spec *s, ckpt_arena *a, const cJSON *sec, const char *where)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(sec, "tensors"), *c;
    char sub[MAP_WHERE_MAX];
    size_t i = 0, k;
    int rc;

    if (!cJSON_IsArray(item))
        return ckpt_rules__json_fail(where, "%s", "needs \"tensors\", a list of entries");
    s->n_entries = (size_t)cJSON_GetArraySize(item);
    if (s->n_entries && !(s->entries = ckpt_arena_alloc(a, s->n_entries * sizeof *s->entries)))
        return CKPT_ENOMEM;
    cJSON_ArrayForEach(c, item) {
        parallel_entry *e = &s->entries[i];
        memset(e, 0, sizeof *e);
        ckpt_rules__where(sub, sizeof sub, "%s: tensors[%zu]", where, i);
        if ((rc = parse_entry(a, c, sub, e)) < 0)
            return rc;
        /* An earlier entry with the same pattern and condition takes every name this one
         * could: it would never apply, which is always a mistake in the map. */
        for (k = 0; k < i; k++)
            if (strcmp(s->entries[k].match.text, e->match.text) == 0 && same_when(&s->entries[k], e))
                return ckpt_rules__json_fail(sub,
                                             "tensors[%zu] already matches \"%s\"%s%s, so this entry never applies", k,
                                             e->match.text, e->when ? " when " : "", e->when ? e->when : "");
        i++;
    }
    return 0;
}

int ckpt_rules__parallel_parse(ckpt_map *m, const cJSON *root, const char *origin)
{
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(root, "parallel"), *item;
    char where[MAP_WHERE_MAX];
    ckpt_parallel_spec *s;
    const char *text = NULL;
    int rc;

    if (!sec)
        return 0;
    ckpt_rules__where(where, sizeof where, "%s: parallel", origin);
    if (!cJSON_IsObject(sec))
        return ckpt_rules__json_fail(where, "%s", "must be an object with \"layer\" and \"tensors\"");
    if ((rc = ckpt_rules__json_keys(sec, section_keys, where)) < 0)
        return rc;
    if (!(s = ckpt_arena_alloc(m->arena, sizeof *s)))
        return CKPT_ENOMEM;
    memset(s, 0, sizeof *s);
    s->map = m;
    item = cJSON_GetObjectItemCaseSensitive(sec, "layer");
    if (!item)
        return ckpt_rules__json_fail(where, "%s", "needs \"layer\", the pattern of a layer's prefix");
    if ((rc = ckpt_rules__json_string(m->arena, item, "layer", where, &text)) < 0 ||
        (rc = ckpt_rules__pattern_parse(m->arena, text, where, &s->layer)) < 0)
        return rc;
    if (ckpt_rules__pattern_capture_count(&s->layer) != 1)
        return ckpt_rules__json_fail(where, "\"layer\": \"%s\" must have exactly one capture, the layer index", text);
    if ((rc = parse_prefixes(m->arena, sec, "expert", where, &s->expert)) < 0 ||
        (rc = parse_prefixes(m->arena, sec, "first_stage", where, &s->first)) < 0 ||
        (rc = parse_prefixes(m->arena, sec, "last_stage", where, &s->last)) < 0 ||
        (rc = parse_prefixes(m->arena, sec, "every_stage", where, &s->every)) < 0 ||
        (rc = parse_entries(s, m->arena, sec, where)) < 0)
        return rc;
    item = cJSON_GetObjectItemCaseSensitive(sec, "default");
    if (item) {
        if ((rc = parse_kind(item, "default", where, &s->dflt)) < 0)
            return rc;
        s->has_default = 1;
    }
    m->parallel = s;
    return 0;
}

const ckpt_parallel_spec *ckpt_map_parallel(const ckpt_map *m)
{
    return m ? m->parallel : NULL;
}
