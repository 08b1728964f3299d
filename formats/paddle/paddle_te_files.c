/* pd2te / te2pd file by file: the map and its parameters, and the plan that converts each
 * model file of a PaddleNLP directory on its own (or with the files its index lists), the
 * index rewritten with the new names. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int ckpt_paddle__read_text(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    long len;

    *out = NULL;
    if (!f)
        return ckpt_error_setc(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_OS, "%s: %s", path,
                               strerror(errno));
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (*out = calloc(1, (size_t)len + 1)) && fread(*out, 1, (size_t)len, f) == (size_t)len) {
        fclose(f);
        return 0;
    }
    fclose(f);
    free(*out);
    *out = NULL;
    return ckpt_error_setc(CKPT_EIO, CKPT_ERRCLASS_OS, "%s: cannot read it", path);
}

int ckpt_paddle__config_beside(const char *dir, char **out)
{
    struct stat st;

    if (!(*out = ckpt_paddle__join(dir, "config.json")))
        return ckpt_error_oom();
    if (stat(*out, &st) != 0) {
        free(*out);
        *out = NULL;
    }
    return 0;
}

int ckpt_paddle_te_map(ckpt_map **out, int to_te, const char *path)
{
    ckpt_map *m = NULL;
    int rc;

    if (!path)
        return ckpt_map_builtin(out, to_te ? "llama_pd2te" : "llama_te2pd");
    if ((rc = ckpt_map_load(&m, path)) < 0 || to_te) {
        *out = m;
        return rc;
    }
    rc = ckpt_map_invert(m, out);
    ckpt_map_free(m);
    return rc;
}

/* PaddleNLP's and HF's LlamaConfig default num_key_value_heads to num_attention_heads. */
static int default_kv_heads(int64_t heads_given, ckpt_map_params *p)
{
    int64_t heads, kv;

    if (heads_given || ckpt_map_params_get(p, "num_key_value_heads", &kv) ||
        !ckpt_map_params_get(p, "num_attention_heads", &heads))
        return 0;
    return ckpt_map_params_set(p, "num_key_value_heads", heads);
}

int ckpt_paddle__te_llama_only(const char *where, const pd_family *f)
{
    if (f == ckpt_paddle__llama())
        return 0;
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                           "%s: model_type %s: pd2te converts PaddleNLP's LLaMA (model_type llama) only", where,
                           f->model_type);
}

/* pd2te's map knows no model but a LLaMA. */
static int load_config(int to_te, const char *path, ckpt_map_params *p)
{
    char *text = NULL;
    int rc = ckpt_map_params_load_json(p, path);

    if (rc == 0 && to_te && (rc = ckpt_paddle__read_text(path, &text)) == 0 &&
        (rc = ckpt_paddle_layout_check(path, text, 0, 1, 1)) == 0)
        rc = ckpt_paddle__te_llama_only(path, ckpt_paddle__family_of(text));
    free(text);
    return rc;
}

int ckpt_paddle_te_params(ckpt_map_params **out, int to_te, const char *in_dir, const char *config, int64_t heads,
                          int64_t kv_heads)
{
    char *beside = NULL;
    int rc;

    if ((rc = ckpt_map_params_new(out)) < 0)
        return rc;
    if ((heads && (rc = ckpt_map_params_set(*out, "num_attention_heads", heads)) < 0) ||
        (kv_heads && (rc = ckpt_map_params_set(*out, "num_key_value_heads", kv_heads)) < 0))
        goto done;
    if (!config && (rc = ckpt_paddle__config_beside(in_dir, &beside)) < 0)
        goto done;
    if (!config)
        config = beside;
    if (config && (rc = load_config(to_te, config, *out)) < 0)
        goto done;
    rc = default_kv_heads(heads, *out);
done:
    free(beside);
    if (rc < 0) {
        ckpt_map_params_free(*out);
        *out = NULL;
    }
    return rc;
}

