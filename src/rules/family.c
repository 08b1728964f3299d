/* Model families: the built-in ones (formats/families/<name>.json, embedded at build time)
 * and files of the same schema, each merged over the family it extends and checked once,
 * so that a family that is read is one every call below can interpret without surprises. */
#include "family_private.h"

#include <ckpt/sys/io.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A family file is a few kilobytes. */
#define MAX_FAMILY_BYTES (1u << 20)
/* extends chains are short; a longer one is a cycle */
#define MAX_EXTENDS 8
#define MAX_BUILTINS 64

enum merge_mode { MERGE_GENERIC, MERGE_TOP, MERGE_OUT, MERGE_TENSORS, MERGE_MEGATRON };

static int apply(cJSON *dst, const cJSON *src, enum merge_mode mode, const char *where);

/* A copy of src's value, merged as what it merges over would be. */
static int copy_into(cJSON *parent, const char *key, const cJSON *src, enum merge_mode mode, const char *where)
{
    cJSON *d;

    if (cJSON_IsObject(src)) {
        if (!(d = cJSON_CreateObject()))
            return ckpt_error_oom();
        if (key ? !cJSON_AddItemToObject(parent, key, d) : !cJSON_AddItemToArray(parent, d)) {
            cJSON_Delete(d);
            return ckpt_error_oom();
        }
        return apply(d, src, mode, where);
    }
    d = cJSON_Duplicate(src, 1);
    if (!d || (key ? !cJSON_AddItemToObject(parent, key, d) : !cJSON_AddItemToArray(parent, d))) {
        cJSON_Delete(d);
        return ckpt_error_oom();
    }
    return 0;
}

static const char *row_name(const cJSON *row)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(row, "f");
    return cJSON_IsString(f) ? f->valuestring : NULL;
}

static cJSON *find_row(const cJSON *rows, const char *name)
{
    cJSON *r;
    cJSON_ArrayForEach(r, rows)
        if (row_name(r) && strcmp(row_name(r), name) == 0)
            return r;
    return NULL;
}

