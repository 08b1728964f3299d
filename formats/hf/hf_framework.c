/* Hugging Face as a framework: a model directory (config.json and safetensors, sharded with an
 * index, or pytorch_model.bin) opened as its family's model, or written from a model given
 * tensor by tensor: safetensors sharded as save_pretrained shards them, in transformers'
 * order, and the config.json of its family, read back and held against the tensors. */
#include "hf_private.h"

#include <ckpt/hf.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/framework.h>
#include <ckpt/sys/io.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONFIG_MAX (16u << 20)

extern const ckpt_model_source_vtable ckpt_model_source_hf;

typedef struct hf_fw {
    char *config, *weights; /* an opened directory's */
    ckpt_ckpt *ck;
    /* a created model's */
    const ckpt_family *f;
    const ckpt_family_config *c;
    char *source;
    ckpt_fw_tensor_list added;
    int64_t fp8_block[2]; /* an FP8 block-scaled checkpoint's block sizes, else 0 */
} hf_fw;

static int is_file_in(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;

    return (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path && stat(path, &st) == 0 &&
           S_ISREG(st.st_mode);
}

static int hf_bid(const char *path, int is_dir)
{
    if (!is_dir || !is_file_in(path, "config.json"))
        return -1;
    return is_file_in(path, "model.safetensors") || is_file_in(path, "model.safetensors.index.json") ||
                   is_file_in(path, "pytorch_model.bin")
               ? 16
               : -1;
}

static void hf_free(void *state)
{
    hf_fw *s = state;

    ckpt_close(s->ck);
    free(s->config);
    free(s->weights);
    free(s->source);
    ckpt_fw_tensor_list_dispose(&s->added);
    free(s);
}

/* config.json as NUL-terminated text, at most CONFIG_MAX bytes. */
static int read_config(const char *path, char **out)
{
    ckpt_file *f = NULL;
    int rc;

    *out = NULL;
    if ((rc = ckpt_file_open(&f, path)) < 0)
        return rc;
    if (f->size > CONFIG_MAX)
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: %llu bytes, more than a config.json holds",
                             path, (unsigned long long)f->size);
    else if (!(*out = malloc((size_t)f->size + 1)))
        rc = ckpt_error_oom();
    else {
        if (f->size)
            memcpy(*out, f->data, (size_t)f->size);
        (*out)[f->size] = '\0';
    }
    ckpt_file_close(f);
    return rc;
}

static int read_family(ckpt_fw_builder *b, hf_fw *s)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    char *text;
    int rc;

    if ((rc = read_config(s->config, &text)) < 0)
        return rc;
    if ((rc = ckpt_hf__fp8_config(s->config, &text, s->fp8_block)) == 0 &&
        (rc = ckpt_family_detect(&f, CKPT_FAMILY_HF, s->config, text)) == 0 &&
        (rc = ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, s->config, text)) == 0 &&
        (rc = ckpt_fw_builder_family(b, f, c)) == 0) {
        s->f = f;
        s->c = c;
    }
    free(text);
    return rc;
}

static int hf_open(ckpt_fw_builder *b, void **state)
{
    const char *dir = ckpt_fw_builder_path(b);
    ckpt_fw_info info;
    ckpt_buf config = CKPT_BUF_INIT;
    hf_fw *s = calloc(1, sizeof *s);
    size_t i;
    int rc;

    if (!s)
        return ckpt_error_oom();
    *state = s;
    if ((rc = ckpt_buf_printf(&config, "%s/config.json", dir)) < 0)
        return rc;
    s->config = (char *)config.data;
    if ((rc = ckpt_hf_weights_path(dir, &s->weights)) < 0 || (rc = read_family(b, s)) < 0 ||
        (rc = ckpt_open(&s->ck, s->weights, NULL)) < 0)
        return rc;
    for (i = 0; i < ckpt_tensor_count(s->ck) && rc == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(s->ck, i);
        const ckpt_node *node = NULL;
        if (s->fp8_block[0])
            rc = ckpt_hf__fp8_node(ckpt_fw_builder_graph(b), s->ck, s->weights, t, s->fp8_block, CKPT_FP8_DEQUANTIZE, &node);
        else
            rc = ckpt_node_tensor(ckpt_fw_builder_graph(b), t, &node);
        if (rc == 0 && node)
            rc = ckpt_fw_builder_add(b, t->name, node, NULL);
    }
    if (rc < 0)
        return rc;
    memset(&info, 0, sizeof info);
    info.tp = info.pp = info.vpp = info.ep = info.dp = 1;
    info.iteration = -1;
    return ckpt_fw_builder_info(b, &info);
}

static int hf_check(void *state, const ckpt_map_input *kept, size_t n)
{
    hf_fw *s = state;
    return ckpt_family_check_tensors(s->f, s->c, CKPT_FAMILY_HF, s->config, s->weights, kept, n);
}