/* The checkpoint of member i when it is a model file (ckpt_paddle_open opened them all). */
static const ckpt_ckpt *model_of(const ckpt_paddle_te_job *j, size_t i)
{
    const ckpt_ckpt *ck = NULL;

    if (strcmp(ckpt_set_member_at(j->set, i)->role, "model") != 0 || ckpt_set_member_open(j->set, i, &ck) < 0)
        return NULL;
    return ck;
}

/* Which side the names are on, over every model file at once: a TE directory given to
 * pd2te is refused before anything is planned. */
static int detect_side(const ckpt_paddle_te_job *j, const ckpt_map *m)
{
    const char **names;
    const ckpt_ckpt *ck;
    size_t n = 0, i, k;
    int rc;

    for (i = 0; i < ckpt_set_member_count(j->set); i++)
        n += (ck = model_of(j, i)) ? ckpt_tensor_count(ck) : 0;
    if (!(names = malloc((n ? n : 1) * sizeof *names)))
        return ckpt_error_oom();
    n = 0;
    for (i = 0; i < ckpt_set_member_count(j->set); i++)
        for (k = 0, ck = model_of(j, i); ck && k < ckpt_tensor_count(ck); k++)
            names[n++] = ckpt_tensor_at(ck, k)->name;
    rc = ckpt_map_detect(m, names, n);
    free(names);
    if (rc < 0)
        ckpt_error_prefix("%s", ckpt_set_info_of(j->set)->root);
    return rc;
}

/* The map applied to one group's tensors, its nodes built in the plan's graph. */
static int map_group(ckpt_paddle_te_job *j, size_t g, const char *in_dir, const ckpt_paddle_te_options *o)
{
    const ckpt_paddle_group *grp = ckpt_paddle_group_at(j->dir, g);
    ckpt_map_input *in;
    size_t n = 0, i, k;
    int rc;

    if ((rc = ckpt_paddle_group_check(j->dir, g)) < 0)
        return rc;
    for (i = 0; i < grp->n_files; i++)
        n += ckpt_tensor_count(model_of(j, grp->files[i]));
    if (!(in = malloc((n ? n : 1) * sizeof *in)))
        return ckpt_error_oom();
    n = 0;
    for (i = 0; i < grp->n_files && rc == 0; i++) {
        const ckpt_ckpt *ck = model_of(j, grp->files[i]);
        for (k = 0; k < ckpt_tensor_count(ck) && rc == 0; k++, n++) {
            in[n].name = ckpt_tensor_at(ck, k)->name;
            in[n].home = grp->files[i];
            rc = ckpt_node_tensor(ckpt_plan_graph(j->plan), ckpt_tensor_at(ck, k), &in[n].node);
        }
    }
    if (rc == 0)
        rc = ckpt_map_apply(o->map, o->params, ckpt_plan_graph(j->plan), in, n, o->variants, &j->results[g]);
    free(in);
    if (rc < 0)
        ckpt_error_prefix("%s/%s", in_dir,
                          ckpt_set_member_at(j->set, grp->index >= 0 ? (size_t)grp->index : grp->files[0])->rel);
    return rc;
}

/* The group's index, rewritten with the names its files now hold. */
static int plan_index(ckpt_paddle_te_job *j, size_t g)
{
    const ckpt_map_result *r = j->results[g];
    size_t n = ckpt_map_result_count(r), k;
    const char **names = malloc((n + 1) * sizeof *names), **files = malloc((n + 1) * sizeof *files);
    const ckpt_member *index;
    ckpt_buf json = CKPT_BUF_INIT;
    uint64_t total = 0;
    int rc;

    if (!names || !files) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (k = 0; k < n; k++) {
        const ckpt_map_output *o = ckpt_map_result_at(r, k);
        names[k] = o->name;
        files[k] = ckpt_set_member_at(j->set, o->home)->rel;
        total += (uint64_t)ckpt_node_numel(o->node) * ckpt_dtype_size(ckpt_node_dtype(o->node));
    }
    index = ckpt_set_member_at(j->set, (size_t)ckpt_paddle_group_at(j->dir, g)->index);
    j->origin[ckpt_plan_file_count(j->plan)] = g;
    if ((rc = ckpt_paddle_index_json(j->dir, g, names, files, n, total, &json)) == 0)
        rc = ckpt_plan_add_bytes(j->plan, index->rel, json.data, json.len);
done:
    ckpt_buf_dispose(&json);
    free(names);
    free(files);
    return rc;
}

