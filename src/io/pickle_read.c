/* The safe pickle VM: protocols 0-5, one iterative loop over the opcodes, building a
 * value tree and never calling anything.
 *
 * Strings read with BINUNICODE/SHORT_BINUNICODE/BINUNICODE8 first point into the input;
 * only those still reachable from the result at STOP are copied into the arena. A
 * multi-gigabyte `_codecs.encode(str, 'latin1')` payload (bytes in a protocol-2 pickle)
 * therefore becomes a zero-copy BYTES value and is never duplicated.
 *
 * BUILD records its argument on the object; a second BUILD on the same object replaces
 * the recorded state (Python would call __setstate__ again or merge __dict__; real
 * pickles never BUILD an object twice). INST and OBJ become REDUCE objects, or NEWOBJ
 * ones when they pass no arguments (Python then only calls __new__ on a class).
 * MARKs nest at most max_depth deep, and the finished tree is walked once with the same
 * limit, so consumers may recurse over what this returns. That walk only needs to
 * remember the nodes that can have several parents, which the VM knows: those fetched
 * again by GET or DUP, or copied into a second container. */
#include "pickle_private.h"
#include "../core/value_private.h"

#include <ckpt/sys/io.h>

#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_DEPTH 512

/* INST and OBJ: cls(*args), or cls.__new__(cls) without arguments. */
static int instantiate(ckpt_pickle_vm *vm, ckpt_value *cls, size_t start)
{
    ckpt_value *args = ckpt_pickle__seq(vm, CKPT_VAL_TUPLE, vm->stack + start, vm->sp - start), *v = NULL;
    int rc;

    vm->sp = start;
    if (!args)
        return ckpt_pickle__failure();
    if (args->u.seq.n == 0)
        return ckpt_pickle__push(vm, ckpt_pickle__object(vm, CKPT_OBJ_NEWOBJ, cls, args, NULL));
    if ((rc = ckpt_pickle__reduce(vm, cls, args, &v)) != 0)
        return rc;
    return ckpt_pickle__push(vm, v);
}

static const char *line_name(int op)
{
    switch (op) {
    case OP_INT: return "INT";
    case OP_LONG: return "LONG";
    case OP_FLOAT: return "FLOAT";
    case OP_STRING: return "STRING";
    case OP_UNICODE: return "UNICODE";
    case OP_GET: return "GET";
    case OP_PUT: return "PUT";
    case OP_PERSID: return "PERSID";
    case OP_GLOBAL: return "GLOBAL";
    default: return "INST";
    }
}

/* Opcodes with newline-terminated text arguments (protocol 0). */
static int op_line(ckpt_pickle_vm *vm, int op)
{
    const uint8_t *p, *q;
    size_t n, m;
    const char *why = NULL;
    uint64_t idx = 0;
    double d;
    int rc;
    ckpt_value *v;

    if ((rc = ckpt_pickle__arg_line(vm, &p, &n, line_name(op))) != 0)
        return rc;
    switch (op) {
    case OP_INT:
        if (n == 2 && p[0] == '0' && (p[1] == '0' || p[1] == '1'))
            return ckpt_pickle__push_bool(vm, p[1] == '1');
        return ckpt_pickle__push_text_int(vm, p, n);
    case OP_LONG:
        return ckpt_pickle__push_text_int(vm, p, n);
    case OP_FLOAT:
        if ((rc = ckpt_pickle__parse_float(p, n, &d, &why)) != 0)
            return ckpt_pickle__fail(vm, rc, "%s", why);
        return ckpt_pickle__push_float(vm, d);
    case OP_STRING: case OP_UNICODE:
        return ckpt_pickle__push_decoded(vm, op, p, n);
    case OP_GET: case OP_PUT:
        if ((rc = ckpt_pickle__parse_index(p, n, &idx, &why)) != 0)
            return ckpt_pickle__fail(vm, rc, "%s", why);
        return op == OP_GET ? ckpt_pickle__memo_get(vm, idx) : ckpt_pickle__memo_put(vm, idx);
    case OP_PERSID:
        for (m = 0; m < n; m++)
            if (p[m] >= 0x80)
                return ckpt_pickle__fail(vm, CKPT_EFORMAT, "PERSID argument is not ASCII");
        if ((rc = ckpt_pickle__push_decoded(vm, OP_BINSTRING, p, n)) != 0)
            return rc;
        if (!(v = ckpt_pickle__node(vm, CKPT_VAL_PERSID)))
            return ckpt_pickle__failure();
        v->u.persid.pid = vm->stack[vm->sp - 1];
        vm->stack[vm->sp - 1] = v;
        return 0;
    default: /* GLOBAL, INST: a second line holds the name */
        if ((rc = ckpt_pickle__arg_line(vm, &q, &m, line_name(op))) != 0 ||
            (rc = ckpt_pickle__push_global(vm, p, n, q, m)) != 0)
            return rc;
        if (op == OP_GLOBAL)
            return 0;
        v = vm->stack[--vm->sp];
        if ((rc = ckpt_pickle__pop_mark(vm, &n)) != 0)
            return rc;
        return instantiate(vm, v, n);
    }
}

