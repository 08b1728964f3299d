/* Gemma 3 with the RoPE of gemma-3-4b/12b/27b: linear scaling (factor 8) of the full-attention
 * layers only, on the real fixtures (testdata/hf/gemma3_linear_tiny by transformers 4.53.3:
 * rope_scaling beside rope_theta and rope_local_base_freq; testdata/hf/transformers5/
 * gemma3_linear_tiny by 5.24.0: rope_parameters per layer type). Both read as the same config,
 * go to Megatron's args (hf_rope_scaling_factor, nothing else changed) and back to the
 * config.json transformers 5 wrote with the same RoPE in 4.5x's keys beside; verify's forward
 * divides the full layers' positions by the factor and gives each transformers' own logits,
 * and without the factor does not. Another rope_type, a factor that is not a positive number
 * (in config.json or the args), scaling on the sliding layers and two spellings that disagree
 * (on the scaling or on a RoPE base) are refused, naming the field; LLaMA keeps its own RoPE
 * types, and its args refuse Gemma 3's factor. */
#include "family_fixture.h"

#define HF4 "hf/gemma3_linear_tiny"
#define HF5 "hf/transformers5/gemma3_linear_tiny"

static const char *const sets[] = { HF4, HF5 };
/* what ckptconv writes beside transformers 5's keys, for transformers 4.5x */
static const char *const keys_4x[] = { "rope_local_base_freq", "rope_scaling", "rope_theta", "sliding_window_pattern",
                                       "torch_dtype", NULL };

#define LLAMA                                                                                                     \
    "\"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
    "\"vocab_size\": 128"

static int read_dir(const char *dir, ckpt_family_config **c)
{
    const ckpt_family *f;
    char *text = fx_text(dir, "config.json");
    int rc = text ? ckpt_family_builtin(&f, "gemma3") : CKPT_ENOMEM;

    if (rc == 0)
        rc = ckpt_family_config_read(c, f, CKPT_FAMILY_HF, "gemma/config.json", text);
    free(text);
    return rc;
}

/* A gemma3_text config.json of the fixture's sizes with `rope` (its RoPE keys) added. */
static int read_rope(const char *rope, ckpt_family_config **c)
{
    const ckpt_family *f;
    char text[1024];
    int rc = ckpt_family_builtin(&f, "gemma3");

    snprintf(text, sizeof text,
             "{\"model_type\": \"gemma3_text\", \"hidden_size\": 32, \"intermediate_size\": 32, "
             "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
             "\"vocab_size\": 128, \"layer_types\": [\"sliding_attention\", \"full_attention\"], %s}",
             rope);
    return rc < 0 ? rc : ckpt_family_config_read(c, f, CKPT_FAMILY_HF, "gemma/config.json", text);
}

static int is_str(const ckpt_family_config *c, const char *field, const char *want)
{
    const ckpt_value *v;
    return ckpt_family_config_get(c, field, &v) == 0 && ckpt_value_is_str(v, want);
}

/* Both spellings: linear by 8 on the full layers, the local base unscaled; Megatron's args
 * carry the factor in hf_rope_scaling_factor (and leave llama3's use_rope_scaling and
 * Megatron's default rope_scaling_factor as they are); from the args alone, the config.json
 * transformers 5 wrote plus the same RoPE in transformers 4.5x's keys (rope_scaling beside
 * rope_theta and rope_local_base_freq), which 4.5x would otherwise not see. A model without
 * scaling has no such arg. */
