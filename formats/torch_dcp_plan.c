/* Distributed Checkpoints written by a plan (ckpt/dcp.h): the data files laid out here,
 * `.metadata` pickled as torch's FileSystemWriter pickles it (Metadata with
 * state_dict_metadata, planner_data None, storage_data, storage_meta, version "1.0.0"),
 * built from DCP's own classes only, so that the reader of the torch_dcp format (and
 * torch.distributed.checkpoint.load) take it. */
#include "torch_private.h"

#include <ckpt/dcp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_MODULE "torch.distributed.checkpoint.metadata"

typedef struct dcp_key {
    char *name;
    int ndim;              /* -1: a bytes item */
    int64_t shape[CKPT_MAX_DIMS];
    ckpt_dtype dtype;
} dcp_key;

typedef struct dcp_item {
    size_t key;
    int rank;
    int64_t offsets[CKPT_MAX_DIMS];
    const ckpt_node *node; /* NULL for bytes */
    size_t data_at, data_len; /* bytes items: in the object's bytes buffer */
    uint64_t file_off, len;   /* where it lands in its file */
} dcp_item;

struct ckpt_dcp_out {
    ckpt_plan *plan;
    char *dir;
    dcp_key *keys;
    size_t n_keys, cap_keys;
    dcp_item *items;
    size_t n_items, cap_items;
    ckpt_buf bytes;
};

int ckpt_dcp_out_new(ckpt_dcp_out **out, ckpt_plan *plan, const char *dir)
{
    ckpt_dcp_out *d = calloc(1, sizeof *d);

    *out = NULL;
    if (!d || !(d->dir = strdup(dir ? dir : ""))) {
        free(d);
        return ckpt_error_oom();
    }
    d->plan = plan;
    *out = d;
    return 0;
}

void ckpt_dcp_out_free(ckpt_dcp_out *d)
{
    size_t i;

    if (!d)
        return;
    for (i = 0; i < d->n_keys; i++)
        free(d->keys[i].name);
    free(d->keys);
    free(d->items);
    ckpt_buf_dispose(&d->bytes);
    free(d->dir);
    free(d);
}

/* The key's index, added on first use; the last key is the likely one. */
static int key_of(ckpt_dcp_out *d, const char *name, int ndim, const int64_t *shape, ckpt_dtype dtype, size_t *out)
{
    size_t i = d->n_keys;
    dcp_key *k, *grown;

    if (i && strcmp(d->keys[i - 1].name, name) == 0)
        i--;
    else
        for (i = 0; i < d->n_keys && strcmp(d->keys[i].name, name) != 0; i++)
            ;
    if (i < d->n_keys) {
        k = &d->keys[i];
        if (k->ndim != ndim || k->dtype != dtype || (ndim > 0 && memcmp(k->shape, shape, (size_t)ndim * sizeof *shape)))
            return ckpt_error_set(CKPT_EINVALID, "%s: chunks of one tensor disagree on its dtype or global shape", name);
        *out = i;
        return 0;
    }
    if (!(grown = ckpt_array_grow(d->keys, &d->cap_keys, d->n_keys, sizeof *d->keys)))
        return CKPT_ENOMEM;
    d->keys = grown;
    k = &d->keys[d->n_keys];
    memset(k, 0, sizeof *k);
    if (!(k->name = strdup(name)))
        return ckpt_error_oom();
    k->ndim = ndim;
    k->dtype = dtype;
    if (ndim > 0)
        memcpy(k->shape, shape, (size_t)ndim * sizeof *shape);
    *out = d->n_keys++;
    return 0;
}

static int push_item(ckpt_dcp_out *d, dcp_item **out)
{
    dcp_item *grown = ckpt_array_grow(d->items, &d->cap_items, d->n_items, sizeof *d->items);

    if (!grown)
        return CKPT_ENOMEM;
    d->items = grown;
    *out = memset(&d->items[d->n_items++], 0, sizeof *d->items);
    return 0;
}