/* config rows by "f": merged in place, dropped, or added (after "after", else at the end). */
static int merge_rows(cJSON *dst, const cJSON *src, const char *where)
{
    const cJSON *s;
    int rc;

    cJSON_ArrayForEach(s, src) {
        const char *name = row_name(s), *after;
        const cJSON *drop = cJSON_GetObjectItemCaseSensitive(s, "drop"),
                    *aft = cJSON_GetObjectItemCaseSensitive(s, "after");
        cJSON *d, *row, *at, *tail;
        cJSON_bool ok;

        if (!cJSON_IsObject(s) || !name)
            return ckpt_error_set(CKPT_EFORMAT, "%s: config: every row is an object with a string \"f\"", where);
        d = find_row(dst, name);
        if (cJSON_IsTrue(drop)) {
            if (d)
                cJSON_Delete(cJSON_DetachItemViaPointer(dst, d));
            continue;
        }
        if (d) {
            if ((rc = apply(d, s, MERGE_GENERIC, where)) < 0)
                return rc;
            continue;
        }
        if (!(row = cJSON_CreateObject()))
            return ckpt_error_oom();
        if ((rc = apply(row, s, MERGE_GENERIC, where)) < 0) {
            cJSON_Delete(row);
            return rc;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(row, "after");
        after = cJSON_IsString(aft) ? aft->valuestring : NULL;
        at = after ? find_row(dst, after) : NULL;
        if (after && !at) {
            cJSON_Delete(row);
            return ckpt_error_set(CKPT_EFORMAT, "%s: config row %s: \"after\" names no row (%s)", where, name, after);
        }
        /* rows after `at` move behind the new one (cJSON inserts by index only) */
        tail = cJSON_CreateArray();
        while (tail && at && at->next)
            cJSON_AddItemToArray(tail, cJSON_DetachItemViaPointer(dst, at->next));
        ok = tail && cJSON_AddItemToArray(dst, row);
        while (tail && tail->child)
            cJSON_AddItemToArray(dst, cJSON_DetachItemViaPointer(tail, tail->child));
        cJSON_Delete(tail);
        if (!ok) {
            cJSON_Delete(row);
            return ckpt_error_oom();
        }
    }
    return 0;
}

static const char *item_name(const cJSON *item)
{
    const cJSON *first = cJSON_GetArrayItem(item, 0);
    return cJSON_IsString(first) ? first->valuestring : NULL;
}

/* tensor lists by name (the first item): replaced in place or appended */
static int merge_named(cJSON *dst, const cJSON *src, const char *where)
{
    const cJSON *s;

    cJSON_ArrayForEach(s, src) {
        cJSON *d, *copy;
        const char *name = item_name(s);
        if (!cJSON_IsArray(s) || !name)
            return ckpt_error_set(CKPT_EFORMAT, "%s: hf_tensors: every tensor is a list starting with its name", where);
        if (!(copy = cJSON_Duplicate(s, 1)))
            return ckpt_error_oom();
        cJSON_ArrayForEach(d, dst)
            if (item_name(d) && strcmp(item_name(d), name) == 0)
                break;
        if (d ? !cJSON_ReplaceItemViaPointer(dst, d, copy) : !cJSON_AddItemToArray(dst, copy)) {
            cJSON_Delete(copy);
            return ckpt_error_oom();
        }
    }
    return 0;
}

static void drop_tensors(cJSON *tensors, const cJSON *names)
{
    static const char *const lists[] = { "before", "per_layer", "after" };
    const cJSON *n;
    size_t i;

    cJSON_ArrayForEach(n, names)
        for (i = 0; i < 3 && cJSON_IsString(n); i++) {
            cJSON *list = cJSON_GetObjectItemCaseSensitive(tensors, lists[i]), *d;
            cJSON_ArrayForEach(d, list)
                if (item_name(d) && strcmp(item_name(d), n->valuestring) == 0) {
                    cJSON_Delete(cJSON_DetachItemViaPointer(list, d));
                    break;
                }
        }
}

static int args_delta(cJSON *megatron, const cJSON *delta, const char *where)
{
    cJSON *out = cJSON_GetObjectItemCaseSensitive(megatron, "args_out"), *d;
    const cJSON *s;

    if (!cJSON_IsObject(delta) || !cJSON_IsArray(out))
        return ckpt_error_set(CKPT_EFORMAT, "%s: megatron.args_delta is an object over an inherited args_out", where);
    cJSON_ArrayForEach(s, delta) {
        cJSON *pair = cJSON_CreateArray();
        if (!pair || !cJSON_AddItemToArray(pair, cJSON_CreateString(s->string)) ||
            !cJSON_AddItemToArray(pair, cJSON_Duplicate(s, 1))) {
            cJSON_Delete(pair);
            return ckpt_error_oom();
        }
        cJSON_ArrayForEach(d, out)
            if (item_name(d) && strcmp(item_name(d), s->string) == 0)
                break;
        if (d ? !cJSON_ReplaceItemViaPointer(out, d, pair) : !cJSON_AddItemToArray(out, pair)) {
            cJSON_Delete(pair);
            return ckpt_error_oom();
        }
    }
    return 0;
}

static int apply(cJSON *dst, const cJSON *src, enum merge_mode mode, const char *where)
{
    const cJSON *c;
    int rc = 0;

    for (c = src->child; c && rc == 0; c = c->next) {
        const char *key = c->string;
        cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, key);
        enum merge_mode sub = MERGE_GENERIC;

        if (mode == MERGE_TOP && strcmp(key, "extends") == 0)
            continue;
        if (mode == MERGE_OUT) {
            if (d)
                cJSON_Delete(cJSON_DetachItemViaPointer(dst, d));
            if (!(cJSON_IsString(c) && strcmp(c->valuestring, "-") == 0))
                rc = copy_into(dst, key, c, MERGE_OUT, where);
            continue;
        }
        if (mode == MERGE_TENSORS && strcmp(key, "drop") == 0) {
            drop_tensors(dst, c);
            continue;
        }
        if (mode == MERGE_MEGATRON && strcmp(key, "args_delta") == 0) {
            rc = d ? ckpt_error_set(CKPT_EFORMAT, "%s: megatron: args_delta given twice", where) : args_delta(dst, c, where);
            continue;
        }
        /* null removes what it merges over; over nothing it is a value ("value": null),
         * except for a whole section, where it says the family has none */
        if (cJSON_IsNull(c)) {
            if (d)
                cJSON_Delete(cJSON_DetachItemViaPointer(dst, d));
            else if (mode != MERGE_TOP && !cJSON_AddNullToObject(dst, key))
                rc = ckpt_error_oom();
            continue;
        }
        if (mode == MERGE_TOP)
            sub = strcmp(key, "hf_config_out") == 0 ? MERGE_OUT
                  : strcmp(key, "hf_tensors") == 0 ? MERGE_TENSORS
                  : strcmp(key, "megatron") == 0   ? MERGE_MEGATRON
                                                   : MERGE_GENERIC;
        if (d && mode == MERGE_TOP && strcmp(key, "config") == 0 && cJSON_IsArray(d) && cJSON_IsArray(c))
            rc = merge_rows(d, c, where);
        else if (d && mode == MERGE_TENSORS && cJSON_IsArray(d) && cJSON_IsArray(c))
            rc = merge_named(d, c, where);
        else if (d && cJSON_IsObject(d) && cJSON_IsObject(c))
            rc = apply(d, c, sub, where);
        else {
            if (d)
                cJSON_Delete(cJSON_DetachItemViaPointer(dst, d));
            if (mode == MERGE_TOP && strcmp(key, "config") == 0 && cJSON_IsArray(c)) {
                cJSON *rows = cJSON_AddArrayToObject(dst, key);
                rc = rows ? merge_rows(rows, c, where) : ckpt_error_oom();
            } else {
                rc = copy_into(dst, key, c, sub, where);
            }
        }
    }
    return rc;
}

