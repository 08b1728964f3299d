/* Model families as data (include/ckpt/family.h): the built-in families load, extend one
 * another, detect configs and Megatron args, read configs with today's checks and refusals,
 * check tensors, and a family file of one's own is checked when it is loaded. */
#include "test.h"
#include "family_config_text.h"

#include <ckpt/family.h>
#include <ckpt/megatron.h>

#include <stdio.h>
#include <string.h>

CKPT_TEST(test_family_builtins)
{
    const ckpt_family *f;
    size_t i;

    ASSERT_EQ_STR(ckpt_family_known(), "llama, mistral, qwen2, qwen3, gemma3, gpt2, mixtral, qwen3_moe, deepseek_v3");
    ASSERT_TRUE(ckpt_family_builtin_count() == 9);
    for (i = 0; i < ckpt_family_builtin_count(); i++)
        ASSERT_TRUE(ckpt_family_builtin_at(i) != NULL);
    ASSERT_TRUE(ckpt_family_builtin_at(9) == NULL);
    ASSERT_OK(ckpt_family_builtin(&f, "qwen2"));
    ASSERT_EQ_STR(ckpt_family_name(f), "qwen2");
    ASSERT_EQ_STR(ckpt_family_title(f), "Qwen2");
    /* what qwen2 does not say it takes from llama */
    ASSERT_EQ_STR(ckpt_family_string(f, "megatron.spec"), "megatron_gpt");
    ASSERT_EQ_STR(ckpt_family_string(f, "hf.class"), "Qwen2ForCausalLM");
    ASSERT_EQ_STR(ckpt_family_string(f, "paddle.head_var"), "qwen2_lm_head");
    ASSERT_OK(ckpt_family_builtin(&f, "llama"));
    ASSERT_EQ_STR(ckpt_family_string(f, "paddle.head_var"), "llama_lm_head");
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_family_builtin(&f, "gemma"));
    ASSERT_ERROR_MENTIONS("no built-in family is named gemma (known: llama, mistral, qwen2, qwen3, gemma3, gpt2, mixtral, qwen3_moe, deepseek_v3)");
}

CKPT_TEST(test_family_detect_config)
{
    const ckpt_family *f;

    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, "c", "{\"model_type\": \"mistral\"}"));
    ASSERT_EQ_STR(ckpt_family_name(f), "mistral");
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, "c", "{\"architectures\": [\"Qwen2ForCausalLM\"]}"));
    ASSERT_EQ_STR(ckpt_family_name(f), "qwen2");
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, "c", "{}"));
    ASSERT_EQ_STR(ckpt_family_name(f), "llama");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_HF, "c", "{\"model_type\": \"falcon\"}"));
    ASSERT_ERROR_MENTIONS("c: model_type falcon is not one of llama, mistral, qwen2, qwen3");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_HF, "c",
                                                       "{\"model_type\": \"mistral\", \"architectures\": [\"LlamaForCausalLM\"]}"));
    ASSERT_ERROR_MENTIONS("c: architectures names LlamaForCausalLM, not a mistral model (MistralFor...)");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_HF, "c", "{\"architectures\": [\"T5Model\"]}"));
    ASSERT_ERROR_MENTIONS("c: architectures names T5Model, not a model of llama, mistral, qwen2, qwen3");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_detect(&f, CKPT_FAMILY_HF, "c", "[1"));
    ASSERT_ERROR_MENTIONS("c: not valid JSON");
}

