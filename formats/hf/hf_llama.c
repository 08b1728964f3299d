/* Hugging Face LLaMA-family directories: config.json <-> Megatron args, and safetensors output
 * sharded as huggingface_hub shards it. */
#include "hf_private.h"

#include <ckpt/megatron.h>
#include <ckpt/shard.h>
#include <ckpt/sys/common.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_SHARD_SIZE 5000000000ull
/* far past any model's, and a config.json that lists them stays small */
#define MAX_LAYERS 100000

int ckpt_hf_plan_safetensors(ckpt_plan *plan, const char *const *names, const ckpt_node *const *nodes, size_t n,
                             uint64_t max_shard_size)
{
    ckpt_shard_entry *entries = calloc(n ? n : 1, sizeof *entries);
    ckpt_shard_plan *shards = NULL;
    ckpt_buf index = CKPT_BUF_INIT;
    uint64_t parameters = 0;
    size_t i, j;
    int rc = entries ? 0 : ckpt_error_oom();

    for (i = 0; i < n && rc == 0; i++) {
        for (j = 0; j < i; j++)
            if (nodes[j] == nodes[i])
                rc = ckpt_error_set(CKPT_EUNSUPPORTED, "%s and %s are one tensor; safetensors cannot share storage",
                                    names[j], names[i]);
        entries[i].name = names[i];
        entries[i].nbytes = (uint64_t)ckpt_node_numel(nodes[i]) * ckpt_dtype_size(ckpt_node_dtype(nodes[i]));
        entries[i].same_as = CKPT_SHARD_OWN_STORAGE;
        parameters += (uint64_t)ckpt_node_numel(nodes[i]);
    }
    if (rc == 0)
        rc = ckpt_shard_plan_new(&shards, entries, n, max_shard_size ? max_shard_size : DEFAULT_SHARD_SIZE, "model",
                                 ".safetensors");
    for (i = 0; rc == 0 && i < shards->n_files; i++) {
        const ckpt_shard_file *f = &shards->files[i];
        size_t file;
        rc = ckpt_plan_add_file(plan, f->name, "safetensors", &file);
        for (j = 0; rc == 0 && j < f->n_entries; j++)
            rc = ckpt_plan_add_tensor(plan, file, names[f->entries[j]], nodes[f->entries[j]], 0, NULL);
    }
    if (rc == 0 && shards->index_name && (rc = ckpt_shard_index_json(shards, parameters, &index)) == 0)
        rc = ckpt_plan_add_bytes(plan, shards->index_name, index.data, index.len);
    ckpt_buf_dispose(&index);
    ckpt_shard_plan_free(shards);
    free(entries);
    return rc;
}

/* ---- config.json ---------------------------------------------------------------- */

static int64_t arg_int(const ckpt_value *args, const char *name, int64_t fallback)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);
    if (v && v->kind == CKPT_VAL_INT)
        return v->u.integer;
    if (v && v->kind == CKPT_VAL_BOOL)
        return v->u.boolean;
    return fallback;
}

static double arg_float(const ckpt_value *args, const char *name, double fallback)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);
    if (v && v->kind == CKPT_VAL_FLOAT)
        return v->u.real;
    if (v && v->kind == CKPT_VAL_INT)
        return (double)v->u.integer;
    return fallback;
}

int ckpt_hf_weights_path(const char *dir, char **out)
{
    static const char *const names[] = { "model.safetensors.index.json", "model.safetensors", "pytorch_model.bin" };
    struct stat st;
    size_t i;

    *out = NULL;
    /* a directory that cannot be reached says why (a symbolic link loop, no permission) */
    if (stat(dir, &st) != 0)
        return ckpt_error_setc(errno == ENOENT || errno == ENOTDIR ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_OS,
                               "%s: %s", dir, strerror(errno));
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(dir) + strlen(names[i]) + 2;
        char *p = malloc(n);
        int rc = 0;
        if (!p)
            return ckpt_error_oom();
        snprintf(p, n, "%s/%s", dir, names[i]);
        if (stat(p, &st) == 0) {
            *out = p;
            return 0;
        }
        if (errno != ENOENT)
            rc = ckpt_error_setc(CKPT_EIO, CKPT_ERRCLASS_OS, "%s: %s", p, strerror(errno));
        free(p);
        if (rc < 0)
            return rc;
    }
    return ckpt_error_set(CKPT_ENOTFOUND, "%s: no model.safetensors(.index.json) or pytorch_model.bin", dir);
}

