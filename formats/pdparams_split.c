/* Arrays that paddle.save cut into parts (pickle protocol 2 and 3): every top-level array
 * of more than (2**30 - 1) // itemsize elements becomes 1-D parts "<key>@@.<i>" at the end
 * of the dict, described by the last entry, "UnpackBigParamInfor@@". paddle.load
 * concatenates the parts and reshapes them; here the parts' extents, in slice order,
 * make one storage, so nothing is copied. The parts and the info entry leave the root
 * dict and the array takes the position of its earliest part. */
#include <ckpt/sys/common.h>
#include <ckpt/sys/format.h>

#include <stdlib.h>
#include <string.h>

#include "pdparams_private.h"

static size_t pd_find_key(const ckpt_value_map *m, const char *key)
{
    size_t i;
    for (i = 0; i < m->n; i++)
        if (ckpt_value_is_str(m->keys[i], key))
            return i;
    return m->n;
}

/* Check one "UnpackBigParamInfor@@" entry and claim its parts. owner[i] marks root entry
 * i as a part of split 1 + index. */
static int pd_split_one(ckpt_pd_open *o, const ckpt_value_map *root, const ckpt_value *key, const ckpt_value *entry,
                        size_t *owner)
{
    size_t id = o->n_splits, i, j;
    ckpt_pd_split *s = &o->splits[id];
    const ckpt_value *slices;
    uint64_t total = 0, want;
    int64_t numel;
    int rc;

    if (key->kind != CKPT_VAL_STR || entry->kind != CKPT_VAL_DICT)
        return ckpt_error_set(CKPT_EFORMAT, "%s: malformed " PDPARAMS_SPLIT_INFO_KEY " entry", o->path);
    s->key_node = (ckpt_value *)key;
    s->key = key->u.str.ptr;
    rc = ckpt_pdparams__parse_shape(o, s->key, ckpt_value_dict_get(entry, PDPARAMS_SPLIT_SHAPE_KEY), &s->ndim,
                                    s->shape, &numel);
    if (rc < 0)
        return rc;
    slices = ckpt_value_dict_get(entry, PDPARAMS_SPLIT_SLICES_KEY);
    if (!slices || (slices->kind != CKPT_VAL_LIST && slices->kind != CKPT_VAL_TUPLE) || slices->u.seq.n == 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: split array has no list of parts (%s)", o->path, s->key);
    if (pd_find_key(root, s->key) < root->n)
        return ckpt_error_set(CKPT_EFORMAT, "%s: array is stored both whole and split (%s)", o->path, s->key);
    s->parts = ckpt_arena_alloc(o->arena, slices->u.seq.n * sizeof *s->parts);
    if (!s->parts)
        return ckpt_error_oom();
    for (i = 0; i < slices->u.seq.n; i++) {
        const ckpt_value *name = slices->u.seq.items[i];
        size_t at;
        ckpt_pd_array *a = NULL;
        if (name->kind != CKPT_VAL_STR)
            return ckpt_error_set(CKPT_EFORMAT, "%s: split part name is not a string (%s)", o->path, s->key);
        at = pd_find_key(root, name->u.str.ptr);
        if (at == root->n)
            return ckpt_error_set(CKPT_EFORMAT, "%s: split part '%s' of '%s' is missing", o->path, name->u.str.ptr,
                                  s->key);
        for (j = 0; j < o->n_arrays && !a; j++)
            if (o->arrays[j].node == root->vals[at])
                a = &o->arrays[j];
        if (!a)
            return ckpt_error_set(CKPT_EFORMAT, "%s: split part '%s' is not a numpy array (%s)", o->path,
                                  name->u.str.ptr, s->key);
        if (owner[at] || a->split)
            return ckpt_error_set(CKPT_EFORMAT, "%s: split part '%s' is listed twice (%s)", o->path, name->u.str.ptr,
                                  s->key);
        if (a->ndim != 1)
            return ckpt_error_set(CKPT_EFORMAT, "%s: split part '%s' is not 1-D (%s)", o->path, name->u.str.ptr,
                                  s->key);
        if (i && (a->dtype != o->arrays[s->parts[0]].dtype || a->byteswap != o->arrays[s->parts[0]].byteswap))
            return ckpt_error_set(CKPT_EFORMAT, "%s: split part '%s' has another dtype than '%s' (%s)", o->path,
                                  name->u.str.ptr, o->arrays[s->parts[0]].name, s->key);
        if (CKPT_ADD_OVERFLOWS(total, a->nbytes, &total))
            return ckpt_error_set(CKPT_EFORMAT, "%s: split parts overflow (%s)", o->path, s->key);
        owner[at] = id + 1;
        a->split = id + 1;
        s->parts[i] = (size_t)(a - o->arrays);
    }
    s->n_parts = slices->u.seq.n;
    if (CKPT_MUL_OVERFLOWS((uint64_t)numel, (uint64_t)ckpt_dtype_size(o->arrays[s->parts[0]].dtype), &want) ||
        total != want)
        return ckpt_error_set(CKPT_EFORMAT, "%s: split parts hold %llu bytes, the original shape needs %llu (%s)",
                              o->path, (unsigned long long)total, (unsigned long long)want, s->key);
    s->node = ckpt_value_new(o->arena, CKPT_VAL_TENSOR);
    if (!s->node)
        return ckpt_error_oom();
    s->node->u.tensor.source = (ckpt_value *)entry;
    o->n_splits++;
    return 0;
}

/* Replace the parts of every split array in the root dict by one TENSOR node at the
 * position of the earliest part, and drop the info entry. */
int ckpt_pdparams__reassemble(ckpt_pd_open *o, ckpt_value *root)
{
    ckpt_value_map *m;
    const ckpt_value *info;
    size_t info_at, i, j, *owner = NULL;
    int rc = 0;

    if (root->kind != CKPT_VAL_DICT)
        return 0;
    m = &root->u.dict.map;
    info_at = pd_find_key(m, PDPARAMS_SPLIT_INFO_KEY);
    if (info_at == m->n)
        return 0;
    info = m->vals[info_at];
    if (info->kind != CKPT_VAL_DICT)
        return ckpt_error_set(CKPT_EFORMAT, "%s: " PDPARAMS_SPLIT_INFO_KEY " is not a dict", o->path);
    owner = calloc(m->n, sizeof *owner);
    o->splits = calloc(info->u.dict.map.n ? info->u.dict.map.n : 1, sizeof *o->splits);
    if (!owner || !o->splits) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < info->u.dict.map.n; i++)
        if ((rc = pd_split_one(o, m, info->u.dict.map.keys[i], info->u.dict.map.vals[i], owner)) < 0)
            goto done;
    for (i = j = 0; i < m->n; i++) {
        if (i == info_at)
            continue;
        if (owner[i]) {
            ckpt_pd_split *s = &o->splits[owner[i] - 1];
            if (s->placed)
                continue;
            s->placed = 1;
            m->keys[j] = s->key_node;
            m->vals[j++] = s->node;
            continue;
        }
        m->keys[j] = m->keys[i];
        m->vals[j++] = m->vals[i];
    }
    m->n = j;
    /* Entries moved, so the key index is stale: drop it (lookups then scan the keys). */
    m->index = NULL;
done:
    free(owner);
    return rc;
}

int ckpt_pdparams__add_split(ckpt_pd_open *o, ckpt_pd_split *s)
{
    const ckpt_pd_array *first = &o->arrays[s->parts[0]];
    ckpt_storage *st;
    size_t i, n = 0;
    int index;

    for (i = 0; i < s->n_parts; i++)
        n += ckpt_pdparams__extent_count(o->arrays[s->parts[i]].data);
    if (!(st = ckpt_reader_new_storage(o->r, s->key, first->dtype, n)))
        return ckpt_error_oom();
    for (i = n = 0; i < s->n_parts; i++) {
        const ckpt_value *data = o->arrays[s->parts[i]].data;
        ckpt_pdparams__extents(o, data, st->extents + n);
        n += ckpt_pdparams__extent_count(data);
        st->nbytes += ckpt_value_bytes_size(data);
    }
    st->byteswap = first->byteswap;
    index = ckpt_pdparams__new_tensor(o, s->key, first->dtype, s->ndim, s->shape, 0, st);
    if (index < 0)
        return index;
    s->node->u.tensor.index = (size_t)index;
    ckpt_reader_note(o->r, "reassembled %s from %zu parts", s->key, s->n_parts);
    return 0;
}
