/* Running checkpoints: a decoder-only transformer (LLaMA, Mistral, Qwen, Gemma 3, GPT-2
 * style) read from any checkpoint layout ckptconv knows, and `verify`, which runs two of them
 * layer by layer on the same inputs and reports how far apart they are.
 *
 * A model is built through the same maps the converters use (formats/maps/), in the
 * checkpoint's own layout, lazily: a layer's weights are read when the layer runs.
 * Tensor-parallel shards run as the framework runs them (column shards side by side, row
 * shards as partial sums, fused blocks as each rank splits them), so a shard cut the wrong
 * way shows up as a wrong layer even when merging the shards would hide it. */
#ifndef CKPT_VERIFY_H
#define CKPT_VERIFY_H

#include "checkpoint.h"

CKPT_BEGIN_DECL

/* Append-only. */
typedef enum ckpt_norm_kind {
    CKPT_NORM_RMS = 0, /* x / sqrt(mean(x^2) + eps) * w */
    CKPT_NORM_LAYER    /* (x - mean) / sqrt(var + eps) * w + b, biased variance as torch */
} ckpt_norm_kind;

/* Append-only. */
typedef enum ckpt_act_kind {
    CKPT_ACT_SWIGLU = 0, /* silu(gate) * up */
    CKPT_ACT_GELU,       /* 0.5 x (1 + erf(x / sqrt 2)): torch's gelu, Megatron's default */
    CKPT_ACT_GELU_TANH,  /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GPT-2's gelu_new */
    CKPT_ACT_RELU,
    CKPT_ACT_SILU,
    CKPT_ACT_GEGLU_TANH  /* gelu_tanh(gate) * up: Gemma's gated MLP (gelu_pytorch_tanh) */
} ckpt_act_kind;

/* Append-only. */
typedef enum ckpt_position_kind {
    CKPT_POSITION_ROPE = 0,
    CKPT_POSITION_LEARNED, /* learned absolute position embeddings added to the token embeddings */
    CKPT_POSITION_NONE
} ckpt_position_kind;

/* How a MoE layer's router turns its logits into the weights of the top-k experts of a
 * token. Append-only. */
typedef enum ckpt_moe_score_kind {
    CKPT_MOE_SOFTMAX_TOPK = 0, /* top-k logits, then softmax over those k (Megatron's default; equal to
                                  softmax over all then renormalised over the k: Mixtral, Qwen3-MoE's
                                  norm_topk_prob) */
    CKPT_MOE_SOFTMAX_ALL,      /* softmax over all experts, the top k of those probabilities as they are
                                  (Megatron's moe_router_pre_softmax, Qwen3-MoE without norm_topk_prob) */
    CKPT_MOE_SIGMOID           /* sigmoid, top k (of the scores plus the expert bias, where the router has
                                  one), divided by their sum when k > 1 and moe_topk_norm */
} ckpt_moe_score_kind;

/* A model's hyper-parameters. In overrides, -1 (integers and enums) and NaN (floats) mean
 * "not given"; in a model's config every field is known. */
