/* The grad scaler's state of fp16 training (--fp16: megatron-core 0.16.1
 * optimizer/grad_scaler.py, DynamicGradScaler.state_dict() = {'scale': tensor([s]),
 * 'growth_tracker': int, 'hysteresis_tracker': int}; a constant scaler's is {}), which the
 * optimizer's state_dict() adds as 'grad_scaler' beside its param groups. Megatron saves it in
 * model_optim_rng.pt['optimizer'] (legacy), in common.pt['optimizer'] (fully_reshardable, and
 * the non-distributed optimizer's torch_dist form) and as the saved object
 * optimizer.distributed.dp_group_idx_<g>.grad_scaler of every model-parallel rank
 * (dp_reshardable; distrib_optimizer.py sharded_state_dict). Whatever the source form, it is
 * kept here once, its tensors as leaves of scaler_nodes, and written into any form. */
#include "megatron_dist_optim.h"

#include <ckpt/dcp.h>

#include <stdio.h>
#include <string.h>

/* A scale is one element; a saved object is read whole into memory. */
#define MG_SCALER_MAX_NUMEL 64

typedef struct scaler_ctx {
    ckpt_megatron *m;
    const ckpt_ckpt *ck;
    const char *file;
    const char *key;
    const ckpt_zip *z;
    const ckpt_node **nodes;
    size_t n, cap;
} scaler_ctx;

static int push_node(scaler_ctx *c, const ckpt_node *x, size_t *index)
{
    if (ckpt_node_numel(x) > MG_SCALER_MAX_NUMEL)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT,
                               "%s: the grad scaler's state holds a tensor of %lld elements (a scale has one)",
                               c->file, (long long)ckpt_node_numel(x));
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 4;
        const ckpt_node **nodes = ckpt_arena_alloc(c->m->arena, cap * sizeof *nodes);
        if (!nodes)
            return CKPT_ENOMEM;
        if (c->n)
            memcpy(nodes, c->nodes, c->n * sizeof *nodes);
        c->nodes = nodes;
        c->cap = cap;
    }
    c->nodes[c->n] = x;
    *index = c->n++;
    return 0;
}

/* A tensor of the source checkpoint (legacy file, common.pt). */
static int source_tensor(const ckpt_value *leaf, size_t *index, void *payload)
{
    scaler_ctx *c = payload;
    const ckpt_tensor *t = c->ck ? ckpt_tensor_at(c->ck, leaf->u.tensor.index) : NULL;
    const ckpt_node *x;
    int rc;

    if (!t)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: grad_scaler: tensor #%zu out of range",
                               c->file, leaf->u.tensor.index);
    if ((rc = ckpt_node_tensor(c->m->g, t, &x)) < 0)
        return rc;
    return push_node(c, x, index);
}

static int is_global(const ckpt_value *v, const char *module, const char *name)
{
    return v && v->kind == CKPT_VAL_GLOBAL && strcmp(v->u.global.module, module) == 0 &&
           strcmp(v->u.global.name, name) == 0;
}

static ckpt_dtype storage_dtype(const ckpt_value *cls)
{
    static const struct {
        const char *name;
        ckpt_dtype dtype;
    } known[] = { { "FloatStorage", CKPT_DTYPE_F32 },
                  { "DoubleStorage", CKPT_DTYPE_F64 },
                  { "HalfStorage", CKPT_DTYPE_F16 },
                  { "BFloat16Storage", CKPT_DTYPE_BF16 } };
    size_t i;

    for (i = 0; cls && cls->kind == CKPT_VAL_GLOBAL && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(cls->u.global.module, "torch") == 0 && strcmp(cls->u.global.name, known[i].name) == 0)
            return known[i].dtype;
    return CKPT_DTYPE_INVALID;
}

/* torch._utils._rebuild_tensor_v2(('storage', <cls>, key, location, numel), 0, (n,) or (),
 * stride, ...) of a float storage of one element: the scale, as a constant node of its value. */
