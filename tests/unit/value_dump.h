/* A canonical text form of a value tree, for comparing trees in tests and fuzzers.
 * testdata/gen/gen_pickles.py renders Python objects in the same form (expanded mode).
 *
 *   N T F               None, True, False
 *   i<dec>  L<hex>      int; larger ints as minimal two's complement bytes, little-endian
 *   f<hex>              float, the 8 IEEE bytes big-endian
 *   s'..' b'..' a'..'   str (UTF-8), bytes, bytearray: printable ASCII except ' and \ as
 *                       is, every other byte as \xHH
 *   (x,) [x,] S{x,} Z{x,}       tuple, list, set, frozenset
 *   {k:v,}  D<cls>{k:v,}        dict, dict made by cls(); "~<state>" follows a BUILD state
 *   g<module>:<name>    global, py2 spellings shown as py3
 *   R(<f>|<args>) O(<cls>|<args>) X(<cls>|<args>|<kwargs>)   REDUCE, NEWOBJ, NEWOBJ_EX,
 *                       then "+[..]" list_items, "+{..}" dict_items, "~<state>"
 *   P(<pid>)  t<index>  persistent id, tensor
 * Expanded mode prints shared nodes in full every time and "^" for a node that is its own
 * ancestor. Reference mode prints each container (but the empty tuple, a singleton in
 * Python), str, bytes, object, pid and tensor in full once and "@<n>" (n-th such node in
 * print order) afterwards, so it also captures which nodes are shared and stays linear
 * on heavily shared trees. */
#ifndef CKPT_TEST_VALUE_DUMP_H
#define CKPT_TEST_VALUE_DUMP_H

#include <ckpt/buf.h>
#include <ckpt/value.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DUMP_MAX_DEPTH 20000

typedef struct dump_state {
    ckpt_buf *out;
    int refs;
    const ckpt_value **keys; /* open addressing: node -> id + 1 (refs) or on-path flag */
    size_t *ids;
    size_t cap, n, next_id;
    int failed;
} dump_state;

static inline size_t dump_slot(const dump_state *d, const ckpt_value *v)
{
    uint64_t h = (uint64_t)(uintptr_t)v * 0x9e3779b97f4a7c15ull;
    size_t j = (size_t)(h >> 17) & (d->cap - 1);
    while (d->keys[j] && d->keys[j] != v)
        j = (j + 1) & (d->cap - 1);
    return j;
}

static inline size_t *dump_find(dump_state *d, const ckpt_value *v, int insert)
{
    size_t j, i;

    if (insert && (d->n + 1) * 2 > d->cap) {
        dump_state old = *d;
        d->cap = d->cap ? d->cap * 2 : 256;
        d->keys = calloc(d->cap, sizeof *d->keys);
        d->ids = calloc(d->cap, sizeof *d->ids);
        if (!d->keys || !d->ids)
            abort();
        for (i = 0; i < old.cap; i++) {
            if (old.keys[i]) {
                j = dump_slot(d, old.keys[i]);
                d->keys[j] = old.keys[i];
                d->ids[j] = old.ids[i];
            }
        }
        free(old.keys);
        free(old.ids);
    }
    if (!d->cap)
        return NULL;
    j = dump_slot(d, v);
    if (!d->keys[j]) {
        if (!insert)
            return NULL;
        d->keys[j] = v;
        d->ids[j] = 0;
        d->n++;
    }
    return &d->ids[j];
}

static inline void dump_bytes(ckpt_buf *out, char tag, const uint8_t *p, size_t n)
{
    size_t i;

    ckpt_buf_putc(out, (uint8_t)tag);
    ckpt_buf_putc(out, '\'');
    for (i = 0; i < n; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7F && p[i] != '\'' && p[i] != '\\')
            ckpt_buf_putc(out, p[i]);
        else
            ckpt_buf_printf(out, "\\x%02x", p[i]);
    }
    ckpt_buf_putc(out, '\'');
}

