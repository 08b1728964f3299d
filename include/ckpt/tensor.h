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
    CKPT_EXTENT_LATIN1_UTF8      /* UTF-8 text whose code points (all < 256) are the bytes */
} ckpt_extent_encoding;

typedef struct ckpt_extent {
    const ckpt_file *file;          /* borrowed; owned by the checkpoint */
    uint64_t offset;                /* where the stored bytes start in the file */
    uint64_t stored_size;           /* bytes in the file */
    uint64_t size;                  /* bytes after decoding */
    ckpt_extent_encoding encoding;
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
} ckpt_storage;

/* One box of a tiled storage: elements [offset, offset + size) along each axis of the whole
 * array, stored in C order as a run of another storage from byte source_offset on. */
typedef struct ckpt_tile {
    int64_t offset[CKPT_MAX_DIMS];
    int64_t size[CKPT_MAX_DIMS];
    const ckpt_storage *source;
    uint64_t source_offset;
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

CKPT_END_DECL

#endif
