/* One-line rendering of a value for inspect and error messages: Python-like, short.
 * Nesting is cut at REPR_DEPTH levels and containers at REPR_ITEMS items, so the
 * work is bounded even on cyclic or heavily shared trees; the buffer cap cuts the rest. */
#include <ckpt/sys/common.h>
#include <ckpt/value.h>

#include "value_private.h"

#include <locale.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPR_DEPTH 4
#define REPR_ITEMS 8
#define REPR_STR_MAX 64   /* longer strings show a prefix and their length */
#define REPR_BYTES_MAX 32
#define REPR_BIGINT_MAX 32 /* bytes; longer ints show only their size */

typedef struct out {
    char *buf;
    size_t cap, len;
    int full;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->full)
        return;
    if (o->cap == 0 || n > o->cap - 1 - o->len) {
        o->full = 1;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void puts_(out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void putf(out *o, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
static void putf(out *o, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Back off from a cut inside a UTF-8 sequence. */
static size_t utf8_floor(const char *s, size_t n)
{
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

static void put_escaped(out *o, const uint8_t *p, size_t n, int text)
{
    size_t i;
    char esc[5];

    for (i = 0; i < n && !o->full; i++) {
        uint8_t c = p[i];
        if (c == '\\' || c == '\'') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c == '\n') {
            put(o, "\\n", 2);
        } else if (c == '\t') {
            put(o, "\\t", 2);
        } else if (c == '\r') {
            put(o, "\\r", 2);
        } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !text)) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            put(o, esc, 4);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
}

/* Python's float repr: the shortest digits that read back, fixed notation for
 * exponents in [-4, 16), else d.ddde+XX. */
static void put_float(out *o, double d)
{
    char tmp[40], digits[20], *e;
    const char *dp = localeconv()->decimal_point;
    int prec, exp10, nd = 0, i;

    if (isnan(d)) {
        puts_(o, "nan");
        return;
    }
    if (isinf(d)) {
        puts_(o, d < 0 ? "-inf" : "inf");
        return;
    }
    for (prec = 0; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    snprintf(tmp, sizeof tmp, "%.*e", prec, d);
    /* tmp = [-]D[<point>DDD]e[+-]XX; collect the digits and the exponent. */
    e = strchr(tmp, 'e');
    exp10 = atoi(e + 1);
    for (i = 0; tmp + i < e; i++) {
        if (tmp[i] >= '0' && tmp[i] <= '9')
            digits[nd++] = tmp[i];
        else if (tmp[i] != '-' && strncmp(tmp + i, dp, strlen(dp)) == 0)
            i += (int)strlen(dp) - 1;
    }
    if (signbit(d))
        put(o, "-", 1);
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            put(o, "0.", 2);
            for (i = 0; i < -exp10 - 1; i++)
                put(o, "0", 1);
            put(o, digits, (size_t)nd);
        } else {
            for (i = 0; i <= exp10; i++)
                put(o, i < nd ? &digits[i] : "0", 1);
            put(o, ".", 1);
            if (nd > exp10 + 1)
                put(o, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
            else
                put(o, "0", 1);
        }
        return;
    }
    put(o, digits, 1);
    if (nd > 1) {
        put(o, ".", 1);
        put(o, digits + 1, (size_t)(nd - 1));
    }
    putf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
}

static void put_bigint(out *o, const ckpt_value *v)
{
    uint8_t mag[REPR_BIGINT_MAX];
    char dec[REPR_BIGINT_MAX * 3 + 2];
    size_t n = v->u.bigint.len, i, nd = 0;
    int neg, carry, any;

    if (n == 0) {
        put(o, "0", 1);
        return;
    }
    if (n > REPR_BIGINT_MAX) {
        putf(o, "<int of %zu bytes>", n);
        return;
    }
    neg = (v->u.bigint.data[n - 1] & 0x80) != 0;
    /* Magnitude, big-endian: negate the two's complement when negative. */
    carry = 1;
    for (i = 0; i < n; i++) {
        unsigned b = v->u.bigint.data[i];
        if (neg) {
            b = (~b & 0xFFu) + (unsigned)carry;
            carry = b > 0xFF;
            b &= 0xFF;
        }
        mag[n - 1 - i] = (uint8_t)b;
    }
    do {
        unsigned rem = 0;
        any = 0;
        for (i = 0; i < n; i++) {
            unsigned cur = (rem << 8) | mag[i];
            mag[i] = (uint8_t)(cur / 10);
            rem = cur % 10;
            any |= mag[i];
        }
        dec[nd++] = (char)('0' + rem);
    } while (any);
    if (neg)
        put(o, "-", 1);
    while (nd)
        put(o, &dec[--nd], 1);
}

static void put_str(out *o, const ckpt_value *v)
{
    size_t n = v->u.str.len, chars = 0, i;

    put(o, "'", 1);
    if (n <= REPR_STR_MAX) {
        put_escaped(o, (const uint8_t *)v->u.str.ptr, n, 1);
        put(o, "'", 1);
        return;
    }
    for (i = 0; i < n; i++)
        chars += ((unsigned char)v->u.str.ptr[i] & 0xC0) != 0x80;
    put_escaped(o, (const uint8_t *)v->u.str.ptr, utf8_floor(v->u.str.ptr, REPR_STR_MAX * 3 / 4), 1);
    putf(o, "...'(%zu chars)", chars);
}

static void put_bytes(out *o, const ckpt_value *v)
{
    uint8_t head[REPR_BYTES_MAX];
    size_t size = ckpt_value_bytes_size(v), shown = size <= REPR_BYTES_MAX ? size : REPR_BYTES_MAX * 3 / 4;
    int ba = (v->flags & CKPT_BYTES_BYTEARRAY) != 0;

    puts_(o, ba ? "bytearray(b'" : "b'");
    if (ckpt_value_bytes_decode(v, 0, shown, head) != 0) {
        ckpt_error_clear();
        puts_(o, "<malformed>");
        shown = size;
    } else {
        put_escaped(o, head, shown, 0);
    }
    put(o, shown < size ? "...'" : "'", shown < size ? 4 : 1);
    if (shown < size)
        putf(o, "(%zu bytes)", size);
    if (ba)
        put(o, ")", 1);
}

static void put_value(out *o, const ckpt_value *v, int depth);

static void put_items(out *o, ckpt_value *const *items, size_t n, int depth)
{
    size_t i;

    for (i = 0; i < n && !o->full; i++) {
        if (i)
            put(o, ", ", 2);
        if (i == REPR_ITEMS) {
            put(o, "...", 3);
            return;
        }
        put_value(o, items[i], depth + 1);
    }
}

static void put_map(out *o, const ckpt_value_map *m, int depth)
{
    size_t i;

    for (i = 0; i < m->n && !o->full; i++) {
        if (i)
            put(o, ", ", 2);
        if (i == REPR_ITEMS) {
            put(o, "...", 3);
            return;
        }
        put_value(o, m->keys[i], depth + 1);
        put(o, ": ", 2);
        put_value(o, m->vals[i], depth + 1);
    }
}

static void put_callable(out *o, const ckpt_value *c, int depth)
{
    if (!c)
        puts_(o, "<null>");
    else if (c->kind == CKPT_VAL_GLOBAL)
        putf(o, "%s.%s", c->u.global.module, c->u.global.name);
    else
        put_value(o, c, depth + 1);
}

/* An object whose BUILD state is a dict of attributes (argparse.Namespace, dataclasses):
 * name=value pairs, as its own repr would show them. */
static int put_attributes(out *o, const ckpt_value *state, int depth)
{
    size_t i;

    if (!state || state->kind != CKPT_VAL_DICT || state->u.dict.cls)
        return 0;
    for (i = 0; i < state->u.dict.map.n; i++)
        if (state->u.dict.map.keys[i]->kind != CKPT_VAL_STR)
            return 0;
    for (i = 0; i < state->u.dict.map.n && !o->full; i++) {
        if (i)
            put(o, ", ", 2);
        if (i == REPR_ITEMS) {
            put(o, "...", 3);
            break;
        }
        puts_(o, state->u.dict.map.keys[i]->u.str.ptr);
        put(o, "=", 1);
        put_value(o, state->u.dict.map.vals[i], depth + 1);
    }
    return 1;
}

static void put_object(out *o, const ckpt_value *v, int depth)
{
    const ckpt_value *args = v->u.obj.args;
    int more = v->u.obj.kwargs || v->u.obj.state || v->u.obj.list_items.n || v->u.obj.dict_items.n;
    int has_args = args && args->kind == CKPT_VAL_TUPLE && args->u.seq.n;

    put_callable(o, v->u.obj.callable, depth);
    put(o, "(", 1);
    if (depth >= REPR_DEPTH) {
        put(o, "...)", 4);
        return;
    }
    if (!has_args && !v->u.obj.kwargs && !v->u.obj.list_items.n && !v->u.obj.dict_items.n &&
        put_attributes(o, v->u.obj.state, depth)) {
        put(o, ")", 1);
        return;
    }
    if (has_args)
        put_items(o, args->u.seq.items, args->u.seq.n, depth);
    if (more)
        puts_(o, has_args ? ", ..." : "...");
    put(o, ")", 1);
}

static void put_value(out *o, const ckpt_value *v, int depth)
{
    static const char *const open[] = { "(", "[", "{", "frozenset({" };
    static const char *const close[] = { ")", "]", "}", "})" };
    int k;

    if (o->full)
        return;
    if (!v) {
        puts_(o, "<null>");
        return;
    }
    /* Callables of callables are not cut by the container rules below. */
    if (depth > 2 * REPR_DEPTH) {
        put(o, "...", 3);
        return;
    }
    switch (v->kind) {
    case CKPT_VAL_NONE: puts_(o, "None"); return;
    case CKPT_VAL_BOOL: puts_(o, v->u.boolean ? "True" : "False"); return;
    case CKPT_VAL_INT: putf(o, "%lld", (long long)v->u.integer); return;
    case CKPT_VAL_BIGINT: put_bigint(o, v); return;
    case CKPT_VAL_FLOAT: put_float(o, v->u.real); return;
    case CKPT_VAL_STR: put_str(o, v); return;
    case CKPT_VAL_BYTES: put_bytes(o, v); return;
    /* py3 module names, as ckpt_value_is_global compares them: a key path stays the same
     * whichever protocol wrote it */
    case CKPT_VAL_GLOBAL: putf(o, "%s.%s", ckpt_value__py3_module(v->u.global.module), v->u.global.name); return;
    case CKPT_VAL_TENSOR: putf(o, "<tensor #%zu>", v->u.tensor.index); return;
    case CKPT_VAL_OBJECT: put_object(o, v, depth); return;
    case CKPT_VAL_PERSID:
        puts_(o, "persid(");
        if (depth < REPR_DEPTH)
            put_value(o, v->u.persid.pid, depth + 1);
        else
            puts_(o, "...");
        put(o, ")", 1);
        return;
    case CKPT_VAL_DICT:
        if (v->u.dict.cls) {
            const ckpt_value *c = v->u.dict.cls;
            puts_(o, c->kind == CKPT_VAL_GLOBAL ? c->u.global.name : "dict");
            putf(o, "(%zu item%s)", v->u.dict.map.n, v->u.dict.map.n == 1 ? "" : "s");
            return;
        }
        put(o, "{", 1);
        if (depth >= REPR_DEPTH && v->u.dict.map.n)
            put(o, "...", 3);
        else
            put_map(o, &v->u.dict.map, depth);
        put(o, "}", 1);
        return;
    case CKPT_VAL_TUPLE: case CKPT_VAL_LIST: case CKPT_VAL_SET: case CKPT_VAL_FROZENSET:
        k = v->kind == CKPT_VAL_TUPLE ? 0 : v->kind == CKPT_VAL_LIST ? 1 : v->kind == CKPT_VAL_SET ? 2 : 3;
        if (v->u.seq.n == 0 && k >= 2) {
            puts_(o, k == 2 ? "set()" : "frozenset()");
            return;
        }
        puts_(o, open[k]);
        if (depth >= REPR_DEPTH && v->u.seq.n)
            put(o, "...", 3);
        else
            put_items(o, v->u.seq.items, v->u.seq.n, depth);
        if (k == 0 && v->u.seq.n == 1)
            put(o, ",", 1);
        puts_(o, close[k]);
        return;
    }
    putf(o, "<kind %d>", (int)v->kind);
}

size_t ckpt_value_repr(const ckpt_value *v, char *buf, size_t cap)
{
    out o = { buf, cap, 0, 0 };

    if (cap == 0)
        return 0;
    put_value(&o, v, 0);
    if (o.full) {
        /* Cut to leave room for the marker, never inside a UTF-8 sequence. */
        size_t keep = cap - 1 >= 3 ? cap - 1 - 3 : 0;
        if (o.len > keep)
            o.len = utf8_floor(buf, keep);
        o.full = 0;
        put(&o, "...", cap - 1 - o.len < 3 ? cap - 1 - o.len : 3);
    }
    buf[o.len] = '\0';
    return o.len;
}
