/* PyTorch Distributed Checkpoint (torch.distributed.checkpoint; Megatron's torch_dist,
 * FSDP2, torchtitan): a directory with `.metadata` and `__R_S.distcp` data files.
 *
 * `.metadata` is a pickle of torch's Metadata: per key either a TensorStorageMetadata
 * (dtype, global size, and the chunks it was saved in: offsets and sizes) or a
 * BytesStorageMetadata, and `storage_data`, which places each chunk (key + offsets) in a
 * data file as [offset, +length). Each tensor chunk there is a complete torch.save archive
 * of one tensor of the chunk's size; each bytes item is the raw bytes saved. Every tensor is
 * exposed at its global shape, its storage tiled from the chunks (nothing is read), so any
 * reader sees the checkpoint as if it had been saved by one process. Megatron's `common.pt`
 * (args, iteration, optimizer param groups) is read as a torch.save file and its entries
 * come first in the root; `metadata.json` is only reported.
 *
 * Facts: torch/distributed/checkpoint/{metadata.py, filesystem.py (_write_item,
 * FileSystemReader.read_data), default_planner.py}; megatron/core/dist_checkpointing/
 * strategies/{torch.py, filesystem_async.py}. */
#include "torch_private.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DCP_META_MODULE "torch.distributed.checkpoint.metadata"

/* One entry of storage_data: where the chunk of `fqn` at `offsets` (or the bytes item
 * `fqn`, ndim -1) lies. */
typedef struct placement {
    const char *fqn;
    int ndim;
    int64_t offsets[CKPT_MAX_DIMS];
    const char *file;
    uint64_t offset, length;
} placement;

typedef struct data_file {
    const char *name;
    const ckpt_file *file;
} data_file;

typedef struct dcp_open {
    ckpt_reader *r;
    ckpt_arena *a;
    const char *dir;
    const char *meta_path;
    placement *places;
    size_t n_places;
    data_file *files;
    size_t n_files, cap_files;
    ckpt_buf path;
} dcp_open;

static int join_path(ckpt_buf *b, const char *dir, const char *name)
{
    ckpt_buf_clear(b);
    if (ckpt_buf_puts(b, dir) < 0 || ckpt_buf_puts(b, "/") < 0 || ckpt_buf_puts(b, name) < 0)
        return CKPT_ENOMEM;
    return 0;
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_metadata_file(const char *path)
{
    const char *base = strrchr(path, '/');
    return strcmp(base ? base + 1 : path, ".metadata") == 0;
}

static int dcp_bid(const ckpt_probe *p, int best_bid)
{
    ckpt_buf b = CKPT_BUF_INIT;
    int ok;

    if (best_bid >= 95)
        return -1;
    /* the metadata file stands for its directory: damage in it is ours to name */
    if (!p->is_dir)
        return is_metadata_file(p->path) ? 95 : -1;
    ok = join_path(&b, p->path, ".metadata") == 0 && is_file((const char *)b.data);
    ckpt_buf_dispose(&b);
    ckpt_error_clear();
    return ok ? 95 : -1;
}

/* ---- the Metadata pickle ---------------------------------------------------- */

static int fail(const dcp_open *o, const char *what, const char *fqn)
{
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: %s%s%s%s", o->meta_path, what,
                           fqn ? " (key '" : "", fqn ? fqn : "", fqn ? "')" : "");
}

/* The BUILD state of an object of class `module.name` made by NEWOBJ, or NULL. */
static const ckpt_value *state_of(const ckpt_value *v, const char *module, const char *name)
{
    if (!v || v->kind != CKPT_VAL_OBJECT || !ckpt_value_is_global(v->u.obj.callable, module, name))
        return NULL;
    return v->u.obj.state;
}

static const ckpt_value *field(const ckpt_value *state, const char *key)
{
    return state && state->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(state, key) : NULL;
}

static int as_u64(const ckpt_value *v, uint64_t *out)
{
    if (!v || v->kind != CKPT_VAL_INT || v->u.integer < 0)
        return -1;
    *out = (uint64_t)v->u.integer;
    return 0;
}

