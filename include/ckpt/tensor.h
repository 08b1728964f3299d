/* Tensors: metadata (name, dtype, shape, strides, offset) apart from where the bytes live.
 *
 * A storage is a run of bytes in the input, described by extents: pieces of mapped files,
 * possibly compressed or encoded. Tensors are views on a storage, as in torch: shape and
 * strides in elements, an element offset into the storage. Nothing is read until asked. */
#ifndef CKPT_TENSOR_H
#define CKPT_TENSOR_H

#include "common.h"
#include "dtype.h"

CKPT_BEGIN_DECL

typedef struct ckpt_file ckpt_file; /* a mapped input file, see sys/io.h */

/* How an extent's bytes are stored. Append-only. */
typedef enum ckpt_extent_encoding {
    CKPT_EXTENT_RAW = 0,         /* the bytes themselves */
    CKPT_EXTENT_DEFLATE,         /* raw deflate stream (zip method 8) that inflates to `size` bytes */
    CKPT_EXTENT_LATIN1_UTF8,     /* UTF-8 text whose code points (all < 256) are the bytes */
    CKPT_EXTENT_ZLIB,            /* zlib stream (RFC 1950) that inflates to exactly `size` bytes */
    CKPT_EXTENT_ZSTD,            /* zstd frames that decompress to exactly `size` bytes */
    CKPT_EXTENT_FILL             /* the stored bytes repeated to `size` bytes (stored_size divides
                                    size); stored_size 0 means zeros, and then file may be NULL */
} ckpt_extent_encoding;

/* Extent flags. */
#define CKPT_EXTENT_FLETCHER32 0x1u /* the stored bytes end in 4 more: HDF5's Fletcher-32 of the
                                       bytes before them, checked before anything is decoded */

/* ZLIB and ZSTD extents, and extents with a shuffle or a checksum, are decoded whole (an HDF5
 * chunk is one of them). Decoded extents of storages with an id are kept in a per-thread
 * cache, so a read that crosses the same chunk row after row decodes it once; one extent
 * larger than the cache is kept alone. The cache holds CKPT_STORAGE_CACHE_BYTES, or, in a
 * thread writing for ckpt_convert and the set jobs, a quarter of that thread's share of the
 * memory budget when that is less (ckpt_writer_cache_bytes). */
#define CKPT_STORAGE_CACHE_BYTES ((uint64_t)32 << 20)

typedef struct ckpt_extent {
    const ckpt_file *file;          /* borrowed; owned by the checkpoint */
    uint64_t offset;                /* where the stored bytes start in the file */
    uint64_t stored_size;           /* bytes in the file (the checksum included) */
    uint64_t size;                  /* bytes after decoding */
    ckpt_extent_encoding encoding;
    uint32_t shuffle;               /* > 1: the decoded bytes are HDF5-shuffled (byte k of every
                                       element, then byte k+1, ...) in elements of this size, and
                                       are unshuffled; 0 or 1: not shuffled */
    uint32_t flags;                 /* CKPT_EXTENT_* */
} ckpt_extent;

typedef struct ckpt_tiling ckpt_tiling;

typedef struct ckpt_storage {
    const char *key;         /* the format's name for it ("data/0", a tensor name, ...) */
    ckpt_dtype dtype;        /* element type the storage was written with */
    uint64_t nbytes;         /* sum of extent sizes */
    size_t n_extents;
    ckpt_extent *extents;    /* logical bytes = concatenation of the decoded extents */
    int byteswap;            /* stored big-endian: swap each element of dtype size on read */
    const ckpt_tiling *tiling; /* non-NULL: the bytes are stitched from tiles (no extents) */
    uint64_t id;             /* unique in the process, set by ckpt_reader_new_storage; 0 (a
                                storage made by hand): its decoded extents are not cached */
} ckpt_storage;

/* One box of a tiled storage: elements [offset, offset + size) along each axis of the whole
 * array, stored in C order as a run of another storage from byte source_offset on. The run
 * may hold a larger box, `stored`, of which the tile is the corner at its origin (an HDF5
 * chunk at the edge of its array is stored whole); 0 along an axis means "as size". */
typedef struct ckpt_tile {
    int64_t offset[CKPT_MAX_DIMS];
    int64_t size[CKPT_MAX_DIMS];
    const ckpt_storage *source;
    uint64_t source_offset;
    int64_t stored[CKPT_MAX_DIMS];
} ckpt_tile;

/* The chunks of a tensor saved in pieces (PyTorch Distributed Checkpoint): the storage's
 * logical bytes are the whole array of `shape` in C order, each element in exactly one
 * tile. Reading a range reads the runs of the tiles it crosses, so a tensor split by rows,
 * by columns or by both is read as if it had been saved whole. */
