/* The value tree: everything in a checkpoint that is not tensor data.
 *
 * A pickle is turned into this tree without calling anything. Containers keep their
 * order; objects built by REDUCE/NEWOBJ/BUILD keep their exact construction (callable,
 * arguments, state, appended items) so a writer can emit them again byte for byte in
 * meaning. The same node may be reachable twice (pickle memo references); walkers must
 * use ckpt_value_walk or their own visited marks, never plain recursion without a guard.
 *
 * Nodes live in the arena of whatever owns the tree (a checkpoint, a pickle result) and
 * are freed with it, never one by one. */
#ifndef CKPT_VALUE_H
#define CKPT_VALUE_H

#include "common.h"

CKPT_BEGIN_DECL

/* Append-only. */
typedef enum ckpt_value_kind {
    CKPT_VAL_NONE = 0,
    CKPT_VAL_BOOL,
    CKPT_VAL_INT,       /* fits in int64 */
    CKPT_VAL_BIGINT,    /* larger integer: little-endian two's complement bytes (LONG1/LONG4) */
    CKPT_VAL_FLOAT,
    CKPT_VAL_STR,       /* UTF-8, NUL-terminated copy; len excludes the NUL */
    CKPT_VAL_BYTES,     /* raw bytes, usually pointing into the mapped input; see CKPT_BYTES_* flags */
    CKPT_VAL_TUPLE,
    CKPT_VAL_LIST,
    CKPT_VAL_DICT,      /* ordered; optional cls (e.g. collections.OrderedDict) and BUILD state */
    CKPT_VAL_SET,
    CKPT_VAL_FROZENSET,
    CKPT_VAL_GLOBAL,    /* a reference "module.name"; never imported, never called */
    CKPT_VAL_OBJECT,    /* made by REDUCE or NEWOBJ, possibly followed by BUILD/APPENDS/SETITEMS */
    CKPT_VAL_PERSID,    /* a persistent id (torch storages); payload in u.persid */
    CKPT_VAL_TENSOR     /* interpreted by a format module: u.tensor.index into the owner's tensor table */
} ckpt_value_kind;

/* How an OBJECT was made. */
typedef enum ckpt_object_how {
    CKPT_OBJ_REDUCE = 0, /* callable(*args) */
    CKPT_OBJ_NEWOBJ,     /* cls.__new__(cls, *args) */
    CKPT_OBJ_NEWOBJ_EX   /* cls.__new__(cls, *args, **kwargs); kwargs in u.obj.kwargs */
} ckpt_object_how;

/* Flags on a value (ckpt_value.flags). */
#define CKPT_BYTES_LATIN1_UTF8 0x1u /* BYTES holds UTF-8 text of latin-1 code points (protocol-2
                                     * `_codecs.encode(s, 'latin1')`); u.bytes.decoded_len is the
                                     * byte count after decoding. Use ckpt_value_bytes_decode. */
#define CKPT_BYTES_BYTEARRAY   0x2u /* BYTES came from builtins.bytearray / BYTEARRAY8 */
#define CKPT_VALUE_UNSAFE      0x4u /* GLOBAL outside the known set (see ckpt_pickle_global_known) */

typedef struct ckpt_value ckpt_value;

typedef struct ckpt_value_seq {
    ckpt_value **items;
    size_t n, cap;
} ckpt_value_seq;

typedef struct ckpt_value_map_index ckpt_value_map_index;

typedef struct ckpt_value_map {
    ckpt_value **keys;
    ckpt_value **vals;
    size_t n, cap;
    /* Hash index over keys[0..n), maintained by ckpt_value_dict_set so that building a
     * large dict stays linear. Code that fills keys/vals by hand leaves it NULL (or
     * covering a prefix); it is extended on the next ckpt_value_dict_set. */
    ckpt_value_map_index *index;
} ckpt_value_map;

struct ckpt_value {
    ckpt_value_kind kind;
    uint32_t flags;
    union {
        int boolean;
        int64_t integer;
        double real;
        struct { const uint8_t *data; size_t len; } bigint;
        struct { const char *ptr; size_t len; } str;
        struct { const uint8_t *ptr; size_t len; size_t decoded_len; } bytes;
        ckpt_value_seq seq; /* TUPLE, LIST, SET, FROZENSET */
        struct {
            ckpt_value_map map;
            ckpt_value *cls;   /* NULL for a plain dict, else the GLOBAL it was made from */
            ckpt_value *state; /* BUILD argument, or NULL */
        } dict;
        struct { const char *module; const char *name; } global;
        struct {
            ckpt_object_how how;
            ckpt_value *callable; /* GLOBAL (or any value, for NEWOBJ on an arbitrary class) */
            ckpt_value *args;     /* TUPLE */
            ckpt_value *kwargs;   /* DICT for NEWOBJ_EX, else NULL */
            ckpt_value *state;    /* BUILD argument, or NULL */
            ckpt_value_seq list_items; /* APPEND/APPENDS after creation */
            ckpt_value_map dict_items; /* SETITEM(S) after creation */
        } obj;
        struct { ckpt_value *pid; } persid;
        struct {
            size_t index;       /* into the owner's tensor table */
            ckpt_value *source; /* the construction it was interpreted from (kept for inspect), or NULL */
        } tensor;
    } u;
};