/* The RoPE description: rope_parameters (with rope_theta) for transformers 5, rope_scaling
 * (null without scaling) for 4. */
static void put_rope(ckpt_buf *b, const ckpt_hf_llama_dims *d, int with_theta)
{
    const char *indent = "\n    ";

    if (!d->rope_factor && !with_theta) {
        ckpt_buf_puts(b, "null");
        return;
    }
    ckpt_buf_puts(b, "{");
    if (d->rope_factor) {
        ckpt_buf_printf(b, "%s\"factor\": ", indent);
        ckpt_shard_json_float(b, d->rope_factor);
        ckpt_buf_printf(b, ",%s\"high_freq_factor\": ", indent);
        ckpt_shard_json_float(b, d->rope_high_freq_factor);
        ckpt_buf_printf(b, ",%s\"low_freq_factor\": ", indent);
        ckpt_shard_json_float(b, d->rope_low_freq_factor);
        ckpt_buf_printf(b, ",%s\"original_max_position_embeddings\": %lld,", indent,
                        (long long)d->rope_original_max_positions);
    }
    if (with_theta) {
        ckpt_buf_printf(b, "%s\"rope_theta\": ", indent);
        ckpt_shard_json_float(b, d->rope_theta);
        ckpt_buf_puts(b, ",");
    }
    ckpt_buf_printf(b, "%s\"rope_type\": \"%s\"\n  }", indent, d->rope_factor ? "llama3" : "default");
}