static inline void dump_bigint(ckpt_buf *out, const uint8_t *d, size_t n)
{
    size_t i;
    int64_t v = 0;

    while (n > 1 && ((d[n - 1] == 0x00 && !(d[n - 2] & 0x80)) || (d[n - 1] == 0xFF && (d[n - 2] & 0x80))))
        n--;
    if (n <= 8) {
        uint64_t u = 0;
        for (i = 0; i < n; i++)
            u |= (uint64_t)d[i] << (8 * i);
        if (n && n < 8 && (d[n - 1] & 0x80))
            u |= UINT64_MAX << (8 * n);
        memcpy(&v, &u, sizeof v);
        ckpt_buf_printf(out, "i%lld", (long long)v);
        return;
    }
    ckpt_buf_putc(out, 'L');
    for (i = 0; i < n; i++)
        ckpt_buf_printf(out, "%02x", d[i]);
}

static inline void dump_global(ckpt_buf *out, const char *module, const char *name)
{
    if (strcmp(module, "__builtin__") == 0) {
        module = "builtins";
        if (strcmp(name, "xrange") == 0)
            name = "range";
        else if (strcmp(name, "unicode") == 0)
            name = "str";
        else if (strcmp(name, "long") == 0)
            name = "int";
    } else if (strcmp(module, "copy_reg") == 0) {
        module = "copyreg";
    }
    ckpt_buf_printf(out, "g%s:%s", module, name);
}

static inline void dump_value(dump_state *d, const ckpt_value *v, int depth);

static inline void dump_seq(dump_state *d, const ckpt_value_seq *s, const char *open, const char *close, int depth)
{
    size_t i;

    ckpt_buf_puts(d->out, open);
    for (i = 0; i < s->n; i++) {
        dump_value(d, s->items[i], depth + 1);
        ckpt_buf_putc(d->out, ',');
    }
    ckpt_buf_puts(d->out, close);
}

static inline void dump_map(dump_state *d, const ckpt_value_map *m, const char *open, int depth)
{
    size_t i;

    ckpt_buf_puts(d->out, open);
    for (i = 0; i < m->n; i++) {
        dump_value(d, m->keys[i], depth + 1);
        ckpt_buf_putc(d->out, ':');
        dump_value(d, m->vals[i], depth + 1);
        ckpt_buf_putc(d->out, ',');
    }
    ckpt_buf_putc(d->out, '}');
}

static inline void dump_state_suffix(dump_state *d, const ckpt_value *state, int depth)
{
    if (state) {
        ckpt_buf_putc(d->out, '~');
        dump_value(d, state, depth + 1);
    }
}

static inline int dump_shareable(const ckpt_value *v)
{
    switch (v->kind) {
    case CKPT_VAL_NONE: case CKPT_VAL_BOOL: case CKPT_VAL_INT: case CKPT_VAL_BIGINT: case CKPT_VAL_FLOAT:
    case CKPT_VAL_GLOBAL:
        return 0;
    case CKPT_VAL_TUPLE:
        return v->u.seq.n != 0;
    default:
        return 1;
    }
}

