/* The consolidated state dict of a ZeRO checkpoint, as DeepSpeed's zero_to_fp32 builds it:
 * buffers, frozen parameters, trainable parameters, tied aliases, in that order. Every
 * tensor is lazy: its storage is a list of extents into the partitions of the rank files,
 * so a parameter that straddles ranks (stages 1/2) or is gathered from every rank (stage
 * 3) is several extents and nothing is read at open. Values stay exactly as stored. */
#include "deepspeed_zero_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One piece of a virtual concatenation: a contiguous tensor of a rank file. */
typedef struct zero_part {
    const ckpt_zero_file *f;
    const ckpt_tensor *t;
    int64_t numel;
} zero_part;

const ckpt_value *ckpt_zero__get(const ckpt_value *dict, const char *key)
{
    if (!dict || dict->kind != CKPT_VAL_DICT)
        return NULL;
    return ckpt_value_dict_get(dict, key);
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

/* torch.Size((d0, d1, ...)) or a plain tuple/list of ints. */
static int zero_shape(const ckpt_value *v, int *ndim, int64_t *shape, int64_t *numel)
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

static const ckpt_tensor *zero_tensor(const ckpt_zero_file *f, const ckpt_value *v)
{
    if (!v || v->kind != CKPT_VAL_TENSOR)
        return NULL;
    return ckpt_tensor_at(f->ck, v->u.tensor.index);
}

static const char *zero_base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int zero_part_of(const ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_value *v, const char *what,
                        zero_part *out)
{
    const ckpt_tensor *t = zero_tensor(f, v);

    if (!t)
        return ckpt_error_set(CKPT_EFORMAT, "%s: %s is not a tensor (%s)", b->dir, what, zero_base(f->path));
    if (!ckpt_tensor_is_contiguous(t))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: %s is not a contiguous tensor (%s)", b->dir, what,
                              zero_base(f->path));
    out->f = f;
    out->t = t;
    out->numel = ckpt_tensor_numel(t);
    return 0;
}

/* Start a storage with the element type and byte order of tensor t. */
static void zero_begin(ckpt_zero_build *b, const ckpt_tensor *t)
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

/* Elements [first, first+count) of the concatenation of parts. */
static int zero_push_range(ckpt_zero_build *b, const zero_part *parts, size_t n_parts, int64_t first, int64_t count,
                           const char *name)
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
                                  ckpt_dtype_name(b->dtype), ckpt_dtype_name(t->dtype), zero_base(parts[i].f->path));
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
        return ckpt_error_set(CKPT_EFORMAT, "%s: tensor %s appears twice in the consolidated state dict", b->dir, name);
    key = ckpt_value_new_str(a, name, strlen(name));
    val = ckpt_value_new_tensor(a, (size_t)index);
    if (!key || !val)
        return CKPT_ENOMEM;
    return ckpt_value_dict_set(a, b->root, key, val);
}

/* A tensor viewing a new storage made of the extents gathered since zero_begin; with a
 * NULL view it is C-contiguous with the given shape, else it copies the view's layout. */
static int zero_emit(ckpt_zero_build *b, const char *name, int ndim, const int64_t *shape, const ckpt_tensor *view)
{
    ckpt_arena *a = ckpt_reader_arena(b->r);
    ckpt_storage *s = ckpt_reader_new_storage(b->r, name, b->dtype, b->n_ext);
    ckpt_tensor *t;
    const char *tname;
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
    tname = ckpt_arena_strndup(a, name, strlen(name));
    if (!tname)
        return CKPT_ENOMEM;
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
    t->flags = 0;
    return zero_add_node(b, name, index);
}

/* A tensor of a rank file exactly as saved: its own bytes when contiguous, else its whole
 * storage with the same view. */