int ckpt_hf_llama_config_json(const ckpt_hf_llama_dims *d, ckpt_buf *b)
{
    int llama = d->family == CKPT_HF_LLAMA, qwen2 = d->family == CKPT_HF_QWEN2;
    int64_t i;

    if (!d->num_heads || !d->hidden_size || !d->vocab_size || !ckpt_hf_family_name(d->family))
        return ckpt_error_set(CKPT_EINVALID, "a LLaMA config needs a family, hidden_size, num_attention_heads and "
                                             "vocab_size");
    /* layer_types has a line per layer: a count from args is bounded before it is written */
    if (d->num_layers < 0 || d->num_layers > MAX_LAYERS)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "num_hidden_layers %lld is not from 0 to %d",
                               (long long)d->num_layers, MAX_LAYERS);
    ckpt_buf_printf(b, "{\n  \"architectures\": [\n    \"%s\"\n  ],\n", ckpt_hf__class_name(d->family));
    if (llama)
        ckpt_buf_printf(b, "  \"attention_bias\": %s,\n", d->attention_bias ? "true" : "false");
    ckpt_buf_puts(b, "  \"attention_dropout\": 0.0,\n");
    if (d->bos_token_id >= 0)
        ckpt_buf_printf(b, "  \"bos_token_id\": %lld,\n", (long long)d->bos_token_id);
    ckpt_buf_printf(b, "  \"dtype\": \"%s\",\n", ckpt_dtype_name(d->dtype));
    if (d->n_eos_token_list) {
        ckpt_buf_puts(b, "  \"eos_token_id\": [");
        for (i = 0; i < d->n_eos_token_list; i++)
            ckpt_buf_printf(b, "%s\n    %lld", i ? "," : "", (long long)d->eos_token_list[i]);
        ckpt_buf_puts(b, "\n  ],\n");
    } else if (d->eos_token_id >= 0) {
        ckpt_buf_printf(b, "  \"eos_token_id\": %lld,\n", (long long)d->eos_token_id);
    }
    /* Qwen2Config has no head_dim: Qwen2 of transformers 4 takes hidden_size / heads */
    if (!qwen2 || d->head_dim * d->num_heads != d->hidden_size)
        ckpt_buf_printf(b, "  \"head_dim\": %lld,\n", (long long)d->head_dim);
    ckpt_buf_puts(b, "  \"hidden_act\": \"silu\",\n");
    ckpt_buf_printf(b, "  \"hidden_size\": %lld,\n", (long long)d->hidden_size);
    ckpt_buf_puts(b, "  \"initializer_range\": ");
    ckpt_shard_json_float(b, d->initializer_range);
    ckpt_buf_printf(b, ",\n  \"intermediate_size\": %lld,\n", (long long)d->intermediate_size);
    /* transformers >= 4.53 writes Qwen2's attention per layer */
    if (qwen2) {
        ckpt_buf_puts(b, "  \"layer_types\": [");
        for (i = 0; i < d->num_layers; i++)
            ckpt_buf_printf(b, "%s\n    \"full_attention\"", i ? "," : "");
        ckpt_buf_puts(b, "\n  ],\n");
    }
    ckpt_buf_printf(b, "  \"max_position_embeddings\": %lld,\n", (long long)d->max_positions);
    if (qwen2)
        ckpt_buf_printf(b, "  \"max_window_layers\": %lld,\n", (long long)d->num_layers);
    if (llama)
        ckpt_buf_printf(b, "  \"mlp_bias\": %s,\n", d->mlp_bias ? "true" : "false");
    ckpt_buf_printf(b, "  \"model_type\": \"%s\",\n", ckpt_hf_family_name(d->family));
    ckpt_buf_printf(b, "  \"num_attention_heads\": %lld,\n", (long long)d->num_heads);
    ckpt_buf_printf(b, "  \"num_hidden_layers\": %lld,\n", (long long)d->num_layers);
    ckpt_buf_printf(b, "  \"num_key_value_heads\": %lld,\n", (long long)d->num_kv_heads);
    if (d->pad_token_id >= 0)
        ckpt_buf_printf(b, "  \"pad_token_id\": %lld,\n", (long long)d->pad_token_id);
    if (llama)
        ckpt_buf_puts(b, "  \"pretraining_tp\": 1,\n");
    ckpt_buf_puts(b, "  \"rms_norm_eps\": ");
    ckpt_shard_json_float(b, d->rms_norm_eps);
    ckpt_buf_puts(b, ",\n  \"rope_parameters\": ");
    put_rope(b, d, 1);
    ckpt_buf_puts(b, ",\n  \"rope_scaling\": ");
    put_rope(b, d, 0);
    ckpt_buf_puts(b, ",\n  \"rope_theta\": ");
    ckpt_shard_json_float(b, d->rope_theta);
    if (d->sliding_window)
        ckpt_buf_printf(b, ",\n  \"sliding_window\": %lld", (long long)d->sliding_window);
    else if (!llama)
        ckpt_buf_puts(b, ",\n  \"sliding_window\": null");
    ckpt_buf_printf(b, ",\n  \"tie_word_embeddings\": %s,\n", d->tied ? "true" : "false");
    ckpt_buf_printf(b, "  \"torch_dtype\": \"%s\",\n  \"use_cache\": true,\n", ckpt_dtype_name(d->dtype));
    if (qwen2)
        ckpt_buf_puts(b, "  \"use_sliding_window\": false,\n");
    ckpt_buf_printf(b, "  \"vocab_size\": %lld\n}\n", (long long)d->vocab_size);
    return b->data ? 0 : ckpt_error_oom();
}

static int arg_set(const ckpt_value *args, const char *name)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);

    return v && v->kind != CKPT_VAL_NONE && !(v->kind == CKPT_VAL_BOOL && !v->u.boolean) &&
           !(v->kind == CKPT_VAL_INT && v->u.integer == 0);
}

static int arg_is_str(const ckpt_value *args, const char *name, const char **out)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);

    *out = v && v->kind == CKPT_VAL_STR ? v->u.str.ptr : NULL;
    return *out != NULL;
}

