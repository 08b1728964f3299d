/* Interpreting the tensor constructions of a torch.save pickle.
 *
 * The pickle VM leaves `torch._utils._rebuild_tensor_v2(storage_pid, offset, size, stride,
 * requires_grad, hooks)` and its relatives as OBJECT nodes. This pass finds them, checks
 * every argument, registers one ckpt_storage per persistent-id key and one ckpt_tensor per
 * construction, and rewrites the node into a CKPT_VAL_TENSOR in place, so that a node the
 * pickle memo shares between two keys becomes one tensor. Containers (zip records, legacy
 * data sections) bind the storages to bytes afterwards. */
#include "torch_private.h"

#include <stdlib.h>
#include <limits.h>
#include <string.h>

enum rebuild_kind {
    RB_NONE = 0,
    RB_TENSOR_V1, /* _rebuild_tensor(storage, offset, size, stride) */
    RB_TENSOR_V2, /* _rebuild_tensor_v2(..., requires_grad, hooks[, metadata]) */
    RB_TENSOR_V3, /* _rebuild_tensor_v3(..., requires_grad, hooks, dtype[, metadata]) */
    RB_PARAM,     /* _rebuild_parameter(tensor, requires_grad, hooks) */
    RB_PARAM_STATE, /* _rebuild_parameter_with_state(tensor, requires_grad, hooks, state) */
    RB_FROM_TYPE, /* torch._tensor._rebuild_from_type_v2(func, type, args, state) */
    RB_REFUSE     /* a tensor kind without a dense CPU storage */
};

/* Nesting of parameter / subclass wrappers around one tensor. */
#define MAX_WRAP_DEPTH 4

static const struct {
    const char *name;
    const char *what;
} refused_rebuilds[] = {
    { "_rebuild_qtensor", "quantized tensor" },
    { "_rebuild_sparse_tensor", "sparse tensor" },
    { "_rebuild_sparse_csr_tensor", "sparse tensor" },
    { "_rebuild_meta_tensor_no_storage", "meta tensor" },
    { "_rebuild_nested_tensor", "nested tensor" },
    { "_rebuild_wrapper_subclass", "tensor subclass without storage" },
    { "_rebuild_device_tensor_from_numpy", "device tensor" },
    { "_rebuild_device_tensor_from_cpu_tensor", "device tensor" },
    { "_rebuild_xla_tensor", "XLA tensor" },
    { "_rebuild_mlc_tensor", "MLC tensor" },
};
static int rebuild_kind(const ckpt_value *callable, const char **name)
{
    const char *m, *n;

    if (!callable || callable->kind != CKPT_VAL_GLOBAL)
        return RB_NONE;
    m = callable->u.global.module;
    n = callable->u.global.name;
    *name = n;
    if (strcmp(m, "torch._tensor") == 0 || strcmp(m, "torch.tensor") == 0)
        return strcmp(n, "_rebuild_from_type_v2") == 0 ? RB_FROM_TYPE : RB_NONE;
    if (strcmp(m, "torch._utils") != 0 || strncmp(n, "_rebuild_", 9) != 0)
        return RB_NONE;
    if (strcmp(n, "_rebuild_tensor") == 0)
        return RB_TENSOR_V1;
    if (strcmp(n, "_rebuild_tensor_v2") == 0)
        return RB_TENSOR_V2;
    if (strcmp(n, "_rebuild_tensor_v3") == 0)
        return RB_TENSOR_V3;
    if (strcmp(n, "_rebuild_parameter") == 0)
        return RB_PARAM;
    if (strcmp(n, "_rebuild_parameter_with_state") == 0)
        return RB_PARAM_STATE;
    return RB_REFUSE;
}

static const char *refused_what(const char *name)
{
    size_t i;
    for (i = 0; i < sizeof refused_rebuilds / sizeof refused_rebuilds[0]; i++)
        if (strcmp(refused_rebuilds[i].name, name) == 0)
            return refused_rebuilds[i].what;
    return "tensor kind";
}

/* ---- one tensor ----------------------------------------------------------- */

ckpt_tensor *ckpt_torch__tensor(ckpt_torch_interp *in, size_t index)
{
    return in->own_tensors ? &in->tensors[index] : ckpt_reader_tensor(in->reader, index);
}

