/* Value-tree nodes: constructors, sequences, dicts with Python key semantics, and
 * access to bytes stored as latin-1 text. Everything lives in the owner's arena;
 * growing arrays leave the old copy behind there, which doubling keeps within 2x. */
#include "value_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <string.h>

/* Dicts smaller than this are scanned; larger ones get a hash index. */
#define INDEX_MIN 8

typedef struct index_slot {
    uint64_t hash;
    size_t pos1; /* entry position + 1; 0 = empty */
} index_slot;

struct ckpt_value_map_index {
    size_t cap; /* slots, a power of two */
    size_t n;   /* entries indexed: keys[0..n) */
    index_slot slots[];
};

ckpt_value *ckpt_value_new(ckpt_arena *a, ckpt_value_kind kind)
{
    ckpt_value *v = ckpt_arena_alloc(a, sizeof *v);
    if (v)
        v->kind = kind;
    return v;
}

ckpt_value *ckpt_value_new_int(ckpt_arena *a, int64_t i)
{
    ckpt_value *v = ckpt_value_new(a, CKPT_VAL_INT);
    if (v)
        v->u.integer = i;
    return v;
}

ckpt_value *ckpt_value_new_float(ckpt_arena *a, double d)
{
    ckpt_value *v = ckpt_value_new(a, CKPT_VAL_FLOAT);
    if (v)
        v->u.real = d;
    return v;
}

ckpt_value *ckpt_value_new_bool(ckpt_arena *a, int b)
{
    ckpt_value *v = ckpt_value_new(a, CKPT_VAL_BOOL);
    if (v)
        v->u.boolean = b != 0;
    return v;
}

ckpt_value *ckpt_value_new_str(ckpt_arena *a, const char *s, size_t len)
{
    ckpt_value *v = ckpt_value_new(a, CKPT_VAL_STR);
    char *copy;

    if (!v || !(copy = ckpt_arena_strndup(a, s, len)))
        return NULL;
    v->u.str.ptr = copy;
    v->u.str.len = len;
    return v;
}

ckpt_value *ckpt_value_new_global(ckpt_arena *a, const char *module, const char *name)
{
    ckpt_value *v = ckpt_value_new(a, CKPT_VAL_GLOBAL);

    if (!v)
        return NULL;
    v->u.global.module = ckpt_arena_strndup(a, module, strlen(module));
    v->u.global.name = ckpt_arena_strndup(a, name, strlen(name));
    return v->u.global.module && v->u.global.name ? v : NULL;
}

ckpt_value *ckpt_value_new_tensor(ckpt_arena *a, size_t index)
{
    ckpt_value *v = ckpt_value_new(a, CKPT_VAL_TENSOR);
    if (v)
        v->u.tensor.index = index;
    return v;
}

/* Make room for one more element in an arena array of pointers. */
static int grow_ptrs(ckpt_arena *a, ckpt_value ***items, size_t n, size_t *cap)
{
    size_t new_cap, bytes;
    ckpt_value **p;

    if (n < *cap)
        return 0;
    new_cap = *cap ? *cap : 4;
    while (new_cap <= n)
        if (CKPT_MUL_OVERFLOWS(new_cap, (size_t)2, &new_cap))
            return ckpt_error_oom();
    if (CKPT_MUL_OVERFLOWS(new_cap, sizeof *p, &bytes))
        return ckpt_error_oom();
    p = ckpt_arena_alloc(a, bytes);
    if (!p)
        return CKPT_ENOMEM;
    if (n)
        memcpy(p, *items, n * sizeof *p);
    *items = p;
    *cap = new_cap;
    return 0;
}

int ckpt_value_append(ckpt_arena *a, ckpt_value *seq, ckpt_value *item)
{
    ckpt_value_seq *s;
    int rc;

    switch (seq->kind) {
    case CKPT_VAL_TUPLE: case CKPT_VAL_LIST: case CKPT_VAL_SET: case CKPT_VAL_FROZENSET:
        s = &seq->u.seq;
        break;
    case CKPT_VAL_OBJECT:
        s = &seq->u.obj.list_items;
        break;
    default:
        return ckpt_error_set(CKPT_EINVALID, "cannot append to a value of kind %d", (int)seq->kind);
    }
    if ((rc = grow_ptrs(a, &s->items, s->n, &s->cap)) != 0)
        return rc;
    s->items[s->n++] = item;
    return 0;
}

/* ---- keys: Python equality and a matching hash ---------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

/* Decoding cursor over a BYTES value (raw, or latin-1 code points stored as UTF-8). */
typedef struct bytes_cursor {
    const uint8_t *p, *end;
    int latin1;
} bytes_cursor;

