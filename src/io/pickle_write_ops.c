/* The pickle writer's opcodes: integers, floats, str, bytes (inline or as holes),
 * globals memoised by name, the memo, MARK/TUPLE, and the public primitives built on
 * them. Protocol 2 spells bytes as `_codecs.encode(text, 'latin1')` and builtins as
 * `__builtin__`, as CPython does; protocol 4 uses the binary forms. */
#include "pickle_private.h"

#include <stdlib.h>
#include <string.h>

#define NO_MEMO UINT64_MAX

/* ---- output ------------------------------------------------------------------- */

int ckpt_pickler__fail(ckpt_pickler *p, int rc)
{
    p->state = CKPT_PICKLER_FAILED;
    return rc;
}

static int put(ckpt_pickler *p, const void *data, size_t n)
{
    return ckpt_buf_append(&p->out, data, n);
}

int ckpt_pickler__op(ckpt_pickler *p, uint8_t op)
{
    return ckpt_buf_putc(&p->out, op);
}

static int op_u8(ckpt_pickler *p, uint8_t op, uint8_t arg)
{
    uint8_t b[2] = { op, arg };
    return put(p, b, 2);
}

static int op_le(ckpt_pickler *p, uint8_t op, uint64_t arg, unsigned size)
{
    uint8_t b[9];
    unsigned i;

    b[0] = op;
    for (i = 0; i < size; i++)
        b[1 + i] = (uint8_t)(arg >> (8 * i));
    return put(p, b, 1 + size);
}

/* An opcode with a u8 / u32 / u64 length, picked by size: short[0], mid[1], long[2]
 * (0 where the protocol lacks the form). */
static int op_len(ckpt_pickler *p, const uint8_t forms[3], uint64_t n, const char *what)
{
    if (n < 256 && forms[0])
        return op_u8(p, forms[0], (uint8_t)n);
    if (n <= UINT32_MAX)
        return op_le(p, forms[1], n, 4);
    if (forms[2])
        return op_le(p, forms[2], n, 8);
    return ckpt_error_set(CKPT_EINVALID, "pickle protocol %d cannot hold %s of %llu bytes", p->protocol, what,
                          (unsigned long long)n);
}

int ckpt_pickler__check(const ckpt_pickler *p)
{
    const char *state = p->state == CKPT_PICKLER_NEW    ? "not begun"
                        : p->state == CKPT_PICKLER_DONE ? "finished"
                                                        : "in a failed state";

    if (p->state != CKPT_PICKLER_OPEN)
        return ckpt_error_set(CKPT_EINVALID, "pickler is %s", state);
    return 0;
}

/* ---- memo -------------------------------------------------------------------- */

int ckpt_pickler__memo_get(ckpt_pickler *p, uint64_t idx)
{
    return idx < 256 ? op_u8(p, OP_BINGET, (uint8_t)idx) : op_le(p, OP_LONG_BINGET, idx, 4);
}

int ckpt_pickler__memo_put(ckpt_pickler *p, uint64_t *idx)
{
    uint64_t i = p->next_memo;

    if (i > UINT32_MAX)
        return ckpt_error_set(CKPT_EINVALID, "pickle needs more than 2^32 memo entries");
    p->next_memo++;
    *idx = i;
    if (p->protocol >= 4)
        return ckpt_pickler__op(p, OP_MEMOIZE);
    return i < 256 ? op_u8(p, OP_BINPUT, (uint8_t)i) : op_le(p, OP_LONG_BINPUT, i, 4);
}

int ckpt_pickler__memo_bind(ckpt_pickler *p, const ckpt_value *v, uint64_t idx)
{
    return ckpt_u64map_set(&p->memo, ckpt_u64map_ptrkey(v), idx);
}

int ckpt_pickler__memo_node(ckpt_pickler *p, const ckpt_value *v)
{
    uint64_t idx = 0;
    int rc = ckpt_pickler__memo_put(p, &idx);
    return rc ? rc : ckpt_pickler__memo_bind(p, v, idx);
}

