/* Model families as data: what a family (llama, mistral, qwen2, qwen3, gemma3, gpt2) is, read
 * from formats/families/<name>.json (built in) or a file of the same schema. A family knows
 * its config fields in each framework (Hugging Face config.json, Megatron-LM args, PaddleNLP
 * config.json), its tensors and their order, the maps between each framework's names and
 * Hugging Face names (the pivot), and the forward-pass features verify applies. */
#ifndef CKPT_FAMILY_H
#define CKPT_FAMILY_H

#include "buf.h"
#include "rules.h"
#include "value.h"
#include "verify.h"

CKPT_BEGIN_DECL

typedef struct ckpt_family ckpt_family;               /* built-ins: static, borrowed; loaded: owned */
typedef struct ckpt_family_config ckpt_family_config; /* a model's canonical config fields, owned */

/* Frameworks a family speaks of, as `framework` arguments below. */
#define CKPT_FAMILY_HF "huggingface"
#define CKPT_FAMILY_MEGATRON "megatron"
#define CKPT_FAMILY_PADDLE "paddle"

/* The built-in family `name` ("llama"); CKPT_ENOTFOUND (CKPT_ERRCLASS_MODEL) naming it and the
 * known ones otherwise. Built-ins live as long as the process. */
CKPT_EXTERN(int) ckpt_family_builtin(const ckpt_family **out, const char *name);
/* A family from a JSON file (its "extends" names a built-in). */
CKPT_EXTERN(int) ckpt_family_load(ckpt_family **out, const char *path);
CKPT_EXTERN(void) ckpt_family_free(ckpt_family *f);

CKPT_EXTERN(const char *) ckpt_family_name(const ckpt_family *f);  /* "llama" */
CKPT_EXTERN(const char *) ckpt_family_title(const ckpt_family *f); /* "LLaMA", for messages */
/* A string of the family's JSON at a dotted path ("paddle.head_var", "hf.class"), borrowed
 * from f; NULL where there is none. */
CKPT_EXTERN(const char *) ckpt_family_string(const ckpt_family *f, const char *path);
/* "llama, mistral, qwen2, ..." in the built-in index order, for refusals. */
CKPT_EXTERN(const char *) ckpt_family_known(void);
CKPT_EXTERN(size_t) ckpt_family_builtin_count(void);
CKPT_EXTERN(const ckpt_family *) ckpt_family_builtin_at(size_t i);

/* Which family a model is. src is the config.json text (NUL-terminated) for CKPT_FAMILY_HF and
 * CKPT_FAMILY_PADDLE, a `const ckpt_value *` (the args Namespace) for CKPT_FAMILY_MEGATRON.
 * `where` names the source in messages (a path). None matching: CKPT_EUNSUPPORTED
 * (CKPT_ERRCLASS_MODEL) naming the model_type (or the first failing condition) and
 * ckpt_family_known(). */
CKPT_EXTERN(int) ckpt_family_detect(const ckpt_family **out, const char *framework, const char *where, const void *src);

/* Whether Megatron args compute what the family's models compute (its megatron.require):
 * CKPT_EUNSUPPORTED (CKPT_ERRCLASS_MODEL) naming the first arg that says otherwise. */
CKPT_EXTERN(int) ckpt_family_args_check(const ckpt_family *f, const ckpt_value *args);

/* Read and check a model's config in the family's canonical fields (src as above); refusals
 * name `where`, the field and the reason. */
CKPT_EXTERN(int) ckpt_family_config_read(ckpt_family_config **out, const ckpt_family *f, const char *framework,
                                         const char *where, const void *src);
CKPT_EXTERN(void) ckpt_family_config_free(ckpt_family_config *c);
/* The family c was read for, borrowed. */
CKPT_EXTERN(const ckpt_family *) ckpt_family_config_family(const ckpt_family_config *c);
/* A canonical field ("hidden_size"); CKPT_ENOTFOUND when the family has no such field. The
 * value is borrowed from c. */
CKPT_EXTERN(int) ckpt_family_config_get(const ckpt_family_config *c, const char *field, const ckpt_value **out);
/* Whether a field holds the family's default because its source did not give it: the key the
 * source lacks ("rms_norm_eps" of config.json, "layernorm_epsilon" of the args), so that a
 * caller can say which default it took; NULL when the source gave the field, or when the
 * source never holds it (Mistral's attention_bias, fixed by the family). */
CKPT_EXTERN(const char *) ckpt_family_config_defaulted(const ckpt_family_config *c, const char *field);
/* An empty config of family f, for a caller that fills it field by field (where names it in
 * messages). */
CKPT_EXTERN(int) ckpt_family_config_new(ckpt_family_config **out, const ckpt_family *f, const char *where);
/* Set a field to a copy of v. */
CKPT_EXTERN(int) ckpt_family_config_set(ckpt_family_config *c, const char *field, const ckpt_value *v);
/* Set an integer field, as a caller that knows better than the source (Megatron args keep no
 * true vocabulary size when a model was trained with a padded one). */