static void cursor_init(bytes_cursor *c, const ckpt_value *v)
{
    c->p = v->u.bytes.ptr;
    c->end = c->p + v->u.bytes.len;
    c->latin1 = (v->flags & CKPT_BYTES_LATIN1_UTF8) != 0;
}

/* Next decoded byte, or -1 at the end, -2 on text that is not latin-1 UTF-8. */
static int cursor_next(bytes_cursor *c)
{
    uint8_t b;

    if (c->p >= c->end)
        return -1;
    b = *c->p++;
    if (!c->latin1 || b < 0x80)
        return b;
    if ((b != 0xC2 && b != 0xC3) || c->p >= c->end || (*c->p & 0xC0) != 0x80)
        return -2;
    return ((b & 0x03) << 6) | (*c->p++ & 0x3F);
}

/* A BIGINT without redundant sign-extension bytes at the top. */
static size_t bigint_min_len(const ckpt_value *v)
{
    const uint8_t *d = v->u.bigint.data;
    size_t n = v->u.bigint.len;

    while (n > 1 && ((d[n - 1] == 0x00 && !(d[n - 2] & 0x80)) || (d[n - 1] == 0xFF && (d[n - 2] & 0x80))))
        n--;
    return n;
}

static int is_numeric(const ckpt_value *v)
{
    return v->kind == CKPT_VAL_INT || v->kind == CKPT_VAL_BOOL || v->kind == CKPT_VAL_FLOAT;
}

/* An integral float within int64 range, as Python hashes it like the int. */
static int float_as_int(double d, int64_t *out)
{
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || floor(d) != d)
        return 0;
    *out = (int64_t)d;
    return 1;
}

static int64_t int_of(const ckpt_value *v)
{
    return v->kind == CKPT_VAL_BOOL ? (int64_t)v->u.boolean : v->u.integer;
}

static int numbers_equal(const ckpt_value *x, const ckpt_value *y)
{
    int64_t i;

    if (x->kind == CKPT_VAL_FLOAT && y->kind == CKPT_VAL_FLOAT)
        return x->u.real == y->u.real;
    if (x->kind == CKPT_VAL_FLOAT)
        return float_as_int(x->u.real, &i) && i == int_of(y);
    if (y->kind == CKPT_VAL_FLOAT)
        return float_as_int(y->u.real, &i) && i == int_of(x);
    return int_of(x) == int_of(y);
}

static int bytes_equal(const ckpt_value *x, const ckpt_value *y)
{
    bytes_cursor cx, cy;
    int a, b;

    if (!(x->flags & CKPT_BYTES_LATIN1_UTF8) && !(y->flags & CKPT_BYTES_LATIN1_UTF8))
        return x->u.bytes.len == y->u.bytes.len &&
               (x->u.bytes.len == 0 || memcmp(x->u.bytes.ptr, y->u.bytes.ptr, x->u.bytes.len) == 0);
    if (ckpt_value_bytes_size(x) != ckpt_value_bytes_size(y))
        return 0;
    cursor_init(&cx, x);
    cursor_init(&cy, y);
    do {
        a = cursor_next(&cx);
        b = cursor_next(&cy);
        if (a != b || a == -2)
            return 0;
    } while (a != -1);
    return 1;
}

static int keys_equal(const ckpt_value *x, const ckpt_value *y)
{
    size_t nx, ny;

    if (x == y)
        return 1;
    if (is_numeric(x) && is_numeric(y))
        return numbers_equal(x, y);
    if (x->kind != y->kind)
        return 0;
    switch (x->kind) {
    case CKPT_VAL_NONE:
        return 1;
    case CKPT_VAL_STR:
        return x->u.str.len == y->u.str.len &&
               (x->u.str.len == 0 || memcmp(x->u.str.ptr, y->u.str.ptr, x->u.str.len) == 0);
    case CKPT_VAL_BYTES:
        return bytes_equal(x, y);
    case CKPT_VAL_BIGINT:
        nx = bigint_min_len(x);
        ny = bigint_min_len(y);
        return nx == ny && memcmp(x->u.bigint.data, y->u.bigint.data, nx) == 0;
    case CKPT_VAL_GLOBAL:
        /* Loading a global twice gives the same object. */
        return strcmp(x->u.global.name, y->u.global.name) == 0 &&
               strcmp(ckpt_value__py3_module(x->u.global.module), ckpt_value__py3_module(y->u.global.module)) == 0;
    default:
        return 0;
    }
}

