/* Megatron-LM legacy checkpoints (--ckpt-format torch) as one logical model, and plans that
 * write that model at another parallel layout.
 *
 * The logical model is every tensor at its full shape under its global name (layer indices
 * counted over the whole pipeline, virtual chunks included), built lazily from the rank
 * files of a checkpoint set through a parallel layout spec (formats/maps/megatron_gpt.json):
 * nothing is read until a plan is executed. */
#ifndef CKPT_MEGATRON_H
#define CKPT_MEGATRON_H

#include "parallel.h"
#include "plan.h"
#include "set.h"

CKPT_BEGIN_DECL

typedef struct ckpt_megatron ckpt_megatron;

/* What happens to each rank's optimizer state (`optimizer` in model_optim_rng.pt, a distributed
 * optimizer's distrib_optim.pt, torch_dist's optimizer keys). */
typedef enum ckpt_megatron_optimizer {
    CKPT_MEGATRON_OPTIM_KEEP = 0,   /* resharded with its parameters, the source's kind of
                                       optimizer; an error where it cannot be */
    CKPT_MEGATRON_OPTIM_DROP,       /* model only: no optimizer, no scheduler (load with --finetune
                                       or --no-load-optim) */
    CKPT_MEGATRON_OPTIM_PLAIN,      /* resharded, as the non-distributed optimizer saves it */
    CKPT_MEGATRON_OPTIM_DISTRIBUTED /* resharded, as the distributed optimizer
                                       (--use-distributed-optimizer) saves it */
} ckpt_megatron_optimizer;

/* How a torch_dist target holds a distributed optimizer's state: megatron-core's
 * metadata['distrib_optim_sharding_type']. */
typedef enum ckpt_megatron_optim_sharding {
    CKPT_MEGATRON_SHARDING_AUTO = 0,         /* the source's when it is torch_dist with a distributed
                                                optimizer, else dp_reshardable */
    CKPT_MEGATRON_SHARDING_DP_RESHARDABLE,   /* Megatron's default: each grad buffer bucket's flat
                                                state, sharded over DP */
    CKPT_MEGATRON_SHARDING_FULLY_RESHARDABLE /* per parameter, sharded like the model */
} ckpt_megatron_optim_sharding;

/* What happens to `_extra_state` entries (Transformer Engine FP8 metadata, None for local
 * layers). */
typedef enum ckpt_megatron_extra_state {
    CKPT_MEGATRON_EXTRA_COPY = 0, /* each target rank gets the value the first source rank of its
                                     stage holds for that key (what Megatron's own converters do) */
    CKPT_MEGATRON_EXTRA_EMPTY,    /* an empty uint8 tensor (Transformer Engine >= 2.0's "no state") */
    CKPT_MEGATRON_EXTRA_DROP      /* no _extra_state keys */
} ckpt_megatron_extra_state;

typedef struct ckpt_megatron_options {
    unsigned version;
    const ckpt_map *spec_map;      /* its "parallel" section; NULL: the built-in megatron_gpt */
    int64_t true_vocab_size;       /* rows of the vocabulary that are not padding; 0: args.vocab_size
                                      when the checkpoint has it */
    /* version 2 */
    /* Asked for each tensor of the rank files (torch format; its global name, or the name in
     * its rank file when no layout entry matches it) before it joins the model: 1 leaves it
     * out, 0 keeps it, < 0 is an error. NULL keeps every one (ckpt_plan_leave_out fits). A
     * parameter left out leaves the optimizer state, which follows the parameters in order,
     * unusable: plans then need CKPT_MEGATRON_OPTIM_DROP. */
    int (*leave_out)(void *payload, const char *name);
    void *leave_out_payload;
} ckpt_megatron_options;

#define CKPT_MEGATRON_OPTIONS_VERSION 2
#define CKPT_MEGATRON_OPTIONS_INIT { CKPT_MEGATRON_OPTIONS_VERSION, NULL, 0, NULL, NULL }

/* The logical model of a Megatron checkpoint set. Checks that every rank file is there and
 * that the shards fit together; errors name the file and the tensor. The set must outlive
 * the model; nodes are built in g, which must outlive the plans that use them. */
CKPT_EXTERN(int) ckpt_megatron_open(ckpt_megatron **out, ckpt_set *set, ckpt_graph *g,
                                    const ckpt_megatron_options *opts);
CKPT_EXTERN(void) ckpt_megatron_close(ckpt_megatron *m);

/* A logical model given tensor by tensor (from another framework's checkpoint): `args` is
 * an argparse.Namespace value tree (see ckpt_megatron_args_new) that must outlive the model.
 * The written rank files hold args, checkpoint_version 3.0, iteration, the model and
 * num_floating_point_operations_so_far, as Megatron's own converters write them. */
