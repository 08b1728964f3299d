/* Hugging Face LLaMA directories: tensor order, config.json from Megatron args and back,
 * config.json read and bounded, and tensors held against it. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    ckpt_hf_llama_dims d;
    ckpt_buf json = CKPT_BUF_INIT;
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
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_config(args, 128256, CKPT_DTYPE_BF16, &json));
    ASSERT_ERROR_MENTIONS("not a LLaMA-style model: args.swiglu is not True");
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "swiglu", 1));
    ASSERT_OK(ckpt_hf_llama_config(args, 128256, CKPT_DTYPE_BF16, &json));
    ASSERT_TRUE(strstr((const char *)json.data, "\"rope_theta\": 500000.0,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"rms_norm_eps\": 1e-05,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"num_key_value_heads\": 8,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"torch_dtype\": \"bfloat16\",\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"tie_word_embeddings\": false,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"vocab_size\": 128256\n}\n") != NULL);
    ckpt_test_write_file("config.json", json.data, json.len);

    /* and back: Megatron args for that config */
    ASSERT_OK(ckpt_hf_llama_dims_read("config.json", &d));
    ASSERT_EQ_INT(d.dtype, CKPT_DTYPE_BF16);
    ASSERT_OK(ckpt_hf_llama_megatron_args(a, &d, "config.json", 8, "local", &back));
    v = ckpt_megatron_arg(back, "padded_vocab_size");
    ASSERT_TRUE(v && v->u.integer == 129024);
    v = ckpt_megatron_arg(back, "rotary_base");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_FLOAT && v->u.real == 500000.0);
    v = ckpt_megatron_arg(back, "num_query_groups");
    ASSERT_TRUE(v && v->u.integer == 8);
    v = ckpt_megatron_arg(back, "untie_embeddings_and_output_weights");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && v->u.boolean);
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

/* A small LLaMA config.json with one field replaced by `value` (JSON text); NULL: as is. */
static int parse_with(const char *key, const char *value, ckpt_hf_llama_dims *d)
{
    char text[1024];

    snprintf(text, sizeof text,
             "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": %s, "
             "\"intermediate_size\": %s, \"num_hidden_layers\": %s, \"num_attention_heads\": %s, "
             "\"num_key_value_heads\": %s, \"vocab_size\": %s, \"rms_norm_eps\": %s, \"rope_parameters\": %s, "
             "\"tie_word_embeddings\": %s, \"bos_token_id\": %s, \"dtype\": \"float32\"}",
             key && !strcmp(key, "hidden_size") ? value : "64",
             key && !strcmp(key, "intermediate_size") ? value : "96",
             key && !strcmp(key, "num_hidden_layers") ? value : "2",
             key && !strcmp(key, "num_attention_heads") ? value : "4",
             key && !strcmp(key, "num_key_value_heads") ? value : "2",
             key && !strcmp(key, "vocab_size") ? value : "200",
             key && !strcmp(key, "rms_norm_eps") ? value : "1e-6",
             key && !strcmp(key, "rope_parameters") ? value : "{\"rope_theta\": 500000.0}",
             key && !strcmp(key, "tie_word_embeddings") ? value : "false",
             key && !strcmp(key, "bos_token_id") ? value : "1");
    ckpt_hf_llama_dims_init(d);
    return ckpt_hf_llama_dims_parse("cfg/config.json", text, strlen(text), d);
}

static int parse_text(const char *text, ckpt_hf_llama_dims *d)
{
    ckpt_hf_llama_dims_init(d);
    return ckpt_hf_llama_dims_parse("c", text, strlen(text), d);
}