int ckpt_pickler__memo_temp(ckpt_pickler *p)
{
    uint64_t idx;
    return ckpt_pickler__memo_put(p, &idx);
}

/* The node was memoised while its parts were written: drop those and fetch it. */
int ckpt_pickler__refetch(ckpt_pickler *p, const ckpt_value *v, uint8_t pop, size_t times)
{
    uint64_t idx = 0;
    size_t i;
    int rc = 0;

    ckpt_u64map_get(&p->memo, ckpt_u64map_ptrkey(v), &idx);
    for (i = 0; i < times && !rc; i++)
        rc = ckpt_pickler__op(p, pop);
    return rc ? rc : ckpt_pickler__memo_get(p, idx);
}

int ckpt_pickler__memoised(const ckpt_pickler *p, const ckpt_value *v)
{
    return ckpt_u64map_get(&p->memo, ckpt_u64map_ptrkey(v), NULL);
}

/* ---- primitives -------------------------------------------------------------- */

int ckpt_pickler_op(ckpt_pickler *p, uint8_t opcode)
{
    int rc = ckpt_pickler__check(p);
    return rc ? rc : (rc = ckpt_pickler__op(p, opcode)) ? ckpt_pickler__fail(p, rc) : 0;
}

int ckpt_pickler_none(ckpt_pickler *p)
{
    return ckpt_pickler_op(p, OP_NONE);
}

int ckpt_pickler_bool(ckpt_pickler *p, int v)
{
    return ckpt_pickler_op(p, v ? OP_NEWTRUE : OP_NEWFALSE);
}

int ckpt_pickler__put_int(ckpt_pickler *p, int64_t v)
{
    uint8_t b[8];
    size_t n = 8, i;
    int rc;

    if (v >= 0 && v < 256)
        return op_u8(p, OP_BININT1, (uint8_t)v);
    if (v >= 0 && v < 65536)
        return op_le(p, OP_BININT2, (uint64_t)v, 2);
    if (v >= INT32_MIN && v <= INT32_MAX)
        return op_le(p, OP_BININT, (uint64_t)(uint32_t)(int32_t)v, 4);
    for (i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    while (n > 1 && ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xFF && (b[n - 2] & 0x80))))
        n--;
    return (rc = op_u8(p, OP_LONG1, (uint8_t)n)) ? rc : put(p, b, n);
}

int ckpt_pickler_int(ckpt_pickler *p, int64_t v)
{
    int rc = ckpt_pickler__check(p);
    return rc ? rc : (rc = ckpt_pickler__put_int(p, v)) ? ckpt_pickler__fail(p, rc) : 0;
}

int ckpt_pickler__put_float(ckpt_pickler *p, double v)
{
    uint8_t b[9];
    uint64_t bits;
    int i;

    memcpy(&bits, &v, sizeof bits);
    b[0] = OP_BINFLOAT;
    for (i = 0; i < 8; i++)
        b[1 + i] = (uint8_t)(bits >> (56 - 8 * i));
    return put(p, b, sizeof b);
}

int ckpt_pickler_float(ckpt_pickler *p, double v)
{
    int rc = ckpt_pickler__check(p);
    return rc ? rc : (rc = ckpt_pickler__put_float(p, v)) ? ckpt_pickler__fail(p, rc) : 0;
}

int ckpt_pickler__put_long(ckpt_pickler *p, const uint8_t *bytes, size_t n)
{
    int rc;

    if (n > INT32_MAX)
        return ckpt_error_set(CKPT_EINVALID, "integer of %zu bytes is too large to pickle", n);
    rc = n < 256 ? op_u8(p, OP_LONG1, (uint8_t)n) : op_le(p, OP_LONG4, n, 4);
    return rc ? rc : put(p, bytes, n);
}

static int str_header(ckpt_pickler *p, uint64_t n)
{
    static const uint8_t p2[3] = { 0, OP_BINUNICODE, 0 };
    static const uint8_t p4[3] = { OP_SHORT_BINUNICODE, OP_BINUNICODE, OP_BINUNICODE8 };
    return op_len(p, p->protocol >= 4 ? p4 : p2, n, "a str");
}

