/* Reading an HDF5 file: a child process walks the groups once with libhdf5 while the file
 * is opened, sending what it finds as records (hdf5_private.h); this process builds the
 * checkpoint from them (hdf5_build.c). Tensor data is then read from the mapping only, by
 * the engine, in parallel; libhdf5 never sees those reads, and never runs in this process
 * for reading. */
#include "hdf5_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The signature, at 0 or, after a user block, at 512, 1024, 2048, ... */
static const unsigned char signature[8] = { 0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n' };

int ckpt_hdf5__bid(const ckpt_probe *p, int best_bid)
{
    const ckpt_file *f = p->file;
    uint64_t at;

    if (!f || best_bid >= 64)
        return -1;
    for (at = 0; at + sizeof signature <= f->size; at = at ? at * 2 : 512)
        if (memcmp(f->data + at, signature, sizeof signature) == 0)
            return 64;
    return -1;
}

/* A little-endian address of `size` bytes; all ones is HDF5's undefined address. */
static uint64_t load_addr(const uint8_t *p, unsigned size)
{
    uint64_t v = 0;
    unsigned i;

    for (i = size; i-- > 0;)
        v = v << 8 | p[i];
    return size < 8 && v == ((uint64_t)1 << (8 * size)) - 1 ? UINT64_MAX : v;
}

/* The superblock's end-of-file address, past which libhdf5 reads nothing. Whether it counts
 * from the base address (after a user block) or from the file's start, the base plus it is
 * at least the file's size. It is the third address in every superblock version: 0 and 1
 * keep them after the B-tree parameters, 2 and 3 right after the sizes and flags. */
int ckpt_hdf5__bound(const ckpt_probe *p, uint64_t *need, uint64_t *max_size)
{
    const ckpt_file *f = p->file;
    uint64_t at, base, eof, end;
    unsigned version, offsets;
    uint64_t addrs; /* where the addresses start */

    for (at = 0; f && at + sizeof signature <= f->size; at = at ? at * 2 : 512)
        if (memcmp(f->data + at, signature, sizeof signature) == 0)
            break;
    if (!f || at + sizeof signature > f->size)
        return 0; /* a signature past what is here: no bound */
    if (at + 16 > f->size) {
        *need = at + 16;
        return 0;
    }
    version = f->data[at + 8];
    offsets = version >= 2 ? f->data[at + 9] : f->data[at + 13];
    addrs = version == 0 ? 24 : version == 1 ? 28 : 12;
    if (version > 3 || (offsets != 2 && offsets != 4 && offsets != 8))
        return 0; /* open names what is wrong */
    if (at + addrs + 3 * offsets > f->size) {
        *need = at + addrs + 3 * offsets;
        return 0;
    }
    base = load_addr(f->data + at + addrs, offsets);
    eof = load_addr(f->data + at + addrs + 2 * offsets, offsets);
    if (base == UINT64_MAX || eof == UINT64_MAX || CKPT_ADD_OVERFLOWS(base > at ? base : at, eof, &end))
        return 0;
    *max_size = end;
    return 0;
}

/* ---- objects already read ---- */

/* HADDR_UNDEF is no address: never seen, as it cannot be a key. */
static int seen_before(ckpt_h5_walker *h, haddr_t addr, int *before)
{
    int rc;

    *before = 0;
    if (addr == HADDR_UNDEF)
        return 0;
    if ((rc = ckpt_u64set_add(&h->seen, addr)) < 0)
        return rc;
    *before = rc == 0;
    return 0;
}

/* ---- the walk (in the child process) ---- */

typedef struct walk {
    ckpt_h5_walker *h;
    const char *prefix; /* path of the group, "" for the root, else ending in '/' */
    int rc;
} walk;

static int walk_group(ckpt_h5_walker *h, hid_t g, const char *prefix);

/* One member of a group: a dataset, a group (walked), or a link we do not follow. */
static int visit(walk *w, hid_t g, const char *name, const H5L_info_t *info, const char *path)
{
    ckpt_h5_walker *h = w->h;
    H5O_info_t oi;
    hid_t obj;
    int before, rc;

    if (info->type == H5L_TYPE_SOFT || info->type == H5L_TYPE_EXTERNAL) {
        ckpt_hdf5__put_note(h->out, "%s: '%s' is a %s link, not followed", h->path, path,
                            info->type == H5L_TYPE_SOFT ? "soft" : "external");
        return 0;
    }
    if (info->type != H5L_TYPE_HARD) {
        ckpt_hdf5__put_note(h->out, "%s: '%s' is a user-defined link, not followed", h->path, path);
        return 0;
    }
    if ((rc = seen_before(h, info->u.address, &before)) < 0)
        return rc;
    if (before) {
        ckpt_hdf5__put_note(h->out, "%s: '%s' is a second link to an object read under another name", h->path, path);
        return 0;
    }
    if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return ckpt_hdf5__corrupt(h->path, "cannot read object '%s'", path);
    if (oi.type != H5O_TYPE_GROUP && oi.type != H5O_TYPE_DATASET) {
        ckpt_hdf5__put_note(h->out, "%s: '%s' is a named datatype, skipped", h->path, path);
        return 0;
    }
    if ((obj = H5Oopen(g, name, H5P_DEFAULT)) < 0)
        return ckpt_hdf5__corrupt(h->path, "cannot open '%s'", path);
    rc = ckpt_hdf5__attributes(h, obj, path);
    if (rc == 0 && oi.type == H5O_TYPE_GROUP) {
        char *prefix = malloc(strlen(path) + 2);
        if (!prefix) {
            rc = ckpt_error_oom();
        } else {
            sprintf(prefix, "%s/", path);
            ckpt_hdf5__put_u8(h->out, CKPT_H5R_GROUP);
            ckpt_hdf5__put_str(h->out, name);
            if ((rc = walk_group(h, obj, prefix)) == 0)
                ckpt_hdf5__put_u8(h->out, CKPT_H5R_END);
        }
        free(prefix);
    } else if (rc == 0 && (rc = ckpt_hdf5__dataset(h, obj, name, path)) == 0 &&
               ckpt_hdf5__string_dataset(h, obj, name) == 0) {
        ckpt_hdf5__put_note(h->out, "%s: dataset '%s' holds neither numbers nor strings we can read, skipped",
                            h->path, path);
    }
    H5Oclose(obj);
    return rc < 0 ? rc : 0;
}

static herr_t one_link(hid_t g, const char *name, const H5L_info_t *info, void *payload)
{
    walk *w = payload;
    size_t n = strlen(w->prefix) + strlen(name) + 1;
    char *path = malloc(n);

    if (!path) {
        w->rc = ckpt_error_oom();
        return -1;
    }
    snprintf(path, n, "%s%s", w->prefix, name);
    w->rc = visit(w, g, name, info, path);
    free(path);
    return w->rc < 0 ? -1 : 0;
}

static int walk_group(ckpt_h5_walker *h, hid_t g, const char *prefix)
{
    walk w = { h, prefix, 0 };
    hsize_t at = 0;

    /* creation order where the file tracks it, else by name (h5py's default) */
    if (H5Literate(g, H5_INDEX_CRT_ORDER, H5_ITER_INC, &at, one_link, &w) < 0 && w.rc == 0 && at == 0) {
        H5Eclear2(H5E_DEFAULT);
        if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &at, one_link, &w) < 0 && w.rc == 0)
            return ckpt_hdf5__corrupt(h->path, "cannot list group '%s'", *prefix ? prefix : "/");
    }
    return w.rc;
}