static const char *sized_name(int op)
{
    switch (op) {
    case OP_BINSTRING: return "BINSTRING";
    case OP_SHORT_BINSTRING: return "SHORT_BINSTRING";
    case OP_BINUNICODE: return "BINUNICODE";
    case OP_SHORT_BINUNICODE: return "SHORT_BINUNICODE";
    case OP_BINUNICODE8: return "BINUNICODE8";
    case OP_BINBYTES: return "BINBYTES";
    case OP_SHORT_BINBYTES: return "SHORT_BINBYTES";
    case OP_BINBYTES8: return "BINBYTES8";
    case OP_BYTEARRAY8: return "BYTEARRAY8";
    case OP_LONG1: return "LONG1";
    default: return "LONG4";
    }
}

/* Opcodes with a length-prefixed payload that stays in the input. */
static int op_sized(ckpt_pickle_vm *vm, int op)
{
    const uint8_t *p;
    size_t n;
    unsigned size;
    int rc;

    switch (op) {
    case OP_SHORT_BINSTRING: case OP_SHORT_BINUNICODE: case OP_SHORT_BINBYTES: case OP_LONG1:
        size = 1;
        break;
    case OP_BINUNICODE8: case OP_BINBYTES8: case OP_BYTEARRAY8:
        size = 8;
        break;
    default:
        size = 4;
        break;
    }
    if ((rc = ckpt_pickle__arg_bytes(vm, size, op == OP_BINSTRING || op == OP_LONG4, &p, &n, sized_name(op))) != 0)
        return rc;
    switch (op) {
    case OP_LONG1: case OP_LONG4:
        return ckpt_pickle__push(vm, ckpt_pickle__long(vm, p, n));
    case OP_BINSTRING: case OP_SHORT_BINSTRING:
        return ckpt_pickle__push_decoded(vm, op, p, n);
    case OP_BINUNICODE: case OP_SHORT_BINUNICODE: case OP_BINUNICODE8:
        return ckpt_pickle__push_str_input(vm, p, n);
    default:
        return ckpt_pickle__push_bytes(vm, p, n, op == OP_BYTEARRAY8 ? CKPT_BYTES_BYTEARRAY : 0);
    }
}