/* torch.Size([...]): REDUCE of torch.Size on a one-item tuple holding a list of ints. */
static int size_dims(const ckpt_value *v, int64_t *dims, int *ndim)
{
    const ckpt_value *list;
    size_t i;

    if (!v || v->kind != CKPT_VAL_OBJECT || !ckpt_value_is_global(v->u.obj.callable, "torch", "Size") ||
        !v->u.obj.args || v->u.obj.args->kind != CKPT_VAL_TUPLE || v->u.obj.args->u.seq.n != 1)
        return -1;
    list = v->u.obj.args->u.seq.items[0];
    if ((list->kind != CKPT_VAL_LIST && list->kind != CKPT_VAL_TUPLE) || list->u.seq.n > CKPT_MAX_DIMS)
        return -1;
    for (i = 0; i < list->u.seq.n; i++) {
        const ckpt_value *d = list->u.seq.items[i];
        if (d->kind != CKPT_VAL_INT || d->u.integer < 0)
            return -1;
        dims[i] = d->u.integer;
    }
    *ndim = (int)list->u.seq.n;
    return 0;
}

/* TensorProperties pickles its fields as a tuple (dtype first) since torch 2.1, as a dict
 * before. */
static ckpt_dtype properties_dtype(const ckpt_value *props)
{
    const ckpt_value *st = state_of(props, DCP_META_MODULE, "TensorProperties"), *g = NULL;

    if (st && st->kind == CKPT_VAL_TUPLE && st->u.seq.n >= 1)
        g = st->u.seq.items[0];
    else if (st && st->kind == CKPT_VAL_DICT)
        g = ckpt_value_dict_get(st, "dtype");
    if (!g || g->kind != CKPT_VAL_GLOBAL || strcmp(g->u.global.module, "torch") != 0)
        return CKPT_DTYPE_INVALID;
    return ckpt_dtype_from_name(g->u.global.name);
}

static int placement_cmp(const void *pa, const void *pb)
{
    const placement *a = pa, *b = pb;
    int c = strcmp(a->fqn, b->fqn), d;

    if (c)
        return c;
    if (a->ndim != b->ndim)
        return a->ndim < b->ndim ? -1 : 1;
    for (d = 0; d < a->ndim; d++)
        if (a->offsets[d] != b->offsets[d])
            return a->offsets[d] < b->offsets[d] ? -1 : 1;
    return 0;
}

/* A data file name as written by FileSystemWriter: a plain name in the directory. */
static int safe_name(const char *s)
{
    return s[0] && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int read_placements(dcp_open *o, const ckpt_value *storage_data)
{
    size_t i;

    if (!storage_data || storage_data->kind != CKPT_VAL_DICT)
        return fail(o, "Metadata has no storage_data dict (not written by a FileSystemWriter?)", NULL);
    o->places = calloc(storage_data->u.dict.map.n ? storage_data->u.dict.map.n : 1, sizeof *o->places);
    if (!o->places)
        return ckpt_error_oom();
    for (i = 0; i < storage_data->u.dict.map.n; i++) {
        const ckpt_value *k = state_of(storage_data->u.dict.map.keys[i], DCP_META_MODULE, "MetadataIndex");
        const ckpt_value *v = state_of(storage_data->u.dict.map.vals[i], "torch.distributed.checkpoint.filesystem",
                                       "_StorageInfo");
        const ckpt_value *fqn = field(k, "fqn"), *off = field(k, "offset"), *rel = field(v, "relative_path");
        const ckpt_value *xf = field(v, "transform_descriptors");
        placement *p = &o->places[o->n_places];

        if (!fqn || fqn->kind != CKPT_VAL_STR || !rel || rel->kind != CKPT_VAL_STR ||
            as_u64(field(v, "offset"), &p->offset) || as_u64(field(v, "length"), &p->length))
            return fail(o, "a storage_data entry is not MetadataIndex -> _StorageInfo", NULL);
        if (!safe_name(rel->u.str.ptr))
            return ckpt_error_setc(CKPT_EUNSAFE, CKPT_ERRCLASS_FORMAT,
                                   "%s: data file '%s' of key '%s' is not a plain name in the checkpoint directory",
                                   o->meta_path, rel->u.str.ptr, fqn->u.str.ptr);
        if (xf && !(xf->kind == CKPT_VAL_NONE || ((xf->kind == CKPT_VAL_LIST || xf->kind == CKPT_VAL_TUPLE) &&
                                                   xf->u.seq.n == 0)))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT,
                                   "%s: key '%s' is stored through transforms (compression or encryption "
                                   "extensions), which this version does not read",
                                   o->meta_path, fqn->u.str.ptr);
        p->fqn = fqn->u.str.ptr;
        p->file = rel->u.str.ptr;
        p->ndim = -1;
        if (off && off->kind != CKPT_VAL_NONE && size_dims(off, p->offsets, &p->ndim))
            return fail(o, "a chunk offset is not a torch.Size", fqn->u.str.ptr);
        o->n_places++;
    }
    qsort(o->places, o->n_places, sizeof *o->places, placement_cmp);
    return 0;
}

