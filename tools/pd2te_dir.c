/* The input directory of pd2te / te2pd: which files are model weights (converted), which
 * index json groups them, what is copied through and what is skipped. Also the index json
 * writer, which formats like Python's json.dump(indent=4), as the original converter. */
#include "pd2te.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int is_model_file(const char *name)
{
    return starts_with(name, "model_state") && ends_with(name, ".pdparams");
}

/* model_state.pdparams.index.json, model_state.pdparams.index.tp01.json */
static int is_index_file(const char *name)
{
    return starts_with(name, "model_state") && strstr(name, ".pdparams.index") && ends_with(name, ".json");
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the directory's entries, so every run sees the same order. */
static int list_names(const char *path, char ***out, size_t *n_out)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    char **v = NULL;
    size_t n = 0, cap = 0;

    *out = NULL;
    *n_out = 0;
    if (!dir)
        return ckpt_error_set(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, "%s: %s", path, strerror(errno));
    while ((e = readdir(dir))) {
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
    closedir(dir);
    if (e) {
        while (n)
            free(v[--n]);
        free(v);
        return ckpt_error_oom();
    }
    qsort(v, n, sizeof *v, compare_names);
    *out = v;
    *n_out = n;
    return 0;
}

static ssize_t find_model(const pd_dir *d, const char *name)
{
    size_t i;
    for (i = 0; i < d->n_models; i++)
        if (strcmp(d->models[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

/* A new empty space, or NULL when out of memory. */
static pd_space *add_space(pd_dir *d)
{
    pd_space *grown = realloc(d->spaces, (d->n_spaces + 1) * sizeof *grown);

    if (!grown)
        return NULL;
    d->spaces = grown;
    return memset(&d->spaces[d->n_spaces++], 0, sizeof *grown);
}

/* One index json: its files become one space, in order of first mention. */
static int load_index(pd_dir *d, const char *name)
{
    char *path = cli_path_join(d->path, name);
    ckpt_file *f = NULL;
    const cJSON *map, *e;
    pd_space *s;
    int rc;

    if (!path)
        return ckpt_error_oom();
    if ((rc = ckpt_file_open(&f, path)) < 0)
        goto done;
    if (!(s = add_space(d)) || !(s->index_name = strdup(name)) ||
        !(s->files = calloc(d->n_models ? d->n_models : 1, sizeof *s->files))) {
        rc = ckpt_error_oom();
        goto done;
    }
    s->index = cJSON_ParseWithLength((const char *)f->data, (size_t)f->size);
    map = cJSON_GetObjectItemCaseSensitive(s->index, "weight_map");
    if (!cJSON_IsObject(map)) {
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: %s", path, s->index ? "no \"weight_map\" object" : "not valid JSON");
        goto done;
    }
    cJSON_ArrayForEach(e, map) {
        ssize_t m;
        size_t i;
        if (!cJSON_IsString(e)) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: weight_map[\"%s\"] is not a file name", path, e->string);
            goto done;
        }
        if ((m = find_model(d, e->valuestring)) < 0) {
            rc = ckpt_error_set(CKPT_ENOTFOUND, "%s: weight_map puts %s in %s, which is not a model_state*.pdparams "
                                "file of %s", path, e->string, e->valuestring, d->path);
            goto done;
        }
        for (i = 0; i < s->n_files && s->files[i] != (size_t)m; i++)
            ;
        if (i < s->n_files)
            continue;
        if (d->models[m].space != SIZE_MAX) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: %s is listed by %s too", path, e->valuestring,
                                d->spaces[d->models[m].space].index_name);
            goto done;
        }
        d->models[m].space = (size_t)(s - d->spaces);
        s->files[s->n_files++] = (size_t)m;
    }

done:
    ckpt_file_close(f);
    free(path);
    return rc;
}

static const char *skip_reason(const char *path, const char *name)
{
    struct stat st;

    if (stat(path, &st) < 0)
        return "cannot be read";
    if (S_ISDIR(st.st_mode))
        return "a directory: not descended into (convert it on its own)";
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if (ends_with(name, ".pdopt"))
        return "optimizer state: not converted (its moments belong to the source layout's parameters), "
               "so training resumed from the output starts with a fresh optimizer";
    return NULL;
}

int pd_dir_open(pd_dir *d, const char *path)
{
    char **names = NULL;
    size_t n = 0, i;
    int rc;

    memset(d, 0, sizeof *d);
    if (!(d->path = strdup(path)))
        return ckpt_error_oom();
    if ((rc = list_names(path, &names, &n)) < 0)
        return rc;
    if (!(d->models = calloc(n ? n : 1, sizeof *d->models)) || !(d->others = calloc(n ? n : 1, sizeof *d->others))) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < n; i++) {
        char *full = cli_path_join(path, names[i]);
        const char *why;
        if (!full) {
            rc = ckpt_error_oom();
            goto done;
        }
        why = skip_reason(full, names[i]);
        free(full);
        if (!why && is_model_file(names[i])) {
            d->models[d->n_models].name = names[i];
            d->models[d->n_models++].space = SIZE_MAX;
        } else if (why || !is_index_file(names[i])) {
            d->others[d->n_others].name = names[i];
            d->others[d->n_others++].why = why;
        } else {
            continue; /* an index, loaded once every model file is known */
        }
        names[i] = NULL;
    }
    for (i = 0; i < n && rc == 0; i++)
        if (names[i])
            rc = load_index(d, names[i]);
    for (i = 0; i < d->n_models && rc == 0; i++) {
        pd_space *s;
        char *full;
        if (d->models[i].space == SIZE_MAX) {
            if (!(s = add_space(d)) || !(s->files = malloc(sizeof *s->files))) {
                rc = ckpt_error_oom();
                break;
            }
            s->files[s->n_files++] = i;
            d->models[i].space = d->n_spaces - 1;
        }
        if (!(full = cli_path_join(path, d->models[i].name))) {
            rc = ckpt_error_oom();
            break;
        }
        rc = ckpt_open(&d->models[i].ck, full, NULL);
        free(full);
    }

done:
    for (i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

void pd_dir_close(pd_dir *d)
{
    size_t i;

    for (i = 0; i < d->n_models; i++) {
        ckpt_close(d->models[i].ck);
        free(d->models[i].name);
    }
    for (i = 0; i < d->n_spaces; i++) {
        free(d->spaces[i].index_name);
        cJSON_Delete(d->spaces[i].index);
        free(d->spaces[i].files);
    }
    for (i = 0; i < d->n_others; i++)
        free(d->others[i].name);
    free(d->models);
    free(d->spaces);
    free(d->others);
    free(d->path);
    memset(d, 0, sizeof *d);
}

/* ---- the index json, as Python's json.dump(obj, indent=4) writes it ---- */

static int put_indent(ckpt_buf *b, int level)
{
    int rc = ckpt_buf_putc(b, '\n');
    for (; rc == 0 && level > 0; level--)
        rc = ckpt_buf_puts(b, "    ");
    return rc;
}

static int put_value(ckpt_buf *b, const cJSON *v, int level)
{
    const cJSON *e;
    int rc = 0;

    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        int obj = cJSON_IsObject(v);
        if (!v->child)
            return ckpt_buf_puts(b, obj ? "{}" : "[]");
        rc = ckpt_buf_putc(b, obj ? '{' : '[');
        for (e = v->child; e && rc == 0; e = e->next) {
            if ((rc = put_indent(b, level + 1)) < 0 || (obj && ((rc = cli_json_py_string(b, e->string)) < 0 ||
                                                                  (rc = ckpt_buf_puts(b, ": ")) < 0)) ||
                (rc = put_value(b, e, level + 1)) < 0)
                break;
            if (e->next)
                rc = ckpt_buf_putc(b, ',');
        }
        if (rc == 0 && (rc = put_indent(b, level)) == 0)
            rc = ckpt_buf_putc(b, obj ? '}' : ']');
        return rc;
    }
    if (cJSON_IsString(v))
        return cli_json_py_string(b, v->valuestring);
    if (cJSON_IsBool(v))
        return ckpt_buf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
    if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        if (x == floor(x) && fabs(x) < 9007199254740992.0)
            return ckpt_buf_printf(b, "%lld", (long long)x);
        return ckpt_buf_printf(b, "%.17g", x);
    }
    return ckpt_buf_puts(b, "null");
}

