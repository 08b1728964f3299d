/* Tensors from the walk's DATASET records (hdf5_private.h describes them), their bytes
 * located once: a contiguous dataset is one raw extent; a chunked one a tiled storage whose
 * tiles are its chunks (each an extent decoded by the engine: deflate, zstd, shuffle,
 * Fletcher-32), chunks never written a fill; compact data and fill values are copied into
 * one memory file. Every count is bounded before anything is made for it, every offset by
 * the file. */
#include "hdf5_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bytes kept in memory ---- */

static int keep_bytes(ckpt_h5_build *b, ckpt_extent *e, const void *data, size_t n)
{
    if (b->mem_len + n > b->mem_cap) {
        size_t cap = b->mem_cap ? b->mem_cap : 4096;
        unsigned char *grown;
        while (cap < b->mem_len + n)
            cap *= 2;
        if (!(grown = realloc(b->mem, cap)))
            return ckpt_error_oom();
        b->mem = grown;
        b->mem_cap = cap;
    }
    if (b->n_pending == b->cap_pending) {
        size_t cap = b->cap_pending ? b->cap_pending * 2 : 16;
        ckpt_extent **grown = realloc(b->pending, cap * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        b->pending = grown;
        b->cap_pending = cap;
    }
    memcpy(b->mem + b->mem_len, data, n);
    e->offset = b->mem_len;
    e->stored_size = n;
    b->mem_len += n;
    b->pending[b->n_pending++] = e;
    return 0;
}

int ckpt_hdf5__keep_in_memory(ckpt_h5_build *b)
{
    const ckpt_file *f;
    char name[512];
    size_t i;
    int rc;

    if (!b->n_pending)
        return 0;
    snprintf(name, sizeof name, "%s (compact data and fill values, in memory)", b->path);
    if ((rc = ckpt_reader_memory_file(b->r, name, b->mem, b->mem_len, &f)) < 0)
        return rc;
    for (i = 0; i < b->n_pending; i++)
        b->pending[i]->file = f;
    return 0;
}

/* ---- datasets ---- */

typedef struct dset {
    const char *name; /* its path */
    ckpt_dtype dtype;
    int byteswap;
    size_t es;
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    uint64_t nbytes;
} dset;

typedef struct fill {
    unsigned kind;
    const unsigned char *bytes; /* the value, or why it could not be read */
    size_t n;
} fill;

static int too_short(const ckpt_h5_build *b, const dset *ds, const char *what, uint64_t at, uint64_t n)
{
    return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': %s of %llu bytes at offset %llu runs past the end of the "
                          "file (%llu bytes)",
                          b->path, ds->name, what, (unsigned long long)n, (unsigned long long)at,
                          (unsigned long long)b->file->size);
}

static ckpt_storage *new_storage(ckpt_h5_build *b, const dset *ds, size_t n_extents)
{
    ckpt_storage *s = ckpt_reader_new_storage(b->r, ds->name, ds->dtype, n_extents);

    if (s)
        s->byteswap = ds->byteswap;
    return s;
}

static int get_fill(ckpt_h5_build *b, const dset *ds, fill *f)
{
    int rc;

    if ((rc = ckpt_hdf5__get_u8(b, &f->kind)) < 0)
        return rc;
    f->n = 0;
    if (f->kind == CKPT_H5F_ZERO)
        return 0;
    if (f->kind != CKPT_H5F_VALUE && f->kind != CKPT_H5F_UNREADABLE)
        return ckpt_hdf5__malformed(b, "a fill value of unknown kind");
    if ((rc = ckpt_hdf5__get_bytes(b, &f->bytes, &f->n)) < 0)
        return rc;
    if (f->kind == CKPT_H5F_VALUE && f->n != ds->es)
        return ckpt_hdf5__malformed(b, "a fill value that is not one element");
    return 0;
}