int ckpt_dcp_out_chunk(ckpt_dcp_out *d, const char *key, int ndim, const int64_t *shape, const int64_t *offsets,
                       const ckpt_node *chunk, int rank)
{
    const int64_t *cs = ckpt_node_shape(chunk);
    dcp_item *it;
    size_t k;
    int rc, a;

    if (ndim < 0 || ndim > CKPT_MAX_DIMS || ckpt_node_ndim(chunk) != ndim || rank < 0)
        return ckpt_error_set(CKPT_EINVALID, "%s: a chunk of %d dimensions for a tensor of %d (rank %d)", key,
                              ckpt_node_ndim(chunk), ndim, rank);
    for (a = 0; a < ndim; a++)
        if (offsets[a] < 0 || cs[a] > shape[a] || offsets[a] > shape[a] - cs[a])
            return ckpt_error_set(CKPT_EINVALID, "%s: chunk [%lld, +%lld) on axis %d lies outside the tensor (%lld)",
                                  key, (long long)offsets[a], (long long)cs[a], a, (long long)shape[a]);
    if ((rc = key_of(d, key, ndim, shape, ckpt_node_dtype(chunk), &k)) < 0 || (rc = push_item(d, &it)) < 0)
        return rc;
    it->key = k;
    it->rank = rank;
    if (ndim > 0)
        memcpy(it->offsets, offsets, (size_t)ndim * sizeof *offsets);
    it->node = chunk;
    return 0;
}

int ckpt_dcp_out_bytes(ckpt_dcp_out *d, const char *key, const void *data, size_t len, int rank)
{
    dcp_item *it;
    size_t k;
    int rc;

    if (rank < 0)
        return ckpt_error_set(CKPT_EINVALID, "%s: rank %d", key, rank);
    if ((rc = key_of(d, key, -1, NULL, CKPT_DTYPE_U8, &k)) < 0 || (rc = push_item(d, &it)) < 0)
        return rc;
    it->key = k;
    it->rank = rank;
    it->data_at = d->bytes.len;
    it->data_len = len;
    return ckpt_buf_append(&d->bytes, data, len) < 0 ? CKPT_ENOMEM : 0;
}

typedef struct saved_tensors {
    const ckpt_node *const *nodes;
    size_t n;
} saved_tensors;

/* Tensor leaf i is nodes[i], contiguous, in storage "i" of the archive. */
static int saved_tensor(ckpt_pickler *p, const ckpt_value *leaf, void *payload)
{
    const saved_tensors *s = payload;
    size_t i = leaf->u.tensor.index;
    int64_t stride[CKPT_MAX_DIMS];
    char key[32];
    const ckpt_node *x;
    int ndim, a;

    if (i >= s->n)
        return ckpt_error_set(CKPT_EINVALID, "saved object: tensor #%zu of %zu", i, s->n);
    x = s->nodes[i];
    ndim = ckpt_node_ndim(x);
    for (a = ndim - 1; a >= 0; a--)
        stride[a] = a == ndim - 1 ? 1 : stride[a + 1] * ckpt_node_shape(x)[a + 1];
    snprintf(key, sizeof key, "%zu", i);
    return ckpt_torch__pickle_tensor(p, ckpt_node_dtype(x), key,
                                     (uint64_t)ckpt_node_numel(x) * ckpt_dtype_size(ckpt_node_dtype(x)), 0, ndim,
                                     ckpt_node_shape(x), stride, 0);
}

/* The storages of the archive, in torch's order (after byteorder, before version). */
static int saved_storages(ckpt_zip_writer *zw, const ckpt_node *const *nodes, size_t n)
{
    ckpt_buf data = CKPT_BUF_INIT;
    char name[48];
    size_t i;
    int rc = 0;

    for (i = 0; i < n && rc >= 0; i++) {
        int64_t numel = ckpt_node_numel(nodes[i]);
        size_t len = (size_t)numel * ckpt_dtype_size(ckpt_node_dtype(nodes[i]));
        ckpt_buf_clear(&data);
        if ((rc = ckpt_buf_reserve(&data, len ? len : 1)) < 0)
            break;
        if ((rc = ckpt_node_read(nodes[i], 0, numel, ckpt_node_dtype(nodes[i]), data.data)) < 0)
            break;
        snprintf(name, sizeof name, "archive/data/%zu", i);
        rc = ckpt_zip_writer_add_bytes(zw, name, data.data, len);
    }
    ckpt_buf_dispose(&data);
    return rc;
}

