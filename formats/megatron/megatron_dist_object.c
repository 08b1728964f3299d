/* megatron-core's ShardedObjects in a torch_dist checkpoint: DCP keeps each as a bytes item
 * "<name>/shard_<offset>_<shape>", the torch.save archive of the one-element list [value]
 * (dist_checkpointing/strategies/torch.py _mcore_to_torch_sharded_object). Unpickled here,
 * nothing imported; the objects read are small (param groups, bucket sizes, the common state
 * of megatron-core 0.19, which keeps no common.pt: serialization.py save, "common_state"). */
#include "megatron_private.h"

#include <ckpt/sys/io.h>
#include <ckpt/sys/pickle.h>
#include <ckpt/sys/zip.h>

#include <string.h>

#define EXTRA_SHARD "._extra_state/shard_"

static int has_persid(const ckpt_value *v)
{
    size_t i;

    if (!v)
        return 0;
    switch (v->kind) {
    case CKPT_VAL_PERSID:
        return 1;
    case CKPT_VAL_TUPLE:
    case CKPT_VAL_LIST:
        for (i = 0; i < v->u.seq.n; i++)
            if (has_persid(v->u.seq.items[i]))
                return 1;
        return 0;
    case CKPT_VAL_DICT:
        for (i = 0; i < v->u.dict.map.n; i++)
            if (has_persid(v->u.dict.map.keys[i]) || has_persid(v->u.dict.map.vals[i]))
                return 1;
        return 0;
    case CKPT_VAL_OBJECT:
        return has_persid(v->u.obj.args) || has_persid(v->u.obj.state);
    default:
        return 0;
    }
}

int ckpt_megatron__unpickle_object(const char *file, ckpt_arena *a, const char *key, const ckpt_value *b,
                                   ckpt_value **out, ckpt_zip **keep)
{
    ckpt_pickle_read_options opts = CKPT_PICKLE_READ_OPTIONS_INIT;
    const ckpt_zip_entry *pkl = NULL;
    ckpt_buf data = CKPT_BUF_INIT;
    ckpt_zip *z = NULL;
    ckpt_file f;
    uint8_t *copy = NULL;
    size_t i, end;
    int rc;

    memset(&f, 0, sizeof f);
    f.path = key;
    f.fd = -1;
    f.data = b->u.bytes.ptr;
    f.size = b->u.bytes.len;
    if ((rc = ckpt_zip_open(&z, &f)) < 0) {
        ckpt_error_prefix("%s", file);
        return rc;
    }
    for (i = 0; i < ckpt_zip_count(z); i++) {
        const char *name = ckpt_zip_entry_at(z, i)->name, *slash = strrchr(name, '/');
        if (slash && strcmp(slash, "/data.pkl") == 0)
            pkl = ckpt_zip_entry_at(z, i);
    }
    if (!pkl)
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a torch.save archive (no data.pkl)",
                             file, key);
    else if ((rc = ckpt_zip_read(z, pkl, 1, &data)) < 0)
        ckpt_error_prefix("%s", file);
    else if (!(copy = ckpt_arena_alloc(a, data.len + 1)))
        rc = CKPT_ENOMEM;
    if (rc == 0) {
        memcpy(copy, data.data, data.len);
        opts.source = key;
        if ((rc = ckpt_pickle_read(out, &end, a, copy, data.len, &opts)) < 0)
            ckpt_error_prefix("%s", file);
    }
    ckpt_buf_dispose(&data);
    if (keep && rc == 0)
        *keep = z;
    else
        ckpt_zip_close(z);
    return rc;
}

int ckpt_megatron__saved_object(const char *file, ckpt_arena *a, const ckpt_value *root, const char *key,
                                const ckpt_value **out)
{
    const ckpt_value *b = root ? ckpt_value_dict_get(root, key) : NULL;
    ckpt_value *v = NULL;
    int rc;

    *out = NULL;
    if (!b)
        return 0;
    if (b->kind != CKPT_VAL_BYTES)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a saved object", file, key);
    if ((rc = ckpt_megatron__unpickle_object(file, a, key, b, &v, NULL)) < 0)
        return rc;
    if (has_persid(v))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT, "%s: '%s' holds tensors, not expected there",
                               file, key);
    if (v->kind != CKPT_VAL_LIST || v->u.seq.n != 1)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a saved object ([value])", file,
                               key);
    *out = v->u.seq.items[0];
    return 0;
}

