/* For model-source implementers: how a checkpoint layout becomes a model `ckptconv verify`
 * can run (ckpt/verify.h). A source (formats/<framework>/verify_<framework>.c, the `verify`
 * of its framework's vtable) recognises its paths, reads the model's configuration and hands
 * the engine each tensor-parallel rank's tensors under verify's own names, through a map of
 * its own (formats/maps/verify_*.json):
 *
 *   embed.weight                          [vocab rows, hidden]      model-level
 *   pos_embed.weight                      [positions, hidden]       model-level
 *   layers.{L}.attn_norm.weight / .bias   [hidden]                  replicated
 *   layers.{L}.attn.q.weight / .bias      [heads x head_dim, hidden] column-parallel (also k, v:
 *                                                                   kv_heads x head_dim rows)
 *   layers.{L}.attn.q_norm.weight / .bias [head_dim]                replicated (also k_norm)
 *   layers.{L}.attn.o.weight              [hidden, heads x head_dim] row-parallel
 *   layers.{L}.attn.o.bias                [hidden]                  replicated, added once
 *   layers.{L}.mlp_norm.weight / .bias    [hidden]                  replicated
 *   layers.{L}.mlp.fc1.weight / .bias     [ffn, hidden]; gated MLPs [gate; up] (2 x ffn rows),
 *                                                                   column-parallel: each rank
 *                                                                   [gate_r; up_r]
 *   layers.{L}.mlp.fc2.weight             [hidden, ffn]             row-parallel
 *   layers.{L}.mlp.fc2.bias               [hidden]                  replicated, added once
 *   layers.{L}.attn_post_norm.weight / .bias [hidden]               replicated: sandwich norms (Gemma),
 *   layers.{L}.mlp_post_norm.weight / .bias  [hidden]               on the summed row-parallel output
 *   layers.{L}.moe.router.weight          [experts, hidden]         replicated: a MoE layer's router
 *   layers.{L}.moe.experts.{E}.fc1.weight [ffn, hidden] (gated: [gate; up]) and
 *   layers.{L}.moe.experts.{E}.fc2.weight [hidden, ffn]             expert E (global index) cut as
 *                                                                   mlp.fc1/fc2 are; a MoE layer has
 *                                                                   these instead of mlp.fc*
 *   layers.{L}.moe.shared.fc1.weight / .fc2.weight                  a MoE layer's shared expert, cut
 *                                                                   as mlp.fc1/fc2 are
 *   layers.{L}.moe.router.expert_bias     [experts]                 replicated: added to the scores for
 *                                                                   the choice only (DeepSeek-V3)
 *   MLA layers (kv_lora_rank > 0) have instead of attn.q/k/v:
 *   layers.{L}.attn.q_down.weight         [q_lora_rank, hidden]     replicated (absent: q_lora_rank 0)
 *   layers.{L}.attn.q_down_norm.weight    [q_lora_rank]             replicated
 *   layers.{L}.attn.q_up.weight           [heads x (qk_nope + qk_rope), q_lora_rank or hidden]
 *                                                                   column-parallel; with no q_lora_rank
 *                                                                   q straight from the input
 *   layers.{L}.attn.kv_down.weight        [kv_lora_rank + qk_rope, hidden] replicated: [latent; k_rope]
 *   layers.{L}.attn.kv_down_norm.weight   [kv_lora_rank]            replicated
 *   layers.{L}.attn.kv_up.weight          [heads x (qk_nope + v_head_dim), kv_lora_rank] column-parallel,
 *                                                                   each head [k_nope; v]
 *   and attn.o.weight is [hidden, heads x v_head_dim].
 *   final_norm.weight / .bias             [hidden]                  model-level
 *   output.weight                         [vocab rows, hidden]      model-level
 *
 * {L} is the global layer index. Linear weights are [out, in], as torch stores them. Each rank
 * is given its own tensors of every layer, as the framework's rank uses them (replicated ones
 * too: each rank normalises with its own copy); the engine runs the column parts side by side
 * and sums the row parts. Model-level tensors are given once, for rank 0, whole: the source
 * joins vocabulary-parallel parts (running them as parts would give the same numbers). */