uint64_t ckpt_value__key_hash(const ckpt_value *key)
{
    const char *module;
    uint64_t bits, h;
    int64_t i;
    bytes_cursor c;
    int b;

    switch (key->kind) {
    case CKPT_VAL_NONE:
        return 0x9e3779b97f4a7c15ull;
    case CKPT_VAL_BOOL: case CKPT_VAL_INT:
        return mix64((uint64_t)int_of(key));
    case CKPT_VAL_FLOAT:
        if (float_as_int(key->u.real, &i))
            return mix64((uint64_t)i);
        memcpy(&bits, &key->u.real, sizeof bits);
        return mix64(bits ^ 0x5555555555555555ull);
    case CKPT_VAL_STR:
        return fnv(FNV_OFFSET, (const uint8_t *)key->u.str.ptr, key->u.str.len);
    case CKPT_VAL_BIGINT:
        return fnv(FNV_OFFSET ^ 1, key->u.bigint.data, bigint_min_len(key));
    case CKPT_VAL_GLOBAL:
        module = ckpt_value__py3_module(key->u.global.module);
        h = fnv(FNV_OFFSET ^ 3, (const uint8_t *)module, strlen(module));
        return fnv(h ^ '\n', (const uint8_t *)key->u.global.name, strlen(key->u.global.name));
    case CKPT_VAL_BYTES:
        if (!(key->flags & CKPT_BYTES_LATIN1_UTF8))
            return fnv(FNV_OFFSET ^ 2, key->u.bytes.ptr, key->u.bytes.len);
        h = FNV_OFFSET ^ 2;
        cursor_init(&c, key);
        while ((b = cursor_next(&c)) >= 0)
            h = (h ^ (uint64_t)b) * FNV_PRIME;
        return h;
    default:
        return mix64((uint64_t)(uintptr_t)key);
    }
}

/* ---- dict entries ------------------------------------------------------------- */

static ckpt_value_map *map_of(ckpt_value *v)
{
    if (v->kind == CKPT_VAL_DICT)
        return &v->u.dict.map;
    if (v->kind == CKPT_VAL_OBJECT)
        return &v->u.obj.dict_items;
    return NULL;
}

static void index_insert(ckpt_value_map_index *ix, uint64_t hash, size_t pos)
{
    size_t j;
    for (j = (size_t)hash & (ix->cap - 1); ix->slots[j].pos1; j = (j + 1) & (ix->cap - 1))
        ;
    ix->slots[j].hash = hash;
    ix->slots[j].pos1 = pos + 1;
    ix->n++;
}

/* Make the index cover keys[0..m->n) with room for one more entry. */
static int index_prepare(ckpt_arena *a, ckpt_value_map *m)
{
    ckpt_value_map_index *old = m->index, *ix;
    size_t cap = old ? old->cap : 16, bytes, i;

    while ((m->n + 1) * 2 > cap)
        if (CKPT_MUL_OVERFLOWS(cap, (size_t)2, &cap))
            return ckpt_error_oom();
    if (!old || cap != old->cap) {
        if (CKPT_MUL_OVERFLOWS(cap, sizeof(index_slot), &bytes) ||
            CKPT_ADD_OVERFLOWS(bytes, sizeof *ix, &bytes))
            return ckpt_error_oom();
        ix = ckpt_arena_alloc(a, bytes);
        if (!ix)
            return CKPT_ENOMEM;
        ix->cap = cap;
        if (old) {
            for (i = 0; i < old->cap; i++)
                if (old->slots[i].pos1)
                    index_insert(ix, old->slots[i].hash, old->slots[i].pos1 - 1);
        }
        m->index = ix;
    }
    for (i = m->index->n; i < m->n; i++)
        index_insert(m->index, ckpt_value__key_hash(m->keys[i]), i);
    return 0;
}

/* Position of an entry equal to key, or SIZE_MAX. */
static size_t map_find(const ckpt_value_map *m, const ckpt_value *key, uint64_t hash)
{
    const ckpt_value_map_index *ix = m->index;
    size_t i = 0, j;

    if (ix) {
        for (j = (size_t)hash & (ix->cap - 1); ix->slots[j].pos1; j = (j + 1) & (ix->cap - 1))
            if (ix->slots[j].hash == hash && keys_equal(m->keys[ix->slots[j].pos1 - 1], key))
                return ix->slots[j].pos1 - 1;
        i = ix->n;
    }
    for (; i < m->n; i++)
        if (keys_equal(m->keys[i], key))
            return i;
    return SIZE_MAX;
}

int ckpt_value__dict_set_hashed(ckpt_arena *a, ckpt_value *dict, ckpt_value *key, uint64_t hash,
                                ckpt_value *val)
{
    ckpt_value_map *m = map_of(dict);
    size_t pos;
    int rc;

    if (!m)
        return ckpt_error_set(CKPT_EINVALID, "cannot set an item on a value of kind %d", (int)dict->kind);
    if (m->n + 1 >= INDEX_MIN && (rc = index_prepare(a, m)) != 0)
        return rc;
    pos = map_find(m, key, hash);
    if (pos != SIZE_MAX) {
        m->vals[pos] = val;
        return 0;
    }
    if (m->n == m->cap) {
        size_t kcap = m->cap, vcap = m->cap;
        if ((rc = grow_ptrs(a, &m->keys, m->n, &kcap)) != 0 || (rc = grow_ptrs(a, &m->vals, m->n, &vcap)) != 0)
            return rc;
        m->cap = kcap;
    }
    m->keys[m->n] = key;
    m->vals[m->n] = val;
    if (m->index)
        index_insert(m->index, hash, m->n);
    m->n++;
    return 0;
}

