/* PaddlePaddle checkpoints (.pdparams, .pdopt): one pickle, as paddle.save writes it, of a
 * dict whose tensors are numpy arrays.
 *
 * Reading runs the safe pickle VM over the whole mapped file and turns every numpy array
 * construction (numpy's _reconstruct + BUILD, or _frombuffer under protocol 5) into a
 * TENSOR node in place, keeping the construction as the node's source. The array bytes
 * stay where they are in the file: a RAW extent, or under protocol 2 a LATIN1_UTF8 extent
 * over the latin-1 text that `_codecs.encode` wraps them in.
 *
 * Names: an array is named by its key path, which for a state dict is its key. The pairs
 * `(paddle_name, array)` that paddle.save writes when a dict nests tensors (e.g.
 * "master_weights" in a .pdopt) stay in the tree as they are, so that array is
 * `master_weights/linear_0.w_0/1`; the paddle name is the pair's first item.
 *
 * Arrays that paddle.save cut into parts come back whole (pdparams_split.c). uint16
 * arrays are read as bfloat16, as paddle.load does: paddle writes bfloat16 as uint16 bit
 * patterns and the file cannot tell the two apart. */
#include <ckpt/sys/common.h>
#include <ckpt/sys/format.h>
#include <ckpt/sys/pickle.h>

#include <stdlib.h>
#include <string.h>

#include "pdparams_private.h"

#define PD_MAX_DEPTH 512
#define PD_SNIFF_BYTES 1024
/* Reading at an offset inside a latin-1 text extent decodes the text from the start of the
 * extent, so reading a long one chunk by chunk would take quadratic time: such extents are
 * cut every this many decoded bytes. */
#define PD_LATIN1_WINDOW ((uint64_t)1 << 20)

static const struct {
    const char *typestr;
    ckpt_dtype dtype;
} pd_types[] = {
    { "f8", CKPT_DTYPE_F64 }, { "f4", CKPT_DTYPE_F32 },  { "f2", CKPT_DTYPE_F16 },
    { "u2", CKPT_DTYPE_BF16 }, { "i1", CKPT_DTYPE_I8 },  { "i2", CKPT_DTYPE_I16 },
    { "i4", CKPT_DTYPE_I32 }, { "i8", CKPT_DTYPE_I64 },  { "u1", CKPT_DTYPE_U8 },
    { "u4", CKPT_DTYPE_U32 }, { "u8", CKPT_DTYPE_U64 },  { "b1", CKPT_DTYPE_BOOL },
    { "c8", CKPT_DTYPE_C64 }, { "c16", CKPT_DTYPE_C128 },
};

const char *ckpt_pdparams__key(const char *name)
{
    return name && name[0] ? name : "<root>";
}

static int pd_is_numpy_global(const ckpt_value *g, const char *submodule, const char *name)
{
    static const char *const prefixes[] = { "numpy.core.", "numpy._core." };
    size_t i, n;

    if (!g || g->kind != CKPT_VAL_GLOBAL || strcmp(g->u.global.name, name) != 0)
        return 0;
    for (i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        n = strlen(prefixes[i]);
        if (strncmp(g->u.global.module, prefixes[i], n) == 0 && strcmp(g->u.global.module + n, submodule) == 0)
            return 1;
    }
    return 0;
}

static int pd_is_reconstruct(const ckpt_value *v)
{
    return pd_is_numpy_global(v->u.obj.callable, "multiarray", "_reconstruct");
}

static int pd_is_array(const ckpt_value *v)
{
    if (!v || v->kind != CKPT_VAL_OBJECT || v->u.obj.how != CKPT_OBJ_REDUCE)
        return 0;
    return pd_is_reconstruct(v) || pd_is_numpy_global(v->u.obj.callable, "numeric", "_frombuffer");
}

static int pd_check_global(ckpt_pd_open *o, const ckpt_value *g, const char *path)
{
    const char *m = g->u.global.module, *n = g->u.global.name;

    if ((strcmp(m, "builtins") == 0 || strcmp(m, "__builtin__") == 0) && strcmp(n, "eval") == 0)
        return ckpt_error_set(CKPT_EUNSUPPORTED,
                              "%s: static-graph LoDTensor entry (pickled as builtins.eval) is not supported; "
                              "save the tensor from dygraph mode or as a numpy array (%s)",
                              o->path, ckpt_pdparams__key(path));
    if (strncmp(m, "paddle", 6) == 0 && (m[6] == '\0' || m[6] == '.'))
        return ckpt_error_set(CKPT_EUNSUPPORTED,
                              "%s: %s.%s object is not a numpy array; only tensors stored the way paddle.save "
                              "stores them can be read (%s)",
                              o->path, m, n, ckpt_pdparams__key(path));
    return 0;
}

