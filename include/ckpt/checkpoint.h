/* Opening checkpoints of any supported format, and converting between formats. */
#ifndef CKPT_CHECKPOINT_H
#define CKPT_CHECKPOINT_H

#include "buf.h"
#include "dtype.h"
#include "tensor.h"
#include "value.h"

CKPT_BEGIN_DECL

/* An opened checkpoint: named tensors (lazy; nothing is read until asked) and the value
 * tree of everything else. Input files stay mapped until ckpt_close. */
typedef struct ckpt_ckpt ckpt_ckpt;

typedef struct ckpt_open_options {
    unsigned version;
    const char *format; /* a registered format name; NULL: every format bids on the input */
    int verify_crc;     /* check CRC-32 of zip records (reads every byte once at open) */
    /* version 2 */
    const char *tag;      /* checkpoint directories with tags (DeepSpeed): read this tag
                             directory instead of the one `latest` names; other formats ignore it */
    int optimizer_states; /* formats that consolidate sharded optimizers (DeepSpeed ZeRO): also
                             expose each parameter's optimizer state (Adam's exp_avg, exp_avg_sq)
                             as tensors "<param>.<state>" flagged CKPT_TENSOR_OPTIMIZER_STATE */
} ckpt_open_options;

/* Callers built against version 1 (no tag, no optimizer_states) are still accepted. */
#define CKPT_OPEN_OPTIONS_VERSION 2
#define CKPT_OPEN_OPTIONS_INIT { CKPT_OPEN_OPTIONS_VERSION, NULL, 0, NULL, 0 }

/* Open a file (or a directory / index file for sharded formats). Errors name the path and
 * the reason; CKPT_EFORMAT "unrecognized checkpoint format" when no format bids. */
CKPT_EXTERN(int) ckpt_open(ckpt_ckpt **out, const char *path, const ckpt_open_options *opts);
CKPT_EXTERN(void) ckpt_close(ckpt_ckpt *c);
/* A checkpoint whose bytes are an item of `outer`: `item` a CKPT_VAL_BYTES value of outer's tree
 * that lies in one of outer's input files (a Distributed Checkpoint's bytes item, which
 * megatron-core fills with torch.save archives), read in place, nothing copied. It is named
 * "<that file>, item '<name>'" in messages, belongs to outer and is closed with it; the same
 * item opened again gives the same checkpoint (not safe while another thread opens an item
 * of outer). Bytes that lie in no input file (built in memory) are refused, CKPT_EINVALID. */
CKPT_EXTERN(int) ckpt_open_item(const ckpt_ckpt **out, const ckpt_ckpt *outer, const ckpt_value *item,
                                const char *name, const ckpt_open_options *opts);

CKPT_EXTERN(const char *) ckpt_path(const ckpt_ckpt *c);
CKPT_EXTERN(const char *) ckpt_format_name(const ckpt_ckpt *c);
/* Total bytes of the input files on disk (a zstd-compressed one: its compressed bytes). */
CKPT_EXTERN(uint64_t) ckpt_input_size(const ckpt_ckpt *c);

CKPT_EXTERN(size_t) ckpt_tensor_count(const ckpt_ckpt *c);
/* Borrowed, valid until ckpt_close. */
CKPT_EXTERN(const ckpt_tensor *) ckpt_tensor_at(const ckpt_ckpt *c, size_t i);
CKPT_EXTERN(const ckpt_tensor *) ckpt_tensor_find(const ckpt_ckpt *c, const char *name);

/* The metadata tree with CKPT_VAL_TENSOR leaves indexing the tensor table; NULL for
 * formats without one (safetensors gives a dict of its tensors and __metadata__). */
CKPT_EXTERN(const ckpt_value *) ckpt_root(const ckpt_ckpt *c);

/* Things the reader wants a person to know ("legacy torch format", "reassembled split
 * tensor x from 3 parts"). */
CKPT_EXTERN(size_t) ckpt_note_count(const ckpt_ckpt *c);
CKPT_EXTERN(const char *) ckpt_note_at(const ckpt_ckpt *c, size_t i);

/* Every distinct pickle global the input references, in order of first appearance. */
typedef struct ckpt_global_ref {
    const char *module;
    const char *name;
    int known;        /* in the known set (ckpt_pickle_global_known) */
    const char *path; /* key path of its first use, "" for the root */
} ckpt_global_ref;

CKPT_EXTERN(size_t) ckpt_global_count(const ckpt_ckpt *c);
CKPT_EXTERN(const ckpt_global_ref *) ckpt_global_at(const ckpt_ckpt *c, size_t i);

/* Registered formats. */
#define CKPT_FORMAT_READ     0x01u
#define CKPT_FORMAT_WRITE    0x02u
#define CKPT_FORMAT_METADATA 0x04u /* the writer carries value trees read from its own format */
#define CKPT_FORMAT_VIEWS    0x08u /* the writer keeps shared storages and strided views */
#define CKPT_FORMAT_CRC      0x10u /* the writer needs CRC-32 of the data it places */
#define CKPT_FORMAT_BY_PATH  0x20u /* the writer's library opens the output itself, by path */
#define CKPT_FORMAT_ENCODES  0x40u /* the writer compresses the data itself (it places nothing) */