static int zero_emit_saved(ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_tensor *t, const char *name)
{
    zero_begin(b, t);
    if (ckpt_tensor_is_contiguous(t)) {
        zero_part p = { f, t, ckpt_tensor_numel(t) };
        int rc = zero_push_range(b, &p, 1, 0, p.numel, name);
        return rc < 0 ? rc : zero_emit(b, name, t->ndim, t->shape, NULL);
    }
    {
        int rc = zero_push_bytes(b, f, t->storage, 0, t->storage->nbytes);
        return rc < 0 ? rc : zero_emit(b, name, 0, NULL, t);
    }
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
        t = zero_tensor(f, module->u.dict.map.vals[i]);
        if (!t)
            return ckpt_error_set(CKPT_EFORMAT, "%s: buffer is not a tensor (module/%s)", f->path, k->u.str.ptr);
        rc = zero_emit_saved(b, f, t, k->u.str.ptr);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int zero_frozen_shape(const ckpt_zero_build *b, const ckpt_value *shapes, size_t i, int *ndim, int64_t *shape,
                             int64_t *numel)
{
    const ckpt_value *k = shapes->u.dict.map.keys[i];

    if (k->kind != CKPT_VAL_STR || zero_shape(shapes->u.dict.map.vals[i], ndim, shape, numel) < 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: frozen_param_shapes entry %zu is not name -> torch.Size (%s)",
                              b->dir, i, zero_base(b->st->model[0].path));
    return 0;
}

static int zero_frozen(ckpt_zero_build *b)
{
    const ckpt_value *shapes = ckpt_zero__get(b->st->model[0].root, "frozen_param_shapes");
    zero_part *parts = NULL;
    int64_t shape[CKPT_MAX_DIMS], numel;
    size_t i, r;
    int ndim, rc = 0;

    if (!shapes || shapes->kind != CKPT_VAL_DICT || shapes->u.dict.map.n == 0)
        return 0;
    parts = calloc(b->st->n_model, sizeof *parts);
    if (!parts)
        return ckpt_error_oom();
    for (i = 0; i < shapes->u.dict.map.n; i++) {
        const char *name = shapes->u.dict.map.keys[i]->u.str.ptr;
        int64_t avail = 0;
        rc = zero_frozen_shape(b, shapes, i, &ndim, shape, &numel);
        if (rc < 0)
            break;
        /* stages 1/2 keep the whole parameter in the first model file, stage 3 one
         * ceil(n/W) slice per rank file */
        for (r = 0; r < (b->stage == 3 ? b->st->n_model : 1); r++) {
            const ckpt_zero_file *f = &b->st->model[r];
            const ckpt_value *frags = ckpt_zero__get(f->root, "frozen_param_fragments");
            rc = zero_part_of(b, f, ckpt_zero__get(frags, name), name, &parts[r]);
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
                                    zero_base(b->st->model[0].path));
                break;
            }
            rc = zero_emit_saved(b, &b->st->model[0], parts[0].t, name);
        } else {
            if (avail < numel) {
                rc = ckpt_error_set(CKPT_EFORMAT, "%s: the fragments of frozen parameter %s hold %lld elements, "
                                    "its shape %lld", b->dir, name, (long long)avail, (long long)numel);
                break;
            }
            zero_begin(b, parts[0].t);
            rc = zero_push_range(b, parts, b->st->n_model, 0, numel, name);
            if (rc >= 0)
                rc = zero_emit(b, name, ndim, shape, NULL);
        }
        if (rc < 0)
            break;
    }
done:
    free(parts);
    return rc;
}