CKPT_EXTERN(int) ckpt_megatron_new(ckpt_megatron **out, ckpt_graph *g, const ckpt_value *args, int64_t iteration,
                                   const ckpt_megatron_options *opts);
/* Add a full tensor under its global name (any order: the model is sorted into Megatron's
 * module order when it is written). */
CKPT_EXTERN(int) ckpt_megatron_add_tensor(ckpt_megatron *m, const char *name, const ckpt_node *full);
/* Add the `_extra_state` keys the modules of every layer have: Transformer Engine layers
 * (non-zero) an empty uint8 tensor each (no FP8 state), local layers None, as Megatron's
 * own state dicts hold them, so that a strict load finds every key. Call after the tensors. */
CKPT_EXTERN(int) ckpt_megatron_add_extra_states(ckpt_megatron *m, int transformer_engine);

/* An argparse.Namespace for Megatron's args, built in `a`, with the attributes Megatron reads
 * when it resumes or fine-tunes from a checkpoint (sizes, head counts, vocabulary, position
 * embedding, norm, SwiGLU, biases, dtype, parallel sizes of 1): set them with
 * ckpt_megatron_args_set_* before ckpt_megatron_new. */
CKPT_EXTERN(int) ckpt_megatron_args_new(ckpt_arena *a, ckpt_value **out);
CKPT_EXTERN(int) ckpt_megatron_args_set_int(ckpt_arena *a, ckpt_value *args, const char *name, int64_t v);
CKPT_EXTERN(int) ckpt_megatron_args_set_float(ckpt_arena *a, ckpt_value *args, const char *name, double v);
CKPT_EXTERN(int) ckpt_megatron_args_set_bool(ckpt_arena *a, ckpt_value *args, const char *name, int v);
CKPT_EXTERN(int) ckpt_megatron_args_set_str(ckpt_arena *a, ckpt_value *args, const char *name, const char *v);
/* None */
CKPT_EXTERN(int) ckpt_megatron_args_set_none(ckpt_arena *a, ckpt_value *args, const char *name);
/* A tuple of two ints (window_size) */
CKPT_EXTERN(int) ckpt_megatron_args_set_int_pair(ckpt_arena *a, ckpt_value *args, const char *name, int64_t x,
                                                 int64_t y);
/* A list of n ints */
CKPT_EXTERN(int) ckpt_megatron_args_set_int_list(ckpt_arena *a, ckpt_value *args, const char *name, const int64_t *v,
                                                 size_t n);
/* A torch dtype (params_dtype): torch.bfloat16, torch.float32, ... */
CKPT_EXTERN(int) ckpt_megatron_args_set_dtype(ckpt_arena *a, ckpt_value *args, const char *name, ckpt_dtype dtype);
/* An attribute of any Megatron args (a checkpoint's or one built here); NULL when absent. */
CKPT_EXTERN(const ckpt_value *) ckpt_megatron_arg(const ckpt_value *args, const char *name);
CKPT_EXTERN(const ckpt_value *) ckpt_megatron_args(const ckpt_megatron *m);

typedef struct ckpt_megatron_info {
    int tp, pp, vpp, ep;         /* the layout of the files: torch_dist stores global shapes (1) */
    int run_tp, run_pp, run_vpp; /* the layout the run trained with (torch_dist: its args), the
                                    default target of a reshard */
    int64_t num_layers;
    int64_t padded_vocab_size;   /* rows of the vocabulary tables as stored */
    int64_t true_vocab_size;     /* 0 when unknown */
    int64_t make_vocab_size_divisible_by;
    int has_optimizer;           /* the rank files hold optimizer state */
    int distributed_optimizer;   /* a distrib_optim.pt beside the rank files */
    double checkpoint_version;
    int64_t iteration;
} ckpt_megatron_info;

CKPT_EXTERN(const ckpt_megatron_info *) ckpt_megatron_info_of(const ckpt_megatron *m);

/* The logical tensors, in Megatron's order (embeddings, layers in global order, final norm,
 * output layer). Non-tensor entries (local layers' `_extra_state` = None) are not listed. */
CKPT_EXTERN(size_t) ckpt_megatron_tensor_count(const ckpt_megatron *m);
CKPT_EXTERN(const char *) ckpt_megatron_tensor_at(const ckpt_megatron *m, size_t i, const ckpt_node **full,
                                                  ckpt_tensor_layout *layout);

