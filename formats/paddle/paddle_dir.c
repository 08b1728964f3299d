/* A PaddleNLP directory ready to be converted (ckpt/paddle.h): its model files grouped as
 * they are converted, its indexes checked against the files and rewritten, and every other
 * entry copied through or skipped with the reason. */
#include "paddle_private.h"

#include <ckpt/shard.h>
#include <ckpt/sys/common.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct paddle_extra {
    ckpt_paddle_extra pub;
    char *path;
} paddle_extra;

struct ckpt_paddle {
    ckpt_set *set;
    const ckpt_ckpt **models; /* per member: its checkpoint, NULL for members that are not model files */
    ckpt_paddle_group *groups;
    cJSON **indexes;          /* per group: its index json, NULL for a lone file */
    size_t n_groups;
    size_t *group_files;      /* the groups' files, one run per group */
    paddle_extra *extras;
    size_t n_extras;
    char **names;             /* the directory's entries, which the extras' names point into */
    size_t n_names;
};

static const char OPTIMIZER_SKIPPED[] =
    "optimizer state: not converted (its moments belong to the source layout's parameters), so training resumed "
    "from the output starts with a fresh optimizer";

static int has_role(const ckpt_member *m, const char *role)
{
    return strcmp(m->role, role) == 0;
}

static long find_model(const ckpt_set *s, const char *rel)
{
    size_t i;

    for (i = 0; i < ckpt_set_member_count(s); i++)
        if (has_role(ckpt_set_member_at(s, i), "model") && strcmp(ckpt_set_member_at(s, i)->rel, rel) == 0)
            return (long)i;
    return -1;
}

/* One group per index, in member (name) order, then one per model file no index lists. */
static int make_groups(ckpt_paddle *p)
{
    size_t n = ckpt_set_member_count(p->set), used = 0, i, k;
    unsigned char *listed = calloc(n ? n : 1, 1);
    int rc = 0;

    p->groups = calloc(n ? n : 1, sizeof *p->groups);
    p->indexes = calloc(n ? n : 1, sizeof *p->indexes);
    p->group_files = calloc(n ? n : 1, sizeof *p->group_files);
    if (!listed || !p->groups || !p->indexes || !p->group_files) {
        free(listed);
        return ckpt_error_oom();
    }
    for (i = 0; i < n && rc == 0; i++) {
        const ckpt_member *m = ckpt_set_member_at(p->set, i);
        ckpt_paddle_group *g = &p->groups[p->n_groups];
        const cJSON **firsts = NULL;
        size_t n_files = 0;
        if (!has_role(m, "index"))
            continue;
        if ((rc = ckpt_paddle__index_read(m->path, &p->indexes[p->n_groups], &firsts, &n_files)) < 0)
            break;
        g->index = (long)i;
        g->files = &p->group_files[used];
        p->n_groups++;
        for (k = 0; k < n_files && rc == 0; k++) {
            /* the layout checked both when it listed the directory: failing here, the index
             * changed since */
            long f = find_model(p->set, firsts[k]->valuestring);
            if (f < 0)
                rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                     "%s: weight_map puts %s in %s, which is not a model file of %s",
                                     m->path, firsts[k]->string, firsts[k]->valuestring,
                                     ckpt_set_info_of(p->set)->root);
            else if (listed[f])
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: %s is listed by another index too",
                                     m->path, firsts[k]->valuestring);
            if (rc == 0) {
                listed[f] = 1;
                p->group_files[used++] = (size_t)f;
                g->n_files++;
            }
        }
        free((void *)firsts);
    }
    for (i = 0; i < n && rc == 0; i++) {
        ckpt_paddle_group *g = &p->groups[p->n_groups];
        if (listed[i] || !has_role(ckpt_set_member_at(p->set, i), "model"))
            continue;
        g->index = -1;
        g->files = &p->group_files[used];
        g->n_files = 1;
        p->group_files[used++] = i;
        p->n_groups++;
    }
    free(listed);
    return rc;
}