/* items with room for one more than n, or NULL when out of memory (items still valid). */
static void *pd_grow(void *items, size_t *cap, size_t n, size_t size)
{
    size_t new_cap = *cap ? *cap * 2 : 64;
    void *grown;

    if (n < *cap)
        return items;
    grown = realloc(items, new_cap * size);
    if (grown)
        *cap = new_cap;
    return grown;
}

/* paddle.save reduces a tensor inside a nested dict to tuple(((name, array),)). */
static int pd_is_tuple_call(const ckpt_value *v)
{
    const ckpt_value *args;

    if (v->kind != CKPT_VAL_OBJECT || v->u.obj.how != CKPT_OBJ_REDUCE || v->u.obj.state ||
        v->u.obj.list_items.n || v->u.obj.dict_items.n)
        return 0;
    args = v->u.obj.args;
    if (!ckpt_value_is_global(v->u.obj.callable, "builtins", "tuple"))
        return 0;
    return args && args->kind == CKPT_VAL_TUPLE && args->u.seq.n == 1 &&
           (args->u.seq.items[0]->kind == CKPT_VAL_TUPLE || args->u.seq.items[0]->kind == CKPT_VAL_LIST);
}

static int pd_visit_objects(const ckpt_value *v, const char *path, void *payload)
{
    ckpt_pd_open *o = payload;
    ckpt_value **grown;

    if (v->kind == CKPT_VAL_GLOBAL)
        return pd_check_global(o, v, path);
    if (!pd_is_tuple_call(v))
        return 0;
    if (!(grown = pd_grow(o->tuples, &o->cap_tuples, o->n_tuples, sizeof *o->tuples)))
        return ckpt_error_oom();
    o->tuples = grown;
    /* The tree was built in the reader's arena for this open; it is ours to rewrite. */
    o->tuples[o->n_tuples++] = (ckpt_value *)v;
    return 0;
}

/* The call becomes the tuple it makes, so that the (name, array) pair sits in the tree as
 * paddle.load sees it and its array is named <key>/1. */
static void pd_make_tuples(ckpt_pd_open *o)
{
    size_t i;

    for (i = 0; i < o->n_tuples; i++) {
        ckpt_value *v = o->tuples[i];
        ckpt_value_seq seq = v->u.obj.args->u.seq.items[0]->u.seq;
        memset(&v->u, 0, sizeof v->u);
        v->kind = CKPT_VAL_TUPLE;
        v->flags = 0;
        v->u.seq = seq;
    }
}

static int pd_visit_arrays(const ckpt_value *v, const char *path, void *payload)
{
    ckpt_pd_open *o = payload;
    ckpt_pd_array *a;

    if (!pd_is_array(v))
        return 0;
    if (!(a = pd_grow(o->arrays, &o->cap_arrays, o->n_arrays, sizeof *o->arrays)))
        return ckpt_error_oom();
    o->arrays = a;
    a = &o->arrays[o->n_arrays];
    memset(a, 0, sizeof *a);
    a->node = (ckpt_value *)v;
    if (path[0] && !(a->name = ckpt_arena_strndup(o->arena, path, strlen(path))))
        return ckpt_error_oom();
    o->n_arrays++;
    return 0;
}

/* numpy builds an array from its shape, dtype and bytes, never out of other arrays; one whose
 * construction (arguments or state) holds another array is not numpy's, and writing it back
 * as its data would lose what it held. */
static int pd_visit_nested(const ckpt_value *v, const char *path, void *outer)
{
    (void)path;
    return v != (const ckpt_value *)outer && pd_is_array(v);
}

