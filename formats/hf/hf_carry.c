/* What a Hugging Face directory says that Megatron's own args have no place for -- the token
 * ids of config.json (the family's args_out, formats/families) and generation_config.json --
 * kept in args as hf_* attributes for the way back. megatron-core reads its args by name (load_args_from_checkpoint,
 * check_checkpoint_args), so attributes it does not know ride along, as hf_model_type does. */
#include "hf_private.h"

#include <ckpt/megatron.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <cjson/cJSON.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* a generation_config.json is a few hundred bytes; far past any, and the args stay small */
#define MAX_GENERATION_CONFIG (1u << 20)

#define ARG_GENERATION "hf_generation_config"

int ckpt_hf_llama_config_note(const ckpt_value *args, ckpt_buf *out)
{
    const ckpt_value *family = ckpt_megatron_arg(args, "hf_model_type"),
                     *skip = ckpt_megatron_arg(args, "window_attn_skip_freq");

    /* Gemma 3's layer kinds as a list: no every-Nth-layer pattern says them, and transformers
     * 4.50-4.52 have nothing else (no layer_types) */
    if (family && family->kind == CKPT_VAL_STR && strcmp(family->u.str.ptr, "gemma3_text") == 0 && skip &&
        skip->kind == CKPT_VAL_LIST)
        return ckpt_buf_puts(out, "its layer kinds (layer_types) follow no every-Nth-layer pattern, so it has no "
                                  "sliding_window_pattern: transformers 4.50-4.52, which read only that, would "
                                  "take every 6th layer for full attention; load it with transformers 4.53 or later");
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