/* A zeroed tensor in the table the interpretation fills; its index or an error. */
static int add_tensor(ckpt_torch_interp *in, ckpt_tensor **out)
{
    ckpt_tensor *grown;
    int index;

    if (!in->own_tensors)
        return ckpt_reader_add_tensor(in->reader, out);
    if (in->n_tensors >= INT_MAX)
        return ckpt_torch__fail(in, CKPT_EFORMAT, "", "more than %d tensors", INT_MAX);
    if (!(grown = ckpt_array_grow(in->tensors, &in->cap_tensors, in->n_tensors, sizeof *in->tensors)))
        return CKPT_ENOMEM;
    in->tensors = grown;
    index = (int)in->n_tensors++;
    memset(&in->tensors[index], 0, sizeof *in->tensors);
    *out = &in->tensors[index];
    return index;
}

static int parse_dims(const ckpt_torch_interp *in, const ckpt_value *v, const char *what, const char *path,
                      int64_t *dims, int *n)
{
    size_t i;

    /* Very old files pickle sizes as torch.Size((d0, d1, ...)). */
    if (v && v->kind == CKPT_VAL_OBJECT && v->u.obj.callable && v->u.obj.callable->kind == CKPT_VAL_GLOBAL &&
        strcmp(v->u.obj.callable->u.global.module, "torch") == 0 &&
        strcmp(v->u.obj.callable->u.global.name, "Size") == 0 &&
        v->u.obj.args && v->u.obj.args->kind == CKPT_VAL_TUPLE && v->u.obj.args->u.seq.n == 1)
        v = v->u.obj.args->u.seq.items[0];
    if (!v || v->kind != CKPT_VAL_TUPLE)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor %s is not a tuple", what);
    if (v->u.seq.n > CKPT_MAX_DIMS)
        return ckpt_torch__fail(in, CKPT_EUNSUPPORTED, path, "tensor has %zu dimensions, at most %d supported",
                                v->u.seq.n, CKPT_MAX_DIMS);
    for (i = 0; i < v->u.seq.n; i++) {
        const ckpt_value *d = v->u.seq.items[i];
        if (d->kind != CKPT_VAL_INT || d->u.integer < 0)
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor %s has a non-integer or negative entry", what);
        dims[i] = d->u.integer;
    }
    *n = (int)v->u.seq.n;
    return 0;
}

/* Conjugate / negative bits would change the values that the raw bytes stand for. */
static int metadata_plain(const ckpt_value *m)
{
    size_t i;

    if (!m || m->kind == CKPT_VAL_NONE)
        return 1;
    if (m->kind != CKPT_VAL_DICT)
        return 0;
    for (i = 0; i < m->u.dict.map.n; i++) {
        const ckpt_value *v = m->u.dict.map.vals[i];
        if (v->kind != CKPT_VAL_BOOL || v->u.boolean)
            return 0;
    }
    return 1;
}

/* Every element of the view must lie inside the storage (or the legacy storage view). */
static int check_view(const ckpt_torch_interp *in, const ckpt_tensor *t, const ckpt_torch_pid *info,
                      const char *path)
{
    int64_t last = t->offset - info->view_offset, numel = 1;
    int i;

    for (i = 0; i < t->ndim; i++)
        if (CKPT_MUL_OVERFLOWS(numel, t->shape[i], &numel))
            goto overflow;
    if (numel == 0)
        return 0;
    for (i = 0; i < t->ndim; i++) {
        int64_t span;
        if (CKPT_MUL_OVERFLOWS(t->shape[i] - 1, t->stride[i], &span) || CKPT_ADD_OVERFLOWS(last, span, &last))
            goto overflow;
    }
    if (last < info->limit)
        return 0;
    return ckpt_torch__fail(in, CKPT_EFORMAT, path,
                            "tensor view reaches element %lld but storage %s%s holds %lld %s elements",
                            (long long)last, in->key_prefix, info->ref->key, (long long)info->limit,
                            ckpt_dtype_name(t->dtype));
overflow:
    return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor view size overflows");
}

