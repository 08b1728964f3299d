/* HDF5: what the reader (hdf5_read*.c), the writer (hdf5_write.c), the zstd filter
 * (hdf5_filter.c) and the fuzz harness share. Not part of the public API.
 *
 * The dtype convention (docs in formats/README.md): HDF5 has no bfloat16 or float8 type
 * that h5py can read, so such a dataset is stored as unsigned integers of the same width
 * (H5T_STD_U16LE, H5T_STD_U8LE) with a string attribute "dtype" naming the type as torch
 * does ("bfloat16", "float8_e4m3fn", "float8_e5m2"). float16 is HDF5's IEEE half as h5py
 * writes it, bool h5py's enum {FALSE = 0, TRUE = 1} over int8. */
#ifndef CKPT_FORMATS_HDF5_PRIVATE_H
#define CKPT_FORMATS_HDF5_PRIVATE_H

#if !defined(CKPT_BUILD) && !defined(CKPT_FUZZ_HDF5)
#error "hdf5_private.h is internal to libckpt"
#endif

#include <ckpt/dtype.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/format.h>

/* Filter ids: HDF5's own deflate, shuffle and fletcher32; zstd as registered with The HDF
 * Group by hdf5plugin's author (https://github.com/HDFGroup/hdf5_plugins, REGISTERED.md). */
#define CKPT_H5_FILTER_DEFLATE 1
#define CKPT_H5_FILTER_SHUFFLE 2
#define CKPT_H5_FILTER_FLETCHER32 3
#define CKPT_H5_FILTER_ZSTD 32015

/* The attribute that names a type HDF5 lacks. */
#define CKPT_H5_DTYPE_ATTR "dtype"

/* Once per process, thread-safe: HDF5's own error printing off (errors are reported
 * through ckpt_error_*), the zstd filter registered with the library. 0 or CKPT_EIO. */
int ckpt_hdf5__init(void);

/* ckpt_error_set(code, ...) with the innermost message of HDF5's error stack appended
 * (": <HDF5's reason>") when there is one; the stack is cleared. Returns code. */
int ckpt_hdf5__fail(int code, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);

/* The writer's hooks (hdf5_write.c), referenced by the vtable in hdf5.c. */
int ckpt_hdf5__write_begin(ckpt_writer *w);
int ckpt_hdf5__write_finish(ckpt_writer *w);
void ckpt_hdf5__write_free(ckpt_writer *w);

/* ---- reader side (hdf5_read*.c) ---- */

/* An HDF5 datatype as the reader sees it, filled from libhdf5 (hdf5_read.c) or by the fuzz
 * harness: what ckpt_hdf5__dtype needs to name the element type, and nothing else. */
typedef enum ckpt_h5_class {
    CKPT_H5_OTHER = 0, /* strings, references, variable-length, arrays, ... */
    CKPT_H5_INTEGER,
    CKPT_H5_FLOAT,
    CKPT_H5_ENUM,
    CKPT_H5_COMPOUND,
    CKPT_H5_OPAQUE
} ckpt_h5_class;

/* An integer or a floating-point type. */
typedef struct ckpt_h5_atom {
    ckpt_h5_class cls;
    size_t size;            /* bytes */
    int big_endian;         /* else little-endian (other orders are CKPT_H5_OTHER) */
    int is_signed;          /* integers */
    size_t precision, bit_offset;
    /* floats: bit positions and sizes of sign, exponent and mantissa, exponent bias, and
     * whether the mantissa's leading 1 is implied */
    size_t spos, epos, esize, mpos, msize, ebias;
    int norm_implied;
} ckpt_h5_atom;

#define CKPT_H5_MAX_MEMBERS 2 /* members looked at: a bool enum and a complex have two */

typedef struct ckpt_h5_type {
    ckpt_h5_class cls;
    size_t size;
    ckpt_h5_atom atom;      /* INTEGER, FLOAT: the type; ENUM: its base type */
    size_t n_members;       /* ENUM, COMPOUND: all of them; the first two are described */
    const char *member_name[CKPT_H5_MAX_MEMBERS];
    int64_t enum_value[CKPT_H5_MAX_MEMBERS];
    size_t member_offset[CKPT_H5_MAX_MEMBERS];
    ckpt_h5_atom member[CKPT_H5_MAX_MEMBERS]; /* COMPOUND */
    const char *tag;        /* OPAQUE: its tag, or NULL */
} ckpt_h5_type;

/* What ckpt_hdf5__dtype concluded besides the type. */
#define CKPT_H5_GUESSED 0x1u /* an untagged 2-byte opaque without a "dtype" attribute, read as
                                bfloat16 (what h5py writes for an ml_dtypes.bfloat16 array) */
#define CKPT_H5_ENUM_INT 0x2u /* an enum other than h5py's bool, read as its integers */

