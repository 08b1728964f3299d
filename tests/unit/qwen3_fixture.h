/* Helpers of the Qwen3 unit tests (test_family_qwen3*.c): testdata/hf/transformers5/qwen3_tiny
 * (transformers 5.24: q/k RMSNorm per head, head_dim 16 while hidden / heads is 8) as map inputs
 * in a graph, its config.json, map parameters and the Megatron args hf2mcore writes for it. */
#ifndef CKPT_TEST_QWEN3_FIXTURE_H
#define CKPT_TEST_QWEN3_FIXTURE_H

#include "test.h"

#include <ckpt/family.h>
#include <ckpt/megatron.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QWEN3 "hf/transformers5/qwen3_tiny"
#define MAX_IN 64

typedef struct fixture {
    ckpt_ckpt *ck;
    ckpt_map_input in[MAX_IN];
    size_t n;
} fixture;

/* The fixture's tensors as map inputs in g; ckpt_close(f->ck) after, on failure too. */
static inline int fx_open(fixture *f, ckpt_graph *g)
{
    size_t i;
    int rc;

    memset(f, 0, sizeof *f);
    if ((rc = ckpt_open(&f->ck, ckpt_test_data(QWEN3 "/model.safetensors"), NULL)) < 0)
        return rc;
    for (i = 0; i < ckpt_tensor_count(f->ck) && f->n < MAX_IN; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f->ck, i);
        f->in[f->n].name = t->name;
        if ((rc = ckpt_node_tensor(g, t, &f->in[f->n].node)) < 0)
            return rc;
        f->n++;
    }
    return 0;
}

/* The node of an input or output by name, or NULL. */
static inline const ckpt_node *in_find(const fixture *f, const char *name)
{
    size_t i;
    for (i = 0; i < f->n; i++)
        if (strcmp(f->in[i].name, name) == 0)
            return f->in[i].node;
    return NULL;
}

static inline const ckpt_node *out_find(const ckpt_map_result *r, const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_map_result_count(r); i++)
        if (strcmp(ckpt_map_result_at(r, i)->name, name) == 0)
            return ckpt_map_result_at(r, i)->node;
    return NULL;
}

/* Same dtype, shape and bytes. */
static inline int same_node(const ckpt_node *a, const ckpt_node *b)
{
    size_t len;
    unsigned char *x, *y;
    int same;

    if (!a || !b || ckpt_node_dtype(a) != ckpt_node_dtype(b) || ckpt_node_ndim(a) != ckpt_node_ndim(b) ||
        memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) != 0)
        return 0;
    len = (size_t)ckpt_node_numel(a) * ckpt_dtype_size(ckpt_node_dtype(a));
    x = malloc(len + 1);
    y = malloc(len + 1);
    same = x && y && ckpt_node_read(a, 0, ckpt_node_numel(a), ckpt_node_dtype(a), x) >= 0 &&
           ckpt_node_read(b, 0, ckpt_node_numel(b), ckpt_node_dtype(b), y) >= 0 && memcmp(x, y, len) == 0;
    free(x);
    free(y);
    return same;
}

/* config.json's integers (head_dim 16 among them), and the vocabulary as Megatron pads it at
 * TP 2 (to a multiple of 128 x 2). */
#define PADDED_VOCAB 256
static inline int qwen3_params(ckpt_map_params **p)
{
    int rc = ckpt_map_params_new(p);
    if (rc >= 0)
        rc = ckpt_map_params_load_json(*p, ckpt_test_data(QWEN3 "/config.json"));
    return rc < 0 ? rc : ckpt_map_params_set(*p, "padded_vocab_size", PADDED_VOCAB);
}

static inline int64_t int_of(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0)
        return -99;
    return v->kind == CKPT_VAL_INT ? v->u.integer : v->kind == CKPT_VAL_BOOL ? v->u.boolean : v->kind == CKPT_VAL_NONE ? -1 : -98;
}

static inline double real_of(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0)
        return -99;
    return v->kind == CKPT_VAL_FLOAT ? v->u.real : v->kind == CKPT_VAL_INT ? (double)v->u.integer : -98;
}

/* config.json as the NUL-terminated text the family reads. */
static inline char *fixture_config(void)
{
    size_t len;
    unsigned char *raw = ckpt_test_read_file(ckpt_test_data(QWEN3 "/config.json"), &len);
    char *text = raw ? malloc(len + 1) : NULL;

    if (text) {
        memcpy(text, raw, len);
        text[len] = 0;
    }
    free(raw);
    return text;
}

/* The args hf2mcore writes for qwen3_tiny say Qwen3 with or without hf_model_type. */
static inline ckpt_value *qwen3_args(ckpt_arena *a)
{
    ckpt_value *args = NULL;

    if (ckpt_megatron_args_new(a, &args) < 0 || ckpt_megatron_args_set_int(a, args, "num_layers", 2) < 0 ||
        ckpt_megatron_args_set_int(a, args, "hidden_size", 32) < 0 ||
        ckpt_megatron_args_set_int(a, args, "ffn_hidden_size", 64) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_attention_heads", 4) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_query_groups", 2) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "group_query_attention", 1) < 0 ||
        ckpt_megatron_args_set_int(a, args, "kv_channels", 16) < 0 ||
        ckpt_megatron_args_set_int(a, args, "vocab_size", 128) < 0 ||
        ckpt_megatron_args_set_str(a, args, "position_embedding_type", "rope") < 0 ||
        ckpt_megatron_args_set_float(a, args, "rotary_base", 1e6) < 0 ||
        ckpt_megatron_args_set_str(a, args, "normalization", "RMSNorm") < 0 ||
        ckpt_megatron_args_set_bool(a, args, "swiglu", 1) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "add_bias_linear", 0) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 1) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "untie_embeddings_and_output_weights", 1) < 0 ||
        ckpt_megatron_args_set_int(a, args, "padded_vocab_size", PADDED_VOCAB) < 0 ||
        ckpt_megatron_args_set_int(a, args, "max_position_embeddings", 64) < 0 ||
        ckpt_megatron_args_set_int(a, args, "seq_length", 64) < 0 ||
        ckpt_megatron_args_set_float(a, args, "norm_epsilon", 1e-5) < 0 ||
        ckpt_megatron_args_set_dtype(a, args, "params_dtype", CKPT_DTYPE_F32) < 0 ||
        ckpt_megatron_args_set_str(a, args, "transformer_impl", "transformer_engine") < 0)
        return NULL;
    return args;
}

#endif