CKPT_TEST(test_family_config_read)
{
    ckpt_family_config *c;
    const ckpt_value *v;

    ASSERT_OK(read_cfg("llama", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                                "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}, "
                                "\"eos_token_id\": [1, 2], \"torch_dtype\": \"float32\"", &c));
    ASSERT_TRUE(int_of(c, "hidden_size") == 64 && int_of(c, "num_kv_heads") == 2 && int_of(c, "head_dim") == 16);
    ASSERT_TRUE(int_of(c, "max_positions") == 2048 && int_of(c, "tied") == 0 && int_of(c, "qkv_bias") == 0);
    ASSERT_TRUE(int_of(c, "sliding_window") == -1 && int_of(c, "bos_token_id") == -1);
    ASSERT_OK(ckpt_family_config_get(c, "eos_token_id", &v));
    ASSERT_TRUE(v->kind == CKPT_VAL_LIST && v->u.seq.n == 2);
    ASSERT_OK(ckpt_family_config_get(c, "rope", &v));
    ASSERT_TRUE(ckpt_value_is_str(v, "llama3"));
    ASSERT_OK(ckpt_family_config_get(c, "rope_factor", &v));
    ASSERT_TRUE(v->kind == CKPT_VAL_FLOAT && v->u.real == 8.0);
    ASSERT_OK(ckpt_family_config_get(c, "dtype", &v));
    ASSERT_TRUE(ckpt_value_is_str(v, "float32"));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_family_config_get(c, "no_such_field", &v));
    ckpt_family_config_free(c);

    /* rows mistral and qwen2 change: a window by default, q/k/v biases always */
    ASSERT_OK(read_cfg("mistral", NULL, &c));
    ASSERT_TRUE(int_of(c, "sliding_window") == 4096 && int_of(c, "qkv_bias") == 0);
    ckpt_family_config_free(c);
    ASSERT_OK(read_cfg("mistral", "\"sliding_window\": null", &c));
    ASSERT_TRUE(int_of(c, "sliding_window") == -1);
    ckpt_family_config_free(c);
    ASSERT_OK(read_cfg("qwen2", "\"attention_bias\": true, \"use_sliding_window\": false", &c));
    ASSERT_TRUE(int_of(c, "qkv_bias") == 1 && int_of(c, "attention_bias") == 0);
    ckpt_family_config_free(c);
}

CKPT_TEST(test_family_config_refused)
{
    static const struct {
        const char *family, *extra, *message;
    } cases[] = {
        { "llama", "\"hidden_act\": \"gelu\"", "cfg/config.json: hidden_act is \"gelu\", not \"silu\" (LLaMA's SwiGLU)" },
        { "llama", "\"partial_rotary_factor\": 0.5", "partial_rotary_factor is 0.5, not 1 (RoPE on part of each head)" },
        { "llama", "\"num_experts\": 8", "num_experts is set, which ckptconv's llama family does not convert (its families: llama, mistral, qwen2, qwen3, gemma3, gpt2, mixtral, qwen3_moe, deepseek_v3)" },
        { "qwen2", "\"use_sliding_window\": true", "use_sliding_window is true (Qwen2's window on some layers only)" },
        { "llama", "\"rope_theta\": 500000, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000}",
          "cfg/config.json: rope_theta 500000 and rope_parameters.rope_theta 10000 differ" },
        { "llama", "\"num_key_value_heads\": 3", "num_attention_heads 4 is not a multiple of num_key_value_heads 3" },
        { "llama", "\"num_attention_heads\": 3, \"num_key_value_heads\": 1",
          "hidden_size 64 is not a multiple of num_attention_heads 3 (and no head_dim)" },
        { "llama", "\"rms_norm_eps\": 0", "rms_norm_eps is not a number > 0 and <= 1" },
        { "llama", "\"initializer_range\": -1", "initializer_range is not a number >= 0 and <= 1e+06" },
        { "llama", "\"rope_parameters\": {\"rope_theta\": -1}", "rope_theta is not a number > 0 and <= 1e+300" },
        { "llama", "\"tie_word_embeddings\": 1", "tie_word_embeddings is not true or false" },
        { "llama", "\"head_dim\": 2.5", "head_dim is not an integer" },
        { "llama", "\"bos_token_id\": 200", "bos_token_id is 200, not a token id below vocab_size 200" },
        { "llama", "\"rope_scaling\": {\"rope_type\": \"yarn\"}", "rope_scaling.rope_type yarn is not one of default, llama3" },
        { "llama", "\"layer_types\": [\"sliding_attention\"]",
          "layer_types has sliding_attention, not full_attention in every layer (no sliding window)" },
        { "mistral", "\"sliding_window\": 0", "sliding_window is 0, not an integer from 1 to 2147483647" },
    };
    ckpt_family_config *c = NULL;
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ASSERT_TRUE(read_cfg(cases[i].family, cases[i].extra, &c) < 0);
        ASSERT_TRUE(c == NULL && ckpt_error_last()->klass == CKPT_ERRCLASS_MODEL);
        ASSERT_ERROR_MENTIONS(cases[i].message);
    }
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_config_read(&c, ckpt_family_builtin_at(0), CKPT_FAMILY_HF, "c",
                                                       "{\"hidden_size\": 8}"));
    ASSERT_ERROR_MENTIONS("c: intermediate_size is missing");
}

