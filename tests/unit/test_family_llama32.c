/* Llama 3.2 (testdata/hf/llama32_tiny by transformers 4.46.3, testdata/hf/transformers5/
 * llama32_tiny by 5.24.0: tied embeddings, llama3 RoPE scaling factor 32) through the llama
 * family: its config reads as tied with factor 32, the Megatron args say use_rope_scaling with
 * rope_scaling_factor 32 and tied embeddings and read back alike, the config.json the family
 * writes holds every key transformers wrote with its value (a null token id may be left out),
 * and verify's Hugging Face reader gives transformers' logits. */
#include "test.h"

#include <ckpt/family.h>
#include <ckpt/megatron.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

static const char *const sets[] = { "hf/llama32_tiny", "hf/transformers5/llama32_tiny" };

/* dir/name as NUL-terminated text, or NULL. */
static char *read_text(const char *dir, const char *name)
{
    char path[512];
    size_t len;
    unsigned char *raw;
    char *text;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    raw = ckpt_test_read_file(ckpt_test_data(path), &len);
    text = raw ? malloc(len + 1) : NULL;
    if (text) {
        memcpy(text, raw, len);
        text[len] = 0;
    }
    free(raw);
    return text;
}

static double real_of(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0)
        return -99;
    return v->kind == CKPT_VAL_FLOAT ? v->u.real : v->kind == CKPT_VAL_INT ? (double)v->u.integer : -98;
}

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
    char *text = read_text(dir, "config.json");
    cJSON *want, *got, *item;

    ASSERT_TRUE(text != NULL);
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, dir, text));
    ASSERT_EQ_STR(ckpt_family_name(f), "llama");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, dir, text));
    ASSERT_TRUE(bool_of(c, "tied") == 1 && real_of(c, "rope_factor") == 32.0 && real_of(c, "rope_theta") == 500000.0);

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
    ASSERT_TRUE(bool_of(back, "tied") == 1 && real_of(back, "rope_factor") == 32.0);
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

/* The largest |difference| between verify's forward of dir and its logits.json. */
static double logits_error(const char *dir, const char **why)
{
    ckpt_model *m = NULL;
    char *text = read_text(dir, "logits.json"), path[512];
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    cJSON *ids = cJSON_GetObjectItem(j, "input_ids"), *rows = cJSON_GetObjectItem(j, "logits");
    int32_t tok[16];
    float out[16 * 128];
    double worst = INFINITY;
    int n = cJSON_GetArraySize(ids), i, v;

    free(text);
    *why = "";
    snprintf(path, sizeof path, "%s", ckpt_test_data(dir));
    for (i = 0; i < n && i < 16; i++)
        tok[i] = cJSON_GetArrayItem(ids, i)->valueint;
    if (n < 1 || n > 16 || ckpt_model_open(&m, path, NULL) < 0 || ckpt_model_config_of(m)->vocab_size != 128 ||
        ckpt_model_forward(m, NULL, tok, n, out) < 0) {
        *why = ckpt_error_last()->message;
    } else {
        worst = 0;
        for (i = 0; i < n; i++)
            for (v = 0; v < 128; v++)
                worst = fmax(worst, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, i), v)->valuedouble -
                                         out[i * 128 + v]));
    }
    ckpt_model_close(m);
    cJSON_Delete(j);
    return worst;
}

CKPT_TEST(test_family_llama32_logits)
{
    const char *why;
    size_t i;
    double e;

    for (i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        e = logits_error(sets[i], &why);
        if (!(e <= 1e-5))
            ckpt_test_fail(__FILE__, __LINE__, "%s: max abs logit error %g (%s)", sets[i], e, why);
    }
}