CKPT_EXTERN(int) ckpt_family_config_set_int(ckpt_family_config *c, const char *field, int64_t v);
/* Give every field the caller did not set its family default (config.json's), in the rows'
 * order, so a default that is an expression sees the fields before it. */
CKPT_EXTERN(int) ckpt_family_config_complete(ckpt_family_config *c);
/* The config.json a framework's users load, keys sorted, as transformers writes them; dtype
 * names the weights' dtype. CKPT_FAMILY_HF only (the family's hf_config_out); another
 * framework is CKPT_EUNSUPPORTED. */
CKPT_EXTERN(int) ckpt_family_config_json(const ckpt_family *f, const ckpt_family_config *c, const char *framework,
                                         ckpt_dtype dtype, ckpt_buf *out);
/* Megatron-LM args (an argparse Namespace value, in Megatron's order) for this model at TP `tp`
 * with transformer implementation `impl` ("transformer_engine" | "local"). */
CKPT_EXTERN(int) ckpt_family_config_args(const ckpt_family *f, const ckpt_family_config *c, ckpt_arena *a, int tp,
                                         const char *impl, ckpt_value **args);
/* The model parameters the family's maps use (hidden_size, num_heads, group_size, ...). */
CKPT_EXTERN(int) ckpt_family_map_params(const ckpt_family *f, const ckpt_family_config *c, ckpt_map_params *p);
/* The map between a framework's names and Hugging Face names, with the implementation variant
 * ("local", "transformer_engine" for Megatron; "native" for Paddle; NULL: the family's
 * first), to_hf selecting the direction (the family's to_hf / from_hf built-in map). Owned by
 * the caller; CKPT_EUNSUPPORTED (CKPT_ERRCLASS_MODEL) when the family has none. */
CKPT_EXTERN(int) ckpt_family_map(const ckpt_family *f, const char *framework, const char *impl, int to_hf,
                                 ckpt_map **out);
/* Every tensor the config implies is there with its shape and one floating-point dtype, and
 * nothing else is (buffers aside): missing (CKPT_ENOTFOUND), unexpected, repeated and
 * misshapen tensors (CKPT_EFORMAT) are refused naming the tensor, the weights file and the
 * config field that implies it. Hugging Face names (CKPT_FAMILY_HF) only. */
CKPT_EXTERN(int) ckpt_family_check_tensors(const ckpt_family *f, const ckpt_family_config *c, const char *framework,
                                           const char *config_where, const char *weights_where,
                                           const ckpt_map_input *in, size_t n);
/* The same, a tensor that is no weight of the model refused with the caller's way of leaving
 * it out appended (ckpt_family_check_tensors: a conversion's --drop; NULL: none). */
CKPT_EXTERN(int) ckpt_family_check_tensors_as(const ckpt_family *f, const ckpt_family_config *c,
                                              const char *framework, const char *config_where,
                                              const char *weights_where, const ckpt_map_input *in, size_t n,
                                              const char *leave_out);
/* The order a framework's writer stores the tensors in: perm[i] is the index into names of the
 * i-th tensor to write (CKPT_FAMILY_HF: transformers' state_dict order; names outside it keep
 * their order, last). */
CKPT_EXTERN(int) ckpt_family_order(const ckpt_family *f, const char *framework, const char *const *names, size_t n,
                                   size_t *perm);
/* Why a tensor no map consumes may be left out (a buffer the framework recomputes, as
 * "rotary_emb.inv_freq"), or NULL when it must not be. */
CKPT_EXTERN(const char *) ckpt_family_left_out(const ckpt_family *f, const char *framework, const char *name);
/* A multi-token prediction layer's copy of a main model tensor (hf_tensors.mtp_shared,
 * DeepSeek-V3's embed_tokens and shared_head.head of layer num_hidden_layers + M): the name of
 * the tensor it copies, or NULL when name is none. */
CKPT_EXTERN(const char *) ckpt_family_mtp_copy_of(const ckpt_family *f, const ckpt_family_config *c,
                                                  const char *framework, const char *name);
/* The i-th copy of MTP layer m the config says (m < mtp_layers): its name into *name (appended)
 * and the tensor it copies in *of; 1, or 0 past the last copy (or for a family with none). */
CKPT_EXTERN(int) ckpt_family_mtp_copy(const ckpt_family *f, const ckpt_family_config *c, const char *framework,
                                      int64_t m, size_t i, ckpt_buf *name, const char **of);
/* The forward-pass description verify runs. */
CKPT_EXTERN(int) ckpt_family_model_config(const ckpt_family *f, const ckpt_family_config *c, ckpt_model_config *out);

CKPT_END_DECL

#endif
