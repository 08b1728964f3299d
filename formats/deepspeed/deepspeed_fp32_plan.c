/* The output files of a consolidated ZeRO checkpoint, as DeepSpeed 0.19's zero_to_fp32
 * names and fills them, planned as one ckpt_plan.
 *
 * Sharding is the library's (ckpt/shard.h, huggingface_hub's rules) applied to the state
 * dict zero_to_fp32 passes it: fresh tensors of the output dtype, so a tensor's size is its
 * numel times 4 for floats, and only tied names share a storage. */
#include <ckpt/deepspeed.h>
#include <ckpt/sys/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_view(const ckpt_tensor *a, const ckpt_tensor *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && a->offset == b->offset &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0 &&
           memcmp(a->stride, b->stride, (size_t)a->ndim * sizeof *a->stride) == 0;
}

static int want(const ckpt_tensor *t, const ckpt_deepspeed_fp32_options *o, int optimizer)
{
    if (optimizer)
        return (t->flags & CKPT_TENSOR_OPTIMIZER_STATE) != 0;
    if (t->flags & CKPT_TENSOR_OPTIMIZER_STATE)
        return 0;
    return !(o->exclude_frozen && (t->flags & CKPT_TENSOR_FROZEN));
}

/* Entries in order of storage, then of index: a run of one storage starts with its owner. */
typedef struct storage_use {
    const void *storage;
    size_t entry;
} storage_use;

static int by_storage(const void *pa, const void *pb)
{
    const storage_use *a = pa, *b = pb;

    if (a->storage != b->storage)
        return (uintptr_t)a->storage < (uintptr_t)b->storage ? -1 : 1;
    return a->entry < b->entry ? -1 : a->entry > b->entry;
}

/* A later entry viewing its storage as the first one does is that tensor under another
 * name (tied weights): it shares the first one's node. */
static int find_tied(ckpt_deepspeed_fp32_set *s)
{
    storage_use *uses = calloc(s->n_entries + 1, sizeof *uses);
    size_t i, n = 0, first = 0;

    if (!uses)
        return ckpt_error_oom();
    for (i = 0; i < s->n_entries; i++)
        if (s->entries[i].t->storage) {
            uses[n].storage = s->entries[i].t->storage;
            uses[n++].entry = i;
        }
    qsort(uses, n, sizeof *uses, by_storage);
    for (i = 1; i < n; i++) {
        ckpt_deepspeed_fp32_entry *owner, *e = &s->entries[uses[i].entry];
        if (uses[i].storage != uses[first].storage) {
            first = i;
            continue;
        }
        owner = &s->entries[uses[first].entry];
        if (same_view(owner->t, e->t))
            e->storage = uses[first].entry;
    }
    free(uses);
    return 0;
}

/* The entries of one state dict: output dtype, size, and nodes (shared by tied names), cast
 * to float32 as zero_to_fp32 writes floating tensors. */
static int collect(ckpt_graph *g, ckpt_deepspeed_fp32_set *s, const ckpt_ckpt *in, const ckpt_value *dict,
                   const ckpt_deepspeed_fp32_options *o, int optimizer)
{
    size_t i;
    int rc;

    if (!(s->entries = calloc(dict->u.dict.map.n + 1, sizeof *s->entries)))
        return ckpt_error_oom();
    for (i = 0; i < dict->u.dict.map.n; i++) {
        const ckpt_value *k = dict->u.dict.map.keys[i], *v = dict->u.dict.map.vals[i];
        ckpt_deepspeed_fp32_entry *e = &s->entries[s->n_entries];
        if (k->kind != CKPT_VAL_STR || v->kind != CKPT_VAL_TENSOR)
            return ckpt_error_set(CKPT_EFORMAT, "%s: entry %zu of the consolidated state dict is not name -> tensor",
                                  ckpt_path(in), i);
        e->t = ckpt_tensor_at(in, v->u.tensor.index);
        if (!want(e->t, o, optimizer))
            continue;
        e->name = k->u.str.ptr;
        e->dtype = ckpt_dtype_is_float(e->t->dtype) ? CKPT_DTYPE_F32 : e->t->dtype;
        e->nbytes = (uint64_t)ckpt_tensor_numel(e->t) * ckpt_dtype_size(e->dtype);
        e->storage = s->n_entries++;
    }
    if ((rc = find_tied(s)) < 0)
        return rc;
    for (i = 0; i < s->n_entries && rc >= 0; i++) {
        ckpt_deepspeed_fp32_entry *e = &s->entries[i];
        if (e->storage != i)
            e->node = s->entries[e->storage].node;
        else if ((rc = ckpt_node_tensor(g, e->t, &e->node)) >= 0 && e->dtype != e->t->dtype)
            rc = ckpt_node_cast(g, e->node, e->dtype, &e->node);
    }
    return rc;
}

