/* HDF5 writer: one chunked dataset per tensor, at the tensor's name (its '/'-separated parts
 * become groups). Chunks are compressed by our own code, in parallel, and handed to the
 * library already encoded (H5Dwrite_chunk), in a fixed order and without timestamps, so
 * the same input always gives the same file. Chunks are bands of whole rows where a row is
 * small, so that a chunk is one run of the tensor's bytes: read in order, written once. */
#include "hdf5_private.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

/* Large enough for zstd and deflate to reach their ratio, small enough that a reader
 * wanting one row decodes little. */
#define CHUNK_TARGET (4ull << 20)
#define CREATION_ORDER (H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED)
#define GZIP_DEFAULT_LEVEL 6

typedef struct h5_set {
    hid_t id;
    int ndim;
    int cut;                     /* chunks are 1 before this axis, whole after it */
    hsize_t dims[CKPT_MAX_DIMS];
    hsize_t chunk[CKPT_MAX_DIMS];
    uint64_t inner;              /* elements after the cut axis */
    uint64_t along;              /* chunks along the cut axis */
    uint64_t chunk_bytes;        /* one chunk as stored (edge chunks too) */
    uint64_t n_chunks;           /* 0: not chunked (scalar or empty) */
    size_t esize;
} h5_set;

typedef struct h5_writer {
    hid_t file;
    h5_set *sets;
    size_t n_sets;
    ckpt_codec codec;
    int level;
    uint64_t raw_bytes, stored_bytes;
} h5_writer;

/* One chunk in flight: which, and its encoded bytes. */
typedef struct h5_slot {
    size_t set;
    uint64_t index;
    uint8_t *data;
    size_t len;
    uint32_t skipped; /* filter mask: bit 0 set when stored as is */
} h5_slot;

