/* Pickle internals: the reader's VM state shared by pickle_read.c (opcodes), pickle_vm.c
 * (stack, memo, value constructors), pickle_reduce.c (what REDUCE means without calling
 * anything) and pickle_text.c (string decoding); the writer's state shared by
 * pickle_write.c and pickle_write_ops.c; the known-globals names (pickle_globals.c). */
#ifndef CKPT_PICKLE_PRIVATE_H
#define CKPT_PICKLE_PRIVATE_H

#ifndef CKPT_BUILD
#error "pickle_private.h is private to the library"
#endif

#include <ckpt/sys/table.h>

#include <ckpt/buf.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/pickle.h>

/* Opcodes (Python's Lib/pickle.py names). */
enum {
    OP_MARK = '(', OP_STOP = '.', OP_POP = '0', OP_POP_MARK = '1', OP_DUP = '2', OP_FLOAT = 'F',
    OP_INT = 'I', OP_BININT = 'J', OP_BININT1 = 'K', OP_LONG = 'L', OP_BININT2 = 'M', OP_NONE = 'N',
    OP_PERSID = 'P', OP_BINPERSID = 'Q', OP_REDUCE = 'R', OP_STRING = 'S', OP_BINSTRING = 'T',
    OP_SHORT_BINSTRING = 'U', OP_UNICODE = 'V', OP_BINUNICODE = 'X', OP_APPEND = 'a', OP_BUILD = 'b',
    OP_GLOBAL = 'c', OP_DICT = 'd', OP_EMPTY_DICT = '}', OP_APPENDS = 'e', OP_GET = 'g', OP_BINGET = 'h',
    OP_INST = 'i', OP_LONG_BINGET = 'j', OP_LIST = 'l', OP_EMPTY_LIST = ']', OP_OBJ = 'o', OP_PUT = 'p',
    OP_BINPUT = 'q', OP_LONG_BINPUT = 'r', OP_SETITEM = 's', OP_TUPLE = 't', OP_EMPTY_TUPLE = ')',
    OP_SETITEMS = 'u', OP_BINFLOAT = 'G', OP_BINBYTES = 'B', OP_SHORT_BINBYTES = 'C',
    OP_PROTO = 0x80, OP_NEWOBJ = 0x81, OP_EXT1 = 0x82, OP_EXT2 = 0x83, OP_EXT4 = 0x84, OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8A,
    OP_LONG4 = 0x8B, OP_SHORT_BINUNICODE = 0x8C, OP_BINUNICODE8 = 0x8D, OP_BINBYTES8 = 0x8E,
    OP_EMPTY_SET = 0x8F, OP_ADDITEMS = 0x90, OP_FROZENSET = 0x91, OP_NEWOBJ_EX = 0x92,
    OP_STACK_GLOBAL = 0x93, OP_MEMOIZE = 0x94, OP_FRAME = 0x95, OP_BYTEARRAY8 = 0x96,
    OP_NEXT_BUFFER = 0x97, OP_READONLY_BUFFER = 0x98
};

typedef struct ckpt_pickle_vm {
    const uint8_t *data;
    size_t len;
    size_t pos;    /* next byte to read */
    size_t op_pos; /* offset of the opcode being run, for messages */
    const char *source;
    ckpt_arena *arena;
    ckpt_value **stack;
    size_t sp, stack_cap;
    size_t *marks; /* stack heights at each open MARK */
    size_t nmarks, marks_cap;
    /* The memo by index. Writers number entries densely, and an index may not exceed the
     * input size, so the array stays proportional to the input. */
    ckpt_value **memo;
    size_t memo_cap, memo_count, max_memo;
    /* Nodes that may have several parents: fetched again by GET or DUP, or copied into a
     * second container. Every other node has one parent, which the final walk relies on. */
    ckpt_u64map shared;
    unsigned max_depth;
    /* Budgets proportional to the input, so no input can make the tree much larger
     * than itself (memo references let a few bytes name a large value). */
    size_t nodes_left, items_left, copy_left;
    ckpt_u64map latin1_len; /* STR node -> decoded latin-1 length + 1, or 0 */
    ckpt_u64map key_hash;   /* long str/bytes and global key node -> hash */
} ckpt_pickle_vm;

