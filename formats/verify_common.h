/* What the model sources for `ckptconv verify` share (formats/verify_*.c): resources kept
 * alive by the model, a LLaMA config.json read into the config, checkpoint tensors as map
 * inputs, and one rank's tensors mapped into the canonical scheme. */
#ifndef CKPT_FORMATS_VERIFY_COMMON_H
#define CKPT_FORMATS_VERIFY_COMMON_H

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
/* Fill the builder's config from a PaddleNLP config.json (LlamaConfig, Qwen2Config: LLaMA-family
 * keys): sizes, heads, vocabulary, RMSNorm epsilon, RoPE base, SwiGLU, tied embeddings;
 * *verify_map: the map its family's weights are read with (verify.maps.paddle). A family
 * without one is refused, and CKPT_EUNSUPPORTED names the key for what verify does not run
 * (another activation, RoPE scaling). */
int ckpt_vsrc__paddle_config(ckpt_model_builder *b, const char *config_path, const char **verify_map);
/* What a Hugging Face config.json says beyond the config: the verify map its family's weights
 * are read with, and for a family verify knows from its data (not llama, mistral, qwen2) that
 * family and its config (kept alive by the model). */
typedef struct vsrc_hf_config {
    const char *verify_map;
    const ckpt_family *family;
    const ckpt_family_config *family_config;
} vsrc_hf_config;
/* ckpt_vsrc__llama_config for LLaMA, Mistral and Qwen2 (as ever); any other built-in family's
 * config through its data (ckpt_vsrc__family_config). */
int ckpt_vsrc__hf_config(ckpt_model_builder *b, const char *config_path, vsrc_hf_config *out);
/* The built-in family model_type names when verify knows it from its data alone (none of
 * llama, mistral, qwen2), else NULL. */
const ckpt_family *ckpt_vsrc__data_family(const char *model_type);
/* Read src (config.json text or Megatron args, as ckpt_family_config_read) as family f's config,
 * kept alive by the model, and lay ckpt_family_model_config's values over the builder's
 * config (verify_family.c). */
int ckpt_vsrc__family_config(ckpt_model_builder *b, const ckpt_family *f, const char *framework, const char *where,
                             const void *src, const ckpt_family_config **out);
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

/* A Hugging Face LLaMA model from one weights path (a file, or anything ckpt_open opens with
 * `open`) and its config.json (NULL: none found), mapped for rank 0 (verify_hf.c; the
 * DeepSpeed source uses it for its module weights and its consolidated masters). */
int ckpt_vsrc__hf_weights(ckpt_model_builder *b, const char *weights, const char *config,
                          const ckpt_open_options *open);

#endif