/* The parts of logical tensor i that the rank files hold, as they hold them: TP rank r's in
 * [r] (info.tp of them; replicated tensors: each rank's own copy). Borrowed, valid until
 * ckpt_megatron_close. NULL for a tensor no rank file holds (a model given tensor by tensor,
 * ckpt_megatron_new; the output layer copy a plan adds for tied embeddings). */
CKPT_EXTERN(const ckpt_node *const *) ckpt_megatron_tensor_shards(const ckpt_megatron *m, size_t i);

/* The fp32 optimizer state of logical tensor i at its full shape, as lazy nodes: out[0] the
 * master copy (an fp32 model's weight itself), out[1] exp_avg, out[2] exp_avg_sq; NULLs for a
 * tensor that is not a parameter. *copy_of (when not NULL) is NULL, or for the last stage's
 * output_layer.weight of tied embeddings the name of the embedding it copies: Megatron keeps
 * the two (and their state) equal, and a layout with one stage has the embedding only. Read
 * from whichever form the checkpoint holds on the first call; CKPT_EINVALID (class LAYOUT)
 * for a checkpoint without optimizer state, CKPT_EUNSUPPORTED for a form not read yet. */
CKPT_EXTERN(int) ckpt_megatron_optimizer_state(ckpt_megatron *m, size_t i, const ckpt_node **out,
                                                const char **copy_of);

/* Where a parameter's optimizer state lies in the files of one rank. */
typedef struct ckpt_megatron_optim_range {
    const char *name;        /* the parameter's global name; borrowed from the model */
    int tp, pp, ep;          /* the rank (expert parameters at their EP rank, the others at EP 0) */
    int distributed;         /* distrib_optim.pt (the fields below), else the plain state dict */
    /* the distributed optimizer's: megatron-core's grad buffer layout of the rank */
    int chunk;               /* model chunk (virtual pipeline stage) */
    size_t gbuf;             /* the buffer's index in distrib_optim.pt (per dtype pair) */
    int expert;              /* an expert-parallel buffer */
    ckpt_dtype param_dtype, grad_dtype;
    size_t bucket;           /* the buffer's bucket holding it */
    int64_t start, end;      /* elements of the buffer, padded offsets */
    int64_t flat;            /* its first element in the saved flat param/exp_avg/exp_avg_sq */
    /* the non-distributed optimizer's: its key in `state` and its param group */
    int64_t index;
    size_t group;
} ckpt_megatron_optim_range;

/* Every parameter's place in the optimizer files, rank by rank (TP fastest, then PP, then EP; a
 * torch_dist dp_reshardable checkpoint: the ranks of the layout its args name), each rank's
 * parameters in named_parameters() order (the distributed optimizer's), or state-dict order.
 * *out is freed with free(). 0 with *n 0 for a checkpoint without optimizer state;
 * CKPT_EUNSUPPORTED for torch_dist's per-parameter forms (nothing to place), and the
 * layout's errors for files megatron-core could not have written. */
CKPT_EXTERN(int) ckpt_megatron_optimizer_ranges(const ckpt_megatron *m, ckpt_megatron_optim_range **out, size_t *n);

/* Megatron's padded vocabulary size for a true vocabulary size: rounded up to a multiple of
 * make_vocab_size_divisible_by * tp. */
CKPT_EXTERN(int64_t) ckpt_megatron_padded_vocab(int64_t true_vocab, int64_t divisible_by, int tp);

typedef struct ckpt_megatron_target {
    unsigned version;
    int tp, pp, vpp;                   /* vpp 1: no virtual pipeline */
    int64_t padded_vocab_size;         /* 0: Megatron's rule from make_vocab_size_divisible_by x tp */
    ckpt_megatron_optimizer optimizer;
    ckpt_megatron_extra_state extra_state;
    /* version 2 */
    int dp;                            /* data-parallel size the distributed optimizer's buffers are
                                          laid out for (bucket padding, dp_reshardable pieces);
                                          0: the source's */
    ckpt_megatron_optim_sharding sharding;
    int64_t ddp_bucket_size;           /* the grad buffers' buckets the target run uses, which
                                          decide where a distributed optimizer's state lies:
                                          N elements (--overlap-grad-reduce --ddp-bucket-size N),
                                          CKPT_MEGATRON_NO_BUCKETS (no --overlap-grad-reduce),
                                          0: the source's; args follow */
    int dist_opt_instances;            /* --num-distributed-optimizer-instances of the target run:
                                          the distributed optimizer's buffers are laid out for
                                          dp / this; 0: the source's; args follow */
    /* version 3 */
    int ep;                            /* expert-parallel size (a mixture of experts): EP rank r
                                          holds experts r * E/ep .. (r + 1) * E/ep - 1 as its local
                                          0 ..; 0: the source's; args follow */
    int etp;                           /* expert tensor-parallel size: 0 or tp (experts cut like the
                                          dense layers); another is refused */
    int moe_grouped_gemm;              /* 1: the experts as the local spec's GroupedMLP
                                          (--moe-grouped-gemm) holds them, per layer
                                          experts.weight1 [hidden, local experts x fc1 rows / TP]
                                          and weight2 [local experts x fc2 columns / TP, hidden],
                                          each expert's weight transposed (model only); -1:
                                          SequentialMLP's local_experts.<i>; 0: as the source */
    /* version 4: megatron-core's uneven pipeline split, as Megatron's arguments of these names
       give it; all 0 at the source's PP and VPP: the source's split, else an even one */
    int64_t first_stage_layers;        /* --decoder-first-pipeline-num-layers (0: not set) */
    int64_t last_stage_layers;         /* --decoder-last-pipeline-num-layers (0: not set) */
    int account_for_embedding;         /* --account-for-embedding-in-pipeline-split */
    int account_for_loss;              /* --account-for-loss-in-pipeline-split */
} ckpt_megatron_target;

