/* PaddleNLP checkpoint directories: the "paddle" layout of checkpoint sets, and what a
 * conversion of their weights needs besides the member files (which files are converted
 * together, the index json rewritten, what is copied through and what is not).
 *
 * The layout (ckpt_set_open) lists the regular files of one directory, in name order:
 *
 *   model_state.pdparams, model_state.tpXX[_ppYY][_shardZZ].pdparams
 *                                                            role "model", tp, pp and the
 *                                                            sharding rank (dp) from the name
 *                                                            (-1 when it has none; moeNN: ep)
 *   model-0000i-of-0000n.safetensors, model.safetensors      role "model", when their names
 *                                                            are PaddleNLP's (unified
 *                                                            checkpoint)
 *   model_state*.pdparams that an index lists                role "model", shard: N-1 of the
 *                                                            name's "-0000N-of-0000M", else
 *                                                            the file's place in its index
 *   model_state.pdparams.index[.tpXX[_ppYY]].json            role "index"
 *   *.pdopt                                                  role "optimizer"
 *   every other file (config.json, tokenizer files)          role "other"
 *
 * An index that names a file which is not a model file of the directory, and a model file
 * that two indexes list, are errors of class CKPT_ERRCLASS_LAYOUT. */
#ifndef CKPT_PADDLE_H
#define CKPT_PADDLE_H

#include "hf.h"
#include "parallel.h"
#include "plan.h"
#include "set.h"

CKPT_BEGIN_DECL

typedef struct ckpt_paddle ckpt_paddle;

/* Whether path is a directory the "paddle" layout claims (it holds PaddleNLP model files):
 * a caller that reads other directories as another framework's tells a broken PaddleNLP
 * directory from those by it. Clears the last error. */
CKPT_EXTERN(int) ckpt_paddle_is_dir(const char *path);

/* Model files that are converted together: those one index lists (q, k and v of a layer
 * may sit in different files), or one model file on its own. */
typedef struct ckpt_paddle_group {
    long index;          /* the index json's member; -1 for a model file on its own */
    const size_t *files; /* the model files' members; an index's in its order of first mention */
    size_t n_files;
} ckpt_paddle_group;

/* An entry of the directory that is neither a model file nor an index, and what a
 * conversion of the weights does with it. */
typedef struct ckpt_paddle_extra {
    const char *rel;  /* its name in the directory */
    const char *path; /* the path to copy it from */
    const char *skip; /* NULL: copied as it is; else why it is not (optimizer state, which
                         belongs to the source layout's parameters; subdirectories; anything
                         that is not a regular file) */
} ckpt_paddle_extra;

/* A directory opened as a set of layout "paddle", ready to be converted: every model file
 * opened (ckpt_set_member_open: nothing but the pickle metadata is read), every index
 * read, the other entries classified. The set must outlive the handle. */
CKPT_EXTERN(int) ckpt_paddle_open(ckpt_paddle **out, ckpt_set *set);
/* NULL-safe. */
CKPT_EXTERN(void) ckpt_paddle_close(ckpt_paddle *p);

/* The groups: those of the indexes in name order, then the lone model files in name order. */
CKPT_EXTERN(size_t) ckpt_paddle_group_count(const ckpt_paddle *p);
CKPT_EXTERN(const ckpt_paddle_group *) ckpt_paddle_group_at(const ckpt_paddle *p, size_t i);
/* In name order. */
CKPT_EXTERN(size_t) ckpt_paddle_extra_count(const ckpt_paddle *p);
CKPT_EXTERN(const ckpt_paddle_extra *) ckpt_paddle_extra_at(const ckpt_paddle *p, size_t i);

/* A group's index must list exactly the tensors of its files, each in the file that holds
 * it: CKPT_EFORMAT naming the index, the tensor and the files otherwise; 0 for a lone file. */
CKPT_EXTERN(int) ckpt_paddle_group_check(const ckpt_paddle *p, size_t group);