int ckpt_dcp_saved_value_tensors(const ckpt_value *v, const ckpt_node *const *nodes, size_t n, ckpt_buf *out)
{
    saved_tensors s = { nodes, n };
    ckpt_buf pkl = CKPT_BUF_INIT, archive = CKPT_BUF_INIT;
    ckpt_zip_writer *zw = NULL;
    int rc = ckpt_torch__pickle_value(v, 2, n ? saved_tensor : NULL, &s, &pkl);

    if (rc >= 0)
        rc = ckpt_zip_writer_new_mem(&zw, &archive, 64);
    if (rc >= 0)
        rc = ckpt_torch__archive_head(zw, "archive/", pkl.data, pkl.len);
    if (rc >= 0)
        rc = saved_storages(zw, nodes, n);
    if (rc >= 0)
        rc = ckpt_torch__archive_tail(zw, "archive/");
    if (rc >= 0)
        rc = ckpt_zip_writer_finish(zw);
    if (rc >= 0)
        rc = ckpt_buf_append(out, archive.data, archive.len) < 0 ? CKPT_ENOMEM : 0;
    ckpt_zip_writer_free(zw);
    ckpt_buf_dispose(&pkl);
    ckpt_buf_dispose(&archive);
    return rc;
}

int ckpt_dcp_saved_value(const ckpt_value *v, ckpt_buf *out)
{
    return ckpt_dcp_saved_value_tensors(v, NULL, 0, out);
}

/* ---- checks and layout ------------------------------------------------------------ */

/* Items in key order (ties in the order given), so that each key's chunks are checked
 * together. */
typedef struct item_ref {
    size_t key, item;
} item_ref;

static int by_key(const void *pa, const void *pb)
{
    const item_ref *a = pa, *b = pb;

    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->item < b->item ? -1 : a->item > b->item;
}

/* Every tensor's chunks tile it: inside, no overlap, nothing left out. */
static int check_cover(const ckpt_dcp_out *d)
{
    item_ref *order = malloc((d->n_items ? d->n_items : 1) * sizeof *order);
    ckpt_tile *tiles = calloc(d->n_items ? d->n_items : 1, sizeof *tiles);
    size_t i, j;
    int rc = 0;

    if (!order || !tiles) {
        free(order);
        free(tiles);
        return ckpt_error_oom();
    }
    for (i = 0; i < d->n_items; i++) {
        order[i].key = d->items[i].key;
        order[i].item = i;
    }
    qsort(order, d->n_items, sizeof *order, by_key);
    for (i = 0; i < d->n_items && rc == 0; i = j) {
        const dcp_key *key = &d->keys[order[i].key];
        ckpt_tiling g;
        for (j = i; j < d->n_items && order[j].key == order[i].key; j++)
            if (key->ndim > 0) {
                const dcp_item *it = &d->items[order[j].item];
                memcpy(tiles[j - i].offset, it->offsets, (size_t)key->ndim * sizeof *it->offsets);
                memcpy(tiles[j - i].size, ckpt_node_shape(it->node), (size_t)key->ndim * sizeof *it->offsets);
            }
        if (key->ndim < 0)
            continue;
        memset(&g, 0, sizeof g);
        g.ndim = key->ndim;
        memcpy(g.shape, key->shape, (size_t)key->ndim * sizeof *key->shape);
        g.n_tiles = j - i;
        g.tiles = tiles;
        rc = ckpt_tiling_check_boxes(&g, key->name, CKPT_EINVALID, NULL);
    }
    free(order);
    free(tiles);
    return rc;
}

static int file_name(const ckpt_dcp_out *d, ckpt_buf *b, int rank, int which, int relative)
{
    ckpt_buf_clear(b);
    if (!relative && d->dir[0] && ckpt_buf_printf(b, "%s/", d->dir) < 0)
        return CKPT_ENOMEM;
    return ckpt_buf_printf(b, "__%d_%d.distcp", rank, which) < 0 ? CKPT_ENOMEM : 0;
}

