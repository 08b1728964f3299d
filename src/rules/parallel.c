/* Parallel layouts: which entry of a spec describes a tensor, and the lazy graph nodes that
 * merge TP shards into the full tensor or cut a full tensor into shards. Merging and
 * splitting are exact inverses for every kind, so a checkpoint resharded from m ranks to n
 * and back has its original bytes. */
#include "parallel_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- classify ---- */

static int prefix_listed(const parallel_prefixes *p, const char *name)
{
    map_capture caps[MAP_MAX_CAPTURES];
    size_t i;

    for (i = 0; i < p->n; i++)
        if (ckpt_rules__pattern_match(&p->v[i], name, 1, caps))
            return 1;
    return 0;
}

/* The layer capture of name, or -1 when the layer pattern is not a prefix of it. */
static int layer_of(const ckpt_parallel_spec *s, const char *name, map_capture *cap, int64_t *layer)
{
    map_capture caps[MAP_MAX_CAPTURES];
    int64_t v = 0;
    size_t i;

    *layer = -1;
    if (!ckpt_rules__pattern_match(&s->layer, name, 1, caps))
        return 0;
    *cap = caps[0];
    for (i = 0; i < cap->value_len; i++)
        if (CKPT_MUL_OVERFLOWS(v, 10, &v) || CKPT_ADD_OVERFLOWS(v, cap->value[i] - '0', &v))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP,
                                   "%s: layer index %.*s (%s's pattern \"%s\") is too large", name,
                                   (int)cap->value_len, cap->value, ckpt_map_name(s->map), s->layer.text);
    *layer = v;
    return 0;
}

static int default_axis(ckpt_tp_kind tp)
{
    return tp == CKPT_TP_ROW ? 1 : 0;
}

/* The ratio of a sections entry's parts: integers as written, parameters as given. */
static int section_ratio(const ckpt_parallel_spec *s, const parallel_entry *e, const ckpt_map_params *params,
                         const char *name, ckpt_tensor_layout *out)
{
    size_t i;

    out->n_sections = (int)e->n_parts;
    for (i = 0; i < e->n_parts; i++) {
        const char *p = e->parts[i];
        int64_t v = 0;
        if (p[0] >= '0' && p[0] <= '9')
            v = strtoll(p, NULL, 10);
        else if (!ckpt_map_params_get(params, p, &v))
            return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MAP_PARAM,
                                   "%s: parallel layout entry %s of %s needs model parameter '%s'", name, e->label,
                                   ckpt_map_name(s->map), p);
        if (v < 1)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MAP_PARAM,
                                   "%s: parallel layout entry %s of %s: part '%s' is %" PRId64 ", not positive", name,
                                   e->label, ckpt_map_name(s->map), p, v);
        out->sections[i] = v;
    }
    return 0;
}

int ckpt_parallel_classify(const ckpt_parallel_spec *s, const ckpt_map_params *params, const char *name, int ndim,
                           ckpt_tensor_layout *out)
{
    map_capture caps[MAP_MAX_CAPTURES], cap;
    const parallel_entry *hit = NULL;
    size_t i;
    int rc;

    if (!s || !name || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_parallel_classify: NULL argument");
    memset(out, 0, sizeof *out);
    if ((rc = layer_of(s, name, &cap, &out->layer)) < 0)
        return rc;
    out->expert = prefix_listed(&s->expert, name);
    if (prefix_listed(&s->first, name))
        out->stage = CKPT_STAGE_FIRST;
    else if (prefix_listed(&s->last, name))
        out->stage = CKPT_STAGE_LAST;
    else if (prefix_listed(&s->every, name))
        out->stage = CKPT_STAGE_EVERY;
    else
        out->stage = out->layer >= 0 ? CKPT_STAGE_LAYER : CKPT_STAGE_EVERY;
    for (i = 0; i < s->n_entries && !hit; i++) {
        const parallel_entry *e = &s->entries[i];
        int64_t v = 0;
        if (!ckpt_rules__pattern_match(&e->match, name, 0, caps))
            continue;
        if (e->when && !ckpt_map_params_get(params, e->when, &v))
            return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MAP_PARAM,
                                   "%s: parallel layout entry %s of %s needs model parameter '%s'", name, e->label,
                                   ckpt_map_name(s->map), e->when);
        if (!e->when || v != 0)
            hit = e;
    }
    if (hit) {
        out->tp = hit->tp;
        out->axis = hit->tp == CKPT_TP_REPLICATED ? 0 : hit->axis >= 0 ? hit->axis : default_axis(hit->tp);
        out->entry = hit->label;
        out->place = (int)(hit - s->entries);
        if ((rc = section_ratio(s, hit, params, name, out)) < 0)
            return rc;
    } else if (s->has_default) {
        out->tp = s->dflt;
        out->axis = default_axis(s->dflt);
        out->entry = "default";
        out->place = -1;
    } else {
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MAP,
                               "%s: no parallel layout entry of %s matches this tensor", name, ckpt_map_name(s->map));
    }
    if (out->tp != CKPT_TP_REPLICATED && ndim > 0 && out->axis >= ndim)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP,
                               "%s: parallel layout entry %s of %s cuts axis %d, but the tensor has %d dimension%s%s",
                               name, out->entry, ckpt_map_name(s->map), out->axis, ndim, ndim == 1 ? "" : "s",
                               hit && hit->axis < 0 ? "; give the entry an \"axis\"" : "");
    return 0;
}

