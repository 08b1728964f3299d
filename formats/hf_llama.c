/* Hugging Face LLaMA directories: config.json <-> Megatron args, and safetensors output
 * sharded as huggingface_hub shards it. */
#include <ckpt/hf.h>
#include <ckpt/megatron.h>
#include <ckpt/shard.h>
#include <ckpt/sys/common.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_SHARD_SIZE 5000000000ull

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

int ckpt_hf_llama_config_json(const ckpt_hf_llama_dims *d, ckpt_buf *b)
{
    if (!d->num_heads || !d->hidden_size || !d->vocab_size)
        return ckpt_error_set(CKPT_EINVALID, "a LLaMA config needs hidden_size, num_attention_heads and vocab_size");
    ckpt_buf_puts(b, "{\n  \"architectures\": [\n    \"LlamaForCausalLM\"\n  ],\n");
    ckpt_buf_printf(b, "  \"attention_bias\": %s,\n", d->attention_bias ? "true" : "false");
    ckpt_buf_puts(b, "  \"attention_dropout\": 0.0,\n");
    if (d->bos_token_id >= 0)
        ckpt_buf_printf(b, "  \"bos_token_id\": %lld,\n", (long long)d->bos_token_id);
    ckpt_buf_printf(b, "  \"dtype\": \"%s\",\n", ckpt_dtype_name(d->dtype));
    if (d->eos_token_id >= 0)
        ckpt_buf_printf(b, "  \"eos_token_id\": %lld,\n", (long long)d->eos_token_id);
    ckpt_buf_printf(b, "  \"head_dim\": %lld,\n", (long long)d->head_dim);
    ckpt_buf_puts(b, "  \"hidden_act\": \"silu\",\n");
    ckpt_buf_printf(b, "  \"hidden_size\": %lld,\n", (long long)d->hidden_size);
    ckpt_buf_puts(b, "  \"initializer_range\": ");
    ckpt_shard_json_float(b, d->initializer_range);
    ckpt_buf_printf(b, ",\n  \"intermediate_size\": %lld,\n", (long long)d->intermediate_size);
    ckpt_buf_printf(b, "  \"max_position_embeddings\": %lld,\n", (long long)d->max_positions);
    ckpt_buf_puts(b, "  \"mlp_bias\": false,\n  \"model_type\": \"llama\",\n");
    ckpt_buf_printf(b, "  \"num_attention_heads\": %lld,\n", (long long)d->num_heads);
    ckpt_buf_printf(b, "  \"num_hidden_layers\": %lld,\n", (long long)d->num_layers);
    ckpt_buf_printf(b, "  \"num_key_value_heads\": %lld,\n", (long long)d->num_kv_heads);
    ckpt_buf_puts(b, "  \"pretraining_tp\": 1,\n  \"rms_norm_eps\": ");
    ckpt_shard_json_float(b, d->rms_norm_eps);
    /* transformers 5 reads rope_parameters, 4 rope_theta and rope_scaling */
    ckpt_buf_puts(b, ",\n  \"rope_parameters\": {\n    \"rope_theta\": ");
    ckpt_shard_json_float(b, d->rope_theta);
    ckpt_buf_puts(b, ",\n    \"rope_type\": \"default\"\n  },\n  \"rope_scaling\": null,\n  \"rope_theta\": ");
    ckpt_shard_json_float(b, d->rope_theta);
    ckpt_buf_printf(b, ",\n  \"tie_word_embeddings\": %s,\n", d->tied ? "true" : "false");
    ckpt_buf_printf(b, "  \"torch_dtype\": \"%s\",\n", ckpt_dtype_name(d->dtype));
    ckpt_buf_printf(b, "  \"use_cache\": true,\n  \"vocab_size\": %lld\n}\n", (long long)d->vocab_size);
    return b->data ? 0 : ckpt_error_oom();
}

int ckpt_hf_llama_config(const ckpt_value *args, int64_t true_vocab, ckpt_dtype dtype, ckpt_buf *b)
{
    ckpt_hf_llama_dims d;
    int64_t heads = arg_int(args, "num_attention_heads", 0), hidden = arg_int(args, "hidden_size", 0);

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
    d.attention_bias = arg_int(args, "add_qkv_bias", 0) != 0;
    d.dtype = dtype;
    d.bos_token_id = d.eos_token_id = -1;
    return ckpt_hf_llama_config_json(&d, b);
}

/* ---- Megatron args from config.json ---------------------------------------------- */

int ckpt_hf_llama_megatron_args(ckpt_arena *a, const ckpt_hf_llama_dims *d, int tp, const char *transformer_impl,
                                ckpt_value **out)
{
    ckpt_value *args = NULL;
    int rc;

    *out = NULL;
    if (d->hidden_size < 1 || d->num_heads < 1 || d->num_kv_heads < 1 || d->vocab_size < 1 || d->num_layers < 1 ||
        d->intermediate_size < 1 || d->head_dim < 1)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "a LLaMA config needs positive hidden_size, num_attention_heads, num_key_value_heads, "
                               "head_dim, num_hidden_layers, intermediate_size and vocab_size");
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
        (rc = ckpt_megatron_args_set_bool(a, args, "add_qkv_bias", d->attention_bias)) < 0 ||
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
