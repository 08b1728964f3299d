/* PaddleNLP checkpoint directories (ckpt/paddle.h): one directory of model_state*.pdparams
 * files, tensor- and pipeline-parallel ranks in their names (model_state.tp01_pp02.pdparams,
 * as PaddleNLP's _add_variant writes them), size shards grouped by the index json that
 * lists them, and whatever else the trainer saved beside them. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>
#include <ckpt/sys/layout.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RANK_MAX 1000000

enum { ROLE_NONE, ROLE_MODEL, ROLE_INDEX, ROLE_OPTIMIZER, ROLE_OTHER };

static const char *const role_names[] = { NULL, "model", "index", "optimizer", "other" };

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int is_model(const char *name)
{
    return starts_with(name, "model_state") && ends_with(name, ".pdparams");
}

/* model_state.pdparams.index.json, model_state.pdparams.index.tp01.json */
static int is_index(const char *name)
{
    return starts_with(name, "model_state") && strstr(name, ".pdparams.index") && ends_with(name, ".json");
}

char *ckpt_paddle__join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* A PaddleNLP unified checkpoint (safetensors, TP merged, Paddle's names): model.safetensors
 * or model-0000i-of-0000n.safetensors with model.safetensors.index.json. */
static int is_unified_model(const char *name)
{
    return starts_with(name, "model") && !starts_with(name, "model_state") && ends_with(name, ".safetensors");
}

static int is_unified_index(const char *name)
{
    return strcmp(name, "model.safetensors.index.json") == 0;
}

/* Whether a safetensors file's header names a tensor llama.*. */
static int header_names_llama(const char *path)
{
    ckpt_file *f = NULL;
    uint64_t len = 0;
    int found = 0, i;

    if (path && ckpt_file_open(&f, path) == 0 && f->size >= 8) {
        for (i = 7; i >= 0; i--)
            len = len << 8 | f->data[i];
        found = len <= f->size - 8 && memmem(f->data + 8, (size_t)len, "\"llama.", 7) != NULL;
    }
    ckpt_file_close(f);
    return found;
}

/* Whether the safetensors weights of dir hold PaddleNLP's names (llama.*), not transformers'
 * (model.*): the index's weight_map, or, when it says nothing (a damaged index included), the
 * weights files' headers. */
static int unified_names(const char *dir, char **names, size_t n)
{
    char *index = ckpt_paddle__join(dir, "model.safetensors.index.json");
    ckpt_file *f = NULL;
    size_t i;
    int found = 0;

    if (index && ckpt_file_open(&f, index) == 0)
        found = f->size && memmem(f->data, (size_t)f->size, "\"llama.", 7) != NULL;
    ckpt_file_close(f);
    for (i = 0; i < n && !found; i++) {
        char *path = is_unified_model(names[i]) ? ckpt_paddle__join(dir, names[i]) : NULL;
        found = header_names_llama(path);
        free(path);
    }
    ckpt_error_clear();
    free(index);
    return found;
}

/* Symbolic links followed. */
static int is_regular(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void ckpt_paddle__names_free(char **names, size_t n)
{
    while (n)
        free(names[--n]);
    free(names);
}

int ckpt_paddle__list(const char *dir, char ***out, size_t *n_out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    size_t n = 0, cap = 0;

    *out = NULL;
    *n_out = 0;
    if (!d)
        return ckpt_error_set(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, "%s: %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n == cap) {
            char **grown = realloc(v, (cap = cap ? 2 * cap : 32) * sizeof *v);
            if (!grown)
                break;
            v = grown;
        }
        if (!(v[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (e) {
        ckpt_paddle__names_free(v, n);
        return ckpt_error_oom();
    }
    if (n)
        qsort(v, n, sizeof *v, compare_names);
    *out = v;
    *n_out = n;
    return 0;
}

int ckpt_paddle__index_read(const char *path, cJSON **json, const cJSON ***firsts, size_t *n)
{
    ckpt_file *f = NULL;
    const cJSON *map, *e;
    size_t cap = 0, k;
    int rc;

    *json = NULL;
    *firsts = NULL;
    *n = 0;
    if ((rc = ckpt_file_open(&f, path)) < 0)
        return rc;
    *json = f->size ? cJSON_ParseWithLength((const char *)f->data, (size_t)f->size) : NULL;
    ckpt_file_close(f);
    map = cJSON_GetObjectItemCaseSensitive(*json, "weight_map");
    if (!cJSON_IsObject(map)) {
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: %s", path, *json ? "no \"weight_map\" object" : "not valid JSON");
        goto fail;
    }
    cJSON_ArrayForEach(e, map) {
        if (!cJSON_IsString(e)) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: weight_map[\"%s\"] is not a file name", path, e->string);
            goto fail;
        }
        for (k = 0; k < *n && strcmp((*firsts)[k]->valuestring, e->valuestring) != 0; k++)
            ;
        if (k < *n)
            continue;
        if (*n == cap) {
            const cJSON **grown = realloc((void *)*firsts, (cap = cap ? 2 * cap : 8) * sizeof *grown);
            if (!grown) {
                rc = ckpt_error_oom();
                goto fail;
            }
            *firsts = grown;
        }
        (*firsts)[(*n)++] = e;
    }
    return 0;
fail:
    cJSON_Delete(*json);
    free((void *)*firsts);
    *json = NULL;
    *firsts = NULL;
    *n = 0;
    return rc;
}

/* One "<axis><digits>" token of a variant: the rank, or -1 when the token is not that axis. */
static int variant_token(const char *tok, size_t len, const char *axis)
{
    size_t k = strlen(axis), i;
    long v = 0;

    if (len <= k || strncmp(tok, axis, k) != 0)
        return -1;
    for (i = k; i < len; i++) {
        if (!isdigit((unsigned char)tok[i]) || (v = v * 10 + (tok[i] - '0')) > RANK_MAX)
            return -1;
    }
    return (int)v;
}

/* A variant, "tp00_pp01", "pp01", "tp01_pp00_shard03", "shard02", "moe01" in [s, end): tp, pp,
 * the sharding rank as dp, the expert-parallel rank as ep; 0 when any token is not one of
 * these. */
static int variant_of(const char *s, const char *end, ckpt_coords *at)
{
    ckpt_coords found = CKPT_COORDS_NONE;

    if (s == end)
        return 0;
    while (s < end) {
        size_t len = strcspn(s, "_");
        int v;
        if (s + len > end)
            len = (size_t)(end - s);
        if ((v = variant_token(s, len, "tp")) >= 0 && found.tp < 0)
            found.tp = v;
        else if ((v = variant_token(s, len, "pp")) >= 0 && found.pp < 0)
            found.pp = v;
        else if ((v = variant_token(s, len, "shard")) >= 0 && found.dp < 0)
            found.dp = v;
        else if ((v = variant_token(s, len, "moe")) >= 0 && found.ep < 0)
            found.ep = v;
        else
            return 0;
        s += len + (s + len < end);
    }
    at->tp = found.tp;
    at->pp = found.pp;
    at->dp = found.dp;
    at->ep = found.ep;
    return 1;
}

/* The ranks in PaddleNLP's file-name variant: the first dotted part of the name that is one
 * (_add_variant puts it before the extension: model_state.tp00_pp01.pdparams,
 * model_state.pdparams.index.tp01.json; a size shard's "-0000N-of-0000M" ends it); -1 for
 * what the name lacks. */
static void parse_variant(const char *name, ckpt_coords *at)
{
    const char *s = strchr(name, '.');

    at->tp = at->pp = at->dp = at->ep = -1;
    while (s) {
        const char *end;
        s++;
        end = s + strcspn(s, ".-");
        if (variant_of(s, end, at))
            return;
        s = strchr(s, '.');
    }
}

/* N-1 of "-0000N-of-0000M" in a shard's name; `place` (its place in the index) when the
 * name does not number it. */
static int shard_number(const char *name, size_t place)
{
    const char *of = strstr(name, "-of-"), *s = of;
    long v;

    if (!of || !isdigit((unsigned char)of[4]))
        return (int)place;
    while (s > name && isdigit((unsigned char)s[-1]))
        s--;
    if (s == of || s == name || s[-1] != '-' || (v = strtol(s, NULL, 10)) < 1 || v > RANK_MAX)
        return (int)place;
    return (int)v - 1;
}

typedef struct paddle_entry {
    int role;   /* ROLE_NONE: not a regular file, not a member */
    long owner; /* ROLE_MODEL: the index entry that lists it, or -1 */
    int shard;
} paddle_entry;

static long find_name(char **names, size_t n, const char *name)
{
    char **hit = bsearch(&name, names, n, sizeof *names, compare_names);
    return hit ? (long)(hit - names) : -1;
}

/* The files index entry `ix` lists become its shards, in order of first mention. */
static int claim_shards(const char *root, char **names, paddle_entry *e, size_t n, size_t ix)
{
    char *path = ckpt_paddle__join(root, names[ix]);
    const cJSON **firsts = NULL;
    cJSON *json = NULL;
    size_t k, n_files = 0;
    int rc;

    if (!path)
        return ckpt_error_oom();
    rc = ckpt_paddle__index_read(path, &json, &firsts, &n_files);
    for (k = 0; k < n_files && rc == 0; k++) {
        const char *file = firsts[k]->valuestring;
        long m = find_name(names, n, file);
        if (m < 0)
            rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                 "%s/%s: missing, but its index %s puts %s in it", root, file, path,
                                 firsts[k]->string);
        else if (e[m].role != ROLE_MODEL)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                 "%s: weight_map puts %s in %s, which is not a model file of %s", path,
                                 firsts[k]->string, file, root);
        else if (e[m].owner >= 0)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: %s is listed by %s too", path, file,
                                 names[e[m].owner]);
        if (rc == 0) {
            e[m].owner = (long)ix;
            e[m].shard = shard_number(file, k);
        }
    }
    free((void *)firsts);
    cJSON_Delete(json);
    free(path);
    return rc;
}