/* Every output file: the model files in member order, the indexes, the files copied. */
static int plan_files(ckpt_paddle_te_job *j)
{
    size_t n = ckpt_set_member_count(j->set), i, k, f;
    const ckpt_ckpt *ck;
    int rc = 0;

    if (!(j->origin = calloc(n + ckpt_paddle_extra_count(j->dir) + 1, sizeof *j->origin)))
        return ckpt_error_oom();
    for (i = 0; i < n && rc == 0; i++) {
        const ckpt_map_result *r = j->results[j->group_of[i]];
        if (!(ck = model_of(j, i)))
            continue;
        if ((rc = ckpt_plan_add_file(j->plan, ckpt_set_member_at(j->set, i)->rel, ckpt_format_name(ck), &f)) < 0)
            break;
        j->origin[f] = i;
        for (k = 0; k < ckpt_map_result_count(r) && rc == 0; k++) {
            const ckpt_map_output *o = ckpt_map_result_at(r, k);
            if (o->home == i)
                rc = ckpt_plan_add_tensor(j->plan, f, o->name, o->node, 0, NULL);
        }
    }
    for (i = 0; i < ckpt_paddle_group_count(j->dir) && rc == 0; i++)
        if (ckpt_paddle_group_at(j->dir, i)->index >= 0)
            rc = plan_index(j, i);
    for (i = 0; i < ckpt_paddle_extra_count(j->dir) && rc == 0; i++) {
        const ckpt_paddle_extra *x = ckpt_paddle_extra_at(j->dir, i);
        if (!x->skip)
            rc = ckpt_plan_add_copy(j->plan, x->rel, x->path);
    }
    return rc;
}

static int plan_by_file(ckpt_paddle_te_job *j, const char *in_dir, const ckpt_paddle_te_options *o)
{
    size_t n_groups, g, i;
    int rc;

    if ((rc = ckpt_paddle_open(&j->dir, j->set)) < 0 || (rc = detect_side(j, o->map)) < 0)
        return rc;
    n_groups = ckpt_paddle_group_count(j->dir);
    j->n_results = n_groups;
    j->results = calloc(n_groups + 1, sizeof *j->results);
    j->group_of = calloc(ckpt_set_member_count(j->set) + 1, sizeof *j->group_of);
    if (!j->results || !j->group_of)
        return ckpt_error_oom();
    for (g = 0; g < n_groups; g++)
        for (i = 0; i < ckpt_paddle_group_at(j->dir, g)->n_files; i++)
            j->group_of[ckpt_paddle_group_at(j->dir, g)->files[i]] = g;
    if ((rc = ckpt_plan_new(&j->plan)) < 0)
        return rc;
    for (g = 0; g < n_groups && rc == 0; g++)
        rc = map_group(j, g, in_dir, o);
    return rc < 0 ? rc : plan_files(j);
}

int ckpt_paddle_te_plan(ckpt_paddle_te_job *j, const char *in_dir, const ckpt_paddle_te_options *o)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    int rc;

    memset(j, 0, sizeof *j);
    so.layout = "paddle";
    if ((rc = ckpt_set_open(&j->set, in_dir, &so)) < 0)
        return rc;
    return plan_by_file(j, in_dir, o);
}

void ckpt_paddle_te_job_dispose(ckpt_paddle_te_job *j)
{
    size_t i;

    for (i = 0; j->results && i < j->n_results; i++)
        ckpt_map_result_free(j->results[i]);
    free(j->results);
    free(j->group_of);
    free(j->origin);
    ckpt_plan_free(j->plan);
    ckpt_paddle_close(j->dir);
    ckpt_set_close(j->set);
    memset(j, 0, sizeof *j);
}
