/* Writing .pdparams/.pdopt as paddle.save does: one pickle (protocol 4 by default, or 2;
 * the pickler writes no other) of a dict whose tensors are numpy arrays, each reduced
 * exactly as numpy reduces an ndarray:
 *   numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b') BUILD
 *   (1, shape, numpy.dtype(typestr, False, True) BUILD (3, '<'|'|', None, None, None,
 *    -1, -1, 0), False, data)
 * The data is a hole in the pickle that the engine fills with the tensor bytes: raw
 * under protocol 4, latin-1 text under protocol 2 (`_codecs.encode(s, 'latin1')`).
 *
 * With a value tree (a paddle file written back) the tree is pickled as it is, so that
 * e.g. LR_Scheduler and the (name, array) pairs of master_weights survive; otherwise the
 * tensors go into a plain dict, name -> array, which paddle.load takes without a name
 * table. bfloat16 is written as uint16 bit patterns, as paddle does. Under protocol 2
 * top-level arrays above paddle's limit are split into parts exactly like paddle.save
 * (see pdparams_private.h); each part is a byte range of the same blob. */
#include <ckpt/sys/common.h>
#include <ckpt/sys/format.h>
#include <ckpt/sys/pickle.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdparams_private.h"

#define PW_OP_REDUCE 'R'
#define PW_OP_BUILD 'b'
#define PW_PART_NAME_MAX 32

typedef struct pw_data { /* the bytes of one array: one hole in the pickle */
    size_t blob;
    uint64_t blob_off, len; /* blob bytes; under protocol 2 the hole holds their UTF-8 form */
} pw_data;

typedef struct pw_part { /* TENSOR node index n_tensors + i: a part of a split tensor */
    size_t tensor;
    int64_t first, count; /* elements */
} pw_part;

typedef struct pw_state {
    ckpt_writer *w;
    const ckpt_out *out;
    const char *path;
    int protocol;
    ckpt_arena *arena;
    ckpt_pickler *p;
    pw_part *parts;
    size_t n_parts;
    pw_data *data;
    size_t n_data, cap_data;
} pw_state;

/* numpy's kind + itemsize; NULL for types numpy cannot hold. */
static const char *pw_typestr(ckpt_dtype t)
{
    switch (t) {
    case CKPT_DTYPE_F64: return "f8";
    case CKPT_DTYPE_F32: return "f4";
    case CKPT_DTYPE_F16: return "f2";
    case CKPT_DTYPE_BF16: return "u2";
    case CKPT_DTYPE_U16: return "u2";
    case CKPT_DTYPE_I8: return "i1";
    case CKPT_DTYPE_I16: return "i2";
    case CKPT_DTYPE_I32: return "i4";
    case CKPT_DTYPE_I64: return "i8";
    case CKPT_DTYPE_U8: return "u1";
    case CKPT_DTYPE_U32: return "u4";
    case CKPT_DTYPE_U64: return "u8";
    case CKPT_DTYPE_BOOL: return "b1";
    case CKPT_DTYPE_C64: return "c8";
    case CKPT_DTYPE_C128: return "c16";
    default: return NULL;
    }
}

static int64_t pw_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    int d;
    for (d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* The engine hands formats without CKPT_FORMAT_VIEWS dense C-order tensors; a writer that
 * trusted anything else would write wrong bytes, so say so instead. */
static int pw_check_tensor(const pw_state *s, const ckpt_out_tensor *t)
{
    const char *ts = pw_typestr(t->dtype);
    int64_t numel = pw_numel(t->ndim, t->shape), expect = 1;
    size_t item = ckpt_dtype_size(t->dtype);
    int d;

    if (!t->name)
        return ckpt_error_set(CKPT_EINVALID, "%s: tensor without a name", s->path);
    if (!ts && (t->dtype == CKPT_DTYPE_F8_E4M3FN || t->dtype == CKPT_DTYPE_F8_E5M2))
        return ckpt_error_set(CKPT_EUNSUPPORTED,
                              "%s: %s tensors have no numpy form, so paddle cannot load them; convert them with "
                              "--dtype bf16 (or fp16, fp32) (%s)",
                              s->path, ckpt_dtype_name(t->dtype), t->name);
    if (!ts)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: dtype %s cannot be written to a paddle file (%s)", s->path,
                              ckpt_dtype_name(t->dtype), t->name);
    if (t->blob >= s->out->n_blobs || s->out->blobs[t->blob].dtype != t->dtype || t->offset < 0)
        return ckpt_error_set(CKPT_EINVALID, "%s: tensor has no blob of its dtype (%s)", s->path, t->name);
    if (numel && (uint64_t)(t->offset + numel) * item > s->out->blobs[t->blob].nbytes)
        return ckpt_error_set(CKPT_EINVALID, "%s: tensor lies outside its blob (%s)", s->path, t->name);
    for (d = t->ndim - 1; numel && d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != expect)
            return ckpt_error_set(CKPT_EINVALID, "%s: tensor is not C-contiguous (%s)", s->path, t->name);
        expect *= t->shape[d];
    }
    return 0;
}