static const placement *find_placement(const dcp_open *o, const char *fqn, int ndim, const int64_t *offsets)
{
    placement key;

    memset(&key, 0, sizeof key);
    key.fqn = fqn;
    key.ndim = ndim;
    if (ndim > 0)
        memcpy(key.offsets, offsets, (size_t)ndim * sizeof *offsets);
    return bsearch(&key, o->places, o->n_places, sizeof *o->places, placement_cmp);
}

/* ---- data files and chunks ---------------------------------------------------- */

/* Where the last item the metadata places in `file` ends: the most a compressed data file
 * may decompress to. */
static uint64_t data_end(const dcp_open *o, const char *file)
{
    uint64_t most = 0, end;
    size_t i;

    for (i = 0; i < o->n_places; i++) {
        const placement *p = &o->places[i];
        if (strcmp(p->file, file) != 0)
            continue;
        if (CKPT_ADD_OVERFLOWS(p->offset, p->length, &end))
            return UINT64_MAX;
        most = end > most ? end : most;
    }
    return most;
}

/* The data file `name`, opened on first use; o->files is kept sorted by name, as a large
 * checkpoint has a file per rank and chunks name them in no useful order. */
static int data_file_of(dcp_open *o, const placement *p, const ckpt_file **out)
{
    size_t lo = 0, hi = o->n_files;
    data_file *grown;
    int rc;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(o->files[mid].name, p->file);
        if (c == 0) {
            *out = o->files[mid].file;
            return 0;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if ((rc = join_path(&o->path, o->dir, p->file)) < 0)
        return rc;
    if ((rc = ckpt_reader_open_file_within(o->r, (const char *)o->path.data, data_end(o, p->file), out)) < 0) {
        ckpt_error_prefix("data file of key '%s'", p->fqn);
        return rc;
    }
    if (!(grown = ckpt_array_grow(o->files, &o->cap_files, o->n_files, sizeof *o->files)))
        return CKPT_ENOMEM;
    o->files = grown;
    memmove(&o->files[lo + 1], &o->files[lo], (o->n_files - lo) * sizeof *o->files);
    o->files[lo].name = p->file;
    o->files[lo].file = *out;
    o->n_files++;
    return 0;
}

static int data_window(dcp_open *o, const placement *p, const ckpt_file **out)
{
    const ckpt_file *f;
    int rc;

    if ((rc = data_file_of(o, p, &f)) < 0)
        return rc;
    if (p->offset > f->size || p->length > f->size - p->offset)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: key '%s' lies at [%llu, +%llu) but the file holds %llu bytes (truncated?)",
                               f->path, p->fqn, (unsigned long long)p->offset, (unsigned long long)p->length,
                               (unsigned long long)f->size);
    return ckpt_reader_window(o->r, f, p->offset, p->length, out);
}

/* Chunk `c` of tensor `fqn`: its saved tensor, checked against the chunk, becomes tile `t`. */
static int load_chunk(dcp_open *o, const char *fqn, ckpt_dtype dtype, int ndim, const int64_t *offsets,
                      const int64_t *sizes, ckpt_tile *t)
{
    const placement *p = find_placement(o, fqn, ndim, offsets);
    const ckpt_tensor *ct;
    const ckpt_file *w;
    ckpt_torch_interp in;
    ckpt_value *root = NULL;
    int rc, d;

    if (!p)
        return fail(o, "a chunk has no place in storage_data", fqn);
    if ((rc = data_window(o, p, &w)) < 0)
        return rc;
    ckpt_torch__interp_init(&in, o->r, "data/", 0);
    in.file = w->path;
    in.own_tensors = 1;
    rc = ckpt_torch__read_archive(&in, w, &root);
    if (rc < 0) {
        ckpt_error_prefix("key '%s', chunk at byte %llu", fqn, (unsigned long long)p->offset);
        goto done;
    }
    if (root->kind != CKPT_VAL_TENSOR) {
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: key '%s': the chunk at byte %llu is not a tensor",
                             w->path, fqn, (unsigned long long)p->offset);
        goto done;
    }
    ct = ckpt_torch__tensor(&in, root->u.tensor.index);
    for (d = 0; d < ndim && ct->ndim == ndim && ct->shape[d] == sizes[d]; d++)
        ;
    if (ct->dtype != dtype || d != ndim || ct->ndim != ndim || !ckpt_tensor_is_contiguous(ct)) {
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                             "%s: key '%s': the chunk at byte %llu is not a contiguous %s tensor of the size "
                             ".metadata gives",
                             w->path, fqn, (unsigned long long)p->offset, ckpt_dtype_name(dtype));
        goto done;
    }
    memcpy(t->offset, offsets, (size_t)ndim * sizeof *offsets);
    memcpy(t->size, sizes, (size_t)ndim * sizeof *sizes);
    t->source = ct->storage;
    t->source_offset = (uint64_t)ct->offset * ckpt_dtype_size(dtype);