static int classify(const char *root, char **names, paddle_entry *e, size_t n, size_t *n_models)
{
    size_t i;
    int unified = 0;

    *n_models = 0;
    for (i = 0; i < n && !unified; i++)
        unified = is_unified_model(names[i]);
    for (i = 0; i < n && unified; i++)
        if (is_model(names[i]))
            unified = 0;
    if (unified)
        unified = unified_names(root, names, n);
    for (i = 0; i < n; i++) {
        char *path = ckpt_paddle__join(root, names[i]);
        if (!path)
            return ckpt_error_oom();
        e[i].owner = -1;
        e[i].shard = -1;
        if (!is_regular(path))
            e[i].role = ROLE_NONE;
        else if (ends_with(names[i], ".pdopt"))
            e[i].role = ROLE_OPTIMIZER;
        else if (is_model(names[i]) || (unified && is_unified_model(names[i])))
            e[i].role = ROLE_MODEL;
        else
            e[i].role = is_index(names[i]) || (unified && is_unified_index(names[i])) ? ROLE_INDEX : ROLE_OTHER;
        *n_models += e[i].role == ROLE_MODEL;
        free(path);
    }
    return 0;
}

static int paddle_bid(const char *path, int is_dir)
{
    paddle_entry *e = NULL;
    char **names = NULL;
    size_t n = 0, n_models = 0;

    if (!is_dir || ckpt_paddle__list(path, &names, &n) < 0) {
        ckpt_error_clear();
        return -1;
    }
    if (n && (e = calloc(n, sizeof *e)) && classify(path, names, e, n, &n_models) < 0)
        n_models = 0;
    free(e);
    ckpt_paddle__names_free(names, n);
    ckpt_error_clear();
    return n_models ? 64 : -1;
}