/* The list of per-group partitions of optim file f. */
static const ckpt_value *zero_groups(const ckpt_zero_build *b, const ckpt_zero_file *f)
{
    const ckpt_value *osd = ckpt_zero__get(f->root, "optimizer_state_dict");
    const ckpt_value *g = ckpt_zero__get(osd, b->stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups");

    if (!g || (g->kind != CKPT_VAL_LIST && g->kind != CKPT_VAL_TUPLE)) {
        ckpt_error_set(CKPT_EFORMAT, "%s: optimizer_state_dict has no %s list", f->path,
                       b->stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups");
        return NULL;
    }
    return g;
}

static int zero_param_shape(const ckpt_zero_build *b, const ckpt_value *group, size_t i, size_t g, const char **name,
                            int *ndim, int64_t *shape, int64_t *numel)
{
    const ckpt_value *k = group->u.dict.map.keys[i];

    if (k->kind != CKPT_VAL_STR || zero_shape(group->u.dict.map.vals[i], ndim, shape, numel) < 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: param_shapes[%zu] entry %zu is not name -> torch.Size (%s)", b->dir,
                              g, i, zero_base(b->st->model[0].path));
    *name = k->u.str.ptr;
    return 0;
}

static int64_t zero_align(int64_t x, int64_t a)
{
    return (x + a - 1) / a * a;
}

/* Stages 1/2: group g is the concatenation of every rank's partition, parameters follow
 * one another from its start; what is left is alignment padding. */
static int zero_trainable_12(ckpt_zero_build *b, const ckpt_value *shapes, zero_part *parts)
{
    const ckpt_zero_state *st = b->st;
    int64_t shape[CKPT_MAX_DIMS], numel;
    size_t g, i, r, n_groups = shapes->u.seq.n;
    const char *name;
    int ndim, rc;

    for (r = 0; r < st->n_optim; r++) {
        const ckpt_value *groups = zero_groups(b, &st->optim[r]);
        if (!groups)
            return CKPT_EFORMAT;
        if (groups->u.seq.n != n_groups)
            return ckpt_error_set(CKPT_EFORMAT, "%s: %s has %zu param groups, param_shapes of %s has %zu", b->dir,
                                  zero_base(st->optim[r].path), groups->u.seq.n, zero_base(st->model[0].path),
                                  n_groups);
    }
    for (g = 0; g < n_groups; g++) {
        const ckpt_value *group = shapes->u.seq.items[g];
        int64_t avail = 0, offset = 0;
        if (group->kind != CKPT_VAL_DICT)
            return ckpt_error_set(CKPT_EFORMAT, "%s: param_shapes[%zu] is not a dict (%s)", b->dir, g,
                                  zero_base(st->model[0].path));
        for (r = 0; r < st->n_optim; r++) {
            char what[64];
            snprintf(what, sizeof what, "param group %zu partition", g);
            rc = zero_part_of(b, &st->optim[r], zero_groups(b, &st->optim[r])->u.seq.items[g], what, &parts[r]);
            if (rc < 0)
                return rc;
            avail += parts[r].numel;
        }
        for (i = 0; i < group->u.dict.map.n; i++) {
            rc = zero_param_shape(b, group, i, g, &name, &ndim, shape, &numel);
            if (rc < 0)
                return rc;
            if (numel > avail - offset)
                return ckpt_error_set(CKPT_EFORMAT, "%s: parameter %s needs elements [%lld, %lld) of param group "
                                      "%zu, the partitions hold %lld", b->dir, name, (long long)offset,
                                      (long long)(offset + numel), g, (long long)avail);
            zero_begin(b, parts[0].t);
            rc = zero_push_range(b, parts, st->n_optim, offset, numel, name);
            if (rc >= 0)
                rc = zero_emit(b, name, ndim, shape, NULL);
            if (rc < 0)
                return rc;
            offset += numel;
        }
        if (zero_align(offset, 2 * b->world) != zero_align(avail, 2 * b->world))
            return ckpt_error_set(CKPT_EFORMAT, "%s: param group %zu: consumed %lld numels out of %lld - the "
                                  "partitions do not match param_shapes", b->dir, g, (long long)offset,
                                  (long long)avail);
    }
    return 0;
}

/* Stage 3: every parameter is split into W slices of ceil(n/W) elements, slice r at the
 * same offset of rank r's flat partition (its sub-groups concatenated). */
static int zero_trainable_3(ckpt_zero_build *b, const ckpt_value *shapes)
{
    const ckpt_zero_state *st = b->st;
    int64_t shape[CKPT_MAX_DIMS], numel, offset = 0, avail0 = 0, w = b->world;
    zero_part **flat = calloc(st->n_optim, sizeof *flat);
    size_t g, i, r, *n_flat = calloc(st->n_optim, sizeof *n_flat);
    const char *name;
    int ndim, rc = 0;

    if (!flat || !n_flat) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (r = 0; r < st->n_optim; r++) {
        const ckpt_value *groups = zero_groups(b, &st->optim[r]);
        int64_t total = 0;
        if (!groups) {
            rc = CKPT_EFORMAT;
            goto done;
        }
        flat[r] = calloc(groups->u.seq.n ? groups->u.seq.n : 1, sizeof **flat);
        if (!flat[r]) {
            rc = ckpt_error_oom();
            goto done;
        }
        n_flat[r] = groups->u.seq.n;
        for (g = 0; g < groups->u.seq.n; g++) {
            char what[64];
            snprintf(what, sizeof what, "fp32_flat_groups[%zu]", g);
            rc = zero_part_of(b, &st->optim[r], groups->u.seq.items[g], what, &flat[r][g]);
            if (rc < 0)
                goto done;
            total += flat[r][g].numel;
        }
        if (r == 0) {
            avail0 = total;
        } else if (total != avail0) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: %s holds %lld fp32 elements, %s holds %lld", b->dir,
                                zero_base(st->optim[r].path), (long long)total, zero_base(st->optim[0].path),
                                (long long)avail0);
            goto done;
        }
    }
    for (g = 0; g < shapes->u.seq.n; g++) {
        const ckpt_value *group = shapes->u.seq.items[g];
        if (group->kind != CKPT_VAL_DICT) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: param_shapes[%zu] is not a dict (%s)", b->dir, g,
                                zero_base(st->model[0].path));
            goto done;
        }
        for (i = 0; i < group->u.dict.map.n; i++) {
            int64_t q, left;
            rc = zero_param_shape(b, group, i, g, &name, &ndim, shape, &numel);
            if (rc < 0)
                goto done;
            q = numel / w + (numel % w != 0);
            if (q > avail0 - offset) {
                rc = ckpt_error_set(CKPT_EFORMAT, "%s: parameter %s needs elements [%lld, %lld) of every rank's "
                                    "fp32_flat_groups, they hold %lld", b->dir, name, (long long)offset,
                                    (long long)(offset + q), (long long)avail0);
                goto done;
            }
            b->n_ext = 0;
            if (n_flat[0])
                zero_begin(b, flat[0][0].t);
            for (r = 0, left = numel; r < st->n_optim && left > 0; r++) {
                rc = zero_push_range(b, flat[r], n_flat[r], offset, left < q ? left : q, name);
                if (rc < 0)
                    goto done;
                left -= left < q ? left : q;
            }
            rc = zero_emit(b, name, ndim, shape, NULL);
            if (rc < 0)
                goto done;
            offset += q;
        }
    }
    if (offset != avail0)
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: consumed %lld numels out of %lld - the fp32_flat_groups do not match "
                            "param_shapes", b->dir, (long long)(offset * w), (long long)(avail0 * w));