CKPT_TEST(test_hf_llama_dims_read_and_bounded)
{
    static const struct {
        const char *key, *value, *mentions;
    } bad[] = {
        { "hidden_size", "1099511627776", "cfg/config.json: hidden_size is 1099511627776, not an integer from 1" },
        { "num_hidden_layers", "2147483648", "cfg/config.json: num_hidden_layers is 2147483648" },
        { "num_hidden_layers", "0", "num_hidden_layers is 0" },
        { "num_hidden_layers", "null", "cfg/config.json: num_hidden_layers is missing" },
        { "vocab_size", "\"200\"", "cfg/config.json: vocab_size is not an integer" },
        { "intermediate_size", "96.5", "intermediate_size is not an integer" },
        { "num_key_value_heads", "3", "num_attention_heads 4 is not a multiple of num_key_value_heads 3" },
        { "num_attention_heads", "6", "hidden_size 64 is not a multiple of num_attention_heads 6" },
        { "rms_norm_eps", "0", "cfg/config.json: rms_norm_eps" },
        { "rms_norm_eps", "1e999", "cfg/config.json: rms_norm_eps" },
        { "rope_parameters", "{\"rope_theta\": -1}", "cfg/config.json: rope_theta" },
        { "rope_parameters", "[]", "rope_parameters is not an object" },
        { "tie_word_embeddings", "1", "cfg/config.json: tie_word_embeddings is not true or false" },
        { "bos_token_id", "200", "cfg/config.json: bos_token_id is 200, not a token id below vocab_size 200" },
    };
    ckpt_hf_llama_dims d;
    size_t i;

    ASSERT_OK(parse_with(NULL, NULL, &d));
    ASSERT_TRUE(d.hidden_size == 64 && d.intermediate_size == 96 && d.num_layers == 2 && d.vocab_size == 200);
    ASSERT_TRUE(d.num_heads == 4 && d.num_kv_heads == 2 && d.head_dim == 16 && d.max_positions == 2048);
    ASSERT_TRUE(d.rms_norm_eps == 1e-6 && d.rope_theta == 500000.0 && !d.tied && d.bos_token_id == 1);
    ASSERT_TRUE(d.eos_token_id == -1 && d.dtype == CKPT_DTYPE_F32);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse_with(bad[i].key, bad[i].value, &d) != CKPT_EFORMAT ||
            ckpt_error_last()->klass != CKPT_ERRCLASS_MODEL || !strstr(ckpt_error_last()->message, bad[i].mentions))
            ckpt_test_fail(__FILE__, __LINE__, "%s = %s: \"%s\", expected a model error mentioning \"%s\"",
                           bad[i].key, bad[i].value, ckpt_error_last()->message, bad[i].mentions);
    }
    /* an explicit head_dim need not divide hidden_size (Mistral Nemo) */
    ASSERT_OK(parse_text("{\"hidden_size\": 80, \"intermediate_size\": 8, \"num_hidden_layers\": 1, "
                         "\"num_attention_heads\": 4, \"head_dim\": 16, \"vocab_size\": 8}", &d));
    ASSERT_TRUE(d.head_dim == 16 && d.num_kv_heads == 4);
    /* a repeated key is read as Python reads it: the last one */
    ASSERT_FAILS(CKPT_EFORMAT, parse_text("{\"hidden_size\": 64, \"hidden_size\": 1099511627776}", &d));
    ASSERT_ERROR_MENTIONS("hidden_size is 1099511627776");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse_text("{\"model_type\": \"gemma\"}", &d));
    ASSERT_ERROR_MENTIONS("c: model_type gemma is not one of llama, mistral, qwen2");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse_text("{\"architectures\": [\"T5ForConditionalGeneration\"]}", &d));
    ASSERT_ERROR_MENTIONS("architectures");
    ASSERT_FAILS(CKPT_EFORMAT, parse_text("[1]", &d));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_FORMAT);
    ASSERT_FAILS(CKPT_EFORMAT, parse_text("{\"hidden", &d));
    ASSERT_ERROR_MENTIONS("c: not valid JSON");
}