/* A decompressed input lives in an unnamed temporary that libhdf5 cannot open by name, so it
 * is handed the mapped bytes as a file image instead. These callbacks make the core driver
 * use the mapping as it is, never copying it (it is opened read-only: nothing is written). */
/* The core driver refuses an image under the name of a file that exists: a name none has. */
#define IMAGE_NAME "/proc/self/ckptconv-hdf5-image"

typedef struct mapped_image {
    const void *data;
    size_t size;
} mapped_image;

static void *image_malloc(size_t size, H5FD_file_image_op_t op, void *udata)
{
    const mapped_image *m = udata;

    (void)op;
    return size == m->size ? (void *)m->data : NULL;
}

static void *image_memcpy(void *dest, const void *src, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)size;
    (void)op;
    (void)udata;
    return dest == src ? dest : NULL;
}

static void *image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)ptr;
    (void)size;
    (void)op;
    (void)udata;
    return NULL;
}

static herr_t image_free(void *ptr, H5FD_file_image_op_t op, void *udata)
{
    (void)ptr;
    (void)op;
    (void)udata;
    return 0;
}

static void *image_udata_copy(void *udata)
{
    return udata;
}

static herr_t image_udata_free(void *udata)
{
    (void)udata;
    return 0;
}

static int use_mapped_image(hid_t fapl, mapped_image *m)
{
    H5FD_file_image_callbacks_t cb = { image_malloc, image_memcpy, image_realloc, image_free,
                                       image_udata_copy, image_udata_free, m };

    return H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 || H5Pset_file_image_callbacks(fapl, &cb) < 0 ||
                   H5Pset_file_image(fapl, (void *)m->data, m->size) < 0
               ? -1
               : 0;
}

