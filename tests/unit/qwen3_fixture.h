/* Helpers of the Qwen3 unit tests (test_family_qwen3*.c): testdata/hf/transformers5/qwen3_tiny
 * (transformers 5.24: q/k RMSNorm per head, head_dim 16 while hidden / heads is 8) as map inputs
 * in a graph, map parameters and the Megatron args hf2mcore writes for it. */
#ifndef CKPT_TEST_QWEN3_FIXTURE_H
#define CKPT_TEST_QWEN3_FIXTURE_H

#include "family_fixture.h"

#define QWEN3 "hf/transformers5/qwen3_tiny"

/* The fixture's tensors as map inputs in g; fx_close after, on failure too. */
static inline int qwen3_open(fixture *f, ckpt_graph *g)
{
    return fx_open(f, QWEN3 "/model.safetensors", NULL, g);
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