/* The checked values, defaults included, are what the rules get, whatever the file says after. */
CKPT_TEST(test_hf_llama_map_params_are_the_checked_ones)
{
    static const char later[] = "{\"num_key_value_heads\": 3, \"head_dim\": 5}";
    ckpt_hf_llama_dims d;
    ckpt_map_params *p;
    int64_t v = 0;

    ASSERT_OK(parse_text("{\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
                         "\"num_attention_heads\": 4, \"vocab_size\": 200}", &d));
    ckpt_test_write_file("config.json", later, sizeof later - 1);
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_hf_llama_map_params(&d, p));
    ASSERT_OK(ckpt_map_params_load_json(p, "config.json"));
    ASSERT_TRUE(ckpt_map_params_get(p, "num_key_value_heads", &v) && v == 4);
    ASSERT_TRUE(ckpt_map_params_get(p, "head_dim", &v) && v == 16);
    ASSERT_TRUE(ckpt_map_params_get(p, "vocab_size", &v) && v == 200);
    ckpt_map_params_free(p);
}

/* The tensors of a 2-layer model of parse_with's config: 2 + 9 per layer + 2. */
typedef struct tiny_model {
    ckpt_graph *g;
    ckpt_map_input in[24];
    char names[24][64];
    size_t n;
} tiny_model;

static void tiny_add(tiny_model *m, const char *name, ckpt_dtype dtype, int64_t rows, int64_t cols)
{
    int64_t shape[2] = { rows, cols };

    snprintf(m->names[m->n], sizeof m->names[m->n], "%s", name);
    ASSERT_OK(ckpt_node_zeros(m->g, dtype, cols ? 2 : 1, shape, &m->in[m->n].node));
    m->in[m->n].name = m->names[m->n];
    m->n++;
}

static void tiny_build(tiny_model *m)
{
    static const struct {
        const char *suffix;
        int64_t rows, cols;
    } layer[] = { { "self_attn.q_proj.weight", 64, 64 }, { "self_attn.k_proj.weight", 32, 64 },
                  { "self_attn.v_proj.weight", 32, 64 }, { "self_attn.o_proj.weight", 64, 64 },
                  { "mlp.gate_proj.weight", 96, 64 },    { "mlp.up_proj.weight", 96, 64 },
                  { "mlp.down_proj.weight", 64, 96 },    { "input_layernorm.weight", 64, 0 },
                  { "post_attention_layernorm.weight", 64, 0 } };
    char name[64];
    size_t i;
    int l;

    m->n = 0;
    tiny_add(m, "model.embed_tokens.weight", CKPT_DTYPE_F32, 200, 64);
    for (l = 0; l < 2; l++)
        for (i = 0; i < sizeof layer / sizeof layer[0]; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", l, layer[i].suffix);
            tiny_add(m, name, CKPT_DTYPE_F32, layer[i].rows, layer[i].cols);
        }
    tiny_add(m, "model.norm.weight", CKPT_DTYPE_F32, 64, 0);
    tiny_add(m, "lm_head.weight", CKPT_DTYPE_F32, 200, 64);
}

static int tiny_check(const ckpt_hf_llama_dims *d, const tiny_model *m)
{
    return ckpt_hf_llama_check_tensors(d, "cfg/config.json", "cfg/model.safetensors", m->in, m->n);
}