static int pd_refuse_nested_arrays(ckpt_pd_open *o)
{
    size_t i;
    int rc;

    for (i = 0; i < o->n_arrays; i++) {
        if ((rc = ckpt_value_walk(o->arrays[i].node, PD_MAX_DEPTH, pd_visit_nested, o->arrays[i].node)) < 0)
            return rc;
        if (rc > 0)
            return ckpt_error_set(CKPT_EFORMAT, "%s: numpy array built out of another array (%s)", o->path,
                                  ckpt_pdparams__key(o->arrays[i].name));
    }
    return 0;
}

static int pd_parse_dtype(ckpt_pd_open *o, ckpt_pd_array *a, const ckpt_value *d)
{
    const ckpt_value *args, *state;
    const char *ts;
    const char *k = ckpt_pdparams__key(a->name);
    char endian = '<';
    size_t i;

    if (!d || d->kind != CKPT_VAL_OBJECT || !ckpt_value_is_global(d->u.obj.callable, "numpy", "dtype"))
        return ckpt_error_set(CKPT_EFORMAT, "%s: numpy array without a numpy.dtype (%s)", o->path, k);
    args = d->u.obj.args;
    if (!args || args->kind != CKPT_VAL_TUPLE || args->u.seq.n < 1 || args->u.seq.items[0]->kind != CKPT_VAL_STR)
        return ckpt_error_set(CKPT_EFORMAT, "%s: numpy.dtype without a type string (%s)", o->path, k);
    ts = args->u.seq.items[0]->u.str.ptr;
    if (ts[0] == '<' || ts[0] == '>' || ts[0] == '|' || ts[0] == '=')
        endian = *ts++;
    state = d->u.obj.state;
    if (state && state->kind == CKPT_VAL_TUPLE && state->u.seq.n >= 2 && state->u.seq.items[1]->kind == CKPT_VAL_STR &&
        state->u.seq.items[1]->u.str.len == 1)
        endian = state->u.seq.items[1]->u.str.ptr[0];
    if (ts[0] == 'O')
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: arrays of dtype object are not supported (%s)", o->path, k);
    for (i = 0; i < sizeof pd_types / sizeof pd_types[0]; i++)
        if (strcmp(ts, pd_types[i].typestr) == 0)
            break;
    if (i == sizeof pd_types / sizeof pd_types[0])
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: numpy dtype '%s' is not supported (%s)", o->path, ts, k);
    if (endian != '<' && endian != '>' && endian != '|' && endian != '=')
        return ckpt_error_set(CKPT_EFORMAT, "%s: numpy dtype with byte order '%c' (%s)", o->path, endian, k);
    a->dtype = pd_types[i].dtype;
    a->byteswap = endian == '>' && ckpt_dtype_size(a->dtype) > 1;
    return 0;
}

int ckpt_pdparams__parse_shape(ckpt_pd_open *o, const char *key, const ckpt_value *v, int *ndim, int64_t *shape,
                               int64_t *numel)
{
    const char *k = ckpt_pdparams__key(key);
    int64_t n = 1, nonzero = 1;
    size_t i;

    if (!v || (v->kind != CKPT_VAL_TUPLE && v->kind != CKPT_VAL_LIST))
        return ckpt_error_set(CKPT_EFORMAT, "%s: array shape is not a tuple (%s)", o->path, k);
    if (v->u.seq.n > CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: array has %zu dimensions, at most %d are supported (%s)",
                              o->path, v->u.seq.n, CKPT_MAX_DIMS, k);
    for (i = 0; i < v->u.seq.n; i++) {
        const ckpt_value *d = v->u.seq.items[i];
        if (d->kind != CKPT_VAL_INT || d->u.integer < 0)
            return ckpt_error_set(CKPT_EFORMAT, "%s: array dimension %zu is not a non-negative integer (%s)",
                                  o->path, i, k);
        shape[i] = d->u.integer;
        if (shape[i] && CKPT_MUL_OVERFLOWS(nonzero, shape[i], &nonzero))
            return ckpt_error_set(CKPT_EFORMAT, "%s: array shape overflows (%s)", o->path, k);
        n *= shape[i];
    }
    *ndim = (int)v->u.seq.n;
    *numel = n;
    return 0;
}

static int pd_truthy(const ckpt_value *v)
{
    return (v->kind == CKPT_VAL_BOOL && v->u.boolean) || (v->kind == CKPT_VAL_INT && v->u.integer != 0);
}

