/* Shape operations on graph nodes: permute, reshape, slice, split and the regroupings.
 *
 * Each works on the physical dimensions (see node.h) and pushes through concatenations
 * into their parts, so the result is again strided views, zeros and concatenations. The
 * logical shape is then a regrouping of the new physical dimensions. */
#include "node.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int permute_logical(ckpt_graph *g, const ckpt_node *x, const int *perm, ckpt_node **out);
static int reshape_logical(ckpt_graph *g, const ckpt_node *x, int ndim, const int64_t *shape, ckpt_node **out);
static int slice_logical(ckpt_graph *g, const ckpt_node *x, int axis, int64_t start, int64_t len, ckpt_node **out);

static int make_concat(ckpt_graph *g, const ckpt_node *like, const int64_t *pshape, int axis,
                       const ckpt_node **kids, size_t n, ckpt_node **out)
{
    ckpt_node *y = ckpt_node__alloc(g, NODE_CONCAT);

    if (!y)
        return CKPT_ENOMEM;
    y->dtype = like->dtype;
    y->pndim = like->pndim;
    memcpy(y->pshape, pshape, sizeof y->pshape);
    y->axis = axis;
    y->n_children = n;
    y->children = kids;
    ckpt_node__set_identity(y);
    *out = y;
    return 0;
}

static const ckpt_node **new_kids(ckpt_graph *g, size_t n)
{
    return ckpt_arena_alloc(g->arena, (n ? n : 1) * sizeof(const ckpt_node *));
}

/* ---- permute ---- */

/* Logical dims of the result = x's physical dims in the order pperm. */
static int permute_phys(ckpt_graph *g, const ckpt_node *x, const int *pperm, ckpt_node **out)
{
    ckpt_node *y;
    int i, rc = ckpt_node__explode(g, x, &y);

    if (rc < 0)
        return rc;
    for (i = 0; i < x->pndim; i++) {
        y->pshape[i] = x->pshape[pperm[i]];
        if (x->kind == NODE_LEAF) {
            y->view.shape[i] = x->view.shape[pperm[i]];
            y->view.stride[i] = x->view.stride[pperm[i]];
        }
        if (x->kind == NODE_CONCAT && pperm[i] == x->axis)
            y->axis = i;
    }
    if (x->kind == NODE_CONCAT) {
        const ckpt_node **kids = new_kids(g, x->n_children);
        size_t k;
        if (!kids)
            return CKPT_ENOMEM;
        for (k = 0; k < x->n_children; k++) {
            ckpt_node *c;
            if ((rc = permute_logical(g, x->children[k], pperm, &c)) < 0)
                return rc;
            kids[k] = c;
        }
        y->children = kids;
    }
    ckpt_node__set_identity(y);
    *out = y;
    return 0;
}

static int permute_logical(ckpt_graph *g, const ckpt_node *x, const int *perm, ckpt_node **out)
{
    int pperm[CKPT_MAX_DIMS], ends[CKPT_MAX_DIMS];
    ckpt_node *y;
    int i, n = 0, rc;

    for (i = 0; i < x->ndim; i++) {
        int d = perm[i], p = d ? x->group_end[d - 1] : 0;
        for (; p < x->group_end[d]; p++)
            pperm[n++] = p;
        ends[i] = n;
    }
    if ((rc = permute_phys(g, x, pperm, &y)) < 0)
        return rc;
    return ckpt_node__regroup(g, y, x->ndim, ends, out);
}

static int check_perm(const ckpt_node *x, const int *perm, int *norm)
{
    int seen[CKPT_MAX_DIMS] = { 0 };
    int i;

    for (i = 0; i < x->ndim; i++) {
        int a = perm[i] < 0 ? perm[i] + x->ndim : perm[i];
        if (a < 0 || a >= x->ndim || seen[a]++)
            return ckpt_error_set(CKPT_EINVALID, "permute: not a permutation of %d axes", x->ndim);
        norm[i] = a;
    }
    return 0;
}

