/* Reading the ops of a rule. Each op says how many tensors it takes and leaves, so the
 * parser follows the count through the list and refuses a rule whose ops cannot end with
 * as many tensors as its "to" names. */
#include "rules_private.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <string.h>

static int parse_axis(const cJSON *op, const char *where, int *axis)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(op, "axis");
    int64_t v;

    if (!item)
        return ckpt_rules__json_fail(where, "%s", "needs \"axis\"");
    if (!ckpt_rules__json_int(item, &v) || v < -CKPT_MAX_DIMS || v >= CKPT_MAX_DIMS)
        return ckpt_rules__json_fail(where, "%s", "\"axis\" must be an integer axis");
    *axis = (int)v;
    return 0;
}

static int parse_perm(const cJSON *item, const char *where, map_op *op)
{
    const cJSON *c;
    unsigned seen = 0;
    int n, i = 0;
    int64_t v;

    n = cJSON_IsArray(item) ? cJSON_GetArraySize(item) : 0;
    if (n < 1 || n > CKPT_MAX_DIMS)
        return ckpt_rules__json_fail(where, "%s", "\"perm\" must be a list of axes");
    cJSON_ArrayForEach(c, item) {
        if (!ckpt_rules__json_int(c, &v) || v < 0 || v >= n || (seen & (1u << v)))
            return ckpt_rules__json_fail(where, "%s", "\"perm\" must hold each axis 0..n-1 once");
        seen |= 1u << v;
        op->perm[i++] = (int)v;
    }
    op->n_perm = n;
    return 0;
}

static int parse_dtype(const cJSON *item, const char *key, const char *where, ckpt_dtype *out)
{
    if (!cJSON_IsString(item) || (*out = ckpt_dtype_from_name(item->valuestring)) == CKPT_DTYPE_INVALID)
        return ckpt_rules__json_fail(where, "\"%s\" must name a dtype", key);
    return 0;
}

typedef struct op_spec {
    const char *name;
    map_op_kind kind;
    const char *keys[6];
} op_spec;

static const op_spec op_specs[] = {
    { "transpose", MAP_OP_TRANSPOSE, { "op", "perm", "comment", NULL } },
    { "concat", MAP_OP_CONCAT, { "op", "axis", "parts", "comment", NULL } },
    { "split", MAP_OP_SPLIT, { "op", "axis", "parts", "comment", NULL } },
    { "deinterleave", MAP_OP_DEINTERLEAVE, { "op", "axis", "blocks", "comment", NULL } },
    { "interleave", MAP_OP_INTERLEAVE, { "op", "axis", "blocks", "comment", NULL } },
    { "reshape", MAP_OP_RESHAPE, { "op", "shape", "inverse_shape", "comment", NULL } },
    { "pad", MAP_OP_PAD, { "op", "axis", "from", "to", "comment", NULL } },
    { "unpad", MAP_OP_UNPAD, { "op", "axis", "from", "to", "comment", NULL } },
    { "cast", MAP_OP_CAST, { "op", "dtype", "inverse_dtype", "comment", NULL } },
};

const char *ckpt_rules__op_name(map_op_kind kind)
{
    size_t i;
    for (i = 0; i < sizeof op_specs / sizeof op_specs[0]; i++)
        if (op_specs[i].kind == kind)
            return op_specs[i].name;
    return "?";
}

