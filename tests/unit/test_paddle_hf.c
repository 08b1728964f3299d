/* LLaMA configs between PaddleNLP and Hugging Face (ckpt_paddle_hf_dims,
 * ckpt_paddle_config_from_hf) on the fixtures' config.json files. */
#include "test.h"

#include <cjson/cJSON.h>

#include <stdlib.h>

/* A whole file as a NUL-terminated string (ckpt_test_read_file leaves room for the NUL). */
static char *config_text(const char *rel)
{
    size_t len;
    unsigned char *data = ckpt_test_read_file(ckpt_test_data(rel), &len);

    if (data)
        data[len] = '\0';
    return (char *)data;
}

CKPT_TEST(test_paddle_llama_configs_with_hf)
{
    static const char bad_head_dim[] = "{\"hidden_size\": 64, \"num_attention_heads\": 4, \"head_dim\": 32, "
                                       "\"intermediate_size\": 96, \"num_hidden_layers\": 2, \"vocab_size\": 8}";
    static const char bad_pad[] = "{\"hidden_size\": 64, \"num_attention_heads\": 4, \"intermediate_size\": 96, "
                                  "\"num_hidden_layers\": 2, \"vocab_size\": 8, \"pad_token_id\": 1e300}";
    static const struct {
        const char *key;
        int64_t value;
    } ints[] = { { "hidden_size", 64 },         { "intermediate_size", 96 },      { "num_attention_heads", 4 },
                 { "num_key_value_heads", 2 },  { "num_hidden_layers", 4 },       { "vocab_size", 200 },
                 { "bos_token_id", 1 },         { "eos_token_id", 2 },            { "max_position_embeddings", 32 } };
    ckpt_hf_llama_dims d;
    ckpt_buf out = CKPT_BUF_INIT;
    const cJSON *v;
    char *text;
    size_t i;
    cJSON *j;

    ASSERT_TRUE((text = config_text("paddlenlp/fp32_tp1/config.json")) != NULL);
    ASSERT_OK(ckpt_paddle_hf_dims("config.json", text, CKPT_DTYPE_BF16, &d));
    free(text);
    ASSERT_TRUE(d.hidden_size == 16 && d.intermediate_size == 32 && d.num_layers == 4 && d.vocab_size == 128);
    ASSERT_TRUE(d.num_heads == 4 && d.num_kv_heads == 2 && d.head_dim == 4 && d.max_positions == 128);
    ASSERT_TRUE(d.rms_norm_eps == 1e-6 && d.rope_theta == 10000.0 && !d.tied);
    ASSERT_TRUE(d.bos_token_id == 1 && d.eos_token_id == 2 && d.dtype == CKPT_DTYPE_BF16);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_hf_dims("config.json", "{\"hidden_size\": 16}", CKPT_DTYPE_F32, &d));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MODEL);
    ASSERT_ERROR_MENTIONS("config.json: intermediate_size is missing");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_hf_dims("config.json", "[1]", CKPT_DTYPE_F32, &d));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_FORMAT);

    /* transformers 5's config (rope_theta in rope_parameters) to PaddleNLP's */
    ASSERT_TRUE((text = config_text("hf/llama_tiny/config.json")) != NULL);
    ASSERT_OK(ckpt_paddle_config_from_hf(text, 1, 0, CKPT_DTYPE_BF16, &out));
    free(text);
    ASSERT_TRUE((j = cJSON_Parse((const char *)out.data)) != NULL);
    for (i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        v = cJSON_GetObjectItemCaseSensitive(j, ints[i].key);
        if (!cJSON_IsNumber(v) || v->valuedouble != (double)ints[i].value)
            ckpt_test_fail(__FILE__, __LINE__, "%s is not %lld", ints[i].key, (long long)ints[i].value);
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "rms_norm_eps");
    ASSERT_TRUE(cJSON_IsNumber(v) && v->valuedouble == 1e-5);
    v = cJSON_GetObjectItemCaseSensitive(j, "rope_theta");
    ASSERT_TRUE(cJSON_IsNumber(v) && v->valuedouble == 10000.0);
    ASSERT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "pad_token_id")));
    ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fuse_attention_qkv")));
    ASSERT_TRUE(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "fuse_attention_ffn")));
    ASSERT_TRUE(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings")));
    ASSERT_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "dtype")), "bfloat16");
    ASSERT_EQ_STR(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "architectures"), 0)),
                  "LlamaForCausalLM");
    cJSON_Delete(j);
    /* and back: PaddleNLP's reading of what was written */
    ASSERT_OK(ckpt_paddle_hf_dims("config.json", (const char *)out.data, CKPT_DTYPE_BF16, &d));
    ASSERT_TRUE(d.hidden_size == 64 && d.head_dim == 16 && d.num_kv_heads == 2 && d.vocab_size == 200);
    ckpt_buf_dispose(&out);

    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_paddle_config_from_hf(bad_head_dim, 0, 1, CKPT_DTYPE_F32, &out));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MODEL);
    ASSERT_ERROR_MENTIONS("head_dim 32");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_config_from_hf("not json", 0, 1, CKPT_DTYPE_F32, &out));
    /* a value out of range is refused, not written into PaddleNLP's config */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_config_from_hf(bad_pad, 0, 1, CKPT_DTYPE_F32, &out));
    ASSERT_ERROR_MENTIONS("the Hugging Face config.json: pad_token_id is 1e+300");
    ckpt_buf_dispose(&out);
}
