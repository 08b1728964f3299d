/* safetensors: one file (`u64 N | JSON header | data`), or a sharded model whose
 * model.safetensors.index.json maps each tensor name to the shard that holds it. Every
 * tensor is C-contiguous with a storage of its own: one RAW extent in the mapped file. */
#include "safetensors_private.h"

#include <ckpt/hf.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_INDEX_SUFFIX ".safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"
/* Indexes of the largest public models are a few MB; this bounds the JSON tree. */
#define ST_MAX_INDEX CKPT_ST_MAX_HEADER

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int is_json_ws(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A loose look at an index: a JSON object with a "weight_map" object. */
static int index_has_weight_map(const ckpt_file *f)
{
    cJSON *json;
    int ok;

    if (!f->data || f->size > ST_MAX_INDEX)
        return 0;
    json = cJSON_ParseWithLength((const char *)f->data, (size_t)f->size);
    ok = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(json, "weight_map"));
    cJSON_Delete(json);
    return ok;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (!p) {
        ckpt_error_oom();
        return NULL;
    }
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int st_bid(const ckpt_probe *p, int best_bid)
{
    const ckpt_file *f = p->file;
    uint64_t n, i;

    if (best_bid >= 80)
        return -1;
    if (p->is_dir) {
        struct stat st;
        ckpt_file *idx;
        char *path = join_path(p->path, ST_INDEX_NAME);
        int ok = 0;
        if (path && ckpt_file_open(&idx, path) == 0) {
            ok = index_has_weight_map(idx);
            ckpt_file_close(idx);
        }
        free(path);
        /* a Hugging Face model of one file: model.safetensors, no index */
        path = ok ? NULL : join_path(p->path, ST_SINGLE_NAME);
        if (path && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            ok = 1;
        free(path);
        ckpt_error_clear();
        return ok ? 80 : -1;
    }
    if (!f)
        return -1;
    if (has_suffix(p->path, ST_INDEX_SUFFIX) && p->partial) {
        /* the start of a JSON object is all a bid on the start of an index can check */
        for (i = 0; i < f->size && is_json_ws(f->data[i]); i++)
            ;
        return i < f->size && f->data[i] == '{' ? 80 : -1;
    }
    if (has_suffix(p->path, ST_INDEX_SUFFIX))
        return index_has_weight_map(f) ? 80 : -1;
    if (best_bid >= 72)
        return -1;
    /* A damaged file named .safetensors is still ours to diagnose (header too large,
     * truncated...), unless something else recognises it. */
    if (f->size < 8)
        return has_suffix(p->path, ".safetensors") ? 8 : -1;
    n = ckpt_load_u64le(f->data);
    if (n > CKPT_ST_MAX_HEADER || (n > f->size - 8 && !p->partial))
        return has_suffix(p->path, ".safetensors") ? 8 : -1;
    for (i = 0; i < n && 8 + i < f->size && is_json_ws(f->data[8 + i]); i++)
        ;
    return i < n && 8 + i < f->size && f->data[8 + i] == '{' ? 72 : has_suffix(p->path, ".safetensors") ? 8 : -1;
}

/* An index is JSON of no set size; a file is as long as its header says. */
static int st_bound(const ckpt_probe *p, uint64_t *need, uint64_t *max_size)
{
    if (!p->file || has_suffix(p->path, ST_INDEX_SUFFIX))
        return 0;
    return ckpt_safetensors__size(p->file->path, p->file->data, p->file->size, need, max_size);
}

/* A storage holding one tensor's bytes, `begin` bytes into the data section of `f`. */
static ckpt_storage *new_storage(ckpt_reader *r, const ckpt_file *f, uint64_t data_offset, const ckpt_st_entry *e)
{
    uint64_t nbytes = e->end - e->begin;
    ckpt_storage *s = ckpt_reader_new_storage(r, e->name, e->dtype, nbytes ? 1 : 0);

    if (!s)
        return NULL;
    s->nbytes = nbytes;
    if (nbytes) {
        s->extents[0].file = f;
        s->extents[0].offset = data_offset + e->begin;
        s->extents[0].stored_size = nbytes;
        s->extents[0].size = nbytes;
        s->extents[0].encoding = CKPT_EXTENT_RAW;
    }
    return s;
}

/* Add a tensor and its TENSOR node under its name in root. */
static int add_tensor(ckpt_reader *r, ckpt_value *root, const char *name, const ckpt_st_entry *e,
                      const ckpt_storage *s)
{
    ckpt_arena *a = ckpt_reader_arena(r);
    ckpt_tensor *t;
    ckpt_value *key, *node;
    size_t len = strlen(name);
    int index, d;

    index = ckpt_reader_add_tensor(r, &t);
    if (index < 0)
        return index;
    t->name = ckpt_arena_strndup(a, name, len);
    t->dtype = e->dtype;
    t->ndim = e->ndim;
    for (d = 0; d < e->ndim; d++)
        t->shape[d] = e->shape[d];
    ckpt_tensor_set_contiguous(t);
    t->storage = s;
    key = ckpt_value_new_str(a, name, len);
    node = ckpt_value_new_tensor(a, (size_t)index);
    if (!t->name || !key || !node)
        return CKPT_ENOMEM;
    return ckpt_value_dict_set(a, root, key, node);
}

static int set_str(ckpt_arena *a, ckpt_value *dict, const char *k, ckpt_value *v)
{
    ckpt_value *key = ckpt_value_new_str(a, k, strlen(k));

    if (!key || !v)
        return CKPT_ENOMEM;
    return ckpt_value_dict_set(a, dict, key, v);
}

static int st_open_file(ckpt_reader *r, const ckpt_file *f)
{
    ckpt_arena *a = ckpt_reader_arena(r);
    ckpt_st_header h;
    ckpt_value *root, *meta;
    size_t i;
    int rc;

    rc = ckpt_safetensors__parse(&h, f->path, f->data, f->size);
    if (rc < 0)
        return rc;
    root = ckpt_value_new(a, CKPT_VAL_DICT);
    rc = root ? 0 : CKPT_ENOMEM;
    if (rc == 0 && h.has_meta) {
        meta = ckpt_value_new(a, CKPT_VAL_DICT);
        for (i = 0; rc == 0 && meta && i < h.n_meta; i++)
            rc = set_str(a, meta, h.meta[i].key, ckpt_value_new_str(a, h.meta[i].value, strlen(h.meta[i].value)));
        if (rc == 0)
            rc = set_str(a, root, "__metadata__", meta);
    }
    for (i = 0; rc == 0 && i < h.n_entries; i++) {
        const ckpt_st_entry *e = &h.entries[i];
        ckpt_storage *s = new_storage(r, f, h.data_offset, e);
        rc = s ? add_tensor(r, root, e->name, e, s) : CKPT_ENOMEM;
    }
    if (rc == 0)
        ckpt_reader_set_root(r, root);
    ckpt_safetensors__header_dispose(&h);
    return rc;
}

/* ---- sharded models -------------------------------------------------------- */

typedef struct st_slot {
    const char *name;  /* weight_map key */
    const char *file;  /* weight_map value */
    size_t shard;      /* index into the distinct shard files */
    int found;
    ckpt_st_entry info;
    const ckpt_storage *storage;
} st_slot;

typedef struct st_index {
    const char *path;   /* of the index, for messages */
    const char *dir;    /* shards are relative to it */
    cJSON *json;
    size_t n;
    st_slot *slots;     /* weight_map order */
    const char **names; /* slots[i].name */
    ckpt_st_names by_name;
    size_t n_shards;
    const char **shards; /* distinct files, in order of first mention */
} st_index;

static void index_dispose(st_index *ix)
{
    cJSON_Delete(ix->json);
    free(ix->slots);
    free(ix->names);
    free(ix->shards);
    ckpt_safetensors__names_free(&ix->by_name);
}

/* Shard names must stay inside the model's directory and be spelled one way. */
static int check_shard_name(const st_index *ix, const char *tensor, const char *file)
{
    const char *p = file;

    if (!*file || *file == '/')
        return ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: weight_map file '%s' is not a relative path (tensor '%s')",
                              ix->path, file, tensor);
    while (*p) {
        size_t k = strcspn(p, "/");
        if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
            return ckpt_error_set(CKPT_EFORMAT,
                                  "%s: safetensors: weight_map file '%s' has an empty, '.' or '..' component (tensor '%s')",
                                  ix->path, file, tensor);
        p += k;
        if (*p == '/')
            p++;
    }
    return 0;
}

static int index_read(st_index *ix, const ckpt_file *f)
{
    ckpt_st_syntax syn;
    const cJSON *map, *c;
    size_t i = 0, s;
    int64_t dup;
    int rc;

    if (f->size > ST_MAX_INDEX)
        return ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: index larger than %u bytes", ix->path, ST_MAX_INDEX);
    if (!ckpt_safetensors__utf8_valid(f->data, (size_t)f->size))
        return ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: index is not valid UTF-8", ix->path);
    if ((rc = ckpt_safetensors__json_check(ix->path, "index", f->data, (size_t)f->size, &syn)) < 0)
        return rc;
    ix->json = cJSON_ParseWithLength((const char *)f->data, (size_t)f->size);
    if (!ix->json)
        return ckpt_error_oom();
    map = cJSON_GetObjectItemCaseSensitive(ix->json, "weight_map");
    if (!cJSON_IsObject(map))
        return ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: index has no weight_map object", ix->path);
    for (c = map->child; c; c = c->next)
        ix->n++;
    if (ix->n) {
        ix->slots = calloc(ix->n, sizeof *ix->slots);
        ix->names = calloc(ix->n, sizeof *ix->names);
        ix->shards = calloc(ix->n, sizeof *ix->shards);
        if (!ix->slots || !ix->names || !ix->shards)
            return ckpt_error_oom();
    }
    for (c = map->child; c; c = c->next, i++) {
        st_slot *sl = &ix->slots[i];
        if (!cJSON_IsString(c))
            return ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: weight_map value is not a file name (tensor '%s')",
                                  ix->path, c->string);
        if ((rc = check_shard_name(ix, c->string, c->valuestring)) < 0)
            return rc;
        sl->name = ix->names[i] = c->string;
        sl->file = c->valuestring;
        /* Shards are usually listed in runs; look at the latest one first. */
        s = ix->n_shards;
        if (s && strcmp(ix->shards[s - 1], sl->file) == 0)
            s--;
        else
            for (s = 0; s < ix->n_shards && strcmp(ix->shards[s], sl->file) != 0; s++)
                ;
        if (s == ix->n_shards)
            ix->shards[ix->n_shards++] = sl->file;
        sl->shard = s;
    }
    if ((rc = ckpt_safetensors__names_build(&ix->by_name, ix->names, ix->n, &dup)) < 0)
        return rc;
    if (dup >= 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: weight_map lists tensor '%s' twice", ix->path,
                              ix->names[dup]);
    return 0;
}

