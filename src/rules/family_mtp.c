/* Multi-token prediction layers' copies of the main model's tensors (hf_tensors.mtp_shared):
 * DeepSeek-V3 stores its MTP layer M as layer num_hidden_layers + M with its own embed_tokens
 * and shared_head.head, equal to the model's embed_tokens and lm_head; Megatron keeps one of
 * each and the MTP layers use it (GPTModel passes its embedding and output layer to
 * MultiTokenPredictionBlock). */
#include "family_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *shared(const ckpt_family *f)
{
    return cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "mtp_shared");
}

/* "model.layers." and "." around {L} of hf_tensors.layer */
static int layer_prefix(const ckpt_family *f, char *prefix, size_t cap, const char **suffix)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "layer");
    const char *s = cJSON_IsString(l) ? l->valuestring : NULL, *hole = s ? strstr(s, "{L}") : NULL;

    if (!hole || (size_t)(hole - s) >= cap)
        return 0;
    snprintf(prefix, cap, "%.*s", (int)(hole - s), s);
    *suffix = hole + 3;
    return 1;
}

const char *ckpt_family_mtp_copy_of(const ckpt_family *f, const ckpt_family_config *c, const char *framework,
                                    const char *name)
{
    int64_t layers, mtp;
    const cJSON *e;
    const char *suffix, *rest;
    char prefix[128], *end;
    size_t n;
    long long layer;

    if (!f || !c || !framework || !name || strcmp(framework, CKPT_FAMILY_HF) != 0 || !shared(f) ||
        !layer_prefix(f, prefix, sizeof prefix, &suffix))
        return NULL;
    n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || name[n] < '1' || name[n] > '9')
        return NULL;
    layer = strtoll(name + n, &end, 10);
    if (strncmp(end, suffix, strlen(suffix)) != 0)
        return NULL;
    rest = end + strlen(suffix);
    layers = ckpt_family__int(c, "num_layers", 0);
    mtp = ckpt_family__int(c, "mtp_layers", 0);
    if (layer < layers || layer - layers >= mtp)
        return NULL;
    cJSON_ArrayForEach(e, shared(f))
        if (strcmp(e->string, rest) == 0 && cJSON_IsString(e))
            return e->valuestring;
    return NULL;
}

int ckpt_family_mtp_copy(const ckpt_family *f, const ckpt_family_config *c, const char *framework, int64_t m, size_t i,
                         ckpt_buf *name, const char **of)
{
    const cJSON *e;
    const char *suffix;
    char prefix[128];
    int64_t layers;

    if (!f || !c || !framework || !name || !of)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_mtp_copy: NULL argument");
    if (strcmp(framework, CKPT_FAMILY_HF) != 0 || !shared(f) || m < 0 || m >= ckpt_family__int(c, "mtp_layers", 0) ||
        !layer_prefix(f, prefix, sizeof prefix, &suffix) || !(e = cJSON_GetArrayItem(shared(f), (int)i)) ||
        !cJSON_IsString(e))
        return 0;
    layers = ckpt_family__int(c, "num_layers", 0);
    *of = e->valuestring;
    return ckpt_buf_printf(name, "%s%lld%s%s", prefix, (long long)(layers + m), suffix, e->string) < 0 ? CKPT_ENOMEM : 1;
}