static int finish(ckpt_graph *g, ckpt_node *y, const char *op, const ckpt_node *x, const ckpt_node **out)
{
    int rc = ckpt_node__history(g, y, op, &x, 1);
    if (rc < 0)
        return rc;
    *out = y;
    return 0;
}

int ckpt_node_permute(ckpt_graph *g, const ckpt_node *x, const int *perm, const ckpt_node **out)
{
    int norm[CKPT_MAX_DIMS];
    char op[128];
    size_t len;
    ckpt_node *y;
    int i, rc;

    if ((rc = check_perm(x, perm, norm)) < 0 || (rc = permute_logical(g, x, norm, &y)) < 0)
        return rc;
    len = (size_t)snprintf(op, sizeof op, "permute[");
    for (i = 0; i < x->ndim && len < sizeof op; i++)
        len += (size_t)snprintf(op + len, sizeof op - len, "%s%d", i ? "," : "", norm[i]);
    if (len < sizeof op)
        snprintf(op + len, sizeof op - len, "]");
    return finish(g, y, op, x, out);
}

int ckpt_node_transpose(ckpt_graph *g, const ckpt_node *x, int a, int b, const ckpt_node **out)
{
    int perm[CKPT_MAX_DIMS];
    ckpt_node *y;
    char op[64];
    int i, rc;

    if ((rc = ckpt_node__axis(x, a, "transpose", &a)) < 0 || (rc = ckpt_node__axis(x, b, "transpose", &b)) < 0)
        return rc;
    for (i = 0; i < x->ndim; i++)
        perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    if ((rc = permute_logical(g, x, perm, &y)) < 0)
        return rc;
    if (x->ndim == 2)
        snprintf(op, sizeof op, "transpose");
    else
        snprintf(op, sizeof op, "transpose[%d,%d]", a, b);
    return finish(g, y, op, x, out);
}

/* ---- reshape ---- */

/* x (identity grouping) with physical dim d split into [outer, size/outer]. */
static int split_phys(ckpt_graph *g, const ckpt_node *x, int d, int64_t outer, ckpt_node **out)
{
    int64_t size = x->pshape[d], inner = size / outer;
    ckpt_node *y;
    int i, rc;

    if (x->pndim == CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "reshape: more than %d dimensions needed", CKPT_MAX_DIMS);
    if ((rc = ckpt_node__explode(g, x, &y)) < 0)
        return rc;
    for (i = x->pndim; i > d + 1; i--) {
        y->pshape[i] = x->pshape[i - 1];
        y->view.shape[i] = x->view.shape[i - 1];
        y->view.stride[i] = x->view.stride[i - 1];
    }
    y->pndim = x->pndim + 1;
    y->pshape[d] = outer;
    y->pshape[d + 1] = inner;
    if (x->kind == NODE_LEAF) {
        y->view.ndim = y->pndim;
        y->view.shape[d] = outer;
        y->view.shape[d + 1] = inner;
        y->view.stride[d] = x->view.stride[d] * inner;
        y->view.stride[d + 1] = x->view.stride[d];
    } else if (x->kind == NODE_CONCAT) {
        const ckpt_node **kids = new_kids(g, x->n_children);
        size_t k;
        if (!kids)
            return CKPT_ENOMEM;
        for (k = 0; k < x->n_children; k++) {
            const ckpt_node *c = x->children[k];
            int64_t shape[CKPT_MAX_DIMS];
            ckpt_node *r;
            for (i = 0; i < y->pndim; i++)
                shape[i] = y->pshape[i];
            if (d == x->axis) {
                /* the parts must hold whole rows of the inner dimension */
                if (c->shape[d] % inner)
                    return ckpt_error_set(CKPT_EUNSUPPORTED,
                                          "reshape: would split the concatenation axis (a part of %lld is not a "
                                          "multiple of %lld)",
                                          (long long)c->shape[d], (long long)inner);
                shape[d] = c->shape[d] / inner;
            } else if (x->axis > d) {
                shape[x->axis + 1] = c->shape[x->axis];
            } else {
                shape[x->axis] = c->shape[x->axis];
            }
            if ((rc = reshape_logical(g, c, y->pndim, shape, &r)) < 0)
                return rc;
            kids[k] = r;
        }
        y->children = kids;
        if (x->axis > d)
            y->axis = x->axis + 1;
    }
    ckpt_node__set_identity(y);
    *out = y;
    return 0;
}