struct ckpt_tiling {
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    size_t n_tiles;
    ckpt_tile *tiles;
    /* All > 0 (HDF5): the tiles are the cells of a regular grid of boxes of this shape, one
     * per cell, listed in C order of their positions, so that a tile is found by arithmetic
     * rather than by a search. All 0: tiles anywhere, in any order. */
    int64_t chunk[CKPT_MAX_DIMS];
};

/* Tensor flags. */
#define CKPT_TENSOR_PARAMETER       0x1u /* torch nn.Parameter */
#define CKPT_TENSOR_REQUIRES_GRAD   0x2u
#define CKPT_TENSOR_FROZEN          0x4u /* a model parameter that was not trained (DeepSpeed's
                                            frozen parameters); writers ignore it */
#define CKPT_TENSOR_OPTIMIZER_STATE 0x8u /* optimizer state of a parameter, not a model weight;
                                            writers ignore it */

typedef struct ckpt_tensor {
    const char *name;                 /* path in the checkpoint, container keys joined with '/' */
    ckpt_dtype dtype;
    int ndim;                         /* 0 for a scalar */
    int64_t shape[CKPT_MAX_DIMS];
    int64_t stride[CKPT_MAX_DIMS];    /* in elements */
    int64_t offset;                   /* in elements, into storage */
    const ckpt_storage *storage;      /* shared by views; NULL only for zero-element tensors */
    uint32_t flags;
} ckpt_tensor;

/* Number of elements (1 for a scalar); -1 for a negative dimension, a bad rank or a count
 * past INT64_MAX. */
CKPT_EXTERN(int64_t) ckpt_tensor_numel(const ckpt_tensor *t);
/* numel * element size; UINT64_MAX when numel is -1 or the product overflows. */
CKPT_EXTERN(uint64_t) ckpt_tensor_nbytes(const ckpt_tensor *t);
/* Non-zero if the elements are laid out densely in C order from `offset`. */
CKPT_EXTERN(int) ckpt_tensor_is_contiguous(const ckpt_tensor *t);
/* Fill t->stride with the C-order strides of t->shape. */
CKPT_EXTERN(void) ckpt_tensor_set_contiguous(ckpt_tensor *t);
/* Check that every element of the view lies inside the storage and that the storage holds
 * whole elements; errors name the tensor. 0 or CKPT_EFORMAT. */
CKPT_EXTERN(int) ckpt_tensor_validate(const ckpt_tensor *t);

/* A shape as text, "[4, 8]" ("[]" for a scalar), cut short where cap ends; returns buf. */
CKPT_EXTERN(const char *) ckpt_shape_format(const int64_t *shape, int ndim, char *buf, size_t cap);

/* Copy storage bytes [off, off+len) into dst, decoding extents. For a byteswapped storage
 * off and len must be multiples of the swapped unit, for a tiled one of the element size
 * (CKPT_EINVALID otherwise). */
CKPT_EXTERN(int) ckpt_storage_read(const ckpt_storage *s, uint64_t off, uint64_t len, void *dst);
/* A direct pointer to storage bytes [off, off+len) when they lie in one RAW extent of a
 * mapped file with no byteswap (for a tiled storage: in one run of a tile), else NULL (then use ckpt_storage_read). Borrowed: valid
 * while the file is open. */
CKPT_EXTERN(const void *) ckpt_storage_map(const ckpt_storage *s, uint64_t off, uint64_t len);

/* Copy elements [first, first+count) of the tensor, in C order, into dst as dst_type
 * (converted exactly as ckpt_dtype_convert does). Works for any strides, in bounded
 * temporary memory. After a large contiguous read straight from a mapped file the pages
 * it used are handed back (ckpt_file_release). */
CKPT_EXTERN(int) ckpt_tensor_read(const ckpt_tensor *t, int64_t first, int64_t count,
                                  ckpt_dtype dst_type, void *dst);

/* How a storage's bytes are kept, for display (inspect): in boxes or not, encoded how, and
 * what the files spend on them. */
typedef struct ckpt_storage_summary {
    uint64_t bytes;          /* decoded */
    uint64_t stored_bytes;   /* in the files: compressed size, checksums included */
    uint64_t n_chunks;       /* tiles of a tiled storage; 0 when not tiled */
    int chunk_ndim;
    int64_t chunk[CKPT_MAX_DIMS]; /* the first tile's box as stored */
    unsigned encodings;      /* bit (1u << e) for every ckpt_extent_encoding e used */
    int shuffled, checksummed;
} ckpt_storage_summary;

/* Fill *out for s (NULL: all zero). 0 or CKPT_ENOMEM. */
CKPT_EXTERN(int) ckpt_storage_summarize(const ckpt_storage *s, ckpt_storage_summary *out);

CKPT_END_DECL

#endif
