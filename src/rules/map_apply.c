/* Applying a map to one namespace of tensors, in passes over a table of named nodes:
 * the normalize rules (input layouts brought to the one the rules expect), the rules,
 * then each requested variant. A pass first finds every rule application (an anchor and
 * the sources its captures name), so a source may come before its anchor in the input,
 * then writes the table again in input order, each application's outputs where its
 * first source was. Nothing is read: the outputs are graph nodes. */
#include "rules_private.h"

#include <ckpt/sys/table.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct ckpt_map_result {
    ckpt_arena *arena; /* names and rule labels */
    size_t n;
    ckpt_map_output *v;
};

typedef struct map_table {
    ckpt_map_output *v;
    size_t n, cap;
} map_table;

typedef struct map_app {
    const map_rule *rule;
    size_t anchor, first;
    const size_t *sources; /* n_from table indices, anchor first */
    size_t n_caps;
    map_capture caps[MAP_MAX_CAPTURES]; /* the anchor's */
} map_app;

typedef struct apply_ctx {
    const ckpt_map *map;
    const ckpt_map_params *params;
    ckpt_graph *g;
    ckpt_arena *out;     /* lives as long as the result */
    ckpt_arena *scratch; /* dies with the call */
} apply_ctx;

/* ---- a name -> table index ---- */

/* Index the table, the first of repeated names kept; the first repeat found is reported in
 * *dup. */
static int index_build(ckpt_strmap *ix, const map_table *t, size_t *dup)
{
    size_t i;
    int rc;

    if ((rc = ckpt_strmap_reserve(ix, t->n)) < 0)
        return rc;
    *dup = SIZE_MAX;
    for (i = 0; i < t->n; i++) {
        if ((rc = ckpt_strmap_add(ix, t->v[i].name, strlen(t->v[i].name), i, NULL)) < 0)
            return rc;
        if (rc == 1 && *dup == SIZE_MAX)
            *dup = i;
    }
    return 0;
}

static size_t index_find(const ckpt_strmap *ix, const char *name)
{
    uint64_t i;

    return ckpt_strmap_get(ix, name, strlen(name), &i) ? (size_t)i : SIZE_MAX;
}

static int table_push(map_table *t, const ckpt_map_output *o)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        ckpt_map_output *v;
        if (cap > SIZE_MAX / sizeof *v || !(v = realloc(t->v, cap * sizeof *v)))
            return ckpt_error_oom();
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = *o;
    return 0;
}

static const char *origin_of(const ckpt_map_output *o)
{
    return o->rule ? o->rule : "the input";
}

static int check_unique(const apply_ctx *c, const map_table *t, int input)
{
    ckpt_strmap ix = CKPT_STRMAP_INIT;
    size_t dup, first;
    int rc;

    if ((rc = index_build(&ix, t, &dup)) < 0) {
        ckpt_strmap_dispose(&ix);
        return rc;
    }
    if (dup != SIZE_MAX) {
        first = index_find(&ix, t->v[dup].name);
        if (input)
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: two input tensors have this name", t->v[dup].name);
        else
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: %s makes two tensors of this name (from %s and from %s)",
                                t->v[dup].name, c->map->name, origin_of(&t->v[first]), origin_of(&t->v[dup]));
    }
    ckpt_strmap_dispose(&ix);
    return rc;
}

/* ---- one pass ---- */

/* Every parameter the rule's {M+param} captures name is known, else an error naming it. */
static int shift_params(const apply_ctx *c, const map_rule *r)
{
    size_t k;
    int rc = 0;

    for (k = 1; k < r->n_from && rc == 0; k++)
        rc = ckpt_rules__pattern_params(&r->from[k], c->params, r->label);
    for (k = 0; k < r->n_to && rc == 0; k++)
        rc = ckpt_rules__pattern_params(&r->to[k], c->params, r->label);
    if (rc == 0 && r->when_present)
        rc = ckpt_rules__pattern_params(r->when_present, c->params, r->label);
    return rc;
}

/* The first rule whose anchor matches name (its {M+param} captures not below their
 * parameters) and whose when_present tensor, if it has one, is an input; *err is set where a
 * name could not be made or a parameter is not known. */