int ckpt_pickler__put_str(ckpt_pickler *p, const char *s, size_t n)
{
    const char *why = NULL;
    int rc;

    if (ckpt_pickle__utf8_check((const uint8_t *)s, n, &why) != 0)
        return ckpt_error_set(CKPT_EINVALID, "cannot pickle a str: %s", why);
    return (rc = str_header(p, n)) ? rc : put(p, s, n);
}

int ckpt_pickler_str(ckpt_pickler *p, const char *s, size_t len)
{
    int rc = ckpt_pickler__check(p);
    return rc ? rc : (rc = ckpt_pickler__put_str(p, s, len)) ? ckpt_pickler__fail(p, rc) : 0;
}

int ckpt_pickler__put_global(ckpt_pickler *p, const char *module, const char *name)
{
    const uint8_t *k;
    uint64_t h = 0xcbf29ce484222325ull, slot = 0, idx = 0;
    size_t ml, nl;
    ckpt_pickler_named *g;
    char *key;
    int rc;

    if (p->protocol >= 4)
        ckpt_pickle__py3_name(&module, &name);
    else
        ckpt_pickle__py2_name(&module, &name);
    ml = strlen(module);
    nl = strlen(name);
    for (k = (const uint8_t *)module; *k; k++)
        h = (h ^ *k) * 0x100000001b3ull;
    h = (h ^ '\n') * 0x100000001b3ull;
    for (k = (const uint8_t *)name; *k; k++)
        h = (h ^ *k) * 0x100000001b3ull;
    if (h == UINT64_MAX)
        h = 0;
    if (ckpt_u64map_get(&p->by_name, h, &slot)) {
        g = &p->globals[slot];
        if (strncmp(g->key, module, ml) == 0 && g->key[ml] == '\n' && strcmp(g->key + ml + 1, name) == 0)
            return ckpt_pickler__memo_get(p, g->memo);
    }
    if (p->protocol < 4) {
        if (strchr(module, '\n') || strchr(name, '\n'))
            return ckpt_error_set(CKPT_EINVALID, "global name with a newline cannot be pickled at protocol 2");
        if ((rc = ckpt_pickler__op(p, OP_GLOBAL)) || (rc = put(p, module, ml)) || (rc = ckpt_pickler__op(p, '\n')) ||
            (rc = put(p, name, nl)) || (rc = ckpt_pickler__op(p, '\n')))
            return rc;
    } else if ((rc = ckpt_pickler__put_str(p, module, ml)) || (rc = ckpt_pickler__put_str(p, name, nl)) ||
               (rc = ckpt_pickler__op(p, OP_STACK_GLOBAL))) {
        return rc;
    }
    if ((rc = ckpt_pickler__memo_put(p, &idx)) != 0)
        return rc;
    /* Remember the name; on a hash collision the later global is simply not shared. */
    if (ckpt_u64map_get(&p->by_name, h, NULL))
        return 0;
    if (p->nglobals == p->globals_cap) {
        size_t cap = p->globals_cap ? p->globals_cap * 2 : 16;
        ckpt_pickler_named *bigger = realloc(p->globals, cap * sizeof *bigger);
        if (!bigger)
            return ckpt_error_oom();
        p->globals = bigger;
        p->globals_cap = cap;
    }
    if (!(key = malloc(ml + nl + 2)))
        return ckpt_error_oom();
    memcpy(key, module, ml);
    key[ml] = '\n';
    memcpy(key + ml + 1, name, nl + 1);
    p->globals[p->nglobals].key = key;
    p->globals[p->nglobals].memo = idx;
    return ckpt_u64map_set(&p->by_name, h, p->nglobals++);
}

int ckpt_pickler_global(ckpt_pickler *p, const char *module, const char *name)
{
    int rc = ckpt_pickler__check(p);
    return rc ? rc : (rc = ckpt_pickler__put_global(p, module, name)) ? ckpt_pickler__fail(p, rc) : 0;
}

