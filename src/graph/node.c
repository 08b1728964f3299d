/* Graph nodes: leaves, grouping, casts, concatenation, padding, queries and descriptions.
 * Shape-changing operations (permute, reshape, slice, regrouping) are in node_shape.c. */
#include "node.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_graph_new(ckpt_graph **out)
{
    ckpt_graph *g = calloc(1, sizeof *g);
    int rc;

    *out = NULL;
    if (!g)
        return ckpt_error_oom();
    rc = ckpt_arena_new(&g->arena);
    if (rc < 0) {
        free(g);
        return rc;
    }
    *out = g;
    return 0;
}

void ckpt_graph_free(ckpt_graph *g)
{
    if (!g)
        return;
    ckpt_arena_free(g->arena);
    free(g);
}

ckpt_node *ckpt_node__alloc(ckpt_graph *g, node_kind kind)
{
    ckpt_node *x = ckpt_arena_alloc(g->arena, sizeof *x);
    if (x)
        x->kind = kind;
    return x;
}

void ckpt_node__set_identity(ckpt_node *x)
{
    int i;
    x->ndim = x->pndim;
    for (i = 0; i < x->pndim; i++) {
        x->shape[i] = x->pshape[i];
        x->group_end[i] = i + 1;
    }
}

int ckpt_node__history(ckpt_graph *g, ckpt_node *x, const char *op, const ckpt_node *const *inputs, size_t n)
{
    x->op = op ? ckpt_arena_strndup(g->arena, op, strlen(op)) : NULL;
    x->inputs = n ? ckpt_arena_alloc(g->arena, n * sizeof *x->inputs) : NULL;
    if ((op && !x->op) || (n && !x->inputs))
        return CKPT_ENOMEM;
    if (n)
        memcpy(x->inputs, inputs, n * sizeof *inputs);
    x->n_inputs = n;
    return 0;
}

int ckpt_node__axis(const ckpt_node *x, int axis, const char *op, int *out)
{
    int a = axis < 0 ? axis + x->ndim : axis;
    if (a < 0 || a >= x->ndim)
        return ckpt_error_set(CKPT_EINVALID, "%s: axis %d is out of range for a %d-dimensional tensor", op, axis,
                              x->ndim);
    *out = a;
    return 0;
}

int ckpt_node__copy(ckpt_graph *g, const ckpt_node *x, ckpt_node **out)
{
    ckpt_node *y = ckpt_node__alloc(g, x->kind);
    if (!y)
        return CKPT_ENOMEM;
    *y = *x;
    y->op = NULL;
    y->n_inputs = 0;
    y->inputs = NULL;
    *out = y;
    return 0;
}

int ckpt_node__explode(ckpt_graph *g, const ckpt_node *x, ckpt_node **out)
{
    int rc = ckpt_node__copy(g, x, out);
    if (rc == 0)
        ckpt_node__set_identity(*out);
    return rc;
}

int ckpt_node__regroup(ckpt_graph *g, const ckpt_node *x, int n, const int *ends, ckpt_node **out)
{
    ckpt_node *y;
    int i, d = 0, rc = ckpt_node__copy(g, x, &y);

    if (rc < 0)
        return rc;
    y->ndim = n;
    for (i = 0; i < n; i++) {
        int64_t size = 1;
        for (; d < ends[i]; d++)
            size *= x->shape[d];
        y->shape[i] = size;
        y->group_end[i] = ends[i] ? x->group_end[ends[i] - 1] : 0;
    }
    *out = y;
    return 0;
}

static int check_shape(int ndim, const int64_t *shape, const char *op)
{
    int i;
    if (ndim < 0 || ndim > CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EINVALID, "%s: %d dimensions (at most %d)", op, ndim, CKPT_MAX_DIMS);
    for (i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return ckpt_error_set(CKPT_EINVALID, "%s: dimension %d is negative (%lld)", op, i, (long long)shape[i]);
    return 0;
}

int ckpt_node_tensor(ckpt_graph *g, const ckpt_tensor *t, const ckpt_node **out)
{
    ckpt_node *x;
    int rc;

    if ((rc = ckpt_tensor_validate(t)) < 0)
        return rc;
    if (!(x = ckpt_node__alloc(g, NODE_LEAF)))
        return CKPT_ENOMEM;
    x->source = t;
    x->view = *t;
    x->dtype = t->dtype;
    x->pndim = t->ndim;
    memcpy(x->pshape, t->shape, sizeof x->pshape);
    ckpt_node__set_identity(x);
    *out = x;
    return 0;
}

int ckpt_node_full(ckpt_graph *g, ckpt_dtype dtype, int ndim, const int64_t *shape, double value,
                   const ckpt_node **out)
{
    ckpt_node *x;
    int rc = ckpt_node_zeros(g, dtype, ndim, shape, out);

    if (rc < 0 || value == 0)
        return rc;
    x = (ckpt_node *)*out;
    if (ckpt_dtype_size(dtype) > sizeof x->fill || !ckpt_dtype_can_convert(dtype, CKPT_DTYPE_F64))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "full: cannot fill %s with %g", ckpt_dtype_name(dtype), value);
    return ckpt_dtype_convert(dtype, x->fill, CKPT_DTYPE_F64, &value, 1);
}

