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

/* FP8 checkpoints with block scales (DeepSeek-V3/R1, Qwen3 "-FP8": config.json's
 * quantization_config quant_method "fp8", fmt "e4m3", weight_block_size [R, C]; each F8_E4M3
 * `X.weight` beside its float32 `X.weight_scale_inv`). ckpt_hf_fp8_dir: 1 when dir is a model
 * directory whose config.json says so, else 0; negative (naming config.json) for an FP8
 * quantization_config that cannot be read. ckpt_hf_fp8_convert: dir's weights written to
 * path as ckpt_graph_write writes them: with CKPT_FP8_DEQUANTIZE the FP8 ones dequantised to
 * bfloat16 as they are read (float32 product, rounded to nearest even), their scales
 * consumed; with CKPT_FP8_KEEP weights and scales written as stored. Either way a weight
 * without its scale, a scale of another shape or a scale without an F8_E4M3 weight is
 * refused, naming the file and the tensor (diff reads such a directory through
 * ckpt_hf_fp8_nodes). */
typedef enum ckpt_fp8_mode { CKPT_FP8_DEQUANTIZE = 0, CKPT_FP8_KEEP } ckpt_fp8_mode;
CKPT_EXTERN(int) ckpt_hf_fp8_dir(const char *dir);
/* The tensors of ck, the opened weights of such a dir, as nodes of g: names[0..*n) and
 * nodes[0..*n), which hold ckpt_tensor_count(ck) entries; the scales consumed or kept as
 * mode says. */
CKPT_EXTERN(int) ckpt_hf_fp8_nodes(const char *dir, const ckpt_ckpt *ck, ckpt_graph *g, ckpt_fp8_mode mode,
                                   const char **names, const ckpt_node **nodes, size_t *n);
CKPT_EXTERN(int) ckpt_hf_fp8_convert(const char *dir, const char *path, ckpt_fp8_mode mode,
                                     const ckpt_convert_options *opts, ckpt_convert_report *report);

/* The model families whose weights are LLaMA's, give or take q/k/v biases and a sliding
 * window, and whose config Megatron-LM's args can carry: transformers' model_type llama
 * (LlamaForCausalLM), mistral (MistralForCausalLM), qwen2 (Qwen2ForCausalLM). Each is a file
 * of formats/families (include/ckpt/family.h reads them); the values number the built-in
 * families in the order of formats/families/index.json, and everything below is a wrapper
 * over that data, kept for the callers of this API. */
typedef enum ckpt_hf_family {
    CKPT_HF_LLAMA = 0,
    CKPT_HF_MISTRAL,
    CKPT_HF_QWEN2
} ckpt_hf_family;

/* "llama", "mistral", "qwen2"; NULL for a value that is no family. */
CKPT_EXTERN(const char *) ckpt_hf_family_name(ckpt_hf_family f);
/* The family as people write it, for messages: "LLaMA", "Mistral", "Qwen2"; NULL as above. */
CKPT_EXTERN(const char *) ckpt_hf_family_title(ckpt_hf_family f);

/* The family model_type `name` names; CKPT_EUNSUPPORTED (CKPT_ERRCLASS_MODEL), naming `what`
 * and listing the known ones, for any other. */
CKPT_EXTERN(int) ckpt_hf_family_parse(const char *what, const char *name, ckpt_hf_family *out);

/* The most end-of-sequence tokens an eos_token_id list may name. */
#define CKPT_HF_MAX_EOS_TOKENS 64

/* What a config.json of one of those families says. */
typedef struct ckpt_hf_llama_dims {
    int64_t hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim, vocab_size;
    int64_t max_positions;
    double rms_norm_eps, rope_theta, initializer_range;
    int tied, attention_bias, mlp_bias;
    ckpt_dtype dtype;
    int64_t bos_token_id, eos_token_id; /* -1: not written */
    int64_t pad_token_id;               /* -1: none (ckpt_hf_llama_config_json leaves it out) */
    ckpt_hf_family family;
    int qkv_bias;                       /* q/k/v biases without an o_proj one (Qwen2) */
    /* RoPE scaling: rope_factor 0 is none; else rope_type llama3 with these */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_max_positions;
    int64_t sliding_window;             /* 0: none (every layer attends to every earlier token) */
    /* eos_token_id as a list (Llama 3's several end tokens); eos_token_id is then -1 */
    int64_t eos_token_list[CKPT_HF_MAX_EOS_TOKENS];
    int n_eos_token_list;
} ckpt_hf_llama_dims;

