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

#define EXTRA_STATE "_extra_state"

/* PyTorch stores a module's get_extra_state() under `<module>._extra_state` (a bare
 * `_extra_state` at the top level); a parameter or buffer is never named so. */
static int is_state_name(const char *name)
{
    size_t n = strlen(name), k = sizeof EXTRA_STATE - 1;

    return n >= k && strcmp(name + n - k, EXTRA_STATE) == 0 && (n == k || name[n - k - 1] == '.');
}

static int64_t arg_int(const ckpt_value *args, const char *name)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);

    return v && v->kind == CKPT_VAL_INT ? v->u.integer : 0;
}

static int alloc_tensors(ckpt_whole *w, size_t n)
{
    w->names = calloc(n ? n : 1, sizeof *w->names);
    w->nodes = calloc(n ? n : 1, sizeof *w->nodes);
    return w->names && w->nodes ? 0 : ckpt_error_oom();
}

static void drop_tensors(ckpt_whole *w)
{
    free(w->names);
    free(w->nodes);
    w->names = NULL;
    w->nodes = NULL;
    w->n = 0;
}

/* fp8_dir: the Hugging Face directory of the weights at path when they are FP8 with block
 * scales, read dequantised. */
static int open_file(ckpt_whole *w, const char *path, const char *fp8_dir)
{
    size_t i;
    int rc;

    if ((rc = ckpt_open(&w->ckpt, path, NULL)) < 0 || (rc = alloc_tensors(w, ckpt_tensor_count(w->ckpt))) < 0)
        return rc;
    if (fp8_dir)
        return ckpt_hf_fp8_nodes(fp8_dir, w->ckpt, w->graph, CKPT_FP8_DEQUANTIZE, w->names, w->nodes, &w->n);
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
    drop_tensors(w);
    w->megatron = NULL;
    w->set = NULL;
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
        int fp8 = ckpt_hf_fp8_dir(path);
        snprintf(w->kind, sizeof w->kind, "%s",
                 fp8 == 1 ? "Hugging Face directory, FP8 read as bf16" : "Hugging Face directory");
        rc = fp8 < 0 ? fp8 : open_file(w, weights, fp8 ? path : NULL);
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
            rc = open_file(w, path, NULL);
        else if (ckpt_hf_fp8_dir(path) != 0 || !ckpt_format_detect(path))
            rc = open_dir(w, path); /* FP8 Hugging Face weights are read dequantised */
        else if (!megatron_dist(w, path))
            rc = open_file(w, path, NULL);
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

int ckpt_whole_is_state(const ckpt_whole *w, size_t i)
{
    return i < w->n && is_state_name(w->names[i]);
}

/* args as the maps name the values: a parameter for each one args holds. */
static int megatron_params(const ckpt_megatron *m, ckpt_map_params *p)
{
    const ckpt_value *args = ckpt_megatron_args(m), *gqa = ckpt_megatron_arg(args, "group_query_attention");
    const ckpt_megatron_info *info = ckpt_megatron_info_of(m);
    int64_t heads = arg_int(args, "num_attention_heads"), hidden = arg_int(args, "hidden_size");
    int64_t groups = gqa && gqa->kind == CKPT_VAL_BOOL && gqa->u.boolean ? arg_int(args, "num_query_groups") : heads;
    /* Megatron-LM's default kv_channels */
    int64_t head_dim = arg_int(args, "kv_channels") ? arg_int(args, "kv_channels")
                       : heads > 0 && hidden % heads == 0 ? hidden / heads
                                                          : 0;
    struct {
        const char *name;
        int64_t value;
    } v[] = { { "num_attention_heads", heads },
              { "num_key_value_heads", groups },
              { "hidden_size", hidden },
              { "head_dim", head_dim },
              { "intermediate_size", arg_int(args, "ffn_hidden_size") },
              { "num_hidden_layers", info->num_layers },
              { "vocab_size", info->true_vocab_size },
              { "padded_vocab_size", info->padded_vocab_size },
              /* and under Megatron-LM's own names, for maps written in them */
              { "num_layers", info->num_layers },
              { "ffn_hidden_size", arg_int(args, "ffn_hidden_size") },
              { "num_query_groups", groups },
              { "kv_channels", head_dim },
              { "tensor_model_parallel_size", info->tp },
              { "pipeline_model_parallel_size", info->pp } };
    size_t i;
    int64_t have;
    int rc;

    for (i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i].value > 0 && !ckpt_map_params_get(p, v[i].name, &have) &&
            (rc = ckpt_map_params_set(p, v[i].name, v[i].value)) < 0)
            return rc;
    return 0;
}