/* ---- the VM's machinery (pickle_vm.c). Functions returning int give 0 or a negative
 * code with the error set; constructors return NULL with the error set. */

/* Set "<source>: pickle: <reason> at offset N" and return code. */
int ckpt_pickle__fail(ckpt_pickle_vm *vm, int code, const char *fmt, ...) CKPT_FORMAT_PRINTF(3, 4);
const char *ckpt_pickle__kind_name(const ckpt_value *v);
/* The code of the failure a constructor returning NULL has just recorded. */
static inline int ckpt_pickle__failure(void)
{
    int code = ckpt_error_last()->code;
    return code < 0 ? code : CKPT_ENOMEM;
}

/* Input: a check that n bytes remain, a little-endian unsigned argument, a length-prefixed
 * payload left in the input, a newline-terminated text argument. */
int ckpt_pickle__need(ckpt_pickle_vm *vm, uint64_t n, const char *what);
int ckpt_pickle__arg_le(ckpt_pickle_vm *vm, unsigned size, uint64_t *out, const char *what);
int ckpt_pickle__arg_bytes(ckpt_pickle_vm *vm, unsigned size, int is_signed, const uint8_t **p, size_t *n,
                           const char *what);
int ckpt_pickle__arg_line(ckpt_pickle_vm *vm, const uint8_t **p, size_t *n, const char *what);

/* Stack, marks and memo. ckpt_pickle__push takes a constructor's result directly and
 * passes its failure on. top_n gives the n values on top, all above the innermost MARK.
 * ckpt_pickle__share records that a node is now reachable a second way. */
int ckpt_pickle__push(ckpt_pickle_vm *vm, ckpt_value *v);
int ckpt_pickle__top_n(ckpt_pickle_vm *vm, size_t n, ckpt_value ***out);
int ckpt_pickle__pop_mark(ckpt_pickle_vm *vm, size_t *start);
/* Pop a MARK; *target is the value just below it (APPENDS, SETITEMS, ADDITEMS). */
int ckpt_pickle__mark_target(ckpt_pickle_vm *vm, size_t *start, ckpt_value **target);
int ckpt_pickle__memo_put(ckpt_pickle_vm *vm, uint64_t idx);
int ckpt_pickle__share(ckpt_pickle_vm *vm, const ckpt_value *v);
int ckpt_pickle__memo_get(ckpt_pickle_vm *vm, uint64_t idx);

/* Values, each counted against the budgets. */
ckpt_value *ckpt_pickle__node(ckpt_pickle_vm *vm, ckpt_value_kind kind);
int ckpt_pickle__charge_items(ckpt_pickle_vm *vm, size_t n);
ckpt_value *ckpt_pickle__seq(ckpt_pickle_vm *vm, ckpt_value_kind kind, ckpt_value **items, size_t n);
ckpt_value *ckpt_pickle__int(ckpt_pickle_vm *vm, int64_t i);
/* LONG1/LONG4 payload: INT when it fits in int64, else a BIGINT pointing into the input. */
ckpt_value *ckpt_pickle__long(ckpt_pickle_vm *vm, const uint8_t *p, size_t n);
ckpt_value *ckpt_pickle__object(ckpt_pickle_vm *vm, ckpt_object_how how, ckpt_value *callable, ckpt_value *args,
                                ckpt_value *kwargs);
