/* LLaMA configs between PaddleNLP and Hugging Face transformers: the same model described
 * by each side's config.json (PaddleNLP's LlamaConfig keeps transformers' names for the
 * sizes; they differ in the fused-layer flags and the dtype field). */
#include "paddle_private.h"

#include <ckpt/shard.h>
#include <ckpt/sys/common.h>

#include <stdio.h>
#include <string.h>

/* PaddleNLP's LlamaForCausalLM is LLaMA without RoPE scaling or a window as ckptconv carries
 * them, its Qwen2ForCausalLM Qwen2 (q/k/v biases; no window, which the HF side refuses): a
 * config of another family or with those would describe another model. */
int ckpt_paddle_hf_supported(const char *path, const ckpt_hf_llama_dims *d)
{
    if (d->family != CKPT_HF_LLAMA && d->family != CKPT_HF_QWEN2)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: model_type %s: PaddleNLP's conversions here are for llama, qwen2 and mixtral only", path,
                               ckpt_hf_family_name(d->family));
    if (d->rope_factor)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: rope_type llama3: PaddleNLP's LlamaConfig has no llama3 RoPE scaling", path);
    return 0;
}

int ckpt_paddle_hf_dims(const char *config_path, const char *config_json, ckpt_dtype dtype, ckpt_hf_llama_dims *d)
{
    int rc;

    /* PaddleNLP's LlamaConfig has transformers' defaults */
    ckpt_hf_llama_dims_init(d);
    if (!config_json)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: missing", config_path);
    if ((rc = ckpt_hf_llama_dims_parse(config_path, config_json, strlen(config_json), d)) < 0 ||
        (rc = ckpt_paddle_hf_supported(config_path, d)) < 0)
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
static int put_token(ckpt_buf *b, const char *key, int64_t id)
{
    char text[32];

    if (id < 0)
        return put_literal(b, key, "null");
    snprintf(text, sizeof text, "%lld", (long long)id);
    return put_literal(b, key, text);
}

int ckpt_paddle_config_from_hf(const char *hf_config_json, int fuse_qkv, int fuse_ffn, ckpt_dtype dtype,
                               ckpt_buf *out)
{
    const char *what = "the Hugging Face config.json";
    const pd_family *f;
    ckpt_hf_llama_dims d;
    char quoted[64], type[32];
    int rc;

    ckpt_hf_llama_dims_init(&d);
    if (!hf_config_json)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s is missing", what);
    if ((rc = ckpt_hf_llama_dims_parse(what, hf_config_json, strlen(hf_config_json), &d)) < 0 ||
        (rc = ckpt_paddle_hf_supported(what, &d)) < 0)
        return rc;
    f = ckpt_paddle__family(ckpt_hf_family_name(d.family));
    if (d.head_dim * d.num_heads != d.hidden_size)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: hidden_size %lld, %lld heads of head_dim %lld: PaddleNLP's %s has head_dim = "
                               "hidden_size / num_attention_heads",
                               what, (long long)d.hidden_size, (long long)d.num_heads, (long long)d.head_dim,
                               f->title);
    snprintf(quoted, sizeof quoted, "\"%s\"", ckpt_dtype_name(dtype));
    snprintf(type, sizeof type, "\"%s\"", f->model_type);
    /* json.dumps(indent=2, sort_keys=True), as PaddleNLP's save_pretrained writes it */
    rc = put_key(out, "architectures", 1);
    if (rc == 0)
        rc = ckpt_buf_printf(out, "[\n    \"%s\"\n  ]", f->cls);
    if (rc == 0)
        rc = put_token(out, "bos_token_id", d.bos_token_id);
    if (rc == 0)
        rc = put_literal(out, "dtype", quoted);
    if (rc == 0)
        rc = put_token(out, "eos_token_id", d.eos_token_id);
    if (rc == 0)
        rc = put_literal(out, "fuse_attention_ffn", fuse_ffn ? "true" : "false");
    if (rc == 0)
        rc = put_literal(out, "fuse_attention_qkv", fuse_qkv ? "true" : "false");
    if (rc == 0)
        rc = put_int(out, "hidden_size", d.hidden_size);
    if (rc == 0)
        rc = put_float(out, "initializer_range", d.initializer_range);
    if (rc == 0)
        rc = put_int(out, "intermediate_size", d.intermediate_size);
    if (rc == 0)
        rc = put_int(out, "max_position_embeddings", d.max_positions);
    if (rc == 0)
        rc = put_literal(out, "model_type", type);
    if (rc == 0)
        rc = put_int(out, "num_attention_heads", d.num_heads);
    if (rc == 0)
        rc = put_int(out, "num_hidden_layers", d.num_layers);
    if (rc == 0)
        rc = put_int(out, "num_key_value_heads", d.num_kv_heads);
    if (rc == 0)
        rc = put_token(out, "pad_token_id", d.pad_token_id);
    if (rc == 0)
        rc = put_float(out, "rms_norm_eps", d.rms_norm_eps);
    if (rc == 0)
        rc = put_float(out, "rope_theta", d.rope_theta);
    /* Qwen2Config's default is 32768, whatever max_position_embeddings says */
    if (rc == 0 && f->qkv_bias)
        rc = put_int(out, "seq_length", d.max_positions);
    if (rc == 0)
        rc = put_literal(out, "tie_word_embeddings", d.tied ? "true" : "false");
    if (rc == 0 && f->qkv_bias)
        rc = put_literal(out, "use_sliding_window", "false");
    if (rc == 0)
        rc = put_int(out, "vocab_size", d.vocab_size);
    if (rc == 0)
        rc = ckpt_buf_puts(out, "\n}\n");
    return rc;
}