static const map_rule *match_anchor(const apply_ctx *c, const ckpt_strmap *ix, const map_rule *rules, size_t n_rules,
                                    const char *name, map_capture *caps, int *err)
{
    size_t r;
    char *want;
    int rc;

    for (r = 0; r < n_rules; r++) {
        if (!ckpt_rules__pattern_match(&rules[r].from[0], name, 0, caps))
            continue;
        if ((rc = ckpt_rules__pattern_shift(&rules[r].from[0], caps, c->params, rules[r].label)) == 0)
            continue;
        if (rc < 0 || (rc = shift_params(c, &rules[r])) < 0) {
            *err = rc;
            return NULL;
        }
        if (!rules[r].when_present)
            return &rules[r];
        want = ckpt_rules__pattern_expand(c->scratch, rules[r].when_present, caps,
                                          ckpt_rules__pattern_capture_count(&rules[r].from[0]), c->params);
        if (!want) {
            *err = CKPT_ENOMEM;
            return NULL;
        }
        if (index_find(ix, want) != SIZE_MAX)
            return &rules[r];
    }
    return NULL;
}

static int two_rules(const apply_ctx *c, const map_table *t, const map_app *apps, size_t owner, size_t idx,
                     const map_rule *rule, size_t anchor)
{
    const map_app *prev = &apps[owner - 1];
    return ckpt_error_set(CKPT_EFORMAT, "%s: two rules of %s use this tensor: %s (with %s) and %s (with %s)",
                          t->v[idx].name, c->map->name, prev->rule->label, t->v[prev->anchor].name, rule->label,
                          t->v[anchor].name);
}

/* Find the applications: owner[i] is 1 + the application that consumes entry i. */
static int find_apps(const apply_ctx *c, const map_rule *rules, size_t n_rules, const map_table *t, size_t *owner,
                     map_app **apps_out, size_t *n_apps)
{
    map_capture caps[MAP_MAX_CAPTURES];
    ckpt_strmap ix = CKPT_STRMAP_INIT;
    map_app *apps = NULL, *grown;
    size_t i, j, dup, n = 0, cap = 0;
    int rc;

    memset(caps, 0, sizeof caps);
    if ((rc = index_build(&ix, t, &dup)) < 0)
        goto done;
    for (i = 0; i < t->n; i++) {
        int err = 0;
        const map_rule *rule = match_anchor(c, &ix, rules, n_rules, t->v[i].name, caps, &err);
        size_t *src;
        if (err) {
            rc = err;
            goto done;
        }
        if (!rule)
            continue;
        if (owner[i]) {
            rc = two_rules(c, t, apps, owner[i], i, rule, i);
            goto done;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            if (!(grown = realloc(apps, cap * sizeof *apps))) {
                rc = ckpt_error_oom();
                goto done;
            }
            apps = grown;
        }
        if (!(src = ckpt_arena_alloc(c->scratch, rule->n_from * sizeof *src))) {
            rc = CKPT_ENOMEM;
            goto done;
        }
        src[0] = i;
        apps[n].rule = rule;
        apps[n].anchor = apps[n].first = i;
        apps[n].sources = src;
        apps[n].n_caps = ckpt_rules__pattern_capture_count(&rule->from[0]);
        memcpy(apps[n].caps, caps, sizeof caps);
        owner[i] = n + 1;
        for (j = 1; j < rule->n_from; j++) {
            char *name = ckpt_rules__pattern_expand(c->scratch, &rule->from[j], caps, apps[n].n_caps, c->params);
            size_t k;
            if (!name) {
                rc = CKPT_ENOMEM;
                goto done;
            }
            k = index_find(&ix, name);
            if (k == SIZE_MAX) {
                rc = ckpt_error_set(CKPT_EFORMAT, "%s: rule %s of %s needs %s as well, and the input has no such "
                                    "tensor", t->v[i].name, rule->label, c->map->name, name);
                goto done;
            }
            if (owner[k]) {
                rc = two_rules(c, t, apps, owner[k], k, rule, i);
                goto done;
            }
            owner[k] = n + 1;
            src[j] = k;
            if (k < apps[n].first)
                apps[n].first = k;
        }
        n++;
    }
    rc = 0;
done:
    ckpt_strmap_dispose(&ix);
    if (rc < 0) {
        free(apps);
        apps = NULL;
        n = 0;
    }
    *apps_out = apps;
    *n_apps = n;
    return rc;
}

/* "fused_qkv + qkv": the rules that made the sources, then this one; a copy owned by the
 * result, which may outlive the map. */