static int pd_parse_array(ckpt_pd_open *o, ckpt_pd_array *a)
{
    const ckpt_value *args = a->node->u.obj.args, *state = a->node->u.obj.state;
    const ckpt_value *shape, *dtype, *order, *data;
    const uint8_t *base = o->file->data;
    const char *k = ckpt_pdparams__key(a->name);
    int64_t numel;
    uint64_t size;
    int rc;

    if (!args || args->kind != CKPT_VAL_TUPLE)
        return ckpt_error_set(CKPT_EFORMAT, "%s: numpy array without arguments (%s)", o->path, k);
    if (pd_is_reconstruct(a->node)) {
        /* _reconstruct(ndarray, (0,), b'b') then BUILD (1, shape, dtype, is_fortran, data);
         * very old numpy leaves out the leading version. */
        const ckpt_value *cls = args->u.seq.n == 3 ? args->u.seq.items[0] : NULL;
        size_t skip;
        if (!cls || cls->kind != CKPT_VAL_GLOBAL)
            return ckpt_error_set(CKPT_EFORMAT, "%s: malformed numpy array (%s)", o->path, k);
        if (!ckpt_value_is_global(cls, "numpy", "ndarray"))
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: numpy array subclass %s.%s is not supported (%s)", o->path,
                                  cls->u.global.module, cls->u.global.name, k);
        if (!state || state->kind != CKPT_VAL_TUPLE || (state->u.seq.n != 5 && state->u.seq.n != 4))
            return ckpt_error_set(CKPT_EFORMAT, "%s: numpy array without its (version, shape, dtype, order, data) "
                                  "state (%s)", o->path, k);
        skip = state->u.seq.n - 4;
        if (skip && (state->u.seq.items[0]->kind != CKPT_VAL_INT || state->u.seq.items[0]->u.integer != 1))
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: numpy array state version is not 1 (%s)", o->path,
                                  k);
        shape = state->u.seq.items[skip];
        dtype = state->u.seq.items[skip + 1];
        order = state->u.seq.items[skip + 2];
        data = state->u.seq.items[skip + 3];
        a->fortran = pd_truthy(order);
    } else {
        /* Protocol 5: _frombuffer(buffer, dtype, shape, order). */
        if (args->u.seq.n != 4 || args->u.seq.items[3]->kind != CKPT_VAL_STR)
            return ckpt_error_set(CKPT_EFORMAT, "%s: malformed numpy array (%s)", o->path, k);
        data = args->u.seq.items[0];
        dtype = args->u.seq.items[1];
        shape = args->u.seq.items[2];
        order = args->u.seq.items[3];
        if (strcmp(order->u.str.ptr, "C") != 0 && strcmp(order->u.str.ptr, "F") != 0)
            return ckpt_error_set(CKPT_EFORMAT, "%s: numpy array order '%s' (%s)", o->path, order->u.str.ptr,
                                  k);
        a->fortran = order->u.str.ptr[0] == 'F';
    }
    if ((rc = pd_parse_dtype(o, a, dtype)) < 0 ||
        (rc = ckpt_pdparams__parse_shape(o, a->name, shape, &a->ndim, a->shape, &numel)) < 0)
        return rc;
    if (CKPT_MUL_OVERFLOWS((uint64_t)numel, (uint64_t)ckpt_dtype_size(a->dtype), &a->nbytes))
        return ckpt_error_set(CKPT_EFORMAT, "%s: array size overflows (%s)", o->path, k);
    if (data->kind != CKPT_VAL_BYTES)
        return ckpt_error_set(CKPT_EFORMAT, "%s: numpy array data is not a bytes object (%s)", o->path,
                              k);
    if (data->u.bytes.len &&
        (!base || data->u.bytes.ptr < base || data->u.bytes.len > o->file->size ||
         (uint64_t)(data->u.bytes.ptr - base) > o->file->size - data->u.bytes.len))
        return ckpt_error_set(CKPT_EFORMAT, "%s: numpy array data does not lie in the file (%s)", o->path,
                              k);
    size = ckpt_value_bytes_size(data);
    if (size != a->nbytes)
        return ckpt_error_set(CKPT_EFORMAT, "%s: array data is %llu bytes, its shape and dtype need %llu (%s)",
                              o->path, (unsigned long long)size, (unsigned long long)a->nbytes, k);
    a->data = data;
    return 0;
}

