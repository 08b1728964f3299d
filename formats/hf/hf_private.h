/* Reading a Hugging Face config.json, shared by the sizes (hf_check.c) and the family's own
 * fields (hf_family.c). */
#ifndef CKPT_HF_PRIVATE_H
#define CKPT_HF_PRIVATE_H

#include <ckpt/hf.h>

#include <cjson/cJSON.h>

/* Sizes and counts past this are nonsense for any model (and keep products of two in int64). */
#define CKPT_HF_MAX_SIZE 2147483647ll

/* The last of a repeated key, as Python's json reads it; null is absent. */
const cJSON *ckpt_hf__field(const cJSON *cfg, const char *name);

/* An integer in [lo, CKPT_HF_MAX_SIZE]; *out keeps its value when the field is absent and
 * not required. */
int ckpt_hf__get_int(const cJSON *cfg, const char *path, const char *name, int required, int64_t lo, int64_t *out);

/* A finite number in [lo, hi] (lo excluded when open_lo); *out kept when absent. */
int ckpt_hf__get_real(const cJSON *cfg, const char *path, const char *name, double lo, int open_lo, double hi,
                      double *out);

/* true or false; *out kept when absent. */
int ckpt_hf__get_bool(const cJSON *cfg, const char *path, const char *name, int *out);

/* transformers' class of a family's causal LM ("Qwen2ForCausalLM"); NULL for no family. */
const char *ckpt_hf__class_name(ckpt_hf_family f);

/* The family (model_type, architectures), its own fields (biases, sliding window), RoPE
 * scaling, and the refusal of other families' fields that change the computation. */
int ckpt_hf__family_fields(const cJSON *cfg, const char *path, ckpt_hf_llama_dims *d);

/* The token ids of d as args.hf_bos_token_id, hf_eos_token_id (an int or a list) and
 * hf_pad_token_id, each only where d has it; and back, over d (d->vocab_size bounds them),
 * refusing what is not a token id (CKPT_ERRCLASS_MODEL, naming the arg). */
int ckpt_hf__tokens_to_args(ckpt_arena *a, ckpt_value *args, const ckpt_hf_llama_dims *d);
int ckpt_hf__tokens_from_args(const ckpt_value *args, ckpt_hf_llama_dims *d);

#endif
