/* Shared by the pdparams reader (pdparams.c, pdparams_split.c) and writer (pdparams_write.c). */
#ifndef CKPT_FORMATS_PDPARAMS_PRIVATE_H
#define CKPT_FORMATS_PDPARAMS_PRIVATE_H

#ifndef CKPT_BUILD
#error "pdparams_private.h is internal to libckpt"
#endif

#include <ckpt/sys/format.h>

/* paddle.save under pickle protocol 2 or 3 cuts every top-level array of more than
 * (2**30 - 1) // itemsize elements into 1-D parts named "<key>@@.<i>", appended after
 * the other entries, and describes them in one last entry:
 * "UnpackBigParamInfor@@": {key: {"OriginShape": shape tuple, "slices": [part names]}}. */
#define PDPARAMS_SPLIT_INFO_KEY "UnpackBigParamInfor@@"
#define PDPARAMS_SPLIT_PART_SEP "@@."
#define PDPARAMS_SPLIT_SHAPE_KEY "OriginShape"
#define PDPARAMS_SPLIT_SLICES_KEY "slices"
#define PDPARAMS_SPLIT_LIMIT_BYTES ((1ull << 30) - 1)

/* A numpy array found in the pickle. */
typedef struct ckpt_pd_array {
    ckpt_value *node;       /* the construction; becomes a TENSOR node */
    const char *name;       /* key path; NULL for an array that is the whole pickle */
    ckpt_dtype dtype;
    int byteswap;
    int fortran;
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    uint64_t nbytes;
    const ckpt_value *data; /* BYTES */
    size_t split;           /* 1 + index of the split it is a part of, or 0 */
} ckpt_pd_array;

/* An array paddle.save cut into parts, put back together. */
typedef struct ckpt_pd_split {
    ckpt_value *key_node;
    const char *key;
    ckpt_value *node;       /* TENSOR node put into the root dict */
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    size_t n_parts;
    size_t *parts;          /* indices into arrays[], slice order */
    int placed, added;
} ckpt_pd_split;

/* The reader's state during one open. */
typedef struct ckpt_pd_open {
    ckpt_reader *r;
    const ckpt_file *file;
    const char *path;
    ckpt_arena *arena;
    ckpt_pd_array *arrays;
    size_t n_arrays, cap_arrays;
    ckpt_pd_split *splits;
    size_t n_splits;
    ckpt_value **tuples; /* builtins.tuple(...) calls */
    size_t n_tuples, cap_tuples;
    int bf16_noted;
} ckpt_pd_open;

/* pdparams.c */
/* The key for messages: "<root>" for the pickle itself. */
const char *ckpt_pdparams__key(const char *name);
/* A shape tuple (or list) of non-negative ints whose non-zero dimensions multiply to at
 * most INT64_MAX, so that strides cannot overflow either. */
int ckpt_pdparams__parse_shape(ckpt_pd_open *o, const char *key, const ckpt_value *v, int *ndim, int64_t *shape,
                               int64_t *numel);
/* The extents of a BYTES value that lies in the mapped file: how many, and filling them. */
size_t ckpt_pdparams__extent_count(const ckpt_value *data);
void ckpt_pdparams__extents(const ckpt_pd_open *o, const ckpt_value *data, ckpt_extent *e);
/* Add a tensor on `storage`; returns its index or an error. */
int ckpt_pdparams__new_tensor(ckpt_pd_open *o, const char *name, ckpt_dtype dtype, int ndim, const int64_t *shape,
                              int fortran, const ckpt_storage *storage);

/* pdparams_split.c */
/* Check the split info, mark the parts, and put one TENSOR node per split array into the
 * root dict in place of its parts; no tensors are added yet. */
int ckpt_pdparams__reassemble(ckpt_pd_open *o, ckpt_value *root);
/* Add the tensor of a split array: its parts' extents, in slice order, make its storage. */
int ckpt_pdparams__add_split(ckpt_pd_open *o, ckpt_pd_split *s);

/* pdparams_write.c */
int ckpt_pdparams__write_begin(ckpt_writer *w);
void ckpt_pdparams__write_free(ckpt_writer *w);

#endif