CKPT_TEST(test_family_gemma3_rope_config_round_trip)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL, *back = NULL;
    ckpt_arena *a = NULL;
    ckpt_value *args = NULL;
    const ckpt_value *v;
    ckpt_buf json = CKPT_BUF_INIT;
    char *want = fx_text(HF5, "config.json"), *tv;
    size_t i;

    ASSERT_TRUE(want != NULL);
    tv = strstr(want, "  \"transformers_version\"");
    ASSERT_TRUE(tv != NULL);
    memmove(tv, strchr(tv, '\n') + 1, strlen(strchr(tv, '\n') + 1) + 1);
    ASSERT_OK(ckpt_family_builtin(&f, "gemma3"));
    ASSERT_OK(ckpt_arena_new(&a));
    for (i = 0; i < 2; i++) {
        ASSERT_OK(read_dir(sets[i], &c));
        ASSERT_TRUE(is_str(c, "rope", "linear"));
        ASSERT_TRUE(fx_real(c, "rope_factor") == 8.0);
        ASSERT_TRUE(fx_real(c, "rope_theta") == 1e6 && fx_real(c, "rope_local_theta") == 1e4);
        ASSERT_OK(ckpt_family_config_args(f, c, a, 2, "transformer_engine", &args));
        v = ckpt_megatron_arg(args, "hf_rope_scaling_factor");
        ASSERT_TRUE(v && v->kind == CKPT_VAL_FLOAT && v->u.real == 8.0);
        v = ckpt_megatron_arg(args, "use_rope_scaling");
        ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && !v->u.boolean);
        v = ckpt_megatron_arg(args, "rotary_base");
        ASSERT_TRUE(v && ((v->kind == CKPT_VAL_FLOAT && v->u.real == 1e6) ||
                          (v->kind == CKPT_VAL_INT && v->u.integer == 1000000)));
        ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, "args", args));
        ASSERT_TRUE(is_str(back, "rope", "linear") && fx_real(back, "rope_factor") == 8.0);
        ASSERT_OK(ckpt_family_config_json(f, back, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &json));
        ASSERT_TRUE(strstr((const char *)json.data, "\n  \"rope_local_base_freq\": 10000.0,\n") != NULL);
        ASSERT_TRUE(strstr((const char *)json.data, "\n  \"rope_scaling\": {\n    \"factor\": 8.0,\n    \"rope_type\": "
                                                    "\"linear\"\n  },\n  \"rope_theta\": 1000000.0,\n") != NULL);
        ASSERT_TRUE(strstr((const char *)json.data, "\n  \"sliding_window_pattern\": 2,\n") != NULL);
        ASSERT_TRUE(strstr((const char *)json.data, "\n  \"torch_dtype\": \"float32\",\n") != NULL);
        ASSERT_OK(fx_drop_keys((char *)json.data, keys_4x));
        ASSERT_EQ_STR((const char *)json.data, want);
        ckpt_buf_dispose(&json);
        ckpt_family_config_free(back);
        ckpt_family_config_free(c);
        back = c = NULL;
    }
    ASSERT_OK(read_dir("hf/transformers5/gemma3_tiny", &c));
    ASSERT_TRUE(is_str(c, "rope", "default"));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 2, "transformer_engine", &args));
    ASSERT_TRUE(ckpt_megatron_arg(args, "hf_rope_scaling_factor") == NULL);
    ckpt_family_config_free(c);
    ckpt_arena_free(a);
    free(want);
}

/* The forward verify runs: rope_linear_factor 8 (1 without scaling), and with it each
 * fixture's own transformers logits (4.53 and 5.24 initialised the weights differently);
 * without it, logits far from them. */
CKPT_TEST(test_family_gemma3_rope_forward)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    ckpt_model_config mc, unscaled;
    const char *why;
    size_t i;
    double e;

    ASSERT_OK(ckpt_family_builtin(&f, "gemma3"));
    ASSERT_OK(read_dir(HF5, &c));
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.rope_linear_factor == 8.0 && mc.rope_scaling_factor == 1.0 && mc.rope_theta_local == 1e4);
    ASSERT_TRUE(mc.layer_window && mc.layer_window[0] == 1 && mc.layer_window[1] == 0);
    ckpt_family_config_free(c);
    ASSERT_OK(read_dir("hf/transformers5/gemma3_tiny", &c));
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.rope_linear_factor == 1.0);
    ckpt_family_config_free(c);
    ckpt_model_config_unset(&unscaled);
    unscaled.rope_linear_factor = 1.0;
    for (i = 0; i < 2; i++) {
        e = fx_logits_error(ckpt_test_data(sets[i]), sets[i], 128, 0, &why);
        if (!(e < 1e-5))
            ckpt_test_fail(__FILE__, __LINE__, "%s: max |logit error| %g (%s)", sets[i], e, why);
        e = fx_logits_error_with(ckpt_test_data(sets[i]), sets[i], 128, 0, &unscaled, &why);
        if (!(e > 1e-2 && e < INFINITY))
            ckpt_test_fail(__FILE__, __LINE__, "%s without the factor: max |logit error| %g (%s)", sets[i], e, why);
    }
}

