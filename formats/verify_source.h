/* What the model sources of `ckptconv verify` (formats/<framework>/verify_*.c) share:
 * resources kept alive by the model, config.json found near the weights, a model's config
 * through its family's data (verify_family.c), checkpoint tensors as map inputs, and one
 * rank's tensors mapped into the canonical scheme. */
#ifndef CKPT_FORMATS_VERIFY_SOURCE_H
#define CKPT_FORMATS_VERIFY_SOURCE_H

#include <ckpt/family.h>
#include <ckpt/sys/model.h>

/* Keep an opened checkpoint, set, map or parameter table alive as long as the model. */
int ckpt_vsrc__keep_ckpt(ckpt_model_builder *b, ckpt_ckpt *c);
int ckpt_vsrc__keep_set(ckpt_model_builder *b, ckpt_set *s);
int ckpt_vsrc__keep_map(ckpt_model_builder *b, ckpt_map *m);
int ckpt_vsrc__keep_params(ckpt_model_builder *b, ckpt_map_params *p);

/* A built-in map, kept alive by the model. */
int ckpt_vsrc__map(ckpt_model_builder *b, const char *name, const ckpt_map **out);

/* config.json in `dir` or up to `up` directories above it, into path (cap bytes); 0 when
 * found, CKPT_ENOTFOUND otherwise. */
int ckpt_vsrc__find_config(const char *dir, int up, char *path, size_t cap);

/* A model's config as its family's data says it (verify_family.c). */
typedef struct vsrc_config {
    const ckpt_family *family;
    const ckpt_family_config *config; /* kept alive by the model */
    const char *verify_map;           /* the family's verify map for the source's framework */
} vsrc_config;

/* A framework's own reading of its config.json text before the family reads it: may replace
 * *text (freeing the old one) with what the family is to read. */
typedef int (*vsrc_config_prepare)(const char *path, char **text, void *payload);

/* config.json at path, a Hugging Face model's (framework CKPT_FAMILY_HF) or PaddleNLP's
 * (CKPT_FAMILY_PADDLE): its family detected (an unknown model_type, or architectures naming
 * another family's class, refused), its fields read and checked through the family's rows,
 * laid over the builder's config, and each default the family gave noted. A family verify
 * has no map for in that framework is refused naming those it reads. prepare (or NULL) sees
 * the text first. */
int ckpt_vsrc__config_json(ckpt_model_builder *b, const char *path, const char *framework,
                           vsrc_config_prepare prepare, void *payload, vsrc_config *out);
/* Megatron args whose hf_model_type (model_type) names a built-in family, read through its
 * rows (args that contradict it refused) and laid over what the Megatron source read from
 * the args as any GPT's: sizes only where the source has none, the math wherever the family
 * says it; any other model_type (NULL: none) adds nothing. `where` names the args. */
int ckpt_vsrc__family_args(ckpt_model_builder *b, const char *where, const ckpt_value *args, const char *model_type);

/* The integers the verify maps need (head_dim, group_size, head counts) from the config. */
int ckpt_vsrc__map_params(ckpt_model_builder *b, ckpt_map_params **out);

/* Map inputs for the tensors of c: names with `strip` (a container prefix such as "module/")
 * removed when they start with it; names that hold no weights a forward pass uses (rotary
 * inv_freq buffers, Transformer Engine _extra_state) left out. Appends to *in (grown). */
int ckpt_vsrc__inputs(ckpt_model_builder *b, const ckpt_ckpt *c, const char *strip, ckpt_map_input **in,
                      size_t *n, size_t *cap);

/* Model-level tensors of each rank, joined once every rank is mapped. */
typedef struct vsrc_parts {
    const ckpt_node *embed, *pos, *final_w, *final_b, *output;
} vsrc_parts;

/* Apply `map` to a rank's inputs: layer tensors go to the rank, model-level ones to *parts. */
int ckpt_vsrc__map_rank(ckpt_model_builder *b, int rank, const ckpt_map *map, const ckpt_map_params *params,
                        const ckpt_map_input *in, size_t n, vsrc_parts *parts);
/* Add the model-level tensors for rank 0: a table every rank holds a part of (its rows times
 * the ranks reach the vocabulary) joined, a replicated one taken from rank 0. */
int ckpt_vsrc__add_parts(ckpt_model_builder *b, const vsrc_parts *parts, int ranks);

/* A Hugging Face model from one weights path (a file, or anything ckpt_open opens with
 * `open`) and its config.json (NULL: none found), mapped for rank 0 (verify_hf.c; the
 * DeepSpeed source uses it for its module weights and its consolidated masters). */
int ckpt_vsrc__hf_weights(ckpt_model_builder *b, const char *weights, const char *config,
                          const ckpt_open_options *open);

#endif