/* Every object of a family file has each key once (cJSON keeps repeats; the merge would
 * take one silently). */
static int no_repeats(const cJSON *j, const char *where)
{
    const cJSON *c, *d;
    int rc;

    for (c = j ? j->child : NULL; c; c = c->next) {
        if (cJSON_IsObject(j))
            for (d = j->child; d != c; d = d->next)
                if (strcmp(d->string, c->string) == 0)
                    return ckpt_error_set(CKPT_EFORMAT, "%s: key \"%s\" appears twice", where, c->string);
        if ((rc = no_repeats(c, where)) < 0)
            return rc;
    }
    return 0;
}

static int builtin_raw(const char *name, const char **json, size_t *len)
{
    size_t i;

    for (i = 0; i < ckpt_families__count(); i++)
        if (strcmp(ckpt_families__name(i), name) == 0) {
            *json = ckpt_families__json(i, len);
            return 0;
        }
    return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "no built-in family is named %s (known: %s)", name,
                           ckpt_family_known());
}

/* The merged JSON of a family text: what it extends first, then the text over it. */
static int merged(cJSON **out, const char *json, size_t len, const char *where, int depth)
{
    cJSON *raw = cJSON_ParseWithLength(json, len), *base = NULL;
    const cJSON *ext;
    int rc = 0;

    *out = NULL;
    if (!raw || !cJSON_IsObject(raw)) {
        cJSON_Delete(raw);
        return ckpt_error_set(CKPT_EFORMAT, "%s: not a JSON object", where);
    }
    if ((rc = no_repeats(raw, where)) < 0)
        goto done;
    ext = cJSON_GetObjectItemCaseSensitive(raw, "extends");
    if (ext) {
        const char *pjson = NULL;
        size_t plen = 0;
        if (!cJSON_IsString(ext)) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: \"extends\" must be a string", where);
            goto done;
        }
        if (depth >= MAX_EXTENDS) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: \"extends\" chain longer than %d (a cycle?)", where, MAX_EXTENDS);
            goto done;
        }
        if ((rc = builtin_raw(ext->valuestring, &pjson, &plen)) < 0 ||
            (rc = merged(&base, pjson, plen, ext->valuestring, depth + 1)) < 0)
            goto done;
    } else if (!(base = cJSON_CreateObject())) {
        rc = ckpt_error_oom();
        goto done;
    }
    rc = apply(base, raw, MERGE_TOP, where);
