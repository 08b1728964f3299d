/* For format implementers: the vtable a format module exports and the engine objects its
 * hooks receive. A format module sees only include/; it reads through ckpt_reader and
 * writes through ckpt_writer, never through the engine's internals. */
#ifndef CKPT_SYS_FORMAT_H
#define CKPT_SYS_FORMAT_H

#include "../checkpoint.h"
#include "common.h"
#include "io.h"

CKPT_BEGIN_DECL

#define CKPT_FORMAT_ABI_VERSION 1

/* What a bidder may look at. The engine maps the file first; for a directory, file is NULL. */
typedef struct ckpt_probe {
    const char *path;
    const ckpt_file *file; /* NULL for a directory */
    int is_dir;
    /* file holds only the first bytes of a compressed input, bid on before the rest is
     * decompressed: judge what is there; the missing rest is no reason to refuse. */
    int partial;
} ckpt_probe;

/* The engine's side of an open in progress. */
typedef struct ckpt_reader ckpt_reader;

CKPT_EXTERN(const char *) ckpt_reader_path(const ckpt_reader *r);
/* The mapped main file; NULL when the path is a directory. */
CKPT_EXTERN(const ckpt_file *) ckpt_reader_file(const ckpt_reader *r);
/* Map another file (a shard); it stays open as long as the checkpoint. */
CKPT_EXTERN(int) ckpt_reader_open_file(ckpt_reader *r, const char *path, const ckpt_file **out);
/* The same for a file whose size another file says (an index): a compressed one that
 * decompresses to more than max_size bytes is refused as it is decompressed, before the rest
 * is written. */
CKPT_EXTERN(int) ckpt_reader_open_file_within(ckpt_reader *r, const char *path, uint64_t max_size,
                                              const ckpt_file **out);
CKPT_EXTERN(const ckpt_open_options *) ckpt_reader_options(const ckpt_reader *r);
CKPT_EXTERN(ckpt_arena *) ckpt_reader_arena(ckpt_reader *r);
/* The format's private state; freed by the format's close hook. */
CKPT_EXTERN(void **) ckpt_reader_state(ckpt_reader *r);
/* A storage with n_extents zeroed extents, allocated in the arena. */
CKPT_EXTERN(ckpt_storage *) ckpt_reader_new_storage(ckpt_reader *r, const char *key, ckpt_dtype dtype, size_t n_extents);
/* A tiled storage of the whole array `shape` with n_tiles zeroed tiles, allocated in the
 * arena. Fill in every tile, then call ckpt_storage_tiling_check. */
CKPT_EXTERN(ckpt_storage *) ckpt_reader_new_tiled_storage(ckpt_reader *r, const char *key, ckpt_dtype dtype,
                                                          int ndim, const int64_t *shape, size_t n_tiles);
/* Check that the tiles lie inside the array, fit their sources, do not overlap and cover
 * every element, and set s->nbytes. CKPT_EFORMAT naming the storage and the chunk. */
CKPT_EXTERN(int) ckpt_storage_tiling_check(ckpt_storage *s);
/* The part of that check about boxes alone (sources are not looked at): inside the array,
 * no two overlapping, every element covered. Fails with `code`, messages starting with
 * `what`; *elements (if non-NULL) receives the array's element count. */
CKPT_EXTERN(int) ckpt_tiling_check_boxes(const ckpt_tiling *g, const char *what, int code, uint64_t *elements);
/* Bytes [off, off+len) of a mapped file seen as a file of their own (a torch.save archive
 * inside a larger file): same path and mapping, offsets counted from `off`. Lives as long
 * as the checkpoint; never closed by itself. */
CKPT_EXTERN(int) ckpt_reader_window(ckpt_reader *r, const ckpt_file *f, uint64_t off, uint64_t len,
                                    const ckpt_file **out);
/* A file holding a copy of `len` bytes, for data a format gets outside any mapped byte range
 * (HDF5 compact datasets, fill values): an unnamed file in memory, read like any input file
 * and named `name` in messages. Lives as long as the checkpoint. */
CKPT_EXTERN(int) ckpt_reader_memory_file(ckpt_reader *r, const char *name, const void *data, size_t len,
                                         const ckpt_file **out);
/* Append a zeroed tensor; returns its index (>= 0) or an error. *out stays valid until the
 * next add. A tensor left without a name is named after the key path of the first
 * CKPT_VAL_TENSOR node that refers to it. */
CKPT_EXTERN(int) ckpt_reader_add_tensor(ckpt_reader *r, ckpt_tensor **out);
CKPT_EXTERN(ckpt_tensor *) ckpt_reader_tensor(ckpt_reader *r, size_t index);
CKPT_EXTERN(size_t) ckpt_reader_tensor_count(const ckpt_reader *r);
CKPT_EXTERN(void) ckpt_reader_set_root(ckpt_reader *r, ckpt_value *root);
CKPT_EXTERN(void) ckpt_reader_note(ckpt_reader *r, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);

/* What the engine asks a writer to write. Each tensor is a view on a blob: a run of bytes
 * the engine produces (copied, gathered or cast from the input). Writers without
 * CKPT_FORMAT_VIEWS get one contiguous blob per tensor with offset 0 and C-order strides. */
typedef struct ckpt_out_blob {
    ckpt_dtype dtype; /* element type of the bytes */
    uint64_t nbytes;
} ckpt_out_blob;

typedef struct ckpt_out_tensor {
    const char *name;
    ckpt_dtype dtype;
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    int64_t stride[CKPT_MAX_DIMS]; /* elements */
    int64_t offset;                /* elements into the blob */
    size_t blob;
    uint32_t flags;                /* CKPT_TENSOR_* */
} ckpt_out_tensor;