/* Open one shard, validate it fully and match its tensors against the weight_map. */
static int read_shard(ckpt_reader *r, st_index *ix, size_t shard)
{
    const ckpt_file *f;
    ckpt_st_header h;
    char *path = join_path(ix->dir, ix->shards[shard]);
    size_t i;
    int rc;

    if (!path)
        return CKPT_ENOMEM;
    rc = ckpt_reader_open_file(r, path, &f);
    free(path);
    if (rc < 0)
        return rc;
    rc = ckpt_safetensors__parse(&h, f->path, f->data, f->size);
    if (rc < 0)
        return rc;
    for (i = 0; rc == 0 && i < h.n_entries; i++) {
        const ckpt_st_entry *e = &h.entries[i];
        int64_t k = ckpt_safetensors__names_find(&ix->by_name, e->name);
        st_slot *sl = k >= 0 ? &ix->slots[k] : NULL;
        if (!sl) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: shard %s holds a tensor the weight_map does not list (tensor '%s')",
                                ix->path, ix->shards[shard], e->name);
        } else if (sl->shard != shard) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: shard %s holds a tensor the weight_map puts in %s (tensor '%s')",
                                ix->path, ix->shards[shard], sl->file, e->name);
        } else {
            sl->found = 1;
            sl->info = *e;
            sl->info.name = sl->name;
            sl->storage = new_storage(r, f, h.data_offset, &sl->info);
            if (!sl->storage)
                rc = CKPT_ENOMEM;
        }
    }
    ckpt_safetensors__header_dispose(&h);
    return rc;
}

