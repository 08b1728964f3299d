/* Block-scaled dequantisation: a leaf whose stored values are multiplied by the scale of
 * their block of the source as they are read. The leaf keeps its strided view, so every
 * shape operation on it stays a view: an element's storage position gives its row and
 * column in the source, and so its block. */
#include "node.h"

#include <ckpt/sys/common.h>

#include <stdio.h>

/* n elements from source element `at` on, `step` apart: along a row (step 1) a block's scale
 * is looked up once for its run of columns; other steps look up each element's. */
static void scale_run(const ckpt_node *x, int64_t at, int64_t step, int64_t n, float *vals)
{
    int64_t cols = x->source->shape[1], r = at / cols, c = at % cols, i = 0, j, m, end;

    if (step != 1) {
        for (; i < n; i++, at += step)
            vals[i] *= x->scale[(at / cols) / x->block_rows * x->scale_cols + (at % cols) / x->block_cols];
        return;
    }
    while (i < n) {
        const float s = x->scale[r / x->block_rows * x->scale_cols + c / x->block_cols];
        end = (c / x->block_cols + 1) * x->block_cols;
        m = (end < cols ? end : cols) - c;
        if (m > n - i)
            m = n - i;
        for (j = 0; j < m; j++)
            vals[i + j] *= s;
        i += m;
        if ((c += m) == cols) {
            c = 0;
            r++;
        }
    }
}

void ckpt_node__scale(const ckpt_node *x, int64_t first, int64_t count, float *vals)
{
    const ckpt_tensor *v = &x->view;
    int64_t idx[CKPT_MAX_DIMS], rest = first, at = v->offset - x->source->offset, k, run;
    int d, last = v->ndim - 1;

    if (v->ndim == 0) {
        if (count)
            scale_run(x, at, 1, 1, vals);
        return;
    }
    for (d = last; d >= 0; d--) {
        idx[d] = rest % v->shape[d];
        rest /= v->shape[d];
        at += idx[d] * v->stride[d];
    }
    for (k = 0; k < count; k += run) {
        run = v->shape[last] - idx[last] < count - k ? v->shape[last] - idx[last] : count - k;
        scale_run(x, at, v->stride[last], run, vals + k);
        at += run * v->stride[last];
        if ((idx[last] += run) < v->shape[last])
            continue;
        at -= idx[last] * v->stride[last];
        idx[last] = 0;
        for (d = last - 1; d >= 0; d--) {
            at += v->stride[d];
            if (++idx[d] < v->shape[d])
                break;
            at -= idx[d] * v->stride[d];
            idx[d] = 0;
        }
    }
}

#define NAME(t) ((t)->name ? (t)->name : "?")

static int check(const ckpt_tensor *data, const ckpt_tensor *scale, int64_t br, int64_t bc, ckpt_dtype dtype)
{
    int64_t rows, cols;
    int rc;

    if ((rc = ckpt_tensor_validate(data)) < 0 || (rc = ckpt_tensor_validate(scale)) < 0)
        return rc;
    if (br <= 0 || bc <= 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_GRAPH, "block_dequant: %s: block size %lldx%lld is not positive",
                               NAME(data), (long long)br, (long long)bc);
    if (data->ndim != 2 || !ckpt_tensor_is_contiguous(data))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_GRAPH,
                               "block_dequant: %s: a block-scaled tensor is a C-contiguous matrix (%d dimensions)",
                               NAME(data), data->ndim);
    if (!ckpt_dtype_can_convert(CKPT_DTYPE_F32, data->dtype) ||
        !ckpt_dtype_can_convert(CKPT_DTYPE_F32, scale->dtype) || !ckpt_dtype_can_convert(dtype, CKPT_DTYPE_F32) ||
        !ckpt_dtype_is_float(dtype))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_GRAPH,
                               "block_dequant: %s: %s values with %s scales cannot be dequantised to %s",
                               NAME(data), ckpt_dtype_name(data->dtype),
                               ckpt_dtype_name(scale->dtype), ckpt_dtype_name(dtype));
    rows = (data->shape[0] + br - 1) / br;
    cols = (data->shape[1] + bc - 1) / bc;
    if (scale->ndim != 2 || scale->shape[0] != rows || scale->shape[1] != cols)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_GRAPH,
                               "block_dequant: %s: scale %s is not [%lld, %lld] (one per %lldx%lld block)",
                               NAME(data), NAME(scale), (long long)rows,
                               (long long)cols, (long long)br, (long long)bc);
    return 0;
}

int ckpt_node_block_dequant(ckpt_graph *g, const ckpt_tensor *data, const ckpt_tensor *scale, int64_t block_rows,
                            int64_t block_cols, ckpt_dtype dtype, const ckpt_node **out)
{
    const ckpt_node *inputs[2];
    ckpt_node *x;
    float *vals;
    int64_t n;
    int rc;

    if ((rc = check(data, scale, block_rows, block_cols, dtype)) < 0)
        return rc;
    n = scale->shape[0] * scale->shape[1];
    if ((rc = ckpt_node_tensor(g, data, &inputs[0])) < 0 || (rc = ckpt_node_tensor(g, scale, &inputs[1])) < 0)
        return rc;
    if (!(vals = ckpt_arena_alloc(g->arena, (size_t)(n ? n : 1) * sizeof *vals)))
        return CKPT_ENOMEM;
    if (n && (rc = ckpt_tensor_read(scale, 0, n, CKPT_DTYPE_F32, vals)) < 0)
        return rc;
    if ((rc = ckpt_node__copy(g, inputs[0], &x)) < 0)
        return rc;
    x->dtype = dtype;
    x->n_casts = 1;
    x->casts[0] = dtype;
    x->scale = vals;
    x->scale_cols = scale->shape[1];
    x->block_rows = block_rows;
    x->block_cols = block_cols;
    if ((rc = ckpt_node__history(g, x, "block_dequant", inputs, 2)) < 0)
        return rc;
    *out = x;
    return 0;
}
