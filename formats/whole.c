/* A checkpoint at any path as a list of named full tensors (ckpt/diff.h): one file through
 * its format module, a checkpoint of many files through the logical model of its layout
 * (the Megatron-LM and PaddleNLP modules merge the ranks), a Hugging Face directory through
 * the weights file it names. Which reads a directory is decided here, in this order: a
 * format that claims it (a ZeRO directory is a format; a Megatron-LM torch_dist iteration
 * directory, which the DCP format claims, is still read as the Megatron model), the
 * PaddleNLP layout (whose unified checkpoints look like Hugging Face directories), Hugging
 * Face weights, any other layout. */
#include <ckpt/diff.h>
#include <ckpt/hf.h>
#include <ckpt/megatron.h>
#include <ckpt/paddle.h>
#include <ckpt/sys/common.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ckpt_whole {
    char kind[96];
    char *config;
    ckpt_graph *graph;
    ckpt_ckpt *ckpt;
    ckpt_set *set;
    ckpt_megatron *megatron;
    ckpt_paddle_model *paddle;
    ckpt_map_result **results; /* maps applied, kept for their names and nodes */
    size_t n_results;
    const char **names;
    const ckpt_node **nodes;
    size_t n;
};

static int alloc_tensors(ckpt_whole *w, size_t n)
{
    w->names = calloc(n ? n : 1, sizeof *w->names);
    w->nodes = calloc(n ? n : 1, sizeof *w->nodes);
    return w->names && w->nodes ? 0 : ckpt_error_oom();
}

static int open_file(ckpt_whole *w, const char *path)
{
    size_t i;
    int rc;

    if ((rc = ckpt_open(&w->ckpt, path, NULL)) < 0 || (rc = alloc_tensors(w, ckpt_tensor_count(w->ckpt))) < 0)
        return rc;
    for (i = 0; i < ckpt_tensor_count(w->ckpt); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(w->ckpt, i);
        if ((rc = ckpt_node_tensor(w->graph, t, &w->nodes[w->n])) < 0)
            return rc;
        w->names[w->n++] = t->name;
    }
    if (!w->kind[0])
        snprintf(w->kind, sizeof w->kind, "%s", ckpt_format_name(w->ckpt));
    return 0;
}

static int open_paddle(ckpt_whole *w)
{
    ckpt_paddle_model_options po = CKPT_PADDLE_MODEL_OPTIONS_INIT;
    const ckpt_paddle_model_info *info;
    size_t i;
    int rc;

    po.no_optimizer = 1;
    if ((rc = ckpt_paddle_model_open(&w->paddle, w->set, w->graph, &po)) < 0 ||
        (rc = alloc_tensors(w, ckpt_paddle_model_tensor_count(w->paddle))) < 0)
        return rc;
    for (i = 0; i < ckpt_paddle_model_tensor_count(w->paddle); i++) {
        ckpt_tensor_layout l;
        w->names[w->n] = ckpt_paddle_model_tensor_at(w->paddle, i, &w->nodes[w->n], &l);
        w->n++;
    }
    info = ckpt_paddle_model_info_of(w->paddle);
    if (info->config && !(w->config = strdup(info->config)))
        return ckpt_error_oom();
    snprintf(w->kind, sizeof w->kind, "PaddleNLP set (TP %d, PP %d)", info->tp, info->pp);
    return 0;
}

static int open_megatron(ckpt_whole *w)
{
    const ckpt_megatron_info *info;
    size_t i;
    int rc;

    if ((rc = ckpt_megatron_open(&w->megatron, w->set, w->graph, NULL)) < 0 ||
        (rc = alloc_tensors(w, ckpt_megatron_tensor_count(w->megatron))) < 0)
        return rc;
    for (i = 0; i < ckpt_megatron_tensor_count(w->megatron); i++) {
        ckpt_tensor_layout l;
        w->names[w->n] = ckpt_megatron_tensor_at(w->megatron, i, &w->nodes[w->n], &l);
        w->n++;
    }
    info = ckpt_megatron_info_of(w->megatron);
    snprintf(w->kind, sizeof w->kind, "Megatron-LM set (TP %d, PP %d%s)", info->tp, info->pp,
             info->vpp > 1 ? ", virtual stages" : "");
    return 0;
}

/* A directory a format claims that is also a Megatron-LM torch_dist iteration directory:
 * read as the model its ranks make, not as the Distributed Checkpoint of stacked tensors
 * the format sees. 1 when taken; 0 for anything else (a plain Distributed Checkpoint),
 * left to the format with w as it was. */
static int megatron_dist(ckpt_whole *w, const char *path)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;

    so.layout = "megatron";
    if (ckpt_set_open(&w->set, path, &so) == 0 && open_megatron(w) == 0)
        return 1;
    ckpt_error_clear();
    ckpt_megatron_close(w->megatron);
    ckpt_set_close(w->set);
    free(w->names);
    free(w->nodes);
    w->megatron = NULL;
    w->set = NULL;
    w->names = NULL;
    w->nodes = NULL;
    w->n = 0;
    w->kind[0] = '\0';
    return 0;
}