static int hf_create(ckpt_fw_builder *b, const ckpt_fw_target *t, void **state)
{
    hf_fw *s = calloc(1, sizeof *s);
    ckpt_fw_info info;

    if (!s)
        return ckpt_error_oom();
    *state = s;
    s->f = ckpt_fw_builder_target_family(b, &s->c);
    if (!s->f || !s->c)
        return ckpt_error_set(CKPT_EINVALID, "huggingface: a new model needs its family and config");
    if (!(s->source = strdup(t->source ? t->source : "the source")))
        return ckpt_error_oom();
    memset(&info, 0, sizeof info);
    info.tp = info.pp = info.vpp = info.ep = info.dp = 1;
    info.iteration = -1;
    return ckpt_fw_builder_info(b, &info);
}

static int hf_add(void *state, const char *name, const ckpt_node *full)
{
    hf_fw *s = state;

    return ckpt_fw_tensor_list_add(&s->added, name, full);
}

static int config_bool(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;
    return ckpt_family_config_get(c, field, &v) == 0 && v && v->kind == CKPT_VAL_BOOL && v->u.boolean;
}

/* The config.json made for these tensors, read back as a Hugging Face one is read and held
 * against them, so that no value that does not fit them is written. */
static int check_config(const hf_fw *s, const ckpt_buf *json, const char *const *names,
                        const ckpt_node *const *nodes, size_t n)
{
    ckpt_map_input *in = calloc(n + 1, sizeof *in);
    ckpt_family_config *c = NULL;
    ckpt_buf what = CKPT_BUF_INIT;
    size_t i;
    int rc;

    if (!in || ckpt_buf_printf(&what, "config.json made from the args of %s", s->source) < 0) {
        free(in);
        ckpt_buf_dispose(&what);
        return ckpt_error_oom();
    }
    for (i = 0; i < n; i++) {
        in[i].name = names[i];
        in[i].node = nodes[i];
    }
    if ((rc = ckpt_family_config_read(&c, s->f, CKPT_FAMILY_HF, (const char *)what.data, json->data)) == 0)
        rc = ckpt_family_check_tensors(s->f, c, CKPT_FAMILY_HF, (const char *)what.data, s->source, in, n);
    ckpt_family_config_free(c);
    free(in);
    ckpt_buf_dispose(&what);
    return rc;
}

/* Tensors in transformers' order (a tied lm_head.weight left to transformers, which ties it on
 * load), sharded as save_pretrained shards them, and the family's config.json. */
static int hf_plan(void *state, const ckpt_fw_target *t, ckpt_plan *plan)
{
    hf_fw *s = state;
    const char **names = calloc(s->added.n + 1, sizeof *names);
    const ckpt_node **nodes = calloc(s->added.n + 1, sizeof *nodes);
    size_t *perm = calloc(s->added.n + 1, sizeof *perm);
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_dtype dtype = CKPT_DTYPE_F32;
    int tied = config_bool(s->c, "tied"), rc;
    size_t i, k = 0;

    if (!names || !nodes || !perm) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < s->added.n; i++)
        names[i] = s->added.names[i];
    if ((rc = ckpt_family_order(s->f, CKPT_FAMILY_HF, names, s->added.n, perm)) < 0)
        goto done;
    for (i = 0; i < s->added.n; i++) {
        const char *name = s->added.names[perm[i]];
        if (tied && strcmp(name, "lm_head.weight") == 0)
            continue;
        if (strcmp(name, "model.embed_tokens.weight") == 0)
            dtype = ckpt_node_dtype(s->added.nodes[perm[i]]);
        names[k] = name;
        nodes[k++] = s->added.nodes[perm[i]];
    }
    if ((rc = ckpt_hf_plan_safetensors(plan, names, nodes, k, t->max_shard_size)) < 0 ||
        (rc = ckpt_family_config_json(s->f, s->c, CKPT_FAMILY_HF, dtype, &json)) < 0 ||
        (rc = check_config(s, &json, names, nodes, k)) < 0)
        goto done;
    rc = ckpt_plan_add_bytes(plan, "config.json", json.data, json.len);
done:
    ckpt_buf_dispose(&json);
    free(names);
    free(nodes);
    free(perm);
    return rc;
}

const ckpt_fw_vtable ckpt_framework_huggingface = {
    CKPT_FRAMEWORK_ABI_VERSION,
    CKPT_FAMILY_HF,
    "Hugging Face model directories (config.json and safetensors, or pytorch_model.bin)",
    NULL,
    &ckpt_model_source_hf,
    hf_bid,
    hf_open,
    hf_create,
    hf_add,
    hf_plan,
    hf_free,
    NULL,
    NULL,
    hf_check,
    NULL,
    NULL,
};