done:
    for (r = 0; flat && r < st->n_optim; r++)
        free(flat[r]);
    free(flat);
    free(n_flat);
    return rc;
}

static int zero_trainable(ckpt_zero_build *b)
{
    const ckpt_value *shapes = ckpt_zero__get(b->st->model[0].root, "param_shapes");
    zero_part *parts;
    int rc;

    if (!shapes || (shapes->kind != CKPT_VAL_LIST && shapes->kind != CKPT_VAL_TUPLE))
        return ckpt_error_set(CKPT_EFORMAT, "%s: no param_shapes list (checkpoint written before DeepSpeed 0.6?)",
                              b->st->model[0].path);
    if (b->stage == 3)
        return zero_trainable_3(b, shapes);
    parts = calloc(b->st->n_optim, sizeof *parts);
    if (!parts)
        return ckpt_error_oom();
    rc = zero_trainable_12(b, shapes, parts);
    free(parts);
    return rc;
}

/* Rank 0's shared_params: alias -> source; the alias shares the source's storage. */
static int zero_aliases(ckpt_zero_build *b)
{
    const ckpt_value *shared = ckpt_zero__get(b->st->model[0].root, "shared_params");
    size_t i;

    if (!shared || shared->kind != CKPT_VAL_DICT)
        return 0;
    for (i = 0; i < shared->u.dict.map.n; i++) {
        const ckpt_value *k = shared->u.dict.map.keys[i], *v = shared->u.dict.map.vals[i];
        const ckpt_value *node;
        ckpt_tensor copy, *t;
        const char *name;
        int index;
        if (k->kind != CKPT_VAL_STR || v->kind != CKPT_VAL_STR)
            return ckpt_error_set(CKPT_EFORMAT, "%s: shared_params entry %zu is not alias -> name",
                                  b->st->model[0].path, i);
        node = ckpt_value_dict_get(b->root, v->u.str.ptr);
        if (!node)
            continue; /* zero_to_fp32 skips aliases of parameters it did not output */
        copy = *ckpt_reader_tensor(b->r, node->u.tensor.index);
        name = ckpt_arena_strndup(ckpt_reader_arena(b->r), k->u.str.ptr, k->u.str.len);
        if (!name)
            return CKPT_ENOMEM;
        index = ckpt_reader_add_tensor(b->r, &t);
        if (index < 0)
            return index;
        *t = copy;
        t->name = name;
        index = zero_add_node(b, name, index);
        if (index < 0)
            return index;
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
        rc = zero_trainable(b);
    if (rc >= 0)
        rc = zero_aliases(b);
    return rc;
}

void ckpt_zero__build_dispose(ckpt_zero_build *b)
{
    free(b->ext);
    b->ext = NULL;
    b->n_ext = b->cap_ext = 0;
}