/* Open the file, walk it from the root; every HDF5 id closed again. */
static int walk_file(ckpt_h5_walker *h)
{
    H5O_info_t oi;
    mapped_image image;
    hid_t fapl = -1, g = -1;
    int before, rc;

    if ((rc = ckpt_hdf5__init()) < 0)
        return rc;
    image.data = h->file->data;
    image.size = (size_t)h->file->size;
    /* the sec2 driver for a file on disk: our reads happen elsewhere, libhdf5's through plain
     * read calls; the mapped bytes themselves for a decompressed input */
    /* no lock: we only read, and filesystems without flock (Lustre, some NFS) refuse one */
    if ((fapl = H5Pcreate(H5P_FILE_ACCESS)) < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        H5Pset_file_locking(fapl, 0, 1) < 0 ||
        (h->file->zstd.zst_bytes ? use_mapped_image(fapl, &image) : H5Pset_fapl_sec2(fapl)) < 0 ||
        (h->fid = H5Fopen(h->file->zstd.zst_bytes ? IMAGE_NAME : h->path, H5F_ACC_RDONLY, fapl)) < 0) {
        rc = ckpt_hdf5__corrupt(h->path, "HDF5 cannot open it");
        goto done;
    }
    {
        hid_t fcpl = H5Fget_create_plist(h->fid);
        hsize_t ub = 0;
        if (fcpl < 0 || H5Pget_userblock(fcpl, &ub) < 0)
            ub = 0;
        if (fcpl >= 0)
            H5Pclose(fcpl);
        h->user_block = (uint64_t)ub;
        H5Eclear2(H5E_DEFAULT);
    }
    if ((g = H5Gopen2(h->fid, "/", H5P_DEFAULT)) < 0 || H5Oget_info2(g, &oi, H5O_INFO_BASIC) < 0) {
        rc = ckpt_hdf5__corrupt(h->path, "cannot open the root group");
        goto done;
    }
    if ((rc = seen_before(h, oi.addr, &before)) < 0 || (rc = ckpt_hdf5__attributes(h, g, "/")) < 0)
        goto done;
    rc = walk_group(h, g, "");
done:
    if (g >= 0)
        H5Gclose(g);
    if (h->fid >= 0 && H5Fclose(h->fid) < 0 && rc == 0)
        rc = ckpt_hdf5__fail(CKPT_EIO, "%s: HDF5 cannot close it", h->path);
    if (fapl >= 0)
        H5Pclose(fapl);
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

void ckpt_hdf5__walk(const char *path, const ckpt_file *file, ckpt_h5_out *out)
{
    ckpt_h5_walker h;

    memset(&h, 0, sizeof h);
    h.out = out;
    h.file = file;
    h.path = path;
    h.fid = -1;
    if (walk_file(&h) < 0)
        ckpt_hdf5__put_fail(out);
    else
        ckpt_hdf5__put_u8(out, CKPT_H5R_DONE);
    ckpt_u64map_dispose(&h.seen);
}

/* ---- this process's side ---- */

int ckpt_hdf5__open(ckpt_reader *r)
{
    const ckpt_file *file = ckpt_reader_file(r);
    const char *path = ckpt_reader_path(r);
    unsigned char *records;
    size_t len;
    int rc;

    if (!file)
        return ckpt_error_set(CKPT_EINVALID, "%s: HDF5 reads a file, not a directory", path);
    if ((rc = ckpt_hdf5__run_walk(path, file, &records, &len)) < 0)
        return rc;
    rc = ckpt_hdf5__build(r, records, len);
    free(records);
    return rc;
}