typedef struct ckpt_model_config {
    unsigned version;
    int64_t num_layers, hidden_size, num_heads, num_kv_heads, head_dim, ffn_hidden_size;
    int64_t vocab_size;       /* true vocabulary: the rows of the tables that are not padding */
    double norm_eps;
    double rope_theta;
    double rotary_percent;    /* share of head_dim that RoPE rotates (Megatron's rotary_percent) */
    int rope_interleaved;     /* rotate pairs (2i, 2i+1) instead of halves */
    double rope_scaling_factor; /* Llama 3 style frequency scaling ("rope_type": "llama3"); 1: none */
    double rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_max_positions;
    int norm;                 /* ckpt_norm_kind */
    int norm_weight_plus_one; /* stored norm weights are w - 1 (Megatron's apply_layernorm_1p) */
    int act;                  /* ckpt_act_kind */
    int position;             /* ckpt_position_kind */
    int qk_norm;              /* a norm over each head of q and k before RoPE */
    int tied_embeddings;      /* the output layer is the word embedding table */
    /* version 2 */
    int64_t window;           /* sliding-window attention: query t sees keys j with t - window < j <= t; 0: none */
    int64_t window_full_every; /* N > 0: layer i (from 0) attends to every earlier key when (i + 1) % N == 0
                                  (Megatron's window_attn_skip_freq N); 0: the window on every layer */
    const unsigned char *layer_window; /* num_layers flags, 1 where the layer uses the window (HF layer_types);
                                          NULL: by window_full_every. A model's config points into the model */
    double rope_theta_local;  /* RoPE base of the windowed layers, which are not scaled; NaN: they use
                                 rope_theta and its scaling like every layer */
    double rope_linear_factor; /* positions divided by this on the layers of rope_theta (HF "linear"); 1: none */
    double attn_scale;        /* softmax scale; NaN: 1 / sqrt(head_dim) */
    double embed_scale;       /* word embeddings times this, rounded to the weights' type (Gemma: sqrt(hidden));
                                 0: none */
    int sandwich_norms;       /* attn_post_norm and mlp_post_norm on the attention and MLP outputs before
                                 they join the residual stream (Gemma 2 and 3) */
    /* version 3: mixture of experts. A MoE layer's MLP is num_experts routed MLPs of
       moe_ffn_hidden_size each (the activation of the dense MLP); a token's output is the sum
       of its top moe_top_k experts' outputs times their router weights */
    int64_t num_experts;      /* 0: no MoE layers */
    int64_t moe_top_k;
    int64_t moe_ffn_hidden_size;
    int64_t moe_layer_freq;   /* N >= 1: layer i (from 0) is a MoE layer when i % N == 0 (Megatron's int
                                 moe_layer_freq) */
    int moe_score;            /* ckpt_moe_score_kind */
    double moe_topk_scale;    /* the experts' weights times this (Megatron's moe_router_topk_scaling_factor);
                                 1: none */
    int64_t moe_shared_ffn_hidden_size; /* a shared expert every token goes through, added to the routed
                                           experts' sum (ungated); 0: none */
    /* version 4: DeepSeek-V3. Multi-head latent attention (MLA) when kv_lora_rank > 0: q from
       q_up(norm(q_down(x))) (q straight from x when q_lora_rank is 0), each head [nope | rope];
       kv_down(x) is [latent | k_rope], k_rope shared by every head; kv_up(norm(latent)) gives
       each head [k_nope | v]. head_dim is qk_nope + qk_rope (the softmax scale's), RoPE turns the
       qk_rope values, the values have v_head_dim */
    int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    double mla_norm_eps;      /* the two latent norms' epsilon; NaN: norm_eps */
    double rope_yarn_factor;  /* YaRN ("rope_type": "yarn") frequencies over rope_original_max_positions; 1: none */
    double rope_yarn_beta_fast, rope_yarn_beta_slow; /* NaN: 32 and 1 */
    double rope_yarn_mscale, rope_yarn_mscale_all_dim; /* 0: not given */
    double rope_attention_factor; /* cos and sin times this; NaN: YaRN's from the mscales (1 without YaRN) */
    int rope_yarn_truncate;   /* the correction range rounded out to whole dimensions (transformers' default) */
    int64_t moe_first_dense;  /* layers before this one are dense whatever moe_layer_freq says
                                 (first_k_dense_replace); 0: none */
    int moe_expert_bias;      /* the router's expert bias (moe.router.expert_bias) is added to the scores
                                 for choosing the experts, not for their weights */
    int64_t moe_n_group, moe_topk_group; /* group-limited choice: the experts in n_group groups, each scored
                                            by the sum of its moe_group_top best, the topk_group best groups'
                                            experts only; 1 and 1: none */
    int64_t moe_group_top;    /* 2 (transformers' DeepSeek-V3); Megatron's group_limited_topk sums
                                 moe_top_k / moe_topk_group */
    int moe_topk_norm;        /* CKPT_MOE_SIGMOID: the k weights divided by their sum (when k > 1) */
    /* version 5 */
    const unsigned char *layer_moe; /* num_layers flags, 1 where the layer is a MoE layer (Qwen3-MoE's
                                       mlp_only_layers, Megatron's moe_layer_freq list); NULL: by
                                       moe_first_dense and moe_layer_freq. A model's config points into
                                       the model */
} ckpt_model_config;

#define CKPT_MODEL_CONFIG_VERSION 5
/* Everything "not given". */
CKPT_EXTERN(void) ckpt_model_config_unset(ckpt_model_config *c);

typedef struct ckpt_model ckpt_model;

typedef struct ckpt_model_options {
    unsigned version;
    ckpt_model_config overrides; /* given fields win over what the checkpoint's files say */
    int merge_tp;                /* run tensor-parallel checkpoints merged instead of shard by shard */
    int zero_module;             /* DeepSpeed ZeRO: the module weights the engine ran with (its
                                    model_states file, ZeRO stages 0-2) instead of the fp32 master
                                    weights consolidated from the optimizer's partitions */
    const char *tag;             /* DeepSpeed tag directory; NULL: the one `latest` names */
    int64_t iteration;           /* Megatron iteration; -1: the tracker's */
} ckpt_model_options;

#define CKPT_MODEL_OPTIONS_VERSION 4
/* Fills defaults (overrides unset, iteration -1). */
CKPT_EXTERN(void) ckpt_model_options_init(ckpt_model_options *o);