int ckpt_parallel_rename_layer(const ckpt_parallel_spec *s, const char *name, int64_t layer, ckpt_buf *out)
{
    map_capture cap;
    int64_t old;
    size_t before;
    int rc;

    if (!s || !name || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_parallel_rename_layer: NULL argument");
    if (layer < 0)
        return ckpt_error_set(CKPT_EINVALID, "%s: layer index %" PRId64 " is negative", name, layer);
    if ((rc = layer_of(s, name, &cap, &old)) < 0)
        return rc;
    if (old < 0)
        return ckpt_error_set(CKPT_EINVALID, "%s: holds no layer index (%s's layer pattern is \"%s\")", name,
                              ckpt_map_name(s->map), s->layer.text);
    before = (size_t)(cap.value - name);
    if ((rc = ckpt_buf_append(out, name, before)) < 0 || (rc = ckpt_buf_printf(out, "%" PRId64, layer)) < 0 ||
        (rc = ckpt_buf_puts(out, cap.value + cap.value_len)) < 0)
        return rc;
    return 0;
}

/* ---- merge and split ---- */

#define SHAPE_TEXT_MAX (CKPT_MAX_DIMS * 22 + 4)

static const char *shape_text(const ckpt_node *x, char *buf)
{
    return ckpt_shape_format(ckpt_node_shape(x), ckpt_node_ndim(x), buf, SHAPE_TEXT_MAX);
}

static int same_shape(const ckpt_node *x, const ckpt_node *y)
{
    return ckpt_node_dtype(x) == ckpt_node_dtype(y) && ckpt_node_ndim(x) == ckpt_node_ndim(y) &&
           memcmp(ckpt_node_shape(x), ckpt_node_shape(y), (size_t)ckpt_node_ndim(x) * sizeof(int64_t)) == 0;
}

static int check_axis(const ckpt_tensor_layout *l, const char *name, const ckpt_node *x)
{
    char shape[SHAPE_TEXT_MAX];

    if (l->axis < 0 || l->axis >= ckpt_node_ndim(x))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: the layout cuts axis %d, but the tensor is %s", name, l->axis,
                               shape_text(x, shape));
    return 0;
}

/* Errors of the graph say what failed but not for which tensor. */
static int graph_fail(int rc, const char *name)
{
    if (rc < 0)
        ckpt_error_prefix("%s", name);
    return rc;
}

/* The sections of a layout along its axis: swiglu's are its two halves [gate; up]. */
static int layout_sections(const ckpt_tensor_layout *l, int64_t *ratio)
{
    int i;

    if (l->tp == CKPT_TP_SWIGLU) {
        ratio[0] = ratio[1] = 1;
        return 2;
    }
    for (i = 0; i < l->n_sections && i < CKPT_TP_SECTIONS_MAX; i++)
        ratio[i] = l->sections[i];
    return i;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The sizes of the sections of `len` elements; 0 when len is not in their ratio (taken in
 * lowest terms: a shard of 4:2:2 sections may be 2 + 1 + 1 long). */
static int section_sizes(const int64_t *ratio, int n, int64_t len, int64_t *sizes)
{
    int64_t sum = 0, g = 0;
    int i;

    for (i = 0; i < n; i++)
        g = gcd64(g, ratio[i]);
    for (i = 0; i < n; i++)
        sum += ratio[i] / (g ? g : 1);
    if (n < 1 || sum <= 0 || len % sum)
        return 0;
    for (i = 0; i < n; i++)
        sizes[i] = len / sum * (ratio[i] / g);
    return 1;
}

static const char *ratio_text(const int64_t *ratio, int n, char *buf, size_t cap)
{
    size_t len = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? ":" : "", ratio[i]);
    return buf;
}