static ckpt_value *llama_args(ckpt_arena *a)
{
    ckpt_value *args = NULL;

    if (ckpt_megatron_args_new(a, &args) < 0 || ckpt_megatron_args_set_bool(a, args, "swiglu", 1) < 0 ||
        ckpt_megatron_args_set_str(a, args, "normalization", "RMSNorm") < 0 ||
        ckpt_megatron_args_set_int(a, args, "hidden_size", 64) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_attention_heads", 4) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_layers", 2) < 0 ||
        ckpt_megatron_args_set_int(a, args, "vocab_size", 200) < 0)
        return NULL;
    return args;
}

CKPT_TEST(test_family_megatron_args)
{
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_arena *a;
    ckpt_value *args;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_TRUE((args = llama_args(a)) != NULL);
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "llama");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(int_of(c, "num_kv_heads") == 4 && int_of(c, "head_dim") == 16 && int_of(c, "tied") == 1);
    ASSERT_TRUE(int_of(c, "vocab_size") == 200 && int_of(c, "sliding_window") == -1);
    ckpt_family_config_free(c);

    ASSERT_OK(ckpt_megatron_args_set_int_pair(a, args, "window_size", 7, 0));
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "mistral");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(int_of(c, "sliding_window") == 8);
    ckpt_family_config_free(c);
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "add_qkv_bias", 1));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("args have add_qkv_bias and a window_size: no Hugging Face llama, mistral, qwen2, qwen3, gemma3, gpt2, mixtral, qwen3_moe or deepseek_v3 config has both");
    ASSERT_OK(ckpt_megatron_args_set_none(a, args, "window_size"));
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "qwen2");

    /* what hf2mcore recorded wins, and the args must agree with it */
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_model_type", "llama"));
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "llama");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("args.hf_model_type is llama but args have add_qkv_bias (Qwen2's q/k/v biases)");
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_model_type", "gemma"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("args.hf_model_type: model_type gemma is not one of llama, mistral, qwen2, qwen3");

    ASSERT_TRUE((args = llama_args(a)) != NULL);
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "normalization", "LayerNorm"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("not a LLaMA-style model: args.normalization is LayerNorm, not RMSNorm");
    ASSERT_TRUE((args = llama_args(a)) != NULL);
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 1));
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "qwen3");
    ASSERT_TRUE((args = llama_args(a)) != NULL);
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "swiglu", 0));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("not a LLaMA-style model: args.swiglu is not True");
    ckpt_arena_free(a);
}

CKPT_TEST(test_family_maps_and_params)
{
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_map_params *p;
    ckpt_map *m;
    int64_t v;

    ASSERT_OK(ckpt_family_builtin(&f, "mistral"));
    ASSERT_OK(read_cfg("mistral", "\"head_dim\": 8", &c));
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_family_map_params(f, c, p));
    ASSERT_OK(ckpt_map_params_get(p, "head_dim", &v));
    ASSERT_TRUE(v == 8);
    ASSERT_OK(ckpt_map_params_get(p, "intermediate_size", &v));
    ASSERT_TRUE(v == 96);
    ckpt_map_params_free(p);
    ckpt_family_config_free(c);

    ASSERT_OK(ckpt_family_map(f, CKPT_FAMILY_MEGATRON, NULL, 0, &m));
    ASSERT_EQ_STR(ckpt_map_name(m), "hf_llama_megatron");
    ckpt_map_free(m);
    ASSERT_OK(ckpt_family_map(f, CKPT_FAMILY_MEGATRON, "local", 1, &m));
    ASSERT_EQ_STR(ckpt_map_name(m), "megatron_hf_llama_local");
    ckpt_map_free(m);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_map(f, CKPT_FAMILY_PADDLE, NULL, 1, &m));
    ASSERT_OK(ckpt_family_builtin(&f, "llama"));
    ASSERT_OK(ckpt_family_map(f, CKPT_FAMILY_PADDLE, NULL, 1, &m));
    ASSERT_EQ_STR(ckpt_map_name(m), "paddle_llama_hf");
    ckpt_map_free(m);

    ASSERT_EQ_STR(ckpt_family_left_out(f, CKPT_FAMILY_HF, "model.layers.1.self_attn.rotary_emb.inv_freq"),
                  "a rotary inv_freq buffer, which RoPE recomputes");
    ASSERT_TRUE(ckpt_family_left_out(f, CKPT_FAMILY_HF, "model.norm.weight") == NULL);
    ASSERT_TRUE(ckpt_family_left_out(f, CKPT_FAMILY_HF, "inv_freq") == NULL);
}