/* The 'latin1' argument of _codecs.encode, written once and fetched after. */
static int put_latin1_name(ckpt_pickler *p)
{
    int rc;

    if (p->latin1_memo != NO_MEMO)
        return ckpt_pickler__memo_get(p, p->latin1_memo);
    return (rc = ckpt_pickler__put_str(p, "latin1", 6)) ? rc : ckpt_pickler__memo_put(p, &p->latin1_memo);
}

/* Raw bytes as the UTF-8 of their latin-1 reading (protocol 2 bytes). */
static int put_latin1_text(ckpt_pickler *p, const uint8_t *b, size_t n)
{
    size_t i, extra = 0;
    uint8_t *o;
    int rc;

    for (i = 0; i < n; i++)
        extra += b[i] >> 7;
    if ((rc = str_header(p, (uint64_t)n + extra)) || (rc = ckpt_buf_reserve(&p->out, n + extra + 1)))
        return rc;
    o = p->out.data + p->out.len;
    /* Both bytes are always stored; the second only counts for bytes >= 0x80. */
    for (i = 0; i < n; i++) {
        o[0] = b[i] < 0x80 ? b[i] : (uint8_t)(0xC0 | (b[i] >> 6));
        o[1] = (uint8_t)(0x80 | (b[i] & 0x3F));
        o += 1 + (b[i] >> 7);
    }
    p->out.len += n + extra;
    p->out.data[p->out.len] = 0;
    return 0;
}

/* A bytes object, memoised as CPython does (*idx receives the entry). `v` is a BYTES
 * node, or NULL for raw data/len. */
int ckpt_pickler__put_bytes(ckpt_pickler *p, const ckpt_value *v, const uint8_t *data, size_t len, uint64_t *idx)
{
    static const uint8_t forms[3] = { OP_SHORT_BINBYTES, OP_BINBYTES, OP_BINBYTES8 };
    int latin1 = v && (v->flags & CKPT_BYTES_LATIN1_UTF8);
    size_t size = v ? ckpt_value_bytes_size(v) : len;
    int rc;

    if (v) {
        data = v->u.bytes.ptr;
        len = v->u.bytes.len;
    }
    if (p->protocol >= 4) {
        if ((rc = op_len(p, forms, size, "bytes")) || (rc = ckpt_buf_reserve(&p->out, size)))
            return rc;
        if (latin1 && (rc = ckpt_value_bytes_decode(v, 0, size, p->out.data + p->out.len)) != 0)
            return rc;
        if (!latin1 && size)
            memcpy(p->out.data + p->out.len, data, size);
        p->out.len += size;
        p->out.data[p->out.len] = 0;
    } else if (size == 0) {
        if ((rc = ckpt_pickler__put_global(p, "builtins", "bytes")) || (rc = ckpt_pickler__op(p, OP_EMPTY_TUPLE)) ||
            (rc = ckpt_pickler__op(p, OP_REDUCE)))
            return rc;
    } else {
        if ((rc = ckpt_pickler__put_global(p, "_codecs", "encode")) != 0)
            return rc;
        rc = latin1 ? ckpt_pickler__put_str(p, (const char *)data, len) : put_latin1_text(p, data, len);
        if (rc || (rc = ckpt_pickler__memo_temp(p)) || (rc = put_latin1_name(p)) ||
            (rc = ckpt_pickler__op(p, OP_TUPLE2)) || (rc = ckpt_pickler__memo_temp(p)) ||
            (rc = ckpt_pickler__op(p, OP_REDUCE)))
            return rc;
    }
    return ckpt_pickler__memo_put(p, idx);
}

int ckpt_pickler_bytes(ckpt_pickler *p, const void *data, size_t len)
{
    uint64_t idx;
    int rc = ckpt_pickler__check(p);
    return rc ? rc : (rc = ckpt_pickler__put_bytes(p, NULL, data, len, &idx)) ? ckpt_pickler__fail(p, rc) : 0;
}

