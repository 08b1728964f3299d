/* A family config as read (src/rules/family_config.c): which fields took the family's own
 * default for a key the source lacks (ckpt_family_config_defaulted), in config.json, PaddleNLP's
 * config.json, Megatron args and a config completed field by field; and check rows that
 * refuse any value (PaddleNLP's rope_scaling_type), naming it. */
#include "test.h"

#include <ckpt/family.h>
#include <ckpt/megatron.h>

#include <stdio.h>
#include <string.h>

#define SIZES                                                                                                  \
    "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
    "\"vocab_size\": 200"

static int read_as(const char *family, const char *framework, const char *extra, ckpt_family_config **c)
{
    const ckpt_family *f;
    char text[1024];
    int rc;

    snprintf(text, sizeof text, "{" SIZES "%s%s}", extra ? ", " : "", extra ? extra : "");
    if ((rc = ckpt_family_builtin(&f, family)) < 0)
        return rc;
    return ckpt_family_config_read(c, f, framework, "cfg/config.json", text);
}

static int defaulted_is(const ckpt_family_config *c, const char *field, const char *key)
{
    const char *got = ckpt_family_config_defaulted(c, field);
    return key ? got && strcmp(got, key) == 0 : got == NULL;
}

CKPT_TEST(test_family_config_defaulted_json)
{
    ckpt_family_config *c = NULL;

    /* transformers' LlamaConfig defaults: rms_norm_eps 1e-6, rope_theta 10000, untied */
    ASSERT_OK(read_as("llama", CKPT_FAMILY_HF, NULL, &c));
    ASSERT_TRUE(defaulted_is(c, "norm_eps", "rms_norm_eps") && defaulted_is(c, "rope_theta", "rope_theta"));
    ASSERT_TRUE(defaulted_is(c, "tied", "tie_word_embeddings") && defaulted_is(c, "max_positions", "max_position_embeddings"));
    /* given ones are not; nor what an expression computes as transformers does (head_dim from
     * hidden_size and heads, KV heads as heads); nor an unknown field */
    ASSERT_TRUE(defaulted_is(c, "hidden_size", NULL) && defaulted_is(c, "head_dim", NULL));
    ASSERT_TRUE(defaulted_is(c, "num_kv_heads", NULL) && defaulted_is(c, "no_such_field", NULL));
    ckpt_family_config_free(c);

    ASSERT_OK(read_as("llama", CKPT_FAMILY_HF, "\"rms_norm_eps\": 1e-5, \"rope_parameters\": {\"rope_theta\": 5e5}", &c));
    ASSERT_TRUE(defaulted_is(c, "norm_eps", NULL) && defaulted_is(c, "rope_theta", NULL));
    /* a field set afterwards is the caller's */
    ASSERT_TRUE(defaulted_is(c, "tied", "tie_word_embeddings"));
    ASSERT_OK(ckpt_family_config_set_int(c, "max_positions", 64));
    ASSERT_TRUE(defaulted_is(c, "max_positions", NULL));
    ckpt_family_config_free(c);

    /* Mistral's window of 4096 is a default, its null is given; its attention_bias is the
     * family's, which no config.json holds */
    ASSERT_OK(read_as("mistral", CKPT_FAMILY_HF, NULL, &c));
    ASSERT_TRUE(defaulted_is(c, "sliding_window", "sliding_window") && defaulted_is(c, "attention_bias", NULL));
    ckpt_family_config_free(c);
    ASSERT_OK(read_as("mistral", CKPT_FAMILY_HF, "\"sliding_window\": null", &c));
    ASSERT_TRUE(defaulted_is(c, "sliding_window", NULL));
    ckpt_family_config_free(c);
    /* Qwen3's head_dim of 128 is the family's own value, not computed */
    ASSERT_OK(read_as("qwen3", CKPT_FAMILY_HF, "\"head_dim\": null", &c));
    ASSERT_TRUE(defaulted_is(c, "head_dim", "head_dim"));
    ckpt_family_config_free(c);
    ASSERT_TRUE(ckpt_family_config_defaulted(NULL, "norm_eps") == NULL);
}

CKPT_TEST(test_family_config_defaulted_args)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    ckpt_arena *a;
    ckpt_value *args = NULL;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_megatron_args_new(a, &args));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "swiglu", 1));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "hidden_size", 64));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_attention_heads", 4));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_layers", 2));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "vocab_size", 200));
    ASSERT_OK(ckpt_megatron_args_set_float(a, args, "norm_epsilon", 1e-6));
    ASSERT_OK(ckpt_family_builtin(&f, "llama"));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, "args", args));
    /* named by the arg Megatron lacks; the one it has (the second name) is given */
    ASSERT_TRUE(defaulted_is(c, "rope_theta", "rotary_base") && defaulted_is(c, "norm_eps", NULL));
    ASSERT_TRUE(defaulted_is(c, "init_std", "init_method_std") && defaulted_is(c, "head_dim", NULL));
    ckpt_family_config_free(c);

    /* a config completed field by field: the fields the caller left to the family */
    ASSERT_OK(ckpt_family_config_new(&c, f, "built"));
    ASSERT_OK(ckpt_family_config_set_int(c, "hidden_size", 64));
    ASSERT_OK(ckpt_family_config_set_int(c, "num_heads", 4));
    ASSERT_OK(ckpt_family_config_complete(c));
    ASSERT_TRUE(defaulted_is(c, "norm_eps", "rms_norm_eps") && defaulted_is(c, "hidden_size", NULL));
    ckpt_family_config_free(c);
    ckpt_arena_free(a);
}

CKPT_TEST(test_family_config_refuse_any_value)
{
    ckpt_family_config *c = NULL;

    /* PaddleNLP's own RoPE scalings: refused in its config.json, naming the value ... */
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_as("llama", CKPT_FAMILY_PADDLE, "\"rope_scaling_type\": \"ntk\"", &c));
    ASSERT_ERROR_MENTIONS("cfg/config.json: rope_scaling_type is \"ntk\" (PaddleNLP's linear or NTK RoPE scaling");
    ASSERT_TRUE(c == NULL && ckpt_error_last()->klass == CKPT_ERRCLASS_MODEL);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_as("qwen2", CKPT_FAMILY_PADDLE, "\"rope_scaling_type\": \"linear\"", &c));
    /* ... null (PaddleNLP's default) is none; transformers has no such key */
    ASSERT_OK(read_as("llama", CKPT_FAMILY_PADDLE, "\"rope_scaling_type\": null, \"rope_scaling_factor\": 1.0", &c));
    ckpt_family_config_free(c);
    ASSERT_OK(read_as("llama", CKPT_FAMILY_HF, "\"rope_scaling_type\": \"linear\"", &c));
    ckpt_family_config_free(c);
    /* an "is" check names the value it refuses and the one it wants */
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_as("mistral", CKPT_FAMILY_HF, "\"hidden_act\": \"relu\"", &c));
    ASSERT_ERROR_MENTIONS("cfg/config.json: hidden_act is \"relu\", not \"silu\" (LLaMA's SwiGLU)");
    /* a RoPE description's type is named by its own key */
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_as("llama", CKPT_FAMILY_HF, "\"rope_scaling\": {\"type\": \"linear\"}", &c));
    ASSERT_ERROR_MENTIONS("cfg/config.json: rope_scaling.type linear is not one of default, llama3");
}