int ckpt_paddle_is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && paddle_bid(path, 1) >= 0;
}

static int paddle_list(ckpt_set_builder *b, const char *root)
{
    ckpt_set_info info;
    paddle_entry *e = NULL;
    char **names = NULL;
    size_t n = 0, n_models = 0, i;
    int rc;

    if ((rc = ckpt_paddle__list(root, &names, &n)) < 0)
        return rc;
    if (!(e = calloc(n ? n : 1, sizeof *e))) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = classify(root, names, e, n, &n_models)) < 0)
        goto done;
    /* indexes are read once every model file is known */
    for (i = 0; i < n && rc == 0; i++)
        if (e[i].role == ROLE_INDEX)
            rc = claim_shards(root, names, e, n, i);
    if (rc == 0 && n_models == 0)
        rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                             "%s: no model_state*.pdparams files (PaddleNLP writes model_state.pdparams, "
                             "model_state.tpXX_ppYY.pdparams or size-sharded model_state-0000i-of-0000n.pdparams)",
                             root);
    if (rc < 0)
        goto done;
    memset(&info, 0, sizeof info);
    info.root = root;
    info.dir = "";
    info.iteration = -1;
    rc = ckpt_set_builder_info(b, &info);
    for (i = 0; i < n && rc == 0; i++) {
        ckpt_coords at = CKPT_COORDS_NONE;
        if (e[i].role == ROLE_NONE)
            continue;
        if (e[i].role != ROLE_OTHER)
            parse_variant(names[i], &at);
        at.shard = e[i].shard;
        rc = ckpt_set_builder_add(b, names[i], &at, role_names[e[i].role]);
    }

done:
    free(e);
    ckpt_paddle__names_free(names, n);
    return rc;
}

const ckpt_layout_vtable ckpt_layout_paddle = {
    .abi_version = CKPT_LAYOUT_ABI_VERSION,
    .name = "paddle",
    .description = "PaddleNLP checkpoint directory (model_state[.tpXX[_ppYY]].pdparams, size shards with "
                   "model_state.pdparams.index*.json)",
    .bid = paddle_bid,
    .list = paddle_list,
};
