/* What a Hugging Face directory says that Megatron's own args have no place for -- the token
 * ids of config.json and generation_config.json -- kept in args as hf_* attributes for the
 * way back. megatron-core reads its args by name (load_args_from_checkpoint,
 * check_checkpoint_args), so attributes it does not know ride along, as hf_model_type does. */
#include "hf_private.h"

#include <ckpt/megatron.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* a generation_config.json is a few hundred bytes; far past any, and the args stay small */
#define MAX_GENERATION_CONFIG (1u << 20)

#define ARG_BOS "hf_bos_token_id"
#define ARG_EOS "hf_eos_token_id"
#define ARG_PAD "hf_pad_token_id"
#define ARG_GENERATION "hf_generation_config"

int ckpt_hf__tokens_to_args(ckpt_arena *a, ckpt_value *args, const ckpt_hf_llama_dims *d)
{
    int rc = 0;

    if (d->bos_token_id >= 0)
        rc = ckpt_megatron_args_set_int(a, args, ARG_BOS, d->bos_token_id);
    if (rc == 0 && d->n_eos_token_list)
        rc = ckpt_megatron_args_set_int_list(a, args, ARG_EOS, d->eos_token_list, (size_t)d->n_eos_token_list);
    else if (rc == 0 && d->eos_token_id >= 0)
        rc = ckpt_megatron_args_set_int(a, args, ARG_EOS, d->eos_token_id);
    if (rc == 0 && d->pad_token_id >= 0)
        rc = ckpt_megatron_args_set_int(a, args, ARG_PAD, d->pad_token_id);
    return rc;
}

static int token_of(const ckpt_value *v, const char *name, int64_t vocab, int64_t *out)
{
    if (v->kind != CKPT_VAL_INT || v->u.integer < 0 || v->u.integer >= vocab)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "args.%s is not a token id below the vocabulary "
                               "size %lld", name, (long long)vocab);
    *out = v->u.integer;
    return 0;
}

int ckpt_hf__tokens_from_args(const ckpt_value *args, ckpt_hf_llama_dims *d)
{
    const ckpt_value *bos = ckpt_megatron_arg(args, ARG_BOS), *eos = ckpt_megatron_arg(args, ARG_EOS),
                     *pad = ckpt_megatron_arg(args, ARG_PAD);
    size_t i;
    int rc;

    d->bos_token_id = d->eos_token_id = d->pad_token_id = -1;
    d->n_eos_token_list = 0;
    if ((bos && bos->kind != CKPT_VAL_NONE && (rc = token_of(bos, ARG_BOS, d->vocab_size, &d->bos_token_id)) < 0) ||
        (pad && pad->kind != CKPT_VAL_NONE && (rc = token_of(pad, ARG_PAD, d->vocab_size, &d->pad_token_id)) < 0))
        return rc;
    if (!eos || eos->kind == CKPT_VAL_NONE)
        return 0;
    if (eos->kind != CKPT_VAL_LIST && eos->kind != CKPT_VAL_TUPLE)
        return token_of(eos, ARG_EOS, d->vocab_size, &d->eos_token_id);
    if (eos->u.seq.n > CKPT_HF_MAX_EOS_TOKENS)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "args.%s lists more than %d tokens", ARG_EOS,
                               CKPT_HF_MAX_EOS_TOKENS);
    for (i = 0; i < eos->u.seq.n; i++)
        if ((rc = token_of(eos->u.seq.items[i], ARG_EOS, d->vocab_size, &d->eos_token_list[i])) < 0)
            return rc;
    d->n_eos_token_list = (int)eos->u.seq.n;
    return 0;
}

int ckpt_hf_llama_config_note(const ckpt_value *args, ckpt_buf *out)
{
    const ckpt_value *family = ckpt_megatron_arg(args, "hf_model_type");

    if (family && family->kind == CKPT_VAL_STR)
        return 0;
    return ckpt_buf_puts(out, "no token ids in the args (a model Megatron trained, not one hf2mcore wrote): none "
                              "written, so transformers takes its config class's defaults (LlamaConfig, "
                              "MistralConfig: bos 1, eos 2; Qwen2Config: none); set bos_token_id and eos_token_id "
                              "from the tokenizer");
}

/* generation_config.json's text as it is (a JSON object, no NUL), so that it comes back
 * byte for byte. */
static int generation_text_ok(const char *text, size_t len)
{
    cJSON *j;
    int ok;

    if (len > MAX_GENERATION_CONFIG || memchr(text, 0, len) || !(j = cJSON_ParseWithLength(text, len)))
        return 0;
    ok = cJSON_IsObject(j);
    cJSON_Delete(j);
    return ok;
}

int ckpt_hf_generation_config_to_args(ckpt_arena *a, ckpt_value *args, const char *dir)
{
    ckpt_buf path = CKPT_BUF_INIT, text = CKPT_BUF_INIT;
    ckpt_file *f = NULL;
    struct stat st;
    int rc;

    if ((rc = ckpt_buf_printf(&path, "%s/generation_config.json", dir)) < 0)
        return rc;
    if (stat((const char *)path.data, &st) != 0) {
        rc = errno == ENOENT ? 0
                             : ckpt_error_setc(CKPT_EIO, CKPT_ERRCLASS_OS, "%s: %s", (const char *)path.data,
                                               strerror(errno));
        goto done;
    }
    if ((rc = ckpt_file_open(&f, (const char *)path.data)) < 0)
        goto done;
    if (!f->data || !generation_text_ok((const char *)f->data, (size_t)f->size)) {
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not a JSON object of at most %u bytes",
                             (const char *)path.data, MAX_GENERATION_CONFIG);
        goto done;
    }
    if ((rc = ckpt_buf_append(&text, f->data, (size_t)f->size)) == 0) /* NUL-terminated */
        rc = ckpt_megatron_args_set_str(a, args, ARG_GENERATION, (const char *)text.data);
done:
    ckpt_file_close(f);
    ckpt_buf_dispose(&text);
    ckpt_buf_dispose(&path);
    return rc;
}

int ckpt_hf_generation_config_of(const ckpt_value *args, ckpt_buf *out)
{
    const ckpt_value *v = ckpt_megatron_arg(args, ARG_GENERATION);

    if (!v || v->kind == CKPT_VAL_NONE)
        return 0;
    if (v->kind != CKPT_VAL_STR || !generation_text_ok(v->u.str.ptr, v->u.str.len))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "args.%s is not the text of a JSON object of at most %u bytes", ARG_GENERATION,
                               MAX_GENERATION_CONFIG);
    return ckpt_buf_append(out, v->u.str.ptr, v->u.str.len);
}