#define CKPT_MEGATRON_NO_BUCKETS (-1)

#define CKPT_MEGATRON_TARGET_VERSION 4
#define CKPT_MEGATRON_TARGET_INIT { CKPT_MEGATRON_TARGET_VERSION, 1, 1, 1, 0, CKPT_MEGATRON_OPTIM_KEEP, \
                                    CKPT_MEGATRON_EXTRA_COPY, 0, CKPT_MEGATRON_SHARDING_AUTO, 0, 0, 0, 0, 0, \
                                    0, 0, 0, 0 }

/* Whether a model with these args (an argparse.Namespace: a checkpoint's, or one built with
 * ckpt_megatron_args_new) can be laid out at target t by megatron-core's rules: TP divides
 * num_attention_heads; num_query_groups (with group_query_attention) is a multiple or a
 * divisor of TP; TP divides ffn_hidden_size (moe_ffn_hidden_size with experts) and
 * t->padded_vocab_size when given; PP divides num_layers and VPP the layers of a stage, over
 * at least 2 stages. A size args lack is not checked. 0, or CKPT_EINVALID with class
 * CKPT_ERRCLASS_LAYOUT and a message naming the size and the rule that fails.
 * ckpt_megatron_plan and ckpt_megatron_plan_dist check their target with it. */
CKPT_EXTERN(int) ckpt_megatron_check_layout(const ckpt_value *args, const ckpt_megatron_target *t);

/* Add to `plan` the checkpoint at the target layout: the tracker, and per rank
 * iter_NNNNNNN/mp_rank_TT[_PPP]/model_optim_rng.pt with the source's top-level entries,
 * `args` rewritten (parallel sizes, padded_vocab_size), the model (or model0.. per virtual
 * chunk) resharded, and the optimizer state resharded with its parameters or dropped. Vocab
 * tables are cut to the new padded size (only padding rows may go) or padded with zero rows.
 * The plan's nodes are built in the model's graph. */
CKPT_EXTERN(int) ckpt_megatron_plan(ckpt_megatron *m, const ckpt_megatron_target *t, ckpt_plan *plan);
/* The same model as a --ckpt-format torch_dist checkpoint (megatron-core dist_checkpointing),
 * chunked for the target layout: the tracker, iter_NNNNNNN/.metadata, a data file per rank,
 * common.pt (args rewritten) and metadata.json. The optimizer state of a torch_dist source
 * is written in its form, or the distributed optimizer's t->sharding names (also for a
 * non-distributed source); that of a legacy source is refused unless dropped. rng states are
 * not written; vpp changes args and the distributed optimizer's buffer layout. */
CKPT_EXTERN(int) ckpt_megatron_plan_dist(ckpt_megatron *m, const ckpt_megatron_target *t, ckpt_plan *plan);

/* The TP and PP sizes of a Galvatron strategy file, {"pp_size": M, "tp_size_list": [N, ...]},
 * whose list holds one TP size for every layer: the same one, as a Megatron checkpoint has
 * (per-layer sizes are CKPT_EUNSUPPORTED, class CKPT_ERRCLASS_LAYOUT). A file that cannot be
 * read is class CKPT_ERRCLASS_OS, one of another shape CKPT_EFORMAT. The sizes are not
 * checked against a model: ckpt_megatron_check_layout does that. */
CKPT_EXTERN(int) ckpt_megatron_strategy_read(int *tp, int *pp, const char *path);

CKPT_END_DECL

#endif