static void *pw_alloc_array(ckpt_arena *a, size_t n, size_t size)
{
    size_t bytes;
    if (CKPT_MUL_OVERFLOWS(n, size, &bytes)) {
        ckpt_error_oom();
        return NULL;
    }
    return ckpt_arena_alloc(a, bytes ? bytes : 1);
}

static ckpt_value *pw_new_dict(ckpt_arena *a, size_t cap)
{
    ckpt_value *d = ckpt_value_new(a, CKPT_VAL_DICT);
    if (!d)
        return NULL;
    d->u.dict.map.keys = pw_alloc_array(a, cap, sizeof *d->u.dict.map.keys);
    d->u.dict.map.vals = pw_alloc_array(a, cap, sizeof *d->u.dict.map.vals);
    if (!d->u.dict.map.keys || !d->u.dict.map.vals)
        return NULL;
    d->u.dict.map.cap = cap;
    return d;
}

/* Keys are unique by construction, so entries go in directly. */
static void pw_put(ckpt_value *dict, ckpt_value *key, ckpt_value *val)
{
    ckpt_value_map *m = &dict->u.dict.map;
    CKPT_ASSERT(m->n < m->cap);
    m->keys[m->n] = key;
    m->vals[m->n++] = val;
}

/* Tensors from a format without a value tree: {name: array} in table order. */
static int pw_flat_root(pw_state *s, const ckpt_value **out)
{
    ckpt_value *root = pw_new_dict(s->arena, s->out->n_tensors);
    size_t i;

    if (!root)
        return ckpt_error_oom();
    for (i = 0; i < s->out->n_tensors; i++) {
        const char *name = s->out->tensors[i].name;
        ckpt_value *k = ckpt_value_new_str(s->arena, name, strlen(name));
        ckpt_value *v = ckpt_value_new_tensor(s->arena, i);
        if (!k || !v)
            return ckpt_error_oom();
        pw_put(root, k, v);
    }
    *out = root;
    return 0;
}

/* Elements of paddle's largest part for this dtype; the tensor splits when it has more. */
static int64_t pw_split_limit(ckpt_dtype t)
{
    return (int64_t)(PDPARAMS_SPLIT_LIMIT_BYTES / ckpt_dtype_size(t));
}

static const ckpt_out_tensor *pw_big(const pw_state *s, const ckpt_value *key, const ckpt_value *v, int64_t *n_parts)
{
    const ckpt_out_tensor *t;
    int64_t numel, limit;

    if (key->kind != CKPT_VAL_STR || v->kind != CKPT_VAL_TENSOR || v->u.tensor.index >= s->out->n_tensors)
        return NULL;
    t = &s->out->tensors[v->u.tensor.index];
    numel = pw_numel(t->ndim, t->shape);
    limit = pw_split_limit(t->dtype);
    if (numel <= limit)
        return NULL;
    *n_parts = (numel + limit - 1) / limit;
    return t;
}

