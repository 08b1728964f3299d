/* PaddleNLP directories: what the layout module and the conversion helpers share. */
#ifndef CKPT_FORMATS_PADDLE_PRIVATE_H
#define CKPT_FORMATS_PADDLE_PRIVATE_H

#include <ckpt/family.h>
#include <ckpt/paddle.h>

#include <cjson/cJSON.h>

/* The names of a directory's entries but "." and "..", in strcmp order, so that every run
 * sees the same order; release them with ckpt_paddle__names_free. */
int ckpt_paddle__list(const char *dir, char ***names, size_t *n);
void ckpt_paddle__names_free(char **names, size_t n);
/* "dir/name", malloc'd; NULL when out of memory. */
char *ckpt_paddle__join(const char *dir, const char *name);
/* Read the index json at path: its tree (cJSON_Delete it) and, for each file its
 * weight_map names, the first entry that names it (the tensor is ->string, the file
 * ->valuestring), in that order; *firsts is malloc'd. Errors name the path: not JSON, no
 * weight_map object, a value that is not a file name. */
int ckpt_paddle__index_read(const char *path, cJSON **json, const cJSON ***firsts, size_t *n);
/* A text file's bytes, NUL-terminated and malloc'd; errors (class CKPT_ERRCLASS_OS) name path. */
int ckpt_paddle__read_text(const char *path, char **out);
/* dir/config.json, malloc'd, when there is one; else *out = NULL. */
int ckpt_paddle__config_beside(const char *dir, char **out);
/* Each rank of layout t in PaddleNLP's order (stage by stage, TP ranks within), with its model
 * file's tensors in state-dict order: names borrowed from m, nodes cut once for every rank
 * (ckpt_fw_ranks), both valid during the call (paddle_plan.c). */
typedef int (*ckpt_paddle__rank_fn)(void *payload, int tp, int pp, const char *const *names,
                                    const ckpt_node *const *nodes, size_t n);
int ckpt_paddle__each_rank(ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_paddle__rank_fn fn, void *payload);
/* The paddle framework's source impl "te" (te2pd at a layout, paddle_te_plan.c): the
 * Transformer Engine ranks of set, each mapped back to PaddleNLP's names by o (its config:
 * o->config, else dir's config.json), as one model; the map's results (*results, one per
 * rank) hold its names and live as long as it. */
int ckpt_paddle__open_te(ckpt_paddle_model **out, ckpt_map_result ***results, size_t *n_results, ckpt_set *set,
                         ckpt_graph *g, const char *dir, const ckpt_paddle_te_options *o);
/* A model of ckpt_paddle__open_te at layout t: a model file per rank without the name table,
 * config.json for t, set's other files copied. */
int ckpt_paddle__plan_from_te(ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_set *set, ckpt_plan *plan);

/* ---- the logical model (paddle_model.c), written by paddle_plan.c ---- */

#define CKPT_PADDLE_NAME_TABLE "StructuredToParameterName@@"
#define CKPT_PADDLE_MASTER_WEIGHTS "master_weights"
/* Kinds of accumulators per parameter (Adam has four, five with amsgrad); the master weight
 * is kept after them, at [PD_MAX_KINDS]. */
#define PD_MAX_KINDS 16

/* One file of a rank: a model file (or one of its size shards) or an optimizer file. */
typedef struct pd_file {
    const ckpt_ckpt *ck;
    const ckpt_value *root;
    const ckpt_value *names;   /* a model file's name table, or NULL */
} pd_file;

/* The files of one TP rank and PP stage: size shards and sharding ranks' files alike (a
 * sharding rank saves the parameters it owns, save_sharded_model). */
typedef struct pd_rank {
    pd_file *models, *optims;
    size_t n_models, n_optims;
    const cJSON *structure;    /* model_meta.json's structure_name_mapping of this rank, or NULL */
} pd_rank;

/* An accumulator (or the master weight) of one parameter, over the source's TP ranks. */
typedef struct pd_state {
    const ckpt_node **shards;  /* [source tp] */
    const ckpt_node *full;
    int replicated;            /* [1]-shaped: the same on every rank (beta powers) */
} pd_state;

typedef struct pd_entry {
    char *name;                /* the structured name */
    char *var;                 /* its Paddle variable name (owned), or NULL */
    int pp;                    /* the source stage that holds it */
    int tensor;                /* a tensor; else a value carried as it is */
    const ckpt_value *value;   /* !tensor: the value */
    const ckpt_ckpt *src;      /* !tensor: the file it is in */
    ckpt_tensor_layout layout; /* in the source layout */
    const ckpt_node **shards;  /* [source tp] */
    const ckpt_node *full;
    pd_state *states;          /* [n_kinds], then the master weight at [n_kinds] */
    const char *master_name;   /* the master weight's own name ((name, array) pairs), borrowed */
    size_t seq;                /* the order it was first seen in */
} pd_entry;