static const char *entry_skipped(const char *path)
{
    struct stat st;

    if (stat(path, &st) < 0)
        return "cannot be read";
    if (S_ISDIR(st.st_mode))
        return "a directory: not descended into (convert it on its own)";
    return "not a regular file";
}

/* Every entry of the directory but the model files and the indexes. The members are the
 * regular files in name order: a walk beside the listing tells them from the rest. */
static int make_extras(ckpt_paddle *p)
{
    const char *root = ckpt_set_info_of(p->set)->root;
    size_t n_members = ckpt_set_member_count(p->set), j = 0, i;
    int rc;

    if ((rc = ckpt_paddle__list(root, &p->names, &p->n_names)) < 0)
        return rc;
    if (!(p->extras = calloc(p->n_names ? p->n_names : 1, sizeof *p->extras)))
        return ckpt_error_oom();
    for (i = 0; i < p->n_names; i++) {
        const ckpt_member *m = NULL;
        paddle_extra *x = &p->extras[p->n_extras];
        while (j < n_members && strcmp(ckpt_set_member_at(p->set, j)->rel, p->names[i]) < 0)
            j++;
        if (j < n_members && strcmp(ckpt_set_member_at(p->set, j)->rel, p->names[i]) == 0)
            m = ckpt_set_member_at(p->set, j);
        if (m && (has_role(m, "model") || has_role(m, "index")))
            continue;
        if (!(x->path = ckpt_paddle__join(root, p->names[i])))
            return ckpt_error_oom();
        x->pub.rel = p->names[i];
        x->pub.path = x->path;
        x->pub.skip = !m ? entry_skipped(x->path) : has_role(m, "optimizer") ? OPTIMIZER_SKIPPED : NULL;
        p->n_extras++;
    }
    return 0;
}

int ckpt_paddle_open(ckpt_paddle **out, ckpt_set *set)
{
    ckpt_paddle *p;
    size_t i;
    int rc;

    *out = NULL;
    if (strcmp(ckpt_set_info_of(set)->layout, "paddle") != 0)
        return ckpt_error_set(CKPT_EINVALID, "%s: a checkpoint set of layout '%s', not a PaddleNLP directory",
                              ckpt_set_info_of(set)->root, ckpt_set_info_of(set)->layout);
    if (!(p = calloc(1, sizeof *p)))
        return ckpt_error_oom();
    p->set = set;
    if (!(p->models = calloc(ckpt_set_member_count(set) + 1, sizeof *p->models))) {
        rc = ckpt_error_oom();
        goto fail;
    }
    if ((rc = make_groups(p)) < 0)
        goto fail;
    for (i = 0; i < ckpt_set_member_count(set); i++)
        if (has_role(ckpt_set_member_at(set, i), "model") && (rc = ckpt_set_member_open(set, i, &p->models[i])) < 0)
            goto fail;
    if ((rc = make_extras(p)) < 0)
        goto fail;
    *out = p;
    return 0;
fail:
    ckpt_paddle_close(p);
    return rc;
}

void ckpt_paddle_close(ckpt_paddle *p)
{
    size_t i;

    if (!p)
        return;
    for (i = 0; i < p->n_groups; i++)
        cJSON_Delete(p->indexes[i]);
    for (i = 0; i < p->n_extras; i++)
        free(p->extras[i].path);
    ckpt_paddle__names_free(p->names, p->n_names);
    free(p->extras);
    free(p->group_files);
    free(p->indexes);
    free(p->groups);
    free(p->models);
    free(p);
}

size_t ckpt_paddle_group_count(const ckpt_paddle *p)
{
    return p->n_groups;
}

const ckpt_paddle_group *ckpt_paddle_group_at(const ckpt_paddle *p, size_t i)
{
    return i < p->n_groups ? &p->groups[i] : NULL;
}