int ckpt_megatron__dist_common(const char *file, ckpt_arena *a, const ckpt_value *root, const ckpt_value **out)
{
    const ckpt_value *common;
    ckpt_value *merged;
    size_t i;
    int rc;

    *out = root;
    if (!root || ckpt_value_dict_get(root, "args"))
        return 0;
    if ((rc = ckpt_megatron__saved_object(file, a, root, CKPT_MEGATRON_COMMON_STATE, &common)) < 0 || !common)
        return rc;
    if (common->kind != CKPT_VAL_DICT)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a dict (megatron-core's common state)",
                               file, CKPT_MEGATRON_COMMON_STATE);
    if (!(merged = ckpt_value_new(a, CKPT_VAL_DICT)))
        return CKPT_ENOMEM;
    for (i = 0; i < root->u.dict.map.n; i++)
        if (ckpt_value_dict_set(a, merged, (ckpt_value *)root->u.dict.map.keys[i], (ckpt_value *)root->u.dict.map.vals[i]) < 0)
            return CKPT_ENOMEM;
    for (i = 0; i < common->u.dict.map.n; i++) {
        const ckpt_value *k = common->u.dict.map.keys[i];
        if (k->kind == CKPT_VAL_STR && ckpt_value_dict_get(root, k->u.str.ptr))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                                   "%s: '%s' holds '%s', which the checkpoint also has as an item", file,
                                   CKPT_MEGATRON_COMMON_STATE, k->u.str.ptr);
        if (ckpt_value_dict_set(a, merged, (ckpt_value *)k, (ckpt_value *)common->u.dict.map.vals[i]) < 0)
            return CKPT_ENOMEM;
    }
    *out = merged;
    return 0;
}

/* torch._utils._rebuild_tensor_v2(storage, offset, size, ...) of no elements. */
static int empty_tensor(const ckpt_value *v)
{
    const ckpt_value *args = v->kind == CKPT_VAL_OBJECT ? v->u.obj.args : NULL, *size;
    const ckpt_value *f = v->kind == CKPT_VAL_OBJECT ? v->u.obj.callable : NULL;
    size_t i;

    if (!f || f->kind != CKPT_VAL_GLOBAL || strcmp(f->u.global.module, "torch._utils") != 0 ||
        strcmp(f->u.global.name, "_rebuild_tensor_v2") != 0 || !args || args->kind != CKPT_VAL_TUPLE ||
        args->u.seq.n < 3 || (size = args->u.seq.items[2])->kind != CKPT_VAL_TUPLE)
        return 0;
    for (i = 0; i < size->u.seq.n; i++)
        if (size->u.seq.items[i]->kind == CKPT_VAL_INT && size->u.seq.items[i]->u.integer == 0)
            return 1;
    return 0;
}

/* Transformer Engine >= 2.0 saves a module's extra state as a uint8 tensor, empty without FP8
 * state; the local spec's modules, None. What else an object holds (FP8 metadata, an older
 * TE's BytesIO) is not read. */
int ckpt_megatron__dist_extra_states(ckpt_megatron *m, const ckpt_value *root)
{
    size_t i, n = root && root->kind == CKPT_VAL_DICT ? root->u.dict.map.n : 0;
    int rc;

    for (i = 0; i < n && !m->dist_fp8_extra; i++) {
        const ckpt_value *k = root->u.dict.map.keys[i], *b = root->u.dict.map.vals[i];
        ckpt_value *v;
        if (k->kind != CKPT_VAL_STR || !strstr(k->u.str.ptr, EXTRA_SHARD))
            continue;
        if (b->kind != CKPT_VAL_BYTES)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a saved object", m->dist,
                                   k->u.str.ptr);
        if ((rc = ckpt_megatron__unpickle_object(m->dist, m->arena, k->u.str.ptr, b, &v, NULL)) < 0)
            return rc;
        if (v->kind != CKPT_VAL_LIST || v->u.seq.n != 1)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a saved object ([value])",
                                   m->dist, k->u.str.ptr);
        if (v->u.seq.items[0]->kind != CKPT_VAL_NONE && !empty_tensor(v->u.seq.items[0]))
            m->dist_fp8_extra = k->u.str.ptr;
    }
    return 0;
}

int ckpt_megatron__dist_extra_refused(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    if (!m->dist_fp8_extra || t->extra_state != CKPT_MEGATRON_EXTRA_COPY)
        return 0;
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                           "%s: '%s' holds Transformer Engine FP8 state, which is not read from torch_dist yet; "
                           "--extra-state empty (no FP8 state) or drop writes the model",
                           m->dist, m->dist_fp8_extra);
}
