/* Running a rule's ops on graph nodes. Sizes come from the map's expressions; before
 * handing them to the graph, each is checked against the tensor so that a mismatch says
 * which tensor, which rule, and which parameter values did not fit, which is what a user
 * with a wrong --num-key-value-heads needs to read. */
#include "rules_private.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int op_fail(const map_eval *ev, const map_op *op, int code, const char *fmt, ...) CKPT_FORMAT_PRINTF(4, 5);

static int op_fail(const map_eval *ev, const map_op *op, int code, const char *fmt, ...)
{
    char why[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ckpt_error_set(code, "%s: rule %s of %s: %s: %s", ev->tensor, ev->rule, ckpt_map_name(ev->map),
                          ckpt_rules__op_name(op->kind), why);
}

/* Graph errors name the operation; say which rule asked for it. */
static int graph_fail(const map_eval *ev, const map_op *op, int rc)
{
    ckpt_error_prefix("%s: rule %s of %s: %s", ev->tensor, ev->rule, ckpt_map_name(ev->map),
                      ckpt_rules__op_name(op->kind));
    return rc;
}

/* The op's axis counted from the front, or a negative error code: returned rather than
 * stored through a pointer so that no caller holds an axis that was never set. */
static int resolve_axis(const map_eval *ev, const map_op *op, const ckpt_node *x)
{
    int ndim = ckpt_node_ndim(x);
    int a = op->axis < 0 ? op->axis + ndim : op->axis;

    if (a < 0 || a >= ndim)
        return op_fail(ev, op, CKPT_EFORMAT, "axis %d is out of range for a tensor of %d dimension%s", op->axis,
                       ndim, ndim == 1 ? "" : "s");
    return a;
}

/* "4:2:2 = num_attention_heads : num_key_value_heads : num_key_value_heads with
 * num_attention_heads=4, num_key_value_heads=2": values and where they came from. */
static void describe_values(const map_eval *ev, const map_expr *const *es, const int64_t *vals, size_t n,
                            char *out, size_t cap)
{
    ckpt_buf b = CKPT_BUF_INIT, params = CKPT_BUF_INIT;
    size_t i, literal = 0;

    for (i = 0; i < n; i++) {
        ckpt_buf_printf(&b, "%s%" PRId64, i ? ":" : "", vals[i]);
        literal += es[i]->kind == MAP_EXPR_NUM;
    }
    for (i = 0; literal < n && i < n; i++)
        ckpt_buf_printf(&b, "%s%s", i ? " : " : " = ", es[i]->text);
    ckpt_rules__expr_describe_params(ev, es, n, &params);
    if (params.len > 2)
        ckpt_buf_printf(&b, " with %s", (const char *)params.data + 2);
    snprintf(out, cap, "%s", b.data ? (const char *)b.data : "");
    ckpt_buf_dispose(&b);
    ckpt_buf_dispose(&params);
}

/* "64, 32, 32": the tensors' lengths along axis, for messages. */
static void sizes_along(const ckpt_node *const *in, size_t n, int axis, char *out, size_t cap)
{
    size_t i, len = 0;

    out[0] = '\0';
    for (i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%" PRId64, i ? ", " : "",
                                ckpt_node_ndim(in[i]) > axis ? ckpt_node_shape(in[i])[axis] : -1);
}

static int eval_all(const map_eval *ev, const map_op *op, const map_expr *const *es, size_t n, int64_t *vals,
                    int64_t min)
{
    size_t i;
    int rc;

    for (i = 0; i < n; i++) {
        if ((rc = ckpt_rules__expr_eval(ev, es[i], &vals[i])) < 0)
            return rc;
        if (vals[i] < min)
            return op_fail(ev, op, CKPT_EFORMAT, "\"%s\" = %" PRId64 " is %s", es[i]->text, vals[i],
                           min > 0 ? "not positive" : "negative");
    }
    return 0;
}

static int run_transpose(const map_eval *ev, ckpt_graph *g, const map_op *op, const ckpt_node *x,
                         const ckpt_node **out)
{
    int ndim = ckpt_node_ndim(x), rc;

    if (op->n_perm) {
        if (ndim != op->n_perm)
            return op_fail(ev, op, CKPT_EFORMAT, "\"perm\" has %d axes, the tensor %d", op->n_perm, ndim);
        rc = ckpt_node_permute(g, x, op->perm, out);
    } else {
        if (ndim != 2)
            return op_fail(ev, op, CKPT_EFORMAT, "without \"perm\" it swaps the axes of a 2-D tensor, not of %d-D",
                           ndim);
        rc = ckpt_node_transpose(g, x, 0, 1, out);
    }
    return rc < 0 ? graph_fail(ev, op, rc) : 0;
}

/* With "parts", the inputs' sizes along the axis must be in that ratio, when the
 * parameters are known; a map that only renames and joins needs none. */
static int check_concat(const map_eval *ev, const map_op *op, const ckpt_node *const *in, size_t n, int axis,
                        int64_t *parts)
{
    char desc[512], sizes[256];
    int64_t a, b;
    size_t i;
    int rc;

    for (i = 0; i < n; i++) {
        rc = ckpt_rules__expr_eval(ev, op->exprs[i], &parts[i]);
        if (rc == CKPT_ENOTFOUND) {
            ckpt_error_clear();
            return 0;
        }
        if (rc < 0)
            return rc;
        if (parts[i] <= 0)
            return op_fail(ev, op, CKPT_EFORMAT, "\"%s\" = %" PRId64 " is not positive", op->exprs[i]->text,
                           parts[i]);
    }
    for (i = 1; i < n; i++) {
        if (ckpt_node_ndim(in[i]) <= axis)
            return 0; /* the graph refuses the concatenation with its own message */
        if (CKPT_MUL_OVERFLOWS(ckpt_node_shape(in[i])[axis], parts[0], &a) ||
            CKPT_MUL_OVERFLOWS(ckpt_node_shape(in[0])[axis], parts[i], &b) || a != b)
            break;
    }
    if (i == n)
        return 0;
    sizes_along(in, n, axis, sizes, sizeof sizes);
    describe_values(ev, op->exprs, parts, n, desc, sizeof desc);
    return op_fail(ev, op, CKPT_EFORMAT, "along axis %d the tensors have %s, not in the ratio %s", axis, sizes, desc);
}

static int run_split(const map_eval *ev, ckpt_graph *g, const map_op *op, const ckpt_node *x, int64_t *vals,
                     const ckpt_node **out)
{
    size_t n = op->n_exprs ? op->n_exprs : op->n_equal, i;
    int64_t dim, sum = 0, prod;
    char desc[512];
    int axis, rc;

    if ((axis = resolve_axis(ev, op, x)) < 0)
        return axis;
    dim = ckpt_node_shape(x)[axis];
    if (op->n_exprs) {
        if ((rc = eval_all(ev, op, op->exprs, n, vals, 1)) < 0)
            return rc;
    } else {
        for (i = 0; i < n; i++)
            vals[i] = 1;
    }
    for (i = 0; i < n; i++)
        if (CKPT_ADD_OVERFLOWS(sum, vals[i], &sum))
            return op_fail(ev, op, CKPT_EFORMAT, "the parts overflow 64-bit integers");
    for (i = 0; i < n; i++) {
        if (CKPT_MUL_OVERFLOWS(dim, vals[i], &prod) || prod % sum) {
            if (op->n_exprs) {
                memcpy(desc, "parts ", 7);
                describe_values(ev, op->exprs, vals, n, desc + 6, sizeof desc - 6);
            } else {
                snprintf(desc, sizeof desc, "%zu equal parts", n);
            }
            return op_fail(ev, op, CKPT_EFORMAT, "axis %d of length %" PRId64 " does not divide into %s", axis, dim,
                           desc);
        }
        vals[i] = prod / sum;
    }
    rc = ckpt_node_split(g, x, axis, n, vals, out);
    return rc < 0 ? graph_fail(ev, op, rc) : 0;
}

/* (De)interleave: the axis is a run of groups of sum(blocks) elements. */
static int run_regroup(const map_eval *ev, ckpt_graph *g, const map_op *op, const ckpt_node *const *in,
                       size_t n_in, int64_t *blocks, const ckpt_node **out)
{
    size_t n = op->n_exprs, i;
    int64_t group = 0, groups = -1, dim;
    char desc[512];
    int axis, rc;

    if ((axis = resolve_axis(ev, op, in[0])) < 0)
        return axis;
    if ((rc = eval_all(ev, op, op->exprs, n, blocks, 1)) < 0)
        return rc;
    for (i = 0; i < n; i++)
        if (CKPT_ADD_OVERFLOWS(group, blocks[i], &group))
            return op_fail(ev, op, CKPT_EFORMAT, "the blocks overflow 64-bit integers");
    if (op->kind == MAP_OP_DEINTERLEAVE) {
        dim = ckpt_node_shape(in[0])[axis];
        if (dim % group) {
            describe_values(ev, op->exprs, blocks, n, desc, sizeof desc);
            return op_fail(ev, op, CKPT_EFORMAT, "axis %d of length %" PRId64 " is not a whole number of groups of "
                           "blocks %s", axis, dim, desc);
        }
        rc = ckpt_node_deinterleave(g, in[0], axis, n, blocks, out);
        return rc < 0 ? graph_fail(ev, op, rc) : 0;
    }
    for (i = 0; i < n_in; i++) {
        if (ckpt_node_ndim(in[i]) <= axis)
            break;
        dim = ckpt_node_shape(in[i])[axis];
        if (dim % blocks[i] || (groups >= 0 && dim / blocks[i] != groups))
            break;
        groups = dim / blocks[i];
    }
    if (i < n_in) {
        char sizes[256];
        sizes_along(in, n_in, axis, sizes, sizeof sizes);
        describe_values(ev, op->exprs, blocks, n, desc, sizeof desc);
        return op_fail(ev, op, CKPT_EFORMAT, "along axis %d the tensors have %s, not the same number of blocks %s",
                       axis, sizes, desc);
    }
    rc = ckpt_node_interleave(g, in, n_in, axis, blocks, out);
    return rc < 0 ? graph_fail(ev, op, rc) : 0;
}

static int run_reshape(const map_eval *ev, ckpt_graph *g, const map_op *op, const ckpt_node *x,
                       const ckpt_node **out)
{
    int64_t shape[CKPT_MAX_DIMS];
    size_t i, unknown = 0;
    int rc;

    if ((rc = eval_all(ev, op, op->exprs, op->n_exprs, shape, -1)) < 0)
        return rc;
    for (i = 0; i < op->n_exprs; i++)
        unknown += shape[i] == -1;
    if (unknown > 1)
        return op_fail(ev, op, CKPT_EFORMAT, "only one dimension may be -1");
    rc = ckpt_node_reshape(g, x, (int)op->n_exprs, shape, out);
    return rc < 0 ? graph_fail(ev, op, rc) : 0;
}

static int run_pad(const map_eval *ev, ckpt_graph *g, const map_op *op, const ckpt_node *x, const ckpt_node **out)
{
    int64_t from, to, len;
    int axis, rc;

    if ((axis = resolve_axis(ev, op, x)) < 0)
        return axis;
    if ((rc = ckpt_rules__expr_eval(ev, op->from, &from)) < 0 || (rc = ckpt_rules__expr_eval(ev, op->to, &to)) < 0)
        return rc;
    len = ckpt_node_shape(x)[axis];
    if (len != from)
        return op_fail(ev, op, CKPT_EFORMAT, "axis %d has length %" PRId64 ", not %" PRId64 " (\"%s\")", axis, len,
                       from, op->from->text);
    if (op->kind == MAP_OP_PAD ? to < from : (to > from || to < 0))
        return op_fail(ev, op, CKPT_EFORMAT, "cannot go from %" PRId64 " to %" PRId64 " (\"%s\")", from, to,
                       op->to->text);
    rc = op->kind == MAP_OP_PAD ? ckpt_node_pad(g, x, axis, to, out) : ckpt_node_slice(g, x, axis, 0, to, out);
    return rc < 0 ? graph_fail(ev, op, rc) : 0;
}

int ckpt_rules__op_run(const map_eval *ev, ckpt_graph *g, const map_op *op, const ckpt_node *const *in,
                       size_t n_in, const ckpt_node **out)
{
    size_t n_vals = op->n_exprs > op->n_equal ? op->n_exprs : op->n_equal, i;
    int64_t *vals = NULL;
    int axis, rc = 0;

    if (n_vals && !(vals = malloc(n_vals * sizeof *vals)))
        return ckpt_error_oom();
    switch (op->kind) {
    case MAP_OP_CONCAT:
        if ((rc = axis = resolve_axis(ev, op, in[0])) < 0)
            break;
        if (op->n_exprs && (rc = check_concat(ev, op, in, n_in, axis, vals)) < 0)
            break;
        if ((rc = ckpt_node_concat(g, in, n_in, axis, out)) < 0)
            rc = graph_fail(ev, op, rc);
        break;
    case MAP_OP_SPLIT:
        rc = run_split(ev, g, op, in[0], vals, out);
        break;
    case MAP_OP_DEINTERLEAVE:
    case MAP_OP_INTERLEAVE:
        rc = run_regroup(ev, g, op, in, n_in, vals, out);
        break;
    default:
        for (i = 0; i < n_in && rc >= 0; i++) {
            if (op->kind == MAP_OP_TRANSPOSE)
                rc = run_transpose(ev, g, op, in[i], &out[i]);
            else if (op->kind == MAP_OP_RESHAPE)
                rc = run_reshape(ev, g, op, in[i], &out[i]);
            else if (op->kind == MAP_OP_PAD || op->kind == MAP_OP_UNPAD)
                rc = run_pad(ev, g, op, in[i], &out[i]);
            else if ((rc = ckpt_node_cast(g, in[i], op->dtype, &out[i])) < 0)
                rc = graph_fail(ev, op, rc);
        }
        break;
    }
    free(vals);
    return rc < 0 ? rc : 0;
}