static int set_dtype_attr(ckpt_writer *w, const char *name, hid_t set, const char *value)
{
    hid_t st = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR), a = -1;
    int rc = 0;

    /* a variable-length UTF-8 string: what h5py writes for a str, read back as a str */
    if (st < 0 || space < 0 || H5Tset_size(st, H5T_VARIABLE) < 0 || H5Tset_cset(st, H5T_CSET_UTF8) < 0 ||
        (a = H5Acreate2(set, CKPT_H5_DTYPE_ATTR, st, space, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        H5Awrite(a, st, &value) < 0)
        rc = ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot write its dtype attribute", ckpt_writer_path(w), name);
    if (a >= 0)
        H5Aclose(a);
    if (space >= 0)
        H5Sclose(space);
    if (st >= 0)
        H5Tclose(st);
    return rc;
}

/* HDF5 link names cannot be empty, ".", or hold '/' themselves: a tensor name is a path of
 * such names. */
static int check_name(ckpt_writer *w, const char *name)
{
    const char *p = name;

    while (1) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.'))
            return ckpt_error_set(CKPT_EINVALID,
                                  "%s: tensor '%s' cannot be an HDF5 path (empty or '.' part); rename it "
                                  "or write another format",
                                  ckpt_writer_path(w), name);
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

/* Create the groups on the way to `name`, without timestamps (deterministic output). */
static int make_groups(ckpt_writer *w, hid_t file, const char *name, hid_t gcpl)
{
    char path[4096];
    const char *slash = name;
    size_t len = strlen(name);

    if (len >= sizeof path)
        return ckpt_error_set(CKPT_EINVALID, "%s: tensor name of %zu bytes is too long for this writer",
                              ckpt_writer_path(w), len);
    while ((slash = strchr(slash, '/'))) {
        htri_t exists;
        hid_t g;

        memcpy(path, name, (size_t)(slash - name));
        path[slash - name] = 0;
        slash++;
        exists = H5Lexists(file, path, H5P_DEFAULT);
        if (exists < 0)
            return ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot look up '%s'", ckpt_writer_path(w), name, path);
        if (exists) {
            H5O_info_t info;
            if (H5Oget_info_by_name(file, path, &info, H5P_DEFAULT) < 0)
                return ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot look up '%s'", ckpt_writer_path(w), name, path);
            if (info.type != H5O_TYPE_GROUP)
                return ckpt_error_set(CKPT_EINVALID,
                                      "%s: tensor '%s' cannot be written: '%s' is a tensor, and HDF5 needs it "
                                      "to be a group",
                                      ckpt_writer_path(w), name, path);
            continue;
        }
        g = H5Gcreate2(file, path, H5P_DEFAULT, gcpl, H5P_DEFAULT);
        if (g < 0)
            return ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot create group '%s'", ckpt_writer_path(w), name,
                                   path);
        H5Gclose(g);
    }
    return 0;
}

/* Chunks: the first axis (from the outside) whose inner block fits the target is cut into
 * bands of it; axes before it are cut into single indices, axes after it stay whole. */
static void plan_chunks(h5_set *s, const ckpt_out_tensor *t, uint64_t target)
{
    uint64_t inner[CKPT_MAX_DIMS] = { 0 }, rows;
    int d;

    s->ndim = t->ndim;
    s->n_chunks = 0;
    for (d = 0; d < t->ndim; d++)
        s->dims[d] = (hsize_t)t->shape[d];
    if (t->ndim == 0)
        return;
    for (d = t->ndim - 1; d >= 0; d--) {
        inner[d] = d == t->ndim - 1 ? 1 : inner[d + 1] * (uint64_t)t->shape[d + 1];
        if (!t->shape[d])
            return;
    }
    for (s->cut = 0; s->cut < t->ndim - 1 && inner[s->cut] * s->esize > target; s->cut++)
        ;
    rows = target / (inner[s->cut] * s->esize);
    if (rows < 1)
        rows = 1;
    if (rows > (uint64_t)t->shape[s->cut])
        rows = (uint64_t)t->shape[s->cut];
    for (d = 0; d < t->ndim; d++)
        s->chunk[d] = d < s->cut ? 1 : d == s->cut ? (hsize_t)rows : s->dims[d];
    s->inner = inner[s->cut];
    s->chunk_bytes = rows * s->inner * s->esize;
    s->along = ((uint64_t)t->shape[s->cut] + rows - 1) / rows;
    s->n_chunks = s->along;
    for (d = 0; d < s->cut; d++)
        s->n_chunks *= (uint64_t)t->shape[d];
}

static int set_filter(ckpt_writer *w, const h5_writer *h, hid_t dcpl)
{
    unsigned level = (unsigned)h->level;
    herr_t e = 0;

    /* optional, as h5py sets filters: a chunk that does not shrink is stored as it is */
    if (h->codec == CKPT_CODEC_ZSTD)
        e = H5Pset_filter(dcpl, CKPT_H5_FILTER_ZSTD, H5Z_FLAG_OPTIONAL, 1, &level);
    else if (h->codec == CKPT_CODEC_GZIP)
        e = H5Pset_filter(dcpl, CKPT_H5_FILTER_DEFLATE, H5Z_FLAG_OPTIONAL, 1, &level);
    if (e < 0)
        return ckpt_hdf5__fail(CKPT_EIO, "%s: cannot set the compression filter", ckpt_writer_path(w));
    return 0;
}

static int create_set(ckpt_writer *w, h5_writer *h, size_t i, hid_t gcpl)
{
    const ckpt_out_tensor *t = &ckpt_writer_out(w)->tensors[i];
    h5_set *s = &h->sets[i];
    const char *attr;
    hid_t type = ckpt_hdf5__file_type(t->dtype, &attr), space = -1, dcpl = -1, dapl = -1;
    uint64_t memory = ckpt_writer_memory(w), target = CHUNK_TARGET;
    int rc = 0;

    if (type < 0)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: tensor '%s': HDF5 writing has no type for %s", ckpt_writer_path(w),
                              t->name, ckpt_dtype_name(t->dtype));
    s->esize = ckpt_dtype_size(t->dtype);
    /* not a function of the threads: the file is the same whoever writes it */
    if (target > memory / 16)
        target = memory / 16;
    plan_chunks(s, t, target);
    if ((rc = check_name(w, t->name)) < 0 || (rc = make_groups(w, h->file, t->name, gcpl)) < 0)
        goto done;
    space = t->ndim ? H5Screate_simple(t->ndim, s->dims, NULL) : H5Screate(H5S_SCALAR);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (space < 0 || dcpl < 0 || dapl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
        H5Pset_chunk_cache(dapl, 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT) < 0) {
        rc = ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot describe the dataset", ckpt_writer_path(w), t->name);
        goto done;
    }
    if (s->n_chunks) {
        if (H5Pset_chunk(dcpl, s->ndim, s->chunk) < 0) {
            rc = ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot set its chunks", ckpt_writer_path(w), t->name);
            goto done;
        }
        if ((rc = set_filter(w, h, dcpl)) < 0)
            goto done;
    }
    s->id = H5Dcreate2(h->file, t->name, type, space, H5P_DEFAULT, dcpl, dapl);
    if (s->id < 0) {
        rc = ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot create the dataset", ckpt_writer_path(w), t->name);
        goto done;
    }
    if (attr)
        rc = set_dtype_attr(w, t->name, s->id, attr);
done:
    if (dapl >= 0)
        H5Pclose(dapl);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    H5Tclose(type);
    return rc;
}

