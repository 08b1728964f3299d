/* Hugging Face models as models `ckptconv verify` runs: a model directory (config.json with
 * model.safetensors, its sharded index, or pytorch_model.bin) or one weights file
 * (config.json looked for beside it and above), mapped by their family's verify map. */
#include "../verify_source.h"
#include "hf_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* verify has no --drop: what it runs is the checkpoint as it is */
#define LEAVE_OUT "verify runs a model's own weights only (a conversion leaves a tensor out with --drop PATTERN)"

static const char *const weight_files[] = { "model.safetensors.index.json", "model.safetensors", "pytorch_model.bin" };

static int weights_in(const char *dir, char *path, size_t cap)
{
    struct stat st;
    size_t i;

    for (i = 0; i < sizeof weight_files / sizeof weight_files[0]; i++)
        if (snprintf(path, cap, "%s/%s", dir, weight_files[i]) < (int)cap && stat(path, &st) == 0)
            return 0;
    return CKPT_ENOTFOUND;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int hf_bid(const char *path, int is_dir)
{
    char p[4096];

    if (is_dir)
        return ckpt_vsrc__find_config(path, 0, p, sizeof p) == 0 && weights_in(path, p, sizeof p) == 0 ? 70 : -1;
    if (ends_with(path, ".safetensors") || ends_with(path, ".safetensors.index.json") || ends_with(path, ".bin") ||
        ends_with(path, ".pt") || ends_with(path, ".pth"))
        return 20;
    return -1;
}

/* The check sees the names the map's normalize rules give (GPT-2's hub names without
 * "transformer."), the layout its rules and the family's tensor list expect. */
static int check_normalized(ckpt_model_builder *b, const vsrc_config *hc, const ckpt_map *map,
                            const ckpt_map_params *p, const char *config, const char *weights,
                            const ckpt_map_input *raw, size_t n_raw)
{
    ckpt_map_result *r = NULL;
    ckpt_map_input *in;
    size_t n, i;
    int rc;

    if ((rc = ckpt_map_normalize(map, p, ckpt_model_builder_graph(b), raw, n_raw, &r)) < 0)
        return rc;
    n = ckpt_map_result_count(r);
    if (!(in = calloc(n + 1, sizeof *in))) {
        ckpt_map_result_free(r);
        return ckpt_error_oom();
    }
    for (i = 0; i < n; i++) {
        in[i].name = ckpt_map_result_at(r, i)->name;
        in[i].node = ckpt_map_result_at(r, i)->node;
        in[i].home = ckpt_map_result_at(r, i)->home;
    }
    rc = ckpt_family_check_tensors_as(hc->family, hc->config, CKPT_FAMILY_HF, config, weights, in, n, LEAVE_OUT);
    free(in);
    ckpt_map_result_free(r);
    return rc;
}

/* A torch file of a whole module (DeepSpeed's model_states) keeps its weights under "module/". */
static const char *container_prefix(const ckpt_ckpt *c)
{
    size_t i, n = 0;

    for (i = 0; i < ckpt_tensor_count(c); i++)
        n += strncmp(ckpt_tensor_at(c, i)->name, "module/", 7) == 0;
    return n && n * 2 >= ckpt_tensor_count(c) ? "module/" : NULL;
}

/* A quantization_config of FP8 block-scaled weights: its block sizes into payload (int64_t[2]),
 * the config the family reads without it (the weights are read dequantised). */
static int fp8_config(const char *path, char **text, void *payload)
{
    return ckpt_hf__fp8_config(path, text, payload);
}

/* FP8 block-scaled weights read dequantised, their scales consumed (hf_fp8.c). */
static int fp8_inputs(ckpt_model_builder *b, const ckpt_ckpt *c, const char *weights, const char *prefix,
                      const int64_t block[2], ckpt_map_input *in, size_t *n)
{
    char full[1024];
    size_t i, kept = 0;
    int rc;

    for (i = 0; i < *n; i++) {
        const ckpt_tensor *t;
        const ckpt_node *node;
        if ((size_t)snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", in[i].name) >= sizeof full ||
            !(t = ckpt_tensor_find(c, full)))
            return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_FORMAT, "%s: %s: not found", weights, in[i].name);
        if ((rc = ckpt_hf__fp8_node(ckpt_model_builder_graph(b), c, weights, t, block, CKPT_FP8_DEQUANTIZE, &node)) < 0)
            return rc;
        if (node) {
            in[kept] = in[i];
            in[kept++].node = node;
        }
    }
    *n = kept;
    return 0;
}