/* Tied names cannot go into safetensors, which stores every name's bytes separately and
 * refuses shared tensors; DeepSpeed's --safe_serialization fails on them as well. */
static int refuse_aliases(const ckpt_deepspeed_fp32_set *s)
{
    size_t i;

    for (i = 0; i < s->n_entries; i++)
        if (s->entries[i].storage != i && s->entries[i].nbytes > 0)
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s%s and %s%s are one tensor (tied weights): safetensors "
                                  "cannot hold a tensor under two names (DeepSpeed's --safe_serialization fails on "
                                  "them too); write .bin files instead (no --safe-serialization)", s->dir,
                                  s->entries[s->entries[i].storage].name, s->dir, s->entries[i].name);
    return 0;
}

static int shard(ckpt_deepspeed_fp32_set *s, uint64_t max, const char *ext)
{
    ckpt_shard_entry *entries = calloc(s->n_entries + 1, sizeof *entries);
    char *base = NULL;
    size_t i;
    int rc;

    if (!entries || asprintf(&base, "%s%s", s->dir, s->base) < 0) {
        free(entries);
        return ckpt_error_oom();
    }
    for (i = 0; i < s->n_entries; i++) {
        entries[i].name = s->entries[i].name;
        entries[i].nbytes = s->entries[i].nbytes;
        entries[i].same_as = s->entries[i].storage == i ? CKPT_SHARD_OWN_STORAGE : s->entries[i].storage;
    }
    rc = ckpt_shard_plan_new(&s->shards, entries, s->n_entries, max, base, ext);
    free(base);
    free(entries);
    return rc;
}

/* The set's files into the plan: each shard with its tensors, then the index. */
static int plan_set(ckpt_plan *plan, const ckpt_deepspeed_fp32_set *s, const char *format)
{
    ckpt_buf json = CKPT_BUF_INIT;
    size_t i, k, f;
    int rc = 0;

    for (i = 0; i < s->shards->n_files && rc >= 0; i++) {
        const ckpt_shard_file *sf = &s->shards->files[i];
        if ((rc = ckpt_plan_add_file(plan, sf->name, format, &f)) < 0)
            break;
        for (k = 0; k < sf->n_entries && rc >= 0; k++)
            rc = ckpt_plan_add_tensor(plan, f, s->entries[sf->entries[k]].name, s->entries[sf->entries[k]].node, 0,
                                      NULL);
    }
    if (rc >= 0 && s->shards->index_name && (rc = ckpt_shard_index_json(s->shards, 0, &json)) >= 0)
        rc = ckpt_plan_add_bytes(plan, s->shards->index_name, json.data, json.len);
    ckpt_buf_dispose(&json);
    return rc;
}