int ckpt_hdf5__write_begin(ckpt_writer *w)
{
    const ckpt_out *out = ckpt_writer_out(w);
    const ckpt_convert_options *opts = ckpt_writer_options(w);
    h5_writer *h;
    hid_t fcpl = -1, gcpl = -1, fapl = -1;
    size_t i;
    int rc;

    if ((rc = ckpt_hdf5__init()) < 0)
        return rc;
    if (!(h = calloc(1, sizeof *h)) || !(h->sets = calloc(out->n_tensors ? out->n_tensors : 1, sizeof *h->sets))) {
        free(h);
        return ckpt_error_oom();
    }
    *ckpt_writer_state(w) = h;
    h->file = -1;
    h->n_sets = out->n_tensors;
    for (i = 0; i < h->n_sets; i++)
        h->sets[i].id = -1;
    h->codec = opts->compress;
    h->level = opts->compress_level ? opts->compress_level
               : h->codec == CKPT_CODEC_GZIP ? GZIP_DEFAULT_LEVEL
                                             : ZSTD_CLEVEL_DEFAULT;
    if (h->codec == CKPT_CODEC_GZIP && (h->level < 1 || h->level > 9))
        return ckpt_error_set(CKPT_EINVALID, "%s: gzip level %d: expected 1 to 9", ckpt_writer_path(w), h->level);
    if (h->codec == CKPT_CODEC_ZSTD && (h->level < 1 || h->level > ZSTD_maxCLevel()))
        return ckpt_error_set(CKPT_EINVALID, "%s: zstd level %d: expected 1 to %d", ckpt_writer_path(w), h->level,
                              ZSTD_maxCLevel());
    /* groups, the root one included, list their members in the order they were made (the
     * checkpoint's order), as h5py's track_order does; readers fall back to names elsewhere */
    fcpl = H5Pcreate(H5P_FILE_CREATE);
    gcpl = H5Pcreate(H5P_GROUP_CREATE);
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* the temporary is ours alone: no lock, which filesystems without flock (Lustre, some NFS)
     * would refuse */
    if (fcpl < 0 || gcpl < 0 || fapl < 0 || H5Pset_file_locking(fapl, 0, 1) < 0 ||
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
        H5Pset_link_creation_order(fcpl, CREATION_ORDER) < 0 ||
        H5Pset_link_creation_order(gcpl, CREATION_ORDER) < 0 || H5Pset_obj_track_times(gcpl, 0) < 0) {
        rc = ckpt_hdf5__fail(CKPT_EIO, "%s: cannot describe groups", ckpt_writer_path(w));
        goto done;
    }
    /* the engine made the temporary; HDF5 truncates it and writes it through its own handle */
    h->file = H5Fcreate(ckpt_writer_temp_path(w), H5F_ACC_TRUNC, fcpl, fapl);
    if (h->file < 0) {
        rc = ckpt_hdf5__fail(CKPT_EIO, "%s: cannot create the HDF5 file", ckpt_writer_path(w));
        goto done;
    }
    for (i = 0; i < h->n_sets && rc >= 0; i++)
        rc = create_set(w, h, i, gcpl);
done:
    if (gcpl >= 0)
        H5Pclose(gcpl);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (fapl >= 0)
        H5Pclose(fapl);
    return rc;
}

