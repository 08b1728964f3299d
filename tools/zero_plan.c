/* ckptconv zero-to-fp32: the output files of a consolidated ZeRO checkpoint, as DeepSpeed
 * 0.19's zero_to_fp32 names and fills them.
 *
 * Sharding follows huggingface_hub's split_torch_state_dict_into_shards on the state dict
 * zero_to_fp32 passes it (fresh tensors of the output dtype, so a tensor's size is its
 * numel times 4 for floats): tensors in state-dict order; a tensor larger than the maximum
 * gets a shard of its own; a new shard starts when the next tensor would overflow the
 * current one; tensors sharing a storage (tied weights) count once and go to the shard of
 * the first, after that shard's own tensors. Zero-element tensors all have storage address
 * 0 there, so they count as one shared storage too. */
#include "zero_to_fp32.h"

#include <ckpt/sys/common.h>
#include <stdlib.h>
#include <string.h>

/* Open addressing from a storage address to the first entry that uses it. */
typedef struct ptr_map {
    const void **keys;
    size_t *vals;
    size_t cap;
} ptr_map;

static int ptr_map_init(ptr_map *m, size_t n)
{
    m->cap = 16;
    while (m->cap < 2 * n + 1)
        m->cap *= 2;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->vals = calloc(m->cap, sizeof *m->vals);
    return m->keys && m->vals ? 0 : ckpt_error_oom();
}

static size_t *ptr_map_slot(ptr_map *m, const void *key, int *found)
{
    size_t i = ((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull & (m->cap - 1);

    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    *found = m->keys[i] != NULL;
    m->keys[i] = key;
    return &m->vals[i];
}

static void ptr_map_free(ptr_map *m)
{
    free(m->keys);
    free(m->vals);
}

static int same_view(const ckpt_tensor *a, const ckpt_tensor *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && a->offset == b->offset &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0 &&
           memcmp(a->stride, b->stride, (size_t)a->ndim * sizeof *a->stride) == 0;
}

static int want(const ckpt_tensor *t, const zero_plan_options *o, int optimizer)
{
    if (optimizer)
        return (t->flags & CKPT_TENSOR_OPTIMIZER_STATE) != 0;
    if (t->flags & CKPT_TENSOR_OPTIMIZER_STATE)
        return 0;
    return !(o->exclude_frozen && (t->flags & CKPT_TENSOR_FROZEN));
}

/* The entries of one state dict: nodes (shared by tied names), output dtype and size. */
static int collect(zero_plan *p, zero_set *s, const ckpt_ckpt *in, const ckpt_value *dict,
                   const zero_plan_options *o, int optimizer)
{
    ptr_map seen = { NULL, NULL, 0 };
    size_t i, first_empty = SIZE_MAX;
    int rc;

    s->entries = calloc(dict->u.dict.map.n + 1, sizeof *s->entries);
    if (!s->entries || (rc = ptr_map_init(&seen, dict->u.dict.map.n)) < 0) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < dict->u.dict.map.n; i++) {
        const ckpt_value *k = dict->u.dict.map.keys[i], *v = dict->u.dict.map.vals[i];
        zero_entry *e = &s->entries[s->n_entries];
        size_t *slot;
        int found = 0;
        if (k->kind != CKPT_VAL_STR || v->kind != CKPT_VAL_TENSOR) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: entry %zu of the consolidated state dict is not name -> tensor",
                                ckpt_path(in), i);
            goto done;
        }
        e->t = ckpt_tensor_at(in, v->u.tensor.index);
        if (!want(e->t, o, optimizer))
            continue;
        e->name = k->u.str.ptr;
        e->dtype = ckpt_dtype_is_float(e->t->dtype) ? CKPT_DTYPE_F32 : e->t->dtype;
        e->nbytes = (uint64_t)ckpt_tensor_numel(e->t) * ckpt_dtype_size(e->dtype);
        e->storage = s->n_entries;
        slot = e->t->storage ? ptr_map_slot(&seen, e->t->storage, &found) : NULL;
        if (found && same_view(s->entries[*slot].t, e->t)) {
            e->storage = *slot;
            e->node = s->entries[*slot].node;
        } else {
            if (slot && !found)
                *slot = s->n_entries;
            if ((rc = ckpt_node_tensor(p->g, e->t, &e->node)) < 0)
                goto done;
            if (e->nbytes == 0 && first_empty != SIZE_MAX)
                e->storage = first_empty;
            else if (e->nbytes == 0)
                first_empty = s->n_entries;
        }
        s->n_entries++;
    }
    rc = 0;