/* The directory's config.json, when it has one. */
static int find_config(ckpt_whole *w, const char *dir)
{
    struct stat st;
    size_t n = strlen(dir) + sizeof "/config.json";

    if (!(w->config = malloc(n)))
        return ckpt_error_oom();
    snprintf(w->config, n, "%s/config.json", dir);
    if (stat(w->config, &st) != 0 || !S_ISREG(st.st_mode)) {
        free(w->config);
        w->config = NULL;
    }
    return 0;
}

static int open_dir(ckpt_whole *w, const char *path)
{
    char *weights = NULL;
    const char *layout;
    int rc;

    if (ckpt_paddle_is_dir(path)) {
        if ((rc = ckpt_set_open(&w->set, path, NULL)) < 0)
            return rc;
        return open_paddle(w);
    }
    if (ckpt_hf_weights_path(path, &weights) == 0) {
        snprintf(w->kind, sizeof w->kind, "Hugging Face directory");
        rc = open_file(w, weights);
        free(weights);
        return rc;
    }
    ckpt_error_clear();
    if ((rc = ckpt_set_open(&w->set, path, NULL)) < 0)
        return rc;
    layout = ckpt_set_info_of(w->set)->layout;
    if (strcmp(layout, "megatron") == 0)
        return open_megatron(w);
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                           "%s: a checkpoint of layout '%s' cannot be seen as whole tensors; give one of its files",
                           path, layout);
}

int ckpt_whole_open(ckpt_whole **out, const char *path)
{
    ckpt_whole *w;
    struct stat st;
    int rc;

    if (!out || !path)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_whole_open: NULL argument");
    *out = NULL;
    if (stat(path, &st) != 0)
        return ckpt_error_setc(errno == ENOENT || errno == ENOTDIR ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_OS,
                               "%s: %s", path, strerror(errno));
    if (!(w = calloc(1, sizeof *w)))
        return ckpt_error_oom();
    if ((rc = ckpt_graph_new(&w->graph)) == 0) {
        if (!S_ISDIR(st.st_mode))
            rc = open_file(w, path);
        else if (!ckpt_format_detect(path))
            rc = open_dir(w, path);
        else if (!megatron_dist(w, path))
            rc = open_file(w, path);
    }
    /* a directory a format reads (sharded safetensors) may hold a model's config.json too */
    if (rc == 0 && S_ISDIR(st.st_mode) && !w->config)
        rc = find_config(w, path);
    if (rc < 0) {
        ckpt_whole_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

void ckpt_whole_close(ckpt_whole *w)
{
    size_t i;

    if (!w)
        return;
    for (i = 0; i < w->n_results; i++)
        ckpt_map_result_free(w->results[i]);
    free(w->results);
    free(w->names);
    free(w->nodes);
    ckpt_paddle_model_close(w->paddle);
    ckpt_megatron_close(w->megatron);
    ckpt_graph_free(w->graph);
    ckpt_set_close(w->set);
    ckpt_close(w->ckpt);
    free(w->config);
    free(w);
}

const char *ckpt_whole_kind(const ckpt_whole *w)
{
    return w->kind;
}

const char *ckpt_whole_config(const ckpt_whole *w)
{
    return w->config;
}

ckpt_graph *ckpt_whole_graph(ckpt_whole *w)
{
    return w->graph;
}

size_t ckpt_whole_count(const ckpt_whole *w)
{
    return w->n;
}

const char *ckpt_whole_at(const ckpt_whole *w, size_t i, const ckpt_node **node)
{
    if (i >= w->n)
        return NULL;
    if (node)
        *node = w->nodes[i];
    return w->names[i];
}

int ckpt_whole_apply_map(ckpt_whole *w, const ckpt_map *map, const ckpt_map_params *params)
{
    ckpt_map_input *in = calloc(w->n ? w->n : 1, sizeof *in);
    ckpt_map_result *res = NULL, **kept;
    size_t i, n;
    int rc;

    if (!in)
        return ckpt_error_oom();
    for (i = 0; i < w->n; i++) {
        in[i].name = w->names[i];
        in[i].node = w->nodes[i];
    }
    rc = ckpt_map_apply(map, params, w->graph, in, w->n, NULL, &res);
    free(in);
    if (rc < 0)
        return rc;
    if (!(kept = realloc(w->results, (w->n_results + 1) * sizeof *kept))) {
        ckpt_map_result_free(res);
        return ckpt_error_oom();
    }
    w->results = kept;
    w->results[w->n_results++] = res;
    n = ckpt_map_result_count(res);
    free(w->names);
    free(w->nodes);
    w->names = NULL;
    w->nodes = NULL;
    w->n = 0;
    if ((rc = alloc_tensors(w, n)) < 0)
        return rc;
    for (i = 0; i < n; i++) {
        const ckpt_map_output *o = ckpt_map_result_at(res, i);
        w->names[i] = o->name;
        w->nodes[i] = o->node;
    }
    w->n = n;
    return 0;
}