int ckpt_hf_llama_args_check(const ckpt_value *args)
{
    static const char *const unsupported[] = { "rotary_interleaved", "rotary_seq_len_interpolation_factor",
                                               "qk_layernorm", "num_experts", "multi_latent_attention",
                                               "window_attn_skip_freq", "no_rope_freq" };
    const ckpt_value *v = ckpt_megatron_arg(args, "swiglu");
    const char *s;
    size_t i;

    if (!v || v->kind != CKPT_VAL_BOOL || !v->u.boolean)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "not a LLaMA-style model: args.swiglu is not True");
    if (arg_is_str(args, "normalization", &s) && strcmp(s, "RMSNorm") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "not a LLaMA-style model: args.normalization is %s, not RMSNorm", s);
    if (arg_is_str(args, "position_embedding_type", &s) && strcmp(s, "rope") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "not a LLaMA-style model: args.position_embedding_type is %s, not rope", s);
    if ((v = ckpt_megatron_arg(args, "add_bias_linear")) && v->kind == CKPT_VAL_BOOL && v->u.boolean)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "not a LLaMA-style model: args.add_bias_linear is True (LLaMA has no linear biases)");
    for (i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (arg_set(args, unsupported[i]))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "args.%s is set, which no Hugging Face llama, mistral or qwen2 config says",
                                   unsupported[i]);
    if (arg_float(args, "rotary_percent", 1.0) != 1.0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "args.rotary_percent is not 1 (RoPE on part of each head), which no Hugging Face "
                               "llama, mistral or qwen2 config says");
    return 0;
}

/* window_size (W - 1, 0) is HF's sliding_window W (Megatron-Bridge's mapping); 0: none. */
static int window_of(const ckpt_value *args, int64_t *out)
{
    const ckpt_value *v = ckpt_megatron_arg(args, "window_size");

    *out = 0;
    if (!v || v->kind == CKPT_VAL_NONE)
        return 0;
    if ((v->kind != CKPT_VAL_TUPLE && v->kind != CKPT_VAL_LIST) || v->u.seq.n != 2 ||
        v->u.seq.items[0]->kind != CKPT_VAL_INT || v->u.seq.items[1]->kind != CKPT_VAL_INT ||
        v->u.seq.items[0]->u.integer < 0 || v->u.seq.items[0]->u.integer >= 2147483647 ||
        v->u.seq.items[1]->u.integer != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "args.window_size is not a causal window (W - 1, 0), which Hugging Face's "
                               "sliding_window W says");
    *out = v->u.seq.items[0]->u.integer + 1;
    return 0;
}

/* The family args were written for (hf_model_type), else the one their computation is. */
static int family_of(const ckpt_value *args, const ckpt_hf_llama_dims *d, ckpt_hf_family *out)
{
    const ckpt_value *v = ckpt_megatron_arg(args, "hf_model_type");
    int rc;

    *out = d->qkv_bias ? CKPT_HF_QWEN2 : d->sliding_window ? CKPT_HF_MISTRAL : CKPT_HF_LLAMA;
    if (d->qkv_bias && d->sliding_window)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "args have add_qkv_bias and a window_size: no Hugging Face llama, mistral or qwen2 "
                               "config has both");
    if (!v || v->kind == CKPT_VAL_NONE)
        return 0;
    if (v->kind != CKPT_VAL_STR)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "args.hf_model_type is not a string");
    if ((rc = ckpt_hf_family_parse("args.hf_model_type", v->u.str.ptr, out)) < 0)
        return rc;
    if ((*out == CKPT_HF_QWEN2) != (d->qkv_bias != 0) || (*out == CKPT_HF_LLAMA && d->sliding_window))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "args.hf_model_type is %s but args %s", v->u.str.ptr,
                               d->qkv_bias ? "have add_qkv_bias (Qwen2's q/k/v biases)"
                               : *out == CKPT_HF_QWEN2 ? "have no add_qkv_bias (Qwen2 has q/k/v biases)"
                                                       : "have a window_size");
    return 0;
}

