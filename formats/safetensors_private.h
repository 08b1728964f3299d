/* Shared by the safetensors reader, writer and header fuzzer: the header parser and the
 * dtype table. Not part of the public API. */
#ifndef CKPT_FORMATS_SAFETENSORS_PRIVATE_H
#define CKPT_FORMATS_SAFETENSORS_PRIVATE_H

#if !defined(CKPT_BUILD) && !defined(CKPT_FUZZ_SAFETENSORS)
#error "safetensors_private.h is internal to libckpt"
#endif

#include <ckpt/dtype.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/format.h>
#include <ckpt/sys/table.h>

/* The reference rejects longer headers (MAX_HEADER_SIZE). */
#define CKPT_ST_MAX_HEADER 100000000u

/* safetensors element types, in the order of the reference's Dtype enum: its writer sorts
 * tensors by this order (descending), so the values matter. */
typedef enum ckpt_st_dtype {
    CKPT_ST_BOOL = 0,
    CKPT_ST_F4,
    CKPT_ST_F6_E2M3,
    CKPT_ST_F6_E3M2,
    CKPT_ST_U8,
    CKPT_ST_I8,
    CKPT_ST_F8_E5M2,
    CKPT_ST_F8_E4M3,
    CKPT_ST_F8_E8M0,
    CKPT_ST_F8_E4M3FNUZ,
    CKPT_ST_F8_E5M2FNUZ,
    CKPT_ST_I16,
    CKPT_ST_U16,
    CKPT_ST_F16,
    CKPT_ST_BF16,
    CKPT_ST_I32,
    CKPT_ST_U32,
    CKPT_ST_F32,
    CKPT_ST_C64,
    CKPT_ST_F64,
    CKPT_ST_I64,
    CKPT_ST_U64,
    CKPT_ST_DTYPE_COUNT
} ckpt_st_dtype;

/* The header string of a safetensors type ("F32"). */
const char *ckpt_safetensors__dtype_string(ckpt_st_dtype t);
/* The library type of a safetensors type; CKPT_DTYPE_INVALID when the library has none. */
ckpt_dtype ckpt_safetensors__dtype_to_ckpt(ckpt_st_dtype t);
/* The safetensors type of a library type; -1 when safetensors has none. */
int ckpt_safetensors__dtype_from_ckpt(ckpt_dtype t);

/* One tensor of a parsed header. */
typedef struct ckpt_st_entry {
    const char *name;     /* borrowed from the parsed header */
    ckpt_st_dtype st_dtype;
    ckpt_dtype dtype;
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    uint64_t begin, end;  /* byte offsets relative to the data section */
} ckpt_st_entry;

typedef struct ckpt_st_meta {
    const char *key, *value; /* borrowed from the parsed header */
} ckpt_st_meta;

/* A parsed and fully validated file. Tensors are in the order their keys appear in the
 * header; has_meta is 0 when the header has no __metadata__ (or a null one). */
typedef struct ckpt_st_header {
    struct cJSON *json;     /* owns every string the entries point at */
    uint64_t header_len;    /* N, the JSON length */
    uint64_t data_offset;   /* 8 + N, where the data section starts */
    size_t n_entries;
    ckpt_st_entry *entries;
    int has_meta;
    size_t n_meta;
    ckpt_st_meta *meta;
} ckpt_st_header;

/* Parse and validate a whole safetensors file held in memory (the 8-byte length, the JSON
 * header and the data section) with every rule of the reference implementation. `path`
 * only names the file in messages. Errors: CKPT_EFORMAT for a malformed file,
 * CKPT_EUNSUPPORTED for a valid one this library cannot represent (e.g. F4 tensors),
 * CKPT_ENOMEM. On failure *out is left empty. */
int ckpt_safetensors__parse(ckpt_st_header *out, const char *path, const uint8_t *data, uint64_t size);
void ckpt_safetensors__header_dispose(ckpt_st_header *h);
/* The size of the safetensors file that data[0..size) begins, by its header alone: the
 * header's end plus the end of the data its tensors take. Sets *need (more than size) when
 * the header is not all there yet, else *file_size. The errors of ckpt_safetensors__parse
 * for a header already wrong. */
int ckpt_safetensors__size(const char *path, const uint8_t *data, uint64_t size, uint64_t *need, uint64_t *file_size);

/* A hash index over an array of names (borrowed), to find repeats and look names up. */
typedef struct ckpt_st_names {
    ckpt_strmap map; /* name -> its position */
} ckpt_st_names;

/* Index names[0..n). If a name repeats, *dup gets the position of its second occurrence
 * (else -1) and the index stays usable for the names before it. CKPT_ENOMEM on failure. */
int ckpt_safetensors__names_build(ckpt_st_names *ix, const char *const *names, size_t n, int64_t *dup);
/* Position of `name`, or -1. */
int64_t ckpt_safetensors__names_find(const ckpt_st_names *ix, const char *name);
void ckpt_safetensors__names_free(ckpt_st_names *ix);

/* What the strict syntax check learned that the JSON tree no longer shows: numbers are
 * doubles there, so "2.0", "2e0" or 9007199254740993 in a shape would pass unnoticed. */
typedef struct ckpt_st_syntax {
    size_t bad_member;     /* index of the first top-level member whose shape or data_offsets
                            * holds a number that is not a plain integer <= 2^53; SIZE_MAX if none */
    const char *bad_field; /* "shape" or "data_offsets" */
    int bad_above;         /* the number is a plain integer, only above 2^53 */
} ckpt_st_syntax;

/* Check s[0..n) against the JSON grammar exactly (RFC 8259: only the four whitespace
 * characters, no leading zeros, valid escapes and surrogate pairs, no raw control
 * characters, nesting at most 127 deep, nothing after the value) and fill *out. Errors:
 * CKPT_EFORMAT "<path>: safetensors: invalid JSON in <what>: <why> at byte <k>", or, for
 * valid JSON this library cannot hold (a \u0000 escape, a number literal over 63
 * characters), CKPT_EUNSUPPORTED. */
int ckpt_safetensors__json_check(const char *path, const char *what, const uint8_t *s, size_t n,
                                 ckpt_st_syntax *out);

/* Non-zero if s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points
 * above U+10FFFF). */
int ckpt_safetensors__utf8_valid(const uint8_t *s, size_t n);

/* The writer's hook (safetensors_write.c). */
int ckpt_safetensors__write_begin(ckpt_writer *w);

#endif
