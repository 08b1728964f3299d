/* Helpers for the GPT-2 unit tests: transformers' testdata/hf/gpt2_tiny opened as map inputs
 * (under GPT2Model's hub names too), node values, its config.json read (edited) through the
 * GPT-2 family, and the family's maps and Megatron args for it. */
#ifndef CKPT_TEST_GPT2_FIXTURE_H
#define CKPT_TEST_GPT2_FIXTURE_H

#include "family_fixture.h"

#include <cjson/cJSON.h>

#define HIDDEN 32
#define HEADS 4
#define HEAD_DIM 8
#define FFN 128
#define VOCAB 128
#define POSITIONS 64
#define FIXTURE "hf/gpt2_tiny/model.safetensors"

/* The fixture's tensors; with strip, under the hub's GPT2Model names (no "transformer."). */
static inline int gpt2_open(fixture *f, int strip)
{
    return fx_open(f, FIXTURE, strip ? "transformer." : NULL, NULL);
}

/* A float32 node's values (malloc'd); NULL when it cannot be read. */
static inline float *values(const ckpt_node *x)
{
    float *v = x ? malloc((size_t)ckpt_node_numel(x) * sizeof *v + 1) : NULL;

    if (v && ckpt_node_read(x, 0, ckpt_node_numel(x), CKPT_DTYPE_F32, v) < 0) {
        free(v);
        v = NULL;
    }
    return v;
}

static inline int params_for(ckpt_map_params **p, int64_t padded)
{
    int rc;

    if ((rc = ckpt_map_params_new(p)) < 0 || (rc = ckpt_map_params_set(*p, "hidden_size", HIDDEN)) < 0 ||
        (rc = ckpt_map_params_set(*p, "num_attention_heads", HEADS)) < 0 ||
        (rc = ckpt_map_params_set(*p, "vocab_size", VOCAB)) < 0)
        return rc;
    return ckpt_map_params_set(*p, "padded_vocab_size", padded);
}

/* The config.json of a fixture directory, edited: each pair of edits is a key and a JSON
 * value (NULL: the key removed). */
static inline int read_config(const char *dir, const char *const *edits, size_t n_edits, const ckpt_family **f,
                       ckpt_family_config **c)
{
    char path[256], *text;
    size_t len, i;
    unsigned char *raw;
    cJSON *j;
    int rc;

    snprintf(path, sizeof path, "%s/config.json", dir);
    raw = ckpt_test_read_file(ckpt_test_data(path), &len);
    j = raw ? cJSON_ParseWithLength((const char *)raw, len) : NULL;
    free(raw);
    for (i = 0; j && i + 1 < n_edits; i += 2) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, edits[i]);
        if (edits[i + 1])
            cJSON_AddItemToObject(j, edits[i], cJSON_Parse(edits[i + 1]));
    }
    text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!text)
        return CKPT_ENOMEM;
    *c = NULL;
    rc = ckpt_family_detect(f, CKPT_FAMILY_HF, "in/config.json", text);
    if (rc == 0)
        rc = ckpt_family_config_read(c, *f, CKPT_FAMILY_HF, "in/config.json", text);
    cJSON_free(text);
    return rc;
}

/* The GPT-2 family's map between Hugging Face and Megatron names for a transformer_impl. */
static inline int family_map(const char *impl, int to_hf, ckpt_map **m)
{
    const ckpt_family *f;
    int rc = ckpt_family_builtin(&f, "gpt2");

    return rc < 0 ? rc : ckpt_family_map(f, CKPT_FAMILY_MEGATRON, impl, to_hf, m);
}

static inline int apply_family(const char *impl, int to_hf, const ckpt_map_params *p, ckpt_graph *g, const ckpt_map_input *in,
                        size_t n, ckpt_map_result **r)
{
    ckpt_map *m = NULL;
    int rc = family_map(impl, to_hf, &m);

    if (rc >= 0)
        rc = ckpt_map_apply(m, p, g, in, n, NULL, r);
    ckpt_map_free(m);
    return rc;
}

/* The args the GPT-2 family writes for the fixture's config.json at TP 2. */
static inline int family_args(ckpt_arena *a, const char *impl, ckpt_value **args)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    int rc = read_config("hf/gpt2_tiny", NULL, 0, &f, &c);

    if (rc == 0)
        rc = ckpt_family_config_args(f, c, a, 2, impl, args);
    ckpt_family_config_free(c);
    return rc;
}

#endif