int ckpt_hf_llama_config(const ckpt_value *args, int64_t true_vocab, ckpt_dtype dtype, ckpt_buf *b)
{
    ckpt_hf_llama_dims d;
    int64_t heads = arg_int(args, "num_attention_heads", 0), hidden = arg_int(args, "hidden_size", 0);
    int rc;

    if (!heads || !hidden || !true_vocab)
        return ckpt_error_set(CKPT_EINVALID, "args lack hidden_size, num_attention_heads or the true vocabulary size");
    memset(&d, 0, sizeof d);
    d.hidden_size = hidden;
    d.intermediate_size = arg_int(args, "ffn_hidden_size", 0);
    d.num_layers = arg_int(args, "num_layers", 0);
    d.num_heads = heads;
    d.num_kv_heads = arg_int(args, "group_query_attention", 0) ? arg_int(args, "num_query_groups", heads) : heads;
    d.head_dim = arg_int(args, "kv_channels", hidden / heads);
    d.vocab_size = true_vocab;
    d.max_positions = arg_int(args, "max_position_embeddings", arg_int(args, "seq_length", 0));
    d.rms_norm_eps = arg_float(args, "layernorm_epsilon", arg_float(args, "norm_epsilon", 1e-5));
    d.rope_theta = arg_float(args, "rotary_base", 10000.0);
    d.initializer_range = arg_float(args, "init_method_std", 0.02);
    d.tied = !arg_int(args, "untie_embeddings_and_output_weights", 0);
    d.qkv_bias = arg_int(args, "add_qkv_bias", 0) != 0;
    d.dtype = dtype;
    /* Megatron-LM's llama3 scaling: only the factor is an argument */
    if (arg_int(args, "use_rope_scaling", 0)) {
        d.rope_factor = arg_float(args, "rope_scaling_factor", 8.0);
        d.rope_low_freq_factor = 1.0;
        d.rope_high_freq_factor = 4.0;
        d.rope_original_max_positions = 8192;
    }
    if ((rc = ckpt_hf_llama_args_check(args)) < 0 || (rc = window_of(args, &d.sliding_window)) < 0 ||
        (rc = family_of(args, &d, &d.family)) < 0 || (rc = ckpt_hf__tokens_from_args(args, &d)) < 0)
        return rc;
    return ckpt_hf_llama_config_json(&d, b);
}

int ckpt_hf_llama_tied_copy(const ckpt_value *args, const char *name)
{
    return !arg_int(args, "untie_embeddings_and_output_weights", 0) && strcmp(name, "lm_head.weight") == 0;
}

/* ---- Megatron args from config.json ---------------------------------------------- */

/* What Megatron's args cannot say: an o_proj or MLP bias without the other linears' ones
 * (add_bias_linear is all of them), llama3 scaling other than Megatron-LM's fixed shape. */
static int check_megatron_fits(const ckpt_hf_llama_dims *d, const char *config)
{
    if (!ckpt_hf_family_name(d->family))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: the family is not one of llama, mistral, qwen2",
                               config);
    if (d->attention_bias || d->mlp_bias)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: %s true: Megatron's args have q/k/v biases (add_qkv_bias) or biases on every "
                               "linear layer (add_bias_linear), not %s",
                               config, d->attention_bias ? "attention_bias" : "mlp_bias",
                               d->attention_bias ? "q/k/v and o_proj biases alone" : "MLP biases alone");
    if (d->rope_factor && (d->rope_low_freq_factor != 1.0 || d->rope_high_freq_factor != 4.0 ||
                           d->rope_original_max_positions != 8192))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: llama3 RoPE scaling with low_freq_factor %g, high_freq_factor %g, "
                               "original_max_position_embeddings %lld: Megatron-LM applies it with 1, 4 and 8192 only",
                               config, d->rope_low_freq_factor, d->rope_high_freq_factor,
                               (long long)d->rope_original_max_positions);
    return 0;
}