/* check_whole: the weights are a whole model directory's, to be held against its config.
 * Without a config.json the weights are read by the names of the first family (as
 * ckpt_family_detect takes a config that names none). *family: the one config.json names,
 * once read. */
static int hf_weights(ckpt_model_builder *b, const char *weights, const char *config, const ckpt_open_options *open,
                      int check_whole, const ckpt_family **family)
{
    vsrc_config hc = { NULL, NULL, ckpt_family_string(ckpt_family_builtin_at(0), "verify.maps.huggingface") };
    int64_t fp8_block[2] = { 0, 0 };
    ckpt_ckpt *c;
    const ckpt_map *map;
    ckpt_map_params *p;
    ckpt_map_input *in = NULL;
    const char *prefix;
    size_t n = 0, cap = 0, i, kept = 0;
    vsrc_parts parts;
    int rc;

    if (config && (rc = ckpt_vsrc__config_json(b, config, CKPT_FAMILY_HF, fp8_config, fp8_block, &hc)) < 0)
        return rc;
    if (family)
        *family = hc.family;
    if (!config)
        ckpt_model_builder_config_source(b, "any config.json (none beside the weights or above them)");
    if ((rc = ckpt_open(&c, weights, open)) < 0 || (rc = ckpt_vsrc__keep_ckpt(b, c)) < 0)
        return rc;
    prefix = container_prefix(c);
    if ((rc = ckpt_vsrc__inputs(b, c, prefix, &in, &n, &cap)) < 0)
        goto done;
    if (fp8_block[0] && (rc = fp8_inputs(b, c, weights, prefix, fp8_block, in, &n)) < 0)
        goto done;
    /* a module file also holds things beside its weights (frozen_param_fragments/...) */
    for (i = 0; prefix && i < n; i++)
        if (strchr(in[i].name, '/') == NULL)
            in[kept++] = in[i];
    if (prefix)
        n = kept;
    memset(&parts, 0, sizeof parts);
    if ((rc = ckpt_vsrc__map(b, hc.verify_map, &map)) < 0 || (rc = ckpt_vsrc__map_params(b, &p)) < 0 ||
        (hc.family && (rc = ckpt_family_map_params(hc.family, hc.config, p)) < 0) ||
        (check_whole && config && (rc = check_normalized(b, &hc, map, p, config, weights, in, n)) < 0) ||
        (rc = ckpt_model_builder_set_ranks(b, 1)) < 0 ||
        (rc = ckpt_vsrc__map_rank(b, 0, map, p, in, n, &parts)) < 0)
        goto done;
    rc = ckpt_vsrc__add_parts(b, &parts, 1);
done:
    free(in);
    return rc;
}

int ckpt_vsrc__hf_weights(ckpt_model_builder *b, const char *weights, const char *config,
                          const ckpt_open_options *open)
{
    return hf_weights(b, weights, config, open, 0, NULL);
}

static int hf_open(ckpt_model_builder *b)
{
    const char *path = ckpt_model_builder_path(b);
    char weights[4096], config[4096], dir[4096];
    struct stat st;
    const char *slash, *file;
    const ckpt_family *family = NULL;
    int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode), found, rc;

    if (is_dir) {
        if ((rc = weights_in(path, weights, sizeof weights)) < 0)
            return ckpt_error_setc(rc, CKPT_ERRCLASS_MODEL, "%s: no model.safetensors(.index.json) or pytorch_model.bin",
                                   path);
        snprintf(dir, sizeof dir, "%s", path);
    } else {
        snprintf(weights, sizeof weights, "%s", path);
        slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    }
    found = ckpt_vsrc__find_config(dir, is_dir ? 0 : 2, config, sizeof config) == 0;
    rc = hf_weights(b, weights, found ? config : NULL, NULL, is_dir, &family);
    /* the family its config.json names; without one (or with one refused, saying why) none */
    file = strrchr(weights, '/') ? strrchr(weights, '/') + 1 : weights;
    if (family)
        ckpt_model_builder_kind(b, "Hugging Face %s (%s)", ckpt_family_title(family), file);
    else
        ckpt_model_builder_kind(b, "Hugging Face (%s)", file);
    return rc;
}

const ckpt_model_source_vtable ckpt_model_source_hf = {
    .abi_version = CKPT_MODEL_SOURCE_ABI_VERSION,
    .name = "huggingface",
    .bid = hf_bid,
    .open = hf_open,
};