/* Opcodes that pop a MARK. */
static int op_marked(ckpt_pickle_vm *vm, int op)
{
    ckpt_value *v = NULL;
    size_t start;
    int rc;

    if (op == OP_APPENDS || op == OP_SETITEMS || op == OP_ADDITEMS) {
        if ((rc = ckpt_pickle__mark_target(vm, &start, &v)) != 0)
            return rc;
        rc = op == OP_SETITEMS ? ckpt_pickle__set_items(vm, v, vm->stack + start, vm->sp - start)
                               : ckpt_pickle__add_items(vm, op, v, vm->stack + start, vm->sp - start);
        vm->sp = start;
        return rc;
    }
    if ((rc = ckpt_pickle__pop_mark(vm, &start)) != 0)
        return rc;
    switch (op) {
    case OP_POP_MARK:
        vm->sp = start;
        return 0;
    case OP_OBJ:
        if (vm->sp == start)
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "OBJ without a class");
        if ((rc = instantiate(vm, vm->stack[start], start + 1)) != 0)
            return rc;
        /* The new object replaces its class, below it on the stack. */
        vm->stack[start] = vm->stack[vm->sp - 1];
        vm->sp = start + 1;
        return 0;
    case OP_DICT:
        if (!(v = ckpt_pickle__node(vm, CKPT_VAL_DICT)))
            return ckpt_pickle__failure();
        rc = ckpt_pickle__set_items(vm, v, vm->stack + start, vm->sp - start);
        break;
    default:
        v = ckpt_pickle__seq(vm, op == OP_LIST ? CKPT_VAL_LIST : op == OP_TUPLE ? CKPT_VAL_TUPLE : CKPT_VAL_FROZENSET,
                             vm->stack + start, vm->sp - start);
        rc = v ? 0 : ckpt_pickle__failure();
        break;
    }
    vm->sp = start;
    return rc ? rc : ckpt_pickle__push(vm, v);
}

static int op_stack(ckpt_pickle_vm *vm, int op)
{
    ckpt_value **t = NULL, *v = NULL;
    size_t n;
    int rc;

    switch (op) {
    case OP_MARK:
        if (vm->nmarks >= vm->max_depth)
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "MARKs nested deeper than %u", vm->max_depth);
        if (vm->nmarks == vm->marks_cap) {
            size_t cap = vm->marks_cap ? vm->marks_cap * 2 : 16, *m = realloc(vm->marks, cap * sizeof *m);
            if (!m)
                return ckpt_error_oom();
            vm->marks = m;
            vm->marks_cap = cap;
        }
        vm->marks[vm->nmarks++] = vm->sp;
        return 0;
    case OP_POP:
        /* As CPython: POP right at a MARK discards the MARK. */
        if (vm->nmarks && vm->marks[vm->nmarks - 1] == vm->sp) {
            vm->nmarks--;
            return 0;
        }
        if ((rc = ckpt_pickle__top_n(vm, 1, &t)) == 0)
            vm->sp--;
        return rc;
    case OP_DUP:
        if ((rc = ckpt_pickle__top_n(vm, 1, &t)) != 0 || (rc = ckpt_pickle__share(vm, t[0])) != 0)
            return rc;
        return ckpt_pickle__push(vm, t[0]);
    case OP_TUPLE1: case OP_TUPLE2: case OP_TUPLE3:
        n = (size_t)(op - OP_TUPLE1 + 1);
        if ((rc = ckpt_pickle__top_n(vm, n, &t)) != 0)
            return rc;
        v = ckpt_pickle__seq(vm, CKPT_VAL_TUPLE, t, n);
        vm->sp -= n;
        return ckpt_pickle__push(vm, v);
    case OP_APPEND: case OP_SETITEM:
        n = op == OP_APPEND ? 1 : 2;
        if ((rc = ckpt_pickle__top_n(vm, n + 1, &t)) != 0)
            return rc;
        if (op == OP_APPEND)
            rc = ckpt_pickle__add_items(vm, op, t[0], t + 1, 1);
        else
            rc = ckpt_pickle__set_items(vm, t[0], t + 1, 2);
        vm->sp -= n;
        return rc;
    case OP_STACK_GLOBAL:
        if ((rc = ckpt_pickle__top_n(vm, 2, &t)) != 0)
            return rc;
        if (t[0]->kind != CKPT_VAL_STR || t[1]->kind != CKPT_VAL_STR)
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "STACK_GLOBAL needs two str, got %s and %s",
                                     ckpt_pickle__kind_name(t[0]), ckpt_pickle__kind_name(t[1]));
        vm->sp -= 2;
        return ckpt_pickle__push_global(vm, (const uint8_t *)t[0]->u.str.ptr, t[0]->u.str.len,
                                        (const uint8_t *)t[1]->u.str.ptr, t[1]->u.str.len);
    case OP_REDUCE: case OP_NEWOBJ:
        if ((rc = ckpt_pickle__top_n(vm, 2, &t)) != 0)
            return rc;
        if (t[1]->kind != CKPT_VAL_TUPLE)
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "%s arguments are a %s, not a tuple",
                                     op == OP_REDUCE ? "REDUCE" : "NEWOBJ", ckpt_pickle__kind_name(t[1]));
        if (op == OP_NEWOBJ)
            v = ckpt_pickle__object(vm, CKPT_OBJ_NEWOBJ, t[0], t[1], NULL);
        else if ((rc = ckpt_pickle__reduce(vm, t[0], t[1], &v)) != 0)
            return rc;
        vm->sp -= 2;
        return ckpt_pickle__push(vm, v);
    case OP_NEWOBJ_EX:
        if ((rc = ckpt_pickle__top_n(vm, 3, &t)) != 0)
            return rc;
        if (t[1]->kind != CKPT_VAL_TUPLE || t[2]->kind != CKPT_VAL_DICT)
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "NEWOBJ_EX needs a tuple and a dict");
        v = ckpt_pickle__object(vm, CKPT_OBJ_NEWOBJ_EX, t[0], t[1], t[2]);
        vm->sp -= 3;
        return ckpt_pickle__push(vm, v);
    case OP_BUILD:
        if ((rc = ckpt_pickle__top_n(vm, 2, &t)) != 0)
            return rc;
        if (t[0]->kind == CKPT_VAL_OBJECT)
            t[0]->u.obj.state = t[1];
        else if (t[0]->kind == CKPT_VAL_DICT)
            t[0]->u.dict.state = t[1];
        else
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "BUILD on a %s", ckpt_pickle__kind_name(t[0]));
        vm->sp--;
        return 0;
    case OP_BINPERSID:
        if ((rc = ckpt_pickle__top_n(vm, 1, &t)) != 0 || !(v = ckpt_pickle__node(vm, CKPT_VAL_PERSID)))
            return rc ? rc : ckpt_pickle__failure();
        v->u.persid.pid = t[0];
        t[0] = v;
        return 0;
    default: /* MEMOIZE */
        return ckpt_pickle__memo_put(vm, vm->memo_count);
    }
}