size_t ckpt_pdparams__extent_count(const ckpt_value *data)
{
    uint64_t size = ckpt_value_bytes_size(data);

    if (!(data->flags & CKPT_BYTES_LATIN1_UTF8) || size <= PD_LATIN1_WINDOW)
        return 1;
    return (size_t)((size - 1) / PD_LATIN1_WINDOW + 1);
}

/* The offset just past `chars` more characters of valid UTF-8 text from `pos`, a
 * character start (the pickle reader checked the text). */
static uint64_t pd_utf8_skip(const uint8_t *p, uint64_t len, uint64_t pos, uint64_t chars)
{
    enum { BLOCK = 4096 };
    size_t i;

    while (len - pos >= BLOCK) {
        uint64_t starts = 0;
        for (i = 0; i < BLOCK; i++)
            starts += (p[pos + i] & 0xC0) != 0x80;
        if (starts >= chars)
            break;
        chars -= starts;
        pos += BLOCK;
    }
    for (; pos < len; pos++)
        if ((p[pos] & 0xC0) != 0x80 && chars-- == 0)
            break;
    return pos;
}

void ckpt_pdparams__extents(const ckpt_pd_open *o, const ckpt_value *data, ckpt_extent *e)
{
    size_t n = ckpt_pdparams__extent_count(data), k;
    const uint8_t *p = data->u.bytes.ptr;
    uint64_t len = data->u.bytes.len, size = ckpt_value_bytes_size(data), pos = 0, start;
    uint64_t base = len ? (uint64_t)(p - o->file->data) : 0;

    for (k = 0; k < n; k++) {
        start = pos;
        e[k].file = o->file;
        e[k].size = k + 1 < n ? PD_LATIN1_WINDOW : size - k * PD_LATIN1_WINDOW;
        pos = k + 1 < n ? pd_utf8_skip(p, len, pos, e[k].size) : len;
        e[k].offset = base + start;
        e[k].stored_size = pos - start;
        e[k].encoding = (data->flags & CKPT_BYTES_LATIN1_UTF8) ? CKPT_EXTENT_LATIN1_UTF8 : CKPT_EXTENT_RAW;
    }
}

int ckpt_pdparams__new_tensor(ckpt_pd_open *o, const char *name, ckpt_dtype dtype, int ndim, const int64_t *shape,
                              int fortran, const ckpt_storage *storage)
{
    ckpt_tensor *t;
    int index = ckpt_reader_add_tensor(o->r, &t), i;

    if (index < 0)
        return index;
    t->name = name;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    if (fortran) {
        for (i = 0; i < ndim; i++)
            t->stride[i] = i ? t->stride[i - 1] * (shape[i - 1] ? shape[i - 1] : 1) : 1;
    } else {
        ckpt_tensor_set_contiguous(t);
    }
    t->offset = 0;
    t->storage = storage;
    if (dtype == CKPT_DTYPE_BF16 && !o->bf16_noted) {
        ckpt_reader_note(o->r, "uint16 arrays read as bfloat16, as paddle.load does");
        o->bf16_noted = 1;
    }
    return index;
}

static int pd_add_array(ckpt_pd_open *o, ckpt_pd_array *a)
{
    ckpt_storage *s = ckpt_reader_new_storage(o->r, a->name ? a->name : "", a->dtype,
                                              ckpt_pdparams__extent_count(a->data));
    ckpt_value *source;
    int index;

    if (!s)
        return ckpt_error_oom();
    ckpt_pdparams__extents(o, a->data, s->extents);
    s->nbytes = a->nbytes;
    s->byteswap = a->byteswap;
    index = ckpt_pdparams__new_tensor(o, a->name, a->dtype, a->ndim, a->shape, a->fortran, s);
    if (index < 0)
        return index;
    source = ckpt_value_new(o->arena, CKPT_VAL_NONE);
    if (!source)
        return ckpt_error_oom();
    *source = *a->node;
    memset(&a->node->u, 0, sizeof a->node->u);
    a->node->kind = CKPT_VAL_TENSOR;
    a->node->flags = 0;
    a->node->u.tensor.index = (size_t)index;
    a->node->u.tensor.source = source;
    return 0;
}

