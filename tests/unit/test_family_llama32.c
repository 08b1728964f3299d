/* Llama 3.2 (testdata/hf/llama32_tiny by transformers 4.46.3, testdata/hf/transformers5/
 * llama32_tiny by 5.24.0: tied embeddings, llama3 RoPE scaling factor 32) through the llama
 * family: its config reads as tied with factor 32, the Megatron args say use_rope_scaling with
 * rope_scaling_factor 32 and tied embeddings and read back alike, the config.json the family
 * writes holds every key transformers wrote with its value (a null token id may be left out),
 * and verify's Hugging Face reader gives transformers' logits. */
#include "family_fixture.h"

static const char *const sets[] = { "hf/llama32_tiny", "hf/transformers5/llama32_tiny" };

static int bool_of(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    return ckpt_family_config_get(c, field, &v) == 0 && v->kind == CKPT_VAL_BOOL ? v->u.boolean : -1;
}

static void check_config(const char *dir)
{
    const ckpt_family *f;
    ckpt_family_config *c, *back;
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_arena *a;
    ckpt_value *args;
    const ckpt_value *v;
    char *text = fx_text(dir, "config.json");
    cJSON *want, *got, *item;

    ASSERT_TRUE(text != NULL);
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, dir, text));
    ASSERT_EQ_STR(ckpt_family_name(f), "llama");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, dir, text));
    ASSERT_TRUE(bool_of(c, "tied") == 1 && fx_real(c, "rope_factor") == 32.0 && fx_real(c, "rope_theta") == 500000.0);

    ASSERT_OK(ckpt_family_config_json(f, c, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &json));
    want = cJSON_Parse(text);
    got = cJSON_ParseWithLength((const char *)json.data, json.len);
    ASSERT_TRUE(want && got);
    cJSON_ArrayForEach(item, want) {
        const cJSON *ours = cJSON_GetObjectItemCaseSensitive(got, item->string);
        /* a null token id left out reads as the same None */
        if (strcmp(item->string, "transformers_version") == 0 || (cJSON_IsNull(item) && !ours))
            continue;
        if (!cJSON_Compare(item, ours, 1))
            ckpt_test_fail(__FILE__, __LINE__, "%s: config.json key %s differs from transformers'", dir, item->string);
    }
    cJSON_Delete(want);
    cJSON_Delete(got);

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 2, "transformer_engine", &args));
    v = ckpt_megatron_arg(args, "use_rope_scaling");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && v->u.boolean);
    v = ckpt_megatron_arg(args, "rope_scaling_factor");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_FLOAT && v->u.real == 32.0);
    v = ckpt_megatron_arg(args, "untie_embeddings_and_output_weights");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && !v->u.boolean);
    ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(bool_of(back, "tied") == 1 && fx_real(back, "rope_factor") == 32.0);
    ckpt_family_config_free(back);
    ckpt_arena_free(a);
    ckpt_family_config_free(c);
    ckpt_buf_dispose(&json);
    free(text);
}

CKPT_TEST(test_family_llama32_config)
{
    size_t i;

    for (i = 0; i < sizeof sets / sizeof sets[0]; i++)
        check_config(sets[i]);
}

CKPT_TEST(test_family_llama32_logits)
{
    const char *why;
    size_t i;
    double e;

    for (i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        e = fx_logits_error(ckpt_test_data(sets[i]), sets[i], 128, 0, &why);
        if (!(e <= 1e-5))
            ckpt_test_fail(__FILE__, __LINE__, "%s: max abs logit error %g (%s)", sets[i], e, why);
    }
}
