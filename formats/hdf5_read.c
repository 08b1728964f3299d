/* Reading an HDF5 file: libhdf5 walks the groups once while the file is opened, every
 * dataset's bytes are located in the mapped file (hdf5_read_data.c), and every HDF5 id is
 * closed before open returns. Tensor data is then read from the mapping only, by the
 * engine, in parallel; libhdf5 never sees those reads. */
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

/* ---- bytes kept in memory ---- */

int ckpt_hdf5__keep_bytes(ckpt_h5_reader *h, ckpt_extent *e, const void *data, size_t n)
{
    if (h->mem_len + n > h->mem_cap) {
        size_t cap = h->mem_cap ? h->mem_cap : 4096;
        unsigned char *grown;
        while (cap < h->mem_len + n)
            cap *= 2;
        if (!(grown = realloc(h->mem, cap)))
            return ckpt_error_oom();
        h->mem = grown;
        h->mem_cap = cap;
    }
    if (h->n_pending == h->cap_pending) {
        size_t cap = h->cap_pending ? h->cap_pending * 2 : 16;
        ckpt_extent **grown = realloc(h->pending, cap * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        h->pending = grown;
        h->cap_pending = cap;
    }
    memcpy(h->mem + h->mem_len, data, n);
    e->offset = h->mem_len;
    e->stored_size = n;
    h->mem_len += n;
    h->pending[h->n_pending++] = e;
    return 0;
}

/* One memory file for all of them, once their bytes are all known. */
static int keep_in_memory(ckpt_h5_reader *h)
{
    const ckpt_file *f;
    char name[512];
    size_t i;
    int rc;

    if (!h->n_pending)
        return 0;
    snprintf(name, sizeof name, "%s (compact data and fill values, in memory)", h->path);
    if ((rc = ckpt_reader_memory_file(h->r, name, h->mem, h->mem_len, &f)) < 0)
        return rc;
    for (i = 0; i < h->n_pending; i++)
        h->pending[i]->file = f;
    return 0;
}

/* ---- objects already read ---- */

/* An open-addressed set of object addresses. */
static int seen_before(ckpt_h5_reader *h, haddr_t addr, int *before)
{
    size_t i, mask;

    if (2 * (h->n_seen + 1) > h->cap_seen) {
        size_t cap = h->cap_seen ? h->cap_seen * 2 : 64, k;
        haddr_t *grown = malloc(cap * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        for (k = 0; k < cap; k++)
            grown[k] = HADDR_UNDEF;
        for (k = 0; k < h->cap_seen; k++) {
            if (h->seen[k] == HADDR_UNDEF)
                continue;
            for (i = (size_t)(h->seen[k] * 0x9E3779B97F4A7C15ull) & (cap - 1); grown[i] != HADDR_UNDEF; i = (i + 1) & (cap - 1))
                ;
            grown[i] = h->seen[k];
        }
        free(h->seen);
        h->seen = grown;
        h->cap_seen = cap;
    }
    mask = h->cap_seen - 1;
    for (i = (size_t)(addr * 0x9E3779B97F4A7C15ull) & mask; h->seen[i] != HADDR_UNDEF; i = (i + 1) & mask)
        if (h->seen[i] == addr) {
            *before = 1;
            return 0;
        }
    h->seen[i] = addr;
    h->n_seen++;
    *before = 0;
    return 0;
}

/* ---- the walk ---- */

typedef struct walk {
    ckpt_h5_reader *h;
    const char *prefix; /* path of the group, "" for the root, else ending in '/' */
    ckpt_value *dict;   /* the group's dict in the value tree */
    int rc;
} walk;

static int walk_group(ckpt_h5_reader *h, hid_t g, const char *prefix, ckpt_value *dict);

static int put(ckpt_h5_reader *h, ckpt_value *dict, const char *key, ckpt_value *v)
{
    ckpt_value *k = ckpt_value_new_str(h->arena, key, strlen(key));

    if (!k || !v)
        return CKPT_ENOMEM;
    return ckpt_value_dict_set(h->arena, dict, k, v);
}

/* One member of a group: a dataset, a group (walked), or a link we do not follow. */
static int visit(walk *w, hid_t g, const char *name, const H5L_info_t *info, const char *path)
{
    ckpt_h5_reader *h = w->h;
    H5O_info_t oi;
    ckpt_value *v = NULL;
    size_t index;
    hid_t obj;
    int before, rc;

    if (info->type == H5L_TYPE_SOFT || info->type == H5L_TYPE_EXTERNAL) {
        ckpt_reader_note(h->r, "%s: '%s' is a %s link, not followed", h->path, path,
                         info->type == H5L_TYPE_SOFT ? "soft" : "external");
        return 0;
    }
    if (info->type != H5L_TYPE_HARD) {
        ckpt_reader_note(h->r, "%s: '%s' is a user-defined link, not followed", h->path, path);
        return 0;
    }
    if ((rc = seen_before(h, info->u.address, &before)) < 0)
        return rc;
    if (before) {
        ckpt_reader_note(h->r, "%s: '%s' is a second link to an object read under another name", h->path, path);
        return 0;
    }
    if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: cannot read object '%s'", h->path, path);
    if (oi.type != H5O_TYPE_GROUP && oi.type != H5O_TYPE_DATASET) {
        ckpt_reader_note(h->r, "%s: '%s' is a named datatype, skipped", h->path, path);
        return 0;
    }
    if ((obj = H5Oopen(g, name, H5P_DEFAULT)) < 0)
        return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: cannot open '%s'", h->path, path);
    rc = ckpt_hdf5__attributes(h, obj, path);
    if (rc == 0 && oi.type == H5O_TYPE_GROUP) {
        char *prefix = malloc(strlen(path) + 2);
        if (!(v = ckpt_value_new(h->arena, CKPT_VAL_DICT)) || !prefix) {
            rc = ckpt_error_oom();
        } else {
            sprintf(prefix, "%s/", path);
            rc = walk_group(h, obj, prefix, v);
        }
        free(prefix);
    } else if (rc == 0 && (rc = ckpt_hdf5__dataset(h, obj, path, &index)) == 1) {
        v = ckpt_value_new_tensor(h->arena, index);
        rc = 0;
    } else if (rc == 0 && (rc = ckpt_hdf5__string_dataset(h, obj, &v)) == 0) {
        ckpt_reader_note(h->r, "%s: dataset '%s' holds neither numbers nor strings we can read, skipped", h->path,
                         path);
    } else if (rc == 1) {
        rc = 0;
    }
    H5Oclose(obj);
    if (rc == 0 && v)
        rc = put(h, w->dict, name, v);
    return rc;
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

static int walk_group(ckpt_h5_reader *h, hid_t g, const char *prefix, ckpt_value *dict)
{
    walk w = { h, prefix, dict, 0 };
    hsize_t at = 0;

    /* creation order where the file tracks it, else by name (h5py's default) */
    if (H5Literate(g, H5_INDEX_CRT_ORDER, H5_ITER_INC, &at, one_link, &w) < 0 && w.rc == 0 && at == 0) {
        H5Eclear2(H5E_DEFAULT);
        if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &at, one_link, &w) < 0 && w.rc == 0)
            return ckpt_hdf5__fail(CKPT_EFORMAT, "%s: cannot list group '%s'", h->path, *prefix ? prefix : "/");
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

int ckpt_hdf5__open(ckpt_reader *r)
{
    ckpt_h5_reader h;
    H5O_info_t oi;
    ckpt_value *root;
    mapped_image image;
    hid_t fapl = -1, g = -1;
    int rc;

    memset(&h, 0, sizeof h);
    h.r = r;
    h.arena = ckpt_reader_arena(r);
    h.file = ckpt_reader_file(r);
    h.path = ckpt_reader_path(r);
    h.fid = -1;
    if (!h.file)
        return ckpt_error_set(CKPT_EINVALID, "%s: HDF5 reads a file, not a directory", h.path);
    if ((rc = ckpt_hdf5__init()) < 0)
        return rc;
    image.data = h.file->data;
    image.size = (size_t)h.file->size;
    /* the sec2 driver for a file on disk: our reads happen elsewhere, libhdf5's through plain
     * read calls; the mapped bytes themselves for a decompressed input */
    /* no lock: we only read, and filesystems without flock (Lustre, some NFS) refuse one */
    if ((fapl = H5Pcreate(H5P_FILE_ACCESS)) < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        H5Pset_file_locking(fapl, 0, 1) < 0 ||
        (h.file->zstd.zst_bytes ? use_mapped_image(fapl, &image) : H5Pset_fapl_sec2(fapl)) < 0 ||
        (h.fid = H5Fopen(h.file->zstd.zst_bytes ? IMAGE_NAME : h.path, H5F_ACC_RDONLY, fapl)) < 0) {
        rc = ckpt_hdf5__fail(CKPT_EFORMAT, "%s: HDF5 cannot open it", h.path);
        goto done;
    }
    {
        hid_t fcpl = H5Fget_create_plist(h.fid);
        hsize_t ub = 0;
        if (fcpl < 0 || H5Pget_userblock(fcpl, &ub) < 0)
            ub = 0;
        if (fcpl >= 0)
            H5Pclose(fcpl);
        h.user_block = (uint64_t)ub;
        H5Eclear2(H5E_DEFAULT);
    }
    if (!(root = ckpt_value_new(h.arena, CKPT_VAL_DICT))) {
        rc = CKPT_ENOMEM;
        goto done;
    }
    if ((g = H5Gopen2(h.fid, "/", H5P_DEFAULT)) < 0 || H5Oget_info2(g, &oi, H5O_INFO_BASIC) < 0) {
        rc = ckpt_hdf5__fail(CKPT_EFORMAT, "%s: cannot open the root group", h.path);
        goto done;
    }
    {
        int before;
        if ((rc = seen_before(&h, oi.addr, &before)) < 0)
            goto done;
    }
    if ((rc = ckpt_hdf5__attributes(&h, g, "/")) < 0 || (rc = walk_group(&h, g, "", root)) < 0)
        goto done;
    if (h.attributes && (rc = put(&h, root, "__attributes__", h.attributes)) < 0)
        goto done;
    if ((rc = keep_in_memory(&h)) < 0)
        goto done;
    ckpt_reader_set_root(r, root);
done:
    if (g >= 0)
        H5Gclose(g);
    if (h.fid >= 0 && H5Fclose(h.fid) < 0 && rc == 0)
        rc = ckpt_hdf5__fail(CKPT_EIO, "%s: HDF5 cannot close it", h.path);
    if (fapl >= 0)
        H5Pclose(fapl);
    H5Eclear2(H5E_DEFAULT);
    free(h.seen);
    free(h.mem);
    free(h.pending);
    return rc < 0 ? rc : 0;
}