typedef struct tiny_model {
    ckpt_graph *g;
    ckpt_map_input in[32];
    char names[32][64];
    size_t n;
} tiny_model;

static void tiny_add(tiny_model *m, const char *name, int64_t rows, int64_t cols)
{
    int64_t shape[2] = { rows, cols };

    snprintf(m->names[m->n], sizeof m->names[m->n], "%s", name);
    ASSERT_OK(ckpt_node_zeros(m->g, CKPT_DTYPE_F32, cols ? 2 : 1, shape, &m->in[m->n].node));
    m->in[m->n].name = m->names[m->n];
    m->n++;
}

/* qwen2's tensors at SIZES, lm_head first so that the order has something to do */
static void tiny_build(tiny_model *m)
{
    static const struct {
        const char *suffix;
        int64_t rows, cols;
    } layer[] = { { "mlp.down_proj.weight", 64, 96 },  { "self_attn.q_proj.weight", 64, 64 },
                  { "self_attn.q_proj.bias", 64, 0 },  { "self_attn.k_proj.weight", 32, 64 },
                  { "self_attn.k_proj.bias", 32, 0 },  { "self_attn.v_proj.weight", 32, 64 },
                  { "self_attn.v_proj.bias", 32, 0 },  { "self_attn.o_proj.weight", 64, 64 },
                  { "mlp.gate_proj.weight", 96, 64 },  { "mlp.up_proj.weight", 96, 64 },
                  { "input_layernorm.weight", 64, 0 }, { "post_attention_layernorm.weight", 64, 0 } };
    char name[64];
    size_t i;
    int l;

    m->n = 0;
    tiny_add(m, "lm_head.weight", 200, 64);
    tiny_add(m, "model.embed_tokens.weight", 200, 64);
    for (l = 1; l >= 0; l--)
        for (i = 0; i < sizeof layer / sizeof layer[0]; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", l, layer[i].suffix);
            tiny_add(m, name, layer[i].rows, layer[i].cols);
        }
    tiny_add(m, "model.norm.weight", 64, 0);
}

