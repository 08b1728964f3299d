/* A Hugging Face LLaMA-family directory checked against itself, through its family
 * (formats/families): config.json read with every value typed and bounded, and the tensors
 * held against what that config implies, so that a conversion never starts from a config
 * that does not describe its weights. */
#include "hf_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

/* config.json is a few kilobytes; a bound keeps a mistaken path from being read whole. */
#define MAX_CONFIG_BYTES (16u << 20)

void ckpt_hf_llama_dims_init(ckpt_hf_llama_dims *d)
{
    memset(d, 0, sizeof *d);
    d->max_positions = 2048;
    d->rms_norm_eps = 1e-6;
    d->rope_theta = 10000.0;
    d->initializer_range = 0.02;
    d->dtype = CKPT_DTYPE_BF16;
    d->bos_token_id = d->eos_token_id = d->pad_token_id = -1;
}

/* transformers 5's rope_parameters is read before anything else: a config whose RoPE is no
 * object says so first, whatever else is wrong with it (as it always has). */
static int rope_parameters_first(const char *path, const char *text)
{
    cJSON *cfg = cJSON_Parse(text);
    const cJSON *r = NULL, *c;
    int rc = 0;

    for (c = cJSON_IsObject(cfg) ? cfg->child : NULL; c; c = c->next)
        if (c->string && strcmp(c->string, "rope_parameters") == 0)
            r = c;
    if (r && !cJSON_IsNull(r) && !cJSON_IsObject(r))
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: rope_parameters is not an object", path);
    cJSON_Delete(cfg);
    return rc;
}

/* The config.json text json (len bytes) as a config of the family it names. */
static int parse_config(const char *path, const char *json, size_t len, ckpt_family_config **c)
{
    const ckpt_family *f;
    char *text;
    int rc;

    *c = NULL;
    if (len > MAX_CONFIG_BYTES)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: larger than %u bytes; not a config.json", path,
                               MAX_CONFIG_BYTES);
    if (!json)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not valid JSON", path);
    /* the family API reads NUL-terminated text */
    if (!(text = malloc(len + 1)))
        return ckpt_error_oom();
    memcpy(text, json, len);
    text[len] = 0;
    if ((rc = rope_parameters_first(path, text)) == 0 && (rc = ckpt_family_detect(&f, CKPT_FAMILY_HF, path, text)) == 0)
        rc = ckpt_family_config_read(c, f, CKPT_FAMILY_HF, path, text);
    free(text);
    return rc;
}

int ckpt_hf_llama_dims_parse(const char *path, const char *json, size_t len, ckpt_hf_llama_dims *d)
{
    ckpt_family_config *c = NULL;
    int rc;

    if ((rc = parse_config(path, json, len, &c)) == 0)
        rc = ckpt_hf__dims_of(c, d);
    ckpt_family_config_free(c);
    return rc;
}

int ckpt_hf__config_read(const char *path, ckpt_family_config **out)
{
    ckpt_file *f = NULL;
    int rc;

    *out = NULL;
    if ((rc = ckpt_file_open(&f, path)) < 0)
        return rc;
    rc = parse_config(path, (const char *)f->data, f->data ? (size_t)f->size : 0, out);
    ckpt_file_close(f);
    return rc;
}

int ckpt_hf_llama_dims_read(const char *path, ckpt_hf_llama_dims *d)
{
    ckpt_file *f = NULL;
    int rc;

    ckpt_hf_llama_dims_init(d);
    if ((rc = ckpt_file_open(&f, path)) < 0)
        return rc;
    rc = ckpt_hf_llama_dims_parse(path, (const char *)f->data, f->data ? (size_t)f->size : 0, d);
    ckpt_file_close(f);
    return rc;
}

int ckpt_hf_llama_map_params(const ckpt_hf_llama_dims *d, ckpt_map_params *p)
{
    ckpt_family_config *c;
    int rc;

    if ((rc = ckpt_hf__config_of(d, "config.json", &c)) < 0)
        return rc;
    rc = ckpt_family_map_params(ckpt_family_config_family(c), c, p);
    ckpt_family_config_free(c);
    return rc;
}

const char *ckpt_hf_left_out_rule(const char *name)
{
    return ckpt_family_left_out(ckpt_hf__family(CKPT_HF_LLAMA), CKPT_FAMILY_HF, name);
}

int ckpt_hf_llama_check_tensors(const ckpt_hf_llama_dims *d, const char *config, const char *weights,
                                const ckpt_map_input *in, size_t n)
{
    ckpt_family_config *c;
    int rc;

    if ((rc = ckpt_hf__config_of(d, config, &c)) < 0)
        return rc;
    rc = ckpt_family_check_tensors(ckpt_family_config_family(c), c, CKPT_FAMILY_HF, config, weights, in, n);
    ckpt_family_config_free(c);
    return rc;
}
