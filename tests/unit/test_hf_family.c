/* The family of a Hugging Face config.json (llama, mistral, qwen2): read with its biases,
 * sliding window and RoPE scaling, carried into Megatron args and back, decided from args
 * Megatron wrote itself, and refused where nothing here can carry it. */
#include "test.h"

#include <stdio.h>
#include <string.h>

#define SIZES                                                                                                  \
    "\"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
    "\"num_key_value_heads\": 2, \"vocab_size\": 128"
#define LLAMA3                                                                                                 \
    "{\"rope_type\": \"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "     \
    "\"original_max_position_embeddings\": 8192}"

static int parse(const char *extra, ckpt_hf_llama_dims *d)
{
    char text[1024];

    snprintf(text, sizeof text, "{" SIZES "%s%s}", extra ? ", " : "", extra ? extra : "");
    ckpt_hf_llama_dims_init(d);
    return ckpt_hf_llama_dims_parse("cfg/config.json", text, strlen(text), d);
}

CKPT_TEST(test_hf_family_names)
{
    ckpt_hf_family f;

    ASSERT_EQ_STR(ckpt_hf_family_name(CKPT_HF_QWEN2), "qwen2");
    ASSERT_TRUE(ckpt_hf_family_name((ckpt_hf_family)9) == NULL);
    ASSERT_EQ_STR(ckpt_hf_family_title(CKPT_HF_LLAMA), "LLaMA");
    ASSERT_EQ_STR(ckpt_hf_family_title(CKPT_HF_MISTRAL), "Mistral");
    ASSERT_EQ_STR(ckpt_hf_family_title(CKPT_HF_QWEN2), "Qwen2");
    ASSERT_TRUE(ckpt_hf_family_title((ckpt_hf_family)9) == NULL);
    ASSERT_OK(ckpt_hf_family_parse("x", "mistral", &f));
    ASSERT_EQ_INT(f, CKPT_HF_MISTRAL);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_family_parse("x", "qwen2_moe", &f));
    ASSERT_ERROR_MENTIONS("x: model_type qwen2_moe is not one of llama, mistral, qwen2");
}

CKPT_TEST(test_hf_family_read_from_config)
{
    ckpt_hf_llama_dims d;

    /* no model_type: the class decides; neither: llama */
    ASSERT_OK(parse("\"architectures\": [\"Qwen2ForCausalLM\"]", &d));
    ASSERT_TRUE(d.family == CKPT_HF_QWEN2 && d.qkv_bias && !d.attention_bias && !d.sliding_window);
    ASSERT_OK(parse(NULL, &d));
    ASSERT_TRUE(d.family == CKPT_HF_LLAMA && !d.qkv_bias && !d.rope_factor);
    /* Qwen2 has no attention_bias field: one there changes nothing */
    ASSERT_OK(parse("\"model_type\": \"qwen2\", \"attention_bias\": false, \"sliding_window\": 4096", &d));
    ASSERT_TRUE(d.qkv_bias && !d.sliding_window);
    /* Mistral: MistralConfig's 4096 when absent, none when null */
    ASSERT_OK(parse("\"model_type\": \"mistral\"", &d));
    ASSERT_EQ_INT(d.sliding_window, 4096);
    ASSERT_OK(parse("\"model_type\": \"mistral\", \"sliding_window\": null", &d));
    ASSERT_EQ_INT(d.sliding_window, 0);
    ASSERT_OK(parse("\"model_type\": \"mistral\", \"sliding_window\": 4, "
                    "\"layer_types\": [\"sliding_attention\", \"sliding_attention\"]",
                    &d));
    ASSERT_EQ_INT(d.sliding_window, 4);
    ASSERT_FAILS(CKPT_EFORMAT, parse("\"model_type\": \"mistral\", \"sliding_window\": 0", &d));
    ASSERT_ERROR_MENTIONS("cfg/config.json: sliding_window is 0");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse("\"model_type\": \"mistral\", \"architectures\": [\"LlamaForCausalLM\"]", &d));
    ASSERT_ERROR_MENTIONS("architectures names LlamaForCausalLM, not a mistral model (MistralFor...)");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse("\"architectures\": [\"Qwen2MoeForCausalLM\"]", &d));
    ASSERT_ERROR_MENTIONS("not a model of llama, mistral, qwen2");
}

