/* Hugging Face LLaMA directories: tensor order, config.json from Megatron args and back. */
#include "test.h"

#include <stdlib.h>

CKPT_TEST(test_hf_llama_order_is_transformers_order)
{
    static const char *const names[] = {
        "lm_head.weight", "model.layers.10.input_layernorm.weight", "model.layers.2.mlp.down_proj.weight",
        "model.layers.2.self_attn.q_proj.weight", "model.norm.weight", "model.layers.2.mlp.gate_proj.weight",
        "model.embed_tokens.weight", "model.layers.2.post_attention_layernorm.weight", "extra.buffer",
        "model.layers.2.self_attn.k_proj.weight",
    };
    static const size_t want[] = { 6, 3, 9, 5, 2, 7, 1, 4, 0, 8 };
    size_t perm[10], i;

    ASSERT_OK(ckpt_hf_llama_order(names, 10, perm));
    for (i = 0; i < 10; i++)
        ASSERT_EQ_INT(perm[i], want[i]);
}

CKPT_TEST(test_hf_llama_config_round_trip)
{
    ckpt_arena *a;
    ckpt_value *args, *back;
    ckpt_map_params *p;
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_dtype dtype;
    const ckpt_value *v;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_megatron_args_new(a, &args));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_layers", 32));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "hidden_size", 4096));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "ffn_hidden_size", 14336));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_attention_heads", 32));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "group_query_attention", 1));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_query_groups", 8));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "kv_channels", 128));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "max_position_embeddings", 8192));
    ASSERT_OK(ckpt_megatron_args_set_float(a, args, "norm_epsilon", 1e-5));
    ASSERT_OK(ckpt_megatron_args_set_float(a, args, "rotary_base", 500000.0));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "untie_embeddings_and_output_weights", 1));
    ASSERT_OK(ckpt_hf_llama_config(args, 128256, CKPT_DTYPE_BF16, &json));
    ASSERT_TRUE(strstr((const char *)json.data, "\"rope_theta\": 500000.0,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"rms_norm_eps\": 1e-05,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"num_key_value_heads\": 8,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"torch_dtype\": \"bfloat16\",\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"tie_word_embeddings\": false,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"vocab_size\": 128256\n}\n") != NULL);
    ckpt_test_write_file("config.json", json.data, json.len);

    /* and back: Megatron args for that config */
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_map_params_load_json(p, "config.json"));
    ASSERT_OK(ckpt_hf_llama_megatron_args(a, "config.json", p, 8, "local", &back, &dtype));
    ASSERT_EQ_INT(dtype, CKPT_DTYPE_BF16);
    v = ckpt_megatron_arg(back, "padded_vocab_size");
    ASSERT_TRUE(v && v->u.integer == 129024);
    v = ckpt_megatron_arg(back, "rotary_base");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_FLOAT && v->u.real == 500000.0);
    v = ckpt_megatron_arg(back, "num_query_groups");
    ASSERT_TRUE(v && v->u.integer == 8);
    v = ckpt_megatron_arg(back, "untie_embeddings_and_output_weights");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && v->u.boolean);
    ckpt_map_params_free(p);
    ckpt_buf_dispose(&json);
    ckpt_arena_free(a);
}

CKPT_TEST(test_hf_llama_config_needs_sizes)
{
    ckpt_arena *a;
    ckpt_value *args;
    ckpt_buf json = CKPT_BUF_INIT;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_megatron_args_new(a, &args));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_hf_llama_config(args, 100, CKPT_DTYPE_F32, &json));
    ckpt_buf_dispose(&json);
    ckpt_arena_free(a);
}