static int build_tensor(ckpt_torch_interp *in, int kind, const ckpt_value *args, const char *path)
{
    size_t n = args->u.seq.n, need = kind == RB_TENSOR_V1 ? 4 : kind == RB_TENSOR_V2 ? 6 : 7;
    const ckpt_value *off, *rg = NULL, *meta = NULL;
    ckpt_dtype dtype = CKPT_DTYPE_INVALID;
    int64_t shape[CKPT_MAX_DIMS], stride[CKPT_MAX_DIMS];
    int ndim, nstride, rc, index;
    ckpt_torch_pid info;
    ckpt_tensor *t;

    if (n != need && !(kind != RB_TENSOR_V1 && n == need + 1))
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor rebuild call has %zu arguments", n);
    if (kind != RB_TENSOR_V1) {
        rg = args->u.seq.items[4];
        if (rg->kind != CKPT_VAL_BOOL)
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor requires_grad is not a bool");
        meta = n == need + 1 ? args->u.seq.items[need] : NULL;
        if (!metadata_plain(meta))
            return ckpt_torch__fail(in, CKPT_EUNSUPPORTED, path,
                                    "tensor with conjugate/negative-bit metadata not supported");
    }
    if (kind == RB_TENSOR_V3) {
        const ckpt_value *g = args->u.seq.items[6];
        if (!g || g->kind != CKPT_VAL_GLOBAL || strcmp(g->u.global.module, "torch") != 0)
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor dtype is not a torch dtype");
        dtype = ckpt_dtype_from_name(g->u.global.name);
        if (dtype == CKPT_DTYPE_INVALID)
            return ckpt_torch__fail(in, CKPT_EUNSUPPORTED, path, "dtype torch.%s not supported", g->u.global.name);
    }
    rc = ckpt_torch__resolve_pid(in, args->u.seq.items[0], path, &dtype, &info);
    if (rc < 0)
        return rc;
    off = args->u.seq.items[1];
    if (off->kind != CKPT_VAL_INT || off->u.integer < 0)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor storage offset is not a non-negative integer");
    rc = parse_dims(in, args->u.seq.items[2], "size", path, shape, &ndim);
    if (rc < 0)
        return rc;
    rc = parse_dims(in, args->u.seq.items[3], "stride", path, stride, &nstride);
    if (rc < 0)
        return rc;
    if (ndim != nstride)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor has %d sizes but %d strides", ndim, nstride);
    if (off->u.integer > INT64_MAX - info.view_offset)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor storage offset overflows");

    index = add_tensor(in, &t);
    if (index < 0)
        return index;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof shape[0]);
    memcpy(t->stride, stride, (size_t)ndim * sizeof stride[0]);
    t->offset = off->u.integer + info.view_offset;
    t->storage = info.ref->storage;
    t->flags = rg && rg->u.boolean ? CKPT_TENSOR_REQUIRES_GRAD : 0;
    rc = check_view(in, t, &info, path);
    return rc < 0 ? rc : index;
}

/* ---- the tree ------------------------------------------------------------- */

typedef struct site {
    ckpt_value *node;
    const char *path;
} site;

typedef struct sites {
    site *v;
    size_t n, cap;
} sites;

typedef struct walk_state {
    ckpt_torch_interp *in;
    sites objects;  /* torch rebuild calls, in walk order */
    sites persids;
    uintptr_t *used; /* persistent ids consumed by tensors */
    size_t n_used, cap_used;
} walk_state;

static int push_site(ckpt_arena *arena, sites *s, const ckpt_value *v, const char *path)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        site *p = realloc(s->v, cap * sizeof *p);
        if (!p)
            return ckpt_error_oom();
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n].path = ckpt_arena_strndup(arena, path, strlen(path));
    if (!s->v[s->n].path)
        return CKPT_ENOMEM;
    /* The walk hands out const nodes; they are ours (the reader's arena) to rewrite. */
    s->v[s->n].node = (ckpt_value *)(uintptr_t)v;
    s->n++;
    return 0;
}

static int collect(const ckpt_value *v, const char *path, void *payload)
{
    walk_state *w = payload;
    ckpt_arena *arena = ckpt_reader_arena(w->in->reader);
    const char *name;

    if (v->kind == CKPT_VAL_PERSID)
        return push_site(arena, &w->persids, v, path);
    if (v->kind == CKPT_VAL_OBJECT && v->u.obj.how == CKPT_OBJ_REDUCE &&
        rebuild_kind(v->u.obj.callable, &name) != RB_NONE)
        return push_site(arena, &w->objects, v, path);
    return 0;
}

static int mark_used(walk_state *w, const ckpt_value *pid)
{
    if (w->n_used == w->cap_used) {
        size_t cap = w->cap_used ? w->cap_used * 2 : 64;
        uintptr_t *p = realloc(w->used, cap * sizeof *p);
        if (!p)
            return ckpt_error_oom();
        w->used = p;
        w->cap_used = cap;
    }
    w->used[w->n_used++] = (uintptr_t)pid;
    return 0;
}

static int convert(walk_state *w, ckpt_value *node, const char *path, int depth);