int ckpt_rules__parse_op(ckpt_arena *a, const cJSON *obj, const char *where, map_op *op, size_t *n_nodes)
{
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "op");
    const cJSON *item;
    const op_spec *spec = NULL;
    size_t i;
    int rc;

    if (!cJSON_IsObject(obj))
        return ckpt_rules__json_fail(where, "%s", "an op must be an object like {\"op\": \"transpose\"}");
    if (!cJSON_IsString(kind))
        return ckpt_rules__json_fail(where, "%s", "needs \"op\"");
    for (i = 0; i < sizeof op_specs / sizeof op_specs[0] && !spec; i++)
        if (strcmp(op_specs[i].name, kind->valuestring) == 0)
            spec = &op_specs[i];
    if (!spec)
        return ckpt_rules__json_fail(where, "unknown op \"%s\" (transpose, concat, split, deinterleave, "
                                     "interleave, reshape, pad, unpad, cast)", kind->valuestring);
    if ((rc = ckpt_rules__json_keys(obj, spec->keys, where)) < 0)
        return rc;
    op->kind = spec->kind;
    switch (op->kind) {
    case MAP_OP_TRANSPOSE:
        if ((item = cJSON_GetObjectItemCaseSensitive(obj, "perm")) && (rc = parse_perm(item, where, op)) < 0)
            return rc;
        return 0;
    case MAP_OP_CONCAT:
        if ((rc = parse_axis(obj, where, &op->axis)) < 0)
            return rc;
        if ((item = cJSON_GetObjectItemCaseSensitive(obj, "parts"))) {
            if ((rc = ckpt_rules__json_expr_list(a, item, "parts", where, &op->n_exprs, &op->exprs)) < 0)
                return rc;
            if (op->n_exprs != *n_nodes)
                return ckpt_error_set(CKPT_EFORMAT, "%s: \"parts\" has %zu entries for %zu tensors", where,
                                      op->n_exprs, *n_nodes);
        }
        *n_nodes = 1;
        return 0;
    case MAP_OP_SPLIT:
    case MAP_OP_DEINTERLEAVE:
        if (*n_nodes != 1)
            return ckpt_error_set(CKPT_EFORMAT, "%s: %s takes one tensor, not %zu", where, spec->name, *n_nodes);
        if ((rc = parse_axis(obj, where, &op->axis)) < 0)
            return rc;
        item = cJSON_GetObjectItemCaseSensitive(obj, op->kind == MAP_OP_SPLIT ? "parts" : "blocks");
        if ((rc = ckpt_rules__json_expr_list(a, item, op->kind == MAP_OP_SPLIT ? "parts" : "blocks", where,
                                             &op->n_exprs, &op->exprs)) < 0)
            return rc;
        *n_nodes = op->n_exprs;
        return 0;
    case MAP_OP_INTERLEAVE:
        if ((rc = parse_axis(obj, where, &op->axis)) < 0)
            return rc;
        item = cJSON_GetObjectItemCaseSensitive(obj, "blocks");
        if ((rc = ckpt_rules__json_expr_list(a, item, "blocks", where, &op->n_exprs, &op->exprs)) < 0)
            return rc;
        if (op->n_exprs != *n_nodes)
            return ckpt_error_set(CKPT_EFORMAT, "%s: \"blocks\" has %zu entries for %zu tensors", where,
                                  op->n_exprs, *n_nodes);
        *n_nodes = 1;
        return 0;
    case MAP_OP_RESHAPE:
        item = cJSON_GetObjectItemCaseSensitive(obj, "shape");
        if ((rc = ckpt_rules__json_expr_list(a, item, "shape", where, &op->n_exprs, &op->exprs)) < 0)
            return rc;
        if ((item = cJSON_GetObjectItemCaseSensitive(obj, "inverse_shape")) &&
            (rc = ckpt_rules__json_expr_list(a, item, "inverse_shape", where, &op->n_inverse, &op->inverse)) < 0)
            return rc;
        if (op->n_exprs > CKPT_MAX_DIMS || op->n_inverse > CKPT_MAX_DIMS)
            return ckpt_rules__json_fail(where, "%s", "too many dimensions");
        return 0;
    case MAP_OP_PAD:
    case MAP_OP_UNPAD:
        if ((rc = parse_axis(obj, where, &op->axis)) < 0)
            return rc;
        if (!cJSON_GetObjectItemCaseSensitive(obj, "from") || !cJSON_GetObjectItemCaseSensitive(obj, "to"))
            return ckpt_rules__json_fail(where, "%s needs \"from\" and \"to\" lengths", spec->name);
        if ((rc = ckpt_rules__json_expr(a, cJSON_GetObjectItemCaseSensitive(obj, "from"), where, &op->from)) < 0 ||
            (rc = ckpt_rules__json_expr(a, cJSON_GetObjectItemCaseSensitive(obj, "to"), where, &op->to)) < 0)
            return rc;
        return 0;
    case MAP_OP_CAST:
        if ((rc = parse_dtype(cJSON_GetObjectItemCaseSensitive(obj, "dtype"), "dtype", where, &op->dtype)) < 0)
            return rc;
        op->inverse_dtype = CKPT_DTYPE_INVALID;
        if ((item = cJSON_GetObjectItemCaseSensitive(obj, "inverse_dtype")) &&
            (rc = parse_dtype(item, "inverse_dtype", where, &op->inverse_dtype)) < 0)
            return rc;
        return 0;
    }
    return 0;
}
