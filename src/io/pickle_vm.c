/* The pickle VM's machinery: input arguments, the stack with its MARKs, the memo,
 * and value constructors that count every node and item against budgets proportional
 * to the input. The opcode loop is in pickle_read.c. */
#include "pickle_private.h"
#include "../core/value_private.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 4096       /* bytes in a GLOBAL's module or name */
#define HASH_CACHE_MIN 64   /* str/bytes keys this long get their hash cached */
#define LATIN1_CACHE_MIN 4096 /* strs this long get their latin-1 length cached when read */

const char *ckpt_pickle__kind_name(const ckpt_value *v)
{
    static const char *const names[] = { "None", "bool", "int", "int", "float", "str", "bytes", "tuple",
                                         "list", "dict", "set", "frozenset", "global", "object",
                                         "persistent id", "tensor" };
    return (size_t)v->kind < sizeof names / sizeof names[0] ? names[v->kind] : "value";
}

int ckpt_pickle__fail(ckpt_pickle_vm *vm, int code, const char *fmt, ...)
{
    char reason[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return ckpt_error_set(code, "%s: pickle: %s at offset %zu", vm->source, reason, vm->op_pos);
}

ckpt_value *ckpt_pickle__node(ckpt_pickle_vm *vm, ckpt_value_kind kind)
{
    if (vm->nodes_left == 0) {
        ckpt_pickle__fail(vm, CKPT_EFORMAT, "more values than the input can describe");
        return NULL;
    }
    vm->nodes_left--;
    return ckpt_value_new(vm->arena, kind);
}

int ckpt_pickle__charge_items(ckpt_pickle_vm *vm, size_t n)
{
    if (n > vm->items_left)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "containers hold more items than the input can describe");
    vm->items_left -= n;
    return 0;
}

/* ---- input ------------------------------------------------------------------------ */

int ckpt_pickle__need(ckpt_pickle_vm *vm, uint64_t n, const char *what)
{
    if (n > vm->len - vm->pos)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "%s of %llu bytes runs past the end (%zu left)", what,
                                 (unsigned long long)n, vm->len - vm->pos);
    return 0;
}

/* A little-endian unsigned argument of `size` bytes. */
int ckpt_pickle__arg_le(ckpt_pickle_vm *vm, unsigned size, uint64_t *out, const char *what)
{
    unsigned i;
    int rc = ckpt_pickle__need(vm, size, what);

    if (rc)
        return rc;
    *out = 0;
    for (i = 0; i < size; i++)
        *out |= (uint64_t)vm->data[vm->pos + i] << (8 * i);
    vm->pos += size;
    return 0;
}

/* A length argument followed by that many bytes, which stay in the input. */
int ckpt_pickle__arg_bytes(ckpt_pickle_vm *vm, unsigned size, int is_signed, const uint8_t **p, size_t *n,
                           const char *what)
{
    uint64_t len = 0;
    int rc = ckpt_pickle__arg_le(vm, size, &len, what);

    if (rc)
        return rc;
    if (is_signed && (len & 0x80000000u))
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "%s with a negative length", what);
    if ((rc = ckpt_pickle__need(vm, len, what)) != 0)
        return rc;
    *p = vm->data + vm->pos;
    *n = (size_t)len;
    vm->pos += (size_t)len;
    return 0;
}

int ckpt_pickle__arg_line(ckpt_pickle_vm *vm, const uint8_t **p, size_t *n, const char *what)
{
    const uint8_t *nl = memchr(vm->data + vm->pos, '\n', vm->len - vm->pos);

    if (!nl)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "%s argument has no end of line", what);
    *p = vm->data + vm->pos;
    *n = (size_t)(nl - *p);
    vm->pos += *n + 1;
    return 0;
}

/* ---- stack, marks, memo -------------------------------------------------------- */

static size_t fence(const ckpt_pickle_vm *vm)
{
    return vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
}

int ckpt_pickle__push(ckpt_pickle_vm *vm, ckpt_value *v)
{
    if (!v)
        return ckpt_pickle__failure();
    if (vm->sp == vm->stack_cap) {
        size_t cap = vm->stack_cap ? vm->stack_cap * 2 : 64;
        ckpt_value **s = realloc(vm->stack, cap * sizeof *s);
        if (!s)
            return ckpt_error_oom();
        vm->stack = s;
        vm->stack_cap = cap;
    }
    vm->stack[vm->sp++] = v;
    return 0;
}