int ckpt_node_zeros(ckpt_graph *g, ckpt_dtype dtype, int ndim, const int64_t *shape, const ckpt_node **out)
{
    ckpt_node *x;
    int rc = check_shape(ndim, shape, "zeros");

    if (rc < 0)
        return rc;
    if (!ckpt_dtype_size(dtype))
        return ckpt_error_set(CKPT_EINVALID, "zeros: invalid dtype");
    if (!(x = ckpt_node__alloc(g, NODE_ZEROS)))
        return CKPT_ENOMEM;
    x->dtype = dtype;
    x->pndim = ndim;
    if (ndim)
        memcpy(x->pshape, shape, (size_t)ndim * sizeof *shape);
    ckpt_node__set_identity(x);
    *out = x;
    return 0;
}

/* ---- casts ---- */

static int cast_core(ckpt_graph *g, const ckpt_node *x, ckpt_dtype dtype, ckpt_node **out);

static int cast_children(ckpt_graph *g, ckpt_node *y, ckpt_dtype dtype)
{
    const ckpt_node **kids = ckpt_arena_alloc(g->arena, y->n_children * sizeof *kids);
    size_t i;

    if (!kids)
        return CKPT_ENOMEM;
    for (i = 0; i < y->n_children; i++) {
        ckpt_node *k;
        int rc = cast_core(g, y->children[i], dtype, &k);
        if (rc < 0)
            return rc;
        kids[i] = k;
    }
    y->children = kids;
    return 0;
}

static int cast_core(ckpt_graph *g, const ckpt_node *x, ckpt_dtype dtype, ckpt_node **out)
{
    ckpt_node *y;
    int rc = ckpt_node__copy(g, x, &y);

    if (rc < 0)
        return rc;
    y->dtype = dtype;
    if (x->kind == NODE_LEAF && x->dtype != dtype) {
        if (y->n_casts == NODE_MAX_CASTS)
            return ckpt_error_set(CKPT_EUNSUPPORTED, "cast: more than %d successive casts of '%s'", NODE_MAX_CASTS,
                                  x->source->name ? x->source->name : "?");
        y->casts[y->n_casts++] = dtype;
    } else if (x->kind == NODE_CONCAT) {
        rc = cast_children(g, y, dtype);
    } else if (x->kind == NODE_ZEROS) {
        memset(y->fill, 0, sizeof y->fill);
        rc = ckpt_dtype_convert(dtype, y->fill, x->dtype, x->fill, 1);
    }
    *out = y;
    return rc;
}

int ckpt_node_cast(ckpt_graph *g, const ckpt_node *x, ckpt_dtype dtype, const ckpt_node **out)
{
    ckpt_node *y;
    char op[64];
    int rc;

    if (!ckpt_dtype_can_convert(dtype, x->dtype))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "cast: cannot convert %s to %s", ckpt_dtype_name(x->dtype),
                              ckpt_dtype_name(dtype));
    if ((rc = cast_core(g, x, dtype, &y)) < 0)
        return rc;
    snprintf(op, sizeof op, "cast[%s]", ckpt_dtype_name(dtype));
    if ((rc = ckpt_node__history(g, y, op, &x, 1)) < 0)
        return rc;
    *out = y;
    return 0;
}

/* ---- concatenation and padding ---- */

int ckpt_node_concat(ckpt_graph *g, const ckpt_node *const *xs, size_t n, int axis, const ckpt_node **out)
{
    ckpt_node *y;
    char op[64];
    size_t i;
    int a = 0, d, rc;

    if (n == 0)
        return ckpt_error_set(CKPT_EINVALID, "concat: no inputs");
    if ((rc = ckpt_node__axis(xs[0], axis, "concat", &a)) < 0)
        return rc;
    if (!(y = ckpt_node__alloc(g, NODE_CONCAT)))
        return CKPT_ENOMEM;
    y->dtype = xs[0]->dtype;
    y->pndim = xs[0]->ndim;
    memcpy(y->pshape, xs[0]->shape, sizeof y->pshape);
    y->pshape[a] = 0;
    for (i = 0; i < n; i++) {
        if (xs[i]->dtype != y->dtype)
            return ckpt_error_set(CKPT_EINVALID, "concat: input %zu is %s, input 0 is %s (cast first)", i,
                                  ckpt_dtype_name(xs[i]->dtype), ckpt_dtype_name(y->dtype));
        if (xs[i]->ndim != y->pndim)
            return ckpt_error_set(CKPT_EINVALID, "concat: input %zu has %d dimensions, input 0 has %d", i,
                                  xs[i]->ndim, y->pndim);
        for (d = 0; d < y->pndim; d++)
            if (d != a && xs[i]->shape[d] != xs[0]->shape[d])
                return ckpt_error_set(CKPT_EINVALID,
                                      "concat along axis %d: input %zu has %lld in dimension %d, input 0 has %lld", a,
                                      i, (long long)xs[i]->shape[d], d, (long long)xs[0]->shape[d]);
        if (CKPT_ADD_OVERFLOWS(y->pshape[a], xs[i]->shape[a], &y->pshape[a]))
            return ckpt_error_set(CKPT_EINVALID, "concat: axis %d overflows", a);
    }
    y->axis = a;
    y->n_children = n;
    y->children = ckpt_arena_alloc(g->arena, n * sizeof *y->children);
    if (!y->children)
        return CKPT_ENOMEM;
    memcpy(y->children, xs, n * sizeof *xs);
    ckpt_node__set_identity(y);
    snprintf(op, sizeof op, "concat[axis=%d]", a);
    if ((rc = ckpt_node__history(g, y, op, xs, n)) < 0)
        return rc;
    *out = y;
    return 0;
}