/* Append the group's index as it is after a conversion, formatted as Python's
 * json.dump(indent=4) writes it (PaddleNLP's own writer): weight_map first, names[i] ->
 * files[i] in this order, then the other fields of the input's index, with
 * metadata.total_size (if there is one) replaced by total_size. */
CKPT_EXTERN(int) ckpt_paddle_index_json(const ckpt_paddle *p, size_t group, const char *const *names,
                                        const char *const *files, size_t n, uint64_t total_size, ckpt_buf *out);

/* ---- The logical model: every tensor of a PaddleNLP LLaMA checkpoint at its full shape ----
 *
 * The model files of every tensor- and pipeline-parallel rank (and their size shards) merged
 * tensor by tensor through a parallel layout spec (formats/maps/paddlenlp_llama.json), lazily;
 * each tensor keeps its Paddle variable name (StructuredToParameterName@@). The optimizer
 * files beside them (optimizer[.tpXX][_ppYY][_shardZZ].pdopt) are merged with their
 * parameters: every accumulator (<var>_moment1_0, <var>_fp32_master_0_moment2_0, ...) and
 * master weight follows its parameter's layout, [1]-shaped ones (beta powers) are the same on
 * every rank. config.json gives the head counts and vocabulary the layout depends on. The
 * files of a sharded save (sharding stage 1, save_sharded_model) are read together; the
 * parameters its model files leave out (those with master weights) are the master weights
 * cast to bfloat16, named by model_meta.json, as PaddleNLP rebuilds them. */
typedef struct ckpt_paddle_model ckpt_paddle_model;

typedef struct ckpt_paddle_model_info {
    int tp, pp;                 /* the source layout */
    int64_t num_layers;
    int has_optimizer;          /* .pdopt files beside the model files */
    int master_weights;         /* the optimizer state holds fp32 master weights (AMP O2) */
    int name_table;             /* the model files carry StructuredToParameterName@@ */
    const char *config;         /* config.json's path; NULL when the directory has none */
    const char *config_json;    /* its text (or the text the model was made with); NULL: none */
} ckpt_paddle_model_info;

typedef struct ckpt_paddle_model_options {
    unsigned version;
    const ckpt_map *spec_map;   /* its "parallel" section; NULL: the built-in paddlenlp_llama */
    int no_optimizer;           /* leave the .pdopt files unread */
    /* version 2 */
    /* Asked for each tensor of the model files (its structured name) before it joins the
     * model: 1 leaves it out, 0 keeps it, < 0 is an error. NULL keeps every one
     * (ckpt_plan_leave_out fits). With a hook, a tensor the spec's layout rules do not know
     * is refused with a hint to leave it out. A parameter left out that has optimizer state
     * makes ckpt_paddle_plan refuse to write the optimizer files. */
    int (*leave_out)(void *payload, const char *name);
    void *leave_out_payload;
} ckpt_paddle_model_options;

#define CKPT_PADDLE_MODEL_OPTIONS_VERSION 2
#define CKPT_PADDLE_MODEL_OPTIONS_INIT { CKPT_PADDLE_MODEL_OPTIONS_VERSION, NULL, 0, NULL, NULL }

/* The set must be of layout "paddle" and outlive the model; nodes are built in g. Errors of
 * class CKPT_ERRCLASS_LAYOUT name the file and the tensor: a missing rank, shards that do
 * not fit, an optimizer entry that belongs to no parameter, a tensor two stages hold; model
 * (and, when read, optimizer) files other than those config.json's tensor_parallel_degree and
 * pipeline_parallel_degree and model_meta.json's parallel_config call for; a layer on a stage
 * PaddleNLP's pipeline cut does not give it. With the built-in spec, the tensors are checked
 * against config.json (class CKPT_ERRCLASS_MODEL, naming the tensor and the fields): every
 * layer of num_hidden_layers holds each part of a LLaMA layer in one of its forms and what
 * layer 0 holds, and each tensor has the shape the sizes imply. Config sizes are bounded
 * before they are used. */
