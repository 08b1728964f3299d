/* LLaMA configs between PaddleNLP and Hugging Face transformers: the same model described
 * by each side's config.json (PaddleNLP's LlamaConfig keeps transformers' names for the
 * sizes; they differ in the fused-layer flags and the dtype field). */
#include "paddle_private.h"

#include <ckpt/shard.h>
#include <ckpt/sys/common.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

static int64_t json_int(const cJSON *cfg, const char *name, int64_t fallback)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, name);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : fallback;
}

static double json_number(const cJSON *cfg, const char *name, double fallback)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, name);
    return cJSON_IsNumber(v) ? v->valuedouble : fallback;
}

static int json_flag(const cJSON *cfg, const char *name, int fallback)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, name);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : fallback;
}

static cJSON *parse_object(const char *text, const char *what)
{
    cJSON *j = text ? cJSON_Parse(text) : NULL;

    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s is %s", what, text ? "not a JSON object" : "missing");
        return NULL;
    }
    return j;
}

int ckpt_paddle_hf_dims(const char *config_path, const char *config_json, ckpt_dtype dtype, ckpt_hf_llama_dims *d)
{
    int rc;

    /* PaddleNLP's LlamaConfig defaults where transformers' differ */
    ckpt_hf_llama_dims_init(d);
    d->max_positions = 2048;
    d->rms_norm_eps = 1e-6;
    if (!config_json)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: missing", config_path);
    if ((rc = ckpt_hf_llama_dims_parse(config_path, config_json, strlen(config_json), d)) < 0)
        return rc;
    d->dtype = dtype;
    return 0;
}

static int put_key(ckpt_buf *b, const char *key, int first)
{
    int rc = ckpt_buf_puts(b, first ? "{\n  " : ",\n  ");

    if (rc == 0)
        rc = ckpt_shard_json_string(b, key);
    return rc == 0 ? ckpt_buf_puts(b, ": ") : rc;
}

static int put_int(ckpt_buf *b, const char *key, int64_t v)
{
    int rc = put_key(b, key, 0);
    return rc == 0 ? ckpt_buf_printf(b, "%lld", (long long)v) : rc;
}

static int put_float(ckpt_buf *b, const char *key, double v)
{
    int rc = put_key(b, key, 0);
    return rc == 0 ? ckpt_shard_json_float(b, v) : rc;
}

static int put_literal(ckpt_buf *b, const char *key, const char *text)
{
    int rc = put_key(b, key, 0);
    return rc == 0 ? ckpt_buf_puts(b, text) : rc;
}

/* A token id, or null. */
static int put_token(ckpt_buf *b, const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    char text[32];

    if (!cJSON_IsNumber(v))
        return put_literal(b, key, "null");
    snprintf(text, sizeof text, "%lld", (long long)v->valuedouble);
    return put_literal(b, key, text);
}

static double hf_rope_theta(const cJSON *cfg)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(cfg, "rope_parameters");
    return json_number(cJSON_IsObject(params) ? params : cfg, "rope_theta", json_number(cfg, "rope_theta", 10000.0));
}

int ckpt_paddle_config_from_hf(const char *hf_config_json, int fuse_qkv, int fuse_ffn, ckpt_dtype dtype,
                               ckpt_buf *out)
{
    cJSON *cfg = parse_object(hf_config_json, "the Hugging Face config.json");
    int64_t hidden, heads, head_dim;
    char quoted[64];
    int rc;

    if (!cfg)
        return ckpt_error_last()->code;
    hidden = json_int(cfg, "hidden_size", 0);
    heads = json_int(cfg, "num_attention_heads", 0);
    head_dim = json_int(cfg, "head_dim", heads ? hidden / heads : 0);
    if (!hidden || !heads || head_dim * heads != hidden) {
        cJSON_Delete(cfg);
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "hidden_size %lld, %lld heads of head_dim %lld: PaddleNLP's LLaMA has head_dim = "
                               "hidden_size / num_attention_heads",
                               (long long)hidden, (long long)heads, (long long)head_dim);
    }
    snprintf(quoted, sizeof quoted, "\"%s\"", ckpt_dtype_name(dtype));
    /* json.dumps(indent=2, sort_keys=True), as PaddleNLP's save_pretrained writes it */
    rc = put_key(out, "architectures", 1);
    if (rc == 0)
        rc = ckpt_buf_puts(out, "[\n    \"LlamaForCausalLM\"\n  ]");
    if (rc == 0)
        rc = put_token(out, cfg, "bos_token_id");
    if (rc == 0)
        rc = put_literal(out, "dtype", quoted);
    if (rc == 0)
        rc = put_token(out, cfg, "eos_token_id");
    if (rc == 0)
        rc = put_literal(out, "fuse_attention_ffn", fuse_ffn ? "true" : "false");
    if (rc == 0)
        rc = put_literal(out, "fuse_attention_qkv", fuse_qkv ? "true" : "false");
    if (rc == 0)
        rc = put_int(out, "hidden_size", hidden);
    if (rc == 0)
        rc = put_float(out, "initializer_range", json_number(cfg, "initializer_range", 0.02));
    if (rc == 0)
        rc = put_int(out, "intermediate_size", json_int(cfg, "intermediate_size", 0));
    if (rc == 0)
        rc = put_int(out, "max_position_embeddings", json_int(cfg, "max_position_embeddings", 0));
    if (rc == 0)
        rc = put_literal(out, "model_type", "\"llama\"");
    if (rc == 0)
        rc = put_int(out, "num_attention_heads", heads);
    if (rc == 0)
        rc = put_int(out, "num_hidden_layers", json_int(cfg, "num_hidden_layers", 0));
    if (rc == 0)
        rc = put_int(out, "num_key_value_heads", json_int(cfg, "num_key_value_heads", heads));
    if (rc == 0)
        rc = put_token(out, cfg, "pad_token_id");
    if (rc == 0)
        rc = put_float(out, "rms_norm_eps", json_number(cfg, "rms_norm_eps", 1e-6));
    if (rc == 0)
        rc = put_float(out, "rope_theta", hf_rope_theta(cfg));
    if (rc == 0)
        rc = put_literal(out, "tie_word_embeddings", json_flag(cfg, "tie_word_embeddings", 0) ? "true" : "false");
    if (rc == 0)
        rc = put_int(out, "vocab_size", json_int(cfg, "vocab_size", 0));
    if (rc == 0)
        rc = ckpt_buf_puts(out, "\n}\n");
    cJSON_Delete(cfg);
    return rc;
}
