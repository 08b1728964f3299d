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
#include <ckpt/sys/table.h>

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
/* A file libhdf5 failed to close is left alone at exit (hdf5_common.c). */
void ckpt_hdf5__file_left_open(void);

/* ckpt_error_set(code, ...) with the innermost message of HDF5's error stack appended
 * (": <HDF5's reason>") when there is one; the stack is cleared. Returns code. */
int ckpt_hdf5__fail(int code, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
/* Where libhdf5 could not read a file's metadata: CKPT_EFORMAT "PATH: corrupt HDF5 file
 * (WHAT: HDF5's reason)", the stack cleared. */
int ckpt_hdf5__corrupt(const char *path, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);

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

/* ---- reading: the walk's records ----
 *
 * libhdf5 crashes, frees twice and loops forever on some corrupt files, so it never reads
 * in this process: a child process walks the file with it (hdf5_read*.c) and sends what it
 * found as a stream of records over a pipe (hdf5_walk_ipc.c); this process builds the
 * checkpoint from the records (hdf5_build*.c), trusting none of them.
 *
 * Integers are little-endian; a str is a u32 length and that many bytes. Records:
 *   NOTE str; GROUP str key (the group's members follow, up to its END); END;
 *   VALUE str key, value (a dataset of strings); ATTR str object path, str name, value;
 *   DATASET str key, dataset; DONE (the walk finished: the last record);
 *   FAIL u32 -code, u32 class, str message (the walk failed: the last record).
 * A value: u8 LIST + u32 n + n values, STR + str, INT + u64, FLOAT + u64 (the double's
 * bits), BOOL + u8.
 * A dataset: u32 dtype, u8 byteswap, u8 ndim, ndim x u64 dims, u8 layout, then
 *   CONTIGUOUS: u8 allocated, then u64 file offset if it is, else a fill;
 *   COMPACT: str (its bytes);
 *   CHUNKED: ndim x u64 chunk dims, u8 n filters, n x (u32 id, u32 shuffle element size), a
 *     fill, then the chunks in C order of the grid: FILL + u64 count (a run of chunks never
 *     written), STORED + u64 file offset + u64 size + u32 filter mask, or ABORT (the walk
 *     failed there: a FAIL record follows).
 * A fill: u8 ZERO, VALUE + str (the value's bytes), or UNREADABLE + str (the error). */
enum { CKPT_H5R_NOTE = 1, CKPT_H5R_GROUP, CKPT_H5R_END, CKPT_H5R_VALUE, CKPT_H5R_ATTR, CKPT_H5R_DATASET,
       CKPT_H5R_DONE, CKPT_H5R_FAIL };
enum { CKPT_H5V_LIST = 1, CKPT_H5V_STR, CKPT_H5V_INT, CKPT_H5V_FLOAT, CKPT_H5V_BOOL };
enum { CKPT_H5L_CONTIGUOUS = 1, CKPT_H5L_COMPACT, CKPT_H5L_CHUNKED };
enum { CKPT_H5F_ZERO = 0, CKPT_H5F_VALUE, CKPT_H5F_UNREADABLE };
enum { CKPT_H5C_FILL = 0, CKPT_H5C_STORED, CKPT_H5C_ABORT };

/* A chunked dataset of more chunks than this is refused, and so is a file of more in all:
 * each is a tile of the engine's (about 200 bytes), and a few bytes of metadata can declare
 * a grid of any size. A million chunks of the smallest size h5py picks (8 KiB) is 8 GiB of
 * one tensor. */
#define CKPT_H5_MAX_CHUNKS ((uint64_t)1 << 20)
#define CKPT_H5_MAX_FILE_CHUNKS ((uint64_t)1 << 22)
/* Compact data lives in an object header (64 KiB at most): more is not a real file. */
#define CKPT_H5_MAX_COMPACT ((uint64_t)1 << 20)

/* The child's side of the pipe: records are buffered, and sent when the buffer fills or
 * when it has waited half a second, so that a walk that makes progress is seen to. A failed
 * write (this process is gone) ends the child. */
typedef struct ckpt_h5_out {
    int fd;
    size_t len;
    uint64_t sent_ns; /* when the buffer was last sent (CLOCK_MONOTONIC) */
    unsigned char buf[1 << 16];
} ckpt_h5_out;

void ckpt_hdf5__put_u8(ckpt_h5_out *o, unsigned v);
void ckpt_hdf5__put_u32(ckpt_h5_out *o, uint32_t v);
void ckpt_hdf5__put_u64(ckpt_h5_out *o, uint64_t v);
/* A str of n bytes (at most UINT32_MAX), or of a C string. */
void ckpt_hdf5__put_bytes(ckpt_h5_out *o, const void *data, size_t n);
void ckpt_hdf5__put_str(ckpt_h5_out *o, const char *s);
void ckpt_hdf5__put_note(ckpt_h5_out *o, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
/* A FAIL record of the thread's last error. */
void ckpt_hdf5__put_fail(ckpt_h5_out *o);
void ckpt_hdf5__flush(ckpt_h5_out *o);

/* What the child runs: the records of the file at `path` (mapped as `file`) into out. */
typedef void (*ckpt_h5_walk_fn)(const char *path, const ckpt_file *file, ckpt_h5_out *out);
/* The walk with libhdf5 (hdf5_read.c). */
void ckpt_hdf5__walk(const char *path, const ckpt_file *file, ckpt_h5_out *out);
/* Run the walk in a child process and collect its records: 0 and *records (malloc'd, *len
 * bytes), or CKPT_EFORMAT naming the file as corrupt when the child was killed by a signal,
 * failed, sent nothing for the time limit or sent too much; CKPT_EIO when no child could be
 * started. */
int ckpt_hdf5__run_walk(const char *path, const ckpt_file *file, unsigned char **records, size_t *len);
/* For tests and fuzz harnesses: the child runs fn instead of the walk (NULL: the walk), and
 * a child that sends nothing for limit_s seconds (0: the default, 10) is killed. */
void ckpt_hdf5__set_walk(ckpt_h5_walk_fn fn, unsigned limit_s);
/* The reader's tensors and value tree from a walk's records (hdf5_build.c). */
int ckpt_hdf5__build(ckpt_reader *r, const unsigned char *records, size_t len);

/* What building from the records keeps (hdf5_build.c, hdf5_build_data.c). */
typedef struct ckpt_h5_level {
    ckpt_value *dict;
    size_t prefix_len; /* of the path prefix of its members */
} ckpt_h5_level;

typedef struct ckpt_h5_build {
    ckpt_reader *r;
    ckpt_arena *arena;
    const ckpt_file *file;
    const char *path;
    const unsigned char *p, *end; /* the records not read yet */
    ckpt_h5_level *stack;         /* the open groups, the root first */
    size_t depth, cap;
    char *prefix;                 /* path of the current group's members: "" or "a/b/" */
    size_t prefix_cap;
    ckpt_value *attributes;       /* "__attributes__", made at the first attribute */
    /* bytes that are in no mapped range, to become one memory file, and the extents that
     * point into them (offset = where in `mem`) */
    unsigned char *mem;
    size_t mem_len, mem_cap;
    ckpt_extent **pending;
    size_t n_pending, cap_pending;
    uint64_t n_chunks; /* of the datasets built so far */
} ckpt_h5_build;

/* CKPT_EFORMAT: the records are not what a walk sends ("what"), the file named as corrupt. */
int ckpt_hdf5__malformed(const ckpt_h5_build *b, const char *what);
/* The next integer or str of the records: 0, or CKPT_EFORMAT when they end first. A str
 * points into the records. */
int ckpt_hdf5__get_u8(ckpt_h5_build *b, unsigned *v);
int ckpt_hdf5__get_u32(ckpt_h5_build *b, uint32_t *v);
int ckpt_hdf5__get_u64(ckpt_h5_build *b, uint64_t *v);
int ckpt_hdf5__get_bytes(ckpt_h5_build *b, const unsigned char **data, size_t *n);
/* The rest of a DATASET record as tensor `name` (in the arena): 0 and its index, 1 when the
 * walk failed in it (a FAIL record follows), or an error (hdf5_build_data.c). */
int ckpt_hdf5__build_dataset(ckpt_h5_build *b, const char *name, size_t *index);
/* One memory file for the bytes kept, once they are all known; extents pointed at it. */
int ckpt_hdf5__keep_in_memory(ckpt_h5_build *b);

/* What the walk's files share while the child walks a file; libhdf5 types, so not seen by
 * the fuzz harnesses. */
#ifdef CKPT_BUILD
#include <hdf5.h>

typedef struct ckpt_h5_walker {
    ckpt_h5_out *out;
    const ckpt_file *file;     /* the mapped input */
    const char *path;          /* the input, for messages */
    hid_t fid;
    uint64_t user_block;       /* bytes before the HDF5 data */
    int chunk_base;            /* chunk addresses are: 0 not known yet, 1 file offsets, 2 after
                                  the user block (HDF5 1.10 counts them from the superblock) */
    /* objects already read, by address: a second hard link reads nothing more */
    ckpt_u64map seen;
} ckpt_h5_walker;

/* Names and tag of a type described by ckpt_hdf5__describe_type. */
typedef struct ckpt_h5_names {
    char member[CKPT_H5_MAX_MEMBERS][64];
    char tag[256];
} ckpt_h5_names;

/* The file type the writer gives a tensor type (a new id, to close; -1 when there is none),
 * and the "dtype" attribute it needs (NULL for none) (hdf5_write_types.c). */
hid_t ckpt_hdf5__file_type(ckpt_dtype t, const char **attr);

/* Fill *out from type `tid` (string members point into *names). 0 or CKPT_EIO. */
int ckpt_hdf5__describe_type(hid_t tid, ckpt_h5_type *out, ckpt_h5_names *names);
/* The string attribute `name` of obj into buf[cap] (truncated); 1 when there is one, 0 when
 * not (or it is not a string). */
int ckpt_hdf5__string_attr(hid_t obj, const char *name, char *buf, size_t cap);
/* An ATTR record for every attribute of obj that is a value; `where` is its path ("/" for
 * the root group). 0 or an error. */
int ckpt_hdf5__attributes(ckpt_h5_walker *w, hid_t obj, const char *where);
/* A dataset that holds no numbers (strings) as a VALUE record under `key`: 1, or 0 when it
 * cannot be one (the caller notes it). */
int ckpt_hdf5__string_dataset(ckpt_h5_walker *w, hid_t d, const char *key);
/* A dataset of numbers as a DATASET record under `key`: 1, 0 when it holds no numbers, or an
 * error naming file and dataset (`path`). */
int ckpt_hdf5__dataset(ckpt_h5_walker *w, hid_t d, const char *key, const char *path);
#endif

#endif