static int pdparams_open(ckpt_reader *r)
{
    ckpt_pd_open o;
    ckpt_pickle_read_options popts = CKPT_PICKLE_READ_OPTIONS_INIT;
    ckpt_value *root = NULL;
    size_t end = 0, i;
    int rc;

    memset(&o, 0, sizeof o);
    o.r = r;
    o.file = ckpt_reader_file(r);
    o.path = ckpt_reader_path(r);
    o.arena = ckpt_reader_arena(r);
    if (!o.file)
        return ckpt_error_set(CKPT_EFORMAT, "%s: a directory is not a paddle.save file", o.path);
    if (o.file->size == 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: empty file", o.path);
#if SIZE_MAX < UINT64_MAX
    if (o.file->size > SIZE_MAX)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: file too large for this platform", o.path);
#endif
    popts.source = o.path;
    rc = ckpt_pickle_read(&root, &end, o.arena, o.file->data, (size_t)o.file->size, &popts);
    if (rc < 0)
        goto done;
    if ((rc = ckpt_value_walk(root, PD_MAX_DEPTH, pd_visit_objects, &o)) < 0)
        goto done;
    pd_make_tuples(&o);
    if ((rc = ckpt_value_walk(root, PD_MAX_DEPTH, pd_visit_arrays, &o)) < 0 ||
        (rc = pd_refuse_nested_arrays(&o)) < 0)
        goto done;
    for (i = 0; i < o.n_arrays; i++)
        if ((rc = pd_parse_array(&o, &o.arrays[i])) < 0)
            goto done;
    if ((rc = ckpt_pdparams__reassemble(&o, root)) < 0)
        goto done;
    for (i = 0; i < o.n_arrays; i++) {
        ckpt_pd_array *a = &o.arrays[i];
        if (a->split) {
            ckpt_pd_split *s = &o.splits[a->split - 1];
            if (!s->added && (rc = ckpt_pdparams__add_split(&o, s)) < 0)
                goto done;
            s->added = 1;
        } else if ((rc = pd_add_array(&o, a)) < 0) {
            goto done;
        }
    }
    if (end < o.file->size)
        ckpt_reader_note(r, "%llu bytes after the end of the pickle ignored", (unsigned long long)(o.file->size - end));
    ckpt_reader_set_root(r, root);
    rc = 0;
done:
    free(o.arrays);
    free(o.splits);
    free(o.tuples);
    return rc;
}

static int pd_has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), k = strlen(suffix);
    return n >= k && strcmp(path + n - k, suffix) == 0;
}

/* PROTO 2..5 is about 11 bits; the dict that paddle.save always pickles brings it to 16.
 * The extension and numpy globals near the start add a few bits each, staying well under
 * what a format with a real magic number bids. */
static int pdparams_bid(const ckpt_probe *p, int best_bid)
{
    const uint8_t *d;
    size_t n, at = 2;
    int bid = 8;

    (void)best_bid;
    if (p->is_dir || !p->file || p->file->size < 3 || !p->file->data)
        return -1;
    d = p->file->data;
    n = p->file->size < PD_SNIFF_BYTES ? (size_t)p->file->size : PD_SNIFF_BYTES;
    if (d[0] != 0x80 || d[1] < 2 || d[1] > 5)
        return -1;
    if (d[1] >= 4 && n > 11 && d[2] == 0x95) /* FRAME and its 8-byte length */
        at = 11;
    if (d[at] == '}')
        bid = 16;
    if (p->path && (pd_has_suffix(p->path, ".pdparams") || pd_has_suffix(p->path, ".pdopt")))
        bid += 4;
    if (memmem(d, n, "_reconstruct", 12) || memmem(d, n, "numpy", 5))
        bid += 4;
    return bid;
}

extern const ckpt_format_vtable ckpt_format_pdparams;
const ckpt_format_vtable ckpt_format_pdparams = {
    CKPT_FORMAT_ABI_VERSION,
    "pdparams",
    "PaddlePaddle paddle.save pickle of numpy arrays",
    ".pdparams .pdopt",
    CKPT_FORMAT_READ | CKPT_FORMAT_WRITE | CKPT_FORMAT_METADATA,
    pdparams_bid,
    pdparams_open,
    NULL,
    ckpt_pdparams__write_begin,
    NULL,
    ckpt_pdparams__write_free,
    NULL,
};