static int pw_split_entry(pw_state *s, ckpt_value *root, ckpt_value *info, ckpt_value *key,
                          const ckpt_out_tensor *t, int64_t n_parts)
{
    ckpt_value *entry = pw_new_dict(s->arena, 2), *shape = ckpt_value_new(s->arena, CKPT_VAL_TUPLE);
    ckpt_value *slices = ckpt_value_new(s->arena, CKPT_VAL_LIST), *k;
    int64_t numel = pw_numel(t->ndim, t->shape), limit = pw_split_limit(t->dtype), i;
    char name[PW_PART_NAME_MAX];
    int d, rc;

    if (!entry || !shape || !slices)
        return ckpt_error_oom();
    for (d = 0; d < t->ndim; d++) {
        ckpt_value *dim = ckpt_value_new_int(s->arena, t->shape[d]);
        if (!dim)
            return ckpt_error_oom();
        if ((rc = ckpt_value_append(s->arena, shape, dim)) < 0)
            return rc;
    }
    for (i = 0; i < n_parts; i++) {
        ckpt_value *part_key, *part;
        pw_part *pp = &s->parts[s->n_parts];
        char *full;
        size_t len;
        snprintf(name, sizeof name, PDPARAMS_SPLIT_PART_SEP "%lld", (long long)i);
        len = key->u.str.len + strlen(name);
        full = ckpt_arena_alloc(s->arena, len + 1);
        if (!full)
            return ckpt_error_oom();
        memcpy(full, key->u.str.ptr, key->u.str.len);
        memcpy(full + key->u.str.len, name, strlen(name) + 1);
        part_key = ckpt_value_new_str(s->arena, full, len);
        part = ckpt_value_new_tensor(s->arena, s->out->n_tensors + s->n_parts);
        if (!part_key || !part)
            return ckpt_error_oom();
        pp->tensor = (size_t)(t - s->out->tensors);
        pp->first = i * limit;
        pp->count = numel - pp->first < limit ? numel - pp->first : limit;
        s->n_parts++;
        pw_put(root, part_key, part);
        if ((rc = ckpt_value_append(s->arena, slices, part_key)) < 0)
            return rc;
    }
    if (!(k = ckpt_value_new_str(s->arena, PDPARAMS_SPLIT_SHAPE_KEY, strlen(PDPARAMS_SPLIT_SHAPE_KEY))))
        return ckpt_error_oom();
    pw_put(entry, k, shape);
    if (!(k = ckpt_value_new_str(s->arena, PDPARAMS_SPLIT_SLICES_KEY, strlen(PDPARAMS_SPLIT_SLICES_KEY))))
        return ckpt_error_oom();
    pw_put(entry, k, slices);
    pw_put(info, key, entry);
    return 0;
}

/* Under protocol 2, a copy of the root dict with the big arrays moved to parts at
 * the end and the info entry last, in paddle.save's order. */
static int pw_split_root(pw_state *s, const ckpt_value *root, const ckpt_value **out)
{
    const ckpt_value_map *m = &root->u.dict.map;
    ckpt_value *copy, *info, *info_key;
    size_t i, n_big = 0, n_parts = 0, cap;
    int64_t parts;
    int rc;

    *out = root;
    for (i = 0; i < m->n; i++)
        if (pw_big(s, m->keys[i], m->vals[i], &parts)) {
            n_big++;
            n_parts += (size_t)parts;
        }
    if (!n_big)
        return 0;
    cap = m->n - n_big + n_parts + 1;
    copy = pw_new_dict(s->arena, cap);
    info = pw_new_dict(s->arena, n_big);
    info_key = ckpt_value_new_str(s->arena, PDPARAMS_SPLIT_INFO_KEY, strlen(PDPARAMS_SPLIT_INFO_KEY));
    s->parts = calloc(n_parts, sizeof *s->parts);
    if (!copy || !info || !info_key || !s->parts)
        return ckpt_error_oom();
    copy->u.dict.cls = root->u.dict.cls;
    copy->u.dict.state = root->u.dict.state;
    for (i = 0; i < m->n; i++)
        if (!pw_big(s, m->keys[i], m->vals[i], &parts))
            pw_put(copy, m->keys[i], m->vals[i]);
    for (i = 0; i < m->n; i++) {
        const ckpt_out_tensor *t = pw_big(s, m->keys[i], m->vals[i], &parts);
        if (t && (rc = pw_split_entry(s, copy, info, m->keys[i], t, parts)) < 0)
            return rc;
    }
    pw_put(copy, info_key, info);
    *out = copy;
    return 0;
}