static inline void dump_body(dump_state *d, const ckpt_value *v, int depth)
{
    uint8_t *tmp;
    size_t n;
    uint64_t bits;

    switch (v->kind) {
    case CKPT_VAL_NONE: ckpt_buf_putc(d->out, 'N'); return;
    case CKPT_VAL_BOOL: ckpt_buf_putc(d->out, v->u.boolean ? 'T' : 'F'); return;
    case CKPT_VAL_INT: ckpt_buf_printf(d->out, "i%lld", (long long)v->u.integer); return;
    case CKPT_VAL_BIGINT: dump_bigint(d->out, v->u.bigint.data, v->u.bigint.len); return;
    case CKPT_VAL_FLOAT:
        memcpy(&bits, &v->u.real, sizeof bits);
        ckpt_buf_printf(d->out, "f%016llx", (unsigned long long)bits);
        return;
    case CKPT_VAL_STR: dump_bytes(d->out, 's', (const uint8_t *)v->u.str.ptr, v->u.str.len); return;
    case CKPT_VAL_BYTES:
        n = ckpt_value_bytes_size(v);
        tmp = malloc(n ? n : 1);
        if (!tmp || ckpt_value_bytes_decode(v, 0, n, tmp) != 0)
            d->failed = 1;
        else
            dump_bytes(d->out, (v->flags & CKPT_BYTES_BYTEARRAY) ? 'a' : 'b', tmp, n);
        free(tmp);
        return;
    case CKPT_VAL_TUPLE: dump_seq(d, &v->u.seq, "(", ")", depth); return;
    case CKPT_VAL_LIST: dump_seq(d, &v->u.seq, "[", "]", depth); return;
    case CKPT_VAL_SET: dump_seq(d, &v->u.seq, "S{", "}", depth); return;
    case CKPT_VAL_FROZENSET: dump_seq(d, &v->u.seq, "Z{", "}", depth); return;
    case CKPT_VAL_DICT:
        if (v->u.dict.cls) {
            ckpt_buf_putc(d->out, 'D');
            dump_value(d, v->u.dict.cls, depth + 1);
        }
        dump_map(d, &v->u.dict.map, "{", depth);
        dump_state_suffix(d, v->u.dict.state, depth);
        return;
    case CKPT_VAL_GLOBAL: dump_global(d->out, v->u.global.module, v->u.global.name); return;
    case CKPT_VAL_OBJECT:
        ckpt_buf_puts(d->out, v->u.obj.how == CKPT_OBJ_REDUCE ? "R(" : v->u.obj.how == CKPT_OBJ_NEWOBJ ? "O(" : "X(");
        dump_value(d, v->u.obj.callable, depth + 1);
        ckpt_buf_putc(d->out, '|');
        if (v->u.obj.args)
            dump_value(d, v->u.obj.args, depth + 1);
        else
            ckpt_buf_puts(d->out, "()");
        if (v->u.obj.how == CKPT_OBJ_NEWOBJ_EX) {
            ckpt_buf_putc(d->out, '|');
            dump_value(d, v->u.obj.kwargs, depth + 1);
        }
        ckpt_buf_putc(d->out, ')');
        if (v->u.obj.list_items.n)
            dump_seq(d, &v->u.obj.list_items, "+[", "]", depth);
        if (v->u.obj.dict_items.n)
            dump_map(d, &v->u.obj.dict_items, "+{", depth);
        dump_state_suffix(d, v->u.obj.state, depth);
        return;
    case CKPT_VAL_PERSID:
        ckpt_buf_puts(d->out, "P(");
        dump_value(d, v->u.persid.pid, depth + 1);
        ckpt_buf_putc(d->out, ')');
        return;
    case CKPT_VAL_TENSOR: ckpt_buf_printf(d->out, "t%zu", v->u.tensor.index); return;
    }
    d->failed = 1;
}

static inline void dump_value(dump_state *d, const ckpt_value *v, int depth)
{
    size_t *slot;

    if (!v) {
        ckpt_buf_puts(d->out, "<null>");
        return;
    }
    if (depth > DUMP_MAX_DEPTH) {
        d->failed = 1;
        return;
    }
    if (!dump_shareable(v)) {
        dump_body(d, v, depth);
        return;
    }
    slot = dump_find(d, v, 0);
    if (slot && *slot) {
        if (d->refs)
            ckpt_buf_printf(d->out, "@%zu", *slot - 1);
        else
            ckpt_buf_putc(d->out, '^');
        return;
    }
    slot = dump_find(d, v, 1);
    *slot = d->refs ? ++d->next_id : 1;
    dump_body(d, v, depth);
    /* Expanded mode: only ancestors stay marked. */
    if (!d->refs)
        *dump_find(d, v, 1) = 0;
}

/* Append the dump of v to out; 0, or -1 when the tree could not be rendered. */
static inline int ckpt_test_dump(const ckpt_value *v, int refs, ckpt_buf *out)
{
    dump_state d;

    memset(&d, 0, sizeof d);
    d.out = out;
    d.refs = refs;
    dump_value(&d, v, 0);
    free(d.keys);
    free(d.ids);
    return d.failed ? -1 : 0;
}

#endif
