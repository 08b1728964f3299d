/* Where a node's elements lie in a mapped input file exactly as they are to be written:
 * no cast, no byte swap, no decoding, contiguous. The writer hands such runs to the kernel
 * straight from the mapping (or file to file) instead of copying them through a buffer. */
#include "node.h"

#include <ckpt/sys/io.h>

/* The view is contiguous over its trailing dimensions: its elements follow each other in
 * storage in blocks of them. Returns the block length; *storage_elem is where element
 * `first` lies. */
static int64_t leaf_block(const ckpt_tensor *v, int64_t first, int64_t *storage_elem)
{
    int64_t block = 1, expected = 1, at = v->offset, rest = first;
    int d, contiguous = 1;

    for (d = v->ndim - 1; d >= 0; d--) {
        int64_t i = rest % v->shape[d];
        rest /= v->shape[d];
        at += i * v->stride[d];
        if (contiguous && (v->shape[d] == 1 || v->stride[d] == expected)) {
            expected *= v->shape[d];
            block = expected;
        } else {
            contiguous = 0;
        }
    }
    *storage_elem = at;
    return block;
}

/* The extent holding storage bytes [start, start + *len), cut to where the extent ends. */
static const ckpt_extent *raw_extent(const ckpt_storage *s, uint64_t start, uint64_t *len, uint64_t *file_off)
{
    uint64_t at = 0;
    size_t i;

    if (s->byteswap || s->tiling)
        return NULL;
    for (i = 0; i < s->n_extents; i++) {
        const ckpt_extent *e = &s->extents[i];
        if (start < at + e->size) {
            if (e->encoding != CKPT_EXTENT_RAW || e->shuffle > 1 || e->flags || !e->file ||
                e->stored_size != e->size)
                return NULL;
            if (*len > at + e->size - start)
                *len = at + e->size - start;
            *file_off = e->offset + (start - at);
            return e;
        }
        at += e->size;
    }
    return NULL;
}

static int64_t leaf_run(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, int64_t min_run,
                        const ckpt_file **file, uint64_t *off)
{
    const ckpt_tensor *v = &x->view;
    const ckpt_extent *e;
    size_t es = ckpt_dtype_size(dtype);
    int64_t at, block = leaf_block(v, first, &at), run = block - first % block;
    uint64_t bytes;

    if (x->n_casts || v->dtype != dtype || !v->storage || block < min_run)
        return count;
    if (run > count)
        run = count;
    if (run < min_run)
        return run;
    bytes = (uint64_t)run * es;
    if (at < 0 || !(e = raw_extent(v->storage, (uint64_t)at * es, &bytes, off)) || bytes < (uint64_t)min_run * es)
        return run;
    *file = e->file;
    return (int64_t)(bytes / es);
}

static int64_t concat_run(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, int64_t min_run,
                          const ckpt_file **file, uint64_t *off)
{
    int64_t inner = 1, row, r, within, at = 0, widest = 0;
    size_t k;
    int d;

    for (d = x->axis + 1; d < x->pndim; d++)
        inner *= x->pshape[d];
    row = x->pshape[x->axis] * inner;
    /* parts interleaved in pieces too short to be worth a run of their own */
    for (k = 0; k < x->n_children && row < ckpt_node_numel(x); k++)
        if (x->children[k]->shape[x->axis] * inner > widest)
            widest = x->children[k]->shape[x->axis] * inner;
    if (row < ckpt_node_numel(x) && widest < min_run)
        return count;
    r = first / row;
    within = first % row;
    for (k = 0; k < x->n_children; k++) {
        int64_t block = x->children[k]->shape[x->axis] * inner;
        if (within < at + block) {
            int64_t local = within - at, left = block - local;
            return ckpt_node__direct_run(x->children[k], r * block + local, left < count ? left : count, dtype,
                                         min_run, file, off);
        }
        at += block;
    }
    return count;
}

int64_t ckpt_node__direct_run(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, int64_t min_run,
                              const ckpt_file **file, uint64_t *off)
{
    *file = NULL;
    if (count <= 0)
        return 0;
    switch (x->kind) {
    case NODE_LEAF:
        return leaf_run(x, first, count, dtype, min_run, file, off);
    case NODE_CONCAT:
        return concat_run(x, first, count, dtype, min_run, file, off);
    case NODE_ZEROS:
        break;
    }
    return count;
}