/* A bump allocator for value nodes, strings and small arrays. */
typedef struct ckpt_arena ckpt_arena;

CKPT_EXTERN(int) ckpt_arena_new(ckpt_arena **out);
CKPT_EXTERN(void) ckpt_arena_free(ckpt_arena *a);
/* Zeroed, 16-byte aligned memory; NULL and a set error on overflow/OOM. */
CKPT_EXTERN(void *) ckpt_arena_alloc(ckpt_arena *a, size_t size);
CKPT_EXTERN(char *) ckpt_arena_strndup(ckpt_arena *a, const char *s, size_t len);
CKPT_EXTERN(size_t) ckpt_arena_used(const ckpt_arena *a);

/* Constructors (NULL on OOM, with the error set). */
CKPT_EXTERN(ckpt_value *) ckpt_value_new(ckpt_arena *a, ckpt_value_kind kind);
CKPT_EXTERN(ckpt_value *) ckpt_value_new_int(ckpt_arena *a, int64_t v);
CKPT_EXTERN(ckpt_value *) ckpt_value_new_float(ckpt_arena *a, double v);
CKPT_EXTERN(ckpt_value *) ckpt_value_new_bool(ckpt_arena *a, int v);
CKPT_EXTERN(ckpt_value *) ckpt_value_new_str(ckpt_arena *a, const char *s, size_t len);
CKPT_EXTERN(ckpt_value *) ckpt_value_new_global(ckpt_arena *a, const char *module, const char *name);
CKPT_EXTERN(ckpt_value *) ckpt_value_new_tensor(ckpt_arena *a, size_t index);
/* Append to a TUPLE/LIST/SET/FROZENSET, or to an OBJECT's list_items. */
CKPT_EXTERN(int) ckpt_value_append(ckpt_arena *a, ckpt_value *seq, ckpt_value *item);
/* Add a key/value to a DICT (or an OBJECT's dict_items). A key equal to an existing one
 * replaces that entry's value in place and keeps the first key, as Python does: str and
 * bytes compare by content, int/bool/float by numeric value (1 == True == 1.0), None
 * equals None, globals by module and name, and other kinds (tuples included) only by
 * identity. */
CKPT_EXTERN(int) ckpt_value_dict_set(ckpt_arena *a, ckpt_value *dict, ckpt_value *key, ckpt_value *val);

/* Lookups. ckpt_value_dict_get finds a str key in a DICT; NULL if absent. */
CKPT_EXTERN(ckpt_value *) ckpt_value_dict_get(const ckpt_value *dict, const char *key);
CKPT_EXTERN(int) ckpt_value_is_str(const ckpt_value *v, const char *s);
/* py2 module names (`__builtin__`, `copy_reg`) match their py3 equivalents. */
CKPT_EXTERN(int) ckpt_value_is_global(const ckpt_value *v, const char *module, const char *name);
/* Length in bytes of a BYTES value after decoding (decoded_len or len). */
CKPT_EXTERN(size_t) ckpt_value_bytes_size(const ckpt_value *v);
/* Copy `len` decoded bytes starting at decoded offset `off` into dst. */
CKPT_EXTERN(int) ckpt_value_bytes_decode(const ckpt_value *v, size_t off, size_t len, void *dst);

/* Depth-first walk visiting each distinct node once (memo-shared nodes and cycles are
 * visited once). The callback gets the node and its key path from the root, keys joined
 * with '/' (dict keys as text, sequence positions as decimal indices); returning non-zero
 * stops the walk and is returned. Fails with CKPT_EFORMAT beyond `max_depth` levels. */
typedef int (*ckpt_value_visit_fn)(const ckpt_value *v, const char *path, void *payload);
CKPT_EXTERN(int) ckpt_value_walk(const ckpt_value *root, unsigned max_depth, ckpt_value_visit_fn fn,
                                 void *payload);

/* Copy a tree into arena a, node by node: memo-shared nodes stay shared and cycles stay
 * cycles. Strings, bytes and big integers are not copied (the copy borrows them: keep the
 * source alive). Each TENSOR leaf is handed to `tensor_fn`, which says which index the copy
 * gets (an output's tensor table is not the input's); with tensor_fn NULL indices are kept.
 * A non-zero return from tensor_fn stops the copy and is returned. */
typedef int (*ckpt_value_tensor_fn)(const ckpt_value *leaf, size_t *index, void *payload);
CKPT_EXTERN(int) ckpt_value_clone(ckpt_arena *a, const ckpt_value *v, ckpt_value_tensor_fn tensor_fn, void *payload,
                                  ckpt_value **out);

/* One-line human rendering, at most `cap` bytes including the NUL (truncated with "...").
 * Used by inspect; tensors print as <tensor #i>. */
CKPT_EXTERN(size_t) ckpt_value_repr(const ckpt_value *v, char *buf, size_t cap);

CKPT_END_DECL

#endif