int ckpt_pickle__push_bool(ckpt_pickle_vm *vm, int b);
int ckpt_pickle__push_float(ckpt_pickle_vm *vm, double d);
/* Decimal text of INT/LONG. */
int ckpt_pickle__push_text_int(ckpt_pickle_vm *vm, const uint8_t *p, size_t n);
/* BINUNICODE family: validated UTF-8, left in the input until the result is final. */
int ckpt_pickle__push_str_input(ckpt_pickle_vm *vm, const uint8_t *p, size_t n);
/* STRING, UNICODE (text arguments) or BINSTRING/SHORT_BINSTRING (latin-1 bytes), decoded
 * into an arena copy. */
int ckpt_pickle__push_decoded(ckpt_pickle_vm *vm, int op, const uint8_t *p, size_t n);
int ckpt_pickle__push_bytes(ckpt_pickle_vm *vm, const uint8_t *p, size_t n, uint32_t flags);
/* A GLOBAL node, flagged CKPT_VALUE_UNSAFE outside the known set. */
int ckpt_pickle__push_global(ckpt_pickle_vm *vm, const uint8_t *m, size_t mn, const uint8_t *nm, size_t nn);
/* APPEND(S) onto a list or an object's list_items, ADDITEMS (op) onto a set. */
int ckpt_pickle__add_items(ckpt_pickle_vm *vm, int op, ckpt_value *target, ckpt_value **items, size_t n);
/* SETITEM(S) / DICT pairs onto a dict or an object's dict_items. */
int ckpt_pickle__set_items(ckpt_pickle_vm *vm, ckpt_value *target, ckpt_value **kv, size_t n);

/* Replace REDUCE's callable(*args) by the node it stands for (pickle_reduce.c). */
int ckpt_pickle__reduce(ckpt_pickle_vm *vm, ckpt_value *callable, ckpt_value *args, ckpt_value **out);

/* ---- text (pickle_text.c). Decoders return 0, or a negative code with *why set to a
 * static reason for the caller's message. Copies go to the arena, NUL-terminated. */

/* 0 for valid UTF-8; CKPT_EFORMAT, or CKPT_EUNSUPPORTED for an encoded surrogate. The
 * scan also gives the number of code points and a bound on the largest byte, at most C3
 * exactly when all code points are below 256. */
int ckpt_pickle__utf8_scan(const uint8_t *p, size_t n, size_t *chars, unsigned *max_byte, const char **why);
int ckpt_pickle__utf8_check(const uint8_t *p, size_t n, const char **why);
/* Number of code points when `p` is UTF-8 of code points < 256 only, else SIZE_MAX. */
size_t ckpt_pickle__latin1_len(const uint8_t *p, size_t n);
/* Bytes taken as latin-1 code points, as UTF-8. */
int ckpt_pickle__latin1_to_utf8(ckpt_arena *a, const uint8_t *p, size_t n, char **out, size_t *out_len);
/* STRING argument: quoted, backslash-escaped py2 bytes, decoded as latin-1. */
int ckpt_pickle__decode_string(ckpt_arena *a, const uint8_t *p, size_t n, char **out, size_t *out_len,
                               const char **why);
/* UNICODE argument: raw-unicode-escape. */
int ckpt_pickle__decode_raw_unicode(ckpt_arena *a, const uint8_t *p, size_t n, char **out, size_t *out_len,
                                    const char **why);
/* Decimal integer text (INT, LONG with its trailing 'L'). 0 with *i when it fits int64,
 * 1 with a little-endian two's complement arena copy in *big, or a negative code. */
int ckpt_pickle__parse_int(ckpt_arena *a, const uint8_t *p, size_t n, int64_t *i, uint8_t **big,
                           size_t *big_len, const char **why);
int ckpt_pickle__parse_float(const uint8_t *p, size_t n, double *out, const char **why);
/* Non-negative decimal index (GET, PUT). */
int ckpt_pickle__parse_index(const uint8_t *p, size_t n, uint64_t *out, const char **why);

/* ---- names (pickle_globals.c) */

/* Map py2 spellings to py3 (`__builtin__.xrange` -> `builtins.range`) and back, as
 * Python's pickle compatibility tables do; pointers are static strings or unchanged. */
