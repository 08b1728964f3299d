/* The consolidated state dict of a ZeRO checkpoint, as DeepSpeed's zero_to_fp32 builds it:
 * buffers, frozen parameters, trainable parameters (deepspeed_zero_flat.c), tied aliases, in
 * that order. Every tensor is lazy: its storage is a list of extents into the partitions of
 * the rank files, so a parameter that straddles ranks (stages 1/2) or is gathered from every
 * rank (stage 3) is several extents and nothing is read at open. Values stay exactly as
 * stored. */
#include "deepspeed_zero_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const ckpt_value *ckpt_zero__get(const ckpt_value *dict, const char *key)
{
    if (!dict || dict->kind != CKPT_VAL_DICT)
        return NULL;
    return ckpt_value_dict_get(dict, key);
}

const ckpt_value *ckpt_zero__get_int(const ckpt_value *dict, int64_t k)
{
    size_t i;

    if (!dict || dict->kind != CKPT_VAL_DICT)
        return NULL;
    for (i = 0; i < dict->u.dict.map.n; i++)
        if (dict->u.dict.map.keys[i]->kind == CKPT_VAL_INT && dict->u.dict.map.keys[i]->u.integer == k)
            return dict->u.dict.map.vals[i];
    return NULL;
}

int ckpt_zero__int(const ckpt_value *v, int64_t *out)
{
    if (v && v->kind == CKPT_VAL_OBJECT && v->u.obj.args && v->u.obj.args->kind == CKPT_VAL_TUPLE &&
        v->u.obj.args->u.seq.n == 1)
        v = v->u.obj.args->u.seq.items[0];
    if (!v || v->kind != CKPT_VAL_INT)
        return -1;
    *out = v->u.integer;
    return 0;
}

int ckpt_zero__shape(const ckpt_value *v, int *ndim, int64_t *shape, int64_t *numel)
{
    const ckpt_value_seq *s;
    int64_t n = 1;
    size_t i;

    if (v && v->kind == CKPT_VAL_OBJECT && v->u.obj.args && v->u.obj.args->kind == CKPT_VAL_TUPLE &&
        v->u.obj.args->u.seq.n == 1)
        v = v->u.obj.args->u.seq.items[0];
    if (!v || (v->kind != CKPT_VAL_TUPLE && v->kind != CKPT_VAL_LIST))
        return -1;
    s = &v->u.seq;
    if (s->n > CKPT_MAX_DIMS)
        return -1;
    for (i = 0; i < s->n; i++) {
        if (s->items[i]->kind != CKPT_VAL_INT || s->items[i]->u.integer < 0 ||
            CKPT_MUL_OVERFLOWS(n, s->items[i]->u.integer, &n))
            return -1;
        shape[i] = s->items[i]->u.integer;
    }
    *ndim = (int)s->n;
    *numel = n;
    return 0;
}

const ckpt_tensor *ckpt_zero__tensor(const ckpt_zero_file *f, const ckpt_value *v)
{
    if (!v || v->kind != CKPT_VAL_TENSOR)
        return NULL;
    return ckpt_tensor_at(f->ck, v->u.tensor.index);
}

const char *ckpt_zero__base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int ckpt_zero__part_of(const ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_value *v, const char *what,
                       ckpt_zero_part *out)
{
    const ckpt_tensor *t = ckpt_zero__tensor(f, v);

    if (!t)
        return ckpt_error_set(CKPT_EFORMAT, "%s: %s is not a tensor (%s)", b->dir, what, ckpt_zero__base(f->path));
    if (!ckpt_tensor_is_contiguous(t))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: %s is not a contiguous tensor (%s)", b->dir, what,
                              ckpt_zero__base(f->path));
    out->f = f;
    out->t = t;
    out->numel = ckpt_tensor_numel(t);
    return 0;
}

void ckpt_zero__begin(ckpt_zero_build *b, const ckpt_tensor *t)
{
    b->n_ext = 0;
    b->dtype = t->dtype;
    b->byteswap = t->storage ? t->storage->byteswap : 0;
}

/* Append bytes [off, off+len) of a source extent, re-pointed at the reader's mapping of
 * the same file, merging with the previous extent when they touch. */
