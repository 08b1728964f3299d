/* ckptconv inspect DIR for a checkpoint written as many files (a Megatron-LM checkpoint root,
 * a PaddleNLP directory): the layout, every member file with its place in it, and the model
 * the files make together, tensor by tensor at full shape, with how each is cut across TP
 * ranks. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <ckpt/framework.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const kind_names[] = { "replicated", "column", "row", "vocab", "swiglu", "sections" };
static const char *const stage_names[] = { "layer", "first", "last", "every" };

typedef struct logical {
    ckpt_plan *plan;              /* the graph the model's nodes live in */
    ckpt_fw *fw;
    size_t n;
    const char *what;             /* "PaddleNLP model", "Megatron model" */
    ckpt_megatron_optim_range *ranges; /* a Megatron model's optimizer state, parameter by parameter */
    size_t n_ranges;
    char *ranges_error;           /* why they could not be listed */
} logical;

static const char *tensor_at(const logical *l, size_t i, const ckpt_node **full, ckpt_tensor_layout *layout)
{
    return ckpt_fw_tensor_at(l->fw, i, full, layout);
}

/* The model of the layouts a framework of the same name reads; nothing (and no error) for the
 * others. */
static int open_logical(const char *path, ckpt_set *set, logical *l)
{
    const char *layout = ckpt_set_info_of(set)->layout;
    ckpt_fw_options o = CKPT_FW_OPTIONS_INIT;
    ckpt_megatron *m;
    int rc;

    memset(l, 0, sizeof *l);
    if (strcmp(layout, "paddle") != 0 && strcmp(layout, "megatron") != 0)
        return 0;
    o.framework = layout;
    if ((rc = ckpt_plan_new(&l->plan)) < 0 || (rc = ckpt_fw_open(&l->fw, path, ckpt_plan_graph(l->plan), &o)) < 0)
        return rc;
    l->n = ckpt_fw_tensor_count(l->fw);
    l->what = strcmp(layout, "paddle") == 0 ? "PaddleNLP model" : "Megatron model";
    /* a listing of what does not fit the layout rules still shows the rest */
    if ((m = ckpt_fw_native(l->fw, "megatron")) != NULL &&
        ckpt_megatron_optimizer_ranges(m, &l->ranges, &l->n_ranges) < 0 &&
        !(l->ranges_error = strdup(ckpt_error_last()->message)))
        return CKPT_ENOMEM;
    return 0;
}