/* A model from `path`: a Megatron-LM checkpoint root or iteration directory, a Hugging Face
 * model directory (config.json and safetensors or pytorch_model.bin, sharded or not), a
 * PaddleNLP checkpoint directory (model_state*.pdparams and config.json; PaddleNLP or
 * Transformer Engine layer names), a DeepSpeed ZeRO checkpoint directory (the consolidated
 * model; config.json beside `latest` or above it), or one file of any of these. A value the
 * model needs that neither the files nor the overrides give is CKPT_ENOTFOUND with class
 * CKPT_ERRCLASS_MODEL, naming the value and the files looked at. Nothing is read but
 * metadata until a layer runs. */
CKPT_EXTERN(int) ckpt_model_open(ckpt_model **out, const char *path, const ckpt_model_options *opts);
CKPT_EXTERN(void) ckpt_model_close(ckpt_model *m);

/* What `verify A` alone compares A with: a tensor-parallel checkpoint's merged tensors (its
 * ranks run as ranks against the merge), a DeepSpeed ZeRO checkpoint's module weights
 * (against the master weights consolidated from the partitions). CKPT_EUNSUPPORTED, saying
 * why, for a model that is neither. `opts` as for ckpt_model_open. */
CKPT_EXTERN(int) ckpt_model_open_counterpart(ckpt_model **out, const ckpt_model *m, const ckpt_model_options *opts);

CKPT_EXTERN(const ckpt_model_config *) ckpt_model_config_of(const ckpt_model *m);
/* The model source that read it: "megatron", "huggingface", "paddle", "deepspeed". */
CKPT_EXTERN(const char *) ckpt_model_source(const ckpt_model *m);
/* What the model was read as, in words: "Megatron-LM mcore GPT, TP 2 PP 2 (run as TP 2)". */
CKPT_EXTERN(const char *) ckpt_model_kind(const ckpt_model *m);
/* The type of the layers' linear weights. */
CKPT_EXTERN(ckpt_dtype) ckpt_model_dtype(const ckpt_model *m);
/* Tensor-parallel ranks the layers run as (1: merged or not sharded). */
CKPT_EXTERN(int) ckpt_model_tp(const ckpt_model *m);
/* Global indices of the layers present (a pipeline stage's file holds some of them). */
CKPT_EXTERN(size_t) ckpt_model_layer_count(const ckpt_model *m);
CKPT_EXTERN(int64_t) ckpt_model_layer_index(const ckpt_model *m, size_t i);
/* Which model-level parts the files hold: word embeddings, final norm, output layer (a tied
 * model's output is its embedding table). */
CKPT_EXTERN(int) ckpt_model_has_embedding(const ckpt_model *m);
CKPT_EXTERN(int) ckpt_model_has_final_norm(const ckpt_model *m);
CKPT_EXTERN(int) ckpt_model_has_output(const ckpt_model *m);
/* Things the model wants a person to know ("A's norm_eps 1e-06 taken from --norm-eps"). */
CKPT_EXTERN(size_t) ckpt_model_note_count(const ckpt_model *m);
CKPT_EXTERN(const char *) ckpt_model_note_at(const ckpt_model *m, size_t i);

/* ---- compute backends ---- */

/* Where models run: the CPU (built in) or a GPU (a loadable module, so that the library and
 * the CLI run on machines without CUDA). ckpt/sys/backend.h is the interface backends
 * implement. */
typedef struct ckpt_backend ckpt_backend;

/* Open backend `name`: "cpu" (`device`: threads, 0 for OpenMP's default), or "cuda" (`device`:
 * the GPU's ordinal), the module libckpt_cuda.so, looked for in the directory
 * $CKPT_BACKEND_DIR names, beside the running program, beside this library, in the install's
 * library directory, then by the dynamic loader's rules. CKPT_ENOTFOUND when the module or
 * the device is missing (the message says which and why), CKPT_EUNSUPPORTED for a module
 * built for another backend interface version; class CKPT_ERRCLASS_BACKEND. */
CKPT_EXTERN(int) ckpt_backend_open(ckpt_backend **out, const char *name, int device);
/* NULL-safe. */
CKPT_EXTERN(void) ckpt_backend_close(ckpt_backend *b);
/* The device in words: "CPU, 2 threads", "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB". */
CKPT_EXTERN(const char *) ckpt_backend_description(const ckpt_backend *b);

/* The whole forward pass: logits (n_tokens x vocab_size, true vocabulary only, float32) for
 * token ids at positions 0..n-1, causal, on backend b (NULL: the CPU). Needs every layer
 * and the model-level parts. */
CKPT_EXTERN(int) ckpt_model_forward(ckpt_model *m, ckpt_backend *b, const int32_t *ids, int64_t n_tokens,
                                    float *logits);