static int zero_push(ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_extent *src, uint64_t off,
                     uint64_t len)
{
    ckpt_extent *e;

    if (src->encoding != CKPT_EXTENT_RAW)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: tensor data is compressed; ZeRO partitions must be stored",
                              f->path);
    if (src->file->size != f->file->size)
        return ckpt_error_set(CKPT_EFORMAT, "%s: file changed while it was being opened", f->path);
    if (b->n_ext) {
        e = &b->ext[b->n_ext - 1];
        if (e->file == f->file && e->offset + e->size == src->offset + off) {
            e->size += len;
            e->stored_size += len;
            return 0;
        }
    }
    if (b->n_ext == b->cap_ext) {
        size_t cap = b->cap_ext ? b->cap_ext * 2 : 16;
        e = realloc(b->ext, cap * sizeof *e);
        if (!e)
            return ckpt_error_oom();
        b->ext = e;
        b->cap_ext = cap;
    }
    e = &b->ext[b->n_ext++];
    memset(e, 0, sizeof *e);
    e->file = f->file;
    e->offset = src->offset + off;
    e->stored_size = e->size = len;
    e->encoding = CKPT_EXTENT_RAW;
    return 0;
}

/* Storage bytes [off, off+len) of s as extents. */
static int zero_push_bytes(ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_storage *s, uint64_t off,
                           uint64_t len)
{
    size_t i;
    int rc;

    for (i = 0; i < s->n_extents && len; i++) {
        const ckpt_extent *e = &s->extents[i];
        uint64_t take;
        if (off >= e->size) {
            off -= e->size;
            continue;
        }
        take = e->size - off < len ? e->size - off : len;
        rc = zero_push(b, f, e, off, take);
        if (rc < 0)
            return rc;
        len -= take;
        off = 0;
    }
    if (len)
        return ckpt_error_set(CKPT_EFORMAT, "%s: tensor data runs past its storage", f->path);
    return 0;
}