static int add_set(ckpt_deepspeed_fp32 *p, const ckpt_ckpt *in, const ckpt_value *dict, const char *dir,
                   const ckpt_deepspeed_fp32_options *o, int optimizer)
{
    const char *format = o->format ? o->format : "torch";
    int torch = strcmp(format, "torch") == 0, safetensors = strcmp(format, "safetensors") == 0;
    ckpt_deepspeed_fp32_set *v = realloc(p->sets, (p->n_sets + 1) * sizeof *v), *s;
    int rc;

    if (!v)
        return ckpt_error_oom();
    p->sets = v;
    s = &v[p->n_sets++];
    memset(s, 0, sizeof *s);
    /* Hugging Face's names: pytorch_model.bin, model.safetensors (and so model.h5) */
    s->base = optimizer ? "optimizer_states" : torch ? "pytorch_model" : "model";
    if (!(s->dir = strdup(dir)))
        return ckpt_error_oom();
    if ((rc = collect(ckpt_plan_graph(p->plan), s, in, dict, o, optimizer)) < 0 ||
        (safetensors && (rc = refuse_aliases(s)) < 0) ||
        (rc = shard(s, o->max_shard_size, torch ? ".bin" : safetensors ? ".safetensors" : ".h5")) < 0)
        return rc;
    return plan_set(p->plan, s, format);
}

static int add_rank(ckpt_deepspeed_fp32 *p, const ckpt_ckpt *in, const ckpt_value *dict, const char *dir,
                    const ckpt_deepspeed_fp32_options *o)
{
    int rc = add_set(p, in, dict, dir, o, 0);

    if (rc >= 0 && o->optimizer_states)
        rc = add_set(p, in, dict, dir, o, 1);
    return rc;
}

static int build(ckpt_deepspeed_fp32 *p, const ckpt_ckpt *in, const ckpt_deepspeed_fp32_options *o)
{
    const ckpt_value *root = ckpt_root(in);
    size_t i;
    int rc;

    if (!root || root->kind != CKPT_VAL_DICT)
        return ckpt_error_set(CKPT_EFORMAT, "%s: no consolidated state dict", ckpt_path(in));
    if ((rc = ckpt_plan_new(&p->plan)) < 0)
        return rc;
    /* several model-parallel ranks: { "mp_rank_00": {...}, "mp_rank_01": {...} } */
    if (root->u.dict.map.n > 0 && root->u.dict.map.vals[0]->kind == CKPT_VAL_DICT) {
        for (i = 0; i < root->u.dict.map.n && rc >= 0; i++) {
            const ckpt_value *k = root->u.dict.map.keys[i], *v = root->u.dict.map.vals[i];
            char dir[256];
            if (k->kind != CKPT_VAL_STR || v->kind != CKPT_VAL_DICT || strchr(k->u.str.ptr, '/') ||
                k->u.str.ptr[0] == '.')
                return ckpt_error_set(CKPT_EFORMAT, "%s: entry %zu of the model-parallel ranks is not "
                                      "mp_rank_NN -> state dict", ckpt_path(in), i);
            snprintf(dir, sizeof dir, "%s/", k->u.str.ptr);
            rc = add_rank(p, in, v, dir, o);
        }
        return rc;
    }
    return add_rank(p, in, root, "", o);
}

int ckpt_deepspeed_fp32_new(ckpt_deepspeed_fp32 **out, const ckpt_ckpt *in, const ckpt_deepspeed_fp32_options *o)
{
    ckpt_deepspeed_fp32 *p;
    int rc;

    *out = NULL;
    if (!o || o->version != CKPT_DEEPSPEED_FP32_OPTIONS_VERSION)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s: the zero-to-fp32 options are not version %d",
                               ckpt_path(in), CKPT_DEEPSPEED_FP32_OPTIONS_VERSION);
    if (!(p = calloc(1, sizeof *p)))
        return ckpt_error_oom();
    if ((rc = build(p, in, o)) < 0)
        ckpt_deepspeed_fp32_free(p);
    else
        *out = p;
    return rc;
}

void ckpt_deepspeed_fp32_free(ckpt_deepspeed_fp32 *p)
{
    size_t i;

    if (!p)
        return;
    for (i = 0; i < p->n_sets; i++) {
        ckpt_deepspeed_fp32_set *s = &p->sets[i];
        ckpt_shard_plan_free(s->shards);
        free(s->entries);
        free(s->dir);
    }
    free(p->sets);
    ckpt_plan_free(p->plan);
    free(p);
}