CKPT_EXTERN(int) ckpt_paddle_model_open(ckpt_paddle_model **out, ckpt_set *set, ckpt_graph *g,
                                        const ckpt_paddle_model_options *opts);
CKPT_EXTERN(void) ckpt_paddle_model_close(ckpt_paddle_model *m);
CKPT_EXTERN(const ckpt_paddle_model_info *) ckpt_paddle_model_info_of(const ckpt_paddle_model *m);

/* A logical model given tensor by tensor (another framework's checkpoint, or shards computed
 * here): of source layout tp x pp, its config.json text (copied; NULL: none, which only a
 * layout of one TP rank can do without). Add each shard, then finish: the shards are merged
 * as the spec says, into PaddleNLP's state-dict order (the spec's). `var` is the tensor's
 * Paddle variable name (NULL: none; the first given counts; copied): with names, the model
 * files written get a name table. */
CKPT_EXTERN(int) ckpt_paddle_model_new(ckpt_paddle_model **out, ckpt_graph *g, int tp, int pp, const char *config_json,
                                       const ckpt_map *spec_map);
CKPT_EXTERN(int) ckpt_paddle_model_add_shard(ckpt_paddle_model *m, int tp, int pp, const char *name,
                                             const ckpt_node *node, const char *var);
/* A full tensor of a model of TP 1, PP 1. */
CKPT_EXTERN(int) ckpt_paddle_model_add_tensor(ckpt_paddle_model *m, const char *name, const ckpt_node *full);
CKPT_EXTERN(int) ckpt_paddle_model_finish(ckpt_paddle_model *m);

/* The model's tensors in state-dict order (stage by stage); borrowed. */
CKPT_EXTERN(size_t) ckpt_paddle_model_tensor_count(const ckpt_paddle_model *m);
CKPT_EXTERN(const char *) ckpt_paddle_model_tensor_at(const ckpt_paddle_model *m, size_t i, const ckpt_node **full,
                                                      ckpt_tensor_layout *layout);

/* The decoder layers pipeline stage `stage` of `pp` holds, [*lo, *hi), as PaddleNLP's
 * LlamaForCausalLMPipe segments them: equal shares when pp divides num_layers
 * ("layer:LlamaDecoderLayer"), else Paddle's SegmentLayers "uniform" over all num_layers + 3
 * layers of the pipe (embedding, decoder layers, norm, head), the last stages taking one
 * more; a stage may then hold no decoder layer. */
CKPT_EXTERN(void) ckpt_paddle_stage_layers(int64_t num_layers, int pp, int stage, int64_t *lo, int64_t *hi);

typedef struct ckpt_paddle_target {
    unsigned version;
    int tp, pp;
    int drop_optimizer;         /* model files only */
    /* impl "te" (pd2te at a layout): the map of each rank's tensors to Transformer Engine's
     * names and its parameters (ckpt_paddle_te_map, ckpt_paddle_te_params); NULL: the
     * family's te_map, and the parameters of the model's config.json */
    const ckpt_map *te_map;
    const ckpt_map_params *te_params;
} ckpt_paddle_target;

#define CKPT_PADDLE_TARGET_VERSION 1
#define CKPT_PADDLE_TARGET_INIT { CKPT_PADDLE_TARGET_VERSION, 1, 1, 0, NULL, NULL }

/* Whether PaddleNLP's LLaMA can run the model config_json describes (its text; NULL: none,
 * and only the stages are checked) at TP tp, PP pp: num_attention_heads divisible by TP
 * (LlamaAttention); num_key_value_heads divisible by TP, or TP by it (k/v kept whole on every
 * rank, assign_kv_heads), and then no fused qkv_proj; intermediate_size divisible by TP
 * (Column/RowParallelLinear); no more stages than decoder layers (num_hidden_layers, else
 * num_layers). CKPT_EINVALID of class CKPT_ERRCLASS_LAYOUT naming `where`, the layout and the
 * constraint in words; a config size that is not a positive whole number, or sizes that do
 * not fit each other, CKPT_EFORMAT of class CKPT_ERRCLASS_MODEL. ckpt_paddle_plan and
 * ckpt_paddle_model_rank check their target with it. */