typedef struct ckpt_out {
    const ckpt_value *root; /* NULL unless the format has CKPT_FORMAT_METADATA; TENSOR nodes index tensors[] */
    size_t n_tensors;
    const ckpt_out_tensor *tensors;
    size_t n_blobs;
    const ckpt_out_blob *blobs;
} ckpt_out;

/* The engine's side of a write in progress. */
typedef struct ckpt_writer ckpt_writer;

CKPT_EXTERN(const ckpt_out *) ckpt_writer_out(const ckpt_writer *w);
CKPT_EXTERN(ckpt_outfile *) ckpt_writer_file(ckpt_writer *w);
CKPT_EXTERN(const char *) ckpt_writer_path(const ckpt_writer *w);
/* The name of the file the format writes, for formats that record it inside (torch names
 * its archive after it): the path, less the ".zst" of an output the engine compresses. */
CKPT_EXTERN(const char *) ckpt_writer_name(const ckpt_writer *w);
CKPT_EXTERN(const ckpt_convert_options *) ckpt_writer_options(const ckpt_writer *w);
CKPT_EXTERN(void **) ckpt_writer_state(ckpt_writer *w);
/* Ask for blob bytes [blob_off, blob_off+len) to be written at file offset file_off. `len`
 * always counts blob bytes. RAW writes them as they are; LATIN1_UTF8 writes their UTF-8
 * encoding as latin-1 text, which takes ckpt_writer_encoded_size bytes in the file.
 * Returns a placement index (>= 0) or an error. The engine writes all placements after
 * write_begin returns, in parallel. */
CKPT_EXTERN(int) ckpt_writer_place(ckpt_writer *w, size_t blob, uint64_t blob_off, uint64_t len,
                                   uint64_t file_off, ckpt_extent_encoding encoding);
/* UTF-8 length of blob bytes [blob_off, blob_off+len) encoded as latin-1 text (reads them). */
CKPT_EXTERN(int) ckpt_writer_encoded_size(ckpt_writer *w, size_t blob, uint64_t blob_off, uint64_t len,
                                          uint64_t *out);
/* With CKPT_FORMAT_BY_PATH: the path of the temporary the output is written as, for a
 * library that opens files by name (HDF5). It exists, empty, when write_begin runs; the
 * format writes it whole and closes it before write_finish returns, and the engine then
 * syncs it and renames it into place. NULL for other formats. */
CKPT_EXTERN(const char *) ckpt_writer_temp_path(const ckpt_writer *w);
/* With CKPT_FORMAT_ENCODES: blob bytes [off, off+len) (element aligned) into dst, produced
 * as for a placement and counted as progress. For write_finish, which encodes the data
 * itself; safe to call from several threads at once. */
CKPT_EXTERN(int) ckpt_writer_read(ckpt_writer *w, size_t blob, uint64_t off, uint64_t len, void *dst);
/* The threads and the working memory the user allowed (resolved: never 0). */
CKPT_EXTERN(int) ckpt_writer_threads(const ckpt_writer *w);
CKPT_EXTERN(uint64_t) ckpt_writer_memory(const ckpt_writer *w);
/* Of that memory, what each thread keeps decoded chunks of compressed inputs in while it
 * reads for this writer (ckpt_writer_read included): memory / threads / 4, at most
 * CKPT_STORAGE_CACHE_BYTES. A format's own buffers fit in what the threads' caches leave. */
CKPT_EXTERN(uint64_t) ckpt_writer_cache_bytes(const ckpt_writer *w);
/* CRC-32 of what a placement wrote (formats with CKPT_FORMAT_CRC), valid in write_finish. */
CKPT_EXTERN(uint32_t) ckpt_writer_placement_crc(const ckpt_writer *w, int placement);
CKPT_EXTERN(void) ckpt_writer_note(ckpt_writer *w, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);

typedef struct ckpt_format_vtable {
    unsigned abi_version;    /* CKPT_FORMAT_ABI_VERSION */
    const char *name;        /* "torch", "pdparams", "safetensors" */
    const char *description;
    const char *extensions;  /* space separated, first one is the default */
    unsigned caps;           /* CKPT_FORMAT_* */
    /* How sure the format is that the input is its own: -1 not mine, else about the number
     * of bits verified. May return -1 early when it cannot beat best_bid. */
    int (*bid)(const ckpt_probe *p, int best_bid);
    /* Read the input: add storages and tensors, set the root. */
    int (*open)(ckpt_reader *r);
    /* Free the private state (optional). */
    void (*close)(ckpt_reader *r);
    /* Write everything but tensor data into ckpt_writer_file and place every blob. */
    int (*write_begin)(ckpt_writer *w);
    /* After the data: trailers that need CRCs or sizes (optional). Formats with
     * CKPT_FORMAT_ENCODES read and write all the data here. */
    int (*write_finish)(ckpt_writer *w);
    /* Free the private writer state (optional); called on success and failure. */
    void (*write_free)(ckpt_writer *w);
    /* How long a compressed input of this format may decompress to, asked before the rest is
     * decompressed (optional: no bound). p->file holds its first bytes (p->partial) or all of
     * them. Set *max_size to the most bytes its header allows (UINT64_MAX: it does not say),
     * or, while p->partial, *need to how many leading bytes the header takes (more than
     * p->file->size); return < 0, the error open would give, for a header already wrong. */
    int (*bound)(const ckpt_probe *p, uint64_t *need, uint64_t *max_size);
} ckpt_format_vtable;

CKPT_END_DECL

#endif