static const char *chain_label(const apply_ctx *c, const map_table *t, const map_app *app)
{
    ckpt_buf b = CKPT_BUF_INIT;
    const char *label;
    size_t j;

    for (j = 0; j < app->rule->n_from; j++) {
        const char *r = t->v[app->sources[j]].rule;
        size_t k;
        for (k = 0; r && k < j; k++)
            if (t->v[app->sources[k]].rule && strcmp(t->v[app->sources[k]].rule, r) == 0)
                r = NULL;
        if (r)
            ckpt_buf_printf(&b, "%s + ", r);
    }
    ckpt_buf_puts(&b, app->rule->label);
    label = b.data ? ckpt_arena_strndup(c->out, (const char *)b.data, b.len) : NULL;
    ckpt_buf_dispose(&b);
    return label;
}

static int run_app(const apply_ctx *c, const map_table *t, const map_app *app, map_table *out)
{
    const map_rule *rule = app->rule;
    const ckpt_node **cur, **next;
    map_eval ev = { c->map, c->params, rule->label, t->v[app->anchor].name };
    size_t n = rule->n_from, k;
    const char *label;
    int rc;

    if (!(cur = ckpt_arena_alloc(c->scratch, n * sizeof *cur)))
        return CKPT_ENOMEM;
    for (k = 0; k < n; k++)
        cur[k] = t->v[app->sources[k]].node;
    for (k = 0; k < rule->n_ops; k++) {
        size_t n_next = ckpt_rules__op_out_count(&rule->ops[k], n);
        if (!(next = ckpt_arena_alloc(c->scratch, n_next * sizeof *next)))
            return CKPT_ENOMEM;
        if ((rc = ckpt_rules__op_run(&ev, c->g, &rule->ops[k], cur, n, next)) < 0)
            return rc;
        cur = next;
        n = n_next;
    }
    CKPT_ASSERT(n == rule->n_to);
    if (!(label = chain_label(c, t, app)))
        return CKPT_ENOMEM;
    for (k = 0; k < n; k++) {
        ckpt_map_output o;
        o.name = ckpt_rules__pattern_expand(c->out, &rule->to[k], app->caps, app->n_caps, c->params);
        o.node = cur[k];
        o.home = t->v[app->anchor].home;
        o.rule = label;
        if (!o.name)
            return CKPT_ENOMEM;
        if ((rc = table_push(out, &o)) < 0)
            return rc;
    }
    return 0;
}

static int run_pass(const apply_ctx *c, const map_rule *rules, size_t n_rules, const map_pattern *strict,
                    size_t n_strict, const map_table *in, map_table *out)
{
    map_capture caps[MAP_MAX_CAPTURES];
    map_app *apps = NULL;
    size_t *owner, n_apps = 0, i, s;
    int rc;

    out->n = 0;
    if (!(owner = calloc(in->n ? in->n : 1, sizeof *owner)))
        return ckpt_error_oom();
    if ((rc = find_apps(c, rules, n_rules, in, owner, &apps, &n_apps)) < 0)
        goto done;
    for (i = 0; i < in->n; i++) {
        if (owner[i]) {
            if (apps[owner[i] - 1].first == i && (rc = run_app(c, in, &apps[owner[i] - 1], out)) < 0)
                goto done;
            continue;
        }
        for (s = 0; s < n_strict; s++) {
            if (ckpt_rules__pattern_match(&strict[s], in->v[i].name, 1, caps)) {
                rc = ckpt_error_set(CKPT_EFORMAT, "%s: no rule of %s matches this tensor", in->v[i].name,
                                    c->map->name);
                goto done;
            }
        }
        if ((rc = table_push(out, &in->v[i])) < 0)
            goto done;
    }
    rc = check_unique(c, out, 0);
done:
    free(apps);
    free(owner);
    return rc;
}

/* ---- the whole application ---- */

/* The rules of the requested output variants, in the order asked, each variant's in the map's
 * order: one variant is every rule of that name (a fused tensor and its fused bias). */