static int op_empty(ckpt_pickle_vm *vm, int op)
{
    static const ckpt_value_kind kinds[] = { CKPT_VAL_NONE, CKPT_VAL_LIST, CKPT_VAL_DICT, CKPT_VAL_TUPLE,
                                             CKPT_VAL_SET };
    int i = op == OP_NONE ? 0 : op == OP_EMPTY_LIST ? 1 : op == OP_EMPTY_DICT ? 2 : op == OP_EMPTY_TUPLE ? 3 : 4;
    return ckpt_pickle__push(vm, ckpt_pickle__node(vm, kinds[i]));
}

static int op_binary(ckpt_pickle_vm *vm, int op)
{
    uint64_t u = 0, bits = 0;
    double d;
    int rc, i;

    switch (op) {
    case OP_PROTO:
        if ((rc = ckpt_pickle__arg_le(vm, 1, &u, "PROTO")) != 0)
            return rc;
        if (u > 5)
            return ckpt_pickle__fail(vm, CKPT_EUNSUPPORTED, "protocol %u is newer than 5", (unsigned)u);
        return 0;
    case OP_FRAME:
        /* Frames only group opcodes for buffering; the length must still be honest. */
        if ((rc = ckpt_pickle__arg_le(vm, 8, &u, "FRAME")) != 0)
            return rc;
        return ckpt_pickle__need(vm, u, "FRAME");
    case OP_BININT: case OP_BININT1: case OP_BININT2:
        if ((rc = ckpt_pickle__arg_le(vm, op == OP_BININT ? 4 : op == OP_BININT1 ? 1 : 2, &u, "BININT")) != 0)
            return rc;
        return ckpt_pickle__push(vm, ckpt_pickle__int(vm, op == OP_BININT ? (int64_t)(int32_t)(uint32_t)u
                                                                          : (int64_t)u));
    case OP_BINFLOAT:
        if ((rc = ckpt_pickle__need(vm, 8, "BINFLOAT")) != 0)
            return rc;
        for (i = 0; i < 8; i++)
            bits = bits << 8 | vm->data[vm->pos + (size_t)i];
        vm->pos += 8;
        memcpy(&d, &bits, sizeof d);
        return ckpt_pickle__push_float(vm, d);
    default: /* BINGET, LONG_BINGET, BINPUT, LONG_BINPUT */
        if ((rc = ckpt_pickle__arg_le(vm, op == OP_BINGET || op == OP_BINPUT ? 1 : 4, &u, "memo index")) != 0)
            return rc;
        return op == OP_BINGET || op == OP_LONG_BINGET ? ckpt_pickle__memo_get(vm, u) : ckpt_pickle__memo_put(vm, u);
    }
}

