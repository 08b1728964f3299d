/* Copying value trees between owners: an output file's tree is built from pieces of the
 * input's (args, rng state, optimizer hyper-parameters), with its own tensor table. */
#include <ckpt/sys/table.h>

#include <ckpt/sys/common.h>
#include <ckpt/value.h>

#include <string.h>

#define CLONE_MAX_DEPTH 4096

typedef struct cloner {
    ckpt_arena *arena;
    ckpt_value_tensor_fn tensor_fn;
    void *payload;
    ckpt_u64map done; /* source node -> its copy */
} cloner;

static int clone_node(cloner *c, const ckpt_value *v, unsigned depth, ckpt_value **out);

static int clone_ptrs(cloner *c, ckpt_value **src, size_t n, unsigned depth, ckpt_value ***out)
{
    ckpt_value **dst;
    size_t i;
    int rc;

    *out = NULL;
    if (!n)
        return 0;
    if (n > SIZE_MAX / sizeof *dst)
        return ckpt_error_oom();
    dst = ckpt_arena_alloc(c->arena, n * sizeof *dst);
    if (!dst)
        return CKPT_ENOMEM;
    for (i = 0; i < n; i++)
        if ((rc = clone_node(c, src[i], depth + 1, &dst[i])) < 0)
            return rc;
    *out = dst;
    return 0;
}

static int clone_seq(cloner *c, const ckpt_value_seq *src, unsigned depth, ckpt_value_seq *dst)
{
    dst->n = dst->cap = src->n;
    return clone_ptrs(c, src->items, src->n, depth, &dst->items);
}

static int clone_map(cloner *c, const ckpt_value_map *src, unsigned depth, ckpt_value_map *dst)
{
    int rc;

    dst->n = dst->cap = src->n;
    dst->index = NULL; /* rebuilt by the next ckpt_value_dict_set */
    if ((rc = clone_ptrs(c, src->keys, src->n, depth, &dst->keys)) < 0)
        return rc;
    return clone_ptrs(c, src->vals, src->n, depth, &dst->vals);
}

static int clone_opt(cloner *c, const ckpt_value *v, unsigned depth, ckpt_value **out)
{
    *out = NULL;
    return v ? clone_node(c, v, depth + 1, out) : 0;
}

static int clone_children(cloner *c, const ckpt_value *v, ckpt_value *copy, unsigned depth)
{
    int rc;

    switch (v->kind) {
    case CKPT_VAL_TUPLE: case CKPT_VAL_LIST: case CKPT_VAL_SET: case CKPT_VAL_FROZENSET:
        return clone_seq(c, &v->u.seq, depth, &copy->u.seq);
    case CKPT_VAL_DICT:
        if ((rc = clone_map(c, &v->u.dict.map, depth, &copy->u.dict.map)) < 0 ||
            (rc = clone_opt(c, v->u.dict.cls, depth, &copy->u.dict.cls)) < 0)
            return rc;
        return clone_opt(c, v->u.dict.state, depth, &copy->u.dict.state);
    case CKPT_VAL_OBJECT:
        if ((rc = clone_opt(c, v->u.obj.callable, depth, &copy->u.obj.callable)) < 0 ||
            (rc = clone_opt(c, v->u.obj.args, depth, &copy->u.obj.args)) < 0 ||
            (rc = clone_opt(c, v->u.obj.kwargs, depth, &copy->u.obj.kwargs)) < 0 ||
            (rc = clone_opt(c, v->u.obj.state, depth, &copy->u.obj.state)) < 0 ||
            (rc = clone_seq(c, &v->u.obj.list_items, depth, &copy->u.obj.list_items)) < 0)
            return rc;
        return clone_map(c, &v->u.obj.dict_items, depth, &copy->u.obj.dict_items);
    case CKPT_VAL_PERSID:
        return clone_opt(c, v->u.persid.pid, depth, &copy->u.persid.pid);
    case CKPT_VAL_TENSOR:
        if ((rc = clone_opt(c, v->u.tensor.source, depth, &copy->u.tensor.source)) < 0)
            return rc;
        return c->tensor_fn ? c->tensor_fn(v, &copy->u.tensor.index, c->payload) : 0;
    default:
        return 0; /* scalars, strings, bytes, globals: their payloads are borrowed */
    }
}

static int clone_node(cloner *c, const ckpt_value *v, unsigned depth, ckpt_value **out)
{
    uint64_t seen;
    ckpt_value *copy;
    int rc;

    if (ckpt_u64map_get(&c->done, ckpt_u64map_ptrkey(v), &seen)) {
        *out = (ckpt_value *)(uintptr_t)seen;
        return 0;
    }
    if (depth > CLONE_MAX_DEPTH)
        return ckpt_error_set(CKPT_EFORMAT, "value tree deeper than %d levels", CLONE_MAX_DEPTH);
    copy = ckpt_arena_alloc(c->arena, sizeof *copy);
    if (!copy)
        return CKPT_ENOMEM;
    memcpy(copy, v, sizeof *copy);
    /* registered before the children, so that a cycle back to v finds the copy */
    if ((rc = ckpt_u64map_set(&c->done, ckpt_u64map_ptrkey(v), (uint64_t)(uintptr_t)copy)) < 0)
        return rc;
    if ((rc = clone_children(c, v, copy, depth)) != 0)
        return rc;
    *out = copy;
    return 0;
}

int ckpt_value_clone(ckpt_arena *a, const ckpt_value *v, ckpt_value_tensor_fn tensor_fn, void *payload,
                     ckpt_value **out)
{
    cloner c = { a, tensor_fn, payload, CKPT_U64MAP_INIT };
    int rc;

    *out = NULL;
    if (!v)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_value_clone: no value");
    rc = clone_node(&c, v, 0, out);
    ckpt_u64map_dispose(&c.done);
    if (rc != 0)
        *out = NULL;
    return rc;
}