static ckpt_value *json_to_value(ckpt_arena *a, const cJSON *j)
{
    const double two63 = 9223372036854775808.0;
    ckpt_value *v;
    char *text;

    if (cJSON_IsString(j))
        return ckpt_value_new_str(a, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d >= -two63 && d < two63 && (double)(int64_t)d == d)
            return ckpt_value_new_int(a, (int64_t)d);
        return ckpt_value_new_float(a, d);
    }
    if (cJSON_IsBool(j))
        return ckpt_value_new_bool(a, cJSON_IsTrue(j));
    if (cJSON_IsNull(j))
        return ckpt_value_new(a, CKPT_VAL_NONE);
    /* Nested objects are kept as their JSON text: the index's metadata is informative. */
    text = cJSON_PrintUnformatted(j);
    if (!text) {
        ckpt_error_oom();
        return NULL;
    }
    v = ckpt_value_new_str(a, text, strlen(text));
    cJSON_free(text);
    return v;
}

/* The index's "metadata" as __metadata__, and a note when total_size disagrees. */
static int index_metadata(ckpt_reader *r, const st_index *ix, ckpt_value *root)
{
    ckpt_arena *a = ckpt_reader_arena(r);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(ix->json, "metadata"), *c, *total;
    ckpt_value *dict;
    uint64_t sum = 0;
    size_t i;
    int rc = 0;

    if (!cJSON_IsObject(meta))
        return 0;
    dict = ckpt_value_new(a, CKPT_VAL_DICT);
    for (c = meta->child; rc == 0 && dict && c; c = c->next)
        rc = set_str(a, dict, c->string, json_to_value(a, c));
    if (rc == 0)
        rc = set_str(a, root, "__metadata__", dict);
    total = cJSON_GetObjectItemCaseSensitive(meta, "total_size");
    for (i = 0; i < ix->n; i++)
        sum += ix->slots[i].info.end - ix->slots[i].info.begin;
    if (rc == 0 && total && !cJSON_IsNumber(total))
        ckpt_reader_note(r, "%s: index metadata total_size is not a number", ix->path);
    else if (rc == 0 && total && total->valuedouble != (double)sum)
        ckpt_reader_note(r, "%s: index metadata total_size %.0f differs from the %llu bytes of the tensors", ix->path,
                         total->valuedouble, (unsigned long long)sum);
    return rc;
}