done:
    ptr_map_free(&seen);
    return rc;
}

/* Tied names cannot go into safetensors, which stores every name's bytes separately and
 * refuses shared tensors; DeepSpeed's --safe_serialization fails on them as well. */
static int refuse_aliases(const zero_set *s)
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

static int file_push(zero_file *f, size_t item, uint64_t nbytes)
{
    size_t *v = realloc(f->items, (f->n_items + 1) * sizeof *v);

    if (!v)
        return ckpt_error_oom();
    v[f->n_items++] = item;
    f->items = v;
    f->nbytes += nbytes;
    return 0;
}

/* Close a shard: it becomes the next file; its tensors remember which. */
static int close_shard(zero_set *s, zero_file *f, size_t *shard_of)
{
    zero_file *v = realloc(s->files, (s->n_files + 1) * sizeof *v);
    size_t i;

    if (!v)
        return ckpt_error_oom();
    s->files = v;
    for (i = 0; i < f->n_items; i++)
        shard_of[f->items[i]] = s->n_files;
    v[s->n_files++] = *f;
    memset(f, 0, sizeof *f);
    return 0;
}

static int name_files(zero_set *s, const char *ext)
{
    char name[512];
    size_t i;

    for (i = 0; i < s->n_files; i++) {
        if (s->n_files == 1)
            snprintf(name, sizeof name, "%s%s%s", s->dir, s->base, ext);
        else
            snprintf(name, sizeof name, "%s%s-%05zu-of-%05zu%s", s->dir, s->base, i + 1, s->n_files, ext);
        if (!(s->files[i].rel = strdup(name)))
            return ckpt_error_oom();
    }
    if (s->n_files > 1) {
        snprintf(name, sizeof name, "%s%s%s.index.json", s->dir, s->base, ext);
        if (!(s->index_rel = strdup(name)))
            return ckpt_error_oom();
    }
    return 0;
}

static int shard(zero_set *s, uint64_t max, const char *ext)
{
    size_t *shard_of = calloc(s->n_entries + 1, sizeof *shard_of);
    zero_file cur = { NULL, NULL, 0, 0 }, own;
    size_t i, j;
    int rc = 0;

    if (!shard_of)
        return ckpt_error_oom();
    for (i = 0; i < s->n_entries && rc == 0; i++) {
        const zero_entry *e = &s->entries[i];
        if (e->storage != i)
            continue;
        s->total_size += e->nbytes;
        if (e->nbytes > max) {
            memset(&own, 0, sizeof own);
            if ((rc = file_push(&own, i, e->nbytes)) == 0 && (rc = close_shard(s, &own, shard_of)) < 0)
                free(own.items);
            continue;
        }
        if (cur.nbytes + e->nbytes > max)
            rc = close_shard(s, &cur, shard_of);
        if (rc == 0)
            rc = file_push(&cur, i, e->nbytes);
    }
    if (rc == 0 && cur.n_items)
        rc = close_shard(s, &cur, shard_of);
    free(cur.items);
    /* tensors sharing a storage join the first one's shard, storage by storage */
    for (i = 0; i < s->n_entries && rc == 0; i++)
        for (j = i + 1; s->entries[i].storage == i && j < s->n_entries && rc == 0; j++)
            if (s->entries[j].storage == i)
                rc = file_push(&s->files[shard_of[i]], j, 0);
    if (rc == 0)
        rc = name_files(s, ext);
    free(shard_of);
    return rc;
}