static int find_variants(const ckpt_map *m, const char *const *variants, const map_rule ***out, size_t *n_out)
{
    const map_rule **v;
    size_t n = 0, i, k, used = 0;

    for (n = 0; variants && variants[n]; n++)
        ;
    *out = NULL;
    *n_out = 0;
    if (!n)
        return 0;
    if (n > SIZE_MAX / sizeof *v / (m->variants.n + 1) || !(v = calloc(n * (m->variants.n + 1), sizeof *v)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++) {
        size_t before = used;
        for (k = 0; k < m->variants.n; k++)
            if (strcmp(m->variants.v[k].name, variants[i]) == 0)
                v[used++] = &m->variants.v[k];
        if (used == before) {
            ckpt_buf known = CKPT_BUF_INIT;
            const char *name;
            int rc;
            for (k = 0; (name = ckpt_map_variant_at(m, k)) != NULL; k++)
                ckpt_buf_printf(&known, "%s%s", k ? ", " : "", name);
            if (k)
                rc = ckpt_error_set(CKPT_ENOTFOUND, "%s has no output variant '%s' (it has: %s)", m->name,
                                    variants[i], known.data ? (const char *)known.data : "");
            else
                rc = ckpt_error_set(CKPT_ENOTFOUND, "%s has no output variant '%s' (it has none)", m->name,
                                    variants[i]);
            ckpt_buf_dispose(&known);
            free(v);
            return rc;
        }
    }
    *out = v;
    *n_out = used;
    return 0;
}

/* only_normalize: stop after the normalize rules (no rules, no strict prefixes, no variants). */
static int apply(const ckpt_map *m, const ckpt_map_params *params, ckpt_graph *g, const ckpt_map_input *inputs,
                 size_t n, const char *const *variants, int only_normalize, ckpt_map_result **out)
{
    apply_ctx c = { m, params, g, NULL, NULL };
    map_table a = { NULL, 0, 0 }, b = { NULL, 0, 0 }, tmp;
    const map_rule **wanted = NULL;
    ckpt_map_result *r = NULL;
    size_t n_wanted = 0, i;
    int rc;

    if (!m || !g || !out || (!inputs && n))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_apply: NULL argument");
    *out = NULL;
    if ((rc = find_variants(m, variants, &wanted, &n_wanted)) < 0)
        return rc;
    if (!(r = calloc(1, sizeof *r))) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = ckpt_arena_new(&r->arena)) < 0 || (rc = ckpt_arena_new(&c.scratch)) < 0)
        goto done;
    c.out = r->arena;
    for (i = 0; i < n; i++) {
        ckpt_map_output o = { NULL, inputs[i].node, inputs[i].home, NULL };
        if (!inputs[i].name || !inputs[i].node) {
            rc = ckpt_error_set(CKPT_EINVALID, "ckpt_map_apply: input %zu has no name or node", i);
            goto done;
        }
        if (!(o.name = ckpt_arena_strndup(r->arena, inputs[i].name, strlen(inputs[i].name)))) {
            rc = CKPT_ENOMEM;
            goto done;
        }
        if ((rc = table_push(&a, &o)) < 0)
            goto done;
    }
    if ((rc = check_unique(&c, &a, 1)) < 0)
        goto done;
    if (m->normalize.n) {
        if ((rc = run_pass(&c, m->normalize.v, m->normalize.n, NULL, 0, &a, &b)) < 0)
            goto done;
        tmp = a, a = b, b = tmp;
    }
    if (!only_normalize) {
        if ((rc = run_pass(&c, m->rules.v, m->rules.n, m->strict, m->n_strict, &a, &b)) < 0)
            goto done;
        tmp = a, a = b, b = tmp;
    }
    for (i = 0; i < n_wanted && !only_normalize; i++) {
        if ((rc = run_pass(&c, wanted[i], 1, NULL, 0, &a, &b)) < 0)
            goto done;
        tmp = a, a = b, b = tmp;
    }
    r->n = a.n;
    if (a.n && !(r->v = ckpt_arena_alloc(r->arena, a.n * sizeof *r->v))) {
        rc = CKPT_ENOMEM;
        goto done;
    }
    if (a.n)
        memcpy(r->v, a.v, a.n * sizeof *r->v);
    *out = r;
    r = NULL;
    rc = 0;
done:
    free(wanted);
    free(a.v);
    free(b.v);
    ckpt_arena_free(c.scratch);
    ckpt_map_result_free(r);
    return rc;
}

int ckpt_map_apply(const ckpt_map *m, const ckpt_map_params *params, ckpt_graph *g, const ckpt_map_input *inputs,
                   size_t n, const char *const *variants, ckpt_map_result **out)
{
    return apply(m, params, g, inputs, n, variants, 0, out);
}

int ckpt_map_normalize(const ckpt_map *m, const ckpt_map_params *params, ckpt_graph *g,
                       const ckpt_map_input *inputs, size_t n, ckpt_map_result **out)
{
    return apply(m, params, g, inputs, n, NULL, 1, out);
}

size_t ckpt_map_result_count(const ckpt_map_result *r)
{
    return r ? r->n : 0;
}

const ckpt_map_output *ckpt_map_result_at(const ckpt_map_result *r, size_t i)
{
    return r && i < r->n ? &r->v[i] : NULL;
}

void ckpt_map_result_free(ckpt_map_result *r)
{
    if (!r)
        return;
    ckpt_arena_free(r->arena);
    free(r);
}