/* A chunk's name in its data file (where names are not stored): key@offsets. */
static int chunk_name(const dcp_key *k, const dcp_item *it, ckpt_buf *out)
{
    int a, rc;

    ckpt_buf_clear(out);
    rc = ckpt_buf_printf(out, "%s@", k->name);
    for (a = 0; a < k->ndim && rc >= 0; a++)
        rc = ckpt_buf_printf(out, a ? ",%lld" : "%lld", (long long)it->offsets[a]);
    return rc < 0 ? CKPT_ENOMEM : 0;
}

/* Per rank: its tensor file (chunks in the order given) and its bytes file. */
static int add_files(ckpt_dcp_out *d)
{
    ckpt_buf name = CKPT_BUF_INIT, blob = CKPT_BUF_INIT;
    int rank, max_rank = -1, rc = 0;
    size_t i;

    for (i = 0; i < d->n_items; i++)
        max_rank = d->items[i].rank > max_rank ? d->items[i].rank : max_rank;
    for (rank = 0; rank <= max_rank && rc == 0; rank++) {
        uint64_t at = 0;
        size_t file = 0;
        int opened = 0;
        ckpt_buf_clear(&blob);
        for (i = 0; i < d->n_items && rc == 0; i++) {
            dcp_item *it = &d->items[i];
            const dcp_key *k = &d->keys[it->key];
            if (it->rank != rank || !it->node)
                continue;
            if (!opened && ((rc = file_name(d, &name, rank, 0, 0)) < 0 ||
                            (rc = ckpt_plan_add_file(d->plan, (const char *)name.data, "torch_dcp", &file)) < 0))
                break;
            opened = 1;
            if ((rc = ckpt_torch__dcp_archive_size(k->dtype, k->ndim, ckpt_node_shape(it->node), &it->len)) < 0 ||
                (rc = chunk_name(k, it, &name)) < 0 ||
                (rc = ckpt_plan_add_tensor(d->plan, file, (const char *)name.data, it->node, 0, NULL)) < 0)
                break;
            it->file_off = at;
            at += it->len;
        }
        for (i = 0; i < d->n_items && rc == 0; i++) {
            dcp_item *it = &d->items[i];
            if (it->rank != rank || it->node)
                continue;
            it->file_off = blob.len;
            it->len = it->data_len;
            if (ckpt_buf_append(&blob, d->bytes.data + it->data_at, it->data_len) < 0)
                rc = CKPT_ENOMEM;
        }
        if (rc == 0 && blob.len && (rc = file_name(d, &name, rank, 1, 0)) == 0)
            rc = ckpt_plan_add_bytes(d->plan, (const char *)name.data, blob.data, blob.len);
    }
    ckpt_buf_dispose(&name);
    ckpt_buf_dispose(&blob);
    return rc;
}

/* ---- .metadata -------------------------------------------------------------------- */

typedef struct meta_ctx {
    ckpt_arena *a;
    int failed;
} meta_ctx;

static ckpt_value *ok(meta_ctx *m, ckpt_value *v)
{
    if (!v)
        m->failed = 1;
    return v;
}

static ckpt_value *str(meta_ctx *m, const char *s)
{
    return ok(m, ckpt_value_new_str(m->a, s, strlen(s)));
}

static ckpt_value *object(meta_ctx *m, ckpt_object_how how, ckpt_value *callable, ckpt_value *args, ckpt_value *state)
{
    ckpt_value *v = ok(m, ckpt_value_new(m->a, CKPT_VAL_OBJECT));

    if (v) {
        v->u.obj.how = how;
        v->u.obj.callable = callable;
        v->u.obj.args = args ? args : ok(m, ckpt_value_new(m->a, CKPT_VAL_TUPLE));
        v->u.obj.state = state;
    }
    return v;
}