CKPT_TEST(test_family_tensors)
{
    const ckpt_family *qwen2, *llama;
    ckpt_family_config *c, *lc;
    const char *names[32];
    size_t perm[32], i;
    tiny_model m;

    ASSERT_OK(ckpt_graph_new(&m.g));
    ASSERT_OK(ckpt_family_builtin(&qwen2, "qwen2"));
    ASSERT_OK(ckpt_family_builtin(&llama, "llama"));
    ASSERT_OK(read_cfg("qwen2", NULL, &c));
    ASSERT_OK(read_cfg("llama", NULL, &lc));
    tiny_build(&m);
    ASSERT_OK(ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "cfg/config.json", "w", m.in, m.n));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(llama, lc, CKPT_FAMILY_HF, "cfg/config.json", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.layers.1.self_attn.q_proj.bias is there but cfg/config.json says attention_bias false");

    /* the order transformers writes: embeddings, layers in state_dict order, norm, lm_head */
    for (i = 0; i < m.n; i++)
        names[i] = m.in[i].name;
    ASSERT_OK(ckpt_family_order(qwen2, CKPT_FAMILY_HF, names, m.n, perm));
    ASSERT_EQ_STR(names[perm[0]], "model.embed_tokens.weight");
    ASSERT_EQ_STR(names[perm[1]], "model.layers.0.self_attn.q_proj.weight");
    ASSERT_EQ_STR(names[perm[2]], "model.layers.0.self_attn.q_proj.bias");
    ASSERT_EQ_STR(names[perm[12]], "model.layers.0.post_attention_layernorm.weight");
    ASSERT_EQ_STR(names[perm[m.n - 2]], "model.norm.weight");
    ASSERT_EQ_STR(names[perm[m.n - 1]], "lm_head.weight");

    tiny_add(&m, "model.layers.0.self_attn.foo.weight", 4, 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.layers.0.self_attn.foo.weight is not a weight of the Qwen2 model c describes");
    m.n--;
    tiny_add(&m, "model.layers.2.input_layernorm.weight", 64, 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.layers.2.input_layernorm.weight is not in the 2 layers that num_hidden_layers in c says");
    m.n--;
    tiny_add(&m, "model.rotary_emb.inv_freq", 8, 0);
    ASSERT_OK(ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    m.n--;
    m.in[4] = m.in[--m.n]; /* layer 1's q_proj.bias goes */
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: no tensor model.layers.1.self_attn.q_proj.bias, which c implies (num_hidden_layers 2, model_type qwen2)");
    tiny_build(&m);
    m.in[1] = m.in[--m.n];
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: no tensor model.embed_tokens.weight, which c implies (vocab_size, hidden_size)");
    tiny_build(&m);
    m.in[0] = m.in[--m.n];
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: no tensor lm_head.weight, which c implies (tie_word_embeddings false)");
    tiny_build(&m);
    tiny_add(&m, "model.norm.weight", 64, 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.norm.weight is there twice");
    tiny_build(&m);
    m.n--;
    tiny_add(&m, "model.norm.weight", 32, 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(qwen2, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.norm.weight has shape [32], not the [64] that c says (hidden_size)");
    ckpt_family_config_free(c);
    ckpt_family_config_free(lc);
    ckpt_graph_free(m.g);
}

static int load_text(const char *text, ckpt_family **out)
{
    ckpt_test_write_file("fam.json", text, strlen(text));
    return ckpt_family_load(out, "fam.json");
}

/* A family of one's own: extends merges rows in place, adds after a named row, drops; and
 * what is wrong in the file is refused when it is loaded. */
CKPT_TEST(test_family_load)
{
    static const struct {
        const char *text, *message;
    } bad[] = {
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", \"colour\": 1}",
          "fam.json: unknown key \"colour\"" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", \"title\": \"Y\"}",
          "fam.json: key \"title\" appears twice" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"gemma\"}",
          "no built-in family is named gemma" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"config\": [{\"f\": \"head_dim\", \"default\": \"hidden_size / heads\"}]}",
          "no field of the family has this name" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"config\": [{\"f\": \"w\", \"type\": \"$spline\"}]}",
          "unknown type $spline" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"config\": [{\"f\": \"w\", \"type\": \"size\", \"after\": \"nothing\"}]}",
          "\"after\" names no row (nothing)" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"hf_tensors\": {\"per_layer\": [[\"mlp.extra.weight\", \"z\", \"h\"]]}}",
          "tensor mlp.extra.weight: an extent is a letter of \"extents\"" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"megatron\": {\"args_out\": [[\"a\", \"$nothing\"]]}}",
          "unknown generator $nothing" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"config\": [{\"f\": \"rope\", \"rope_types\": [\"default\", \"yarn\"]}]}",
          "\"rope_types\" has yarn, not default, llama3 or linear" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"config\": [{\"f\": \"w\", \"type\": \"size\", \"rope_types\": [\"linear\"]}]}",
          "\"rope_types\" lists the rope_type values a $rope row accepts" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"config\": [{\"f\": \"w\", \"type\": \"size\", \"hf\": [\"a\", \"b\"], \"agree\": true}]}",
          "\"agree\" needs a real row read from a list of keys" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"llama\", "
          "\"hf_tensors\": {\"per_layer\": [[\"mlp.experts.{E}.w1.weight\", \"i\", \"h\"]]}}",
          "tensor mlp.experts.{E}.w1.weight: the one capture a name may have is {E}, in per_layer, with a field num_experts" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"mixtral\", "
          "\"hf_tensors\": {\"after\": [[\"head.{E}.weight\", \"h\"]]}}",
          "tensor head.{E}.weight: the one capture a name may have is {E}, in per_layer, with a field num_experts" },
        { "{\"ckptconv_family\": 1, \"name\": \"x\", \"title\": \"X\", \"extends\": \"mixtral\", "
          "\"hf_tensors\": {\"per_layer\": [[\"experts.{E}.{F}.weight\", \"h\"]]}}",
          "tensor experts.{E}.{F}.weight: the one capture a name may have is {E}" },
        { "[1]", "fam.json: not a JSON object" },
    };
    ckpt_family *f = NULL;
    ckpt_family_config *c;
    size_t i;

    ASSERT_OK(load_text("{\"ckptconv_family\": 1, \"name\": \"mine\", \"title\": \"Mine\", \"extends\": \"qwen2\",\n"
                        " \"hf\": {\"model_type\": \"mine\", \"arch_prefix\": \"MineFor\", \"class\": \"MineForCausalLM\"},\n"
                        " \"config\": [{\"f\": \"hidden_act\", \"drop\": true},\n"
                        "            {\"f\": \"rope_theta\", \"default\": 1000000},\n"
                        "            {\"f\": \"extra\", \"type\": \"count\", \"hf\": \"extra_layers\", \"default\": 0,"
                        "             \"after\": \"num_layers\"}]}",
                        &f));
    ASSERT_EQ_STR(ckpt_family_name(f), "mine");
    ASSERT_EQ_STR(ckpt_family_string(f, "hf.class"), "MineForCausalLM");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "c",
                                      "{" SIZES ", \"hidden_act\": \"relu\", \"extra_layers\": 3}"));
    ASSERT_TRUE(int_of(c, "extra") == 3 && int_of(c, "qkv_bias") == 1);
    ckpt_family_config_free(c);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "c", "{" SIZES ", \"extra_layers\": -1}"));
    ASSERT_ERROR_MENTIONS("c: extra_layers is -1, not an integer from 0 to 2147483647");
    ckpt_family_free(f);

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_TRUE(load_text(bad[i].text, &f) < 0);
        ASSERT_TRUE(f == NULL);
        ASSERT_ERROR_MENTIONS(bad[i].message);
    }
}