CKPT_TEST(test_family_gemma3_rope_refusals)
{
    static const struct {
        const char *rope, *says;
    } bad[] = {
        { "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"yarn\", \"factor\": 8.0}}",
          "gemma/config.json: rope_parameters.full_attention.rope_type yarn is not one of default, linear" },
        { "\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 8.0}",
          "gemma/config.json: rope_scaling.rope_type dynamic is not one of default, linear" },
        { "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 0}",
          "gemma/config.json: rope_scaling.factor is not a number > 0 (rope_type linear)" },
        { "\"rope_scaling\": {\"type\": \"linear\", \"factor\": -8.0}",
          "gemma/config.json: rope_scaling.factor is not a number > 0 (rope_type linear)" },
        { "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": \"8\"}}",
          "gemma/config.json: rope_parameters.full_attention.factor is not a number > 0 (rope_type linear)" },
        { "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\"}}",
          "gemma/config.json: rope_parameters.full_attention.factor is missing (rope_type linear)" },
        { "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 4.0}, "
          "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0}}",
          "gemma/config.json: rope_scaling and rope_parameters.full_attention describe different RoPE scalings" },
        { "\"rope_theta\": 200000.0, \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1000000.0}}",
          "gemma/config.json: rope_theta 200000 and rope_parameters.full_attention.rope_theta 1000000 differ "
          "(transformers versions that read one or the other would build different models)" },
        { "\"rope_local_base_freq\": 10000, \"rope_parameters\": {\"sliding_attention\": {\"rope_theta\": 20000.0}}",
          "gemma/config.json: rope_local_base_freq 10000 and rope_parameters.sliding_attention.rope_theta 20000 differ" },
        { "\"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0}}",
          "gemma/config.json: rope_type is \"linear\", not \"default\" (rope_parameters.sliding_attention: Gemma 3's "
          "sliding-window layers are not scaled" },
    };
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    ckpt_arena *a = NULL;
    ckpt_value *args = NULL;
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (read_rope(bad[i].rope, &c) == 0) {
            ckpt_family_config_free(c);
            ckpt_test_fail(__FILE__, __LINE__, "%s is read", bad[i].rope);
            continue;
        }
        ASSERT_ERROR_MENTIONS(bad[i].says);
    }
    /* transformers 4's old spelling "type", an integer factor */
    ASSERT_OK(read_rope("\"rope_scaling\": {\"type\": \"linear\", \"factor\": 8}", &c));
    ASSERT_TRUE(is_str(c, "rope", "linear") && fx_real(c, "rope_factor") == 8.0);
    /* the args' factor: a positive number, or refused naming the arg */
    ASSERT_OK(ckpt_family_builtin(&f, "gemma3"));
    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 1, "transformer_engine", &args));
    ckpt_family_config_free(c);
    ASSERT_OK(ckpt_megatron_args_set_float(a, args, "hf_rope_scaling_factor", 0.0));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, "args", args));
    ASSERT_ERROR_MENTIONS("args.hf_rope_scaling_factor is not a number > 0");
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_rope_scaling_factor", "8"));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, "args", args));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "hf_rope_scaling_factor", 4));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, "args", args));
    ASSERT_TRUE(is_str(c, "rope", "linear") && fx_real(c, "rope_factor") == 4.0);
    ckpt_family_config_free(c);
    ckpt_arena_free(a);
    /* LLaMA's own RoPE types stay its own, and args of another family with Gemma 3's factor
     * are refused rather than read without it */
    ASSERT_OK(ckpt_family_builtin(&f, "llama"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED,
                 ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "llama/config.json",
                                         "{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8.0}}"));
    ASSERT_ERROR_MENTIONS("rope_scaling.rope_type linear is not one of default, llama3");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "llama/config.json", "{" LLAMA "}"));
    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 1, "transformer_engine", &args));
    ckpt_family_config_free(c);
    ASSERT_OK(ckpt_family_args_check(f, args));
    ASSERT_OK(ckpt_megatron_args_set_float(a, args, "hf_rope_scaling_factor", 8.0));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_args_check(f, args));
    ASSERT_ERROR_MENTIONS("args.hf_rope_scaling_factor is set, which no Hugging Face llama, mistral or qwen2 config says");
    ckpt_arena_free(a);
}