static void close_logical(logical *l)
{
    free(l->ranges);
    free(l->ranges_error);
    ckpt_fw_close(l->fw);
    ckpt_plan_free(l->plan);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void coord(char *buf, size_t cap, int v)
{
    if (v < 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%d", v);
}

/* Each parameter's optimizer state, rank by rank: its range in the distributed optimizer's
 * grad buffers, or its key and param group in the plain state dict. */
static void print_ranges(const logical *l)
{
    size_t i;
    char dtypes[48];

    if (l->ranges_error)
        printf("\noptimizer state: not listed: %s\n", l->ranges_error);
    if (!l->n_ranges)
        return;
    if (l->ranges[0].distributed) {
        printf("\noptimizer state (distributed optimizer's grad buffers): %zu parameter ranges\n\n", l->n_ranges);
        printf("%-56s %3s %3s %3s %5s %4s %-18s %6s %9s %9s %9s\n", "name", "tp", "pp", "ep", "chunk", "gbuf",
               "dtypes", "bucket", "start", "end", "flat");
    } else {
        printf("\noptimizer state (non-distributed optimizer, model_optim_rng.pt): %zu parameters\n\n", l->n_ranges);
        printf("%-56s %3s %3s %5s %5s %5s\n", "name", "tp", "pp", "chunk", "group", "state");
    }
    for (i = 0; i < l->n_ranges; i++) {
        const ckpt_megatron_optim_range *r = &l->ranges[i];
        if (!r->distributed) {
            printf("%-56s %3d %3d %5d %5zu %5lld\n", r->name, r->tp, r->pp, r->chunk, r->group, (long long)r->index);
            continue;
        }
        snprintf(dtypes, sizeof dtypes, "%s/%s%s", ckpt_dtype_name(r->param_dtype), ckpt_dtype_name(r->grad_dtype),
                 r->expert ? " exp" : "");
        printf("%-56s %3d %3d %3d %5d %4zu %-18s %6zu %9lld %9lld %9lld\n", r->name, r->tp, r->pp, r->ep, r->chunk,
               r->gbuf, dtypes, r->bucket, (long long)r->start, (long long)r->end, (long long)r->flat);
    }
}

static void print_text(const ckpt_set *set, const logical *l)
{
    const ckpt_set_info *si = ckpt_set_info_of(set);
    size_t i, n = ckpt_set_member_count(set);
    char size[32], shape[256], c[5][16];

    printf("path:    %s\n", si->root);
    printf("layout:  %s\n", si->layout);
    printf("ranks:   TP %d, PP %d, EP %d, DP %d\n", si->tp, si->pp, si->ep, si->dp);
    if (si->iteration >= 0)
        printf("iteration: %lld%s\n", (long long)si->iteration, si->release ? " (release)" : "");
    printf("files:   %zu (%s)\n\n", n, cli_human_size(ckpt_set_input_size(set), size, sizeof size));
    printf("%-48s %-10s %4s %4s %4s %4s %5s %12s\n", "file", "role", "tp", "pp", "ep", "dp", "shard", "size");
    for (i = 0; i < n; i++) {
        const ckpt_member *m = ckpt_set_member_at(set, i);
        coord(c[0], sizeof c[0], m->at.tp);
        coord(c[1], sizeof c[1], m->at.pp);
        coord(c[2], sizeof c[2], m->at.ep);
        coord(c[3], sizeof c[3], m->at.dp);
        coord(c[4], sizeof c[4], m->at.shard);
        printf("%-48s %-10s %4s %4s %4s %4s %5s %12s\n", m->rel, m->role, c[0], c[1], c[2], c[3], c[4],
               cli_human_size(file_size(m->path), size, sizeof size));
    }
    if (!l->what)
        return;
    printf("\n%s: %zu tensors at full shape\n\n", l->what, l->n);
    printf("%-56s %-10s %-20s %-10s %s\n", "name", "dtype", "shape", "tp", "stage");
    for (i = 0; i < l->n; i++) {
        const ckpt_node *full;
        ckpt_tensor_layout lay;
        const char *name = tensor_at(l, i, &full, &lay);
        printf("%-56s %-10s %-20s %-10s %s\n", name, ckpt_dtype_name(ckpt_node_dtype(full)),
               ckpt_shape_format(ckpt_node_shape(full), ckpt_node_ndim(full), shape, sizeof shape),
               kind_names[lay.tp], stage_names[lay.stage]);
    }
    print_ranges(l);
}

static cJSON *int_array(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    int i;

    for (i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static void json_ranges(cJSON *o, const logical *l)
{
    cJSON *opt, *list;
    size_t i;

    if (!l->n_ranges && !l->ranges_error)
        return;
    opt = cJSON_AddObjectToObject(o, "optimizer");
    if (l->ranges_error)
        cJSON_AddStringToObject(opt, "error", l->ranges_error);
    if (!l->n_ranges)
        return;
    cJSON_AddStringToObject(opt, "kind", l->ranges[0].distributed ? "distributed" : "plain");
    list = cJSON_AddArrayToObject(opt, "params");
    for (i = 0; i < l->n_ranges; i++) {
        const ckpt_megatron_optim_range *r = &l->ranges[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", r->name);
        cJSON_AddNumberToObject(j, "tp", r->tp);
        cJSON_AddNumberToObject(j, "pp", r->pp);
        cJSON_AddNumberToObject(j, "ep", r->ep);
        cJSON_AddNumberToObject(j, "chunk", r->chunk);
        if (r->distributed) {
            cJSON_AddNumberToObject(j, "gbuf", (double)r->gbuf);
            cJSON_AddStringToObject(j, "param_dtype", ckpt_dtype_name(r->param_dtype));
            cJSON_AddStringToObject(j, "grad_dtype", ckpt_dtype_name(r->grad_dtype));
            cJSON_AddBoolToObject(j, "expert", r->expert);
            cJSON_AddNumberToObject(j, "bucket", (double)r->bucket);
            cJSON_AddNumberToObject(j, "start", (double)r->start);
            cJSON_AddNumberToObject(j, "end", (double)r->end);
            cJSON_AddNumberToObject(j, "flat", (double)r->flat);
        } else {
            cJSON_AddNumberToObject(j, "group", (double)r->group);
            cJSON_AddNumberToObject(j, "state", (double)r->index);
        }
        cJSON_AddItemToArray(list, j);
    }
}

static void print_json(const ckpt_set *set, const logical *l)
{
    const ckpt_set_info *si = ckpt_set_info_of(set);
    cJSON *o = cJSON_CreateObject(), *files = cJSON_AddArrayToObject(o, "files");
    size_t i;
    char *text;

    cJSON_AddStringToObject(o, "path", si->root);
    cJSON_AddStringToObject(o, "layout", si->layout);
    cJSON_AddNumberToObject(o, "tp", si->tp);
    cJSON_AddNumberToObject(o, "pp", si->pp);
    cJSON_AddNumberToObject(o, "ep", si->ep);
    cJSON_AddNumberToObject(o, "dp", si->dp);
    cJSON_AddNumberToObject(o, "size", (double)ckpt_set_input_size(set));
    for (i = 0; i < ckpt_set_member_count(set); i++) {
        const ckpt_member *m = ckpt_set_member_at(set, i);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "path", m->rel);
        cJSON_AddStringToObject(f, "role", m->role);
        cJSON_AddNumberToObject(f, "tp", m->at.tp);
        cJSON_AddNumberToObject(f, "pp", m->at.pp);
        cJSON_AddNumberToObject(f, "ep", m->at.ep);
        cJSON_AddNumberToObject(f, "dp", m->at.dp);
        cJSON_AddNumberToObject(f, "shard", m->at.shard);
        cJSON_AddNumberToObject(f, "size", (double)file_size(m->path));
        cJSON_AddItemToArray(files, f);
    }
    if (l->what) {
        cJSON *tensors = cJSON_AddArrayToObject(o, "tensors");
        for (i = 0; i < l->n; i++) {
            const ckpt_node *full;
            ckpt_tensor_layout lay;
            const char *name = tensor_at(l, i, &full, &lay);
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "name", name);
            cJSON_AddStringToObject(t, "dtype", ckpt_dtype_name(ckpt_node_dtype(full)));
            cJSON_AddItemToObject(t, "shape", int_array(ckpt_node_shape(full), ckpt_node_ndim(full)));
            cJSON_AddStringToObject(t, "tp", kind_names[lay.tp]);
            if (lay.tp != CKPT_TP_REPLICATED)
                cJSON_AddNumberToObject(t, "axis", lay.axis);
            cJSON_AddStringToObject(t, "stage", stage_names[lay.stage]);
            cJSON_AddItemToArray(tensors, t);
        }
        json_ranges(o, l);
    }
    text = cJSON_Print(o);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

int cli_inspect_set(const char *path, int json)
{
    ckpt_set *set = NULL;
    logical l;
    int rc;

    memset(&l, 0, sizeof l);
    if ((rc = ckpt_set_open(&set, path, NULL)) == 0 && (rc = open_logical(path, set, &l)) == 0) {
        if (json)
            print_json(set, &l);
        else
            print_text(set, &l);
    }
    close_logical(&l);
    ckpt_set_close(set);
    return rc;
}