static int st_open_index(ckpt_reader *r, const ckpt_file *f, const char *dir)
{
    ckpt_value *root;
    st_index ix;
    size_t i;
    int rc;

    memset(&ix, 0, sizeof ix);
    ix.path = f->path;
    ix.dir = dir;
    rc = index_read(&ix, f);
    for (i = 0; rc == 0 && i < ix.n_shards; i++)
        rc = read_shard(r, &ix, i);
    for (i = 0; rc == 0 && i < ix.n; i++)
        if (!ix.slots[i].found)
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: safetensors: shard %s lacks a tensor the weight_map puts there (tensor '%s')",
                                ix.path, ix.slots[i].file, ix.slots[i].name);
    root = rc == 0 ? ckpt_value_new(ckpt_reader_arena(r), CKPT_VAL_DICT) : NULL;
    if (rc == 0 && !root)
        rc = CKPT_ENOMEM;
    if (rc == 0)
        rc = index_metadata(r, &ix, root);
    for (i = 0; rc == 0 && i < ix.n; i++)
        rc = add_tensor(r, root, ix.slots[i].name, &ix.slots[i].info, ix.slots[i].storage);
    if (rc == 0)
        ckpt_reader_set_root(r, root);
    index_dispose(&ix);
    return rc;
}

/* A model directory's config.json says which model its weights are. */
static int note_config(ckpt_reader *r, const char *dir)
{
    ckpt_buf line = CKPT_BUF_INIT;
    struct stat st;
    char *config = join_path(dir, "config.json");
    int rc = config ? 0 : CKPT_ENOMEM;

    if (rc == 0 && stat(config, &st) == 0 && (rc = ckpt_hf_config_describe(config, &line)) == 0)
        ckpt_reader_note(r, "config.json: %s", (const char *)line.data);
    ckpt_buf_dispose(&line);
    free(config);
    return rc;
}

static int st_open(ckpt_reader *r)
{
    const ckpt_file *f = ckpt_reader_file(r);
    const char *path = ckpt_reader_path(r);
    char *index_path, *dir, *slash;
    struct stat st;
    int rc;

    if (f && !has_suffix(path, ST_INDEX_SUFFIX))
        return st_open_file(r, f);
    if (f) {
        dir = malloc(strlen(path) + 2);
        if (!dir)
            return ckpt_error_oom();
        strcpy(dir, path);
        slash = strrchr(dir, '/');
        if (slash)
            *(slash == dir ? slash + 1 : slash) = '\0';
        else
            strcpy(dir, ".");
        rc = st_open_index(r, f, dir);
        free(dir);
        return rc;
    }
    index_path = join_path(path, ST_INDEX_NAME);
    if (!index_path)
        return CKPT_ENOMEM;
    if (stat(index_path, &st) != 0 && errno == ENOENT) {
        free(index_path);
        index_path = join_path(path, ST_SINGLE_NAME);
        if (!index_path)
            return CKPT_ENOMEM;
        rc = ckpt_reader_open_file(r, index_path, &f);
        free(index_path);
        rc = rc == 0 ? st_open_file(r, f) : rc;
    } else {
        rc = ckpt_reader_open_file(r, index_path, &f);
        free(index_path);
        if (rc == 0)
            rc = st_open_index(r, f, path);
    }
    return rc == 0 ? note_config(r, path) : rc;
}

extern const ckpt_format_vtable ckpt_format_safetensors;
const ckpt_format_vtable ckpt_format_safetensors = {
    CKPT_FORMAT_ABI_VERSION,
    "safetensors",
    "safetensors (Hugging Face), single file or sharded with model.safetensors.index.json",
    ".safetensors",
    CKPT_FORMAT_READ | CKPT_FORMAT_WRITE,
    st_bid,
    st_open,
    NULL,
    ckpt_safetensors__write_begin,
    NULL,
    NULL,
    st_bound,
};
