/* Config.json and Megatron args of the LLaMA families from today's C (hf_llama.c), until the
 * families' generators (ckpt_family_config_json, ckpt_family_config_args) write them: the one
 * place a framework asks for them. */
#ifndef CKPT_FORMATS_HF_ADAPTER_H
#define CKPT_FORMATS_HF_ADAPTER_H

#include <ckpt/framework.h>

/* Megatron args for the Hugging Face directory hf_dir (its config.json, and its
 * generation_config.json kept), at TP tp with transformer implementation impl. */
int ckpt_hf__adapter_args(const char *hf_dir, ckpt_arena *a, int tp, const char *impl, ckpt_value **args);
/* The config.json for the model `from` (a Megatron one) with weights of dtype. */
int ckpt_hf__adapter_config_json(ckpt_fw *from, ckpt_dtype dtype, ckpt_buf *out);

#endif