static int pw_shape(ckpt_pickler *p, int ndim, const int64_t *shape)
{
    int d, rc;
    if ((rc = ckpt_pickler_mark(p)) < 0)
        return rc;
    for (d = 0; d < ndim; d++)
        if ((rc = ckpt_pickler_int(p, shape[d])) < 0)
            return rc;
    return ckpt_pickler_tuple(p, (size_t)ndim);
}

static int pw_dtype(ckpt_pickler *p, ckpt_dtype t)
{
    const char *ts = pw_typestr(t), *endian = ckpt_dtype_size(t) == 1 ? "|" : "<";
    int rc;

    if ((rc = ckpt_pickler_global(p, "numpy", "dtype")) < 0 || (rc = ckpt_pickler_mark(p)) < 0 ||
        (rc = ckpt_pickler_str(p, ts, strlen(ts))) < 0 || (rc = ckpt_pickler_bool(p, 0)) < 0 ||
        (rc = ckpt_pickler_bool(p, 1)) < 0 || (rc = ckpt_pickler_tuple(p, 3)) < 0 ||
        (rc = ckpt_pickler_op(p, PW_OP_REDUCE)) < 0)
        return rc;
    if ((rc = ckpt_pickler_mark(p)) < 0 || (rc = ckpt_pickler_int(p, 3)) < 0 ||
        (rc = ckpt_pickler_str(p, endian, 1)) < 0 || (rc = ckpt_pickler_none(p)) < 0 ||
        (rc = ckpt_pickler_none(p)) < 0 || (rc = ckpt_pickler_none(p)) < 0 || (rc = ckpt_pickler_int(p, -1)) < 0 ||
        (rc = ckpt_pickler_int(p, -1)) < 0 || (rc = ckpt_pickler_int(p, 0)) < 0 ||
        (rc = ckpt_pickler_tuple(p, 8)) < 0)
        return rc;
    return ckpt_pickler_op(p, PW_OP_BUILD);
}

