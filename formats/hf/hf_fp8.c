/* Hugging Face checkpoints released in FP8 with block scales (DeepSeek-V3/R1, Qwen3 "-FP8"):
 * config.json's quantization_config {"quant_method": "fp8", "fmt": "e4m3",
 * "weight_block_size": [R, C]}, each quantised `X.weight` stored F8_E4M3 beside its float32
 * `X.weight_scale_inv` of [ceil(rows / R), ceil(cols / C)]. The weights are read as bfloat16,
 * dequantised as they are read (float32 product, rounded to nearest even, as DeepSeek's
 * fp8_cast_bf16.py and transformers' FP8 dequantisation do); the scales are consumed. Kept
 * as they are (CKPT_FP8_KEEP), every weight and scale is checked all the same. */
#include "hf_private.h"

#include <ckpt/graph.h>
#include <ckpt/sys/common.h>

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCALE_SUFFIX "_scale_inv"
#define BLOCK_MAX (1 << 20)

static int fp8_fail(const char *path, const char *why)
{
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT, "%s: quantization_config: %s", path, why);
}

/* The block sizes of an FP8 block-scaled quantization_config; 0 with blocks 0 for a config
 * without one (another quant_method is left to the family's checks, which refuse it). */
static int parse_fp8(const char *path, const cJSON *q, int64_t block[2])
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(q, "quant_method"),
                *fmt = cJSON_GetObjectItemCaseSensitive(q, "fmt"),
                *bs = cJSON_GetObjectItemCaseSensitive(q, "weight_block_size");
    int i;

    block[0] = block[1] = 0;
    if (!cJSON_IsString(m) || strcmp(m->valuestring, "fp8") != 0)
        return 0;
    if (fmt && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "e4m3") != 0))
        return fp8_fail(path, "fmt is not \"e4m3\" (only E4M3 block-scaled FP8 weights are read)");
    if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2)
        return fp8_fail(path, "weight_block_size is not [rows, cols] (per-tensor FP8 scales are not read)");
    for (i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetArrayItem(bs, i);
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > BLOCK_MAX ||
            v->valuedouble != (double)(int64_t)v->valuedouble)
            return fp8_fail(path, "weight_block_size holds a block size that is not a positive integer");
        block[i] = (int64_t)v->valuedouble;
    }
    return 0;
}

int ckpt_hf__fp8_config(const char *path, char **text, int64_t block[2])
{
    cJSON *j = cJSON_Parse(*text), *q;
    char *out;
    int rc;

    block[0] = block[1] = 0;
    if (!j)
        return 0; /* the family reader names the malformed file */
    q = cJSON_GetObjectItemCaseSensitive(j, "quantization_config");
    if (!q || (rc = parse_fp8(path, q, block)) < 0 || !block[0]) {
        cJSON_Delete(j);
        return q ? rc : 0;
    }
    /* the weights are read as bf16: the family sees (and writes) no quantization */
    cJSON_DeleteItemFromObjectCaseSensitive(j, "quantization_config");
    out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!out)
        return ckpt_error_oom();
    free(*text);
    *text = out;
    return 0;
}

static int is_scale(const char *name)
{
    size_t n = strlen(name), k = strlen(SCALE_SUFFIX);
    return n > k && strcmp(name + n - k, SCALE_SUFFIX) == 0;
}

/* A scale's weight must be an FP8 tensor of the checkpoint. */
static int check_scale(const ckpt_ckpt *ck, const char *file, const ckpt_tensor *s)
{
    char name[1024];
    size_t n = strlen(s->name) - strlen(SCALE_SUFFIX);
    const ckpt_tensor *w;

    if (n >= sizeof name)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: %s: name too long", file, s->name);
    memcpy(name, s->name, n);
    name[n] = '\0';
    if (!(w = ckpt_tensor_find(ck, name)))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: %s: a scale without its weight %s", file,
                               s->name, name);
    if (w->dtype != CKPT_DTYPE_F8_E4M3FN)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: %s: the scale of %s, which is %s, not F8_E4M3", file, s->name, name,
                               ckpt_dtype_name(w->dtype));
    return 0;
}

/* t checked as a tensor of an FP8 block-scaled checkpoint: a scale belongs to an F8_E4M3
 * weight, an F8_E4M3 weight has its scale of [ceil(rows / R), ceil(cols / C)]. *scale: that
 * weight's scale, NULL for any other tensor. */
static int fp8_check(const ckpt_ckpt *ck, const char *file, const ckpt_tensor *t, const int64_t block[2],
                     const ckpt_tensor **scale)
{
    char name[1024];
    const ckpt_tensor *s;

    *scale = NULL;
    if (is_scale(t->name))
        return check_scale(ck, file, t);
    if (t->dtype == CKPT_DTYPE_F8_E5M2)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT,
                               "%s: %s: F8_E5M2 weights in a checkpoint whose quantization_config says e4m3", file,
                               t->name);
    if (t->dtype != CKPT_DTYPE_F8_E4M3FN)
        return 0;
    if ((size_t)snprintf(name, sizeof name, "%s%s", t->name, SCALE_SUFFIX) >= sizeof name)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: %s: name too long", file, t->name);
    if (!(s = ckpt_tensor_find(ck, name)))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: %s: an FP8 weight without its scale %s", file,
                               t->name, name);
    if (t->ndim != 2 || s->ndim != 2 || s->shape[0] != (t->shape[0] + block[0] - 1) / block[0] ||
        s->shape[1] != (t->shape[1] + block[1] - 1) / block[1])
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: %s: scale %s is not [ceil(rows / %lld), ceil(cols / %lld)] of its %d-D weight", file,
                               t->name, name, (long long)block[0], (long long)block[1], t->ndim);
    *scale = s;
    return 0;
}

int ckpt_hf__fp8_node(ckpt_graph *g, const ckpt_ckpt *ck, const char *file, const ckpt_tensor *t,
                      const int64_t block[2], ckpt_fp8_mode mode, const ckpt_node **out)
{
    const ckpt_tensor *s;
    int rc;

    *out = NULL;
    if ((rc = fp8_check(ck, file, t, block, &s)) < 0)
        return rc;
    if (mode == CKPT_FP8_KEEP || (!s && !is_scale(t->name)))
        return ckpt_node_tensor(g, t, out);
    if (!s)
        return 0;
    if ((rc = ckpt_node_block_dequant(g, t, s, block[0], block[1], CKPT_DTYPE_BF16, out)) < 0)
        ckpt_error_prefix("%s", file);
    return rc;
}