int ckpt_hf_llama_megatron_args(ckpt_arena *a, const ckpt_hf_llama_dims *d, const char *config, int tp,
                                const char *transformer_impl, ckpt_value **out)
{
    ckpt_value *args = NULL;
    int rc;

    *out = NULL;
    if (d->hidden_size < 1 || d->num_heads < 1 || d->num_kv_heads < 1 || d->vocab_size < 1 || d->num_layers < 1 ||
        d->intermediate_size < 1 || d->head_dim < 1)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "a LLaMA config needs positive hidden_size, num_attention_heads, num_key_value_heads, "
                               "head_dim, num_hidden_layers, intermediate_size and vocab_size");
    if ((rc = check_megatron_fits(d, config)) < 0)
        return rc;
    if ((rc = ckpt_megatron_args_new(a, &args)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "num_layers", d->num_layers)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "hidden_size", d->hidden_size)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "ffn_hidden_size", d->intermediate_size)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "num_attention_heads", d->num_heads)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "num_query_groups", d->num_kv_heads)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "group_query_attention", d->num_kv_heads != d->num_heads)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "kv_channels", d->head_dim)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "max_position_embeddings", d->max_positions)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "seq_length", d->max_positions)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "vocab_size", d->vocab_size)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "padded_vocab_size",
                                         ckpt_megatron_padded_vocab(d->vocab_size, 128, tp))) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, args, "tokenizer_type", "HuggingFaceTokenizer")) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, args, "position_embedding_type", "rope")) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "add_position_embedding", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "use_rotary_position_embeddings", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, args, "rotary_base", d->rope_theta)) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, args, "rotary_percent", 1.0)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, args, "normalization", "RMSNorm")) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, args, "norm_epsilon", d->rms_norm_eps)) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, args, "layernorm_epsilon", d->rms_norm_eps)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "swiglu", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "add_bias_linear", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "add_qkv_bias", d->qkv_bias)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "use_rope_scaling", d->rope_factor != 0)) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, args, "rope_scaling_factor", d->rope_factor ? d->rope_factor : 8.0)) < 0 ||
        (rc = (d->sliding_window ? ckpt_megatron_args_set_int_pair(a, args, "window_size", d->sliding_window - 1, 0)
                                 : ckpt_megatron_args_set_none(a, args, "window_size"))) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, args, "hf_model_type", ckpt_hf_family_name(d->family))) < 0 ||
        (rc = ckpt_hf__tokens_to_args(a, args, d)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "untie_embeddings_and_output_weights", !d->tied)) < 0 ||
        (rc = ckpt_megatron_args_set_dtype(a, args, "params_dtype", d->dtype)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "bf16", d->dtype == CKPT_DTYPE_BF16)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, args, "fp16", d->dtype == CKPT_DTYPE_F16)) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, args, "init_method_std", d->initializer_range)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, args, "transformer_impl", transformer_impl)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "iteration", 1)) < 0)
        args = NULL;
    *out = args;
    return rc;
}

/* ---- tensor order ----------------------------------------------------------------- */

static const char *const layer_order[] = {
    "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight", "self_attn.k_proj.bias",
    "self_attn.v_proj.weight", "self_attn.v_proj.bias", "self_attn.o_proj.weight", "self_attn.o_proj.bias",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
    "post_attention_layernorm.weight",
};

typedef struct order_key {
    int group;     /* 0 embeddings, 1 layers, 2 final norm, 3 lm_head, 4 anything else */
    long layer;
    size_t within; /* place in layer_order */
    size_t index;  /* input position, for a stable order */
} order_key;

static order_key key_of(const char *name, size_t index)
{
    order_key k = { 4, 0, 0, index };
    size_t i;
    char *end;

    if (strcmp(name, "model.embed_tokens.weight") == 0) {
        k.group = 0;
    } else if (strcmp(name, "model.norm.weight") == 0) {
        k.group = 2;
    } else if (strcmp(name, "lm_head.weight") == 0) {
        k.group = 3;
    } else if (strncmp(name, "model.layers.", 13) == 0 && name[13] >= '0' && name[13] <= '9') {
        k.layer = strtol(name + 13, &end, 10);
        if (*end == '.') {
            for (i = 0; i < sizeof layer_order / sizeof layer_order[0]; i++)
                if (strcmp(end + 1, layer_order[i]) == 0)
                    break;
            k.group = 1;
            k.within = i;
        }
    }
    return k;
}

static int by_key(const void *a, const void *b)
{
    const order_key *x = a, *y = b;
    if (x->group != y->group)
        return x->group - y->group;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->within != y->within)
        return x->within < y->within ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

int ckpt_hf_llama_order(const char *const *names, size_t n, size_t *perm)
{
    order_key *keys = calloc(n ? n : 1, sizeof *keys);
    size_t i;

    if (!keys)
        return ckpt_error_oom();
    for (i = 0; i < n; i++)
        keys[i] = key_of(names[i], i);
    qsort(keys, n, sizeof *keys, by_key);
    for (i = 0; i < n; i++)
        perm[i] = keys[i].index;
    free(keys);
    return 0;
}