/* config.json from a config: keys sorted, a family's own keys only, floats as Python. */
CKPT_TEST(test_family_config_json)
{
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_buf json = CKPT_BUF_INIT;
    const char *text;

    ASSERT_OK(ckpt_family_builtin(&f, "qwen2"));
    ASSERT_OK(read_cfg("qwen2", "\"eos_token_id\": [3, 4], \"rms_norm_eps\": 1e-5", &c));
    ASSERT_OK(ckpt_family_config_json(f, c, CKPT_FAMILY_HF, CKPT_DTYPE_BF16, &json));
    text = (const char *)json.data;
    ASSERT_TRUE(strstr(text, "{\n  \"architectures\": [\n    \"Qwen2ForCausalLM\"\n  ],\n  \"attention_dropout\": 0.0,\n") == text);
    ASSERT_TRUE(strstr(text, "\"eos_token_id\": [\n    3,\n    4\n  ],\n") != NULL);
    ASSERT_TRUE(strstr(text, "\"head_dim\"") == NULL && strstr(text, "\"attention_bias\"") == NULL);
    ASSERT_TRUE(strstr(text, "\"layer_types\": [\n    \"full_attention\",\n    \"full_attention\"\n  ],\n") != NULL);
    ASSERT_TRUE(strstr(text, "\"rms_norm_eps\": 1e-05,\n") != NULL && strstr(text, "\"sliding_window\": null,\n") != NULL);
    ASSERT_TRUE(strstr(text, "\"rope_parameters\": {\n    \"rope_theta\": 10000.0,\n    \"rope_type\": \"default\"\n  },\n") != NULL);
    ASSERT_TRUE(strstr(text, "\"torch_dtype\": \"bfloat16\",\n  \"use_cache\": true,\n  \"use_sliding_window\": false,\n"
                             "  \"vocab_size\": 200\n}\n") != NULL);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_config_json(f, c, CKPT_FAMILY_MEGATRON, CKPT_DTYPE_BF16, &json));
    ckpt_family_config_free(c);
    ckpt_buf_dispose(&json);
}