/* An extent of `size` bytes of the dataset's fill value. Zeros need no bytes at all. */
static int fill_extent(ckpt_h5_build *b, const fill *f, ckpt_extent *e, uint64_t size)
{
    memset(e, 0, sizeof *e);
    e->encoding = CKPT_EXTENT_FILL;
    e->size = size;
    if (f->kind == CKPT_H5F_UNREADABLE)
        return ckpt_error_set(CKPT_EFORMAT, "%.*s", (int)f->n, (const char *)f->bytes);
    return f->kind == CKPT_H5F_VALUE ? keep_bytes(b, e, f->bytes, f->n) : 0;
}

static int contiguous(ckpt_h5_build *b, const dset *ds, ckpt_storage **out)
{
    unsigned allocated;
    uint64_t at = 0, end;
    ckpt_storage *s;
    fill f = { CKPT_H5F_ZERO, NULL, 0 };
    int rc;

    if ((rc = ckpt_hdf5__get_u8(b, &allocated)) < 0 ||
        (rc = allocated ? ckpt_hdf5__get_u64(b, &at) : get_fill(b, ds, &f)) < 0)
        return rc;
    if (!(*out = s = new_storage(b, ds, ds->nbytes ? 1 : 0)))
        return ckpt_error_oom();
    s->nbytes = ds->nbytes;
    if (!ds->nbytes)
        return 0;
    if (!allocated)
        return fill_extent(b, &f, &s->extents[0], ds->nbytes);
    if (CKPT_ADD_OVERFLOWS(at, ds->nbytes, &end) || end > b->file->size)
        return too_short(b, ds, "its data", at, ds->nbytes);
    s->extents[0].file = b->file;
    s->extents[0].offset = at;
    s->extents[0].stored_size = ds->nbytes;
    s->extents[0].size = ds->nbytes;
    s->extents[0].encoding = CKPT_EXTENT_RAW;
    return 0;
}

static int compact(ckpt_h5_build *b, const dset *ds, ckpt_storage **out)
{
    const unsigned char *data;
    ckpt_storage *s;
    size_t n;
    int rc;

    if ((rc = ckpt_hdf5__get_bytes(b, &data, &n)) < 0)
        return rc;
    if (ds->nbytes > CKPT_H5_MAX_COMPACT)
        return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': a compact dataset of %llu bytes", b->path, ds->name,
                              (unsigned long long)ds->nbytes);
    if (n != ds->nbytes)
        return ckpt_hdf5__malformed(b, "compact data of another size than its dataset");
    if (!(*out = s = new_storage(b, ds, n ? 1 : 0)))
        return ckpt_error_oom();
    s->nbytes = n;
    if (!n)
        return 0;
    s->extents[0].size = n;
    s->extents[0].encoding = CKPT_EXTENT_RAW;
    return keep_bytes(b, &s->extents[0], data, n);
}

/* Chunk i of the grid, stored at `at` (size `stored`, filters `mask`), as tile t. */
static int stored_chunk(ckpt_h5_build *b, const dset *ds, const ckpt_h5_pipeline *p, uint64_t chunk_bytes,
                        uint64_t at, uint64_t stored, uint32_t mask, ckpt_tile *t)
{
    ckpt_storage *c = new_storage(b, ds, 1);
    ckpt_extent *e;
    uint64_t end;
    char why[200];
    int rc;

    if (!c)
        return ckpt_error_oom();
    e = &c->extents[0];
    if ((rc = ckpt_hdf5__chunk_encoding(p, mask, ds->es, e, why, sizeof why)) < 0)
        return ckpt_error_set(rc, "%s: dataset '%s': %s", b->path, ds->name, why);
    if (CKPT_ADD_OVERFLOWS(at, stored, &end) || end > b->file->size)
        return too_short(b, ds, "a chunk", at, stored);
    e->file = b->file;
    e->offset = at;
    e->stored_size = stored;
    e->size = chunk_bytes;
    if (e->encoding == CKPT_EXTENT_RAW && !e->flags && e->stored_size != e->size)
        return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': an unfiltered chunk at offset %llu stores %llu bytes "
                              "for %llu",
                              b->path, ds->name, (unsigned long long)at, (unsigned long long)stored,
                              (unsigned long long)chunk_bytes);
    c->nbytes = chunk_bytes;
    t->source = c;
    return 0;
}