/* A dataclass as pickle saves one: cls.__new__(cls), then its fields as BUILD state. */
static ckpt_value *dataclass(meta_ctx *m, const char *module, const char *name, ckpt_value *fields)
{
    return object(m, CKPT_OBJ_NEWOBJ, ok(m, ckpt_value_new_global(m->a, module, name)), NULL, fields);
}

static void put(meta_ctx *m, ckpt_value *dict, const char *key, ckpt_value *v)
{
    if (!dict || !v || ckpt_value_dict_set(m->a, dict, str(m, key), v) < 0)
        m->failed = 1;
}

static ckpt_value *one_tuple(meta_ctx *m, ckpt_value *item)
{
    ckpt_value *t = ok(m, ckpt_value_new(m->a, CKPT_VAL_TUPLE));
    if (t && (!item || ckpt_value_append(m->a, t, item) < 0))
        m->failed = 1;
    return t;
}

static ckpt_value *torch_size(meta_ctx *m, int ndim, const int64_t *dims)
{
    ckpt_value *list = ok(m, ckpt_value_new(m->a, CKPT_VAL_LIST));
    int i;

    for (i = 0; list && i < ndim; i++)
        if (ckpt_value_append(m->a, list, ok(m, ckpt_value_new_int(m->a, dims[i]))) < 0)
            m->failed = 1;
    return object(m, CKPT_OBJ_REDUCE, ok(m, ckpt_value_new_global(m->a, "torch", "Size")), one_tuple(m, list), NULL);
}

/* TensorProperties pickles (dtype, layout, requires_grad, memory format, pin_memory). */
static ckpt_value *properties(meta_ctx *m, ckpt_dtype dtype)
{
    ckpt_value *t = ok(m, ckpt_value_new(m->a, CKPT_VAL_TUPLE));
    ckpt_value *layout = object(m, CKPT_OBJ_REDUCE, ok(m, ckpt_value_new_global(m->a, "torch.serialization", "_get_layout")),
                                one_tuple(m, str(m, "torch.strided")), NULL);
    ckpt_value *format = object(m, CKPT_OBJ_REDUCE, ok(m, ckpt_value_new_global(m->a, META_MODULE, "_MEM_FORMAT_ENCODING")),
                                one_tuple(m, ok(m, ckpt_value_new_int(m->a, 0))), NULL);
    ckpt_value *parts[5];
    int i;

    parts[0] = ok(m, ckpt_value_new_global(m->a, "torch", ckpt_dtype_name(dtype)));
    parts[1] = layout;
    parts[2] = ok(m, ckpt_value_new_bool(m->a, 0));
    parts[3] = format;
    parts[4] = ok(m, ckpt_value_new_bool(m->a, 0));
    for (i = 0; t && i < 5; i++)
        if (!parts[i] || ckpt_value_append(m->a, t, parts[i]) < 0)
            m->failed = 1;
    return object(m, CKPT_OBJ_NEWOBJ, ok(m, ckpt_value_new_global(m->a, META_MODULE, "TensorProperties")), NULL, t);
}

static ckpt_value *tensor_md(meta_ctx *m, const ckpt_dcp_out *d, size_t k)
{
    const dcp_key *key = &d->keys[k];
    ckpt_value *f = ok(m, ckpt_value_new(m->a, CKPT_VAL_DICT)), *chunks = ok(m, ckpt_value_new(m->a, CKPT_VAL_LIST));
    size_t i;

    put(m, f, "properties", properties(m, key->dtype));
    put(m, f, "size", torch_size(m, key->ndim, key->shape));
    for (i = 0; chunks && i < d->n_items; i++) {
        ckpt_value *c;
        if (d->items[i].key != k)
            continue;
        c = ok(m, ckpt_value_new(m->a, CKPT_VAL_DICT));
        put(m, c, "offsets", torch_size(m, key->ndim, d->items[i].offsets));
        put(m, c, "sizes", torch_size(m, key->ndim, ckpt_node_shape(d->items[i].node)));
        if (ckpt_value_append(m->a, chunks, dataclass(m, META_MODULE, "ChunkStorageMetadata", c)) < 0)
            m->failed = 1;
    }
    put(m, f, "chunks", chunks);
    return dataclass(m, META_MODULE, "TensorStorageMetadata", f);
}