CKPT_TEST(test_hf_llama_tensors_match_config)
{
    tiny_model m;
    ckpt_hf_llama_dims d;

    ASSERT_OK(ckpt_graph_new(&m.g));
    ASSERT_OK(parse_with(NULL, NULL, &d));
    tiny_build(&m);
    ASSERT_OK(tiny_check(&d, &m));
    /* RoPE's buffers are let through */
    tiny_add(&m, "model.layers.1.self_attn.rotary_emb.inv_freq", CKPT_DTYPE_F32, 8, 0);
    ASSERT_OK(tiny_check(&d, &m));
    /* and every conversion leaves them out, saying why */
    ASSERT_EQ_STR(ckpt_hf_left_out_rule("model.layers.1.self_attn.rotary_emb.inv_freq"),
                  "a rotary inv_freq buffer, which RoPE recomputes");
    ASSERT_TRUE(ckpt_hf_left_out_rule("model.rotary_emb.inv_freq") != NULL);
    ASSERT_TRUE(ckpt_hf_left_out_rule("model.norm.weight") == NULL);
    ASSERT_TRUE(ckpt_hf_left_out_rule("inv_freq") == NULL);

    /* lm_head dropped from an untied model; allowed when tied */
    tiny_build(&m);
    m.n--;
    ASSERT_FAILS(CKPT_ENOTFOUND, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("cfg/model.safetensors: no tensor lm_head.weight, which cfg/config.json implies "
                          "(tie_word_embeddings false)");
    ASSERT_OK(parse_with("tie_word_embeddings", "true", &d));
    ASSERT_OK(tiny_check(&d, &m));

    /* more layers said than held, fewer said than held */
    ASSERT_OK(parse_with("num_hidden_layers", "4", &d));
    ASSERT_FAILS(CKPT_ENOTFOUND, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("no tensor model.layers.2.self_attn.q_proj.weight, which cfg/config.json implies "
                          "(num_hidden_layers 4)");
    /* the largest count allowed meets the first missing layer, allocating nothing by it */
    ASSERT_OK(parse_with("num_hidden_layers", "2147483647", &d));
    ASSERT_FAILS(CKPT_ENOTFOUND, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("model.layers.2.self_attn.q_proj.weight");
    ASSERT_OK(parse_with("num_hidden_layers", "1", &d));
    ASSERT_FAILS(CKPT_EFORMAT, tiny_check(&d, &m));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MODEL);
    ASSERT_ERROR_MENTIONS("tensor model.layers.1.self_attn.q_proj.weight is not in the 1 layers that "
                          "num_hidden_layers in cfg/config.json says");

    /* shapes, names, biases and dtypes */
    ASSERT_OK(parse_with("intermediate_size", "128", &d));
    ASSERT_FAILS(CKPT_EFORMAT, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("tensor model.layers.0.mlp.gate_proj.weight has shape [96, 64], not the [128, 64] that "
                          "cfg/config.json says (intermediate_size, hidden_size)");
    ASSERT_OK(parse_with("num_key_value_heads", "4", &d));
    ASSERT_FAILS(CKPT_EFORMAT, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("k_proj.weight has shape [32, 64], not the [64, 64]");
    ASSERT_OK(parse_with(NULL, NULL, &d));
    tiny_build(&m);
    tiny_add(&m, "model.layers.0.self_attn.q_proj.bias", CKPT_DTYPE_F32, 64, 0);
    ASSERT_FAILS(CKPT_EFORMAT, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("q_proj.bias is there but cfg/config.json says attention_bias false");
    tiny_build(&m);
    tiny_add(&m, "model.extra.weight", CKPT_DTYPE_F32, 64, 0);
    ASSERT_FAILS(CKPT_EFORMAT, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("tensor model.extra.weight is not a weight of the LLaMA model cfg/config.json describes; "
                          "leave it out on purpose with --drop PATTERN");
    tiny_build(&m);
    tiny_add(&m, "model.layers.01.input_layernorm.weight", CKPT_DTYPE_F32, 64, 0);
    ASSERT_FAILS(CKPT_EFORMAT, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("tensor model.layers.01.input_layernorm.weight is not a weight of the LLaMA model");
    tiny_build(&m);
    m.n--;
    tiny_add(&m, "lm_head.weight", CKPT_DTYPE_BF16, 200, 64);
    ASSERT_FAILS(CKPT_EFORMAT, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("tensor lm_head.weight is bfloat16 but model.embed_tokens.weight is float32");
    m.n = 0;
    ASSERT_FAILS(CKPT_ENOTFOUND, tiny_check(&d, &m));
    ASSERT_ERROR_MENTIONS("no tensor model.embed_tokens.weight");
    ckpt_graph_free(m.g);
}