/* The chunk shape, filters and fill of a chunked dataset; its grid and chunk size. */
static int chunk_layout(ckpt_h5_build *b, const dset *ds, int64_t *cdims, int64_t *grid, uint64_t *n_chunks,
                        uint64_t *chunk_bytes, ckpt_h5_pipeline *p, fill *f)
{
    unsigned n;
    uint64_t c;
    uint32_t id, size;
    int d, rc;

    *n_chunks = 1;
    *chunk_bytes = ds->es;
    for (d = 0; d < ds->ndim; d++) {
        if ((rc = ckpt_hdf5__get_u64(b, &c)) < 0)
            return rc;
        if (c == 0 || c > (uint64_t)INT64_MAX)
            return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': chunk shape is 0 along axis %d", b->path, ds->name,
                                  d);
        cdims[d] = (int64_t)c;
        grid[d] = (int64_t)(((uint64_t)ds->shape[d] + c - 1) / c);
        if (CKPT_MUL_OVERFLOWS(*n_chunks, (uint64_t)grid[d], n_chunks) ||
            CKPT_MUL_OVERFLOWS(*chunk_bytes, c, chunk_bytes))
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': too many or too large chunks", b->path,
                                  ds->name);
    }
    if (*n_chunks > CKPT_H5_MAX_CHUNKS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': %llu chunks, more than %llu", b->path, ds->name,
                              (unsigned long long)*n_chunks, (unsigned long long)CKPT_H5_MAX_CHUNKS);
    if ((b->n_chunks += *n_chunks) > CKPT_H5_MAX_FILE_CHUNKS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': more than %llu chunks in the file", b->path,
                              ds->name, (unsigned long long)CKPT_H5_MAX_FILE_CHUNKS);
    memset(p, 0, sizeof *p);
    if ((rc = ckpt_hdf5__get_u8(b, &n)) < 0)
        return rc;
    if (n > CKPT_H5_MAX_FILTERS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': %u filters", b->path, ds->name, n);
    for (p->n = 0; p->n < n; p->n++) {
        if ((rc = ckpt_hdf5__get_u32(b, &id)) < 0 || (rc = ckpt_hdf5__get_u32(b, &size)) < 0)
            return rc;
        p->id[p->n] = id;
        p->shuffle_size[p->n] = size;
    }
    return get_fill(b, ds, f);
}

/* 1 when the walk failed in the middle of the chunks (a FAIL record follows). */
static int chunked(ckpt_h5_build *b, const dset *ds, ckpt_storage **out)
{
    int64_t cdims[CKPT_MAX_DIMS], grid[CKPT_MAX_DIMS], at[CKPT_MAX_DIMS];
    uint64_t n_chunks, chunk_bytes, i, run = 0, offset = 0, stored = 0;
    ckpt_storage *s, *fills = NULL;
    ckpt_h5_pipeline p;
    ckpt_tiling *g;
    uint32_t mask = 0;
    unsigned kind;
    fill f = { CKPT_H5F_ZERO, NULL, 0 };
    int d, rc;

    if ((rc = chunk_layout(b, ds, cdims, grid, &n_chunks, &chunk_bytes, &p, &f)) < 0)
        return rc;
    if (!(*out = s = ckpt_reader_new_tiled_storage(b->r, ds->name, ds->dtype, ds->ndim, ds->shape, (size_t)n_chunks)))
        return ckpt_error_oom();
    g = (ckpt_tiling *)s->tiling;
    for (d = 0; d < ds->ndim; d++) {
        g->chunk[d] = cdims[d];
        at[d] = 0;
    }
    for (i = 0; i < n_chunks; i++) {
        ckpt_tile *t = &g->tiles[i];

        for (d = 0; d < ds->ndim; d++) {
            t->offset[d] = at[d] * cdims[d];
            t->size[d] = ds->shape[d] - t->offset[d] < cdims[d] ? ds->shape[d] - t->offset[d] : cdims[d];
            t->stored[d] = cdims[d];
        }
        if (!run) {
            if ((rc = ckpt_hdf5__get_u8(b, &kind)) < 0)
                return rc;
            if (kind == CKPT_H5C_ABORT)
                return 1;
            if (kind == CKPT_H5C_FILL && ((rc = ckpt_hdf5__get_u64(b, &run)) < 0 || run == 0 || run > n_chunks - i))
                return rc < 0 ? rc : ckpt_hdf5__malformed(b, "a run of chunks past the grid");
            if (kind == CKPT_H5C_STORED && ((rc = ckpt_hdf5__get_u64(b, &offset)) < 0 ||
                                            (rc = ckpt_hdf5__get_u64(b, &stored)) < 0 ||
                                            (rc = ckpt_hdf5__get_u32(b, &mask)) < 0))
                return rc;
            if (kind != CKPT_H5C_FILL && kind != CKPT_H5C_STORED)
                return ckpt_hdf5__malformed(b, "a chunk of unknown kind");
        }
        if (run) {
            run--;
            if (!fills && (!(fills = new_storage(b, ds, 1)) ||
                           (rc = fill_extent(b, &f, &fills->extents[0], chunk_bytes)) < 0))
                return fills ? rc : ckpt_error_oom();
            fills->nbytes = chunk_bytes;
            t->source = fills;
        } else if ((rc = stored_chunk(b, ds, &p, chunk_bytes, offset, stored, mask, t)) < 0) {
            return rc;
        }
        for (d = ds->ndim - 1; d >= 0 && ++at[d] == grid[d]; d--)
            at[d] = 0;
    }
    if ((rc = ckpt_storage_tiling_check(s)) < 0)
        ckpt_error_prefix("%s: dataset '%s'", b->path, ds->name);
    return rc;
}