CKPT_TEST(test_hf_family_rope_scaling)
{
    ckpt_hf_llama_dims d;

    /* transformers 4, old spelling "type", and 5 (rope_parameters with rope_theta) */
    ASSERT_OK(parse("\"rope_scaling\": " LLAMA3, &d));
    ASSERT_TRUE(d.rope_factor == 32.0 && d.rope_low_freq_factor == 1.0 && d.rope_high_freq_factor == 4.0);
    ASSERT_EQ_INT(d.rope_original_max_positions, 8192);
    ASSERT_OK(parse("\"rope_scaling\": {\"type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
                    "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}",
                    &d));
    ASSERT_TRUE(d.rope_factor == 8.0);
    ASSERT_OK(parse("\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, \"factor\": 8.0, "
                    "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}",
                    &d));
    ASSERT_TRUE(d.rope_factor == 8.0 && d.rope_theta == 500000.0);
    ASSERT_OK(parse("\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}, \"rope_scaling\": null", &d));
    ASSERT_TRUE(d.rope_factor == 0 && d.rope_theta == 1e6);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse("\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0}", &d));
    ASSERT_ERROR_MENTIONS("cfg/config.json: rope_scaling.rope_type dynamic is not one of default, llama3");
    ASSERT_FAILS(CKPT_EFORMAT, parse("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}", &d));
    ASSERT_ERROR_MENTIONS("rope_scaling.low_freq_factor is missing (rope_type llama3)");
    ASSERT_FAILS(CKPT_EFORMAT, parse("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 0.5, "
                                     "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                                     "\"original_max_position_embeddings\": 8192}",
                                     &d));
    ASSERT_ERROR_MENTIONS("rope_scaling.factor is not a number >= 1");
    ASSERT_FAILS(CKPT_EFORMAT, parse("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
                                     "\"low_freq_factor\": 4, \"high_freq_factor\": 4, "
                                     "\"original_max_position_embeddings\": 8192}",
                                     &d));
    ASSERT_ERROR_MENTIONS("low_freq_factor 4 is not below high_freq_factor 4");
    ASSERT_FAILS(CKPT_EFORMAT, parse("\"rope_scaling\": " LLAMA3 ", \"rope_parameters\": {\"rope_type\": \"default\"}",
                                     &d));
    ASSERT_ERROR_MENTIONS("rope_scaling and rope_parameters describe different RoPE scalings");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse("\"rope_scaling\": {\"rope_type\": \"default\", \"mscale\": 1}", &d));
    ASSERT_ERROR_MENTIONS("rope_scaling.mscale is not a field of RoPE types default, llama3");
    ASSERT_FAILS(CKPT_EFORMAT, parse("\"rope_scaling\": [1]", &d));
    ASSERT_ERROR_MENTIONS("rope_scaling is not an object");
}

CKPT_TEST(test_hf_family_foreign_fields_refused)
{
    ckpt_hf_llama_dims d;

    ASSERT_OK(parse("\"partial_rotary_factor\": 1.0, \"num_experts\": 0, \"qk_layernorm\": false", &d));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse("\"final_logit_softcapping\": 30.0", &d));
    ASSERT_ERROR_MENTIONS("final_logit_softcapping is set");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse("\"quantization_config\": {\"quant_method\": \"fp8\"}", &d));
    ASSERT_ERROR_MENTIONS("quantization_config is set");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse("\"model_type\": \"qwen2\", \"use_sliding_window\": true", &d));
    ASSERT_ERROR_MENTIONS("use_sliding_window is true");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, parse("\"layer_types\": [\"full_attention\", \"chunked_attention\"]", &d));
    ASSERT_ERROR_MENTIONS("layer_types has chunked_attention, not full_attention in every layer");
}

/* config.json -> Megatron args -> config.json gives back the family and what it says. */
static void round_trip(const char *extra, ckpt_hf_llama_dims *back, const ckpt_value **args_out, ckpt_arena *a)
{
    ckpt_hf_llama_dims d;
    ckpt_value *args;
    ckpt_buf json = CKPT_BUF_INIT;

    *args_out = NULL;
    ASSERT_OK(parse(extra, &d));
    ASSERT_OK(ckpt_hf_llama_megatron_args(a, &d, "cfg/config.json", 2, "local", &args));
    ASSERT_OK(ckpt_hf_llama_config(args, 128, CKPT_DTYPE_F32, &json));
    ckpt_hf_llama_dims_init(back);
    ASSERT_OK(ckpt_hf_llama_dims_parse("back", (const char *)json.data, json.len, back));
    ckpt_buf_dispose(&json);
    *args_out = args;
}