/* LlamaConfig's defaults (transformers' and PaddleNLP's) for what a config.json may leave
 * out: 2048 positions, rms_norm_eps 1e-6, rope_theta 10000, initializer_range 0.02, untied,
 * no biases, no token ids; bf16. */
CKPT_EXTERN(void) ckpt_hf_llama_dims_init(ckpt_hf_llama_dims *d);

/* Read the config.json text of a LLaMA, Mistral or Qwen2 model into *d, over the defaults
 * already there; `path` names it in every message, with the field. The family comes from
 * model_type (or, without one, architectures; neither: llama). Refused (CKPT_ERRCLASS_MODEL):
 * a model_type of another family (listing the known ones), architectures naming no class of
 * the family, hidden_act other than silu; hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads or vocab_size missing; any size or count (those, num_key_value_heads,
 * head_dim, max_position_embeddings, sliding_window) that is not an integer from 1 to
 * 2^31 - 1; num_attention_heads not a multiple of num_key_value_heads; hidden_size not a
 * multiple of num_attention_heads when there is no head_dim; rms_norm_eps outside (0, 1],
 * rope_theta (top level or in rope_parameters) not positive, initializer_range negative;
 * flags that are not booleans; bos/eos/pad token ids that are not integers below vocab_size
 * (-1 or null: none), an eos_token_id list longer than CKPT_HF_MAX_EOS_TOKENS or holding
 * anything but such ids. RoPE scaling (rope_parameters, transformers 5, or
 * rope_scaling, 4; "type" as old configs spell rope_type) is default or llama3 with factor,
 * low_freq_factor, high_freq_factor and original_max_position_embeddings; any other
 * rope_type is refused, listing the known ones. Per family: llama reads attention_bias and
 * mlp_bias; qwen2 has q/k/v biases (qkv_bias) and refuses use_sliding_window true or a
 * layer_types entry other than full_attention; mistral reads head_dim and sliding_window
 * (4096 when absent, as MistralConfig; null: none). Fields of other families that change
 * the computation (partial_rotary_factor other than 1, logit soft-capping, experts,
 * quantization_config, q/k norms) are refused. head_dim defaults to hidden_size /
 * num_attention_heads, num_key_value_heads to num_attention_heads; dtype (transformers 5) or
 * torch_dtype (4) sets d->dtype when it names a float type. */
CKPT_EXTERN(int) ckpt_hf_llama_dims_parse(const char *path, const char *json, size_t len, ckpt_hf_llama_dims *d);

/* What the config.json at `path` describes, in a line for people ("Hugging Face
 * Qwen2ForCausalLM (model_type qwen2): 2 layers, ..."), or why it is no model ckptconv
 * converts (the error is cleared into the line); only running out of memory fails. */
CKPT_EXTERN(int) ckpt_hf_config_describe(const char *path, ckpt_buf *out);

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

/* Why every conversion from Hugging Face leaves the tensor `name` out (for the plan's list of
 * what was left out): RoPE's inv_freq buffers, which old transformers saved and every reader
 * recomputes (llama.json's hf.left_out). NULL for a tensor that is converted. */
CKPT_EXTERN(const char *) ckpt_hf_left_out_rule(const char *name);

/* The config.json of d's family that transformers 4 and 5 read (architectures and
 * model_type of the family, its own fields only; rope_theta, rope_scaling and
 * rope_parameters; torch_dtype and dtype), keys sorted as save_pretrained writes them. */
CKPT_EXTERN(int) ckpt_hf_llama_config_json(const ckpt_hf_llama_dims *d, ckpt_buf *out);

/* The config.json (as ckpt_hf_llama_config_json) for Megatron args (a Namespace): sizes,
 * head counts (head_dim from kv_channels, num_key_value_heads from num_query_groups when
 * args say group_query_attention), vocab_size = true_vocab, rms_norm_eps (layernorm_epsilon,
 * or norm_epsilon before megatron-core 0.16), max_position_embeddings, tie_word_embeddings,
 * rope_theta (rotary_base), llama3 RoPE scaling (use_rope_scaling, rope_scaling_factor, and
 * the low/high frequency factors 1 and 4 and original context 8192 that Megatron-LM applies
 * with it), sliding_window (window_size (W - 1, 0)), the token ids hf2mcore kept
 * (hf_bos_token_id, hf_eos_token_id, an int or a list, hf_pad_token_id; none where args lack
 * them, see ckpt_hf_llama_config_note). The family is args.hf_model_type where
 * hf2mcore recorded it; for args without it (a model Megatron trained) it is decided from
 * what the args compute: add_qkv_bias is qwen2, a window_size mistral, anything else llama.
 * Refused (CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL), naming the arg: args that
 * ckpt_hf_llama_args_check refuses, and a recorded family that is not known or that the args
 * contradict (q/k/v biases, a window). */