size_t ckpt_paddle_extra_count(const ckpt_paddle *p)
{
    return p->n_extras;
}

const ckpt_paddle_extra *ckpt_paddle_extra_at(const ckpt_paddle *p, size_t i)
{
    return i < p->n_extras ? &p->extras[i].pub : NULL;
}

int ckpt_paddle_group_check(const ckpt_paddle *p, size_t group)
{
    const ckpt_paddle_group *g = ckpt_paddle_group_at(p, group);
    const cJSON *map;
    const char *where;
    size_t i, j, n = 0;

    if (!g)
        return ckpt_error_set(CKPT_EINVALID, "%s: no group %zu", ckpt_set_info_of(p->set)->root, group);
    if (g->index < 0)
        return 0;
    where = ckpt_set_member_at(p->set, (size_t)g->index)->path;
    map = cJSON_GetObjectItemCaseSensitive(p->indexes[group], "weight_map");
    for (i = 0; i < g->n_files; i++) {
        const char *file = ckpt_set_member_at(p->set, g->files[i])->rel;
        const ckpt_ckpt *ck = p->models[g->files[i]];
        for (j = 0; j < ckpt_tensor_count(ck); j++, n++) {
            const char *name = ckpt_tensor_at(ck, j)->name;
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(map, name);
            if (!e)
                return ckpt_error_set(CKPT_EFORMAT, "%s: tensor %s of %s is not in its weight_map", where, name, file);
            if (strcmp(e->valuestring, file) != 0)
                return ckpt_error_set(CKPT_EFORMAT, "%s: weight_map puts %s in %s, but it is in %s", where, name,
                                      e->valuestring, file);
        }
    }
    if ((size_t)cJSON_GetArraySize(map) != n)
        return ckpt_error_set(CKPT_EFORMAT, "%s: weight_map lists %d tensors, its files hold %zu", where,
                              cJSON_GetArraySize(map), n);
    return 0;
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
            if ((rc = put_indent(b, level + 1)) < 0 || (obj && ((rc = ckpt_shard_json_string(b, e->string)) < 0 ||
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
        return ckpt_shard_json_string(b, v->valuestring);
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

int ckpt_paddle_index_json(const ckpt_paddle *p, size_t group, const char *const *names, const char *const *files,
                           size_t n, uint64_t total_size, ckpt_buf *out)
{
    const ckpt_paddle_group *g = ckpt_paddle_group_at(p, group);
    cJSON *json = cJSON_CreateObject(), *map = cJSON_CreateObject();
    const cJSON *e;
    size_t i;
    int rc = 0;

    if (!g || g->index < 0) {
        cJSON_Delete(json);
        cJSON_Delete(map);
        return ckpt_error_set(CKPT_EINVALID, "%s: group %zu has no index", ckpt_set_info_of(p->set)->root, group);
    }
    if (!json || !map || !cJSON_AddItemToObject(json, "weight_map", map)) {
        cJSON_Delete(map);
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < n && rc == 0; i++)
        if (!cJSON_AddItemToObject(map, names[i], cJSON_CreateString(files[i])))
            rc = ckpt_error_oom();
    cJSON_ArrayForEach(e, p->indexes[group]) {
        cJSON *copy;
        if (rc < 0 || strcmp(e->string, "weight_map") == 0)
            continue;
        if (!(copy = cJSON_Duplicate(e, 1)) || !cJSON_AddItemToObject(json, e->string, copy)) {
            cJSON_Delete(copy);
            rc = ckpt_error_oom();
        } else if (strcmp(e->string, "metadata") == 0 && cJSON_IsObject(copy) &&
                   cJSON_GetObjectItemCaseSensitive(copy, "total_size")) {
            cJSON_ReplaceItemInObjectCaseSensitive(copy, "total_size", cJSON_CreateNumber((double)total_size));
        }
    }
    if (rc == 0)
        rc = put_value(out, json, 0);
done:
    cJSON_Delete(json);
    return rc;
}