int ckpt_hdf5__build_dataset(ckpt_h5_build *b, const char *name, size_t *index)
{
    ckpt_storage *s = NULL;
    ckpt_tensor *t;
    unsigned swap, ndim, layout;
    uint32_t dtype;
    uint64_t dim;
    dset ds;
    int d, rc;

    memset(&ds, 0, sizeof ds);
    ds.name = name;
    if ((rc = ckpt_hdf5__get_u32(b, &dtype)) < 0 || (rc = ckpt_hdf5__get_u8(b, &swap)) < 0 ||
        (rc = ckpt_hdf5__get_u8(b, &ndim)) < 0)
        return rc;
    if (dtype >= CKPT_DTYPE_COUNT || !ckpt_dtype_size((ckpt_dtype)dtype) || swap > 1)
        return ckpt_hdf5__malformed(b, "a dataset of no known type");
    if (ndim > CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s' has %u dimensions, more than %d", b->path, name,
                              ndim, CKPT_MAX_DIMS);
    ds.dtype = (ckpt_dtype)dtype;
    ds.byteswap = (int)swap;
    ds.es = ckpt_dtype_size(ds.dtype);
    ds.ndim = (int)ndim;
    ds.nbytes = ds.es;
    for (d = 0; d < ds.ndim; d++) {
        if ((rc = ckpt_hdf5__get_u64(b, &dim)) < 0)
            return rc;
        if (dim > (uint64_t)INT64_MAX || CKPT_MUL_OVERFLOWS(ds.nbytes, dim, &ds.nbytes))
            return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': too large", b->path, name);
        ds.shape[d] = (int64_t)dim;
    }
    if ((rc = ckpt_hdf5__get_u8(b, &layout)) < 0)
        return rc;
    if (layout == CKPT_H5L_CONTIGUOUS)
        rc = contiguous(b, &ds, &s);
    else if (layout == CKPT_H5L_COMPACT)
        rc = compact(b, &ds, &s);
    else if (layout == CKPT_H5L_CHUNKED)
        rc = chunked(b, &ds, &s);
    else
        rc = ckpt_hdf5__malformed(b, "a dataset of unknown layout");
    if (rc != 0)
        return rc;
    if ((rc = ckpt_reader_add_tensor(b->r, &t)) < 0)
        return rc;
    *index = (size_t)rc;
    t->name = ds.name;
    t->dtype = ds.dtype;
    t->ndim = ds.ndim;
    for (d = 0; d < ds.ndim; d++)
        t->shape[d] = ds.shape[d];
    ckpt_tensor_set_contiguous(t);
    t->storage = s;
    return 0;
}