static int not_in_ratio(const ckpt_tensor_layout *l, const char *name, const ckpt_node *x, int shard, int code)
{
    char shape[SHAPE_TEXT_MAX], ratio[128];
    int64_t r[CKPT_TP_SECTIONS_MAX] = { 0 }, len = ckpt_node_shape(x)[l->axis];
    int n = layout_sections(l, r);

    if (l->tp == CKPT_TP_SWIGLU)
        return ckpt_error_setc(code, CKPT_ERRCLASS_LAYOUT,
                               "%s: %s %s has %" PRId64 " along axis %d, which is not two halves [gate; up]", name,
                               shard ? "a swiglu shard" : "swiglu tensor", shape_text(x, shape), len, l->axis);
    return ckpt_error_setc(code, CKPT_ERRCLASS_LAYOUT,
                           "%s: %s %s has %" PRId64 " along axis %d, which is not in the sections' ratio %s", name,
                           shard ? "a shard" : "the tensor", shape_text(x, shape), len, l->axis,
                           ratio_text(r, n, ratio, sizeof ratio));
}

/* [a; b; ...] from the ranks' [a_r; b_r; ...]: every shard cut in its sections, then every
 * rank's first section, every rank's second, ... One concatenation of views of the shards,
 * where regrouping a concatenation would cut across its parts, which the graph cannot do
 * lazily. */
static int merge_sections(ckpt_graph *g, const ckpt_tensor_layout *l, const char *name,
                          const ckpt_node *const *shards, size_t n, const ckpt_node **out)
{
    int64_t ratio[CKPT_TP_SECTIONS_MAX] = { 0 }, sizes[CKPT_TP_SECTIONS_MAX] = { 0 };
    const ckpt_node **parts, *pieces[CKPT_TP_SECTIONS_MAX];
    int k = layout_sections(l, ratio), i;
    size_t r;
    int rc = 0;

    if (!section_sizes(ratio, k, ckpt_node_shape(shards[0])[l->axis], sizes))
        return not_in_ratio(l, name, shards[0], 1, CKPT_EFORMAT);
    if (n == 1) {
        *out = shards[0];
        return 0;
    }
    if (!(parts = malloc((size_t)k * n * sizeof *parts)))
        return ckpt_error_oom();
    for (r = 0; r < n && rc == 0; r++) {
        rc = ckpt_node_split(g, shards[r], l->axis, (size_t)k, sizes, pieces);
        for (i = 0; i < k && rc == 0; i++)
            parts[(size_t)i * n + r] = pieces[i];
    }
    if (rc == 0)
        rc = ckpt_node_concat(g, parts, (size_t)k * n, l->axis, out);
    free(parts);
    return graph_fail(rc, name);
}

int ckpt_parallel_merge(ckpt_graph *g, const ckpt_tensor_layout *l, const char *name, const ckpt_node *const *shards,
                        size_t n, const ckpt_node **out)
{
    char want[SHAPE_TEXT_MAX], got[SHAPE_TEXT_MAX];
    size_t i;
    int rc;

    if (!g || !l || !name || !shards || !out || n == 0)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_parallel_merge: NULL argument or no shards");
    for (i = 0; i < n; i++)
        if (!shards[i])
            return ckpt_error_set(CKPT_EINVALID, "%s: ckpt_parallel_merge: shard %zu is NULL", name, i);
    /* Every kind splits into equal parts, so shards that differ were not cut this way. */
    for (i = 1; i < n; i++)
        if (!same_shape(shards[i], shards[0]))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: TP rank %zu holds %s %s, rank 0 holds %s %s", name, i,
                                   ckpt_dtype_name(ckpt_node_dtype(shards[i])), shape_text(shards[i], got),
                                   ckpt_dtype_name(ckpt_node_dtype(shards[0])), shape_text(shards[0], want));
    if (l->tp == CKPT_TP_REPLICATED) {
        *out = shards[0];
        return 0;
    }
    if ((rc = check_axis(l, name, shards[0])) < 0)
        return rc;
    switch (l->tp) {
    case CKPT_TP_COLUMN:
    case CKPT_TP_ROW:
    case CKPT_TP_VOCAB:
        if (n == 1) {
            *out = shards[0];
            return 0;
        }
        return graph_fail(ckpt_node_concat(g, shards, n, l->axis, out), name);
    case CKPT_TP_SWIGLU:
    case CKPT_TP_SECTIONS:
        return merge_sections(g, l, name, shards, n, out);
    default:
        return ckpt_error_set(CKPT_EINVALID, "%s: unknown TP kind %d", name, (int)l->tp);
    }
}