int ckpt_value_dict_set(ckpt_arena *a, ckpt_value *dict, ckpt_value *key, ckpt_value *val)
{
    return ckpt_value__dict_set_hashed(a, dict, key, ckpt_value__key_hash(key), val);
}

ckpt_value *ckpt_value_dict_get(const ckpt_value *dict, const char *key)
{
    ckpt_value probe;
    size_t pos;

    if (!dict || dict->kind != CKPT_VAL_DICT)
        return NULL;
    memset(&probe, 0, sizeof probe);
    probe.kind = CKPT_VAL_STR;
    probe.u.str.ptr = key;
    probe.u.str.len = strlen(key);
    pos = map_find(&dict->u.dict.map, &probe, ckpt_value__key_hash(&probe));
    return pos == SIZE_MAX ? NULL : dict->u.dict.map.vals[pos];
}

/* ---- predicates and bytes -------------------------------------------------------- */

int ckpt_value_is_str(const ckpt_value *v, const char *s)
{
    size_t n = strlen(s);
    return v && v->kind == CKPT_VAL_STR && v->u.str.len == n && memcmp(v->u.str.ptr, s, n) == 0;
}

const char *ckpt_value__py3_module(const char *module)
{
    if (strcmp(module, "__builtin__") == 0)
        return "builtins";
    if (strcmp(module, "copy_reg") == 0)
        return "copyreg";
    return module;
}

int ckpt_value_is_global(const ckpt_value *v, const char *module, const char *name)
{
    return v && v->kind == CKPT_VAL_GLOBAL && strcmp(v->u.global.name, name) == 0 &&
           strcmp(ckpt_value__py3_module(v->u.global.module), ckpt_value__py3_module(module)) == 0;
}

size_t ckpt_value_bytes_size(const ckpt_value *v)
{
    if (!v || v->kind != CKPT_VAL_BYTES)
        return 0;
    return (v->flags & CKPT_BYTES_LATIN1_UTF8) ? v->u.bytes.decoded_len : v->u.bytes.len;
}

/* Decode latin-1 text: skip `skip` bytes, then produce `len` into out. Eight ASCII bytes
 * at a time where possible; NULL on text that is not latin-1 UTF-8 or too short. */
static const uint8_t *latin1_decode(const uint8_t *p, const uint8_t *end, size_t skip, uint8_t *out, size_t len)
{
    size_t total = skip + len, done = 0;
    uint64_t w;

    while (done < total) {
        if (end - p >= 8 && total - done >= 8) {
            memcpy(&w, p, sizeof w);
            if (!(w & 0x8080808080808080ull)) {
                if (done >= skip)
                    memcpy(out + (done - skip), p, 8);
                else if (done + 8 > skip)
                    memcpy(out, p + (skip - done), done + 8 - skip);
                p += 8;
                done += 8;
                continue;
            }
        }
        if (p >= end)
            return NULL;
        if (*p < 0x80) {
            if (done >= skip)
                out[done - skip] = *p;
            p++;
        } else {
            if ((*p & 0xFE) != 0xC2 || end - p < 2 || (p[1] & 0xC0) != 0x80)
                return NULL;
            if (done >= skip)
                out[done - skip] = (uint8_t)(((p[0] & 0x03) << 6) | (p[1] & 0x3F));
            p += 2;
        }
        done++;
    }
    return p;
}

int ckpt_value_bytes_decode(const ckpt_value *v, size_t off, size_t len, void *dst)
{
    size_t size;

    if (!v || v->kind != CKPT_VAL_BYTES)
        return ckpt_error_set(CKPT_EINVALID, "bytes_decode on a value that is not bytes");
    size = ckpt_value_bytes_size(v);
    if (off > size || len > size - off)
        return ckpt_error_set(CKPT_EINVALID, "bytes range [%zu, +%zu) beyond %zu bytes", off, len, size);
    if (!(v->flags & CKPT_BYTES_LATIN1_UTF8)) {
        if (len)
            memcpy(dst, v->u.bytes.ptr + off, len);
        return 0;
    }
    if (!latin1_decode(v->u.bytes.ptr, v->u.bytes.ptr + v->u.bytes.len, off, dst, len))
        return ckpt_error_set(CKPT_EFORMAT, "bytes stored as latin-1 text are malformed or shorter than %zu", size);
    return 0;
}
