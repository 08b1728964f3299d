/* Inverting a map: every rule runs backwards (from and to swap, ops in reverse order,
 * each op replaced by its inverse), the input layouts the map normalizes become output
 * layouts its inverse can produce on request, and the two kinds of checkpoint trade
 * places. The inverse of llama_pd2te is therefore derived from the one file, never
 * written twice. */
#include "rules_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_rules__rule_label(ckpt_arena *a, map_rule *rule)
{
    ckpt_buf b = CKPT_BUF_INIT;
    size_t i;
    int rc = 0;

    if (rule->name) {
        rule->label = rule->name;
        return 0;
    }
    if ((rc = ckpt_buf_printf(&b, "%s ->", rule->from[0].text)) < 0)
        goto done;
    for (i = 0; i < rule->n_to; i++)
        if ((rc = ckpt_buf_printf(&b, "%s %s", i ? "," : "", rule->to[i].text)) < 0)
            goto done;
    if (!(rule->label = ckpt_arena_strndup(a, (const char *)b.data, b.len)))
        rc = CKPT_ENOMEM;
done:
    ckpt_buf_dispose(&b);
    return rc;
}

size_t ckpt_rules__op_out_count(const map_op *op, size_t n_in)
{
    switch (op->kind) {
    case MAP_OP_CONCAT:
    case MAP_OP_INTERLEAVE:
        return 1;
    case MAP_OP_SPLIT:
        return op->n_exprs ? op->n_exprs : op->n_equal;
    case MAP_OP_DEINTERLEAVE:
        return op->n_exprs;
    default:
        return n_in;
    }
}

static int cannot_invert(const ckpt_map *m, const map_rule *r, size_t i, const char *why)
{
    return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: rule %s: op %s (ops[%zu]) cannot be inverted: %s", m->origin,
                          r->label, ckpt_rules__op_name(r->ops[i].kind), i, why);
}

/* The inverse of op i of r, which sees n_in tensors going forward. */
static int invert_op(const ckpt_map *m, const map_rule *r, size_t i, size_t n_in, map_op *out)
{
    const map_op *op = &r->ops[i];
    int k;

    *out = *op;
    switch (op->kind) {
    case MAP_OP_TRANSPOSE:
        for (k = 0; k < op->n_perm; k++)
            out->perm[op->perm[k]] = k;
        return 0;
    case MAP_OP_CONCAT:
        out->kind = MAP_OP_SPLIT;
        out->n_equal = op->n_exprs ? 0 : n_in;
        return 0;
    case MAP_OP_SPLIT:
        out->kind = MAP_OP_CONCAT;
        out->n_equal = 0;
        return 0;
    case MAP_OP_DEINTERLEAVE:
        out->kind = MAP_OP_INTERLEAVE;
        return 0;
    case MAP_OP_INTERLEAVE:
        out->kind = MAP_OP_DEINTERLEAVE;
        return 0;
    case MAP_OP_RESHAPE:
        if (!op->n_inverse)
            return cannot_invert(m, r, i, "it has no \"inverse_shape\"");
        out->n_exprs = op->n_inverse;
        out->exprs = op->inverse;
        out->n_inverse = op->n_exprs;
        out->inverse = op->exprs;
        return 0;
    case MAP_OP_PAD:
    case MAP_OP_UNPAD:
        out->kind = op->kind == MAP_OP_PAD ? MAP_OP_UNPAD : MAP_OP_PAD;
        out->from = op->to;
        out->to = op->from;
        return 0;
    case MAP_OP_CAST:
        if (op->inverse_dtype == CKPT_DTYPE_INVALID)
            return cannot_invert(m, r, i, "it has no \"inverse_dtype\"");
        out->dtype = op->inverse_dtype;
        out->inverse_dtype = op->dtype;
        return 0;
    }
    return 0;
}

static int invert_rule(ckpt_map *m, map_rule *r)
{
    map_op *ops = NULL;
    map_pattern *tmp;
    size_t i, n, *counts = NULL;
    int rc;

    /* The first "to" pattern becomes the anchor, so it must capture everything. */
    for (i = 0; i < r->n_from + r->n_to; i++) {
        const map_pattern *p = i < r->n_from ? &r->from[i] : &r->to[i - r->n_from];
        if (!ckpt_rules__pattern_covered(p, &r->to[0]))
            return ckpt_error_set(CKPT_EUNSUPPORTED,
                                  "%s: rule %s cannot be inverted: \"%s\" uses a capture that \"%s\" does not have",
                                  m->origin, r->label, p->text, r->to[0].text);
    }
    if (r->n_ops) {
        if (!(ops = ckpt_arena_alloc(m->arena, r->n_ops * sizeof *ops)) ||
            !(counts = ckpt_arena_alloc(m->arena, r->n_ops * sizeof *counts)))
            return CKPT_ENOMEM;
        for (i = 0, n = r->n_from; i < r->n_ops; i++) {
            counts[i] = n;
            n = ckpt_rules__op_out_count(&r->ops[i], n);
        }
        for (i = 0; i < r->n_ops; i++)
            if ((rc = invert_op(m, r, i, counts[i], &ops[r->n_ops - 1 - i])) < 0)
                return rc;
        r->ops = ops;
    }
    tmp = r->when_present;
    r->when_present = r->inverse_when_present;
    r->inverse_when_present = tmp;
    tmp = r->from;
    r->from = r->to;
    r->to = tmp;
    n = r->n_from;
    r->n_from = r->n_to;
    r->n_to = n;
    return ckpt_rules__rule_label(m->arena, r);
}

static int invert_list(ckpt_map *m, map_rule_list *list)
{
    size_t i;
    int rc;

    for (i = 0; i < list->n; i++)
        if ((rc = invert_rule(m, &list->v[i])) < 0)
            return rc;
    return 0;
}

#define SWAP(type, x, y) do { type swap_tmp_ = (x); (x) = (y); (y) = swap_tmp_; } while (0)

int ckpt_rules__map_invert_in_place(ckpt_map *m)
{
    map_rule_list tmp;
    int rc;

    /* The spec's patterns name the tensors of one side. A map whose rules rename tensors
     * would need them rewritten for the other side, which cannot be done in general, so
     * only a map with no rules at all (both sides alike) keeps its layout. */
    if (m->rules.n || m->normalize.n || m->variants.n)
        m->parallel = NULL;
    if ((rc = invert_list(m, &m->rules)) < 0 || (rc = invert_list(m, &m->normalize)) < 0 ||
        (rc = invert_list(m, &m->variants)) < 0)
        return rc;
    tmp = m->normalize;
    m->normalize = m->variants;
    m->variants = tmp;
    SWAP(const char *, m->name, m->inverse_name);
    SWAP(const char *, m->description, m->inverse_description);
    SWAP(const char *, m->source_kind, m->target_kind);
    SWAP(const char *, m->detect_source, m->detect_target);
    if (m->has_inverse_strict) {
        SWAP(size_t, m->n_strict, m->n_inverse_strict);
        SWAP(map_pattern *, m->strict, m->inverse_strict);
    }
    m->inverted = !m->inverted;
    return 0;
}

int ckpt_map_invert(const ckpt_map *m, ckpt_map **out)
{
    if (!m || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_invert: NULL argument");
    return ckpt_rules__map_parse_variant(out, m->json, m->json_len, m->origin, !m->inverted, m->variant);
}
