/* Hugging Face model directories (config.json + safetensors, sharded with an index) on both
 * sides of a conversion to and from Megatron-LM: the LLaMA config a transformers user loads,
 * the Megatron args that match it, and safetensors files sharded as huggingface_hub does. */
#ifndef CKPT_HF_H
#define CKPT_HF_H

#include "plan.h"
#include "rules.h"

CKPT_BEGIN_DECL

/* Add tensors (names[i] <- nodes[i], in this order) to `plan` as safetensors files sharded
 * like huggingface_hub: model.safetensors when all fit under max_shard_size (0: 5 GB, as
 * transformers' save_pretrained), else model-00001-of-0000N.safetensors and
 * model.safetensors.index.json. Tensors sharing a node are refused (safetensors has no
 * shared storage). */
CKPT_EXTERN(int) ckpt_hf_plan_safetensors(ckpt_plan *plan, const char *const *names, const ckpt_node *const *nodes,
                                          size_t n, uint64_t max_shard_size);

/* The weights of a Hugging Face directory, in the order transformers prefers them: the
 * safetensors index, the single safetensors file, or pytorch_model.bin (malloc'd).
 * CKPT_ENOTFOUND naming the directory when it has none. */
CKPT_EXTERN(int) ckpt_hf_weights_path(const char *dir, char **out);

/* What a LlamaForCausalLM config.json says. */
typedef struct ckpt_hf_llama_dims {
    int64_t hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim, vocab_size;
    int64_t max_positions;
    double rms_norm_eps, rope_theta, initializer_range;
    int tied, attention_bias;
    ckpt_dtype dtype;
    int64_t bos_token_id, eos_token_id; /* -1: not written */
} ckpt_hf_llama_dims;

/* The config.json transformers 4 and 5 read (rope_theta and rope_parameters, torch_dtype and
 * dtype), keys sorted as save_pretrained writes them. */
CKPT_EXTERN(int) ckpt_hf_llama_config_json(const ckpt_hf_llama_dims *d, ckpt_buf *out);

/* A LlamaForCausalLM config.json for Megatron args (a Namespace): sizes, head counts
 * (head_dim from kv_channels, num_key_value_heads from num_query_groups when args say
 * group_query_attention), vocab_size = true_vocab, rms_norm_eps (layernorm_epsilon, or
 * norm_epsilon before megatron-core 0.16), tie_word_embeddings, and the fields both
 * transformers 4 and 5 read: rope_theta and rope_parameters, torch_dtype and dtype. */
CKPT_EXTERN(int) ckpt_hf_llama_config(const ckpt_value *megatron_args, int64_t true_vocab, ckpt_dtype dtype,
                                      ckpt_buf *out);

/* Megatron args (built in `a`) for a LLaMA config.json whose integers are in `params`
 * (ckpt_map_params_load_json) and whose floats and flags are read from config_path
 * (transformers 4 or 5: rope_theta or rope_parameters.rope_theta, torch_dtype or dtype):
 * RMSNorm, SwiGLU, RoPE, no linear biases (attention_bias gives add_qkv_bias), untied unless
 * tie_word_embeddings, padded_vocab_size for `tp`. *dtype is config's torch_dtype (bf16
 * when absent). */
CKPT_EXTERN(int) ckpt_hf_llama_megatron_args(ckpt_arena *a, const char *config_path, const ckpt_map_params *params,
                                             int tp, const char *transformer_impl, ckpt_value **out,
                                             ckpt_dtype *dtype);

/* The order transformers' LlamaForCausalLM.state_dict() lists tensors in (embeddings; per layer
 * q, k, v, o, gate, up, down, input and post-attention norms; final norm; lm_head), which is
 * the order save_pretrained shards them in: perm[i] is the index of the i-th tensor. Names
 * outside that scheme keep their relative order, after the layers. */
CKPT_EXTERN(int) ckpt_hf_llama_order(const char *const *names, size_t n, size_t *perm);

CKPT_END_DECL

#endif