static int build_metadata(const ckpt_dcp_out *d, ckpt_arena *a, ckpt_value **out)
{
    meta_ctx m = { a, 0 };
    ckpt_value *sdm = ok(&m, ckpt_value_new(a, CKPT_VAL_DICT)), *sd = ok(&m, ckpt_value_new(a, CKPT_VAL_DICT));
    ckpt_value *fields = ok(&m, ckpt_value_new(a, CKPT_VAL_DICT));
    ckpt_buf name = CKPT_BUF_INIT;
    size_t k, i;

    for (k = 0; k < d->n_keys && !m.failed; k++)
        put(&m, sdm, d->keys[k].name,
            d->keys[k].ndim < 0 ? dataclass(&m, META_MODULE, "BytesStorageMetadata", ok(&m, ckpt_value_new(a, CKPT_VAL_DICT)))
                                : tensor_md(&m, d, k));
    for (i = 0; i < d->n_items && !m.failed; i++) {
        const dcp_item *it = &d->items[i];
        const dcp_key *key = &d->keys[it->key];
        ckpt_value *idx = ok(&m, ckpt_value_new(a, CKPT_VAL_DICT)), *info = ok(&m, ckpt_value_new(a, CKPT_VAL_DICT));
        put(&m, idx, "fqn", str(&m, key->name));
        put(&m, idx, "offset", key->ndim < 0 ? ok(&m, ckpt_value_new(a, CKPT_VAL_NONE)) : torch_size(&m, key->ndim, it->offsets));
        put(&m, idx, "index", ok(&m, ckpt_value_new(a, CKPT_VAL_NONE)));
        if (file_name(d, &name, it->rank, it->node ? 0 : 1, 1) < 0) {
            m.failed = 1;
            break;
        }
        put(&m, info, "relative_path", str(&m, (const char *)name.data));
        put(&m, info, "offset", ok(&m, ckpt_value_new_int(a, (int64_t)it->file_off)));
        put(&m, info, "length", ok(&m, ckpt_value_new_int(a, (int64_t)it->len)));
        put(&m, info, "transform_descriptors", ok(&m, ckpt_value_new(a, CKPT_VAL_NONE)));
        if (!m.failed && ckpt_value_dict_set(a, sd, dataclass(&m, META_MODULE, "MetadataIndex", idx),
                                             dataclass(&m, "torch.distributed.checkpoint.filesystem", "_StorageInfo",
                                                       info)) < 0)
            m.failed = 1;
    }
    ckpt_buf_dispose(&name);
    put(&m, fields, "state_dict_metadata", sdm);
    put(&m, fields, "planner_data", ok(&m, ckpt_value_new(a, CKPT_VAL_NONE)));
    put(&m, fields, "storage_data", sd);
    put(&m, fields, "storage_meta", ok(&m, ckpt_value_new(a, CKPT_VAL_NONE)));
    put(&m, fields, "version", str(&m, "1.0.0"));
    *out = dataclass(&m, META_MODULE, "Metadata", fields);
    return m.failed ? CKPT_ENOMEM : 0;
}

int ckpt_dcp_out_finish(ckpt_dcp_out *d)
{
    ckpt_buf pkl = CKPT_BUF_INIT, name = CKPT_BUF_INIT;
    ckpt_value *md = NULL;
    int rc;

    if ((rc = check_cover(d)) < 0 || (rc = add_files(d)) < 0 ||
        (rc = build_metadata(d, ckpt_plan_arena(d->plan), &md)) < 0 || (rc = ckpt_torch__pickle_value(md, 4, NULL, NULL, &pkl)) < 0)
        goto done;
    if ((d->dir[0] && ckpt_buf_printf(&name, "%s/", d->dir) < 0) || ckpt_buf_puts(&name, ".metadata") < 0) {
        rc = CKPT_ENOMEM;
        goto done;
    }
    rc = ckpt_plan_add_bytes(d->plan, (const char *)name.data, pkl.data, pkl.len);
done:
    ckpt_buf_dispose(&pkl);
    ckpt_buf_dispose(&name);
    return rc;
}