/* The n values on top of the stack, all above the innermost MARK. */
int ckpt_pickle__top_n(ckpt_pickle_vm *vm, size_t n, ckpt_value ***out)
{
    if (vm->sp - fence(vm) < n)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "stack underflow");
    *out = vm->stack + vm->sp - n;
    return 0;
}

int ckpt_pickle__pop_mark(ckpt_pickle_vm *vm, size_t *start)
{
    if (!vm->nmarks)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "no MARK to pop");
    *start = vm->marks[--vm->nmarks];
    return 0;
}

int ckpt_pickle__share(ckpt_pickle_vm *vm, const ckpt_value *v)
{
    return ckpt_u64map_set(&vm->shared, ckpt_u64map_ptrkey(v), 0);
}

int ckpt_pickle__memo_put(ckpt_pickle_vm *vm, uint64_t idx)
{
    ckpt_value **top = NULL;
    int rc = ckpt_pickle__top_n(vm, 1, &top);

    if (rc)
        return rc;
    if (idx >= vm->len)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "memo index %llu beyond what the input can hold",
                                 (unsigned long long)idx);
    if (idx >= vm->memo_cap) {
        size_t cap = vm->memo_cap ? vm->memo_cap : 64;
        ckpt_value **m;
        while (cap <= idx)
            cap *= 2;
        if (!(m = realloc(vm->memo, cap * sizeof *m)))
            return ckpt_error_oom();
        memset(m + vm->memo_cap, 0, (cap - vm->memo_cap) * sizeof *m);
        vm->memo = m;
        vm->memo_cap = cap;
    }
    if (!vm->memo[idx]) {
        if (vm->memo_count >= vm->max_memo)
            return ckpt_pickle__fail(vm, CKPT_EFORMAT, "memo grows beyond %zu entries", vm->max_memo);
        vm->memo_count++;
    }
    vm->memo[idx] = top[0];
    return 0;
}

int ckpt_pickle__memo_get(ckpt_pickle_vm *vm, uint64_t idx)
{
    int rc;

    if (idx >= vm->memo_cap || !vm->memo[idx])
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "memo entry %llu was never stored", (unsigned long long)idx);
    if ((rc = ckpt_pickle__share(vm, vm->memo[idx])) != 0)
        return rc;
    return ckpt_pickle__push(vm, vm->memo[idx]);
}

/* ---- values -------------------------------------------------------------------- */

ckpt_value *ckpt_pickle__seq(ckpt_pickle_vm *vm, ckpt_value_kind kind, ckpt_value **items, size_t n)
{
    ckpt_value *v;

    if (ckpt_pickle__charge_items(vm, n) != 0 || !(v = ckpt_pickle__node(vm, kind)))
        return NULL;
    if (n) {
        v->u.seq.items = ckpt_arena_alloc(vm->arena, n * sizeof *items);
        if (!v->u.seq.items)
            return NULL;
        memcpy(v->u.seq.items, items, n * sizeof *items);
    }
    v->u.seq.n = v->u.seq.cap = n;
    return v;
}

ckpt_value *ckpt_pickle__int(ckpt_pickle_vm *vm, int64_t i)
{
    ckpt_value *v = ckpt_pickle__node(vm, CKPT_VAL_INT);
    if (v)
        v->u.integer = i;
    return v;
}

/* LONG1/LONG4 payload: INT when it fits in int64, else a zero-copy BIGINT. */
ckpt_value *ckpt_pickle__long(ckpt_pickle_vm *vm, const uint8_t *p, size_t n)
{
    uint64_t u = 0;
    size_t i;
    ckpt_value *v;

    for (i = n; i > 8; i--)
        if (p[i - 1] != ((p[7] & 0x80) ? 0xFF : 0x00))
            break;
    if (i <= 8) {
        size_t k = n < 8 ? n : 8;
        for (i = 0; i < k; i++)
            u |= (uint64_t)p[i] << (8 * i);
        if (k && k < 8 && (p[k - 1] & 0x80))
            u |= UINT64_MAX << (8 * k);
        return ckpt_pickle__int(vm, (int64_t)u);
    }
    if ((v = ckpt_pickle__node(vm, CKPT_VAL_BIGINT)) != NULL) {
        v->u.bigint.data = p;
        v->u.bigint.len = n;
    }
    return v;
}