CKPT_EXTERN(int) ckpt_hf_llama_config(const ckpt_value *megatron_args, int64_t true_vocab, ckpt_dtype dtype,
                                      ckpt_buf *out);

/* Whether Megatron args describe a model a Hugging Face llama, mistral or qwen2 computes
 * alike: SwiGLU, RMSNorm, RoPE, no add_bias_linear; none of what no such config says
 * (rotary_percent other than 1, rotary_interleaved, rotary_seq_len_interpolation_factor,
 * qk_layernorm, experts, multi-latent attention, window_attn_skip_freq, no_rope_freq).
 * CKPT_EUNSUPPORTED (CKPT_ERRCLASS_MODEL) naming the first arg that is not. */
CKPT_EXTERN(int) ckpt_hf_llama_args_check(const ckpt_value *megatron_args);

/* What ckpt_hf_llama_config takes from defaults for these args, as a line for the report
 * (appended to out; nothing when args came from hf2mcore): for args without hf_model_type
 * (a model Megatron trained) the token ids, which config.json then leaves to transformers'
 * config class (LlamaConfig and MistralConfig: bos 1, eos 2; Qwen2Config: none). For a
 * Gemma 3 whose layer kinds no every-Nth-layer pattern says (window_attn_skip_freq a list),
 * that transformers 4.50-4.52, which read no layer_types, would misread them. */
CKPT_EXTERN(int) ckpt_hf_llama_config_note(const ckpt_value *megatron_args, ckpt_buf *out);

/* `dir`/generation_config.json, when there is one, kept byte for byte as
 * args.hf_generation_config (an attribute Megatron does not read); refused
 * (CKPT_ERRCLASS_FORMAT, naming the file) when it is no JSON object of at most 1 MiB. */
CKPT_EXTERN(int) ckpt_hf_generation_config_to_args(ckpt_arena *a, ckpt_value *megatron_args, const char *dir);

/* The generation_config.json text args.hf_generation_config holds (appended to out; nothing
 * when args have none); refused (CKPT_ERRCLASS_MODEL) when it is no JSON object. */
CKPT_EXTERN(int) ckpt_hf_generation_config_of(const ckpt_value *megatron_args, ckpt_buf *out);

/* Whether `name` is a tensor that a model of these Megatron args leaves out of its Hugging
 * Face directory: lm_head.weight when the embeddings are tied (Megatron keeps a copy on the
 * last pipeline stage; transformers' save_pretrained writes none and ties it on load). */
CKPT_EXTERN(int) ckpt_hf_llama_tied_copy(const ckpt_value *megatron_args, const char *name);

/* Megatron args (built in `a`) for a config read by ckpt_hf_llama_dims_read (`config` names
 * it in messages): RMSNorm, SwiGLU, RoPE (rotary_base; llama3 scaling as use_rope_scaling and
 * rope_scaling_factor), no linear biases (Qwen2's q/k/v ones as add_qkv_bias), kv_channels,
 * num_query_groups, norm_epsilon, max_position_embeddings, window_size (W - 1, 0) for a
 * sliding window, untied unless tie_word_embeddings, params_dtype d->dtype,
 * padded_vocab_size for `tp`, and what Megatron does not read, kept for the way back:
 * hf_model_type, the family, and the token ids the config has (hf_bos_token_id,
 * hf_eos_token_id, an int or a list, hf_pad_token_id). Refused (CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL): what
 * Megatron's args cannot say -- a LLaMA's attention_bias (an o_proj bias) or mlp_bias, llama3
 * scaling with frequency factors or an original context other than Megatron-LM's fixed 1, 4
 * and 8192. */
CKPT_EXTERN(int) ckpt_hf_llama_megatron_args(ckpt_arena *a, const ckpt_hf_llama_dims *d, const char *config,
                                             int tp, const char *transformer_impl, ckpt_value **out);

/* The order transformers' LlamaForCausalLM.state_dict() lists tensors in (embeddings; per layer
 * q, k, v, o, gate, up, down, input and post-attention norms; final norm; lm_head), which is
 * the order save_pretrained shards them in: perm[i] is the index of the i-th tensor. Names
 * outside that scheme keep their relative order, after the layers. */
CKPT_EXTERN(int) ckpt_hf_llama_order(const char *const *names, size_t n, size_t *perm);

CKPT_END_DECL

#endif