static int object_tensor(scaler_ctx *c, const ckpt_value *v, ckpt_value **out)
{
    const ckpt_value *args = v->u.obj.args, *pid, *size, *key;
    const ckpt_zip_entry *rec;
    ckpt_buf name = CKPT_BUF_INIT, data = CKPT_BUF_INIT;
    int64_t shape[CKPT_MAX_DIMS], numel = 1;
    const ckpt_node *x;
    ckpt_dtype dtype;
    size_t i, index;
    int rc = 0;

    pid = args && args->kind == CKPT_VAL_TUPLE && args->u.seq.n >= 4 ? args->u.seq.items[0] : NULL;
    pid = pid && pid->kind == CKPT_VAL_PERSID ? pid->u.persid.pid : NULL;
    size = pid ? args->u.seq.items[2] : NULL;
    key = pid && pid->kind == CKPT_VAL_TUPLE && pid->u.seq.n == 5 ? pid->u.seq.items[2] : NULL;
    dtype = key ? storage_dtype(pid->u.seq.items[1]) : CKPT_DTYPE_INVALID;
    if (!key || key->kind != CKPT_VAL_STR || dtype == CKPT_DTYPE_INVALID || !size || size->kind != CKPT_VAL_TUPLE ||
        size->u.seq.n > CKPT_MAX_DIMS || args->u.seq.items[1]->kind != CKPT_VAL_INT ||
        args->u.seq.items[1]->u.integer != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT,
                               "%s: '%s': a tensor that is not a float tensor of its own storage", c->file, c->key);
    for (i = 0; i < size->u.seq.n; i++) {
        const ckpt_value *d = size->u.seq.items[i];
        if (d->kind != CKPT_VAL_INT || d->u.integer < 0 || d->u.integer > MG_SCALER_MAX_NUMEL)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s': a tensor of a bad shape", c->file,
                                   c->key);
        shape[i] = d->u.integer;
        numel *= d->u.integer;
    }
    if (numel != 1)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT,
                               "%s: '%s': a tensor of %lld elements; a grad scaler's scale has one", c->file, c->key,
                               (long long)numel);
    if (ckpt_buf_printf(&name, "archive/data/%s", key->u.str.ptr) < 0)
        return CKPT_ENOMEM;
    rec = ckpt_zip_find(c->z, (const char *)name.data);
    if (!rec)
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s': no storage record '%s'", c->file, c->key,
                             (const char *)name.data);
    else if ((rc = ckpt_zip_read(c->z, rec, 1, &data)) == 0 && data.len < ckpt_dtype_size(dtype))
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s': storage '%s' holds %zu bytes", c->file,
                             c->key, (const char *)name.data, data.len);
    if (rc == 0 && (rc = ckpt_node_full(c->m->g, dtype, (int)size->u.seq.n, shape,
                                        ckpt_dtype_load_f64(dtype, data.data), &x)) == 0 &&
        (rc = push_node(c, x, &index)) == 0 && !(*out = ckpt_value_new_tensor(c->m->arena, index)))
        rc = CKPT_ENOMEM;
    ckpt_buf_dispose(&name);
    ckpt_buf_dispose(&data);
    return rc;
}

/* A copy of saved object v with its tensors as TENSOR leaves. */
static int object_value(scaler_ctx *c, const ckpt_value *v, ckpt_value **out)
{
    ckpt_value *copy;
    size_t i;
    int rc;

    if (v->kind == CKPT_VAL_OBJECT && is_global(v->u.obj.callable, "torch._utils", "_rebuild_tensor_v2"))
        return object_tensor(c, v, out);
    if (v->kind == CKPT_VAL_PERSID || v->kind == CKPT_VAL_OBJECT)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT, "%s: '%s': an object the grad scaler has not",
                               c->file, c->key);
    if (v->kind != CKPT_VAL_DICT && v->kind != CKPT_VAL_LIST && v->kind != CKPT_VAL_TUPLE) {
        *out = (ckpt_value *)v;
        return 0;
    }
    if (!(copy = ckpt_value_new(c->m->arena, v->kind)))
        return CKPT_ENOMEM;
    for (i = 0; v->kind == CKPT_VAL_DICT && i < v->u.dict.map.n; i++) {
        ckpt_value *x;
        if ((rc = object_value(c, v->u.dict.map.vals[i], &x)) < 0 ||
            (rc = ckpt_value_dict_set(c->m->arena, copy, v->u.dict.map.keys[i], x)) < 0)
            return rc;
    }
    for (i = 0; v->kind != CKPT_VAL_DICT && i < v->u.seq.n; i++) {
        ckpt_value *x;
        if ((rc = object_value(c, v->u.seq.items[i], &x)) < 0 || (rc = ckpt_value_append(c->m->arena, copy, x)) < 0)
            return rc;
    }
    *out = copy;
    return 0;
}

