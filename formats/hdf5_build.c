/* The checkpoint of an HDF5 file, built from the records of the child process that walked
 * it (hdf5_private.h describes them). Nothing in them is trusted: every count and length is
 * bounded by the bytes left before anything is allocated, every offset by the file, and the
 * stream must end where the walk says it ends. Tensor bytes are located here once: a
 * contiguous dataset is one raw extent; a chunked one a tiled storage whose tiles are its
 * chunks (each an extent decoded by the engine), chunks never written a fill; compact data
 * and fill values are copied into one memory file. */
#include "hdf5_private.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Groups nested deeper than this are refused: the engine walks value trees recursively. */
#define MAX_DEPTH 256
/* Lists nested deeper than this are no HDF5 dataspace (32 dimensions at most). */
#define MAX_VALUE_DEPTH 33

typedef struct level {
    ckpt_value *dict;
    size_t prefix_len; /* of the path prefix of its members */
} level;

typedef struct build {
    ckpt_reader *r;
    ckpt_arena *arena;
    const ckpt_file *file;
    const char *path;
    const unsigned char *p, *end;
    level *stack;
    size_t depth, cap;
    char *prefix; /* path of the current group's members: "" or "a/b/" */
    size_t prefix_cap;
    ckpt_value *attributes; /* "__attributes__", made at the first attribute */
    /* bytes that are in no mapped range, to become one memory file, and the extents that
     * point into them (offset = where in `mem`) */
    unsigned char *mem;
    size_t mem_len, mem_cap;
    ckpt_extent **pending;
    size_t n_pending, cap_pending;
} build;

static int malformed(const build *b, const char *what)
{
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                           "%s: corrupt HDF5 file (its metadata as the HDF5 library reported it: %s)", b->path, what);
}

/* ---- reading records ---- */

static int get_le(build *b, size_t n, uint64_t *v)
{
    size_t i;

    *v = 0;
    if ((size_t)(b->end - b->p) < n)
        return malformed(b, "cut short");
    for (i = 0; i < n; i++)
        *v |= (uint64_t)b->p[i] << (8 * i);
    b->p += n;
    return 0;
}

static int get_u8(build *b, unsigned *v)
{
    uint64_t x;
    int rc = get_le(b, 1, &x);

    *v = (unsigned)x;
    return rc;
}

static int get_u32(build *b, uint32_t *v)
{
    uint64_t x;
    int rc = get_le(b, 4, &x);

    *v = (uint32_t)x;
    return rc;
}

static int get_u64(build *b, uint64_t *v)
{
    return get_le(b, 8, v);
}

static int get_bytes(build *b, const unsigned char **data, size_t *n)
{
    uint32_t len;
    int rc;

    if ((rc = get_u32(b, &len)) < 0)
        return rc;
    if (len > (size_t)(b->end - b->p) || len >= INT_MAX)
        return malformed(b, "a string runs past the end");
    *data = b->p;
    *n = len;
    b->p += len;
    return 0;
}

/* A name or a message: bytes without a NUL, which would cut them short. */
static int get_text(build *b, const char **s, size_t *n)
{
    const unsigned char *data;
    int rc;

    if ((rc = get_bytes(b, &data, n)) < 0)
        return rc;
    if (memchr(data, 0, *n))
        return malformed(b, "a name holds a NUL byte");
    *s = (const char *)data;
    return 0;
}

static ckpt_value *new_key(build *b, const char *s, size_t n)
{
    return ckpt_value_new_str(b->arena, s, n);
}