static int add_set(zero_plan *p, const ckpt_ckpt *in, const ckpt_value *dict, const char *dir,
                   const zero_plan_options *o, int optimizer)
{
    zero_set *v = realloc(p->sets, (p->n_sets + 1) * sizeof *v), *s;
    int rc;

    if (!v)
        return ckpt_error_oom();
    p->sets = v;
    s = &v[p->n_sets++];
    memset(s, 0, sizeof *s);
    s->base = optimizer ? "optimizer_states" : o->safetensors ? "model" : "pytorch_model";
    if (!(s->dir = strdup(dir)))
        return ckpt_error_oom();
    if ((rc = collect(p, s, in, dict, o, optimizer)) < 0 || (o->safetensors && (rc = refuse_aliases(s)) < 0))
        return rc;
    return shard(s, o->max_shard_size, o->safetensors ? ".safetensors" : ".bin");
}

static int add_rank(zero_plan *p, const ckpt_ckpt *in, const ckpt_value *dict, const char *dir,
                    const zero_plan_options *o)
{
    int rc = add_set(p, in, dict, dir, o, 0);

    if (rc >= 0 && o->optimizer_states)
        rc = add_set(p, in, dict, dir, o, 1);
    return rc;
}

int zero_plan_build(zero_plan *p, const ckpt_ckpt *in, const zero_plan_options *o)
{
    const ckpt_value *root = ckpt_root(in);
    size_t i;
    int rc;

    memset(p, 0, sizeof *p);
    if (!root || root->kind != CKPT_VAL_DICT)
        return ckpt_error_set(CKPT_EFORMAT, "%s: no consolidated state dict", ckpt_path(in));
    if ((rc = ckpt_graph_new(&p->g)) < 0)
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

void zero_plan_free(zero_plan *p)
{
    size_t i, j;

    for (i = 0; i < p->n_sets; i++) {
        zero_set *s = &p->sets[i];
        for (j = 0; j < s->n_files; j++) {
            free(s->files[j].rel);
            free(s->files[j].items);
        }
        free(s->files);
        free(s->entries);
        free(s->index_rel);
        free(s->dir);
    }
    free(p->sets);
    ckpt_graph_free(p->g);
    memset(p, 0, sizeof *p);
}

typedef struct map_item {
    const char *name, *file;
} map_item;

static int map_item_cmp(const void *a, const void *b)
{
    return strcmp(((const map_item *)a)->name, ((const map_item *)b)->name);
}

int zero_index_json(const zero_set *s, ckpt_buf *out)
{
    size_t i, j, n = 0, dir_len = strlen(s->dir);
    map_item *items = calloc(s->n_entries + 1, sizeof *items);
    int rc;

    if (!items)
        return ckpt_error_oom();
    for (i = 0; i < s->n_files; i++)
        for (j = 0; j < s->files[i].n_items; j++) {
            items[n].name = s->entries[s->files[i].items[j]].name;
            items[n++].file = s->files[i].rel + dir_len;
        }
    qsort(items, n, sizeof *items, map_item_cmp);
    rc = ckpt_buf_printf(out, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
                         (unsigned long long)s->total_size);
    for (i = 0; i < n && rc == 0; i++) {
        rc = ckpt_buf_puts(out, i ? ",\n    " : "\n    ");
        if (rc == 0)
            rc = cli_json_py_string(out, items[i].name);
        if (rc == 0)
            rc = ckpt_buf_puts(out, ": ");
        if (rc == 0)
            rc = cli_json_py_string(out, items[i].file);
    }
    if (rc == 0)
        rc = ckpt_buf_puts(out, n ? "\n  }\n}\n" : "}\n}\n");
    free(items);
    return rc;
}
