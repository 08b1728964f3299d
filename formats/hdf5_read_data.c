/* An HDF5 dataset of numbers as a tensor, its bytes located in the mapped file once, here,
 * so that reading never goes through libhdf5: a contiguous dataset is one raw extent; a
 * chunked one a tiled storage whose tiles are its chunks (each an extent decoded by the
 * engine: deflate, zstd, shuffle, Fletcher-32), chunks never written a fill; a compact one,
 * and fill values, bytes copied into the reader's memory file. */
#include "hdf5_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A chunked dataset of more chunks than this is refused: each is a tile of the engine's. */
#define MAX_CHUNKS ((uint64_t)1 << 24)

typedef struct dset {
    ckpt_h5_reader *h;
    hid_t d, ftype, dcpl;
    const char *name;
    ckpt_dtype dtype;
    int byteswap;
    size_t es;
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    uint64_t nbytes;
} dset;

static int too_short(const dset *ds, const char *what, uint64_t at, uint64_t n)
{
    return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': %s of %llu bytes at offset %llu runs past the end of the "
                          "file (%llu bytes)",
                          ds->h->path, ds->name, what, (unsigned long long)n, (unsigned long long)at,
                          (unsigned long long)ds->h->file->size);
}

static ckpt_storage *new_storage(const dset *ds, size_t n_extents)
{
    ckpt_storage *s = ckpt_reader_new_storage(ds->h->r, ds->name, ds->dtype, n_extents);

    if (s)
        s->byteswap = ds->byteswap;
    return s;
}

/* An extent of `size` bytes of the dataset's fill value. Zeros need no bytes at all. */
static int fill_extent(const dset *ds, ckpt_extent *e, uint64_t size)
{
    H5D_fill_value_t how;
    unsigned char value[64];
    size_t k;

    memset(e, 0, sizeof *e);
    e->encoding = CKPT_EXTENT_FILL;
    e->size = size;
    if (ds->es > sizeof value || H5Pfill_value_defined(ds->dcpl, &how) < 0)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its fill value", ds->h->path, ds->name);
    if (how != H5D_FILL_VALUE_USER_DEFINED)
        return 0;
    memset(value, 0, sizeof value);
    if (H5Pget_fill_value(ds->dcpl, ds->ftype, value) < 0)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its fill value", ds->h->path, ds->name);
    for (k = 0; k < ds->es && value[k] == 0; k++)
        ;
    return k == ds->es ? 0 : ckpt_hdf5__keep_bytes(ds->h, e, value, ds->es);
}

static int contiguous(dset *ds, ckpt_storage **out)
{
    /* HDF5 1.10 adds the user block's size even to the undefined address of data never
     * written: storage of size 0 is what says so */
    haddr_t at = H5Dget_storage_size(ds->d) ? H5Dget_offset(ds->d) : HADDR_UNDEF;
    ckpt_storage *s;
    uint64_t end;

    H5Eclear2(H5E_DEFAULT);
    if (!(*out = s = new_storage(ds, ds->nbytes ? 1 : 0)))
        return CKPT_ENOMEM;
    s->nbytes = ds->nbytes;
    if (!ds->nbytes)
        return 0;
    if (at == HADDR_UNDEF)
        return fill_extent(ds, &s->extents[0], ds->nbytes);
    if (CKPT_ADD_OVERFLOWS((uint64_t)at, ds->nbytes, &end) || end > ds->h->file->size)
        return too_short(ds, "its data", (uint64_t)at, ds->nbytes);
    s->extents[0].file = ds->h->file;
    s->extents[0].offset = (uint64_t)at;
    s->extents[0].stored_size = ds->nbytes;
    s->extents[0].size = ds->nbytes;
    s->extents[0].encoding = CKPT_EXTENT_RAW;
    return 0;
}

/* Small by construction (at most 64 KiB in the object header): read through libhdf5 once, as
 * stored (the file's own type, no conversion), and kept in the memory file. */