static int get_value(build *b, int depth, ckpt_value **out)
{
    const unsigned char *s;
    uint64_t u;
    uint32_t n, i;
    unsigned kind;
    double d;
    size_t len;
    int rc;

    *out = NULL;
    if (depth > MAX_VALUE_DEPTH)
        return malformed(b, "a value nested too deeply");
    if ((rc = get_u8(b, &kind)) < 0)
        return rc;
    switch (kind) {
    case CKPT_H5V_LIST:
        if ((rc = get_u32(b, &n)) < 0)
            return rc;
        if (n > (size_t)(b->end - b->p))
            return malformed(b, "a list longer than what is left");
        if (!(*out = ckpt_value_new(b->arena, CKPT_VAL_LIST)))
            return ckpt_error_oom();
        for (i = 0; i < n; i++) {
            ckpt_value *item;
            if ((rc = get_value(b, depth + 1, &item)) < 0)
                return rc;
            if ((rc = ckpt_value_append(b->arena, *out, item)) < 0)
                return rc;
        }
        return 0;
    case CKPT_H5V_STR:
        if ((rc = get_bytes(b, &s, &len)) < 0)
            return rc;
        *out = ckpt_value_new_str(b->arena, (const char *)s, len);
        break;
    case CKPT_H5V_INT:
        if ((rc = get_u64(b, &u)) < 0)
            return rc;
        *out = ckpt_value_new_int(b->arena, (int64_t)u);
        break;
    case CKPT_H5V_FLOAT:
        if ((rc = get_u64(b, &u)) < 0)
            return rc;
        memcpy(&d, &u, sizeof d);
        *out = ckpt_value_new_float(b->arena, d);
        break;
    case CKPT_H5V_BOOL:
        if ((rc = get_u8(b, &kind)) < 0)
            return rc;
        *out = ckpt_value_new_bool(b->arena, kind != 0);
        break;
    default:
        return malformed(b, "a value of unknown kind");
    }
    return *out ? 0 : ckpt_error_oom();
}

/* ---- bytes kept in memory ---- */

static int keep_bytes(build *b, ckpt_extent *e, const void *data, size_t n)
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

/* One memory file for all of them, once their bytes are all known. */
static int keep_in_memory(build *b)
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

static int too_short(const build *b, const dset *ds, const char *what, uint64_t at, uint64_t n)
{
    return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': %s of %llu bytes at offset %llu runs past the end of the "
                          "file (%llu bytes)",
                          b->path, ds->name, what, (unsigned long long)n, (unsigned long long)at,
                          (unsigned long long)b->file->size);
}

static ckpt_storage *new_storage(build *b, const dset *ds, size_t n_extents)
{
    ckpt_storage *s = ckpt_reader_new_storage(b->r, ds->name, ds->dtype, n_extents);

    if (s)
        s->byteswap = ds->byteswap;
    return s;
}

static int get_fill(build *b, const dset *ds, fill *f)
{
    int rc;

    if ((rc = get_u8(b, &f->kind)) < 0)
        return rc;
    f->n = 0;
    if (f->kind == CKPT_H5F_ZERO)
        return 0;
    if (f->kind != CKPT_H5F_VALUE && f->kind != CKPT_H5F_UNREADABLE)
        return malformed(b, "a fill value of unknown kind");
    if ((rc = get_bytes(b, &f->bytes, &f->n)) < 0)
        return rc;
    if (f->kind == CKPT_H5F_VALUE && f->n != ds->es)
        return malformed(b, "a fill value that is not one element");
    return 0;
}

/* An extent of `size` bytes of the dataset's fill value. Zeros need no bytes at all. */
static int fill_extent(build *b, const fill *f, ckpt_extent *e, uint64_t size)
{
    memset(e, 0, sizeof *e);
    e->encoding = CKPT_EXTENT_FILL;
    e->size = size;
    if (f->kind == CKPT_H5F_UNREADABLE)
        return ckpt_error_set(CKPT_EFORMAT, "%.*s", (int)f->n, (const char *)f->bytes);
    return f->kind == CKPT_H5F_VALUE ? keep_bytes(b, e, f->bytes, f->n) : 0;
}