void ckpt_pickle__py3_name(const char **module, const char **name);
void ckpt_pickle__py2_name(const char **module, const char **name);

/* ---- the writer (pickle_write.c: lifecycle and value trees; pickle_write_ops.c:
 * opcodes). Internal functions return 0 or a negative code with the error set and do
 * not change the state; the public entry points turn a failure into CKPT_PICKLER_FAILED. */

enum { CKPT_PICKLER_NEW, CKPT_PICKLER_OPEN, CKPT_PICKLER_DONE, CKPT_PICKLER_FAILED };

typedef struct ckpt_pickler_hole {
    ckpt_pickle_hole h; /* first, so ckpt_pickler_hole_at can hand it out */
    size_t buf_pos;     /* where it sits among the buffered bytes */
} ckpt_pickler_hole;

typedef struct ckpt_pickler_named {
    char *key; /* "module\nname" */
    uint64_t memo;
} ckpt_pickler_named;

struct ckpt_pickler {
    int protocol, state;
    ckpt_pickler_tensor_fn tensor_fn;
    void *payload;
    ckpt_buf out; /* the stream without its holes */
    ckpt_pickler_hole *holes;
    size_t nholes, holes_cap;
    uint64_t hole_bytes;
    ckpt_u64map memo;    /* node -> memo index */
    ckpt_u64map by_name; /* hash of "module\nname" -> index into globals */
    ckpt_pickler_named *globals;
    size_t nglobals, globals_cap;
    uint64_t next_memo;
    uint64_t latin1_memo; /* memo index of the str 'latin1', or UINT64_MAX */
    size_t *marks;        /* buffer positions of MARKs opened with ckpt_pickler_mark */
    size_t nmarks, marks_cap;
    unsigned depth;
};

/* 0 when the pickler accepts output, else CKPT_EINVALID. */
int ckpt_pickler__check(const ckpt_pickler *p);
/* Mark the pickler failed and return rc. */
int ckpt_pickler__fail(ckpt_pickler *p, int rc);
int ckpt_pickler__op(ckpt_pickler *p, uint8_t op);
int ckpt_pickler__memo_get(ckpt_pickler *p, uint64_t idx);
/* Memoise the value on top of the stream's stack: *idx receives its entry. */
int ckpt_pickler__memo_put(ckpt_pickler *p, uint64_t *idx);
/* ... as node v, so later references to v fetch it. */
int ckpt_pickler__memo_node(ckpt_pickler *p, const ckpt_value *v);
int ckpt_pickler__memo_bind(ckpt_pickler *p, const ckpt_value *v, uint64_t idx);
/* ... as an intermediate nobody refers to again (CPython memoises those too). */
int ckpt_pickler__memo_temp(ckpt_pickler *p);
int ckpt_pickler__memoised(const ckpt_pickler *p, const ckpt_value *v);
/* v was memoised while its parts were written (a cycle): write `pop` `times` times
 * and fetch v from the memo instead. */
int ckpt_pickler__refetch(ckpt_pickler *p, const ckpt_value *v, uint8_t pop, size_t times);
int ckpt_pickler__put_int(ckpt_pickler *p, int64_t v);
/* LONG1/LONG4 with little-endian two's complement bytes. */
int ckpt_pickler__put_long(ckpt_pickler *p, const uint8_t *bytes, size_t n);
int ckpt_pickler__put_float(ckpt_pickler *p, double v);
int ckpt_pickler__put_str(ckpt_pickler *p, const char *s, size_t n);
/* GLOBAL/STACK_GLOBAL with the protocol's spelling, memoised by name. */
int ckpt_pickler__put_global(ckpt_pickler *p, const char *module, const char *name);
/* A bytes object: BYTES node v, or data/len when v is NULL; memoised, *idx gets the entry. */
int ckpt_pickler__put_bytes(ckpt_pickler *p, const ckpt_value *v, const uint8_t *data, size_t len, uint64_t *idx);

#endif