static int compact(dset *ds, ckpt_storage **out)
{
    ckpt_storage *s;
    unsigned char *buf;
    int rc;

    if (!(*out = s = new_storage(ds, ds->nbytes ? 1 : 0)))
        return CKPT_ENOMEM;
    s->nbytes = ds->nbytes;
    if (!ds->nbytes)
        return 0;
    if (ds->nbytes > ((uint64_t)1 << 20))
        return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': a compact dataset of %llu bytes", ds->h->path, ds->name,
                              (unsigned long long)ds->nbytes);
    if (!(buf = malloc((size_t)ds->nbytes)))
        return ckpt_error_oom();
    if (H5Dread(ds->d, ds->ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        rc = ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its compact data", ds->h->path, ds->name);
    else
        rc = ckpt_hdf5__keep_bytes(ds->h, &s->extents[0], buf, (size_t)ds->nbytes);
    free(buf);
    s->extents[0].size = ds->nbytes;
    s->extents[0].encoding = CKPT_EXTENT_RAW;
    return rc;
}

static int pipeline(const dset *ds, ckpt_h5_pipeline *p)
{
    int n = H5Pget_nfilters(ds->dcpl), i;

    memset(p, 0, sizeof *p);
    if (n < 0)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its filters", ds->h->path, ds->name);
    if (n > CKPT_H5_MAX_FILTERS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': %d filters", ds->h->path, ds->name, n);
    for (i = 0; i < n; i++) {
        unsigned flags, values[8], config;
        size_t n_values = sizeof values / sizeof values[0];
        char fname[64] = "";
        H5Z_filter_t id = H5Pget_filter2(ds->dcpl, (unsigned)i, &flags, &n_values, values, sizeof fname, fname, &config);
        if (id < 0)
            return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read filter %d", ds->h->path, ds->name, i);
        p->id[i] = (unsigned)id;
        p->shuffle_size[i] = id == H5Z_FILTER_SHUFFLE && n_values > 0 ? values[0] : 0;
    }
    p->n = (size_t)n;
    return 0;
}

/* Where libhdf5's chunk addresses count from, when the file has a user block: 1.10 counts
 * them from the superblock (unlike H5Dget_offset), later versions may not. The first chunk
 * read directly through libhdf5 tells, once per file. */
static int chunk_offset(dset *ds, const hsize_t *coord, haddr_t addr, hsize_t stored, uint64_t *out)
{
    ckpt_h5_reader *h = ds->h;
    uint32_t mask;
    unsigned char *buf;

    *out = (uint64_t)addr;
    if (!h->user_block || h->chunk_base == 1)
        return 0;
    if (h->chunk_base == 2) {
        *out += h->user_block;
        return 0;
    }
    if (!(buf = malloc(stored ? (size_t)stored : 1)))
        return ckpt_error_oom();
    if (H5Dread_chunk(ds->d, H5P_DEFAULT, coord, &mask, buf) < 0) {
        free(buf);
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read a chunk", h->path, ds->name);
    }
    if ((uint64_t)addr + stored <= h->file->size && memcmp(h->file->data + addr, buf, (size_t)stored) == 0)
        h->chunk_base = 1;
    else if ((uint64_t)addr + h->user_block + stored <= h->file->size &&
             memcmp(h->file->data + addr + h->user_block, buf, (size_t)stored) == 0)
        h->chunk_base = 2;
    free(buf);
    if (!h->chunk_base)
        return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': a chunk is not where HDF5 says it is", h->path,
                              ds->name);
    return chunk_offset(ds, coord, addr, stored, out);
}

/* Chunks are looked up by their place in the grid: a chunk never written has none, and is a
 * fill. Lookups by coordinate cost a B-tree descent each, where listing by index would cost
 * a walk over all chunks each (HDF5 1.10). */
static int chunked(dset *ds, ckpt_storage **out)
{
    ckpt_h5_reader *h = ds->h;
    hsize_t cdims[H5S_MAX_RANK], coord[H5S_MAX_RANK];
    int64_t grid[CKPT_MAX_DIMS], at[CKPT_MAX_DIMS];
    uint64_t n_chunks = 1, chunk_bytes = ds->es, i;
    ckpt_storage *s, *fill = NULL;
    ckpt_h5_pipeline p;
    int d, rc;

    if (H5Pget_chunk(ds->dcpl, ds->ndim, cdims) != ds->ndim)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its chunk shape", h->path, ds->name);
    for (d = 0; d < ds->ndim; d++) {
        if (cdims[d] == 0 || cdims[d] > (hsize_t)INT64_MAX)
            return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': chunk shape is 0 along axis %d", h->path, ds->name, d);
        grid[d] = (int64_t)(((uint64_t)ds->shape[d] + cdims[d] - 1) / cdims[d]);
        if (CKPT_MUL_OVERFLOWS(n_chunks, (uint64_t)grid[d], &n_chunks) ||
            CKPT_MUL_OVERFLOWS(chunk_bytes, (uint64_t)cdims[d], &chunk_bytes))
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': too many or too large chunks", h->path, ds->name);
    }
    if (n_chunks > MAX_CHUNKS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': %llu chunks, more than %llu", h->path, ds->name,
                              (unsigned long long)n_chunks, (unsigned long long)MAX_CHUNKS);
    if ((rc = pipeline(ds, &p)) < 0)
        return rc;
    if (!(*out = s = ckpt_reader_new_tiled_storage(h->r, ds->name, ds->dtype, ds->ndim, ds->shape, (size_t)n_chunks)))
        return CKPT_ENOMEM;
    for (d = 0; d < ds->ndim; d++) {
        ((ckpt_tiling *)s->tiling)->chunk[d] = (int64_t)cdims[d];
        at[d] = 0;
    }
    for (i = 0; i < n_chunks; i++) {
        ckpt_tile *t = &((ckpt_tiling *)s->tiling)->tiles[i];
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t stored = 0;
        uint64_t end;
        char why[200];

        for (d = 0; d < ds->ndim; d++) {
            coord[d] = (hsize_t)at[d] * cdims[d];
            t->offset[d] = (int64_t)coord[d];
            t->size[d] = ds->shape[d] - t->offset[d] < (int64_t)cdims[d] ? ds->shape[d] - t->offset[d] : (int64_t)cdims[d];
            t->stored[d] = (int64_t)cdims[d];
        }
        if (H5Dget_chunk_info_by_coord(ds->d, coord, &mask, &addr, &stored) < 0) {
            /* a chunk never written is an error to some versions, an undefined address to others */
            H5Eclear2(H5E_DEFAULT);
            addr = HADDR_UNDEF;
        }
        if (addr == HADDR_UNDEF || stored == 0) {
            if (!fill && (!(fill = new_storage(ds, 1)) || (rc = fill_extent(ds, &fill->extents[0], chunk_bytes)) < 0))
                return fill ? rc : CKPT_ENOMEM;
            fill->nbytes = chunk_bytes;
            t->source = fill;
        } else {
            ckpt_storage *c = new_storage(ds, 1);
            ckpt_extent *e;
            if (!c)
                return CKPT_ENOMEM;
            e = &c->extents[0];
            if ((rc = ckpt_hdf5__chunk_encoding(&p, mask, ds->es, e, why, sizeof why)) < 0)
                return ckpt_error_set(rc, "%s: dataset '%s': %s", h->path, ds->name, why);
            if ((uint64_t)addr >= h->file->size || (uint64_t)stored > h->file->size - (uint64_t)addr)
                return too_short(ds, "a chunk", (uint64_t)addr, (uint64_t)stored);
            if ((rc = chunk_offset(ds, coord, addr, stored, &e->offset)) < 0)
                return rc;
            if (CKPT_ADD_OVERFLOWS(e->offset, (uint64_t)stored, &end) || end > h->file->size)
                return too_short(ds, "a chunk", e->offset, (uint64_t)stored);
            e->file = h->file;
            e->stored_size = (uint64_t)stored;
            e->size = chunk_bytes;
            if (e->encoding == CKPT_EXTENT_RAW && !e->flags && e->stored_size != e->size)
                return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': an unfiltered chunk at offset %llu stores %llu "
                                      "bytes for %llu",
                                      h->path, ds->name, (unsigned long long)addr, (unsigned long long)stored,
                                      (unsigned long long)chunk_bytes);
            c->nbytes = chunk_bytes;
            t->source = c;
        }
        for (d = ds->ndim - 1; d >= 0 && ++at[d] == grid[d]; d--)
            at[d] = 0;
    }
    if ((rc = ckpt_storage_tiling_check(s)) < 0)
        ckpt_error_prefix("%s: dataset '%s'", h->path, ds->name);
    return rc;
}