/* ---- verify ---- */

typedef enum ckpt_device {
    CKPT_DEVICE_AUTO = 0, /* CUDA when a GPU is visible, else the CPU */
    CKPT_DEVICE_CPU,
    CKPT_DEVICE_CUDA
} ckpt_device;

typedef void (*ckpt_verify_progress_fn)(size_t done, size_t total, const char *what, void *payload);

typedef struct ckpt_verify_options {
    unsigned version;
    const int64_t *layers;  /* global layer indices to run; NULL: every layer both models hold */
    size_t n_layers;
    int64_t tokens;         /* 0: 64 */
    uint64_t seed;
    double tol;             /* relative L2 a layer may differ by; 0: from the weights' dtype */
    ckpt_device device;
    int threads;            /* CPU threads; 0: OpenMP's default */
    int keep_precision;     /* run each model at its own weights' precision; by default the more
                               precise model's weights are rounded (as torch's .to rounds) to the
                               other's type, so that both run the same numbers */
    ckpt_verify_progress_fn progress;
    void *progress_payload;
} ckpt_verify_options;

#define CKPT_VERIFY_OPTIONS_VERSION 1
#define CKPT_VERIFY_OPTIONS_INIT { CKPT_VERIFY_OPTIONS_VERSION, NULL, 0, 0, 0, 0.0, CKPT_DEVICE_AUTO, 0, 0, NULL, NULL }

typedef struct ckpt_verify_entry {
    int64_t index;          /* global layer index; -1 for the model-level entries */
    const char *name;       /* "layer 3", "embedding", "final_norm", "logits" */
    double max_abs, rel_l2, cosine;
    uint64_t nonfinite_a, nonfinite_b;
    int pass;
    const char *error;      /* why the layer could not run (a tensor that does not fit its model;
                               the metrics are NaN then), or NULL */
    /* A MoE layer's entry is followed by its router's and each expert's, compared alone on
       the same rows of the layer's input (every expert on every row), so that a failing
       layer names what differs: "layer 3 router", "layer 3 router expert bias", "layer 3 expert 5",
       "layer 3 shared expert". A multi-latent attention (MLA) layer's entry is followed by its
       attention's alone ("layer 3 attention"), so that a failing MLA layer with MoE says which half. */
    int part;               /* ckpt_verify_part */
    int64_t expert;         /* CKPT_VERIFY_PART_EXPERT: the expert's index; else -1 */
} ckpt_verify_entry;

/* Append-only. */
typedef enum ckpt_verify_part {
    CKPT_VERIFY_PART_WHOLE = 0, /* a layer or a model-level piece */
    CKPT_VERIFY_PART_ROUTER,
    CKPT_VERIFY_PART_EXPERT,
    CKPT_VERIFY_PART_SHARED,    /* a MoE layer's shared expert */
    CKPT_VERIFY_PART_EXPERT_BIAS, /* a MoE layer's router expert bias (the vectors themselves) */
    CKPT_VERIFY_PART_ATTENTION    /* a multi-latent attention layer's attention alone */
} ckpt_verify_part;

typedef struct ckpt_verify_report {
    int pass;                 /* every entry passed */
    const char *device;       /* the backend's description */
    double tol;               /* the tolerance applied */
    const char *tol_reason;   /* how it was chosen: "bfloat16 weights", "--tol" */
    ckpt_dtype dtype;         /* the weights' type both ran at (INVALID with keep_precision and two types) */
    int64_t tokens;
    size_t n_entries;
    const ckpt_verify_entry *entries; /* layers in index order, then embedding, final_norm, logits */
    const ckpt_verify_entry *first_failure; /* NULL when all passed */
    size_t n_notes;
    const char *const *notes; /* what differs in the configs, what was rounded, what was skipped */
    double seconds_load, seconds_a, seconds_b, seconds_compare; /* reading weights, running A, B, comparing */
    double seconds_device; /* starting the backend (a GPU's context and cuBLAS) */
} ckpt_verify_report;

/* Run every selected layer of a and b on the same random hidden states (a layer's own, from
 * `seed` and its index: each layer gets the same input in both models, so errors do not
 * carry from one layer to the next and the first failing layer is the broken one), and
 * compare their outputs; then the embeddings of the same random token ids, the final norm and
 * the logits, where both models have them. Layers are compared by what they add to the
 * residual stream (output minus input). The report is filled in (and *out set) also when
 * layers fail; a non-zero return means verify itself could not run. */
CKPT_EXTERN(int) ckpt_verify(ckpt_model *a, ckpt_model *b, const ckpt_verify_options *opts,
                             ckpt_verify_report **out);
CKPT_EXTERN(void) ckpt_verify_report_free(ckpt_verify_report *r);

CKPT_END_DECL

#endif