done:
    cJSON_Delete(raw);
    if (rc < 0)
        cJSON_Delete(base);
    else
        *out = base;
    return rc;
}

static int family_parse(ckpt_family **out, const char *json, size_t len, const char *where)
{
    ckpt_family *f = calloc(1, sizeof *f);
    int rc;

    *out = NULL;
    if (!f)
        return ckpt_error_oom();
    if ((rc = merged(&f->json, json, len, where, 0)) < 0 || (rc = ckpt_family__validate(f, where)) < 0) {
        cJSON_Delete(f->json);
        free(f);
        return rc;
    }
    *out = f;
    return 0;
}

/* ---- the built-ins, read once ---- */

static pthread_mutex_t builtin_lock = PTHREAD_MUTEX_INITIALIZER;
static ckpt_family *builtins[MAX_BUILTINS];
static char known[1024];

const char *ckpt_family_known(void)
{
    size_t i, n = 0;

    pthread_mutex_lock(&builtin_lock);
    if (!known[0])
        for (i = 0; i < ckpt_families__count() && n < sizeof known; i++)
            n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", ckpt_families__name(i));
    pthread_mutex_unlock(&builtin_lock);
    return known;
}

size_t ckpt_family__builtin_n(void)
{
    size_t n = ckpt_families__count();
    return n < MAX_BUILTINS ? n : MAX_BUILTINS;
}

size_t ckpt_family_builtin_count(void)
{
    return ckpt_family__builtin_n();
}

static int builtin_get(size_t i, const ckpt_family **out)
{
    size_t len;
    const char *json;
    int rc = 0;

    pthread_mutex_lock(&builtin_lock);
    if (!builtins[i]) {
        json = ckpt_families__json(i, &len);
        rc = family_parse(&builtins[i], json, len, ckpt_families__name(i));
    }
    *out = builtins[i];
    pthread_mutex_unlock(&builtin_lock);
    return rc;
}

const ckpt_family *ckpt_family_builtin_at(size_t i)
{
    const ckpt_family *f = NULL;

    if (i >= ckpt_family__builtin_n() || builtin_get(i, &f) < 0)
        return NULL;
    return f;
}

int ckpt_family_builtin(const ckpt_family **out, const char *name)
{
    size_t i;

    if (!out || !name)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_builtin: NULL argument");
    *out = NULL;
    for (i = 0; i < ckpt_family__builtin_n(); i++)
        if (strcmp(ckpt_families__name(i), name) == 0)
            return builtin_get(i, out);
    return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "no built-in family is named %s (known: %s)", name,
                           ckpt_family_known());
}

int ckpt_family_load(ckpt_family **out, const char *path)
{
    ckpt_file *file = NULL;
    int rc;

    if (!out || !path)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_load: NULL argument");
    *out = NULL;
    if ((rc = ckpt_file_open(&file, path)) < 0)
        return rc;
    if (file->size > MAX_FAMILY_BYTES || !file->data)
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: not a family file of at most %u bytes", path, MAX_FAMILY_BYTES);
    else if ((rc = family_parse(out, (const char *)file->data, (size_t)file->size, path)) == 0)
        (*out)->owned = 1;
    ckpt_file_close(file);
    return rc;
}

void ckpt_family_free(ckpt_family *f)
{
    if (!f || !f->owned)
        return;
    cJSON_Delete(f->json);
    free(f);
}

const char *ckpt_family_name(const ckpt_family *f)
{
    return f ? f->name : NULL;
}

const char *ckpt_family_title(const ckpt_family *f)
{
    return f ? f->title : NULL;
}

const char *ckpt_family_string(const ckpt_family *f, const char *path)
{
    const cJSON *j = f ? f->json : NULL;
    const char *dot;

    while (j && path && (dot = strchr(path, '.'))) {
        const cJSON *c;
        for (c = j->child; c && (strlen(c->string) != (size_t)(dot - path) || strncmp(c->string, path, (size_t)(dot - path)) != 0); c = c->next)
            ;
        j = c;
        path = dot + 1;
    }
    j = j && path ? cJSON_GetObjectItemCaseSensitive(j, path) : NULL;
    return cJSON_IsString(j) ? j->valuestring : NULL;
}
