/* For format implementers: the safe pickle reader and the pickle writer. */
#ifndef CKPT_SYS_PICKLE_H
#define CKPT_SYS_PICKLE_H

#include "../buf.h"
#include "../value.h"

CKPT_BEGIN_DECL

typedef struct ckpt_pickle_read_options {
    unsigned version;
    const char *source;   /* file name (and record) for error messages */
    size_t max_memo;      /* memo entries; 0 = as many as the input can hold */
    unsigned max_depth;   /* container nesting; 0 = default (512) */
} ckpt_pickle_read_options;

#define CKPT_PICKLE_READ_OPTIONS_INIT { 1, NULL, 0, 0 }

/* Run the pickle VM (protocols 0-5) over data[0..len) and return the value tree. Nothing is
 * ever called or imported: GLOBAL/STACK_GLOBAL become GLOBAL nodes, REDUCE/NEWOBJ OBJECT
 * nodes, BUILD/APPENDS/SETITEMS are recorded on the object they apply to, except that
 * plain lists, dicts, sets get their items directly and `_codecs.encode(str, 'latin1')`,
 * `builtins.set/frozenset/bytearray` and `collections.OrderedDict()` become BYTES, SET,
 * FROZENSET, BYTES and DICT(cls=OrderedDict) nodes. BYTES point into `data`, which must
 * outlive the tree. GLOBALs outside the known set get CKPT_VALUE_UNSAFE.
 * Every length is checked against the bytes left, memo and depth are capped, and the
 * stream must end with STOP: malformed input is CKPT_EFORMAT naming `source`, never a
 * crash. *end receives the offset just past STOP (pickles can be concatenated). */
CKPT_EXTERN(int) ckpt_pickle_read(ckpt_value **out, size_t *end, ckpt_arena *arena, const uint8_t *data,
                                  size_t len, const ckpt_pickle_read_options *opts);

/* Non-zero if "module.name" is in the known set: tensor rebuild functions, storages,
 * dtypes, containers, numpy array reconstruction, argparse.Namespace, and the enums and
 * classes that real Megatron, DeepSpeed and Transformer Engine checkpoints hold.
 * py2 names (`__builtin__`, `copy_reg`) are accepted for their py3 equivalents. */
CKPT_EXTERN(int) ckpt_pickle_global_known(const char *module, const char *name);

/* The writer. Output is a stream of bytes with holes: ranges whose content (tensor data)
 * the caller writes later at the hole's offset. Memo-shared nodes (the same ckpt_value*
 * reached twice) are emitted once and referenced with BINGET afterwards. */
typedef struct ckpt_pickler ckpt_pickler;

typedef struct ckpt_pickle_hole {
    uint64_t offset; /* from the start of the pickle stream */
    uint64_t size;
    void *tag;       /* caller's */
} ckpt_pickle_hole;

/* Emits a TENSOR node. Called by ckpt_pickler_value; use the primitives below. */
typedef int (*ckpt_pickler_tensor_fn)(ckpt_pickler *p, const ckpt_value *tensor, void *payload);

/* protocol 2 or 4. Protocol 2 writes bytes as `_codecs.encode(s, 'latin1')` and builtins as
 * `__builtin__`, as CPython does. */
CKPT_EXTERN(int) ckpt_pickler_new(ckpt_pickler **out, int protocol, ckpt_pickler_tensor_fn tensor_fn, void *payload);
CKPT_EXTERN(void) ckpt_pickler_free(ckpt_pickler *p);
CKPT_EXTERN(int) ckpt_pickler_protocol(const ckpt_pickler *p);

/* Whole value (PROTO ... STOP added by begin/end). */
CKPT_EXTERN(int) ckpt_pickler_begin(ckpt_pickler *p);   /* PROTO n */
CKPT_EXTERN(int) ckpt_pickler_value(ckpt_pickler *p, const ckpt_value *v);
CKPT_EXTERN(int) ckpt_pickler_end(ckpt_pickler *p);     /* STOP */

/* Primitives for tensor callbacks and hand-built pickles. */
CKPT_EXTERN(int) ckpt_pickler_op(ckpt_pickler *p, uint8_t opcode);
CKPT_EXTERN(int) ckpt_pickler_none(ckpt_pickler *p);
CKPT_EXTERN(int) ckpt_pickler_bool(ckpt_pickler *p, int v);
CKPT_EXTERN(int) ckpt_pickler_int(ckpt_pickler *p, int64_t v);
CKPT_EXTERN(int) ckpt_pickler_float(ckpt_pickler *p, double v);
CKPT_EXTERN(int) ckpt_pickler_str(ckpt_pickler *p, const char *s, size_t len);
CKPT_EXTERN(int) ckpt_pickler_bytes(ckpt_pickler *p, const void *data, size_t len);
/* GLOBAL (protocol 2) or STACK_GLOBAL (4), memoised so a repeated global is a BINGET. */
CKPT_EXTERN(int) ckpt_pickler_global(ckpt_pickler *p, const char *module, const char *name);
/* MARK, then TUPLE/TUPLE1-3 over the values pushed since: use _mark + pushes + _tuple. */
CKPT_EXTERN(int) ckpt_pickler_mark(ckpt_pickler *p);
CKPT_EXTERN(int) ckpt_pickler_tuple(ckpt_pickler *p, size_t n_since_mark);
/* A bytes object whose content is a hole of `size` bytes in the stream. Protocol >= 3:
 * SHORT_BINBYTES/BINBYTES/BINBYTES8 of `size` raw bytes. Protocol 2 (as CPython and paddle
 * write it): `_codecs.encode(<str>, 'latin1')`, where the str hole holds the UTF-8 form of
 * the bytes and `size` is that UTF-8 length, which the caller computes. */
CKPT_EXTERN(int) ckpt_pickler_bytes_hole(ckpt_pickler *p, uint64_t size, void *tag);

/* Results: total stream size and the holes, in order. The bytes between holes are
 * written with ckpt_pickler_emit. */
CKPT_EXTERN(uint64_t) ckpt_pickler_size(const ckpt_pickler *p);
CKPT_EXTERN(size_t) ckpt_pickler_hole_count(const ckpt_pickler *p);
CKPT_EXTERN(const ckpt_pickle_hole *) ckpt_pickler_hole_at(const ckpt_pickler *p, size_t i);
/* Call `write(offset, data, len)` for every non-hole run, in order. */
typedef int (*ckpt_pickler_write_fn)(uint64_t offset, const void *data, size_t len, void *payload);
CKPT_EXTERN(int) ckpt_pickler_emit(const ckpt_pickler *p, ckpt_pickler_write_fn write, void *payload);

CKPT_END_DECL

#endif