/* Whole tensors that are not chunked: scalars (empty ones hold nothing). */
static int write_unchunked(ckpt_writer *w, h5_writer *h, size_t i)
{
    const ckpt_out_tensor *t = &ckpt_writer_out(w)->tensors[i];
    h5_set *s = &h->sets[i];
    unsigned char value[16];
    hid_t type;
    int rc;

    if (t->ndim != 0)
        return 0;
    if ((rc = ckpt_writer_read(w, t->blob, 0, s->esize, value)) < 0)
        return rc;
    type = H5Dget_type(s->id);
    if (type < 0 || H5Dwrite(s->id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, value) < 0)
        rc = ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot write it", ckpt_writer_path(w), t->name);
    if (type >= 0)
        H5Tclose(type);
    h->raw_bytes += s->esize;
    h->stored_bytes += s->esize;
    return rc;
}

/* Per-thread tools for encoding chunks. */
typedef struct h5_worker {
    uint8_t *raw;
    ZSTD_CCtx *zstd;
    struct libdeflate_compressor *deflate;
} h5_worker;

/* Read chunk slot->index of its set and encode it into slot->data (capacity cap). */
static int encode_chunk(ckpt_writer *w, const h5_writer *h, h5_slot *slot, h5_worker *k, size_t cap)
{
    const h5_set *s = &h->sets[slot->set];
    const ckpt_out_tensor *t = &ckpt_writer_out(w)->tensors[slot->set];
    uint64_t band = slot->index % s->along, outer = slot->index / s->along;
    uint64_t row0 = band * s->chunk[s->cut], rows = s->dims[s->cut] - row0;
    /* a chunk stored as it is is read straight into its slot */
    uint8_t *raw = h->codec == CKPT_CODEC_NONE ? slot->data : k->raw;
    uint64_t start, len;
    size_t n = 0;
    int rc;

    if (rows > s->chunk[s->cut])
        rows = s->chunk[s->cut];
    start = (outer * s->dims[s->cut] + row0) * s->inner * s->esize;
    len = rows * s->inner * s->esize;
    if ((rc = ckpt_writer_read(w, t->blob, start, len, raw)) < 0)
        return rc;
    /* an edge chunk is stored whole; its part outside the array is the fill value, zero */
    memset(raw + len, 0, (size_t)(s->chunk_bytes - len));
    slot->skipped = 0;
    slot->len = (size_t)s->chunk_bytes;
    if (h->codec == CKPT_CODEC_NONE)
        return 0;
    if (h->codec == CKPT_CODEC_ZSTD) {
        n = ZSTD_compressCCtx(k->zstd, slot->data, cap, raw, (size_t)s->chunk_bytes, h->level);
        if (ZSTD_isError(n))
            return ckpt_error_set(CKPT_EIO, "%s: tensor '%s': zstd: %s", ckpt_writer_path(w), t->name,
                                  ZSTD_getErrorName(n));
    } else {
        n = libdeflate_zlib_compress(k->deflate, raw, (size_t)s->chunk_bytes, slot->data, cap);
    }
    if (n == 0 || n >= s->chunk_bytes) {
        /* it does not shrink: stored as it is, the filter marked skipped */
        memcpy(slot->data, raw, (size_t)s->chunk_bytes);
        slot->skipped = 1;
        return 0;
    }
    slot->len = n;
    return 0;
}

static int store_chunk(ckpt_writer *w, h5_writer *h, const h5_slot *slot)
{
    const h5_set *s = &h->sets[slot->set];
    hsize_t offset[CKPT_MAX_DIMS];
    uint64_t outer = slot->index / s->along;
    int d;

    for (d = s->cut - 1; d >= 0; d--) {
        offset[d] = outer % s->dims[d];
        outer /= s->dims[d];
    }
    offset[s->cut] = (slot->index % s->along) * s->chunk[s->cut];
    for (d = s->cut + 1; d < s->ndim; d++)
        offset[d] = 0;
    if (H5Dwrite_chunk(s->id, H5P_DEFAULT, slot->skipped, offset, slot->len, slot->data) < 0)
        return ckpt_hdf5__fail(CKPT_EIO, "%s: tensor '%s': cannot write chunk %llu", ckpt_writer_path(w),
                               ckpt_writer_out(w)->tensors[slot->set].name, (unsigned long long)slot->index);
    h->stored_bytes += slot->len;
    h->raw_bytes += s->chunk_bytes;
    return 0;
}