done:
    ckpt_torch__interp_dispose(&in);
    return rc;
}

/* TensorStorageMetadata -> a tensor at its global shape over a tiled storage. */
static int load_tensor(dcp_open *o, const char *fqn, const ckpt_value *md, ckpt_value **out)
{
    const ckpt_value *chunks = field(md, "chunks");
    int64_t shape[CKPT_MAX_DIMS];
    ckpt_storage *s;
    ckpt_tensor *t;
    ckpt_dtype dtype = properties_dtype(field(md, "properties"));
    int ndim, index, rc;
    size_t i;

    if (dtype == CKPT_DTYPE_INVALID)
        return fail(o, "tensor properties name no dtype this version knows", fqn);
    if (size_dims(field(md, "size"), shape, &ndim) || !chunks || chunks->kind != CKPT_VAL_LIST)
        return fail(o, "TensorStorageMetadata without a size and a list of chunks", fqn);
    if (!(s = ckpt_reader_new_tiled_storage(o->r, fqn, dtype, ndim, shape, chunks->u.seq.n)))
        return CKPT_ENOMEM;
    for (i = 0; i < chunks->u.seq.n; i++) {
        const ckpt_value *c = state_of(chunks->u.seq.items[i], DCP_META_MODULE, "ChunkStorageMetadata");
        int64_t offsets[CKPT_MAX_DIMS], sizes[CKPT_MAX_DIMS];
        int no, ns;
        if (size_dims(field(c, "offsets"), offsets, &no) || size_dims(field(c, "sizes"), sizes, &ns) || no != ndim ||
            ns != ndim)
            return fail(o, "a chunk is not ChunkStorageMetadata of the tensor's rank", fqn);
        if ((rc = load_chunk(o, fqn, dtype, ndim, offsets, sizes, &s->tiling->tiles[i])) < 0)
            return rc;
    }
    if ((rc = ckpt_storage_tiling_check(s)) < 0) {
        ckpt_error_prefix("%s", o->meta_path);
        return rc;
    }
    if ((index = ckpt_reader_add_tensor(o->r, &t)) < 0)
        return index;
    t->name = s->key;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    ckpt_tensor_set_contiguous(t);
    t->storage = s;
    return (*out = ckpt_value_new_tensor(o->a, (size_t)index)) ? 0 : CKPT_ENOMEM;
}

/* BytesStorageMetadata -> the saved bytes, as they are (often a torch.save of an object). */
static int load_bytes(dcp_open *o, const char *fqn, ckpt_value **out)
{
    const placement *p = find_placement(o, fqn, -1, NULL);
    const ckpt_file *w;
    ckpt_value *v;
    int rc;

    if (!p)
        return fail(o, "a bytes item has no place in storage_data", fqn);
    if ((rc = data_window(o, p, &w)) < 0)
        return rc;
    if (!(v = ckpt_value_new(o->a, CKPT_VAL_BYTES)))
        return CKPT_ENOMEM;
    v->u.bytes.ptr = w->data;
    v->u.bytes.len = (size_t)w->size;
    *out = v;
    return 0;
}

/* ---- the root ------------------------------------------------------------------- */

/* DefaultSavePlanner's planner_data maps each key to its path in the state dict that was
 * saved ("model.layers.0.w" -> ("model", "layers.0.w")); the root follows it where every
 * step is a name, so that a consolidated file nests like the original state dict. */