#ifndef CKPT_SYS_MODEL_H
#define CKPT_SYS_MODEL_H

#include "../rules.h"
#include "../set.h"
#include "../verify.h"
#include "common.h"

CKPT_BEGIN_DECL

#define CKPT_MODEL_SOURCE_ABI_VERSION 1

/* The engine's side of a model being opened. */
typedef struct ckpt_model_builder ckpt_model_builder;

/* The graph the source builds its nodes in (it lives as long as the model). */
CKPT_EXTERN(ckpt_graph *) ckpt_model_builder_graph(ckpt_model_builder *b);
/* The path being opened and the caller's options. */
CKPT_EXTERN(const char *) ckpt_model_builder_path(const ckpt_model_builder *b);
CKPT_EXTERN(const ckpt_model_options *) ckpt_model_builder_options(const ckpt_model_builder *b);
/* The configuration the source fills in from its files: fields start unset (see
 * ckpt_model_config_unset); the engine applies the caller's overrides and defaults afterwards
 * and names any value still missing. */
CKPT_EXTERN(ckpt_model_config *) ckpt_model_builder_config(ckpt_model_builder *b);
/* Which layers use the config's sliding window: n flags (1: windowed), one per layer, copied
 * (HF layer_types, Megatron's window_attn_skip_freq list). */
CKPT_EXTERN(int) ckpt_model_builder_layer_window(ckpt_model_builder *b, const unsigned char *windowed, int64_t n);
/* Which layers are MoE layers: n flags (1: MoE), one per layer, copied (Megatron's moe_layer_freq
 * list), over moe_first_dense and moe_layer_freq. */
CKPT_EXTERN(int) ckpt_model_builder_layer_moe(ckpt_model_builder *b, const unsigned char *moe, int64_t n);
/* Where a config value came from, for the error that names a missing one ("args of
 * iter_0000010/mp_rank_00/model_optim_rng.pt", "config.json"). */
CKPT_EXTERN(int) ckpt_model_builder_config_source(ckpt_model_builder *b, const char *where);
CKPT_EXTERN(int) ckpt_model_builder_kind(ckpt_model_builder *b, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
CKPT_EXTERN(int) ckpt_model_builder_note(ckpt_model_builder *b, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);

/* Keep a resource alive as long as the model (opened checkpoints, sets, maps, map results);
 * `release` is called on it when the model is closed, in reverse order of keeping. On
 * failure `release` has already been called. */
CKPT_EXTERN(int) ckpt_model_builder_keep(ckpt_model_builder *b, void *resource, void (*release)(void *));

/* The tensor-parallel ranks the tensors are given for (1 when not sharded; call once, before
 * adding tensors). */
CKPT_EXTERN(int) ckpt_model_builder_set_ranks(ckpt_model_builder *b, int ranks);
/* Add a tensor of rank `rank` under its canonical name (copied). A name given twice for one
 * rank is CKPT_EFORMAT naming it. */
CKPT_EXTERN(int) ckpt_model_builder_add(ckpt_model_builder *b, int rank, const char *name, const ckpt_node *node);
/* Apply `map` to a rank's tensors and add what it gives; `params` holds the values the map's
 * expressions need. Tensors the map leaves under names outside the canonical scheme are
 * CKPT_EFORMAT naming them and the map (a layout the source does not understand). */
CKPT_EXTERN(int) ckpt_model_builder_add_mapped(ckpt_model_builder *b, int rank, const ckpt_map *map,
                                               const ckpt_map_params *params, const ckpt_map_input *inputs,
                                               size_t n);

typedef struct ckpt_model_source_vtable {
    unsigned abi_version; /* CKPT_MODEL_SOURCE_ABI_VERSION */
    const char *name;     /* "megatron", "huggingface", "paddle", "deepspeed" */
    /* How sure the source is that `path` is its own (-1: not; larger: surer), as format bids. */
    int (*bid)(const char *path, int is_dir);
    int (*open)(ckpt_model_builder *b);
} ckpt_model_source_vtable;

CKPT_END_DECL

#endif