/* The element type of a dataset of type t whose "dtype" attribute is `attr` (NULL: none),
 * and whether its elements are stored big-endian. 0, or CKPT_EUNSUPPORTED / CKPT_EFORMAT
 * with the reason in why[cap] (nothing else set: the caller names file and dataset). Pure:
 * no libhdf5, no allocation. */
int ckpt_hdf5__dtype(const ckpt_h5_type *t, const char *attr, ckpt_dtype *dtype, int *byteswap, unsigned *info,
                     char *why, size_t cap);
/* A type name as people write it in a "dtype" attribute or an opaque tag ("bfloat16",
 * "torch.bfloat16", "bf16", "NUMPY:<f1", ...); CKPT_DTYPE_INVALID when it names none. */
ckpt_dtype ckpt_hdf5__dtype_name(const char *name);

/* The filter pipeline of a chunked dataset, in the order HDF5 applies it when writing. */
#define CKPT_H5_MAX_FILTERS 16
typedef struct ckpt_h5_pipeline {
    size_t n;
    unsigned id[CKPT_H5_MAX_FILTERS];
    unsigned shuffle_size[CKPT_H5_MAX_FILTERS]; /* shuffle's element size (its first value), 0 if none */
} ckpt_h5_pipeline;

/* The encoding, shuffle and flags of the extent for one stored chunk, the filters whose bit
 * is set in `mask` skipped; `es` is the element size (shuffle's default). Fills encoding,
 * shuffle and flags of *e only. 0, or CKPT_EUNSUPPORTED with the filter named in why[cap]. */
int ckpt_hdf5__chunk_encoding(const ckpt_h5_pipeline *p, unsigned mask, size_t es, ckpt_extent *e, char *why,
                              size_t cap);
/* A filter's name for messages ("deflate", "szip", ...; "unknown" for an id we do not know). */
const char *ckpt_hdf5__filter_name(unsigned id);

/* The reader's hooks (hdf5_read.c), referenced by the vtable in hdf5.c. */
int ckpt_hdf5__open(ckpt_reader *r);
int ckpt_hdf5__bid(const ckpt_probe *p, int best_bid);
/* The format's bound hook: the superblock's end-of-file address (ckpt_format_vtable.bound). */
int ckpt_hdf5__bound(const ckpt_probe *p, uint64_t *need, uint64_t *max_size);

/* What the reader's files share while a file is opened; libhdf5 types, so not seen by the
 * fuzz harnesses. */
#ifdef CKPT_BUILD
#include <hdf5.h>

typedef struct ckpt_h5_reader {
    ckpt_reader *r;
    ckpt_arena *arena;
    const ckpt_file *file;     /* the mapped input */
    const char *path;          /* the input, for messages */
    hid_t fid;
    uint64_t user_block;       /* bytes before the HDF5 data */
    int chunk_base;            /* chunk addresses are: 0 not known yet, 1 file offsets, 2 after
                                  the user block (HDF5 1.10 counts them from the superblock) */
    ckpt_value *attributes;    /* "__attributes__", made at the first attribute */
    /* objects already read, by address: a second hard link reads nothing more */
    haddr_t *seen;
    size_t n_seen, cap_seen;
    /* bytes that are in no mapped range (compact datasets, fill values), to become one
     * memory file, and the extents that point into them (offset = where in `mem`) */
    unsigned char *mem;
    size_t mem_len, mem_cap;
    ckpt_extent **pending;
    size_t n_pending, cap_pending;
} ckpt_h5_reader;

/* Names and tag of a type described by ckpt_hdf5__describe_type. */
typedef struct ckpt_h5_names {
    char member[CKPT_H5_MAX_MEMBERS][64];
    char tag[256];
} ckpt_h5_names;

/* Fill *out from type `tid` (string members point into *names). 0 or CKPT_EIO. */
int ckpt_hdf5__describe_type(hid_t tid, ckpt_h5_type *out, ckpt_h5_names *names);
/* The string attribute `name` of obj into buf[cap] (truncated); 1 when there is one, 0 when
 * not (or it is not a string). */
int ckpt_hdf5__string_attr(hid_t obj, const char *name, char *buf, size_t cap);
/* Every attribute of obj, whose path is `where` ("/" for the root group), into
 * h->attributes[where]. */
int ckpt_hdf5__attributes(ckpt_h5_reader *h, hid_t obj, const char *where);
/* A dataset that holds no numbers (strings) as a value: 1 and *out set, or 0 when it cannot
 * be one (the caller notes it), or an error. */
int ckpt_hdf5__string_dataset(ckpt_h5_reader *h, hid_t d, ckpt_value **out);
/* A dataset of numbers as a tensor: 1 and *index set, 0 when it holds no numbers, or an
 * error naming file and dataset. */
int ckpt_hdf5__dataset(ckpt_h5_reader *h, hid_t d, const char *name, size_t *index);
/* Append n bytes to the memory file, pointing extent e at them. */
int ckpt_hdf5__keep_bytes(ckpt_h5_reader *h, ckpt_extent *e, const void *data, size_t n);
#endif

#endif