int pd_index_write(const char *path, const cJSON *input_index, const char *const *names,
                   const char *const *files, size_t n, uint64_t total_size)
{
    cJSON *out = cJSON_CreateObject(), *map = cJSON_CreateObject();
    const cJSON *e;
    ckpt_outfile *f = NULL;
    ckpt_buf b = { 0 };
    size_t i;
    int rc = 0;

    if (!out || !map || !cJSON_AddItemToObject(out, "weight_map", map)) {
        cJSON_Delete(map);
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < n && rc == 0; i++)
        if (!cJSON_AddItemToObject(map, names[i], cJSON_CreateString(files[i])))
            rc = ckpt_error_oom();
    cJSON_ArrayForEach(e, input_index) {
        cJSON *copy;
        if (rc < 0 || strcmp(e->string, "weight_map") == 0)
            continue;
        if (!(copy = cJSON_Duplicate(e, 1)) || !cJSON_AddItemToObject(out, e->string, copy)) {
            cJSON_Delete(copy);
            rc = ckpt_error_oom();
        } else if (strcmp(e->string, "metadata") == 0 && cJSON_IsObject(copy) &&
                   cJSON_GetObjectItemCaseSensitive(copy, "total_size")) {
            cJSON_ReplaceItemInObjectCaseSensitive(copy, "total_size", cJSON_CreateNumber((double)total_size));
        }
    }
    if (rc < 0 || (rc = put_value(&b, out, 0)) < 0)
        goto done;
    if ((rc = ckpt_outfile_open(&f, path, 0)) < 0 || (rc = ckpt_outfile_pwrite(f, 0, b.data, b.len)) < 0)
        goto done;
    rc = ckpt_outfile_commit(f);
    f = NULL;

done:
    ckpt_outfile_abort(f);
    ckpt_buf_dispose(&b);
    cJSON_Delete(out);
    return rc;
}
