/* Hugging Face LLaMA-family directories: config.json <-> Megatron args through the family
 * (formats/families), and safetensors output sharded as huggingface_hub shards it. */
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

/* ---- config.json and Megatron args, through the family ---------------------------- */

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
    ckpt_family_config *c;
    int rc;

    if (!d->num_heads || !d->hidden_size || !d->vocab_size || !ckpt_hf_family_name(d->family))
        return ckpt_error_set(CKPT_EINVALID, "a LLaMA config needs a family, hidden_size, num_attention_heads and "
                                             "vocab_size");
    if ((rc = ckpt_hf__config_of(d, "config.json", &c)) < 0)
        return rc;
    rc = ckpt_family_config_json(ckpt_family_config_family(c), c, CKPT_FAMILY_HF, d->dtype, b);
    ckpt_family_config_free(c);
    return rc;
}

static int64_t arg_int(const ckpt_value *args, const char *name)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);
    return v && v->kind == CKPT_VAL_INT ? v->u.integer : v && v->kind == CKPT_VAL_BOOL ? v->u.boolean : 0;
}

int ckpt_hf_llama_args_check(const ckpt_value *args)
{
    return ckpt_family_args_check(ckpt_hf__family(CKPT_HF_LLAMA), args);
}

/* args with vocab_size the true vocabulary, which token ids are bounded by */
static int with_true_vocab(ckpt_arena *a, const ckpt_value *args, int64_t true_vocab, ckpt_value **out)
{
    int rc;

    if ((rc = ckpt_value_clone(a, args, NULL, NULL, out)) < 0)
        return rc;
    return ckpt_megatron_args_set_int(a, *out, "vocab_size", true_vocab);
}

int ckpt_hf_llama_config(const ckpt_value *args, int64_t true_vocab, ckpt_dtype dtype, ckpt_buf *b)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    ckpt_value *copy;
    ckpt_arena *a;
    int rc;

    if (!arg_int(args, "num_attention_heads") || !arg_int(args, "hidden_size") || !true_vocab)
        return ckpt_error_set(CKPT_EINVALID, "args lack hidden_size, num_attention_heads or the true vocabulary size");
    if ((rc = ckpt_hf_llama_args_check(args)) < 0 || (rc = ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args)) < 0)
        return rc;
    if ((rc = ckpt_arena_new(&a)) < 0)
        return rc;
    if ((rc = with_true_vocab(a, args, true_vocab, &copy)) == 0 &&
        (rc = ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, "args", copy)) == 0)
        rc = ckpt_family_config_json(f, c, CKPT_FAMILY_HF, dtype, b);
    ckpt_family_config_free(c);
    ckpt_arena_free(a);
    return rc;
}

int ckpt_hf_llama_tied_copy(const ckpt_value *args, const char *name)
{
    return !arg_int(args, "untie_embeddings_and_output_weights") && strcmp(name, "lm_head.weight") == 0;
}

int ckpt_hf_llama_megatron_args(ckpt_arena *a, const ckpt_hf_llama_dims *d, const char *config, int tp,
                                const char *transformer_impl, ckpt_value **out)
{
    ckpt_family_config *c;
    int rc;

    *out = NULL;
    if (d->hidden_size < 1 || d->num_heads < 1 || d->num_kv_heads < 1 || d->vocab_size < 1 || d->num_layers < 1 ||
        d->intermediate_size < 1 || d->head_dim < 1)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "a LLaMA config needs positive hidden_size, num_attention_heads, num_key_value_heads, "
                               "head_dim, num_hidden_layers, intermediate_size and vocab_size");
    if ((rc = ckpt_hf__config_of(d, config, &c)) < 0)
        return rc;
    rc = ckpt_family_config_args(ckpt_family_config_family(c), c, a, tp, transformer_impl, out);
    ckpt_family_config_free(c);
    return rc;
}

int ckpt_hf_llama_order(const char *const *names, size_t n, size_t *perm)
{
    return ckpt_family_order(ckpt_hf__family(CKPT_HF_LLAMA), CKPT_FAMILY_HF, names, n, perm);
}