/* The next chunks in file order, from (*set, *index) on; how many. */
static size_t next_batch(const h5_writer *h, size_t *set, uint64_t *index, h5_slot *slots, size_t batch)
{
    size_t n = 0;

    while (n < batch && *set < h->n_sets) {
        if (*index >= h->sets[*set].n_chunks) {
            ++*set;
            *index = 0;
            continue;
        }
        slots[n].set = *set;
        slots[n++].index = (*index)++;
    }
    return n;
}

static uint64_t largest_chunk(const h5_writer *h)
{
    uint64_t most = 1;
    size_t i;

    for (i = 0; i < h->n_sets; i++)
        if (h->sets[i].n_chunks && h->sets[i].chunk_bytes > most)
            most = h->sets[i].chunk_bytes;
    return most;
}

/* Batches of chunks: encoded in parallel, then stored in order by this thread (the only
 * one that calls HDF5 here). */
static int write_chunks(ckpt_writer *w, h5_writer *h)
{
    int threads = ckpt_writer_threads(w), t;
    uint64_t chunk = largest_chunk(h), memory = ckpt_writer_memory(w);
    uint64_t caches = (uint64_t)threads * ckpt_writer_cache_bytes(w);
    size_t cap = ZSTD_compressBound((size_t)chunk), batch, i, set = 0, n_slots;
    uint64_t index = 0;
    h5_worker *workers = calloc((size_t)threads, sizeof *workers);
    h5_slot *slots;
    ckpt_error_first first;
    int rc = 0;

    if (libdeflate_zlib_compress_bound(NULL, (size_t)chunk) > cap)
        cap = libdeflate_zlib_compress_bound(NULL, (size_t)chunk);
    /* the threads' caches of decoded input chunks come out of the budget first */
    memory = memory > caches ? memory - caches : 0;
    /* each thread holds a chunk as read, each slot of the batch one as encoded */
    if ((uint64_t)threads > memory / (2 * cap))
        threads = memory / (2 * cap) > 1 ? (int)(memory / (2 * cap)) : 1;
    batch = memory > (uint64_t)threads * chunk ? (size_t)((memory - (uint64_t)threads * chunk) / cap) : 0;
    if (batch < (size_t)threads)
        batch = (size_t)threads;
    if (batch > 4 * (size_t)threads)
        batch = 4 * (size_t)threads;
    slots = calloc(batch, sizeof *slots);
    if (!workers || !slots)
        rc = ckpt_error_oom();
    for (t = 0; rc == 0 && t < threads; t++) {
        workers[t].raw = malloc((size_t)chunk);
        workers[t].zstd = ZSTD_createCCtx();
        workers[t].deflate = libdeflate_alloc_compressor(h->codec == CKPT_CODEC_GZIP ? h->level : 1);
        if (!workers[t].raw || !workers[t].zstd || !workers[t].deflate)
            rc = ckpt_error_oom();
    }
    for (i = 0; rc == 0 && i < batch; i++)
        if (!(slots[i].data = malloc(cap)))
            rc = ckpt_error_oom();
    while (rc == 0) {
        long k, n;
        n_slots = next_batch(h, &set, &index, slots, batch);
        if (!n_slots)
            break;
        memset(&first, 0, sizeof first);
        n = (long)n_slots;
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
#endif
        for (k = 0; k < n; k++) {
#ifdef CKPT_HAVE_OPENMP
            h5_worker *wk = &workers[omp_get_thread_num()];
#else
            h5_worker *wk = &workers[0];
#endif
            int r = encode_chunk(w, h, &slots[k], wk, cap);
            if (r < 0)
                ckpt_error_first_record(&first, r);
        }
        if ((rc = ckpt_error_first_raise(&first)) < 0)
            break;
        for (i = 0; rc == 0 && i < n_slots; i++)
            rc = store_chunk(w, h, &slots[i]);
    }
    for (t = 0; workers && t < threads; t++) {
        free(workers[t].raw);
        ZSTD_freeCCtx(workers[t].zstd);
        libdeflate_free_compressor(workers[t].deflate);
    }
    for (i = 0; slots && i < batch; i++)
        free(slots[i].data);
    free(slots);
    free(workers);
    return rc;
}