int ckpt_pickle__push_text_int(ckpt_pickle_vm *vm, const uint8_t *p, size_t n)
{
    const char *why = NULL;
    int64_t i = 0;
    uint8_t *big = NULL;
    size_t big_len = 0;
    ckpt_value *v;
    int rc = ckpt_pickle__parse_int(vm->arena, p, n, &i, &big, &big_len, &why);

    if (rc < 0)
        return why ? ckpt_pickle__fail(vm, rc, "%s", why) : rc;
    if (rc == 0)
        return ckpt_pickle__push(vm, ckpt_pickle__int(vm, i));
    if ((v = ckpt_pickle__node(vm, CKPT_VAL_BIGINT)) != NULL) {
        v->u.bigint.data = big;
        v->u.bigint.len = big_len;
    }
    return ckpt_pickle__push(vm, v);
}

static int push_str_copy(ckpt_pickle_vm *vm, char *s, size_t n)
{
    ckpt_value *v = ckpt_pickle__node(vm, CKPT_VAL_STR);
    if (v) {
        v->u.str.ptr = s;
        v->u.str.len = n;
    }
    return ckpt_pickle__push(vm, v);
}

/* BINUNICODE family: validated UTF-8, left in the input until the post pass. A long
 * string may be the payload of `_codecs.encode(s, 'latin1')`: the same scan tells
 * whether it is latin-1 text, so that REDUCE need not read it again. */
int ckpt_pickle__push_str_input(ckpt_pickle_vm *vm, const uint8_t *p, size_t n)
{
    const char *why = NULL;
    size_t chars = 0;
    unsigned top = 0;
    int rc = ckpt_pickle__utf8_scan(p, n, &chars, &top, &why);

    if (rc)
        return ckpt_pickle__fail(vm, rc, "%s", why);
    if ((rc = push_str_copy(vm, (char *)(uintptr_t)p, n)) != 0 || n < LATIN1_CACHE_MIN)
        return rc;
    return ckpt_u64map_set(&vm->latin1_len, ckpt_u64map_ptrkey(vm->stack[vm->sp - 1]),
                            top > 0xC3 ? 0 : (uint64_t)chars + 1);
}

static int charge_copy(ckpt_pickle_vm *vm, size_t n)
{
    if (n > vm->copy_left)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "strings copy more bytes than the input can describe");
    vm->copy_left -= n;
    return 0;
}

/* Decoded py2 str (STRING, BINSTRING, SHORT_BINSTRING) or UNICODE text. */
int ckpt_pickle__push_decoded(ckpt_pickle_vm *vm, int op, const uint8_t *p, size_t n)
{
    const char *why = NULL;
    char *s = NULL;
    size_t len = 0;
    int rc = charge_copy(vm, 2 * n);

    if (rc)
        return rc;
    if (op == OP_STRING)
        rc = ckpt_pickle__decode_string(vm->arena, p, n, &s, &len, &why);
    else if (op == OP_UNICODE)
        rc = ckpt_pickle__decode_raw_unicode(vm->arena, p, n, &s, &len, &why);
    else
        rc = ckpt_pickle__latin1_to_utf8(vm->arena, p, n, &s, &len);
    if (rc)
        return why ? ckpt_pickle__fail(vm, rc, "%s", why) : rc;
    return push_str_copy(vm, s, len);
}

int ckpt_pickle__push_bytes(ckpt_pickle_vm *vm, const uint8_t *p, size_t n, uint32_t flags)
{
    ckpt_value *v = ckpt_pickle__node(vm, CKPT_VAL_BYTES);
    if (v) {
        v->flags = flags;
        v->u.bytes.ptr = p;
        v->u.bytes.len = n;
    }
    return ckpt_pickle__push(vm, v);
}

int ckpt_pickle__push_global(ckpt_pickle_vm *vm, const uint8_t *m, size_t mn, const uint8_t *nm, size_t nn)
{
    const char *why = NULL;
    ckpt_value *v;
    char *module, *name;
    int rc;

    if (mn > MAX_NAME || nn > MAX_NAME)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "global name longer than %d bytes", MAX_NAME);
    if (memchr(m, 0, mn) || memchr(nm, 0, nn))
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "global name contains a NUL byte");
    if ((rc = ckpt_pickle__utf8_check(m, mn, &why)) != 0 || (rc = ckpt_pickle__utf8_check(nm, nn, &why)) != 0)
        return ckpt_pickle__fail(vm, rc, "global name: %s", why);
    if ((rc = charge_copy(vm, mn + nn)) != 0)
        return rc;
    if (!(v = ckpt_pickle__node(vm, CKPT_VAL_GLOBAL)) ||
        !(module = ckpt_arena_strndup(vm->arena, (const char *)m, mn)) ||
        !(name = ckpt_arena_strndup(vm->arena, (const char *)nm, nn)))
        return ckpt_pickle__failure();
    v->u.global.module = module;
    v->u.global.name = name;
    if (!ckpt_pickle_global_known(module, name))
        v->flags |= CKPT_VALUE_UNSAFE;
    return ckpt_pickle__push(vm, v);
}