/* A tensor built by `callable(*args)`; returns its index. */
static int call_tensor(walk_state *w, const ckpt_value *callable, const ckpt_value *args, const char *path,
                       int depth)
{
    ckpt_torch_interp *in = w->in;
    const char *name = "";
    int kind = rebuild_kind(callable, &name), index, rc;
    const ckpt_value *inner, *rg;
    ckpt_tensor *t;

    if (kind == RB_REFUSE)
        return ckpt_torch__fail(in, CKPT_EUNSUPPORTED, path, "%s (torch._utils.%s) not supported",
                                refused_what(name), name);
    if (kind == RB_NONE)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor wrapper does not hold a tensor construction");
    if (!args || args->kind != CKPT_VAL_TUPLE || args->u.seq.n == 0)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "torch.%s arguments are not a tuple", name);
    if (depth > MAX_WRAP_DEPTH)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor wrappers nested too deeply");

    switch (kind) {
    case RB_TENSOR_V1:
    case RB_TENSOR_V2:
    case RB_TENSOR_V3:
        index = build_tensor(in, kind, args, path);
        if (index < 0)
            return index;
        rc = mark_used(w, args->u.seq.items[0]);
        return rc < 0 ? rc : index;
    case RB_FROM_TYPE:
        if (args->u.seq.n != 4)
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "_rebuild_from_type_v2 takes 4 arguments");
        return call_tensor(w, args->u.seq.items[0], args->u.seq.items[2], path, depth + 1);
    default: /* RB_PARAM, RB_PARAM_STATE */
        if (args->u.seq.n != (kind == RB_PARAM ? 3u : 4u))
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "torch._utils.%s has %zu arguments", name,
                                    args->u.seq.n);
        inner = args->u.seq.items[0];
        rg = args->u.seq.items[1];
        if (rg->kind != CKPT_VAL_BOOL)
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "parameter requires_grad is not a bool");
        if (inner->kind == CKPT_VAL_TENSOR) {
            index = (int)inner->u.tensor.index;
        } else if (inner->kind == CKPT_VAL_OBJECT && inner->u.obj.how == CKPT_OBJ_REDUCE) {
            /* The inner node is rewritten too, so that a memo reference to it elsewhere sees the same tensor. */
            index = convert(w, (ckpt_value *)(uintptr_t)inner, path, depth + 1);
        } else {
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "parameter data is not a tensor");
        }
        if (index < 0)
            return index;
        t = ckpt_torch__tensor(in, (size_t)index);
        t->flags = (t->flags & ~CKPT_TENSOR_REQUIRES_GRAD) | CKPT_TENSOR_PARAMETER |
                   (rg->u.boolean ? CKPT_TENSOR_REQUIRES_GRAD : 0);
        return index;
    }
}

/* Rewrite an OBJECT rebuild node into a TENSOR node; returns the tensor index. */
static int convert(walk_state *w, ckpt_value *node, const char *path, int depth)
{
    ckpt_value *source;
    int index;

    if (node->kind == CKPT_VAL_TENSOR)
        return (int)node->u.tensor.index;
    index = call_tensor(w, node->u.obj.callable, node->u.obj.args, path, depth);
    if (index < 0)
        return index;
    source = ckpt_value_new(ckpt_reader_arena(w->in->reader), CKPT_VAL_NONE);
    if (!source)
        return CKPT_ENOMEM;
    *source = *node;
    memset(&node->u, 0, sizeof node->u);
    node->kind = CKPT_VAL_TENSOR;
    node->u.tensor.index = (size_t)index;
    node->u.tensor.source = source;
    return index;
}

static int cmp_uptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

int ckpt_torch__interpret(ckpt_torch_interp *in, ckpt_value *root)
{
    walk_state w;
    size_t i;
    int rc;

    memset(&w, 0, sizeof w);
    w.in = in;
    rc = ckpt_value_walk(root, CKPT_TORCH_MAX_DEPTH, collect, &w);
    if (rc < 0) {
        if (rc == CKPT_EFORMAT)
            ckpt_error_prefix("%s", in->file);
        goto done;
    }
    for (i = 0; i < w.objects.n; i++) {
        rc = convert(&w, w.objects.v[i].node, w.objects.v[i].path, 0);
        if (rc < 0)
            goto done;
    }
    /* A storage outside any tensor would lose its bytes on the way through. */
    if (w.n_used)
        qsort(w.used, w.n_used, sizeof *w.used, cmp_uptr);
    for (i = 0; i < w.persids.n; i++) {
        uintptr_t key = (uintptr_t)w.persids.v[i].node;
        if (!w.n_used || !bsearch(&key, w.used, w.n_used, sizeof *w.used, cmp_uptr)) {
            rc = ckpt_torch__fail(in, CKPT_EUNSUPPORTED, w.persids.v[i].path,
                                  "storage outside a tensor not supported");
            goto done;
        }
    }
    rc = 0;
done:
    free(w.objects.v);
    free(w.persids.v);
    free(w.used);
    return rc;
}
