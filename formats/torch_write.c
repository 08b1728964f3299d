/* Writing torch.save zip archives as current torch does: data.pkl (pickle protocol 2 by
 * default), .format_version, .storage_alignment, byteorder, one data/<key> record per
 * storage, version; stored entries with 64-byte aligned data.
 *
 * Tensors are pickled exactly as torch pickles them: `_rebuild_tensor_v2(pid, offset, size,
 * stride, requires_grad, OrderedDict())` with pid ('storage', torch.<X>Storage, key, 'cpu',
 * numel), or `_rebuild_tensor_v3(..., dtype)` over an UntypedStorage (numel = bytes) for the
 * dtypes torch saves that way (float8, uint16/32/64); parameters are wrapped in
 * `_rebuild_parameter(tensor, requires_grad, OrderedDict())`. Storage keys are numbered in
 * the order the pickler first meets each blob. The optional `.data/serialization_id` record
 * is not written: torch computes it from an unordered hash set, so it cannot be reproduced. */
#include "torch_private.h"

#include <ckpt/sys/zip.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TORCH_ALIGN 64
#define NO_KEY ((size_t)-1)

typedef struct torch_writer {
    ckpt_writer *w;
    const ckpt_out *out;
    const char *path;
    char *archive;       /* "<archive>/" */
    size_t *blob_key;    /* per blob: its storage key, or NO_KEY */
    size_t *key_blob;    /* per key: the blob */
    size_t n_keys;
    int *entries;        /* per key: zip entry */
    int *placements;     /* per key: engine placement, -1 for an empty storage */
    ckpt_zip_writer *zw;
    ckpt_arena *arena;   /* the flat state dict built when the engine passes no root */
} torch_writer;

/* torch names the archive after the file, without its last extension. */
static char *archive_prefix(const char *path)
{
    const char *base = path, *p, *dot = NULL;
    size_t len;
    char *out;

    for (p = path; *p; p++)
        if (*p == '/' || *p == '\\')
            base = p + 1;
    for (p = base; *p; p++)
        if (*p == '.')
            dot = p;
    len = dot ? (size_t)(dot - base) : strlen(base);
    if (len == 0) {
        base = "archive";
        len = strlen(base);
    }
    out = malloc(len + 2);
    if (!out)
        return NULL;
    memcpy(out, base, len);
    out[len] = '/';
    out[len + 1] = '\0';
    return out;
}

static int ordered_dict(ckpt_pickler *p)
{
    int rc = ckpt_pickler_global(p, "collections", "OrderedDict");
    if (rc >= 0)
        rc = ckpt_pickler_op(p, ')'); /* EMPTY_TUPLE */
    if (rc >= 0)
        rc = ckpt_pickler_op(p, 'R'); /* REDUCE */
    return rc;
}

static int int_tuple(ckpt_pickler *p, const int64_t *v, int n)
{
    int i, rc = ckpt_pickler_mark(p);

    for (i = 0; rc >= 0 && i < n; i++)
        rc = ckpt_pickler_int(p, v[i]);
    return rc < 0 ? rc : ckpt_pickler_tuple(p, (size_t)n);
}

static size_t storage_key(torch_writer *tw, size_t blob)
{
    if (tw->blob_key[blob] == NO_KEY) {
        tw->blob_key[blob] = tw->n_keys;
        tw->key_blob[tw->n_keys++] = blob;
    }
    return tw->blob_key[blob];
}

/* ('storage', torch.<X>Storage, key, 'cpu', numel) as a persistent id; UntypedStorage
 * (numel = bytes) for the dtypes torch saves through _rebuild_tensor_v3. */
static int storage_pid(ckpt_pickler *p, ckpt_dtype dtype, const char *key, uint64_t nbytes)
{
    const char *cls = ckpt_torch__storage_class(dtype);
    int rc = ckpt_pickler_mark(p);

    if (rc >= 0)
        rc = ckpt_pickler_str(p, "storage", 7);
    if (rc >= 0)
        rc = cls ? ckpt_pickler_global(p, "torch", cls) : ckpt_pickler_global(p, "torch.storage", "UntypedStorage");
    if (rc >= 0)
        rc = ckpt_pickler_str(p, key, strlen(key));
    if (rc >= 0)
        rc = ckpt_pickler_str(p, "cpu", 3);
    if (rc >= 0)
        rc = ckpt_pickler_int(p, (int64_t)(cls ? nbytes / ckpt_dtype_size(dtype) : nbytes));
    if (rc >= 0)
        rc = ckpt_pickler_tuple(p, 5);
    if (rc >= 0)
        rc = ckpt_pickler_op(p, 'Q'); /* BINPERSID */
    return rc;
}