static int place_value(dcp_open *o, ckpt_value *root, const ckpt_value *planner, const char *fqn, ckpt_value *v)
{
    const ckpt_value *path = planner && planner->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(planner, fqn) : NULL;
    ckpt_value *at = root, *key;
    size_t i, n = path && (path->kind == CKPT_VAL_TUPLE || path->kind == CKPT_VAL_LIST) ? path->u.seq.n : 0;

    for (i = 0; i < n; i++)
        if (path->u.seq.items[i]->kind != CKPT_VAL_STR)
            n = 0;
    for (i = 0; i + 1 < n; i++) {
        ckpt_value *next = ckpt_value_dict_get(at, path->u.seq.items[i]->u.str.ptr);
        if (!next || next->kind != CKPT_VAL_DICT || next->u.dict.cls) {
            if (!(next = ckpt_value_new(o->a, CKPT_VAL_DICT)) ||
                ckpt_value_dict_set(o->a, at, path->u.seq.items[i], next) < 0)
                return CKPT_ENOMEM;
        }
        at = next;
    }
    key = n ? path->u.seq.items[n - 1] : ckpt_value_new_str(o->a, fqn, strlen(fqn));
    if (!key)
        return CKPT_ENOMEM;
    return ckpt_value_dict_set(o->a, at, key, v) < 0 ? CKPT_ENOMEM : 0;
}

/* Megatron's common.pt: the state that is the same on every rank. */
static int read_common(dcp_open *o, ckpt_value *root)
{
    const ckpt_file *f;
    ckpt_torch_interp in;
    ckpt_value *common = NULL;
    size_t i;
    int rc;

    if ((rc = join_path(&o->path, o->dir, "common.pt")) < 0)
        return rc;
    if (!is_file((const char *)o->path.data))
        return 0;
    if ((rc = ckpt_reader_open_file(o->r, (const char *)o->path.data, &f)) < 0)
        return rc;
    ckpt_torch__interp_init(&in, o->r, "data/", 0);
    in.file = f->path;
    rc = ckpt_torch__read_archive(&in, f, &common);
    ckpt_torch__interp_dispose(&in);
    if (rc < 0)
        return rc;
    if (common->kind != CKPT_VAL_DICT)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not a dict", f->path);
    for (i = 0; i < common->u.dict.map.n; i++)
        if (ckpt_value_dict_set(o->a, root, common->u.dict.map.keys[i], common->u.dict.map.vals[i]) < 0)
            return CKPT_ENOMEM;
    return 0;
}

/* Megatron's metadata.json names the backends; a few hundred bytes. */
static void note_backend(dcp_open *o)
{
    char text[4096];
    size_t n = 0;
    cJSON *j = NULL;
    const cJSON *b, *v;
    FILE *f;

    if (join_path(&o->path, o->dir, "metadata.json") < 0 || !(f = fopen((const char *)o->path.data, "rb"))) {
        ckpt_error_clear();
        return;
    }
    n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    if (!(j = cJSON_Parse(text)))
        return;
    b = cJSON_GetObjectItemCaseSensitive(j, "sharded_backend");
    v = cJSON_GetObjectItemCaseSensitive(j, "sharded_backend_version");
    if (cJSON_IsString(b))
        ckpt_reader_note(o->r, "megatron-core distributed checkpoint (sharded backend %s, version %d)",
                         b->valuestring, cJSON_IsNumber(v) ? v->valueint : 0);
    cJSON_Delete(j);
}

typedef struct unsafe_find {
    const char *module, *name;
    char path[256]; /* the walk's path lives only as long as the callback */
} unsafe_find;

static int find_unsafe(const ckpt_value *v, const char *path, void *payload)
{
    unsafe_find *u = payload;

    if (v->kind != CKPT_VAL_GLOBAL || !(v->flags & CKPT_VALUE_UNSAFE))
        return 0;
    u->module = v->u.global.module;
    u->name = v->u.global.name;
    snprintf(u->path, sizeof u->path, "%s", path[0] ? path : "top level");
    return 1;
}