int ckpt_zero__push_range(ckpt_zero_build *b, const ckpt_zero_part *parts, size_t n_parts, int64_t first,
                          int64_t count, const char *name)
{
    size_t i;
    int rc;

    for (i = 0; i < n_parts && count > 0; i++) {
        const ckpt_tensor *t = parts[i].t;
        uint64_t isz = ckpt_dtype_size(t->dtype);
        int64_t take;
        if (first >= parts[i].numel) {
            first -= parts[i].numel;
            continue;
        }
        if (t->dtype != b->dtype || t->storage->byteswap != b->byteswap)
            return ckpt_error_set(CKPT_EFORMAT, "%s: the partitions of %s mix %s and %s (%s)", b->dir, name,
                                  ckpt_dtype_name(b->dtype), ckpt_dtype_name(t->dtype), ckpt_zero__base(parts[i].f->path));
        take = parts[i].numel - first < count ? parts[i].numel - first : count;
        rc = zero_push_bytes(b, parts[i].f, t->storage, (uint64_t)(t->offset + first) * isz, (uint64_t)take * isz);
        if (rc < 0)
            return rc;
        count -= take;
        first = 0;
    }
    if (count > 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: the partitions end before parameter %s does", b->dir, name);
    return 0;
}

static int zero_add_node(ckpt_zero_build *b, const char *name, int index)
{
    ckpt_arena *a = ckpt_reader_arena(b->r);
    ckpt_value *key, *val;

    if (ckpt_value_dict_get(b->root, name))
        return ckpt_error_set(CKPT_EFORMAT, "%s: tensor %s%s appears twice in the consolidated state dict", b->dir,
                              b->prefix, name);
    key = ckpt_value_new_str(a, name, strlen(name));
    val = ckpt_value_new_tensor(a, (size_t)index);
    if (!key || !val)
        return CKPT_ENOMEM;
    return ckpt_value_dict_set(a, b->root, key, val);
}

/* prefix + name, in the arena. */
static const char *zero_full_name(ckpt_zero_build *b, const char *name)
{
    size_t np = strlen(b->prefix), nn = strlen(name);
    char *s = ckpt_arena_alloc(ckpt_reader_arena(b->r), np + nn + 1);

    if (s) {
        memcpy(s, b->prefix, np);
        memcpy(s + np, name, nn + 1);
    }
    return s;
}

/* A tensor viewing a new storage made of the extents gathered since begin; with a NULL
 * view it is C-contiguous with the given shape, else it copies the view's layout. */
static int zero_emit_view(ckpt_zero_build *b, const char *name, int ndim, const int64_t *shape,
                          const ckpt_tensor *view, uint32_t flags)
{
    const char *tname = zero_full_name(b, name);
    ckpt_storage *s = tname ? ckpt_reader_new_storage(b->r, tname, b->dtype, b->n_ext) : NULL;
    ckpt_tensor *t;
    uint64_t total = 0;
    size_t i;
    int index;

    if (!s)
        return CKPT_ENOMEM;
    for (i = 0; i < b->n_ext; i++) {
        s->extents[i] = b->ext[i];
        total += b->ext[i].size;
    }
    s->nbytes = total;
    s->byteswap = b->byteswap;
    index = ckpt_reader_add_tensor(b->r, &t);
    if (index < 0)
        return index;
    if (view) {
        *t = *view;
    } else {
        t->ndim = ndim;
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        ckpt_tensor_set_contiguous(t);
    }
    t->name = tname;
    t->dtype = b->dtype;
    t->storage = s;
    t->flags = flags;
    return zero_add_node(b, name, index);
}

int ckpt_zero__emit(ckpt_zero_build *b, const char *name, int ndim, const int64_t *shape, uint32_t flags)
{
    return zero_emit_view(b, name, ndim, shape, NULL, flags);
}

int ckpt_zero__emit_saved(ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_tensor *t, const char *name,
                          uint32_t flags)
{
    int rc;

    ckpt_zero__begin(b, t);
    if (ckpt_tensor_is_contiguous(t)) {
        ckpt_zero_part p = { f, t, ckpt_tensor_numel(t) };
        rc = ckpt_zero__push_range(b, &p, 1, 0, p.numel, name);
        return rc < 0 ? rc : zero_emit_view(b, name, t->ndim, t->shape, NULL, flags);
    }
    rc = zero_push_bytes(b, f, t->storage, 0, t->storage->nbytes);
    return rc < 0 ? rc : zero_emit_view(b, name, 0, NULL, t, flags);
}

static int zero_buffers(ckpt_zero_build *b)
{
    const ckpt_zero_file *f = &b->st->model[0];
    const ckpt_value *module = ckpt_zero__get(f->root, "module");
    const ckpt_value *names = ckpt_zero__get(f->root, "buffer_names");
    size_t i, j;
    int rc;

    if (!module || module->kind != CKPT_VAL_DICT)
        return 0; /* pipeline checkpoints keep the module in layer files: no buffers here */
    if (names->kind != CKPT_VAL_LIST && names->kind != CKPT_VAL_TUPLE)
        return ckpt_error_set(CKPT_EFORMAT, "%s: buffer_names is not a list", f->path);
    for (i = 0; i < module->u.dict.map.n; i++) {
        const ckpt_value *k = module->u.dict.map.keys[i];
        const ckpt_tensor *t;
        int listed = 0;
        if (k->kind != CKPT_VAL_STR)
            continue;
        for (j = 0; j < names->u.seq.n && !listed; j++)
            listed = ckpt_value_is_str(names->u.seq.items[j], k->u.str.ptr);
        if (!listed)
            continue;
        t = ckpt_zero__tensor(f, module->u.dict.map.vals[i]);
        if (!t)
            return ckpt_error_set(CKPT_EFORMAT, "%s: buffer is not a tensor (module/%s)", f->path, k->u.str.ptr);
        rc = ckpt_zero__emit_saved(b, f, t, k->u.str.ptr, 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int zero_frozen_shape(const ckpt_zero_build *b, const ckpt_value *shapes, size_t i, int *ndim, int64_t *shape,
                             int64_t *numel)
{
    const ckpt_value *k = shapes->u.dict.map.keys[i];

    if (k->kind != CKPT_VAL_STR || ckpt_zero__shape(shapes->u.dict.map.vals[i], ndim, shape, numel) < 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: frozen_param_shapes entry %zu is not name -> torch.Size (%s)",
                              b->dir, i, ckpt_zero__base(b->st->model[0].path));
    return 0;
}

static int zero_frozen(ckpt_zero_build *b)
{
    const ckpt_value *shapes = ckpt_zero__get(b->st->model[0].root, "frozen_param_shapes");
    ckpt_zero_part *parts = NULL;
    int64_t shape[CKPT_MAX_DIMS], numel;
    size_t i, r;
    int ndim, rc = 0;

    if (!shapes || shapes->kind != CKPT_VAL_DICT || shapes->u.dict.map.n == 0)
        return 0;
    parts = calloc(b->st->n_model, sizeof *parts);
    if (!parts)
        return ckpt_error_oom();
    for (i = 0; i < shapes->u.dict.map.n; i++) {
        const char *name;
        int64_t avail = 0;
        rc = zero_frozen_shape(b, shapes, i, &ndim, shape, &numel);
        if (rc < 0)
            break;
        name = shapes->u.dict.map.keys[i]->u.str.ptr;
        /* stages 1/2 keep the whole parameter in the first model file, stage 3 one
         * ceil(n/W) slice per rank file */
        for (r = 0; r < (b->stage == 3 ? b->st->n_model : 1); r++) {
            const ckpt_zero_file *f = &b->st->model[r];
            const ckpt_value *frags = ckpt_zero__get(f->root, "frozen_param_fragments");
            rc = ckpt_zero__part_of(b, f, ckpt_zero__get(frags, name), name, &parts[r]);
            if (rc < 0) {
                ckpt_error_prefix("frozen_param_fragments");
                goto done;
            }
            avail += parts[r].numel;
        }
        if (b->stage != 3) {
            if (parts[0].numel != numel) {
                rc = ckpt_error_set(CKPT_EFORMAT, "%s: frozen parameter %s holds %lld elements, its shape %lld (%s)",
                                    b->dir, name, (long long)parts[0].numel, (long long)numel,
                                    ckpt_zero__base(b->st->model[0].path));
                break;
            }
            rc = ckpt_zero__emit_saved(b, &b->st->model[0], parts[0].t, name, CKPT_TENSOR_FROZEN);
        } else {
            if (avail < numel) {
                rc = ckpt_error_set(CKPT_EFORMAT, "%s: the fragments of frozen parameter %s hold %lld elements, "
                                    "its shape %lld", b->dir, name, (long long)avail, (long long)numel);
                break;
            }
            ckpt_zero__begin(b, parts[0].t);
            rc = ckpt_zero__push_range(b, parts, b->st->n_model, 0, numel, name);
            if (rc >= 0)
                rc = ckpt_zero__emit(b, name, ndim, shape, CKPT_TENSOR_FROZEN);
        }
        if (rc < 0)
            break;
    }
done:
    free(parts);
    return rc;
}

int ckpt_zero__alias(ckpt_zero_build *b, size_t source, const char *name)
{
    ckpt_tensor copy = *ckpt_reader_tensor(b->r, source), *t;
    const char *full = zero_full_name(b, name);
    int index;

    if (!full)
        return CKPT_ENOMEM;
    index = ckpt_reader_add_tensor(b->r, &t);
    if (index < 0)
        return index;
    *t = copy;
    t->name = full;
    return zero_add_node(b, name, index);
}

/* Rank 0's shared_params: alias -> source. */
static int zero_aliases(ckpt_zero_build *b)
{
    const ckpt_value *shared = ckpt_zero__get(b->st->model[0].root, "shared_params");
    size_t i;
    int rc;

    if (!shared || shared->kind != CKPT_VAL_DICT)
        return 0;
    for (i = 0; i < shared->u.dict.map.n; i++) {
        const ckpt_value *k = shared->u.dict.map.keys[i], *v = shared->u.dict.map.vals[i];
        const ckpt_value *node;
        if (k->kind != CKPT_VAL_STR || v->kind != CKPT_VAL_STR)
            return ckpt_error_set(CKPT_EFORMAT, "%s: shared_params entry %zu is not alias -> name",
                                  b->st->model[0].path, i);
        node = ckpt_value_dict_get(b->root, v->u.str.ptr);
        if (!node)
            continue; /* zero_to_fp32 skips aliases of parameters it did not output */
        if ((rc = ckpt_zero__alias(b, node->u.tensor.index, k->u.str.ptr)) < 0)
            return rc;
    }
    return 0;
}

int ckpt_zero__merge(ckpt_zero_build *b)
{
    int rc;

    b->root = ckpt_value_new(ckpt_reader_arena(b->r), CKPT_VAL_DICT);
    if (!b->root)
        return CKPT_ENOMEM;
    rc = zero_buffers(b);
    if (rc >= 0)
        rc = zero_frozen(b);
    if (rc >= 0)
        rc = ckpt_zero__trainable(b);
    if (rc >= 0)
        rc = zero_aliases(b);
    if (rc >= 0 && ckpt_reader_options(b->r)->optimizer_states)
        rc = ckpt_zero__optimizer_states(b);
    return rc;
}

void ckpt_zero__build_dispose(ckpt_zero_build *b)
{
    free(b->ext);
    b->ext = NULL;
    b->n_ext = b->cap_ext = 0;
}