int ckpt_torch__pickle_tensor(ckpt_pickler *p, ckpt_dtype dtype, const char *key, uint64_t storage_bytes,
                              int64_t offset, int ndim, const int64_t *shape, const int64_t *stride, int requires_grad)
{
    const char *cls = ckpt_torch__storage_class(dtype);
    int rc = ckpt_pickler_global(p, "torch._utils", cls ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");

    if (rc >= 0)
        rc = ckpt_pickler_mark(p);
    if (rc >= 0)
        rc = storage_pid(p, dtype, key, storage_bytes);
    if (rc >= 0)
        rc = ckpt_pickler_int(p, offset);
    if (rc >= 0)
        rc = int_tuple(p, shape, ndim);
    if (rc >= 0)
        rc = int_tuple(p, stride, ndim);
    if (rc >= 0)
        rc = ckpt_pickler_bool(p, requires_grad);
    if (rc >= 0)
        rc = ordered_dict(p);
    if (rc >= 0 && !cls)
        rc = ckpt_pickler_global(p, "torch", ckpt_dtype_name(dtype));
    if (rc >= 0)
        rc = ckpt_pickler_tuple(p, cls ? 6 : 7);
    if (rc >= 0)
        rc = ckpt_pickler_op(p, 'R');
    return rc;
}

static int plain_tensor(ckpt_pickler *p, torch_writer *tw, const ckpt_out_tensor *t, int requires_grad)
{
    const ckpt_out_blob *b;
    char key[24];

    if (t->blob >= tw->out->n_blobs)
        return ckpt_error_set(CKPT_EINVALID, "%s: tensor %s refers to a missing blob", tw->path, t->name);
    b = &tw->out->blobs[t->blob];
    if (b->dtype != t->dtype || ckpt_dtype_size(t->dtype) == 0 || b->nbytes % ckpt_dtype_size(t->dtype) != 0)
        return ckpt_error_set(CKPT_EINVALID, "%s: tensor %s (%s) views a blob of %llu bytes of %s", tw->path,
                              t->name, ckpt_dtype_name(t->dtype), (unsigned long long)b->nbytes,
                              ckpt_dtype_name(b->dtype));
    snprintf(key, sizeof key, "%zu", storage_key(tw, t->blob));
    return ckpt_torch__pickle_tensor(p, t->dtype, key, b->nbytes, t->offset, t->ndim, t->shape, t->stride,
                                     requires_grad);
}

/* Python-side state of a tensor (subclass type, attributes) has no place in the output. */
static void note_lost_state(torch_writer *tw, const ckpt_value *node, const ckpt_out_tensor *t)
{
    const ckpt_value *src = node->u.tensor.source, *c;

    if (!src || src->kind != CKPT_VAL_OBJECT || !(c = src->u.obj.callable) || c->kind != CKPT_VAL_GLOBAL)
        return;
    if (strcmp(c->u.global.name, "_rebuild_from_type_v2") == 0 ||
        strcmp(c->u.global.name, "_rebuild_parameter_with_state") == 0)
        ckpt_writer_note(tw->w, "tensor %s: its Python type and attributes are not written, only its data",
                         t->name ? t->name : "?");
}

static int emit_tensor(ckpt_pickler *p, const ckpt_value *node, void *payload)
{
    torch_writer *tw = payload;
    size_t index = node->u.tensor.index;
    const ckpt_out_tensor *t;
    int rc, rg;

    if (index >= tw->out->n_tensors)
        return ckpt_error_set(CKPT_EINVALID, "%s: tensor node refers to tensor #%zu of %zu", tw->path, index,
                              tw->out->n_tensors);
    t = &tw->out->tensors[index];
    rg = (t->flags & CKPT_TENSOR_REQUIRES_GRAD) != 0;
    note_lost_state(tw, node, t);
    if (!(t->flags & CKPT_TENSOR_PARAMETER))
        return plain_tensor(p, tw, t, rg);
    /* The data inside a Parameter never requires grad itself; the Parameter does. */
    rc = ckpt_pickler_global(p, "torch._utils", "_rebuild_parameter");
    if (rc >= 0)
        rc = ckpt_pickler_mark(p);
    if (rc >= 0)
        rc = plain_tensor(p, tw, t, 0);
    if (rc >= 0)
        rc = ckpt_pickler_bool(p, rg);
    if (rc >= 0)
        rc = ordered_dict(p);
    if (rc >= 0)
        rc = ckpt_pickler_tuple(p, 3);
    if (rc >= 0)
        rc = ckpt_pickler_op(p, 'R');
    return rc;
}

/* name -> tensor, for an engine that passes no value tree. */
static int flat_root(torch_writer *tw, const ckpt_value **out)
{
    ckpt_value *root;
    size_t i;
    int rc = ckpt_arena_new(&tw->arena);

    if (rc < 0)
        return rc;
    root = ckpt_value_new(tw->arena, CKPT_VAL_DICT);
    if (!root || !(root->u.dict.cls = ckpt_value_new_global(tw->arena, "collections", "OrderedDict")))
        return CKPT_ENOMEM;
    for (i = 0; i < tw->out->n_tensors; i++) {
        const char *name = tw->out->tensors[i].name;
        ckpt_value *k, *v;
        if (!name)
            return ckpt_error_set(CKPT_EINVALID, "%s: tensor #%zu has no name", tw->path, i);
        k = ckpt_value_new_str(tw->arena, name, strlen(name));
        v = ckpt_value_new_tensor(tw->arena, i);
        if (!k || !v)
            return CKPT_ENOMEM;
        rc = ckpt_value_dict_set(tw->arena, root, k, v);
        if (rc < 0)
            return rc;
    }
    *out = root;
    return 0;
}

static int append_run(uint64_t offset, const void *data, size_t len, void *payload)
{
    ckpt_buf *b = payload;
    if (offset != b->len)
        return ckpt_error_set(CKPT_ERROR, "torch writer: unexpected hole in the pickle stream");
    return ckpt_buf_append(b, data, len);
}

int ckpt_torch__pickle_finish(ckpt_pickler *p, ckpt_buf *out)
{
    int rc = ckpt_pickler_end(p);

    if (rc >= 0)
        rc = ckpt_pickler_emit(p, append_run, out);
    return rc < 0 ? rc : 0;
}

int ckpt_torch__pickle_value(const ckpt_value *v, int protocol, ckpt_pickler_tensor_fn tensor_fn, void *payload,
                             ckpt_buf *out)
{
    ckpt_pickler *p = NULL;
    int rc = ckpt_pickler_new(&p, protocol, tensor_fn, payload);

    if (rc >= 0)
        rc = ckpt_pickler_begin(p);
    if (rc >= 0)
        rc = ckpt_pickler_value(p, v);
    if (rc >= 0)
        rc = ckpt_torch__pickle_finish(p, out);
    ckpt_pickler_free(p);
    return rc < 0 ? rc : 0;
}

static int build_pickle(torch_writer *tw, int protocol, ckpt_buf *pkl)
{
    const ckpt_value *root = tw->out->root;
    int rc = 0;

    if (!root)
        rc = flat_root(tw, &root);
    return rc < 0 ? rc : ckpt_torch__pickle_value(root, protocol, emit_tensor, tw, pkl);
}

static int add_small(ckpt_zip_writer *zw, ckpt_buf *name, const char *archive, const char *record, const void *data,
                     size_t len)
{
    int rc;

    ckpt_buf_clear(name);
    rc = ckpt_buf_puts(name, archive);
    if (rc >= 0)
        rc = ckpt_buf_puts(name, record);
    if (rc >= 0)
        rc = ckpt_zip_writer_add_bytes(zw, (const char *)name->data, data, len);
    return rc;
}

int ckpt_torch__archive_head(ckpt_zip_writer *zw, const char *archive, const void *pkl, size_t pkl_len)
{
    ckpt_buf name = CKPT_BUF_INIT;
    int rc = add_small(zw, &name, archive, "data.pkl", pkl, pkl_len);

    if (rc >= 0)
        rc = add_small(zw, &name, archive, ".format_version", "1", 1);
    if (rc >= 0)
        rc = add_small(zw, &name, archive, ".storage_alignment", "64", 2);
    if (rc >= 0)
        rc = add_small(zw, &name, archive, "byteorder", "little", 6);
    ckpt_buf_dispose(&name);
    return rc < 0 ? rc : 0;
}

int ckpt_torch__archive_tail(ckpt_zip_writer *zw, const char *archive)
{
    ckpt_buf name = CKPT_BUF_INIT;
    int rc = add_small(zw, &name, archive, "version", "3\n", 2);

    ckpt_buf_dispose(&name);
    return rc < 0 ? rc : 0;
}

static int add_storages(torch_writer *tw, ckpt_buf *name)
{
    size_t k;
    int rc;

    for (k = 0; k < tw->n_keys; k++) {
        size_t blob = tw->key_blob[k];
        uint64_t nbytes = tw->out->blobs[blob].nbytes, off;

        ckpt_buf_clear(name);
        rc = ckpt_buf_printf(name, "%sdata/%zu", tw->archive, k);
        if (rc < 0)
            return rc;
        rc = ckpt_zip_writer_add(tw->zw, (const char *)name->data, nbytes, &off);
        if (rc < 0)
            return rc;
        tw->entries[k] = rc;
        tw->placements[k] = -1;
        if (nbytes == 0)
            continue;
        rc = ckpt_writer_place(tw->w, blob, 0, nbytes, off, CKPT_EXTENT_RAW);
        if (rc < 0)
            return rc;
        tw->placements[k] = rc;
    }
    return 0;
}

int ckpt_torch__write_begin(ckpt_writer *w)
{
    const ckpt_convert_options *opts = ckpt_writer_options(w);
    int protocol = opts && opts->protocol ? opts->protocol : 2;
    ckpt_buf pkl = CKPT_BUF_INIT, name = CKPT_BUF_INIT;
    torch_writer *tw;
    size_t i, n_blobs;
    int rc;

    tw = calloc(1, sizeof *tw);
    if (!tw)
        return ckpt_error_oom();
    *ckpt_writer_state(w) = tw;
    tw->w = w;
    tw->out = ckpt_writer_out(w);
    tw->path = ckpt_writer_path(w);
    if (protocol != 2 && protocol != 4)
        return ckpt_error_set(CKPT_EINVALID, "%s: pickle protocol %d not supported for torch output (2 or 4)",
                              tw->path, protocol);
    n_blobs = tw->out->n_blobs;
    tw->archive = archive_prefix(ckpt_writer_name(w));
    tw->blob_key = malloc((n_blobs ? n_blobs : 1) * sizeof *tw->blob_key);
    tw->key_blob = malloc((n_blobs ? n_blobs : 1) * sizeof *tw->key_blob);
    tw->entries = malloc((n_blobs ? n_blobs : 1) * sizeof *tw->entries);
    tw->placements = malloc((n_blobs ? n_blobs : 1) * sizeof *tw->placements);
    if (!tw->archive || !tw->blob_key || !tw->key_blob || !tw->entries || !tw->placements)
        return ckpt_error_oom();
    for (i = 0; i < n_blobs; i++)
        tw->blob_key[i] = NO_KEY;

    rc = build_pickle(tw, protocol, &pkl);
    if (rc >= 0)
        rc = ckpt_zip_writer_new(&tw->zw, ckpt_writer_file(w), 0, TORCH_ALIGN);
    if (rc >= 0)
        rc = ckpt_torch__archive_head(tw->zw, tw->archive, pkl.data, pkl.len);
    if (rc >= 0)
        rc = add_storages(tw, &name);
    if (rc >= 0)
        rc = ckpt_torch__archive_tail(tw->zw, tw->archive);
    ckpt_buf_dispose(&pkl);
    ckpt_buf_dispose(&name);
    return rc < 0 ? rc : 0;
}

int ckpt_torch__write_finish(ckpt_writer *w)
{
    torch_writer *tw = *ckpt_writer_state(w);
    size_t k;

    for (k = 0; k < tw->n_keys; k++)
        if (tw->placements[k] >= 0)
            ckpt_zip_writer_set_crc(tw->zw, tw->entries[k], ckpt_writer_placement_crc(w, tw->placements[k]));
    return ckpt_zip_writer_finish(tw->zw);
}

void ckpt_torch__write_free(ckpt_writer *w)
{
    void **state = ckpt_writer_state(w);
    torch_writer *tw = *state;

    if (!tw)
        return;
    ckpt_zip_writer_free(tw->zw);
    ckpt_arena_free(tw->arena);
    free(tw->archive);
    free(tw->blob_key);
    free(tw->key_blob);
    free(tw->entries);
    free(tw->placements);
    free(tw);
    *state = NULL;
}
