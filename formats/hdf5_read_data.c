/* What the walk finds out about a dataset of numbers, in the child process: its type and
 * shape, and where its bytes are (a contiguous dataset's offset, a compact one's bytes, a
 * chunked one's chunk shape, filters, and each chunk's offset, size and filter mask), sent
 * as a DATASET record for this process to check and locate (hdf5_build.c). */
#include "hdf5_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dset {
    ckpt_h5_walker *h;
    hid_t d, ftype, dcpl;
    const char *name;
    ckpt_dtype dtype;
    int byteswap;
    size_t es;
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    uint64_t nbytes;
} dset;

/* The record's head: key, type, shape, layout. */
static void put_head(const dset *ds, const char *key, unsigned layout)
{
    ckpt_h5_out *o = ds->h->out;
    int d;

    ckpt_hdf5__put_u8(o, CKPT_H5R_DATASET);
    ckpt_hdf5__put_str(o, key);
    ckpt_hdf5__put_u32(o, (uint32_t)ds->dtype);
    ckpt_hdf5__put_u8(o, (unsigned)ds->byteswap);
    ckpt_hdf5__put_u8(o, (unsigned)ds->ndim);
    for (d = 0; d < ds->ndim; d++)
        ckpt_hdf5__put_u64(o, (uint64_t)ds->shape[d]);
    ckpt_hdf5__put_u8(o, layout);
}

/* The fill value, read now: whether a fill is needed is known only later. */
static void put_fill(const dset *ds)
{
    ckpt_h5_out *o = ds->h->out;
    H5D_fill_value_t how;
    unsigned char value[64];
    size_t k;

    memset(value, 0, sizeof value);
    if (ds->es > sizeof value || H5Pfill_value_defined(ds->dcpl, &how) < 0 ||
        (how == H5D_FILL_VALUE_USER_DEFINED && H5Pget_fill_value(ds->dcpl, ds->ftype, value) < 0)) {
        ckpt_hdf5__corrupt(ds->h->path, "dataset '%s': cannot read its fill value", ds->name);
        ckpt_hdf5__put_u8(o, CKPT_H5F_UNREADABLE);
        ckpt_hdf5__put_str(o, ckpt_error_last()->message);
        return;
    }
    for (k = 0; how == H5D_FILL_VALUE_USER_DEFINED && k < ds->es && value[k] == 0; k++)
        ;
    if (how != H5D_FILL_VALUE_USER_DEFINED || k == ds->es) {
        ckpt_hdf5__put_u8(o, CKPT_H5F_ZERO);
        return;
    }
    ckpt_hdf5__put_u8(o, CKPT_H5F_VALUE);
    ckpt_hdf5__put_bytes(o, value, ds->es);
}

static int contiguous(dset *ds, const char *key)
{
    /* HDF5 1.10 adds the user block's size even to the undefined address of data never
     * written: storage of size 0 is what says so */
    haddr_t at = H5Dget_storage_size(ds->d) ? H5Dget_offset(ds->d) : HADDR_UNDEF;

    H5Eclear2(H5E_DEFAULT);
    put_head(ds, key, CKPT_H5L_CONTIGUOUS);
    ckpt_hdf5__put_u8(ds->h->out, at != HADDR_UNDEF);
    if (at != HADDR_UNDEF)
        ckpt_hdf5__put_u64(ds->h->out, (uint64_t)at);
    else
        put_fill(ds);
    return 1;
}

/* Small by construction (at most 64 KiB in the object header): read through libhdf5 once, as
 * stored (the file's own type, no conversion). */
static int compact(dset *ds, const char *key)
{
    unsigned char *buf;

    if (ds->nbytes > CKPT_H5_MAX_COMPACT)
        return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': a compact dataset of %llu bytes", ds->h->path, ds->name,
                              (unsigned long long)ds->nbytes);
    if (!(buf = malloc(ds->nbytes ? (size_t)ds->nbytes : 1)))
        return ckpt_error_oom();
    if (ds->nbytes && H5Dread(ds->d, ds->ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        return ckpt_hdf5__corrupt(ds->h->path, "dataset '%s': cannot read its compact data", ds->name);
    }
    put_head(ds, key, CKPT_H5L_COMPACT);
    ckpt_hdf5__put_bytes(ds->h->out, buf, (size_t)ds->nbytes);
    free(buf);
    return 1;
}

