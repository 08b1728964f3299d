/* Helpers for the GPT-2 unit tests: transformers' testdata/hf/gpt2_tiny opened as map inputs
 * (under GPT2Model's hub names too), node values, its config.json read (edited) through the
 * GPT-2 family, and the family's maps and Megatron args for it. */
#ifndef CKPT_TEST_GPT2_FIXTURE_H
#define CKPT_TEST_GPT2_FIXTURE_H

#include "test.h"

#include <ckpt/family.h>
#include <ckpt/megatron.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN 64
#define HIDDEN 32
#define HEADS 4
#define HEAD_DIM 8
#define FFN 128
#define VOCAB 128
#define POSITIONS 64
#define FIXTURE "hf/gpt2_tiny/model.safetensors"

typedef struct fixture {
    ckpt_ckpt *ck;
    ckpt_graph *g;
    ckpt_map_input in[MAX_IN];
    char names[MAX_IN][96];
    size_t n;
} fixture;

/* The fixture's tensors; with strip, under the hub's GPT2Model names (no "transformer."). */
static inline int fx_open(fixture *f, int strip)
{
    size_t i;
    int rc;

    memset(f, 0, sizeof *f);
    if ((rc = ckpt_graph_new(&f->g)) < 0 || (rc = ckpt_open(&f->ck, ckpt_test_data(FIXTURE), NULL)) < 0)
        return rc;
    for (i = 0; i < ckpt_tensor_count(f->ck) && f->n < MAX_IN; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f->ck, i);
        const char *name = t->name;
        if (strip && strncmp(name, "transformer.", 12) == 0)
            name += 12;
        snprintf(f->names[f->n], sizeof f->names[0], "%s", name);
        f->in[f->n].name = f->names[f->n];
        if ((rc = ckpt_node_tensor(f->g, t, &f->in[f->n].node)) < 0)
            return rc;
        f->n++;
    }
    return 0;
}

static inline void fx_close(fixture *f)
{
    ckpt_close(f->ck);
    ckpt_graph_free(f->g);
    memset(f, 0, sizeof *f);
}

static inline const ckpt_node *in_node(const fixture *f, const char *name)
{
    size_t i;
    for (i = 0; i < f->n; i++)
        if (strcmp(f->in[i].name, name) == 0)
            return f->in[i].node;
    return NULL;
}

static inline const ckpt_node *out_node(const ckpt_map_result *r, const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_map_result_count(r); i++)
        if (strcmp(ckpt_map_result_at(r, i)->name, name) == 0)
            return ckpt_map_result_at(r, i)->node;
    return NULL;
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

static inline int same_bytes(const ckpt_node *a, const ckpt_node *b)
{
    float *x, *y;
    int same;

    if (!a || !b || ckpt_node_dtype(a) != ckpt_node_dtype(b) || ckpt_node_ndim(a) != ckpt_node_ndim(b) ||
        memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) != 0)
        return 0;
    x = values(a);
    y = values(b);
    same = x && y && memcmp(x, y, (size_t)ckpt_node_numel(a) * sizeof *x) == 0;
    free(x);
    free(y);
    return same;
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

static inline int apply(const char *map, const ckpt_map_params *p, ckpt_graph *g, const ckpt_map_input *in, size_t n,
                 ckpt_map_result **r)
{
    ckpt_map *m = NULL;
    int rc = ckpt_map_builtin(&m, map);

    if (rc >= 0)
        rc = ckpt_map_apply(m, p, g, in, n, NULL, r);
    ckpt_map_free(m);
    return rc;
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