/* n equal parts of x along axis; len must divide by n. */
static int split_equal(ckpt_graph *g, const ckpt_node *x, int axis, size_t n, const ckpt_node **outs)
{
    int64_t *sizes, part = ckpt_node_shape(x)[axis] / (int64_t)n;
    size_t i;
    int rc;

    if (n == 1) {
        outs[0] = x;
        return 0;
    }
    if (!(sizes = malloc(n * sizeof *sizes)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++)
        sizes[i] = part;
    rc = ckpt_node_split(g, x, axis, n, sizes, outs);
    free(sizes);
    return rc;
}

static int does_not_divide(const char *name, const char *what, int64_t len, int axis, size_t n)
{
    return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                           "%s: %s %" PRId64 " along axis %d, which does not divide into %zu TP rank%s", name, what,
                           len, axis, n, n == 1 ? "" : "s");
}

/* Rank r's [a_r; b_r; ...]: the r-th parts of each section, side by side. Built from slices
 * and one small concatenation per rank, so that a shard stays a view that can itself be cut
 * again (merged, or resharded once more) without materialising anything. */
static int split_sections(ckpt_graph *g, const ckpt_tensor_layout *l, const char *name, const ckpt_node *full,
                          size_t n, const ckpt_node **outs)
{
    int64_t ratio[CKPT_TP_SECTIONS_MAX] = { 0 }, sizes[CKPT_TP_SECTIONS_MAX] = { 0 }, at;
    const ckpt_node *pieces[CKPT_TP_SECTIONS_MAX];
    int k = layout_sections(l, ratio), i;
    size_t r;
    int rc = 0;

    if (!section_sizes(ratio, k, ckpt_node_shape(full)[l->axis], sizes))
        return not_in_ratio(l, name, full, 0, CKPT_EINVALID);
    for (i = 0; i < k; i++)
        if ((uint64_t)sizes[i] % n) {
            char what[64];
            if (l->tp == CKPT_TP_SWIGLU)
                snprintf(what, sizeof what, "each swiglu half (gate, up) has");
            else
                snprintf(what, sizeof what, "section %d has", i);
            return does_not_divide(name, what, sizes[i], l->axis, n);
        }
    if (n == 1) {
        outs[0] = full;
        return 0;
    }
    for (r = 0; r < n && rc == 0; r++) {
        for (i = 0, at = 0; i < k && rc == 0; at += sizes[i], i++)
            rc = ckpt_node_slice(g, full, l->axis, at + (int64_t)r * (sizes[i] / (int64_t)n), sizes[i] / (int64_t)n,
                                 &pieces[i]);
        if (rc == 0)
            rc = ckpt_node_concat(g, pieces, (size_t)k, l->axis, &outs[r]);
    }
    return graph_fail(rc, name);
}

int ckpt_parallel_split(ckpt_graph *g, const ckpt_tensor_layout *l, const char *name, const ckpt_node *full, size_t n,
                        const ckpt_node **outs)
{
    int64_t len;
    size_t i;
    int rc;

    if (!g || !l || !name || !full || !outs || n == 0)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_parallel_split: NULL argument or no ranks");
    if (l->tp == CKPT_TP_REPLICATED) {
        for (i = 0; i < n; i++)
            outs[i] = full;
        return 0;
    }
    if ((rc = check_axis(l, name, full)) < 0)
        return rc;
    len = ckpt_node_shape(full)[l->axis];
    switch (l->tp) {
    case CKPT_TP_COLUMN:
    case CKPT_TP_ROW:
    case CKPT_TP_VOCAB:
        if ((uint64_t)len % n)
            return does_not_divide(name, "the tensor has", len, l->axis, n);
        return graph_fail(split_equal(g, full, l->axis, n, outs), name);
    case CKPT_TP_SWIGLU:
    case CKPT_TP_SECTIONS:
        return split_sections(g, l, name, full, n, outs);
    default:
        return ckpt_error_set(CKPT_EINVALID, "%s: unknown TP kind %d", name, (int)l->tp);
    }
}