int ckpt_pickler_mark(ckpt_pickler *p)
{
    int rc = ckpt_pickler__check(p);

    if (rc)
        return rc;
    if (p->nmarks == p->marks_cap) {
        size_t cap = p->marks_cap ? p->marks_cap * 2 : 8, *m = realloc(p->marks, cap * sizeof *m);
        if (!m)
            return ckpt_pickler__fail(p, ckpt_error_oom());
        p->marks = m;
        p->marks_cap = cap;
    }
    p->marks[p->nmarks++] = p->out.len;
    return (rc = ckpt_pickler__op(p, OP_MARK)) ? ckpt_pickler__fail(p, rc) : 0;
}

int ckpt_pickler_tuple(ckpt_pickler *p, size_t n_since_mark)
{
    size_t pos, i;
    int rc = ckpt_pickler__check(p);

    if (rc)
        return rc;
    if (!p->nmarks)
        return ckpt_pickler__fail(p, ckpt_error_set(CKPT_EINVALID, "ckpt_pickler_tuple without ckpt_pickler_mark"));
    pos = p->marks[--p->nmarks];
    if (n_since_mark > 3)
        return (rc = ckpt_pickler__op(p, OP_TUPLE)) ? ckpt_pickler__fail(p, rc) : 0;
    /* Short tuples need no MARK: take it out again, moving later holes with it. */
    memmove(p->out.data + pos, p->out.data + pos + 1, p->out.len - pos - 1);
    p->out.len--;
    for (i = 0; i < p->nholes; i++) {
        if (p->holes[i].buf_pos > pos) {
            p->holes[i].buf_pos--;
            p->holes[i].h.offset--;
        }
    }
    rc = ckpt_pickler__op(p, n_since_mark ? (uint8_t)(OP_TUPLE1 + n_since_mark - 1) : OP_EMPTY_TUPLE);
    return rc ? ckpt_pickler__fail(p, rc) : 0;
}

static int add_hole(ckpt_pickler *p, uint64_t size, void *tag)
{
    if (p->nholes == p->holes_cap) {
        size_t cap = p->holes_cap ? p->holes_cap * 2 : 16;
        ckpt_pickler_hole *bigger = realloc(p->holes, cap * sizeof *bigger);
        if (!bigger)
            return ckpt_error_oom();
        p->holes = bigger;
        p->holes_cap = cap;
    }
    if (size > UINT64_MAX - p->hole_bytes - p->out.len)
        return ckpt_error_set(CKPT_EINVALID, "pickle stream larger than 2^64 bytes");
    p->holes[p->nholes].h.offset = p->out.len + p->hole_bytes;
    p->holes[p->nholes].h.size = size;
    p->holes[p->nholes].h.tag = tag;
    p->holes[p->nholes].buf_pos = p->out.len;
    p->nholes++;
    p->hole_bytes += size;
    return 0;
}

static int put_bytes_hole(ckpt_pickler *p, uint64_t size, void *tag)
{
    static const uint8_t forms[3] = { OP_SHORT_BINBYTES, OP_BINBYTES, OP_BINBYTES8 };
    int rc;

    if (p->protocol >= 4) {
        if ((rc = op_len(p, forms, size, "bytes")) || (rc = add_hole(p, size, tag)))
            return rc;
        return ckpt_pickler__memo_temp(p);
    }
    if ((rc = ckpt_pickler__put_global(p, "_codecs", "encode")) || (rc = str_header(p, size)) ||
        (rc = add_hole(p, size, tag)) || (rc = ckpt_pickler__memo_temp(p)) || (rc = put_latin1_name(p)) ||
        (rc = ckpt_pickler__op(p, OP_TUPLE2)) || (rc = ckpt_pickler__memo_temp(p)) ||
        (rc = ckpt_pickler__op(p, OP_REDUCE)))
        return rc;
    return ckpt_pickler__memo_temp(p);
}

int ckpt_pickler_bytes_hole(ckpt_pickler *p, uint64_t size, void *tag)
{
    int rc = ckpt_pickler__check(p);
    return rc ? rc : (rc = put_bytes_hole(p, size, tag)) ? ckpt_pickler__fail(p, rc) : 0;
}