/* One ndarray whose data is bytes [off, off+len) of the tensor's blob. */
static int pw_array(pw_state *s, ckpt_pickler *p, const ckpt_out_tensor *t, int ndim, const int64_t *shape,
                    uint64_t off, uint64_t len)
{
    pw_data *d;
    uint64_t hole = len;
    int rc;

    if (s->protocol == 2 && (rc = ckpt_writer_encoded_size(s->w, t->blob, off, len, &hole)) < 0)
        return rc;
    if (s->protocol < 4 && hole > UINT32_MAX)
        return ckpt_error_set(CKPT_EUNSUPPORTED,
                              "%s: tensor needs %llu bytes in one pickle object, more than protocol %d can hold; "
                              "write protocol 4 (%s)",
                              s->path, (unsigned long long)hole, s->protocol, t->name);
    if (s->n_data == s->cap_data) {
        size_t cap = s->cap_data ? s->cap_data * 2 : 64;
        pw_data *grown = realloc(s->data, cap * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        s->data = grown;
        s->cap_data = cap;
    }
    d = &s->data[s->n_data];
    d->blob = t->blob;
    d->blob_off = off;
    d->len = len;
    if ((rc = ckpt_pickler_global(p, "numpy.core.multiarray", "_reconstruct")) < 0 ||
        (rc = ckpt_pickler_mark(p)) < 0 || (rc = ckpt_pickler_global(p, "numpy", "ndarray")) < 0 ||
        (rc = ckpt_pickler_mark(p)) < 0 || (rc = ckpt_pickler_int(p, 0)) < 0 || (rc = ckpt_pickler_tuple(p, 1)) < 0 ||
        (rc = ckpt_pickler_bytes(p, "b", 1)) < 0 || (rc = ckpt_pickler_tuple(p, 3)) < 0 ||
        (rc = ckpt_pickler_op(p, PW_OP_REDUCE)) < 0)
        return rc;
    if ((rc = ckpt_pickler_mark(p)) < 0 || (rc = ckpt_pickler_int(p, 1)) < 0 || (rc = pw_shape(p, ndim, shape)) < 0 ||
        (rc = pw_dtype(p, t->dtype)) < 0 || (rc = ckpt_pickler_bool(p, 0)) < 0 ||
        (rc = ckpt_pickler_bytes_hole(p, hole, (void *)(uintptr_t)s->n_data)) < 0 ||
        (rc = ckpt_pickler_tuple(p, 5)) < 0)
        return rc;
    s->n_data++;
    return ckpt_pickler_op(p, PW_OP_BUILD);
}

static int pw_tensor(ckpt_pickler *p, const ckpt_value *v, void *payload)
{
    pw_state *s = payload;
    size_t index = v->u.tensor.index, n = s->out->n_tensors;
    const ckpt_out_tensor *t;
    uint64_t item;

    if (index < n) {
        t = &s->out->tensors[index];
        item = ckpt_dtype_size(t->dtype);
        return pw_array(s, p, t, t->ndim, t->shape, (uint64_t)t->offset * item,
                        (uint64_t)pw_numel(t->ndim, t->shape) * item);
    }
    if (index - n < s->n_parts) {
        const pw_part *part = &s->parts[index - n];
        t = &s->out->tensors[part->tensor];
        item = ckpt_dtype_size(t->dtype);
        return pw_array(s, p, t, 1, &part->count, (uint64_t)(t->offset + part->first) * item,
                        (uint64_t)part->count * item);
    }
    return ckpt_error_set(CKPT_EINVALID, "%s: value tree refers to tensor #%zu of %zu", s->path, index, n);
}

static int pw_write(uint64_t offset, const void *data, size_t len, void *payload)
{
    return ckpt_outfile_pwrite(payload, offset, data, len);
}

int ckpt_pdparams__write_begin(ckpt_writer *w)
{
    const ckpt_convert_options *opts = ckpt_writer_options(w);
    const ckpt_value *root;
    pw_state *s;
    size_t i;
    int rc, u16 = 0;

    s = calloc(1, sizeof *s);
    if (!s)
        return ckpt_error_oom();
    *ckpt_writer_state(w) = s;
    s->w = w;
    s->out = ckpt_writer_out(w);
    s->path = ckpt_writer_path(w);
    s->protocol = opts && opts->protocol ? opts->protocol : 4;
    if (s->protocol < 2 || s->protocol > 4)
        return ckpt_error_set(CKPT_EINVALID, "%s: paddle.save writes pickle protocol 2, 3 or 4, not %d", s->path,
                              s->protocol);
    for (i = 0; i < s->out->n_tensors; i++) {
        if ((rc = pw_check_tensor(s, &s->out->tensors[i])) < 0)
            return rc;
        u16 |= s->out->tensors[i].dtype == CKPT_DTYPE_U16;
    }
    if (u16)
        ckpt_writer_note(w, "uint16 tensors are stored as numpy uint16, which paddle.load reads as bfloat16");
    if ((rc = ckpt_arena_new(&s->arena)) < 0)
        return rc;
    root = s->out->root;
    if (!root && (rc = pw_flat_root(s, &root)) < 0)
        return rc;
    if (s->protocol < 4 && root->kind == CKPT_VAL_DICT && (rc = pw_split_root(s, root, &root)) < 0)
        return rc;
    if ((rc = ckpt_pickler_new(&s->p, s->protocol, pw_tensor, s)) < 0) {
        ckpt_error_prefix("%s", s->path);
        return rc;
    }
    if ((rc = ckpt_pickler_begin(s->p)) < 0 || (rc = ckpt_pickler_value(s->p, root)) < 0 ||
        (rc = ckpt_pickler_end(s->p)) < 0)
        return rc;
    for (i = 0; i < ckpt_pickler_hole_count(s->p); i++) {
        const ckpt_pickle_hole *h = ckpt_pickler_hole_at(s->p, i);
        const pw_data *d = &s->data[(uintptr_t)h->tag];
        rc = ckpt_writer_place(w, d->blob, d->blob_off, d->len, h->offset,
                               s->protocol == 2 ? CKPT_EXTENT_LATIN1_UTF8 : CKPT_EXTENT_RAW);
        if (rc < 0)
            return rc;
    }
    return ckpt_pickler_emit(s->p, pw_write, ckpt_writer_file(w));
}

void ckpt_pdparams__write_free(ckpt_writer *w)
{
    void **slot = ckpt_writer_state(w);
    pw_state *s = *slot;

    if (!s)
        return;
    ckpt_pickler_free(s->p);
    ckpt_arena_free(s->arena);
    free(s->parts);
    free(s->data);
    free(s);
    *slot = NULL;
}