/* Element type, shape and layout of the dataset; 0 when it holds no numbers. */
static int describe(dset *ds, int *numeric)
{
    ckpt_h5_reader *h = ds->h;
    hsize_t dims[H5S_MAX_RANK];
    ckpt_h5_type t;
    ckpt_h5_names names;
    char attr[128], why[256];
    unsigned info;
    hid_t sp;
    int d, n, has_attr, rc;

    *numeric = 0;
    if ((rc = ckpt_hdf5__describe_type(ds->ftype, &t, &names)) < 0)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its type", h->path, ds->name);
    if (t.cls == CKPT_H5_OTHER || (t.cls == CKPT_H5_COMPOUND && !(t.n_members == 2 && t.member_name[0] &&
                                                                  strcmp(t.member_name[0], "r") == 0)))
        return 0;
    has_attr = ckpt_hdf5__string_attr(ds->d, CKPT_H5_DTYPE_ATTR, attr, sizeof attr);
    if ((rc = ckpt_hdf5__dtype(&t, has_attr ? attr : NULL, &ds->dtype, &ds->byteswap, &info, why, sizeof why)) < 0)
        return ckpt_error_set(rc, "%s: dataset '%s': %s", h->path, ds->name, why);
    if (info & CKPT_H5_GUESSED)
        ckpt_reader_note(h->r, "%s: dataset '%s': an untagged 2-byte opaque type, read as bfloat16 (what h5py writes "
                         "for ml_dtypes.bfloat16); a \"dtype\" attribute would say so", h->path, ds->name);
    if (info & CKPT_H5_ENUM_INT)
        ckpt_reader_note(h->r, "%s: dataset '%s': an enum, read as its integer values", h->path, ds->name);
    ds->es = ckpt_dtype_size(ds->dtype);
    if ((sp = H5Dget_space(ds->d)) < 0)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its shape", h->path, ds->name);
    if (H5Sget_simple_extent_type(sp) == H5S_NULL) {
        H5Sclose(sp);
        ckpt_reader_note(h->r, "%s: dataset '%s' has no dataspace (H5S_NULL), skipped", h->path, ds->name);
        return 0;
    }
    n = H5Sget_simple_extent_ndims(sp);
    if (n > CKPT_MAX_DIMS) {
        H5Sclose(sp);
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s' has %d dimensions, more than %d", h->path, ds->name,
                              n, CKPT_MAX_DIMS);
    }
    rc = n < 0 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0 ? -1 : 0;
    H5Sclose(sp);
    if (rc < 0)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its shape", h->path, ds->name);
    ds->ndim = n;
    ds->nbytes = ds->es;
    for (d = 0; d < n; d++) {
        if (dims[d] > (hsize_t)INT64_MAX || CKPT_MUL_OVERFLOWS(ds->nbytes, (uint64_t)dims[d], &ds->nbytes))
            return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': too large", h->path, ds->name);
        ds->shape[d] = (int64_t)dims[d];
    }
    *numeric = 1;
    return 0;
}