static int dcp_open_dir(ckpt_reader *r)
{
    ckpt_pickle_read_options popts = CKPT_PICKLE_READ_OPTIONS_INIT;
    ckpt_buf source = CKPT_BUF_INIT;
    dcp_open o;
    const ckpt_file *mf;
    const ckpt_value *st, *sdm, *planner;
    ckpt_value *md = NULL, *root;
    unsafe_find u = { NULL, NULL, "" };
    size_t end, i;
    int rc;

    memset(&o, 0, sizeof o);
    o.r = r;
    o.a = ckpt_reader_arena(r);
    o.dir = ckpt_reader_path(r);
    if (ckpt_reader_file(r)) {
        const char *slash = strrchr(o.dir, '/');
        o.dir = !slash ? "." : slash == o.dir ? "/" : ckpt_arena_strndup(o.a, o.dir, (size_t)(slash - o.dir));
    }
    if (!o.dir || (rc = join_path(&o.path, o.dir, ".metadata")) < 0) {
        rc = CKPT_ENOMEM;
        goto done;
    }
    if ((rc = ckpt_reader_open_file(r, (const char *)o.path.data, &mf)) < 0)
        goto done;
    o.meta_path = mf->path;
    /* a metadata pickle that does not parse: the file is damaged, whatever the opcode says */
    if (ckpt_buf_puts(&source, mf->path) < 0 || ckpt_buf_puts(&source, ": truncated or corrupt metadata") < 0) {
        rc = CKPT_ENOMEM;
        goto done;
    }
    popts.source = (const char *)source.data;
    if ((rc = ckpt_pickle_read(&md, &end, o.a, mf->data, (size_t)mf->size, &popts)) < 0)
        goto done;
    /* the metadata's schema is fixed: any code reference outside it is an attack */
    if ((rc = ckpt_value_walk(md, CKPT_TORCH_MAX_DEPTH, find_unsafe, &u)) < 0)
        goto done;
    if (u.module) {
        rc = ckpt_error_setc(CKPT_EUNSAFE, CKPT_ERRCLASS_PICKLE,
                             "%s: refers to %s.%s (at %s), which no Distributed Checkpoint metadata holds", mf->path,
                             u.module, u.name, u.path);
        goto done;
    }
    st = state_of(md, DCP_META_MODULE, "Metadata");
    sdm = field(st, "state_dict_metadata");
    planner = field(st, "planner_data");
    if (!sdm || sdm->kind != CKPT_VAL_DICT) {
        rc = fail(&o, "not a torch.distributed.checkpoint Metadata with a state_dict_metadata dict", NULL);
        goto done;
    }
    if ((rc = read_placements(&o, field(st, "storage_data"))) < 0)
        goto done;
    if (!(root = ckpt_value_new(o.a, CKPT_VAL_DICT))) {
        rc = CKPT_ENOMEM;
        goto done;
    }
    if ((rc = read_common(&o, root)) < 0)
        goto done;
    for (i = 0; i < sdm->u.dict.map.n; i++) {
        const ckpt_value *k = sdm->u.dict.map.keys[i], *v = sdm->u.dict.map.vals[i];
        ckpt_value *item = NULL;
        if (k->kind != CKPT_VAL_STR) {
            rc = fail(&o, "a state_dict_metadata key is not a string", NULL);
            goto done;
        }
        if (state_of(v, DCP_META_MODULE, "TensorStorageMetadata"))
            rc = load_tensor(&o, k->u.str.ptr, state_of(v, DCP_META_MODULE, "TensorStorageMetadata"), &item);
        else if (ckpt_value_is_global(v->kind == CKPT_VAL_OBJECT ? v->u.obj.callable : NULL, DCP_META_MODULE,
                                      "BytesStorageMetadata"))
            rc = load_bytes(&o, k->u.str.ptr, &item);
        else
            rc = fail(&o, "neither TensorStorageMetadata nor BytesStorageMetadata", k->u.str.ptr);
        if (rc == 0)
            rc = place_value(&o, root, planner, k->u.str.ptr, item);
        if (rc < 0)
            goto done;
    }
    ckpt_reader_set_root(r, root);
    ckpt_reader_note(r, "PyTorch Distributed Checkpoint: %zu keys in %zu data files", sdm->u.dict.map.n, o.n_files);
    note_backend(&o);
done:
    free(o.places);
    free(o.files);
    ckpt_buf_dispose(&o.path);
    ckpt_buf_dispose(&source);
    return rc;
}

extern const ckpt_format_vtable ckpt_format_torch_dcp;
const ckpt_format_vtable ckpt_format_torch_dcp = {
    .abi_version = CKPT_FORMAT_ABI_VERSION,
    .name = "torch_dcp",
    .description = "PyTorch Distributed Checkpoint directory (.metadata + .distcp; Megatron torch_dist, FSDP2), "
                   "read at global shapes; writes its data files (ckpt/dcp.h writes whole checkpoints)",
    .extensions = "",
    .caps = CKPT_FORMAT_READ | CKPT_FORMAT_WRITE | CKPT_FORMAT_CRC,
    .bid = dcp_bid,
    .open = dcp_open_dir,
    .write_begin = ckpt_torch__dcp_write_begin,
    .write_finish = ckpt_torch__dcp_write_finish,
    .write_free = ckpt_torch__dcp_write_free,
};