static int reshape_logical(ckpt_graph *g, const ckpt_node *x, int ndim, const int64_t *shape, ckpt_node **out)
{
    int ends[CKPT_MAX_DIMS];
    ckpt_node *y;
    int i, j = 0, rc;

    if (ckpt_node_numel(x) == 0) {
        const ckpt_node *z;
        if ((rc = ckpt_node_zeros(g, x->dtype, ndim, shape, &z)) < 0)
            return rc;
        *out = (ckpt_node *)z;
        return 0;
    }
    if ((rc = ckpt_node__explode(g, x, &y)) < 0)
        return rc;
    for (i = 0; i < ndim; i++) {
        int64_t acc = 1;
        while (acc < shape[i]) {
            int64_t s, want = shape[i] / acc;
            CKPT_ASSERT(j < y->pndim);
            s = y->pshape[j];
            if (shape[i] % acc == 0 && want % s == 0) {
                acc *= s;
                j++;
                continue;
            }
            if (s % want)
                return ckpt_error_set(CKPT_EUNSUPPORTED, "reshape: dimension %lld cannot be split to make %lld",
                                      (long long)s, (long long)shape[i]);
            if ((rc = split_phys(g, y, j, want, &y)) < 0)
                return rc;
            acc *= want;
            j++;
        }
        ends[i] = j;
    }
    while (j < y->pndim && y->pshape[j] == 1)
        j++;
    if (ndim)
        ends[ndim - 1] = j;
    CKPT_ASSERT(j == y->pndim);
    return ckpt_node__regroup(g, y, ndim, ends, out);
}