CKPT_TEST(test_hf_family_megatron_args_round_trip)
{
    ckpt_arena *a;
    ckpt_hf_llama_dims d;
    const ckpt_value *args, *v;

    ASSERT_OK(ckpt_arena_new(&a));
    round_trip("\"model_type\": \"qwen2\", \"tie_word_embeddings\": true", &d, &args, a);
    ASSERT_TRUE(args != NULL);
    ASSERT_TRUE(d.family == CKPT_HF_QWEN2 && d.qkv_bias && d.tied);
    v = ckpt_megatron_arg(args, "add_qkv_bias");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && v->u.boolean);
    v = ckpt_megatron_arg(args, "hf_model_type");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_STR && strcmp(v->u.str.ptr, "qwen2") == 0);
    ASSERT_TRUE(ckpt_hf_llama_tied_copy(args, "lm_head.weight") && !ckpt_hf_llama_tied_copy(args, "model.norm.weight"));

    round_trip("\"model_type\": \"mistral\", \"sliding_window\": 4096, \"head_dim\": 16", &d, &args, a);
    ASSERT_TRUE(d.family == CKPT_HF_MISTRAL && d.sliding_window == 4096 && d.head_dim == 16 && !d.qkv_bias);
    v = ckpt_megatron_arg(args, "window_size");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_TUPLE && v->u.seq.n == 2 && v->u.seq.items[0]->u.integer == 4095 &&
                v->u.seq.items[1]->u.integer == 0);
    round_trip("\"model_type\": \"mistral\", \"sliding_window\": null", &d, &args, a);
    ASSERT_TRUE(d.family == CKPT_HF_MISTRAL && d.sliding_window == 0);

    round_trip("\"rope_theta\": 500000.0, \"rope_scaling\": " LLAMA3, &d, &args, a);
    ASSERT_TRUE(d.family == CKPT_HF_LLAMA && d.rope_factor == 32.0 && d.rope_theta == 500000.0);
    ASSERT_TRUE(d.rope_low_freq_factor == 1.0 && d.rope_high_freq_factor == 4.0 &&
                d.rope_original_max_positions == 8192);
    v = ckpt_megatron_arg(args, "use_rope_scaling");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && v->u.boolean);
    v = ckpt_megatron_arg(args, "rope_scaling_factor");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_FLOAT && v->u.real == 32.0);
    ckpt_arena_free(a);
}

CKPT_TEST(test_hf_family_megatron_cannot_say)
{
    ckpt_arena *a;
    ckpt_hf_llama_dims d;
    ckpt_value *args;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(parse("\"attention_bias\": true", &d));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_megatron_args(a, &d, "cfg/config.json", 1, "local", &args));
    ASSERT_ERROR_MENTIONS("cfg/config.json: attention_bias true");
    ASSERT_OK(parse("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
                    "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 4096}",
                    &d));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_megatron_args(a, &d, "cfg/config.json", 1, "local", &args));
    ASSERT_ERROR_MENTIONS("Megatron-LM applies it with 1, 4 and 8192 only");
    ckpt_arena_free(a);
}

/* Args as Megatron itself writes them: no hf_model_type. */
static ckpt_value *megatron_args(ckpt_arena *a)
{
    ckpt_value *args = NULL;

    if (ckpt_megatron_args_new(a, &args) < 0 || ckpt_megatron_args_set_int(a, args, "num_layers", 2) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "swiglu", 1) < 0 ||
        ckpt_megatron_args_set_int(a, args, "hidden_size", 32) < 0 ||
        ckpt_megatron_args_set_int(a, args, "ffn_hidden_size", 64) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_attention_heads", 4) < 0 ||
        ckpt_megatron_args_set_float(a, args, "rotary_percent", 1.0) < 0 ||
        ckpt_megatron_args_set_none(a, args, "window_size") < 0 ||
        ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 0) < 0)
        return NULL;
    return args;
}

static const char *config_of(const ckpt_value *args, ckpt_buf *json)
{
    ckpt_buf_dispose(json);
    return ckpt_hf_llama_config(args, 128, CKPT_DTYPE_BF16, json) == 0 ? (const char *)json->data : "";
}