CKPT_EXTERN(int) ckpt_paddle_layout_check(const char *where, const char *config_json, int64_t num_layers, int tp,
                                          int pp);

/* Whether rank files of TP tp can hold `fused` (words naming a tensor of q, k and v together,
 * cut by KV group, such as Transformer Engine's layernorm_qkv): PaddleNLP keeps
 * num_key_value_heads whole on every rank when tp does not divide it, which such a tensor
 * cannot be. CKPT_EINVALID of class CKPT_ERRCLASS_LAYOUT naming `where`, the head count and
 * the TP size to choose; config errors as ckpt_paddle_layout_check's. */
CKPT_EXTERN(int) ckpt_paddle_fused_kv_check(const char *where, const char *config_json, int tp, const char *fused);

/* The tensors of target rank (tp, pp)'s model file, in state-dict order: names[i] <- nodes[i],
 * lazily cut from the full tensors. The arrays are malloc'd (free them); the names are
 * borrowed from the model. */
CKPT_EXTERN(int) ckpt_paddle_model_rank(ckpt_paddle_model *m, const ckpt_paddle_target *t, int tp, int pp,
                                        const char ***names, const ckpt_node ***nodes, size_t *n);

/* The file name PaddleNLP gives rank (tp, pp) of layout t: base "model_state", ext
 * ".pdparams" gives model_state.tp01_pp00.pdparams (no tp part at TP 1, no pp part at PP 1). */
CKPT_EXTERN(int) ckpt_paddle_rank_file(const char *base, const char *ext, int tp, int pp, int n_tp, int n_pp,
                                       ckpt_buf *out);

/* Add to `plan` the checkpoint at layout t: per rank a model file (name table with the
 * variable names that rank's PaddleNLP process gives its parameters, counted per stage)
 * and, unless dropped, an optimizer file keyed by those names with every accumulator, the
 * master weights and the source's other entries (LR_Scheduler); config.json with
 * tensor_parallel_degree set to t->tp; every other file of the directory copied but the
 * source layout's model, index and optimizer files. */
CKPT_EXTERN(int) ckpt_paddle_plan(ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_plan *plan);
/* Only the files beside the model and optimizer files: config.json for layout t, the
 * directory's other files copied (for a plan whose model files are written otherwise). */
CKPT_EXTERN(int) ckpt_paddle_plan_other_files(ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_plan *plan);

/* ---- PaddleNLP LLaMA <-> Transformer Engine layers (pd2te / te2pd) ----
 *
 * A directory converted through a tensor map (the built-in llama_pd2te, or its inverse
 * llama_te2pd), either file by file (each model file keeps its name; the files one index
 * lists are converted together and the index is rewritten) or, with a target layout, as one
 * model at full shapes cut into the target's ranks by ckpt_job_plan, source and target of
 * framework paddle (pd2te: target impl "te", each rank mapped on its way out; te2pd: source
 * impl "te", each source rank mapped back, then merged and cut). */

/* The map of a direction: path's map (NULL: the built-in llama_pd2te), inverted for te2pd. */
CKPT_EXTERN(int) ckpt_paddle_te_map(ckpt_map **out, int to_te, const char *path);

/* The model parameters the map's rules use: heads and kv_heads when non-zero (they win),
 * then the fields of `config` (a config.json path; NULL: in_dir/config.json when there is
 * one). pd2te's config must describe a LLaMA PaddleNLP can run (ckpt_paddle_layout_check at
 * TP 1, PP 1). A config without num_key_value_heads is a model without GQA, unless heads
 * was given: a lone head count is not taken to mean it. */
CKPT_EXTERN(int) ckpt_paddle_te_params(ckpt_map_params **out, int to_te, const char *in_dir, const char *config,
                                       int64_t heads, int64_t kv_heads);