/* A PaddleNLP model family (paddle_family.c). */
typedef struct pd_family {
    const char *model_type, *title;   /* "qwen2", "Qwen2" */
    const char *base;                 /* the base model's prefix: "qwen2" in qwen2.layers.0... */
    const char *cls, *pipe_cls;       /* Qwen2ForCausalLM, Qwen2ForCausalLMPipe */
    const char *head, *head_pipe;     /* the head's variable prefixes (LMHead, LMHeadPipe) */
    const char *spec, *to_hf, *from_hf; /* built-in maps */
    int qkv_bias;                     /* q/k/v projections have biases */
    int tied_shared;                  /* a tied head is saved as the embedding's variable */
    int moe;                          /* every MLP a mixture of num_local_experts experts; its
                                         config is read as the family's (formats/families) */
} pd_family;

/* The family of model_type; NULL when ckptconv knows no such PaddleNLP family. */
const pd_family *ckpt_paddle__family(const char *model_type);
const pd_family *ckpt_paddle__llama(void);
/* The family config.json (its text; NULL: none) names: LLaMA without a known model_type
 * (older PaddleNLP writes none; an unknown one is refused by ckpt_paddle__dims). */
const pd_family *ckpt_paddle__family_of(const char *config_json);
/* pd2te's map knows LLaMA's names only: another family is refused naming where. */
int ckpt_paddle__te_llama_only(const char *where, const pd_family *f);
/* The paddle framework's impl "te": m at layout t, checked as PaddleNLP and Transformer
 * Engine's fused layernorm_qkv need (ckpt_paddle_layout_check, ckpt_paddle_fused_kv_check),
 * each rank's tensors through t's te_map (NULL: family f's; its parameters from dir's
 * config.json) on their way out, without the name table. */
int ckpt_paddle__plan_te(ckpt_paddle_model *m, const ckpt_paddle_target *t, const char *dir, const ckpt_family *f,
                         ckpt_plan *plan);

/* config.json's sizes; 0 for what it does not give (num_key_value_heads: num_attention_heads). */
typedef struct pd_dims {
    int64_t hidden, inter, heads, kv, vocab, layers, tp, pp, experts;
    int fuse_qkv, tied;
    const pd_family *family;
} pd_dims;

struct ckpt_paddle_model {
    ckpt_set *set;
    ckpt_graph *g;
    ckpt_map *own_map;
    const ckpt_parallel_spec *spec;
    const pd_family *family;   /* config.json's */
    ckpt_paddle_model_info info;
    char *config_text;         /* config.json as read; NULL without one */
    size_t config_len;
    pd_rank *ranks;            /* [pp][tp] */
    pd_entry *entries;
    size_t n_entries, cap_entries;
    char **kinds;              /* accumulator suffixes ("moment1_0"), in order of first sight */
    size_t n_kinds;
    int opt_pairs;             /* accumulators stored as (name, array) pairs */
    int opt_name_table;        /* the optimizer files carry a name table */
    cJSON *meta;               /* model_meta.json (sharded saves), or NULL */
    const char *meta_path;     /* its path */
    pd_dims dims;              /* config.json's sizes, once checked */
    int reorder;               /* the tensors did not come in state-dict order (safetensors files
                                  sort them by name; another framework's order): put them in the
                                  spec's */
    int (*leave_out)(void *payload, const char *name); /* ckpt_paddle_model_options */
    void *leave_out_payload;
    size_t left_out_with_state; /* parameters left out that had optimizer state */
};

/* The directory, or what else names the model, for messages. */
const char *ckpt_paddle__where(const ckpt_paddle_model *m);
pd_rank *ckpt_paddle__rank(const ckpt_paddle_model *m, int tp, int pp);
/* Map parameters of the layout at TP size tp: config.json's integers, kv_split, vocab_split. */
int ckpt_paddle__layout_params(const ckpt_paddle_model *m, int tp, ckpt_map_params **out);
/* The variable name rank r's name tables give `name`; NULL without one. */
const char *ckpt_paddle__var_of(const pd_rank *r, const char *name);
/* The graph node of a tensor leaf of ck. */
int ckpt_paddle__tensor_node(ckpt_paddle_model *m, const ckpt_ckpt *ck, const ckpt_value *leaf,
                             const ckpt_node **out);