CKPT_TEST(test_hf_family_decided_from_megatron_args)
{
    ckpt_arena *a;
    ckpt_value *args;
    ckpt_buf json = CKPT_BUF_INIT;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_TRUE((args = megatron_args(a)) != NULL);
    ASSERT_TRUE(strstr(config_of(args, &json), "\"model_type\": \"llama\"") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"rope_scaling\": null") != NULL);
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "use_rope_scaling", 1));
    ASSERT_TRUE(strstr(config_of(args, &json), "\"factor\": 8.0") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"rope_type\": \"llama3\"") != NULL);
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "add_qkv_bias", 1));
    ASSERT_TRUE(strstr(config_of(args, &json), "\"architectures\": [\n    \"Qwen2ForCausalLM\"") != NULL);
    /* a family recorded that the args contradict, or that is not known */
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_model_type", "llama"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_config(args, 128, CKPT_DTYPE_BF16, &json));
    ASSERT_ERROR_MENTIONS("args.hf_model_type is llama but args have add_qkv_bias");
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_model_type", "gemma"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_config(args, 128, CKPT_DTYPE_BF16, &json));
    ASSERT_ERROR_MENTIONS("args.hf_model_type: model_type gemma is not one of llama, mistral, qwen2");
    ASSERT_OK(ckpt_megatron_args_set_none(a, args, "hf_model_type"));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "add_qkv_bias", 0));
    ASSERT_OK(ckpt_megatron_args_set_int_pair(a, args, "window_size", 4095, 0));
    ASSERT_TRUE(strstr(config_of(args, &json), "\"sliding_window\": 4096") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"model_type\": \"mistral\"") != NULL);
    ASSERT_OK(ckpt_megatron_args_set_int_pair(a, args, "window_size", 4095, 4095));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_config(args, 128, CKPT_DTYPE_BF16, &json));
    ASSERT_ERROR_MENTIONS("args.window_size is not a causal window");
    ASSERT_OK(ckpt_megatron_args_set_none(a, args, "window_size"));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 1));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_config(args, 128, CKPT_DTYPE_BF16, &json));
    ASSERT_ERROR_MENTIONS("args.qk_layernorm is set");
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 0));
    ASSERT_OK(ckpt_megatron_args_set_float(a, args, "rotary_percent", 0.5));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_config(args, 128, CKPT_DTYPE_BF16, &json));
    ASSERT_ERROR_MENTIONS("args.rotary_percent is not 1");
    ckpt_buf_dispose(&json);
    ckpt_arena_free(a);
}

/* What makes a model no LLaMA-style one, refused before any tensor is read (mcore2hf). */
CKPT_TEST(test_hf_family_args_check)
{
    static const struct {
        const char *name, *str;
        int flag;
        const char *message;
    } cases[] = {
        { "swiglu", NULL, 0, "not a LLaMA-style model: args.swiglu is not True" },
        { "normalization", "LayerNorm", 0, "args.normalization is LayerNorm, not RMSNorm" },
        { "position_embedding_type", "learned_absolute", 0, "args.position_embedding_type is learned_absolute" },
        { "add_bias_linear", NULL, 1, "args.add_bias_linear is True (LLaMA has no linear biases)" },
        { "num_experts", NULL, 1, "args.num_experts is set" },
    };
    ckpt_arena *a;
    ckpt_value *args;
    size_t i;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_TRUE((args = megatron_args(a)) != NULL);
    ASSERT_OK(ckpt_hf_llama_args_check(args));
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ASSERT_TRUE((args = megatron_args(a)) != NULL);
        if (cases[i].str)
            ASSERT_OK(ckpt_megatron_args_set_str(a, args, cases[i].name, cases[i].str));
        else
            ASSERT_OK(ckpt_megatron_args_set_bool(a, args, cases[i].name, cases[i].flag));
        ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_hf_llama_args_check(args));
        ASSERT_TRUE(ckpt_error_last()->klass == CKPT_ERRCLASS_MODEL);
        ASSERT_ERROR_MENTIONS(cases[i].message);
    }
    ckpt_arena_free(a);
}

CKPT_TEST(test_hf_family_described)
{
    ckpt_buf line = CKPT_BUF_INIT;
    static const char cfg[] = "{" SIZES ", \"model_type\": \"mistral\", \"sliding_window\": 8}";

    ckpt_test_write_file("config.json", cfg, sizeof cfg - 1);
    ASSERT_OK(ckpt_hf_config_describe("config.json", &line));
    ASSERT_EQ_STR((const char *)line.data, "Hugging Face MistralForCausalLM (model_type mistral): 2 layers, hidden 32, "
                                           "4 heads, 2 KV heads, vocab 128, sliding window 8");
    ckpt_buf_dispose(&line);
    ASSERT_OK(ckpt_hf_config_describe(ckpt_test_data("hf/transformers5/qwen3_moe_tiny/config.json"), &line));
    ASSERT_EQ_STR((const char *)line.data, "Hugging Face Qwen3MoeForCausalLM (model_type qwen3_moe): 2 layers, hidden 32, "
                                           "4 heads, 2 KV heads, vocab 128, 4 experts (top 2)");
    ckpt_buf_dispose(&line);
    ckpt_test_write_file("config.json", "{\"model_type\": \"t5\"}", 20);
    ASSERT_OK(ckpt_hf_config_describe("config.json", &line));
    ASSERT_EQ_STR((const char *)line.data,
                  "not a model ckptconv converts: config.json: model_type t5 is not one of llama, mistral, qwen2, qwen3, gemma3, gpt2, mixtral, qwen3_moe, deepseek_v3");
    ckpt_buf_dispose(&line);
}