CKPT_EXTERN(size_t) ckpt_format_count(void);
/* Name of format i; *caps and *extensions (space separated, ".pt .pth") if non-NULL. */
CKPT_EXTERN(const char *) ckpt_format_at(size_t i, unsigned *caps, const char **extensions);
/* The format a path's extension names, or NULL. */
CKPT_EXTERN(const char *) ckpt_format_for_path(const char *path);
/* The format ckpt_open would read path with, chosen as it chooses (by the formats' bids on
 * the file's bytes or the directory's files), or NULL when none recognises it or it cannot
 * be read. Nothing is parsed past the bids: a format named here may still find the input
 * damaged. A directory that no format recognises may be a set (ckpt/set.h). */
CKPT_EXTERN(const char *) ckpt_format_detect(const char *path);
/* The canonical name of the registered format that a name ("torch"), an alias ("pytorch",
 * "st", "paddle") or an extension with or without its dot (".pdparams", "bin") names, or
 * NULL. Matching is exact and case-sensitive; names are tried first, then aliases, then
 * extensions. The result is a static string. */
CKPT_EXTERN(const char *) ckpt_format_find(const char *name_alias_or_ext);

/* Statistics over a tensor's values, computed in double precision in parallel. */
typedef struct ckpt_tensor_stats {
    double min, max, mean, std; /* over finite values; NaN when there are none */
    uint64_t count, nan, inf;
} ckpt_tensor_stats;

CKPT_EXTERN(int) ckpt_tensor_stats_compute(const ckpt_tensor *t, ckpt_tensor_stats *out);

/* What to do with pickle globals outside the known set. */
typedef enum ckpt_unknown_policy {
    CKPT_UNKNOWN_REFUSE = 0, /* fail with CKPT_EUNSAFE naming the global and its key path */
    CKPT_UNKNOWN_DROP,       /* write the tensors only */
    CKPT_UNKNOWN_KEEP        /* carry the objects through verbatim (unsafe for the consumer) */
} ckpt_unknown_policy;

typedef void (*ckpt_progress_fn)(uint64_t done, uint64_t total, void *payload);

/* How a format that compresses inside the file (HDF5 chunks) compresses. */
typedef enum ckpt_codec {
    CKPT_CODEC_NONE = 0,
    CKPT_CODEC_ZSTD, /* HDF5 filter 32015, as hdf5plugin registers it */
    CKPT_CODEC_GZIP  /* HDF5 deflate filter (1): a zlib stream */
} ckpt_codec;

typedef struct ckpt_convert_options {
    unsigned version;
    const char *format;          /* output format, as ckpt_format_find takes it; NULL: from the output
                                    path's extension */
    ckpt_dtype dtype;            /* cast floating-point tensors; CKPT_DTYPE_INVALID keeps them */
    ckpt_unknown_policy unknown;
    int protocol;                /* pickle protocol for formats that take one; 0: the format's default */
    uint64_t memory;             /* working-memory budget in bytes; 0: 512 MiB */
    int threads;                 /* 0: OpenMP's default */
    int overwrite;               /* replace an existing output file */
    ckpt_progress_fn progress;
    void *progress_payload;
    /* version 2 */
    ckpt_codec compress;         /* chunk compression, for formats that have it (HDF5) */
    int compress_level;          /* of that codec and of a .zst output's zstd; 0: the codec's
                                    default (zstd 3, gzip 6) */
} ckpt_convert_options;

#define CKPT_CONVERT_OPTIONS_VERSION 2
#define CKPT_CONVERT_OPTIONS_INIT \
    { CKPT_CONVERT_OPTIONS_VERSION, NULL, CKPT_DTYPE_INVALID, CKPT_UNKNOWN_REFUSE, 0, 0, 0, 0, NULL, NULL, \
      CKPT_CODEC_NONE, 0 }

typedef struct ckpt_convert_report {
    size_t tensors;
    uint64_t bytes_written; /* size of the output file */
    size_t dropped_values;  /* top-level non-tensor entries the output format could not hold */
    ckpt_buf notes;         /* one line per note, '\n'-separated */
} ckpt_convert_report;

/* Convert an opened checkpoint into out_path. Nothing appears under out_path unless the
 * whole output was written and synced. A non-NULL report is filled in either way: release
 * it with ckpt_convert_report_dispose after the call, whether it succeeded or failed. */
CKPT_EXTERN(int) ckpt_convert(const ckpt_ckpt *in, const char *out_path, const ckpt_convert_options *opts,
                              ckpt_convert_report *report);
CKPT_EXTERN(void) ckpt_convert_report_dispose(ckpt_convert_report *r);

CKPT_END_DECL

#endif