typedef struct ckpt_paddle_te_options {
    unsigned version;
    int to_te;                    /* 1: pd2te; 0: te2pd */
    const ckpt_map *map;          /* of this direction (ckpt_paddle_te_map) */
    const ckpt_map_params *params;
    const char *const *variants;  /* NULL-terminated output variants of map; NULL: none */
    const char *config;           /* te2pd at a layout (ckpt_fw_options.paddle_te): the
                                     config.json; NULL: the directory's if any */
} ckpt_paddle_te_options;

#define CKPT_PADDLE_TE_OPTIONS_VERSION 1
#define CKPT_PADDLE_TE_OPTIONS_INIT { CKPT_PADDLE_TE_OPTIONS_VERSION, 1, NULL, NULL, NULL, NULL }

/* A conversion file by file, planned: per group of the directory the map's results (each
 * output's home is the member of the model file it goes to), and the plan: one tensor file
 * per model file in member order, the groups' rewritten indexes, the files copied.
 * Everything is owned by the job. */
typedef struct ckpt_paddle_te_job {
    ckpt_set *set;
    ckpt_plan *plan;
    ckpt_paddle *dir;
    ckpt_map_result **results;     /* per group */
    size_t n_results;
    size_t *group_of;              /* per member: the group of a model file */
    size_t *origin;                /* per plan file: the member of a tensor file, the group of an index */
} ckpt_paddle_te_job;

/* Plan the conversion of in_dir (a directory of layout "paddle") file by file. A directory
 * whose names are on the map's other side is refused naming it (CKPT_ERRCLASS_MAP_DIRECTION)
 * and a map error names the group's index or file (CKPT_ERRCLASS_MAP_PARAM: a head count the
 * rules need). At a target layout both directions are ckpt_job_plan's (paddle impl "te").
 * Dispose of j even when this fails. */
CKPT_EXTERN(int) ckpt_paddle_te_plan(ckpt_paddle_te_job *j, const char *in_dir, const ckpt_paddle_te_options *o);
CKPT_EXTERN(void) ckpt_paddle_te_job_dispose(ckpt_paddle_te_job *j);

/* ---- LLaMA configs between PaddleNLP and Hugging Face ---- */

/* Whether PaddleNLP's LlamaForCausalLM can be the model a Hugging Face config (read from
 * `config_path`) describes: model_type llama, no RoPE scaling. Else CKPT_EUNSUPPORTED
 * (CKPT_ERRCLASS_MODEL) naming config_path and the field. */
CKPT_EXTERN(int) ckpt_paddle_hf_supported(const char *config_path, const ckpt_hf_llama_dims *d);

/* What a PaddleNLP LLaMA config.json (its text; config_path names it in messages) says, as a
 * Hugging Face config's fields, read and checked as ckpt_hf_llama_dims_parse does (PaddleNLP's
 * LlamaConfig has transformers' defaults); dtype is the tensors'. Nothing out of range is
 * carried into a Hugging Face config. */
CKPT_EXTERN(int) ckpt_paddle_hf_dims(const char *config_path, const char *config_json, ckpt_dtype dtype,
                                     ckpt_hf_llama_dims *out);

/* A PaddleNLP LlamaConfig config.json for a Hugging Face LLaMA config.json (transformers 4 or
 * 5), read and checked as ckpt_hf_llama_dims_parse does: sizes, head counts, vocabulary,
 * token ids, rms_norm_eps, rope_theta, tied embeddings, dtype, and whether q/k/v and gate/up
 * are fused. A head_dim other than hidden_size / heads, which PaddleNLP's LLaMA cannot hold,
 * and what ckpt_paddle_hf_supported refuses are CKPT_EUNSUPPORTED. */
CKPT_EXTERN(int) ckpt_paddle_config_from_hf(const char *hf_config_json, int fuse_qkv, int fuse_ffn, ckpt_dtype dtype,
                                            ckpt_buf *out);

CKPT_END_DECL

#endif
