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
    int tied, attention_bias, mlp_bias;
    ckpt_dtype dtype;
    int64_t bos_token_id, eos_token_id; /* -1: not written */
    int64_t pad_token_id;               /* -1: none (ckpt_hf_llama_config_json leaves it out) */
} ckpt_hf_llama_dims;

/* LlamaConfig's defaults (transformers' and PaddleNLP's) for what a config.json may leave
 * out: 2048 positions, rms_norm_eps 1e-6, rope_theta 10000, initializer_range 0.02, untied,
 * no biases, no token ids; bf16. */
CKPT_EXTERN(void) ckpt_hf_llama_dims_init(ckpt_hf_llama_dims *d);

/* Read a LLaMA (or Mistral) config.json's text into *d, over the defaults already there;
 * `path` names it in every message, with the field. Refused (CKPT_ERRCLASS_MODEL): a
 * model_type other than llama or mistral, architectures naming no Llama or Mistral class,
 * hidden_act other than silu; hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads or vocab_size missing; any size or count (those, num_key_value_heads,
 * head_dim, max_position_embeddings) that is not an integer from 1 to 2^31 - 1;
 * num_attention_heads not a multiple of num_key_value_heads; hidden_size not a multiple of
 * num_attention_heads when there is no head_dim; rms_norm_eps outside (0, 1], rope_theta
 * (top level or in rope_parameters) not positive, initializer_range negative; flags
 * (tie_word_embeddings, attention_bias, mlp_bias) that are not booleans; bos/eos/pad token
 * ids that are not integers below vocab_size (-1, null or a list: not kept). head_dim defaults
 * to hidden_size / num_attention_heads, num_key_value_heads to num_attention_heads;
 * dtype (transformers 5) or torch_dtype (4) sets d->dtype when it names a float type. */
CKPT_EXTERN(int) ckpt_hf_llama_dims_parse(const char *path, const char *json, size_t len, ckpt_hf_llama_dims *d);

/* ckpt_hf_llama_dims_init, then ckpt_hf_llama_dims_parse of the file at `path`. */
CKPT_EXTERN(int) ckpt_hf_llama_dims_read(const char *path, ckpt_hf_llama_dims *d);

/* The sizes of `d` as map parameters (hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, vocab_size), set before
 * ckpt_map_params_load_json so that the checked values, defaults included, are the ones the
 * rules use. */
CKPT_EXTERN(int) ckpt_hf_llama_map_params(const ckpt_hf_llama_dims *d, ckpt_map_params *p);

/* The tensors of a LlamaForCausalLM (in[i].name, in[i].node) against the config that
 * describes them (`config` and `weights` name the two in messages): every tensor the config
 * implies is there with the shape it implies -- model.embed_tokens [vocab, hidden]; per layer
 * q/k/v/o_proj (heads x head_dim, kv heads x head_dim), their biases when attention_bias,
 * gate/up/down_proj [intermediate], their biases when mlp_bias, both norms; model.norm;
 * lm_head unless tie_word_embeddings (a tied one may still be there) -- all of one
 * floating-point dtype, and there is nothing else but RoPE's inv_freq buffers. The first
 * tensor that is missing (CKPT_ENOTFOUND), extra, misshapen or of another dtype is named,
 * with the config field it disagrees with. Nothing is allocated by the config's sizes. */
CKPT_EXTERN(int) ckpt_hf_llama_check_tensors(const ckpt_hf_llama_dims *d, const char *config, const char *weights,
                                             const ckpt_map_input *in, size_t n);

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

/* Megatron args (built in `a`) for a LLaMA config read by ckpt_hf_llama_dims_read: RMSNorm,
 * SwiGLU, RoPE, no linear biases (attention_bias gives add_qkv_bias), untied unless
 * tie_word_embeddings, params_dtype d->dtype, padded_vocab_size for `tp`. */
CKPT_EXTERN(int) ckpt_hf_llama_megatron_args(ckpt_arena *a, const ckpt_hf_llama_dims *d, int tp,
                                             const char *transformer_impl, ckpt_value **out);

/* The order transformers' LlamaForCausalLM.state_dict() lists tensors in (embeddings; per layer
 * q, k, v, o, gate, up, down, input and post-attention norms; final norm; lm_head), which is
 * the order save_pretrained shards them in: perm[i] is the index of the i-th tensor. Names
 * outside that scheme keep their relative order, after the layers. */
CKPT_EXTERN(int) ckpt_hf_llama_order(const char *const *names, size_t n, size_t *perm);

CKPT_END_DECL

#endif