/* Megatron args in Megatron's order, with the generators' shapes, and what they cannot say refused. */
CKPT_TEST(test_family_config_args)
{
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_arena *a;
    ckpt_value *args;
    const ckpt_value *v;
    ckpt_model_config mc;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_family_builtin(&f, "mistral"));
    ASSERT_OK(read_cfg("mistral", "\"sliding_window\": 8, \"eos_token_id\": [3, 4], \"torch_dtype\": \"float16\"", &c));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 2, "local", &args));
    v = ckpt_megatron_arg(args, "window_size");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_TUPLE && v->u.seq.items[0]->u.integer == 7 && v->u.seq.items[1]->u.integer == 0);
    v = ckpt_megatron_arg(args, "hf_eos_token_id");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_LIST && v->u.seq.n == 2);
    ASSERT_TRUE(ckpt_megatron_arg(args, "hf_bos_token_id") == NULL);
    v = ckpt_megatron_arg(args, "padded_vocab_size");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_INT && v->u.integer == 256);
    v = ckpt_megatron_arg(args, "group_query_attention");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && v->u.boolean);
    v = ckpt_megatron_arg(args, "rotary_percent");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_FLOAT && v->u.real == 1.0);
    v = ckpt_megatron_arg(args, "fp16");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && v->u.boolean);
    ASSERT_TRUE(ckpt_value_is_str(ckpt_megatron_arg(args, "hf_model_type"), "mistral"));
    ASSERT_TRUE(ckpt_value_is_str(ckpt_megatron_arg(args, "transformer_impl"), "local"));
    /* the window on every layer */
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.window == 8 && mc.window_full_every == 0 && mc.layer_window == NULL);
    ckpt_family_config_free(c);

    ASSERT_OK(ckpt_family_builtin(&f, "llama"));
    ASSERT_OK(read_cfg("llama", "\"tie_word_embeddings\": true", &c));
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.norm == CKPT_NORM_RMS && mc.act == CKPT_ACT_SWIGLU && mc.position == CKPT_POSITION_ROPE);
    ASSERT_TRUE(mc.hidden_size == 64 && mc.num_kv_heads == 2 && mc.head_dim == 16 && mc.tied_embeddings == 1);
    ASSERT_TRUE(mc.rope_scaling_factor == 1.0 && mc.rope_theta == 10000.0 && mc.qk_norm == 0);
    ckpt_family_config_free(c);
    ASSERT_OK(read_cfg("llama", "\"mlp_bias\": true", &c));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_config_args(f, c, a, 1, "local", &args));
    ASSERT_ERROR_MENTIONS("cfg/config.json: mlp_bias true: Megatron's args have q/k/v biases");
    ckpt_family_config_free(c);
    ASSERT_OK(read_cfg("llama", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 2.0, "
                                "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}", &c));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_config_args(f, c, a, 1, "local", &args));
    ASSERT_ERROR_MENTIONS("Megatron-LM applies it with 1, 4 and 8192 only");
    ckpt_family_config_free(c);
    ckpt_arena_free(a);
}

/* A config filled field by field takes the family's defaults for what the caller left out,
 * expressions over earlier fields included (Qwen3's max_window_layers 28 and head_dim 128 as
 * Qwen3Config; LLaMA's head_dim from the sizes); a size nobody gave is refused naming the
 * config. */
CKPT_TEST(test_family_config_complete)
{
    static const char *const sizes[] = { "hidden_size", "ffn_size", "num_layers", "num_heads", "num_kv_heads",
                                         "vocab_size" };
    static const int64_t values[] = { 64, 96, 2, 4, 2, 128 };
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_arena *a;
    ckpt_value *args;
    size_t i;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_family_builtin(&f, "qwen3"));
    ASSERT_OK(ckpt_family_config_new(&c, f, "filled/config.json"));
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        ASSERT_OK(ckpt_family_config_set_int(c, sizes[i], values[i]));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_family_config_args(f, c, a, 1, "local", &args));
    ASSERT_ERROR_MENTIONS("filled/config.json: head_dim is not given or not positive");
    ASSERT_OK(ckpt_family_config_complete(c));
    ASSERT_TRUE(int_of(c, "max_window_layers") == 28 && int_of(c, "head_dim") == 128);
    ASSERT_OK(ckpt_family_config_args(f, c, a, 1, "local", &args));
    ASSERT_TRUE(ckpt_megatron_arg(args, "hf_max_window_layers")->u.integer == 28);
    ckpt_family_config_free(c);
    ASSERT_OK(ckpt_family_builtin(&f, "llama"));
    ASSERT_OK(ckpt_family_config_new(&c, f, "filled/config.json"));
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        ASSERT_OK(ckpt_family_config_set_int(c, sizes[i], values[i]));
    ASSERT_OK(ckpt_family_config_complete(c));
    ASSERT_TRUE(int_of(c, "head_dim") == 16 && int_of(c, "max_positions") == 2048);
    ckpt_family_config_free(c);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_family_config_complete(NULL));
    ckpt_arena_free(a);
}

/* Megatron's local layer names are a variant of one map, loadable by the old names, and its
 * inverse keeps the variant. */