int ckpt_node_reshape(ckpt_graph *g, const ckpt_node *x, int ndim, const int64_t *shape, const ckpt_node **out)
{
    int64_t full[CKPT_MAX_DIMS], known = 1, numel = ckpt_node_numel(x);
    char op[160];
    size_t len;
    ckpt_node *y;
    int i, infer = -1, rc;

    if (ndim < 0 || ndim > CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EINVALID, "reshape: %d dimensions (at most %d)", ndim, CKPT_MAX_DIMS);
    for (i = 0; i < ndim; i++) {
        full[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
        } else if (shape[i] < 0 || CKPT_MUL_OVERFLOWS(known, shape[i], &known)) {
            return ckpt_error_set(CKPT_EINVALID, "reshape: bad dimension %lld", (long long)shape[i]);
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return ckpt_error_set(CKPT_EINVALID, "reshape: cannot infer dimension %d of %lld elements", infer,
                                  (long long)numel);
        full[infer] = numel / known;
        known = numel;
    }
    if (known != numel)
        return ckpt_error_set(CKPT_EINVALID, "reshape: %lld elements into a shape of %lld", (long long)numel,
                              (long long)known);
    if ((rc = reshape_logical(g, x, ndim, full, &y)) < 0)
        return rc;
    len = (size_t)snprintf(op, sizeof op, "reshape[");
    for (i = 0; i < ndim && len < sizeof op; i++)
        len += (size_t)snprintf(op + len, sizeof op - len, "%s%lld", i ? "," : "", (long long)full[i]);
    if (len < sizeof op)
        snprintf(op + len, sizeof op - len, "]");
    return finish(g, y, op, x, out);
}

/* ---- slice ---- */

static int slice_phys(ckpt_graph *g, const ckpt_node *x, int d, int64_t start, int64_t len, ckpt_node **out)
{
    const ckpt_node **kids;
    ckpt_node *y;
    int64_t at = 0;
    size_t k, n = 0;
    int rc;

    if (x->kind != NODE_CONCAT || d != x->axis) {
        if ((rc = ckpt_node__explode(g, x, &y)) < 0)
            return rc;
        y->pshape[d] = len;
        if (x->kind == NODE_LEAF) {
            y->view.offset += start * x->view.stride[d];
            y->view.shape[d] = len;
        }
        if (x->kind == NODE_CONCAT) {
            if (!(kids = new_kids(g, x->n_children)))
                return CKPT_ENOMEM;
            for (k = 0; k < x->n_children; k++) {
                ckpt_node *c;
                if ((rc = slice_logical(g, x->children[k], d, start, len, &c)) < 0)
                    return rc;
                kids[k] = c;
            }
            y->children = kids;
        }
        ckpt_node__set_identity(y);
        *out = y;
        return 0;
    }
    if (!(kids = new_kids(g, x->n_children)))
        return CKPT_ENOMEM;
    for (k = 0; k < x->n_children; k++) {
        const ckpt_node *c = x->children[k];
        int64_t size = c->shape[d], lo = start > at ? start : at;
        int64_t hi = start + len < at + size ? start + len : at + size;
        if (hi > lo) {
            ckpt_node *part;
            if (lo == at && hi == at + size) {
                kids[n++] = c;
            } else {
                if ((rc = slice_logical(g, c, d, lo - at, hi - lo, &part)) < 0)
                    return rc;
                kids[n++] = part;
            }
        }
        at += size;
    }
    if (n == 1) {
        *out = (ckpt_node *)kids[0];
        return 0;
    }
    {
        int64_t pshape[CKPT_MAX_DIMS];
        memcpy(pshape, x->pshape, sizeof pshape);
        pshape[d] = len;
        if (n == 0) {
            const ckpt_node *z;
            if ((rc = ckpt_node_zeros(g, x->dtype, x->pndim, pshape, &z)) < 0)
                return rc;
            *out = (ckpt_node *)z;
            return 0;
        }
        return make_concat(g, x, pshape, d, kids, n, out);
    }
}

static int slice_logical(ckpt_graph *g, const ckpt_node *x, int axis, int64_t start, int64_t len, ckpt_node **out)
{
    int p0 = axis ? x->group_end[axis - 1] : 0, p1 = x->group_end[axis], p;
    int64_t inner = 1;
    ckpt_node *y;
    int rc;

    if (start == 0 && len == x->shape[axis])
        return ckpt_node__copy(g, x, out);
    for (p = p0 + 1; p < p1; p++)
        inner *= x->pshape[p];
    if (p1 == p0 || start % inner || len % inner)
        return ckpt_error_set(CKPT_EUNSUPPORTED,
                              "slice [%lld, +%lld) of axis %d cuts across rows of %lld elements that were merged "
                              "into it",
                              (long long)start, (long long)len, axis, (long long)inner);
    if ((rc = slice_phys(g, x, p0, start / inner, len / inner, &y)) < 0)
        return rc;
    return ckpt_node__regroup(g, y, x->ndim, x->group_end, out);
}

int ckpt_node_slice(ckpt_graph *g, const ckpt_node *x, int axis, int64_t start, int64_t len, const ckpt_node **out)
{
    ckpt_node *y;
    char op[96];
    int a = 0, rc;

    if ((rc = ckpt_node__axis(x, axis, "slice", &a)) < 0)
        return rc;
    if (start < 0 || len < 0 || start > x->shape[a] || len > x->shape[a] - start)
        return ckpt_error_set(CKPT_EINVALID, "slice [%lld, +%lld) is outside axis %d of size %lld", (long long)start,
                              (long long)len, a, (long long)x->shape[a]);
    if ((rc = slice_logical(g, x, a, start, len, &y)) < 0)
        return rc;
    snprintf(op, sizeof op, "slice[axis=%d, %lld:%lld]", a, (long long)start, (long long)(start + len));
    return finish(g, y, op, x, out);
}

int ckpt_node_split(ckpt_graph *g, const ckpt_node *x, int axis, size_t n, const int64_t *sizes,
                    const ckpt_node **outs)
{
    int64_t at = 0;
    size_t i;
    int a = 0, rc;

    if ((rc = ckpt_node__axis(x, axis, "split", &a)) < 0)
        return rc;
    for (i = 0; i < n; i++)
        if (sizes[i] < 0 || CKPT_ADD_OVERFLOWS(at, sizes[i], &at))
            return ckpt_error_set(CKPT_EINVALID, "split: bad size %lld", (long long)sizes[i]);
    if (at != x->shape[a])
        return ckpt_error_set(CKPT_EINVALID, "split: sizes add up to %lld, axis %d has %lld", (long long)at, a,
                              (long long)x->shape[a]);
    for (at = 0, i = 0; i < n; at += sizes[i], i++)
        if ((rc = ckpt_node_slice(g, x, a, at, sizes[i], &outs[i])) < 0)
            return rc;
    return 0;
}

/* ---- regrouping ---- */

static int block_total(const ckpt_node *x, int a, size_t n, const int64_t *blocks, const char *op, int64_t *total,
                       int64_t *groups)
{
    size_t i;

    *total = 0;
    for (i = 0; i < n; i++)
        if (blocks[i] <= 0 || CKPT_ADD_OVERFLOWS(*total, blocks[i], total))
            return ckpt_error_set(CKPT_EINVALID, "%s: bad block size %lld", op, (long long)blocks[i]);
    if (n == 0 || x->shape[a] % *total)
        return ckpt_error_set(CKPT_EINVALID, "%s: axis %d has %lld elements, not whole groups of %lld", op, a,
                              (long long)x->shape[a], (long long)*total);
    *groups = x->shape[a] / *total;
    return 0;
}

static void blocks_text(char *buf, size_t cap, const char *op, int a, size_t n, const int64_t *blocks, long part)
{
    size_t len = (size_t)snprintf(buf, cap, "%s[axis=%d, blocks ", op, a), i;
    for (i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "/" : "", (long long)blocks[i]);
    if (len < cap && part >= 0)
        len += (size_t)snprintf(buf + len, cap - len, ", part %ld", part);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

/* Output j of a deinterleave as the concatenation of block j of every group, sliced one by
 * one: for inputs whose concatenated parts do not hold whole groups (a fused QKV merged from
 * tensor-parallel shards that cut through its query groups), which a reshape cannot group. */
static int deinterleave_by_slices(ckpt_graph *g, const ckpt_node *x, int a, int64_t groups, int64_t total,
                                  int64_t offset, int64_t block, const ckpt_node **out)
{
    const ckpt_node **parts = calloc((size_t)groups, sizeof *parts);
    int64_t k;
    int rc = parts ? 0 : ckpt_error_oom();

    for (k = 0; k < groups && rc == 0; k++)
        rc = ckpt_node_slice(g, x, a, k * total + offset, block, &parts[k]);
    if (rc == 0)
        rc = ckpt_node_concat(g, parts, (size_t)groups, a, out);
    free(parts);
    return rc;
}

int ckpt_node_deinterleave(ckpt_graph *g, const ckpt_node *x, int axis, size_t n, const int64_t *blocks,
                           const ckpt_node **outs)
{
    int64_t shape[CKPT_MAX_DIMS], total = 0, groups = 0, offset;
    const ckpt_node *grouped;
    char op[160];
    size_t i;
    int a = 0, d, rc;

    if ((rc = ckpt_node__axis(x, axis, "deinterleave", &a)) < 0 ||
        (rc = block_total(x, a, n, blocks, "deinterleave", &total, &groups)) < 0)
        return rc;
    if (x->ndim == CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "deinterleave: too many dimensions");
    for (d = 0; d < a; d++)
        shape[d] = x->shape[d];
    shape[a] = groups;
    shape[a + 1] = total;
    for (d = a + 1; d < x->ndim; d++)
        shape[d + 1] = x->shape[d];
    if ((rc = ckpt_node_reshape(g, x, x->ndim + 1, shape, &grouped)) == CKPT_EUNSUPPORTED) {
        ckpt_error_clear();
        grouped = NULL;
    } else if (rc < 0) {
        return rc;
    }
    for (offset = 0, i = 0; i < n; offset += blocks[i], i++) {
        const ckpt_node *part;
        ckpt_node *y;
        int64_t flat[CKPT_MAX_DIMS];
        memcpy(flat, x->shape, sizeof flat);
        flat[a] = groups * blocks[i];
        if (!grouped)
            rc = deinterleave_by_slices(g, x, a, groups, total, offset, blocks[i], &part);
        else if ((rc = ckpt_node_slice(g, grouped, a + 1, offset, blocks[i], &part)) == 0)
            rc = ckpt_node_reshape(g, part, x->ndim, flat, &part);
        if (rc < 0)
            return rc;
        if ((rc = ckpt_node__copy(g, part, &y)) < 0)
            return rc;
        blocks_text(op, sizeof op, "deinterleave", a, n, blocks, (long)i);
        if ((rc = finish(g, y, op, x, &outs[i])) < 0)
            return rc;
    }
    return 0;
}

int ckpt_node_interleave(ckpt_graph *g, const ckpt_node *const *xs, size_t n, int axis, const int64_t *blocks,
                         const ckpt_node **out)
{
    const ckpt_node **parts = NULL, *joined;
    int64_t groups = -1, k;
    char op[160];
    ckpt_node *y;
    size_t i;
    int a = 0, d, rc;

    if (n == 0 || n > 64)
        return ckpt_error_set(CKPT_EINVALID, "interleave: %zu inputs (1 to 64)", n);
    if ((rc = ckpt_node__axis(xs[0], axis, "interleave", &a)) < 0)
        return rc;
    for (i = 0; i < n; i++) {
        int same = xs[i]->ndim == xs[0]->ndim;
        for (d = 0; same && d < xs[0]->ndim; d++)
            same = d == a || xs[i]->shape[d] == xs[0]->shape[d];
        if (!same || blocks[i] <= 0 || xs[i]->shape[a] % blocks[i] ||
            (groups >= 0 && xs[i]->shape[a] / blocks[i] != groups))
            return ckpt_error_set(CKPT_EINVALID,
                                  "interleave: input %zu (%lld along axis %d) is not the same number of blocks of "
                                  "%lld as input 0",
                                  i, (long long)xs[i]->shape[a], a, (long long)blocks[i]);
        groups = xs[i]->shape[a] / blocks[i];
    }
    /* one part per block, group by group: a flat concatenation, so that the result can be cut
     * anywhere along the axis later (tensor-parallel shards that split a query group) */
    parts = calloc((size_t)groups * n + 1, sizeof *parts);
    if (!parts)
        return ckpt_error_oom();
    for (k = 0, rc = 0; k < groups && rc == 0; k++)
        for (i = 0; i < n && rc == 0; i++)
            rc = ckpt_node_slice(g, xs[i], a, k * blocks[i], blocks[i], &parts[(size_t)k * n + i]);
    if (rc == 0)
        rc = ckpt_node_concat(g, parts, (size_t)groups * n, a, &joined);
    free(parts);
    if (rc < 0 || (rc = ckpt_node__copy(g, joined, &y)) < 0)
        return rc;
    blocks_text(op, sizeof op, "interleave", a, n, blocks, -1);
    if ((rc = ckpt_node__history(g, y, op, xs, n)) < 0)
        return rc;
    *out = y;
    return 0;
}
