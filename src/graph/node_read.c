/* Reading a node's elements in C order: strided reads of leaves, zeros, and the parts of
 * a concatenation, in bands of rows. Nothing larger than the caller's buffer is ever held,
 * apart from small fixed buffers: a band of a concatenation, a leaf rounded through more
 * than one type. */
#include "node.h"
#include "../core/storage_private.h"
#include "../core/tensor_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CAST_PIECE 4096 /* elements per step of a multi-type rounding */
/* A concatenation along an inner axis is read this many bytes of whole rows at a time. */
#define CONCAT_BAND ((uint64_t)1 << 20)

static int read_fill(const ckpt_node *x, int64_t count, ckpt_dtype dtype, unsigned char *dst)
{
    static const unsigned char zero[sizeof x->fill];
    size_t ds = ckpt_dtype_size(dtype);
    int64_t i;
    int rc;

    /* zero is all-zero bits in every supported type */
    if (memcmp(x->fill, zero, sizeof zero) == 0) {
        memset(dst, 0, (size_t)count * ds);
        return 0;
    }
    if ((rc = ckpt_dtype_convert(dtype, dst, x->dtype, x->fill, 1)) < 0)
        return rc;
    for (i = 1; i < count; i++)
        memcpy(dst + (size_t)i * ds, dst, ds);
    return 0;
}

static int read_node(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, unsigned char *dst);

static int read_rounded(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, unsigned char *dst)
{
    size_t ds = ckpt_dtype_size(dtype);
    /* on the stack: a heap buffer per call had the kernel zero fresh pages for every chunk */
    _Alignas(16) unsigned char bufs[2][CAST_PIECE * 16];
    unsigned char *a = bufs[0], *b = bufs[1];
    int64_t done, m;
    int rc = 0, k;

    for (done = 0; done < count && !rc; done += m) {
        m = count - done < CAST_PIECE ? count - done : CAST_PIECE;
        if (x->scale) {
            rc = ckpt_tensor_read(&x->view, first + done, m, CKPT_DTYPE_F32, a);
            if (!rc) {
                unsigned char *t = a;
                ckpt_node__scale(x, first + done, m, (float *)a);
                rc = ckpt_dtype_convert(x->casts[0], b, CKPT_DTYPE_F32, a, (size_t)m);
                a = b;
                b = t;
            }
        } else {
            rc = ckpt_tensor_read(&x->view, first + done, m, x->casts[0], a);
        }
        for (k = 1; k < x->n_casts && !rc; k++) {
            unsigned char *t;
            rc = ckpt_dtype_convert(x->casts[k], b, x->casts[k - 1], a, (size_t)m);
            t = a;
            a = b;
            b = t;
        }
        if (!rc)
            rc = ckpt_dtype_convert(dtype, dst + (size_t)done * ds, x->dtype, a, (size_t)m);
    }
    return rc;
}

static int read_leaf(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, unsigned char *dst)
{
    if (!x->scale && (x->n_casts == 0 || (x->n_casts == 1 && x->casts[0] == dtype)))
        return ckpt_tensor_read(&x->view, first, count, dtype, dst);
    return read_rounded(x, first, count, dtype, dst);
}

/* The parts of elements [first, first + count) that fall in one row of the concatenation at
 * a time: one read per part, for a piece of a row at either end of the range, or for rows
 * too long to gather in bands. */
static int read_concat_pieces(const ckpt_node *x, int64_t inner, int64_t row, int64_t first, int64_t count,
                              ckpt_dtype dtype, unsigned char *dst)
{
    size_t ds = ckpt_dtype_size(dtype);
    size_t k;
    int rc;

    while (count > 0) {
        int64_t r = first / row, within = first % row, at = 0;
        for (k = 0; k < x->n_children; k++) {
            int64_t block = x->children[k]->shape[x->axis] * inner;
            if (within < at + block) {
                int64_t off = within - at, take = block - off < count ? block - off : count;
                if ((rc = read_node(x->children[k], r * block + off, take, dtype, dst)) < 0)
                    return rc;
                dst += (size_t)take * ds;
                first += take;
                count -= take;
                break;
            }
            at += block;
        }
        CKPT_ASSERT(k < x->n_children);
    }
    return 0;
}

/* Whole rows [r0, r0 + rows) of a concatenation along an inner axis, a band of rows at a
 * time: each part's share of the band is one read (its rows are contiguous in its own
 * order) into `band`, then copied into place, so that a part cut from a wide tensor is read
 * in long strided reads rather than one short read per row. */
static int read_concat_bands(const ckpt_node *x, int64_t inner, int64_t row, int64_t r0, int64_t rows,
                             ckpt_dtype dtype, unsigned char *dst, unsigned char *band, int64_t band_rows)
{
    size_t ds = ckpt_dtype_size(dtype);
    int64_t done, n, i, at;
    size_t k;
    int rc;

    for (done = 0; done < rows; done += n) {
        n = rows - done < band_rows ? rows - done : band_rows;
        for (k = 0, at = 0; k < x->n_children; k++) {
            int64_t block = x->children[k]->shape[x->axis] * inner;
            if ((rc = read_node(x->children[k], (r0 + done) * block, n * block, dtype, band)) < 0)
                return rc;
            for (i = 0; i < n; i++)
                memcpy(dst + (size_t)((done + i) * row + at) * ds, band + (size_t)(i * block) * ds,
                       (size_t)block * ds);
            at += block;
        }
    }
    return 0;
}