/* The entry named `name`, or -1; a new one (name copied) for stage pp. */
long ckpt_paddle__find_entry(const ckpt_paddle_model *m, const char *name);
int ckpt_paddle__new_entry(ckpt_paddle_model *m, const char *name, int pp, pd_entry **out);
/* Sharded saves (paddle_sharded.c): model_meta.json read; the parameters it names declared
 * first, in its order; those the model files left out rebuilt from their master weights. */
int ckpt_paddle__read_model_meta(ckpt_paddle_model *m, const ckpt_member *mb);
int ckpt_paddle__declare_from_meta(ckpt_paddle_model *m);
int ckpt_paddle__recover_from_masters(ckpt_paddle_model *m);
/* The optimizer files' entries, each put with its parameter's entry; then merged over the TP
 * ranks like their parameters, once those are (paddle_optim.c). */
int ckpt_paddle__read_optimizer(ckpt_paddle_model *m);
int ckpt_paddle__merge_optimizer(ckpt_paddle_model *m);
/* The sizes config.json (its text; NULL: none) gives, bounded and consistent; errors name
 * `where`. */
int ckpt_paddle__dims(const char *where, const char *json_text, pd_dims *d);
/* The model files the directory holds against the layout config.json and model_meta.json
 * give (once the ranks are open); the merged tensors against config.json's sizes and
 * PaddleNLP's pipeline cut (once they are merged) (paddle_check.c, paddle_check_tensors.c). */
int ckpt_paddle__check_files(ckpt_paddle_model *m);
int ckpt_paddle__check_tensors(const ckpt_paddle_model *m);
/* PaddleNLP's major version by config.json's paddlenlp_version: 3.x writes its version, 2.x
 * null; a config without the key (written by another tool) is taken as the current, 3. */
int ckpt_paddle__config_major(const ckpt_paddle_model *m);
/* `text` (a config.json as json.dumps(indent=2, sort_keys=True) writes it) with top-level `key`
 * set to value_json (NULL: removed), added in key order when absent; everything else as it
 * was (paddle_config.c). */
int ckpt_paddle__set_config_key(const char *text, const char *key, const char *value_json, ckpt_buf *out);
/* A mixture-of-experts family's Hugging Face config c (`where` names it) against what
 * PaddleNLP's model f computes: no sliding window, no RoPE scaling, an untied head, head_dim
 * hidden_size / num_attention_heads; errors name the key (paddle_hf.c). */
int ckpt_paddle__moe_hf_check(const char *where, const pd_family *f, const ckpt_family_config *c);
/* The PaddleNLP config.json of a mixture-of-experts family from the Hugging Face one the
 * family writes (hf_json; PaddleNLP's MixtralConfig takes transformers' keys): the weights'
 * dtype as "dtype", transformers' own keys left out (paddle_hf.c). */
int ckpt_paddle__moe_config(const char *hf_json, ckpt_dtype dtype, ckpt_buf *out);
/* The model's config.json for layout t (paddle_config.c). */
int ckpt_paddle__config_for(const ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_buf *out);
/* Whether the model can be written at TP tp, PP pp: ckpt_paddle_layout_check's rules on its
 * config.json (read once), and TP tp refused when it keeps the KV heads whole on every rank
 * and the model holds q, k and v fused in one tensor (qkv_proj, Transformer Engine's
 * layernorm_qkv), which is cut by KV group (paddle_check.c). */
int ckpt_paddle__check_target(const ckpt_paddle_model *m, int tp, int pp);
/* The class of the head's variable in a layout of n_pp stages ("llama_lm_head" or, in
 * PaddleNLP 3's pipeline, "llama_lm_head_pipe") (paddle_names.c). */
const char *ckpt_paddle__head_class(const ckpt_paddle_model *m, int n_pp);
/* The variable names one process of pipeline stage `stage` gives the entries sel[0..n), the
 * stage's tensors in state-dict order: vars[i] malloc'd, or NULL for a tensor PaddleNLP's LLaMA
 * does not have and the source names nothing. Two entries with one name are refused. On error
 * some vars[i] may be set; the caller frees them. */
int ckpt_paddle__stage_vars(const ckpt_paddle_model *m, const char *head, int stage, const size_t *sel, size_t n,
                            char **vars);
/* A tensor value, or the array of a (name, array) pair; NULL otherwise. */
const ckpt_value *ckpt_paddle__tensor_leaf(const ckpt_value *v, const char **pair_name);

#endif