/* ---- mixture-of-experts families, read through their family config ---- */

static int64_t config_int(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;
    return ckpt_family_config_get(c, field, &v) == 0 && v && v->kind == CKPT_VAL_INT ? v->u.integer : 0;
}

int ckpt_paddle__moe_hf_check(const char *where, const pd_family *f, const ckpt_family_config *c)
{
    const ckpt_value *v;
    int64_t hidden = config_int(c, "hidden_size"), heads = config_int(c, "num_heads");
    int64_t head_dim = config_int(c, "head_dim");

    if (ckpt_family_config_get(c, "sliding_window", &v) == 0 && v && v->kind != CKPT_VAL_NONE)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: sliding_window %lld: PaddleNLP's %s has no sliding window (it warns and "
                               "attends to every earlier token)",
                               where, (long long)(v->kind == CKPT_VAL_INT ? v->u.integer : 0), f->title);
    if (ckpt_family_config_get(c, "rope", &v) == 0 && v && v->kind == CKPT_VAL_STR && strcmp(v->u.str.ptr, "default"))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: rope_type %s: PaddleNLP's %s has no RoPE scaling", where, v->u.str.ptr, f->title);
    if (ckpt_family_config_get(c, "tied", &v) == 0 && v && v->kind == CKPT_VAL_BOOL && v->u.boolean)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: tie_word_embeddings true: PaddleNLP's %s keeps its head as its own [hidden, "
                               "vocab] parameter, which ckptconv does not tie",
                               where, f->title);
    if (head_dim && head_dim * heads != hidden)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: head_dim %lld: hidden_size %lld, %lld heads: PaddleNLP's %s has head_dim = "
                               "hidden_size / num_attention_heads",
                               where, (long long)head_dim, (long long)hidden, (long long)heads, f->title);
    return 0;
}

int ckpt_paddle__moe_config(const char *hf_json, ckpt_dtype dtype, ckpt_buf *out)
{
    /* transformers' own: its dtype spelling for version 4, its version */
    static const char *const drop[] = { "torch_dtype", "transformers_version" };
    ckpt_buf a = CKPT_BUF_INIT, b = CKPT_BUF_INIT;
    char quoted[64];
    size_t i;
    int rc;

    snprintf(quoted, sizeof quoted, "\"%s\"", ckpt_dtype_name(dtype));
    if ((rc = ckpt_paddle__set_config_key(hf_json, "dtype", quoted, &a)) < 0 || (rc = ckpt_buf_append(&a, "", 1)) < 0)
        goto done;
    for (i = 0; i < sizeof drop / sizeof *drop && rc == 0; i++) {
        ckpt_buf_clear(&b);
        if ((rc = ckpt_paddle__set_config_key((const char *)a.data, drop[i], NULL, &b)) == 0 &&
            (rc = ckpt_buf_append(&b, "", 1)) == 0) {
            ckpt_buf t = a;
            a = b;
            b = t;
        }
    }
    if (rc == 0)
        rc = ckpt_buf_puts(out, (const char *)a.data);
done:
    ckpt_buf_dispose(&a);
    ckpt_buf_dispose(&b);
    return rc;
}