int ckpt_hdf5__dataset(ckpt_h5_reader *h, hid_t d, const char *name, size_t *index)
{
    dset ds;
    ckpt_storage *s = NULL;
    ckpt_tensor *t;
    int numeric, rc, k;

    memset(&ds, 0, sizeof ds);
    ds.h = h;
    ds.d = d;
    ds.name = name;
    ds.ftype = H5Dget_type(d);
    ds.dcpl = H5Dget_create_plist(d);
    if (ds.ftype < 0 || ds.dcpl < 0) {
        rc = ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': cannot read its type or layout", h->path, name);
        goto done;
    }
    if ((rc = describe(&ds, &numeric)) < 0 || !numeric)
        goto done;
    switch (H5Pget_layout(ds.dcpl)) {
    case H5D_CONTIGUOUS:
        rc = contiguous(&ds, &s);
        break;
    case H5D_CHUNKED:
        rc = chunked(&ds, &s);
        break;
    case H5D_COMPACT:
        rc = compact(&ds, &s);
        break;
    case H5D_VIRTUAL:
        rc = ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s' is virtual (its data lies in other files)", h->path,
                            name);
        break;
    default:
        rc = ckpt_hdf5__fail(CKPT_EFORMAT, "%s: dataset '%s': unknown layout", h->path, name);
        break;
    }
    if (rc < 0)
        goto done;
    if ((rc = ckpt_reader_add_tensor(h->r, &t)) < 0)
        goto done;
    *index = (size_t)rc;
    t->name = ckpt_arena_strndup(h->arena, name, strlen(name));
    t->dtype = ds.dtype;
    t->ndim = ds.ndim;
    for (k = 0; k < ds.ndim; k++)
        t->shape[k] = ds.shape[k];
    ckpt_tensor_set_contiguous(t);
    t->storage = s;
    rc = t->name ? 1 : CKPT_ENOMEM;
done:
    if (ds.ftype >= 0)
        H5Tclose(ds.ftype);
    if (ds.dcpl >= 0)
        H5Pclose(ds.dcpl);
    return rc;
}