CKPT_TEST(test_family_map_variants)
{
    static const char bad[] = "{\"ckptconv_map\": 1, \"name\": \"v\", \"rules\": [{\"from\": \"a.{L}\", \"to\": \"b.{L}\"}],"
                              " \"variants\": {\"x\": {\"rules\": [{\"from\": \"c.{L}\", \"to\": \"d.{L}\"}]}}}";
    static const char good[] = "{\"ckptconv_map\": 1, \"name\": \"v\", \"rules\": [{\"from\": \"a.{L}\", \"to\": \"b.{L}\"}],"
                               " \"variants\": {\"x\": {\"rules\": [{\"from\": \"a.{L}\", \"to\": \"d.{L}\"}]}}}";
    ckpt_map *m, *inv;
    size_t i, found = 0;

    ASSERT_OK(ckpt_map_builtin(&m, "hf_llama_megatron_local"));
    ASSERT_EQ_STR(ckpt_map_name(m), "hf_llama_megatron_local");
    ASSERT_TRUE(strstr(ckpt_map_description(m), "local layer names") != NULL);
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_EQ_STR(ckpt_map_name(inv), "megatron_hf_llama_local");
    ckpt_map_free(inv);
    ckpt_map_free(m);
    ASSERT_OK(ckpt_map_builtin(&m, "megatron_hf_llama_local"));
    ASSERT_EQ_STR(ckpt_map_name(m), "megatron_hf_llama_local");
    ckpt_map_free(m);
    ASSERT_OK(ckpt_map_builtin(&m, "hf_llama_megatron"));
    ASSERT_TRUE(strstr(ckpt_map_description(m), "Transformer Engine layer names") != NULL);
    ckpt_map_free(m);
    for (i = 0; i + 1 < ckpt_map_builtin_count(); i++)
        if (strcmp(ckpt_map_builtin_at(i), "hf_llama_megatron") == 0)
            found = strcmp(ckpt_map_builtin_at(i + 2), "hf_llama_megatron_local") == 0 &&
                    strcmp(ckpt_map_builtin_at(i + 3), "megatron_hf_llama_local") == 0;
    ASSERT_TRUE(found);
    ASSERT_OK(ckpt_map_parse(&m, good, sizeof good - 1, "v.json"));
    ckpt_map_free(m);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_parse(&m, bad, sizeof bad - 1, "v.json"));
    ASSERT_ERROR_MENTIONS("v.json: variants.x: rules[0]: replaces no rule of the map");
}

/* The RoPE generators: both of transformers' places must agree, and Megatron's fixed llama3
 * frequencies come back from use_rope_scaling. */
CKPT_TEST(test_family_rope)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    ckpt_arena *a;
    ckpt_value *args;
    const ckpt_value *v;

    ASSERT_FAILS(CKPT_EFORMAT, read_cfg("llama", "\"rope_scaling\": {\"rope_type\": \"default\"}, \"rope_parameters\": "
                                                 "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                                                 "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}", &c));
    ASSERT_ERROR_MENTIONS("rope_scaling and rope_parameters describe different RoPE scalings");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_cfg("llama", "\"rope_parameters\": {\"rope_type\": \"default\", \"mscale\": 1}", &c));
    ASSERT_ERROR_MENTIONS("rope_parameters.mscale is not a field of RoPE types default, llama3");

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_TRUE((args = llama_args(a)) != NULL);
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "use_rope_scaling", 1));
    ASSERT_OK(ckpt_megatron_args_set_float(a, args, "rope_scaling_factor", 32.0));
    ASSERT_OK(ckpt_megatron_args_set_int_list(a, args, "hf_eos_token_id", (const int64_t[]){ 5, 7 }, 2));
    ASSERT_OK(ckpt_family_builtin(&f, "llama"));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_OK(ckpt_family_config_get(c, "rope", &v));
    ASSERT_TRUE(ckpt_value_is_str(v, "llama3"));
    ASSERT_OK(ckpt_family_config_get(c, "rope_factor", &v));
    ASSERT_TRUE(v->kind == CKPT_VAL_FLOAT && v->u.real == 32.0);
    ASSERT_TRUE(int_of(c, "rope_original_max_positions") == 8192);
    ASSERT_OK(ckpt_family_config_get(c, "eos_token_id", &v));
    ASSERT_TRUE(v->kind == CKPT_VAL_LIST && v->u.seq.n == 2 && v->u.seq.items[1]->u.integer == 7);
    ckpt_family_config_free(c);
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "hf_bos_token_id", 200));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("args.hf_bos_token_id is not a token id below the vocabulary size 200");
    ASSERT_OK(ckpt_megatron_args_set_int_pair(a, args, "window_size", 3, 3));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_args_check(f, args));
    ASSERT_ERROR_MENTIONS("args.window_size is not a causal window (W - 1, 0)");
    ckpt_arena_free(a);
}