int ckpt_megatron__read_dp_scaler(ckpt_megatron *m, const ckpt_value *root)
{
    static const char key[] = CKPT_MEGATRON_DIST_PREFIX "dp_group_idx_0.grad_scaler/shard_0_1";
    const ckpt_value *b = root ? ckpt_value_dict_get(root, key) : NULL;
    scaler_ctx c = { m, NULL, m->dist, key, NULL, NULL, 0, 0 };
    ckpt_zip *z = NULL;
    ckpt_value *v, *copy;
    int rc;

    m->scaler_read = 1;
    if (!b)
        return 0;
    if (b->kind != CKPT_VAL_BYTES)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a saved object", m->dist, key);
    if ((rc = ckpt_megatron__unpickle_object(m->dist, m->arena, key, b, &v, &z)) < 0)
        return rc;
    c.z = z;
    if (v->kind != CKPT_VAL_LIST || v->u.seq.n != 1)
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a saved object ([value])", m->dist,
                             key);
    else if ((rc = object_value(&c, v->u.seq.items[0], &copy)) == 0) {
        m->scaler = copy;
        m->scaler_nodes = c.nodes;
        m->n_scaler_nodes = c.n;
    }
    ckpt_zip_close(z);
    return rc;
}

int ckpt_megatron__dist_scaler(ckpt_megatron *m, const ckpt_value **out)
{
    const ckpt_value *root, *opt, *v;
    scaler_ctx c;
    ckpt_value *copy;
    int rc;

    *out = m->scaler;
    if (m->scaler_read)
        return 0;
    memset(&c, 0, sizeof c);
    c.m = m;
    ckpt_megatron__dist_source(m, &c.ck, &root);
    c.file = c.ck ? ckpt_path(c.ck) : "the model";
    opt = root ? ckpt_value_dict_get(root, "optimizer") : NULL;
    v = opt && opt->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(opt, "grad_scaler") : NULL;
    m->scaler_read = 1;
    if (!v)
        return 0;
    /* a legacy model has made no arena of its own */
    if (!m->arena && (rc = ckpt_arena_new(&m->arena)) < 0)
        return rc;
    if ((rc = ckpt_value_clone(m->arena, v, source_tensor, &c, &copy)) < 0)
        return rc;
    m->scaler = *out = copy;
    m->scaler_nodes = c.nodes;
    m->n_scaler_nodes = c.n;
    return 0;
}

typedef struct carry_ctx {
    const ckpt_megatron *m;
    ckpt_plan *plan;
    size_t file;
} carry_ctx;

static int plan_tensor(const ckpt_value *leaf, size_t *index, void *payload)
{
    const carry_ctx *c = payload;
    size_t i = leaf->u.tensor.index;
    char name[48];

    if (i >= c->m->n_scaler_nodes)
        return ckpt_error_set(CKPT_EINVALID, "grad_scaler: tensor #%zu of %zu", i, c->m->n_scaler_nodes);
    snprintf(name, sizeof name, "grad_scaler:%zu", i);
    return ckpt_plan_add_tensor(c->plan, c->file, name, c->m->scaler_nodes[i], 0, index);
}

int ckpt_megatron__scaler_carry(const ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_value *v,
                                ckpt_value **out)
{
    carry_ctx c = { m, plan, file };

    return ckpt_value_clone(ckpt_plan_arena(plan), v, plan_tensor, &c, out);
}

int ckpt_megatron__scaler_object(const ckpt_megatron *m, const ckpt_value *v, ckpt_buf *out)
{
    return ckpt_dcp_saved_value_tensors(v, m->scaler_nodes, m->n_scaler_nodes, out);
}