static void close_all(h5_writer *h)
{
    size_t i;

    for (i = 0; i < h->n_sets; i++)
        if (h->sets[i].id >= 0) {
            H5Dclose(h->sets[i].id);
            h->sets[i].id = -1;
        }
}

/* Point libhdf5's descriptor at an anonymous file, which takes whatever it still writes. */
static void discard_writes(int fd)
{
    int sink = memfd_create("ckptconv-hdf5-discarded", MFD_CLOEXEC);

    if (sink >= 0) {
        dup2(sink, fd);
        close(sink);
    }
}

/* Close the file: 0 or CKPT_EIO. `failed`: the output has failed already and is lost.
 * libhdf5 1.10 cannot close a file whose metadata it failed to write (a full disk): the
 * close fails, leaves the file half closed, and the program crashes when it exits
 * (H5_term_library). So the file's space, where the last flush writes (it allocates none),
 * is reserved first; when it cannot be, or the output has failed already, what the close
 * writes goes nowhere. */
static int close_file(ckpt_writer *w, h5_writer *h, int failed)
{
    int rc = 0, *fd = NULL;
    haddr_t eoa;

    if (h->file < 0)
        return 0;
    close_all(h);
    if (H5Fget_vfd_handle(h->file, H5P_DEFAULT, (void **)&fd) < 0)
        fd = NULL;
    if (!failed && fd && H5Fget_eoa(h->file, &eoa) >= 0 && eoa > 0 && eoa < (haddr_t)INT64_MAX) {
        struct rlimit most;
        /* reserving space does not grow the file, so the size limit is looked at apart */
        if (getrlimit(RLIMIT_FSIZE, &most) == 0 && most.rlim_cur != RLIM_INFINITY && eoa > most.rlim_cur)
            errno = EFBIG;
        else if (fallocate(*fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)eoa) == 0)
            errno = 0;
        if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG) {
            rc = ckpt_error_set(CKPT_EIO, "%s: cannot finish the HDF5 file: %s", ckpt_writer_path(w),
                                strerror(errno));
            failed = 1;
        }
    }
    H5Eclear2(H5E_DEFAULT);
    if (failed && fd)
        discard_writes(*fd);
    if (H5Fclose(h->file) < 0) {
        ckpt_hdf5__file_left_open();
        if (rc == 0)
            rc = ckpt_hdf5__fail(CKPT_EIO, "%s: cannot finish the HDF5 file", ckpt_writer_path(w));
    }
    h->file = -1;
    return rc;
}

int ckpt_hdf5__write_finish(ckpt_writer *w)
{
    h5_writer *h = *ckpt_writer_state(w);
    size_t i;
    int rc = 0, k;

    for (i = 0; i < h->n_sets && rc == 0; i++)
        if (!h->sets[i].n_chunks)
            rc = write_unchunked(w, h, i);
    if (rc == 0)
        rc = write_chunks(w, h);
    if ((k = close_file(w, h, rc < 0)) < 0 && rc == 0)
        rc = k;
    if (rc == 0 && h->codec != CKPT_CODEC_NONE && h->stored_bytes)
        ckpt_writer_note(w, "HDF5 chunks, %s level %d: %.1f MB stored in %.1f MB (x%.2f)", h->codec == CKPT_CODEC_ZSTD ? "zstd" : "gzip", h->level, (double)h->raw_bytes / 1e6,
                         (double)h->stored_bytes / 1e6, (double)h->raw_bytes / (double)h->stored_bytes);
    return rc;
}

void ckpt_hdf5__write_free(ckpt_writer *w)
{
    h5_writer *h = *ckpt_writer_state(w);

    if (!h)
        return;
    close_file(w, h, 1);
    free(h->sets);
    free(h);
    *ckpt_writer_state(w) = NULL;
}