static int contiguous(build *b, const dset *ds, ckpt_storage **out)
{
    unsigned allocated;
    uint64_t at = 0, end;
    ckpt_storage *s;
    fill f = { CKPT_H5F_ZERO, NULL, 0 };
    int rc;

    if ((rc = get_u8(b, &allocated)) < 0 || (rc = allocated ? get_u64(b, &at) : get_fill(b, ds, &f)) < 0)
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

static int compact(build *b, const dset *ds, ckpt_storage **out)
{
    const unsigned char *data;
    ckpt_storage *s;
    size_t n;
    int rc;

    if ((rc = get_bytes(b, &data, &n)) < 0)
        return rc;
    if (ds->nbytes > CKPT_H5_MAX_COMPACT)
        return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': a compact dataset of %llu bytes", b->path, ds->name,
                              (unsigned long long)ds->nbytes);
    if (n != ds->nbytes)
        return malformed(b, "compact data of another size than its dataset");
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
static int stored_chunk(build *b, const dset *ds, const ckpt_h5_pipeline *p, uint64_t chunk_bytes, uint64_t at,
                        uint64_t stored, uint32_t mask, ckpt_tile *t)
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
static int chunk_layout(build *b, const dset *ds, int64_t *cdims, int64_t *grid, uint64_t *n_chunks,
                        uint64_t *chunk_bytes, ckpt_h5_pipeline *p, fill *f)
{
    unsigned n;
    uint64_t c;
    uint32_t id, size;
    int d, rc;

    *n_chunks = 1;
    *chunk_bytes = ds->es;
    for (d = 0; d < ds->ndim; d++) {
        if ((rc = get_u64(b, &c)) < 0)
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
    memset(p, 0, sizeof *p);
    if ((rc = get_u8(b, &n)) < 0)
        return rc;
    if (n > CKPT_H5_MAX_FILTERS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': %u filters", b->path, ds->name, n);
    for (p->n = 0; p->n < n; p->n++) {
        if ((rc = get_u32(b, &id)) < 0 || (rc = get_u32(b, &size)) < 0)
            return rc;
        p->id[p->n] = id;
        p->shuffle_size[p->n] = size;
    }
    return get_fill(b, ds, f);
}

/* 1 when the walk failed in the middle of the chunks (a FAIL record follows). */
static int chunked(build *b, const dset *ds, ckpt_storage **out)
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
            if ((rc = get_u8(b, &kind)) < 0)
                return rc;
            if (kind == CKPT_H5C_ABORT)
                return 1;
            if (kind == CKPT_H5C_FILL && ((rc = get_u64(b, &run)) < 0 || run == 0 || run > n_chunks - i))
                return rc < 0 ? rc : malformed(b, "a run of chunks past the grid");
            if (kind == CKPT_H5C_STORED && ((rc = get_u64(b, &offset)) < 0 || (rc = get_u64(b, &stored)) < 0 ||
                                            (rc = get_u32(b, &mask)) < 0))
                return rc;
            if (kind != CKPT_H5C_FILL && kind != CKPT_H5C_STORED)
                return malformed(b, "a chunk of unknown kind");
        }
        if (run) {
            run--;
            if (!fills && (!(fills = new_storage(b, ds, 1)) || (rc = fill_extent(b, &f, &fills->extents[0], chunk_bytes)) < 0))
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

/* A DATASET record: 0 and the tensor's index, 1 when the walk failed in it, or an error. */
static int dataset(build *b, const char *key, size_t key_len, size_t *index)
{
    ckpt_storage *s = NULL;
    ckpt_tensor *t;
    unsigned swap, ndim, layout;
    uint32_t dtype;
    uint64_t dim;
    dset ds;
    char *name;
    int d, rc;

    memset(&ds, 0, sizeof ds);
    if (!(name = ckpt_arena_alloc(b->arena, b->stack[b->depth - 1].prefix_len + key_len + 1)))
        return ckpt_error_oom();
    memcpy(name, b->prefix, b->stack[b->depth - 1].prefix_len);
    memcpy(name + b->stack[b->depth - 1].prefix_len, key, key_len);
    name[b->stack[b->depth - 1].prefix_len + key_len] = '\0';
    ds.name = name;
    if ((rc = get_u32(b, &dtype)) < 0 || (rc = get_u8(b, &swap)) < 0 || (rc = get_u8(b, &ndim)) < 0)
        return rc;
    if (dtype >= CKPT_DTYPE_COUNT || !ckpt_dtype_size((ckpt_dtype)dtype) || swap > 1)
        return malformed(b, "a dataset of no known type");
    if (ndim > CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s' has %u dimensions, more than %d", b->path, name,
                              ndim, CKPT_MAX_DIMS);
    ds.dtype = (ckpt_dtype)dtype;
    ds.byteswap = (int)swap;
    ds.es = ckpt_dtype_size(ds.dtype);
    ds.ndim = (int)ndim;
    ds.nbytes = ds.es;
    for (d = 0; d < ds.ndim; d++) {
        if ((rc = get_u64(b, &dim)) < 0)
            return rc;
        if (dim > (uint64_t)INT64_MAX || CKPT_MUL_OVERFLOWS(ds.nbytes, dim, &ds.nbytes))
            return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': too large", b->path, name);
        ds.shape[d] = (int64_t)dim;
    }
    if ((rc = get_u8(b, &layout)) < 0)
        return rc;
    if (layout == CKPT_H5L_CONTIGUOUS)
        rc = contiguous(b, &ds, &s);
    else if (layout == CKPT_H5L_COMPACT)
        rc = compact(b, &ds, &s);
    else if (layout == CKPT_H5L_CHUNKED)
        rc = chunked(b, &ds, &s);
    else
        rc = malformed(b, "a dataset of unknown layout");
    if (rc != 0)
        return rc;
    if ((rc = ckpt_reader_add_tensor(b->r, &t)) < 0)
        return rc;
    *index = (size_t)rc;
    t->name = name;
    t->dtype = ds.dtype;
    t->ndim = ds.ndim;
    for (d = 0; d < ds.ndim; d++)
        t->shape[d] = ds.shape[d];
    ckpt_tensor_set_contiguous(t);
    t->storage = s;
    return 0;
}

/* ---- groups and attributes ---- */

static int open_group(build *b, const char *key, size_t n)
{
    size_t len = b->stack[b->depth - 1].prefix_len, need;
    ckpt_value *k = new_key(b, key, n), *dict = ckpt_value_new(b->arena, CKPT_VAL_DICT);
    int rc;

    if (!k || !dict)
        return ckpt_error_oom();
    if (b->depth > MAX_DEPTH)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: groups nested more than %d deep", b->path, MAX_DEPTH);
    if ((rc = ckpt_value_dict_set(b->arena, b->stack[b->depth - 1].dict, k, dict)) < 0)
        return rc;
    if (b->depth == b->cap) {
        level *grown = realloc(b->stack, (b->cap * 2) * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        b->stack = grown;
        b->cap *= 2;
    }
    need = len + n + 2;
    if (need > b->prefix_cap) {
        char *grown = realloc(b->prefix, need * 2);
        if (!grown)
            return ckpt_error_oom();
        b->prefix = grown;
        b->prefix_cap = need * 2;
    }
    memcpy(b->prefix + len, key, n);
    b->prefix[len + n] = '/';
    b->prefix[len + n + 1] = '\0';
    b->stack[b->depth].dict = dict;
    b->stack[b->depth].prefix_len = len + n + 1;
    b->depth++;
    return 0;
}

static int attribute(build *b)
{
    const char *where, *name;
    size_t nw, nn;
    ckpt_value *v, *dict, *k;
    char *w;
    int rc;

    if ((rc = get_text(b, &where, &nw)) < 0 || (rc = get_text(b, &name, &nn)) < 0 || (rc = get_value(b, 0, &v)) < 0)
        return rc;
    if (!b->attributes && !(b->attributes = ckpt_value_new(b->arena, CKPT_VAL_DICT)))
        return ckpt_error_oom();
    if (!(w = ckpt_arena_strndup(b->arena, where, nw)))
        return ckpt_error_oom();
    if (!(dict = ckpt_value_dict_get(b->attributes, w))) {
        if (!(k = new_key(b, where, nw)) || !(dict = ckpt_value_new(b->arena, CKPT_VAL_DICT)))
            return ckpt_error_oom();
        if ((rc = ckpt_value_dict_set(b->arena, b->attributes, k, dict)) < 0)
            return rc;
    }
    if (!(k = new_key(b, name, nn)))
        return ckpt_error_oom();
    return ckpt_value_dict_set(b->arena, dict, k, v);
}

/* ---- the stream ---- */

static int fail_record(build *b)
{
    uint32_t code, klass;
    const char *msg;
    size_t n;
    int rc;

    if ((rc = get_u32(b, &code)) < 0 || (rc = get_u32(b, &klass)) < 0 || (rc = get_text(b, &msg, &n)) < 0)
        return rc;
    if (code == 0 || code > 64 || n == 0)
        return malformed(b, "a failure without a reason");
    return ckpt_error_setc(-(int)code, (int)klass, "%.*s", (int)n, msg);
}

/* A member of the current group under `key`: a tensor, or a dataset of strings. */
static int member(build *b, unsigned tag)
{
    ckpt_value *k, *v = NULL;
    const char *key;
    size_t n, index = 0;
    int rc;

    if ((rc = get_text(b, &key, &n)) < 0)
        return rc;
    if (tag == CKPT_H5R_VALUE)
        rc = get_value(b, 0, &v);
    else if ((rc = dataset(b, key, n, &index)) == 0 && !(v = ckpt_value_new_tensor(b->arena, index)))
        rc = ckpt_error_oom();
    if (rc != 0)
        return rc;
    if (!(k = new_key(b, key, n)))
        return ckpt_error_oom();
    return ckpt_value_dict_set(b->arena, b->stack[b->depth - 1].dict, k, v);
}

static int records(build *b)
{
    const char *s;
    size_t n;
    unsigned tag;
    int rc, aborted = 0;

    for (;;) {
        if (b->p == b->end)
            return malformed(b, "it ends before the walk does");
        if ((rc = get_u8(b, &tag)) < 0)
            return rc;
        if (aborted && tag != CKPT_H5R_FAIL)
            return malformed(b, "a walk that stopped went on");
        switch (tag) {
        case CKPT_H5R_NOTE:
            if ((rc = get_text(b, &s, &n)) < 0)
                return rc;
            ckpt_reader_note(b->r, "%.*s", (int)n, s);
            break;
        case CKPT_H5R_GROUP:
            if ((rc = get_text(b, &s, &n)) < 0 || (rc = open_group(b, s, n)) < 0)
                return rc;
            break;
        case CKPT_H5R_END:
            if (b->depth == 1)
                return malformed(b, "a group closed that was not open");
            b->depth--;
            b->prefix[b->stack[b->depth - 1].prefix_len] = '\0';
            break;
        case CKPT_H5R_VALUE:
        case CKPT_H5R_DATASET:
            if ((rc = member(b, tag)) < 0)
                return rc;
            aborted = rc == 1;
            break;
        case CKPT_H5R_ATTR:
            if ((rc = attribute(b)) < 0)
                return rc;
            break;
        case CKPT_H5R_DONE:
            if (b->depth != 1 || b->p != b->end)
                return malformed(b, b->depth != 1 ? "a group left open" : "records after the last");
            return 0;
        case CKPT_H5R_FAIL:
            return fail_record(b);
        default:
            return malformed(b, "a record of unknown kind");
        }
    }
}

int ckpt_hdf5__build(ckpt_reader *r, const unsigned char *rec, size_t len)
{
    build b;
    ckpt_value *root, *k;
    int rc;

    memset(&b, 0, sizeof b);
    b.r = r;
    b.arena = ckpt_reader_arena(r);
    b.file = ckpt_reader_file(r);
    b.path = ckpt_reader_path(r);
    b.p = rec;
    b.end = rec + len;
    b.cap = 16;
    b.prefix_cap = 256;
    if (!(b.stack = malloc(b.cap * sizeof *b.stack)) || !(b.prefix = malloc(b.prefix_cap)) ||
        !(root = ckpt_value_new(b.arena, CKPT_VAL_DICT))) {
        rc = ckpt_error_oom();
        goto done;
    }
    b.prefix[0] = '\0';
    b.stack[0].dict = root;
    b.stack[0].prefix_len = 0;
    b.depth = 1;
    if ((rc = records(&b)) < 0)
        goto done;
    if (b.attributes) {
        if (!(k = new_key(&b, "__attributes__", 14))) {
            rc = ckpt_error_oom();
            goto done;
        }
        if ((rc = ckpt_value_dict_set(b.arena, root, k, b.attributes)) < 0)
            goto done;
    }
    if ((rc = keep_in_memory(&b)) < 0)
        goto done;
    ckpt_reader_set_root(r, root);
done:
    free(b.stack);
    free(b.prefix);
    free(b.mem);
    free(b.pending);
    return rc < 0 ? rc : 0;
}
