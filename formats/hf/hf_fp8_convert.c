/* convert of a Hugging Face model directory released in FP8 with block scales: its weights
 * written as ckpt_graph_write writes them, the FP8 ones dequantised to bf16 (hf_fp8.c), their
 * scales consumed, or both kept as stored once checked. */
#include "hf_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONFIG_MAX (16u << 20)

/* The block sizes dir's config.json gives, {0, 0} when it says no FP8 block scaling or dir is
 * no model directory. */
static int dir_blocks(const char *dir, char *config, size_t cap, int64_t block[2])
{
    ckpt_file *f = NULL;
    struct stat st;
    char *text;
    int rc;

    block[0] = block[1] = 0;
    if ((size_t)snprintf(config, cap, "%s/config.json", dir) >= cap || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
        stat(config, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    if ((rc = ckpt_file_open(&f, config)) < 0)
        return rc;
    if (f->size > CONFIG_MAX)
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: %llu bytes, more than a config.json holds",
                             config, (unsigned long long)f->size);
    else if (!(text = malloc((size_t)f->size + 1)))
        rc = ckpt_error_oom();
    else {
        if (f->size)
            memcpy(text, f->data, (size_t)f->size);
        text[f->size] = '\0';
        rc = ckpt_hf__fp8_config(config, &text, block);
        free(text);
    }
    ckpt_file_close(f);
    return rc;
}

int ckpt_hf_fp8_dir(const char *dir)
{
    char config[4096];
    int64_t block[2];
    int rc = dir_blocks(dir, config, sizeof config, block);

    return rc < 0 ? rc : block[0] > 0;
}

int ckpt_hf_fp8_nodes(const char *dir, const ckpt_ckpt *ck, ckpt_graph *g, ckpt_fp8_mode mode, const char **names,
                      const ckpt_node **nodes, size_t *n)
{
    char config[4096];
    int64_t block[2];
    size_t i;
    int rc;

    *n = 0;
    if ((rc = dir_blocks(dir, config, sizeof config, block)) < 0)
        return rc;
    if (!block[0])
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_FORMAT, "%s: no FP8 block-scaled quantization_config",
                               config);
    for (i = 0; i < ckpt_tensor_count(ck); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(ck, i);
        const ckpt_node *node;
        if ((rc = ckpt_hf__fp8_node(g, ck, ckpt_path(ck), t, block, mode, &node)) < 0)
            return rc;
        if (node) {
            names[*n] = t->name;
            nodes[(*n)++] = node;
        }
    }
    return 0;
}

int ckpt_hf_fp8_convert(const char *dir, const char *path, ckpt_fp8_mode mode, const ckpt_convert_options *opts,
                        ckpt_convert_report *report)
{
    char *weights = NULL;
    ckpt_ckpt *ck = NULL;
    ckpt_graph *g = NULL;
    ckpt_graph_output *outs = NULL;
    const char **names = NULL;
    const ckpt_node **nodes = NULL;
    size_t i, n = 0, count;
    int rc;

    /* filled in on every path, as ckpt_convert's callers dispose of it whatever the result */
    if (report)
        memset(report, 0, sizeof *report);
    if ((rc = ckpt_hf_weights_path(dir, &weights)) < 0 || (rc = ckpt_open(&ck, weights, NULL)) < 0 ||
        (rc = ckpt_graph_new(&g)) < 0)
        goto done;
    count = ckpt_tensor_count(ck) + 1;
    outs = calloc(count, sizeof *outs);
    names = calloc(count, sizeof *names);
    nodes = calloc(count, sizeof *nodes);
    if (!outs || !names || !nodes) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = ckpt_hf_fp8_nodes(dir, ck, g, mode, names, nodes, &n)) < 0)
        goto done;
    for (i = 0; i < n; i++) {
        outs[i].name = names[i];
        outs[i].node = nodes[i];
    }
    rc = ckpt_graph_write(outs, n, path, opts, report);
done:
    free(outs);
    free(names);
    free(nodes);
    ckpt_graph_free(g);
    ckpt_close(ck);
    free(weights);
    return rc;
}