ckpt_value *ckpt_pickle__object(ckpt_pickle_vm *vm, ckpt_object_how how, ckpt_value *callable, ckpt_value *args,
                                ckpt_value *kwargs)
{
    ckpt_value *v = ckpt_pickle__node(vm, CKPT_VAL_OBJECT);
    if (v) {
        v->u.obj.how = how;
        v->u.obj.callable = callable;
        v->u.obj.args = args;
        v->u.obj.kwargs = kwargs;
    }
    return v;
}

/* ---- container updates ------------------------------------------------------- */

/* Keys whose hash reads much data are hashed once, however often the memo repeats them. */
static uint64_t key_hash(ckpt_pickle_vm *vm, const ckpt_value *k)
{
    uint64_t h = 0;
    size_t len = k->kind == CKPT_VAL_STR ? k->u.str.len : k->kind == CKPT_VAL_BYTES ? k->u.bytes.len : 0;

    if (len < HASH_CACHE_MIN && k->kind != CKPT_VAL_GLOBAL)
        return ckpt_value__key_hash(k);
    if (ckpt_u64map_get(&vm->key_hash, ckpt_u64map_ptrkey(k), &h))
        return h;
    h = ckpt_value__key_hash(k);
    /* A failed insert only loses the cache entry. */
    if (ckpt_u64map_set(&vm->key_hash, ckpt_u64map_ptrkey(k), h) != 0)
        ckpt_error_clear();
    return h;
}

int ckpt_pickle__add_items(ckpt_pickle_vm *vm, int op, ckpt_value *target, ckpt_value **items, size_t n)
{
    size_t i;
    int rc;

    if (op == OP_ADDITEMS ? target->kind != CKPT_VAL_SET
                          : target->kind != CKPT_VAL_LIST && target->kind != CKPT_VAL_OBJECT)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "%s onto a %s", op == OP_ADDITEMS ? "ADDITEMS" : "APPEND",
                                 ckpt_pickle__kind_name(target));
    if ((rc = ckpt_pickle__charge_items(vm, n)) != 0)
        return rc;
    for (i = 0; i < n; i++)
        if ((rc = ckpt_value_append(vm->arena, target, items[i])) != 0)
            return rc;
    return 0;
}

int ckpt_pickle__set_items(ckpt_pickle_vm *vm, ckpt_value *target, ckpt_value **kv, size_t n)
{
    size_t i;
    int rc;

    if (target->kind != CKPT_VAL_DICT && target->kind != CKPT_VAL_OBJECT)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "SETITEM onto a %s", ckpt_pickle__kind_name(target));
    if (n % 2)
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "odd number of values for dict items");
    if ((rc = ckpt_pickle__charge_items(vm, n / 2)) != 0)
        return rc;
    for (i = 0; i < n; i += 2)
        if ((rc = ckpt_value__dict_set_hashed(vm->arena, target, kv[i], key_hash(vm, kv[i]), kv[i + 1])) != 0)
            return rc;
    return 0;
}

/* The target of APPENDS/SETITEMS/ADDITEMS sits just below the popped MARK. */
int ckpt_pickle__mark_target(ckpt_pickle_vm *vm, size_t *start, ckpt_value **target)
{
    int rc = ckpt_pickle__pop_mark(vm, start);

    if (rc)
        return rc;
    if (*start == 0 || *start - 1 < fence(vm))
        return ckpt_pickle__fail(vm, CKPT_EFORMAT, "stack underflow");
    *target = vm->stack[*start - 1];
    return 0;
}

int ckpt_pickle__push_bool(ckpt_pickle_vm *vm, int b)
{
    ckpt_value *v = ckpt_pickle__node(vm, CKPT_VAL_BOOL);
    if (v)
        v->u.boolean = b;
    return ckpt_pickle__push(vm, v);
}

int ckpt_pickle__push_float(ckpt_pickle_vm *vm, double d)
{
    ckpt_value *v = ckpt_pickle__node(vm, CKPT_VAL_FLOAT);
    if (v)
        v->u.real = d;
    return ckpt_pickle__push(vm, v);
}