/* Whole rows of a concatenation along an inner axis that a band must hold for every part's
 * share of it to cover the part's page band. */
static int64_t concat_page_rows(const ckpt_node *x, int64_t inner, ckpt_dtype dtype, uint64_t page)
{
    int64_t rows = 1;
    size_t k;

    for (k = 0; k < x->n_children; k++) {
        int64_t block = x->children[k]->shape[x->axis] * inner, need = ckpt_node__page_band(x->children[k], dtype, page);
        if (block > 0 && (need + block - 1) / block > rows)
            rows = (need + block - 1) / block;
    }
    return rows;
}

static uint64_t page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);

    return ps > 0 ? (uint64_t)ps : 4096;
}

static int read_concat(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, unsigned char *dst)
{
    size_t ds = ckpt_dtype_size(dtype);
    int64_t inner = 1, row, head, rows, band_rows, page_rows;
    unsigned char *band;
    int d, rc;

    for (d = x->axis + 1; d < x->pndim; d++)
        inner *= x->pshape[d];
    row = x->pshape[x->axis] * inner;
    band_rows = row > 0 ? (int64_t)(CONCAT_BAND / ((uint64_t)row * ds)) : 0;
    /* a part that transposes reads each of its input pages once only in bands that span
       them: bands as long as the read allows (never more than the caller's buffer) */
    if (x->axis > 0 && row > 0 && (page_rows = concat_page_rows(x, inner, dtype, page_size())) > band_rows)
        band_rows = page_rows < count / row ? page_rows : count / row;
    /* along the first axis the parts are runs of the output already, and long rows are long
       reads: only short rows of an inner axis are worth a band */
    if (x->axis == 0 || band_rows < 2 || count < 2 * row)
        return read_concat_pieces(x, inner, row, first, count, dtype, dst);
    head = (row - first % row) % row;
    rows = (count - head) / row;
    if ((rc = read_concat_pieces(x, inner, row, first, head, dtype, dst)) < 0)
        return rc;
    if (!(band = malloc((size_t)(band_rows < rows ? band_rows : rows) * (size_t)row * ds)))
        return ckpt_error_oom();
    rc = read_concat_bands(x, inner, row, (first + head) / row, rows, dtype, dst + (size_t)head * ds, band,
                           band_rows);
    free(band);
    if (rc < 0)
        return rc;
    return read_concat_pieces(x, inner, row, first + head + rows * row, count - head - rows * row, dtype,
                              dst + (size_t)(head + rows * row) * ds);
}

static int read_node(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, unsigned char *dst)
{
    if (count == 0)
        return 0;
    switch (x->kind) {
    case NODE_LEAF:
        return read_leaf(x, first, count, dtype, dst);
    case NODE_ZEROS:
        return read_fill(x, count, dtype, dst);
    case NODE_CONCAT:
        return read_concat(x, first, count, dtype, dst);
    }
    return ckpt_error_set(CKPT_EINVALID, "bad node");
}

int ckpt_node_read(const ckpt_node *x, int64_t first, int64_t count, ckpt_dtype dtype, void *dst)
{
    int64_t numel = ckpt_node_numel(x);

    if (first < 0 || count < 0 || first > numel || count > numel - first)
        return ckpt_error_set(CKPT_EINVALID, "elements [%lld, +%lld) are outside the %lld of the tensor",
                              (long long)first, (long long)count, (long long)numel);
    if (!ckpt_dtype_can_convert(dtype, x->dtype))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "cannot convert %s to %s", ckpt_dtype_name(x->dtype),
                              ckpt_dtype_name(dtype));
    if (count && !dst)
        return ckpt_error_set(CKPT_EINVALID, "no destination");
    return read_node(x, first, count, dtype, dst);
}

int64_t ckpt_node__page_band(const ckpt_node *x, ckpt_dtype dtype, uint64_t page)
{
    int64_t inner = 1, band = 1, b;
    size_t k;
    int d;

    switch (x->kind) {
    case NODE_LEAF:
        /* a leaf rounded through other types is read in pieces of its own */
        if (!x->scale && (x->n_casts == 0 || (x->n_casts == 1 && x->casts[0] == dtype)))
            return ckpt_tensor__page_band(&x->view, page);
        return 1;
    case NODE_ZEROS:
        return 1;
    case NODE_CONCAT:
        if (x->axis > 0) {
            for (d = x->axis + 1; d < x->pndim; d++)
                inner *= x->pshape[d];
            return concat_page_rows(x, inner, dtype, page) * x->pshape[x->axis] * inner;
        }
        for (k = 0; k < x->n_children; k++)
            if ((b = ckpt_node__page_band(x->children[k], dtype, page)) > band)
                band = b;
        return band;
    }
    return 1;
}

static void release_leaf(const ckpt_tensor *v)
{
    size_t es = ckpt_dtype_size(v->dtype);
    uint64_t lo = (uint64_t)v->offset * es, hi = lo + es;
    int d;

    if (!v->storage || ckpt_tensor_numel(v) <= 0)
        return;
    for (d = 0; d < v->ndim; d++)
        hi += (uint64_t)(v->shape[d] - 1) * (uint64_t)v->stride[d] * es;
    ckpt_storage__release_bytes(v->storage, lo, hi);
}

void ckpt_node__release(const ckpt_node *x)
{
    size_t k;

    if (x->kind == NODE_LEAF)
        release_leaf(&x->view);
    else if (x->kind == NODE_CONCAT)
        for (k = 0; k < x->n_children; k++)
            ckpt_node__release(x->children[k]);
}