int ckpt_whole_map_params(const ckpt_whole *w, ckpt_map_params *p)
{
    int rc;

    if (!w || !p)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_whole_map_params: NULL argument");
    if (w->megatron && (rc = megatron_params(w->megatron, p)) < 0)
        return rc;
    return w->config ? ckpt_map_params_load_json(p, w->config) : 0;
}

const char *ckpt_whole_params_source(const ckpt_whole *w)
{
    if (w->megatron)
        return w->config ? "Megatron-LM args, config.json" : "Megatron-LM args";
    return w->config ? "config.json" : "no config.json or args";
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
    const char **state_names = calloc(w->n ? w->n : 1, sizeof *state_names);
    const ckpt_node **state_nodes = calloc(w->n ? w->n : 1, sizeof *state_nodes);
    ckpt_map_result *res = NULL, **kept;
    size_t i, n, n_in = 0, n_state = 0;
    int rc;

    if (!in || !state_names || !state_nodes) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < w->n; i++) {
        if (is_state_name(w->names[i])) {
            state_names[n_state] = w->names[i];
            state_nodes[n_state++] = w->nodes[i];
            continue;
        }
        in[n_in].name = w->names[i];
        in[n_in++].node = w->nodes[i];
    }
    if ((rc = ckpt_map_apply(map, params, w->graph, in, n_in, NULL, &res)) < 0)
        goto done;
    if (!(kept = realloc(w->results, (w->n_results + 1) * sizeof *kept))) {
        ckpt_map_result_free(res);
        rc = ckpt_error_oom();
        goto done;
    }
    w->results = kept;
    w->results[w->n_results++] = res;
    n = ckpt_map_result_count(res);
    drop_tensors(w);
    if ((rc = alloc_tensors(w, n + n_state)) < 0)
        goto done;
    for (i = 0; i < n; i++) {
        const ckpt_map_output *o = ckpt_map_result_at(res, i);
        w->names[i] = o->name;
        w->nodes[i] = o->node;
    }
    /* the names are borrowed from the formats' readers, which stay open */
    memcpy(w->names + n, state_names, n_state * sizeof *state_names);
    memcpy(w->nodes + n, state_nodes, n_state * sizeof *state_nodes);
    w->n = n + n_state;
done:
    free(in);
    free(state_names);
    free(state_nodes);
    return rc;
}

/* Names the map cannot place on either side leave it on A, where its rules decide. */
static int renamed_side(const ckpt_map *map, ckpt_whole *const w[2])
{
    int rc = ckpt_map_detect(map, w[0]->names, w[0]->n);

    if (rc == 0 || rc == CKPT_ENOMEM)
        return rc;
    if (ckpt_error_last()->klass == CKPT_ERRCLASS_MAP_DIRECTION && ckpt_map_detect(map, w[1]->names, w[1]->n) == 0)
        return 1;
    ckpt_error_clear();
    return 0;
}

int ckpt_whole_map_pair(ckpt_whole *const w[2], const ckpt_map *map, ckpt_map_params *params, int *mapped)
{
    const char *missing;
    int side, rc;

    if (!w || !w[0] || !w[1] || !map || !params || !mapped)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_whole_map_pair: NULL argument");
    if ((side = renamed_side(map, w)) < 0)
        return side;
    if ((rc = ckpt_whole_map_params(w[side], params)) < 0 || (rc = ckpt_whole_map_params(w[!side], params)) < 0)
        return rc;
    if (!ckpt_map_params_complete(map, params, &missing))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT,
                               "the map %s needs %s, which neither A (%s: %s) nor B (%s: %s) states; they come "
                               "from a Hugging Face or PaddleNLP config.json or a Megatron-LM checkpoint's args: "
                               "give --param NAME=N",
                               ckpt_map_name(map), missing, w[0]->kind, ckpt_whole_params_source(w[0]), w[1]->kind,
                               ckpt_whole_params_source(w[1]));
    *mapped = side;
    return ckpt_whole_apply_map(w[side], map, params);
}