int ckpt_node_pad(ckpt_graph *g, const ckpt_node *x, int axis, int64_t new_len, const ckpt_node **out)
{
    const ckpt_node *parts[2], *z;
    int64_t shape[CKPT_MAX_DIMS];
    ckpt_node *y;
    char op[64];
    int a = 0, rc;

    if ((rc = ckpt_node__axis(x, axis, "pad", &a)) < 0)
        return rc;
    if (new_len < x->shape[a])
        return ckpt_error_set(CKPT_EINVALID, "pad: axis %d has %lld, cannot pad to %lld (use a slice)", a,
                              (long long)x->shape[a], (long long)new_len);
    memcpy(shape, x->shape, sizeof shape);
    shape[a] = new_len - x->shape[a];
    parts[0] = x;
    if ((rc = ckpt_node_zeros(g, x->dtype, x->ndim, shape, &z)) < 0)
        return rc;
    parts[1] = z;
    if ((rc = ckpt_node_concat(g, parts, 2, a, &z)) < 0)
        return rc;
    if ((rc = ckpt_node__copy(g, z, &y)) < 0)
        return rc;
    snprintf(op, sizeof op, "pad[axis=%d, to %lld]", a, (long long)new_len);
    if ((rc = ckpt_node__history(g, y, op, &x, 1)) < 0)
        return rc;
    *out = y;
    return 0;
}

/* ---- queries ---- */

ckpt_dtype ckpt_node_dtype(const ckpt_node *x)
{
    return x->dtype;
}

int ckpt_node_ndim(const ckpt_node *x)
{
    return x->ndim;
}

const int64_t *ckpt_node_shape(const ckpt_node *x)
{
    return x->shape;
}

int64_t ckpt_node_numel(const ckpt_node *x)
{
    int64_t n = 1;
    int i;
    for (i = 0; i < x->pndim; i++)
        n *= x->pshape[i];
    return n;
}

const ckpt_tensor *ckpt_node__plain_view(const ckpt_node *x)
{
    return x->kind == NODE_LEAF && x->n_casts == 0 ? &x->view : NULL;
}

int ckpt_node_is_copy(const ckpt_node *x)
{
    const ckpt_tensor *t = x->source;
    int i;

    if (x->kind != NODE_LEAF || x->n_casts || x->ndim != t->ndim || x->view.offset != t->offset ||
        !ckpt_tensor_is_contiguous(&x->view))
        return 0;
    for (i = 0; i < t->ndim; i++)
        if (x->shape[i] != t->shape[i])
            return 0;
    return ckpt_tensor_is_contiguous(t);
}

static int describe(const ckpt_node *x, ckpt_buf *out, int depth)
{
    size_t i;
    int rc;

    if (depth > 64)
        return ckpt_buf_puts(out, "...");
    if (!x->op) {
        if (x->kind == NODE_LEAF)
            return ckpt_buf_puts(out, x->source->name ? x->source->name : "?");
        if (x->kind == NODE_ZEROS) {
            static const unsigned char zero[sizeof x->fill];
            if (memcmp(x->fill, zero, sizeof zero) == 0)
                return ckpt_buf_puts(out, "zeros");
            return ckpt_buf_printf(out, "full(%g)", ckpt_dtype_load_f64(x->dtype, x->fill));
        }
        return ckpt_buf_puts(out, "concat");
    }
    if ((rc = ckpt_buf_puts(out, x->op)) < 0 || (rc = ckpt_buf_putc(out, '(')) < 0)
        return rc;
    for (i = 0; i < x->n_inputs; i++) {
        if (i && (rc = ckpt_buf_puts(out, ", ")) < 0)
            return rc;
        if ((rc = describe(x->inputs[i], out, depth + 1)) < 0)
            return rc;
    }
    return ckpt_buf_putc(out, ')');
}

int ckpt_node_describe(const ckpt_node *x, ckpt_buf *out)
{
    return describe(x, out, 0);
}