static int run(ckpt_pickle_vm *vm, ckpt_value **out, size_t *end)
{
    int rc, op;

    for (;;) {
        if (vm->pos >= vm->len)
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "data ends before STOP");
        vm->op_pos = vm->pos;
        op = vm->data[vm->pos++];
        switch (op) {
        case OP_STOP:
            if (vm->nmarks || vm->sp != 1)
                return ckpt_pickle__fail(vm, CKPT_EFORMAT, "STOP with %zu values and %zu MARKs on the stack",
                                         vm->sp, vm->nmarks);
            *out = vm->stack[0];
            *end = vm->pos;
            return 0;
        case OP_INT: case OP_LONG: case OP_FLOAT: case OP_STRING: case OP_UNICODE: case OP_GET: case OP_PUT:
        case OP_PERSID: case OP_GLOBAL: case OP_INST:
            rc = op_line(vm, op);
            break;
        case OP_BINSTRING: case OP_SHORT_BINSTRING: case OP_BINUNICODE: case OP_SHORT_BINUNICODE:
        case OP_BINUNICODE8: case OP_BINBYTES: case OP_SHORT_BINBYTES: case OP_BINBYTES8: case OP_BYTEARRAY8:
        case OP_LONG1: case OP_LONG4:
            rc = op_sized(vm, op);
            break;
        case OP_POP_MARK: case OP_LIST: case OP_TUPLE: case OP_DICT: case OP_FROZENSET: case OP_APPENDS:
        case OP_SETITEMS: case OP_ADDITEMS: case OP_OBJ:
            rc = op_marked(vm, op);
            break;
        case OP_MARK: case OP_POP: case OP_DUP: case OP_TUPLE1: case OP_TUPLE2: case OP_TUPLE3: case OP_APPEND:
        case OP_SETITEM: case OP_STACK_GLOBAL: case OP_REDUCE: case OP_NEWOBJ: case OP_NEWOBJ_EX: case OP_BUILD:
        case OP_BINPERSID: case OP_MEMOIZE:
            rc = op_stack(vm, op);
            break;
        case OP_NONE: case OP_EMPTY_LIST: case OP_EMPTY_DICT: case OP_EMPTY_TUPLE: case OP_EMPTY_SET:
            rc = op_empty(vm, op);
            break;
        case OP_NEWTRUE: case OP_NEWFALSE:
            rc = ckpt_pickle__push_bool(vm, op == OP_NEWTRUE);
            break;
        case OP_PROTO: case OP_FRAME: case OP_BININT: case OP_BININT1: case OP_BININT2: case OP_BINFLOAT:
        case OP_BINGET: case OP_LONG_BINGET: case OP_BINPUT: case OP_LONG_BINPUT:
            rc = op_binary(vm, op);
            break;
        case OP_EXT1: case OP_EXT2: case OP_EXT4:
            return ckpt_pickle__fail(vm, CKPT_EUNSUPPORTED, "extension registry codes (EXT1/2/4) are not supported");
        case OP_NEXT_BUFFER: case OP_READONLY_BUFFER:
            return ckpt_pickle__fail(vm, CKPT_EUNSUPPORTED, "out-of-band buffers (protocol 5) are not supported");
        default:
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "unknown opcode 0x%02x", (unsigned)op);
        }
        if (rc)
            return rc;
    }
}