static int pipeline(const dset *ds, ckpt_h5_pipeline *p)
{
    int n = H5Pget_nfilters(ds->dcpl), i;

    memset(p, 0, sizeof *p);
    if (n < 0)
        return ckpt_hdf5__corrupt(ds->h->path, "dataset '%s': cannot read its filters", ds->name);
    if (n > CKPT_H5_MAX_FILTERS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': %d filters", ds->h->path, ds->name, n);
    for (i = 0; i < n; i++) {
        unsigned flags, values[8], config;
        size_t n_values = sizeof values / sizeof values[0];
        char fname[64] = "";
        H5Z_filter_t id = H5Pget_filter2(ds->dcpl, (unsigned)i, &flags, &n_values, values, sizeof fname, fname, &config);
        if (id < 0)
            return ckpt_hdf5__corrupt(ds->h->path, "dataset '%s': cannot read filter %d", ds->name, i);
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
    ckpt_h5_walker *h = ds->h;
    uint32_t mask;
    unsigned char *buf;

    *out = (uint64_t)addr;
    if (!h->user_block || h->chunk_base == 1)
        return 0;
    if (h->chunk_base == 2) {
        *out += h->user_block;
        return 0;
    }
    if ((uint64_t)addr >= h->file->size || (uint64_t)stored > h->file->size - (uint64_t)addr)
        return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': a chunk of %llu bytes at offset %llu runs past the "
                              "end of the file (%llu bytes)",
                              h->path, ds->name, (unsigned long long)stored, (unsigned long long)addr,
                              (unsigned long long)h->file->size);
    if (!(buf = malloc(stored ? (size_t)stored : 1)))
        return ckpt_error_oom();
    if (H5Dread_chunk(ds->d, H5P_DEFAULT, coord, &mask, buf) < 0) {
        free(buf);
        return ckpt_hdf5__corrupt(h->path, "dataset '%s': cannot read a chunk", ds->name);
    }
    if (memcmp(h->file->data + addr, buf, (size_t)stored) == 0)
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
static int chunked(dset *ds, const char *key)
{
    ckpt_h5_walker *h = ds->h;
    ckpt_h5_out *o = h->out;
    hsize_t cdims[H5S_MAX_RANK], coord[H5S_MAX_RANK];
    int64_t grid[CKPT_MAX_DIMS], at[CKPT_MAX_DIMS];
    uint64_t n_chunks = 1, i, run = 0;
    ckpt_h5_pipeline p;
    size_t k;
    int d, rc;

    if (H5Pget_chunk(ds->dcpl, ds->ndim, cdims) != ds->ndim)
        return ckpt_hdf5__corrupt(h->path, "dataset '%s': cannot read its chunk shape", ds->name);
    for (d = 0; d < ds->ndim; d++) {
        if (cdims[d] == 0 || cdims[d] > (hsize_t)INT64_MAX)
            return ckpt_error_set(CKPT_EFORMAT, "%s: dataset '%s': chunk shape is 0 along axis %d", h->path, ds->name, d);
        grid[d] = (int64_t)(((uint64_t)ds->shape[d] + cdims[d] - 1) / cdims[d]);
        at[d] = 0;
        if (CKPT_MUL_OVERFLOWS(n_chunks, (uint64_t)grid[d], &n_chunks))
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': too many or too large chunks", h->path, ds->name);
    }
    if (n_chunks > CKPT_H5_MAX_CHUNKS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s': %llu chunks, more than %llu", h->path, ds->name,
                              (unsigned long long)n_chunks, (unsigned long long)CKPT_H5_MAX_CHUNKS);
    if ((rc = pipeline(ds, &p)) < 0)
        return rc;
    put_head(ds, key, CKPT_H5L_CHUNKED);
    for (d = 0; d < ds->ndim; d++)
        ckpt_hdf5__put_u64(o, (uint64_t)cdims[d]);
    ckpt_hdf5__put_u8(o, (unsigned)p.n);
    for (k = 0; k < p.n; k++) {
        ckpt_hdf5__put_u32(o, p.id[k]);
        ckpt_hdf5__put_u32(o, p.shuffle_size[k]);
    }
    put_fill(ds);
    for (i = 0; i < n_chunks; i++) {
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t stored = 0;
        uint64_t offset;

        for (d = 0; d < ds->ndim; d++)
            coord[d] = (hsize_t)at[d] * cdims[d];
        for (d = ds->ndim - 1; d >= 0 && ++at[d] == grid[d]; d--)
            at[d] = 0;
        if (H5Dget_chunk_info_by_coord(ds->d, coord, &mask, &addr, &stored) < 0) {
            /* a chunk never written is an error to some versions, an undefined address to others */
            H5Eclear2(H5E_DEFAULT);
            addr = HADDR_UNDEF;
        }
        if (addr == HADDR_UNDEF || stored == 0) {
            run++;
            continue;
        }
        if (run) {
            ckpt_hdf5__put_u8(o, CKPT_H5C_FILL);
            ckpt_hdf5__put_u64(o, run);
            run = 0;
        }
        if ((rc = chunk_offset(ds, coord, addr, stored, &offset)) < 0) {
            ckpt_hdf5__put_u8(o, CKPT_H5C_ABORT);
            return rc;
        }
        ckpt_hdf5__put_u8(o, CKPT_H5C_STORED);
        ckpt_hdf5__put_u64(o, offset);
        ckpt_hdf5__put_u64(o, (uint64_t)stored);
        ckpt_hdf5__put_u32(o, mask);
    }
    if (run) {
        ckpt_hdf5__put_u8(o, CKPT_H5C_FILL);
        ckpt_hdf5__put_u64(o, run);
    }
    return 1;
}

/* Element type, shape and layout of the dataset; 0 when it holds no numbers. */
static int describe(dset *ds, int *numeric)
{
    ckpt_h5_walker *h = ds->h;
    hsize_t dims[H5S_MAX_RANK];
    ckpt_h5_type t;
    ckpt_h5_names names;
    char attr[128], why[256];
    unsigned info;
    hid_t sp;
    int d, n, has_attr, rc;

    *numeric = 0;
    if ((rc = ckpt_hdf5__describe_type(ds->ftype, &t, &names)) < 0)
        return ckpt_hdf5__corrupt(h->path, "dataset '%s': cannot read its type", ds->name);
    if (t.cls == CKPT_H5_OTHER || (t.cls == CKPT_H5_COMPOUND && !(t.n_members == 2 && t.member_name[0] &&
                                                                  strcmp(t.member_name[0], "r") == 0)))
        return 0;
    has_attr = ckpt_hdf5__string_attr(ds->d, CKPT_H5_DTYPE_ATTR, attr, sizeof attr);
    if ((rc = ckpt_hdf5__dtype(&t, has_attr ? attr : NULL, &ds->dtype, &ds->byteswap, &info, why, sizeof why)) < 0)
        return ckpt_error_set(rc, "%s: dataset '%s': %s", h->path, ds->name, why);
    if (info & CKPT_H5_GUESSED)
        ckpt_hdf5__put_note(h->out, "%s: dataset '%s': an untagged 2-byte opaque type, read as bfloat16 (what h5py writes "
                         "for ml_dtypes.bfloat16); a \"dtype\" attribute would say so", h->path, ds->name);
    if (info & CKPT_H5_ENUM_INT)
        ckpt_hdf5__put_note(h->out, "%s: dataset '%s': an enum, read as its integer values", h->path, ds->name);
    ds->es = ckpt_dtype_size(ds->dtype);
    if ((sp = H5Dget_space(ds->d)) < 0)
        return ckpt_hdf5__corrupt(h->path, "dataset '%s': cannot read its shape", ds->name);
    if (H5Sget_simple_extent_type(sp) == H5S_NULL) {
        H5Sclose(sp);
        ckpt_hdf5__put_note(h->out, "%s: dataset '%s' has no dataspace (H5S_NULL), skipped", h->path, ds->name);
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
        return ckpt_hdf5__corrupt(h->path, "dataset '%s': cannot read its shape", ds->name);
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

int ckpt_hdf5__dataset(ckpt_h5_walker *h, hid_t d, const char *key, const char *name)
{
    dset ds;
    int numeric, rc;

    memset(&ds, 0, sizeof ds);
    ds.h = h;
    ds.d = d;
    ds.name = name;
    ds.ftype = H5Dget_type(d);
    ds.dcpl = H5Dget_create_plist(d);
    if (ds.ftype < 0 || ds.dcpl < 0) {
        rc = ckpt_hdf5__corrupt(h->path, "dataset '%s': cannot read its type or layout", name);
        goto done;
    }
    if ((rc = describe(&ds, &numeric)) < 0 || !numeric)
        goto done;
    switch (H5Pget_layout(ds.dcpl)) {
    case H5D_CONTIGUOUS:
        rc = contiguous(&ds, key);
        break;
    case H5D_CHUNKED:
        rc = chunked(&ds, key);
        break;
    case H5D_COMPACT:
        rc = compact(&ds, key);
        break;
    case H5D_VIRTUAL:
        rc = ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dataset '%s' is virtual (its data lies in other files)", h->path,
                            name);
        break;
    default:
        rc = ckpt_hdf5__corrupt(h->path, "dataset '%s': unknown layout", name);
        break;
    }
done:
    if (ds.ftype >= 0)
        H5Tclose(ds.ftype);
    if (ds.dcpl >= 0)
        H5Pclose(ds.dcpl);
    return rc;
}