static int is_shared(const ckpt_value *v, void *payload)
{
    const ckpt_pickle_vm *vm = payload;
    return ckpt_u64map_get(&vm->shared, ckpt_u64map_ptrkey(v), NULL);
}

/* Copy strings that still point into the input; the tree is the VM's own, so the
 * walk's const view may be dropped. */
static int finish_node(const ckpt_value *cv, const char *path, void *payload)
{
    const ckpt_pickle_vm *vm = payload;
    ckpt_value *v = (ckpt_value *)(uintptr_t)cv;
    uintptr_t p, lo = (uintptr_t)vm->data;
    char *copy;

    (void)path;
    if (v->kind != CKPT_VAL_STR)
        return 0;
    p = (uintptr_t)v->u.str.ptr;
    if (p < lo || p > lo + vm->len)
        return 0;
    if (!(copy = ckpt_arena_strndup(vm->arena, v->u.str.ptr, v->u.str.len)))
        return CKPT_ENOMEM;
    v->u.str.ptr = copy;
    return 0;
}

static size_t budget(size_t len, size_t k, size_t c)
{
    return len > (SIZE_MAX - c) / k ? SIZE_MAX : len * k + c;
}

typedef struct guarded_run {
    ckpt_pickle_vm *vm;
    ckpt_value *root;
    size_t stop;
} guarded_run;

static int run_and_finish(void *arg)
{
    guarded_run *g = arg;
    int rc = run(g->vm, &g->root, &g->stop);

    if (rc == 0 && (rc = ckpt_value__walk(g->root, g->vm->max_depth, is_shared, finish_node, g->vm)) != 0)
        ckpt_error_prefix("%s: pickle", g->vm->source);
    return rc;
}

int ckpt_pickle_read(ckpt_value **out, size_t *end, ckpt_arena *arena, const uint8_t *data, size_t len,
                     const ckpt_pickle_read_options *opts)
{
    ckpt_pickle_vm vm;
    guarded_run g = { &vm, NULL, 0 };
    int rc;

    if (!out || !arena || (!data && len))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_pickle_read: missing output, arena or data");
    *out = NULL;
    if (opts && opts->version != 1)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_pickle_read: unknown options version %u", opts->version);
    memset(&vm, 0, sizeof vm);
    vm.data = data;
    vm.len = len;
    vm.arena = arena;
    vm.source = opts && opts->source ? opts->source : "(memory)";
    /* By default the memo is bounded by the input alone (an entry costs an opcode byte): a
     * Distributed Checkpoint's .metadata holds one save plan per rank, tens of millions of
     * entries for a checkpoint of thousands of ranks. */
    vm.max_memo = opts && opts->max_memo ? opts->max_memo : len;
    vm.max_depth = opts && opts->max_depth ? opts->max_depth : DEFAULT_MAX_DEPTH;
    /* Every node needs at least half an opcode byte; items and copies at most a few
     * bytes each, unless memo references repeat them. */
    vm.nodes_left = budget(len, 2, 64);
    vm.items_left = budget(len, 4, 4096);
    vm.copy_left = budget(len, 4, 65536);
    /* Never NULL, so that stack + 0 is a valid pointer even before the first push. */
    vm.stack_cap = 64;
    if (!(vm.stack = malloc(vm.stack_cap * sizeof *vm.stack)))
        return ckpt_error_oom();
    /* The pickle is read in place, often in a mapped file: one cut short meanwhile stops the
     * VM here, where its buffers are still known. */
    rc = ckpt_file_guard(NULL, run_and_finish, &g);
    free(vm.stack);
    free(vm.marks);
    free(vm.memo);
    ckpt_u64map_dispose(&vm.shared);
    ckpt_u64map_dispose(&vm.latin1_len);
    ckpt_u64map_dispose(&vm.key_hash);
    if (rc)
        return rc;
    *out = g.root;
    if (end)
        *end = g.stop;
    return 0;
}
