/* Megatron-LM legacy checkpoints, inside: the logical model shared by the files that read it
 * (megatron_model.c), write it at a new layout (megatron_plan.c) and reshard the optimizer
 * (megatron_optim_plain.c, megatron_optim_view.c). */
#ifndef CKPT_FORMATS_MEGATRON_PRIVATE_H
#define CKPT_FORMATS_MEGATRON_PRIVATE_H

#include <ckpt/megatron.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/zip.h>

/* A parameter's fp32 optimizer state as the distributed optimizer keeps it: the master copy
 * and Adam's two moments. */
typedef enum mg_moment { MG_MASTER = 0, MG_EXP_AVG, MG_EXP_AVG_SQ, MG_N_MOMENTS } mg_moment;

/* One key of the model state dict, at its global name. */
typedef struct mg_entry {
    char *name;                /* global name (layer renumbered) */
    int src_pp, src_vp;        /* the source chunk it comes from */
    char *local;               /* the key in its source file */
    ckpt_tensor_layout layout; /* layer: global index */
    int ep;                    /* expert tensors: the source EP rank they come from; -1 otherwise */
    int64_t expert;            /* an expert's tensors: its global index (its name holds it); -1
                                  otherwise (megatron_experts.c) */
    int param;                 /* a model parameter (the optimizer has state for it) */
    const ckpt_node *full;     /* tensors: the merged full tensor */
    const ckpt_node **shards;  /* tensors read from rank files: each TP rank's part, as stored */
    const ckpt_value *value;   /* non-tensors: the value of the first TP rank of its stage */
    const ckpt_ckpt *src;      /* the file `value` comes from */
    /* parameters of a set whose optimizer state is read per parameter (a distributed
     * optimizer's, or one converted to it): that state at the parameter's full shape, fp32,
     * built lazily like `full`; NULL otherwise (ckpt_megatron.moments says which) */
    const ckpt_node *moment[MG_N_MOMENTS];
} mg_entry;

/* A source file, per (tp, pp, ep), and its model chunks. */
typedef struct mg_rank {
    const ckpt_ckpt *ck;
    const ckpt_value *root;
    int stand_in; /* an expert TP below the TP leaves (tp, pp, ep) without a file: this is the
                     file of its dense TP rank (mg_dense_rank) */
} mg_rank;

struct ckpt_megatron {
    ckpt_set *set;
    ckpt_graph *g;
    ckpt_map *own_map;               /* the built-in spec map when the caller gave none */
    const ckpt_parallel_spec *spec;
    ckpt_map_params *params;         /* args' integers and booleans, for the spec's "when" */
    ckpt_megatron_info info;
    int etp;                         /* the legacy set's expert TP size (its TP unless args say) */
    mg_rank *ranks;                  /* [ep][pp][tp] */
    mg_entry *entries;
    size_t n_entries, cap_entries;
    const ckpt_value *args;          /* args of rank (0, 0, 0): the Namespace object */
    int release;                     /* write release/ rather than iter_NNNNNNN/ */
    ckpt_arena *arena;               /* the template root of a model built tensor by tensor */
    const char *dist;                /* a torch_dist checkpoint (its path): built from its global
                                        tensors, NULL otherwise */
    int (*leave_out)(void *payload, const char *name); /* ckpt_megatron_options' */
    void *leave_out_payload;
    size_t left_out_params;          /* parameters it left out */
    int moments;                     /* every parameter entry's moment[] is set */
    /* torch_dist sources with optimizer state: its form, and the checkpoint whose common.pt
       holds its step and param groups (megatron_dist_optim.c) */
    int dist_form;                   /* mg_dist_form */
    int dist_nd;                     /* FULLY read from megatron-core 0.13's fully_sharded_model_space */
    int grouped;                     /* a legacy set of the local spec's GroupedMLP (experts.weight1/2),
                                        read as SequentialMLP's experts (megatron_experts_grouped.c) */
    int te_grouped;                  /* a legacy set of TEGroupedMLP (linear_fc<k>.weight<i>), read as
                                        SequentialMLP's experts (megatron_experts_te.c) */
    int te_out;                      /* the plan writes TEGroupedMLP: the entries are in its order
                                        and named by ckpt_megatron__te_local_name */
    int dist_chained;                /* a MoE model's ChainedOptimizer [dense, expert]: its step and
                                        param groups (dist_optim_sd, common.pt) per inner optimizer */
    const ckpt_ckpt *dist_ck;
    const ckpt_value *dist_root;     /* its root with the common state (ckpt_megatron__dist_common) */
    const ckpt_value *dist_optim_sd; /* dp_reshardable: the DistributedOptimizer.state_dict()
                                        that model-parallel rank 0 saved ({'param_groups'}) */
    /* the grad scaler's state (fp16), its tensors as leaves 0.. of scaler_nodes
       (megatron_dist_scaler.c); scaler_read: looked for */
    const ckpt_value *scaler;
    const ckpt_node **scaler_nodes;
    size_t n_scaler_nodes;
    int scaler_read;
    /* a torch_dist source whose optimizer state could not be read at open: the model is read
       without it (a model-only target needs none), and what needs it fails with this error */
    int dist_optim_rc, dist_optim_class;
    const char *dist_optim_why;
    /* a torch_dist source's first `_extra_state` object holding state (Transformer Engine FP8
       metadata), which is not read: the model's extra states are made again empty, so a target
       that copies them is refused (ckpt_megatron__dist_extra_refused); NULL: none */
    const char *dist_fp8_extra;
};

static inline mg_rank *mg_rank_at(const ckpt_megatron *m, int tp, int pp, int ep)
{
    return &m->ranks[((size_t)ep * (size_t)m->info.pp + (size_t)pp) * (size_t)m->info.tp + (size_t)tp];
}

/* A legacy set at expert TP (m->etp) dividing the TP (megatron-core 0.16.1: the files of the
 * first ETP x EP ranks of each stage, rank r at dense TP rank r % TP and EP rank r / ETP):
 * its expert TP size; the file holding expert TP rank etp of EP rank ep; the file of dense TP rank tp's model
 * optimizer state (its dense data-parallel rank 0); the dense data-parallel rank of the file
 * of (tp, ep). With ETP = TP: (etp, ep), (tp, 0) and ep. */
static inline int mg_etp(const ckpt_megatron *m)
{
    return m->etp > 0 ? m->etp : m->info.tp;
}

static inline int mg_expert_tp(const ckpt_megatron *m, int etp, int ep)
{
    return (etp + mg_etp(m) * ep) % m->info.tp;
}

static inline int mg_dense_ep(const ckpt_megatron *m, int tp)
{
    return mg_etp(m) < m->info.tp ? tp / mg_etp(m) : 0;
}

static inline int mg_dense_dp(const ckpt_megatron *m, int tp, int ep)
{
    return (mg_etp(m) * ep + tp % mg_etp(m)) / m->info.tp;
}

/* The TP parts entry `expert` (an expert's tensor, or not) is cut in when read. */
static inline int mg_read_ways(const ckpt_megatron *m, int expert)
{
    return expert ? mg_etp(m) : m->info.tp;
}

/* Experts (megatron_experts.c). The expert index in a SequentialMLP or TEGroupedMLP name (1;
 * 0: none); `name` with it replaced; the experts of each EP rank at EP size ep_size (0 when
 * args give no num_experts); whether entry e goes to EP rank ep of ep_size; the key of e at
 * such a rank (`name`: e's key with its layer already local) with its local expert index. */
int ckpt_megatron__expert_index(const char *name, int64_t *index);
int ckpt_megatron__rename_expert(const char *name, int64_t index, ckpt_buf *out);
int64_t ckpt_megatron__experts_at(const ckpt_megatron *m, int ep_size);
int ckpt_megatron__on_ep(const ckpt_megatron *m, const mg_entry *e, int ep_size, int ep);
int ckpt_megatron__local_expert_name(const ckpt_megatron *m, const mg_entry *e, int ep_size, const char *name,
                                     ckpt_buf *out);
/* A legacy set's experts: num_experts / EP of each MoE layer in every EP rank file, each with
 * the same modules; then each layer's experts of every EP rank into Megatron's order at their
 * layer (by global index), the others left in their place. */
int ckpt_megatron__check_experts(const ckpt_megatron *m);
/* An expert entry's place when experts are ordered module by module (SequentialMLP's order,
 * TEGroupedMLP's): its layer, its module's name, its index; and qsort's comparator of them. */
typedef struct mg_module_key {
    int64_t layer;
    char *module;
    size_t index;
} mg_module_key;
int ckpt_megatron__by_module(const void *x, const void *y);
/* An expert entry's module as module_of writes it into out: 1, or 0 for an entry that is in
 * no module (it stands alone), or a negative error code. */
typedef int (*ckpt_megatron_module_fn)(const mg_entry *e, void *arg, ckpt_buf *out);
/* For each entry i, first[i]: the index of the first entry of its layer (expert layer) whose
 * module is the same; i for an entry in no module or outside the layers. */
int ckpt_megatron__first_of_module(const ckpt_megatron *m, ckpt_megatron_module_fn module_of, void *arg,
                                   size_t *first);
/* The layer an expert entry orders by: its decoder layer, or num_layers + i for multi-token
 * prediction layer i (mtp.layers.<i>., after the decoder's); -1 for no layer. */
int64_t ckpt_megatron__expert_layer(const ckpt_megatron *m, const mg_entry *e);
int ckpt_megatron__order_experts(ckpt_megatron *m);
/* Reading a legacy set: local expert *expert of EP rank ep (`key` in its file) to its global
 * index, into *expert and `name`; EP rank ep's chunk vp dict d at TP rank tp holds the
 * tensors that are not experts' of the file its dense TP rank's are read from (EP rank 0's
 * at an expert TP equal to the TP), at the same shapes (below the TP: the same values), and
 * no others. */
int ckpt_megatron__global_expert(const ckpt_megatron *m, int pp, int ep, const char *key, int64_t *expert,
                                 ckpt_buf *name);
int ckpt_megatron__same_dense(const ckpt_megatron *m, int tp, int pp, int vp, int ep, const ckpt_value *d);
/* A legacy set's expert TP size (args') into m->etp, and each rank without a file of its own
 * (mg_rank.stand_in) given its dense TP rank's file; an error for a size megatron-core's
 * legacy save cannot hold and for a file missing at that size. */
int ckpt_megatron__stand_ins(ckpt_megatron *m);
/* At another EP (megatron_experts_target.c): args d (a copy) for target t at ep_size, for the
 * file of rank (tp, pp, ep) (rerank: d is another rank's); whether the optimizer state goes
 * there (0, or an error saying why not); model_optim_rng.pt's `optimizer` value v of the
 * source there. */
int ckpt_megatron__ep_args(ckpt_arena *a, ckpt_value *d, const ckpt_megatron_target *t, int grouped, int ep_size,
                           int etp, int pp, int ep, int rerank);
/* The target's expert TP size (t->etp, else its TP); part tp (experts: etp) of `full`
 * (entry e's tensor or an optimizer moment of it); whether a target file (tp, ep) exists, its
 * writer's expert TP rank and dense data-parallel (x CP) rank (megatron-core 0.16.1
 * parallel_state: ranks in order tp-cp-ep-dp-pp, the expert ones etp-ep-edp-pp, a legacy file
 * written by expert data-parallel rank 0). */
int ckpt_megatron__etp(const ckpt_megatron_target *t);
int ckpt_megatron__part(const ckpt_megatron *m, const ckpt_megatron_target *t, int64_t padded_vocab,
                        const mg_entry *e, const ckpt_node *full, int tp, int etp, const ckpt_node **out);
int ckpt_megatron__saving_rank(const ckpt_megatron_target *t, int tp, int ep, int *etp, int *dense_rank);
int ckpt_megatron__ep_optimizer(const ckpt_megatron *m, const ckpt_megatron_target *t);
const ckpt_value *ckpt_megatron__ep_optimizer_value(const ckpt_megatron *m, int ep_size, const ckpt_value *v);
/* The param groups of inner optimizer i of an optimizer state `opt` (a chained optimizer's
 * list, i < its length; else opt itself, i 0): legacy {'optimizer': {'param_groups'}} (the
 * distributed optimizer's), torch's {state, param_groups}, torch_dist's {'param_groups'};
 * NULL when it has none. The param groups an expert optimizer chained at EP > 1 to a dense one
 * of `dense` groups has: its one group, the dense group of the experts' weights (weight decay,
 * no overrides; exactly one), is_expert_parallel True, a copy in arena a. */
const ckpt_value *ckpt_megatron__param_groups(const ckpt_value *opt, size_t i);
int ckpt_megatron__expert_groups(ckpt_arena *a, const ckpt_value *dense, ckpt_value **out);
/* EP 1 -> N: model_optim_rng.pt's `optimizer` opt (the dense optimizer's, a copy in arena a)
 * as the chained optimizer's [opt, {'optimizer': {'param_groups': [its experts' group]}}]. */
int ckpt_megatron__ep_chain(const ckpt_megatron *m, ckpt_arena *a, ckpt_value *opt, ckpt_value **out);
/* The local spec's GroupedMLP (megatron_experts_grouped.c): whether target t can have it (0,
 * or an error saying why not); for expert entry i of a target EP rank of ep_size, 1 with
 * *which "weight1" or "weight2" and *out its layer's grouped tensor at the rank (made from the
 * parts part() gives of its local experts), for the entry of its first local expert's
 * weight; 0 for the entries it takes in (the other experts, their _extra_state). */
int ckpt_megatron__grouped_check(const ckpt_megatron *m, const ckpt_megatron_target *t);
/* Whether target t holds GroupedMLP's weights (asked for, or the source's kept). */
int ckpt_megatron__grouped_out(const ckpt_megatron *m, const ckpt_megatron_target *t);
/* Reading: whether `key` is a GroupedMLP weight; its experts as entries of their global name
 * (SequentialMLP's), their TP parts views of the rank files' weight (chunk dicts[tp] of stage
 * pp, virtual chunk vp, EP rank ep; layer offset as add_key's). */
int ckpt_megatron__grouped_key(const char *key);
int ckpt_megatron__grouped_add(ckpt_megatron *m, const ckpt_value *const *dicts, int pp, int vp, int ep,
                               const char *key, int64_t offset);
int ckpt_megatron__grouped_part(const ckpt_megatron *m, size_t i, int ep_size,
                                int (*part)(void *ctx, size_t i, const ckpt_node **out), void *ctx,
                                const char **which, const ckpt_node **out);
/* Transformer Engine's TEGroupedMLP (megatron_experts_te.c). Reading: whether `key` is one of
 * its keys (1 weight<i> or bias<i>, 2 _extra_state; 0 no); the SequentialMLP name it is read
 * under (`local`: the local expert of an _extra_state, which has none); args give experts,
 * and a weight<i>'s module in dict d of file r holds weight0 .. weight<num_experts / EP - 1>,
 * all of one shape.
 * Writing: whether target t has it (grouped GEMM with Transformer Engine args); for the plan,
 * FP8 _extra_state refused where it would be split or merged, and with t->te_out the entries
 * into its order; the key of a SequentialMLP expert's tensor `name` (layer already local) at
 * local expert index `local` in it. */
int ckpt_megatron__te_key(const char *key);
int ckpt_megatron__te_read_name(const char *key, int64_t local, ckpt_buf *out);
int ckpt_megatron__te_check(const ckpt_megatron *m, const ckpt_value *d, const mg_rank *r, const char *key);
int ckpt_megatron__te_out(const ckpt_megatron *m, const ckpt_megatron_target *t);
int ckpt_megatron__te_prepare(ckpt_megatron *m, const ckpt_megatron_target *t);
int ckpt_megatron__te_local_name(const char *name, int64_t local, ckpt_buf *out);

/* Shared by the files that build models (megatron_model.c, megatron_build.c). */
int ckpt_megatron__push_entry(ckpt_megatron *m, mg_entry **out);
int ckpt_megatron__load_spec(ckpt_megatron *m, const ckpt_megatron_options *opts);
int ckpt_megatron__load_params(ckpt_megatron *m);
/* A key of TE/local modules' `_extra_state` (not a parameter). */
int ckpt_megatron__is_extra_state(const char *key);
/* A model built tensor by tensor (megatron_build.c): the template root from args, and one
 * full tensor under its global name. */
int ckpt_megatron__init_built(ckpt_megatron *m, const ckpt_value *args, int64_t iteration,
                              const ckpt_megatron_options *opts);
int ckpt_megatron__add_full(ckpt_megatron *m, const char *name, const ckpt_node *full);
/* The target's padded vocabulary, and `args` rewritten for the target layout, its tensors
 * (none, in practice) added to plan file `file` (megatron_plan.c, megatron_args_target.c). */
int64_t ckpt_megatron__target_vocab(const ckpt_megatron *m, const ckpt_megatron_target *t);
/* The target's sizes by ckpt_megatron_check_layout's rules, with the layers the model holds
 * (megatron_layout_check.c). */
int ckpt_megatron__check_sizes(const ckpt_megatron *m, const ckpt_megatron_target *t);
/* The target's EP: t's, else the source's. */
int ckpt_megatron__target_ep(const ckpt_megatron *m, const ckpt_megatron_target *t);
int ckpt_megatron__target_args(ckpt_megatron *m, const ckpt_megatron_target *t, ckpt_plan *plan, size_t file,
                               ckpt_value **out);
/* `args` (the template rank's) rewritten for the target rank `at` describes, a copy in plan
 * file `file` (megatron_args_target.c). */
typedef struct mg_args_at {
    const mg_rank *tmpl;  /* the source file the target rank is built from */
    int64_t padded_vocab; /* the target's */
    int ep_size;          /* the target's EP */
    int etp, pp, ep;      /* the rank's expert TP rank, stage and EP rank */
} mg_args_at;
int ckpt_megatron__rewrite_args(ckpt_megatron *m, const ckpt_megatron_target *t, ckpt_plan *plan, size_t file,
                                const mg_args_at *at, const ckpt_value *args, ckpt_value **out);
/* torch_dist (megatron-core dist_checkpointing) stacks the decoder's layers under one key
 * each, "decoder.layers.<module key>", and names the local spec's norms as Transformer
 * Engine's fused ones (TransformerLayer's sharded_state_dict_keys_map). The module key of
 * the other side (to_dist: local -> torch_dist), or `key` itself (megatron_dist.c). */
#define CKPT_MEGATRON_LAYERS "decoder.layers."
#define CKPT_MEGATRON_DIST_EXPERTS "mlp.experts.experts." /* SequentialMLP's item in a layer */
const char *ckpt_megatron__norm_key(const char *key, int to_dist);
/* Part index[0..n) of stacked tensor t (torch_dist stacks layers, and a MoE layer's experts,
 * on its first axes) as a view named `name`, kept in the model's arena as the graph's leaves
 * must outlive it; layer l as a node. */
int ckpt_megatron__stacked_view(ckpt_megatron *m, const ckpt_tensor *t, int n, const int64_t *index, const char *name,
                                const ckpt_tensor **out);
int ckpt_megatron__layer_of(ckpt_megatron *m, const ckpt_tensor *t, int64_t l, const char *name,
                            const ckpt_node **out);
/* Multi-token prediction layers (megatron-core's mtp.layers.<i>., on the last pipeline stage):
 * name's layer and the key after it (-1: not in one); how many the model's entries hold. */
int64_t ckpt_megatron__mtp_layer(const char *name, const char **rest);
#define CKPT_MEGATRON_MAX_MTP 64 /* more MTP layers than any model has (DeepSeek-V3: 1) */
int64_t ckpt_megatron__mtp_layers(const ckpt_megatron *m);
/* An `_extra_state` entry of a built model (None, or TE's empty tensor), of EP rank ep (-1: all). */
int ckpt_megatron__add_extra(ckpt_megatron *m, const char *name, int te, int ep);
/* A tensor of a torch_dist model under its legacy name (megatron_dist.c): kept, or left out
 * where the options say so. */
int ckpt_megatron__dist_add_named(ckpt_megatron *m, const char *name, const ckpt_node *full);
/* Mixture-of-experts torch_dist models (megatron_dist_moe.c): whether `name` is an expert item
 * ([num_layers, num_experts, ...]); the EP size from args (m->info.ep, a template per EP rank);
 * each expert of each layer of item t (module key `rest`; [num_experts, ...] of the one layer
 * whose legacy key prefix is `owner`, or stacked when owner is NULL) as an entry of its EP rank
 * under its legacy local name; the experts of an EP rank; for an
 * expert entry its item key into `key` and its global index (1; 0: not an expert). */
int ckpt_megatron__dist_is_expert(const char *name);
int ckpt_megatron__dist_moe_setup(ckpt_megatron *m);
int ckpt_megatron__dist_add_experts(ckpt_megatron *m, const ckpt_tensor *t, const char *owner, const char *rest);
int64_t ckpt_megatron__experts_per_rank(const ckpt_megatron *m);
int ckpt_megatron__dist_expert_key(const ckpt_megatron *m, const mg_entry *e, ckpt_buf *key, int64_t *global);
/* Whether a chained optimizer's items carry "chained_<i>." (megatron-core 0.16.1 optimizer.py
 * ChainedOptimizer.sharded_state_dict): always in the dp_reshardable form, in the others
 * unless the save's content_metadata has chained_optim_avoid_prefix True. */
int ckpt_megatron__dist_chained_prefix(const ckpt_value *root, int form);
/* The model of a torch_dist checkpoint, the one member of `set` (megatron_dist.c). */
int ckpt_megatron__open_dist(ckpt_megatron *m, ckpt_set *set, const ckpt_megatron_options *opts);
/* ShardedObject `key` ("<name>/shard_0_1") of a torch_dist checkpoint whose root is `root`,
 * unpickled into arena a; *out NULL when absent. Objects holding tensors are refused; `file`
 * names the checkpoint in messages (megatron_dist_object.c). */
int ckpt_megatron__saved_object(const char *file, ckpt_arena *a, const ckpt_value *root, const char *key,
                                const ckpt_value **out);
/* The unpickled object of bytes item b (`key`: its name): the torch.save archive's data.pkl,
 * tensors left as their rebuild calls; *keep (when not NULL) gets the open archive, for its
 * storages (close it with ckpt_zip_close). */
int ckpt_megatron__unpickle_object(const char *file, ckpt_arena *a, const char *key, const ckpt_value *b,
                                   ckpt_value **out, ckpt_zip **keep);
/* Notes in m->dist_fp8_extra the first `_extra_state` ShardedObject of root that is neither
 * None nor an empty tensor (megatron_dist_object.c). */
int ckpt_megatron__dist_extra_states(ckpt_megatron *m, const ckpt_value *root);
/* CKPT_EUNSUPPORTED where a torch_dist source's FP8 extra state would be lost: extra states
 * copied (--extra-state copy) from a source that holds one; 0 otherwise. */
int ckpt_megatron__dist_extra_refused(const ckpt_megatron *m, const ckpt_megatron_target *t);
/* megatron-core 0.19 keeps the common state (args, iteration, optimizer, ...) in the
 * checkpoint as this object, not in common.pt. */
#define CKPT_MEGATRON_COMMON_STATE "common_state/shard_0_1"
/* The root of a torch_dist checkpoint with its common state in it: `root` itself when it has
 * args (common.pt read), else a copy with the keys of CKPT_MEGATRON_COMMON_STATE added; `root`
 * when neither is there. */
int ckpt_megatron__dist_common(const char *file, ckpt_arena *a, const ckpt_value *root, const ckpt_value **out);
/* How a torch_dist checkpoint holds optimizer state: the non-distributed optimizer's
 * per-parameter tensors, or the distributed optimizer's fully_reshardable (per parameter) or
 * dp_reshardable (per grad buffer bucket) form. */
typedef enum mg_dist_form { MG_DIST_NONE = 0, MG_DIST_PLAIN, MG_DIST_FULLY, MG_DIST_DP } mg_dist_form;
/* The optimizer state of torch_dist checkpoint `ck` into the entries' moment[] (built in the
 * model's graph), its form into m->dist_form (megatron_dist_optim.c); `root`: ck's with its
 * common state (ckpt_megatron__dist_common). `local`: the local
 * layer spec, whose norms torch_dist names as TE's. */
int ckpt_megatron__read_dist_optim(ckpt_megatron *m, const ckpt_ckpt *ck, const ckpt_value *root, int local);
/* After ckpt_megatron__read_dist_optim failed with rc: keep its error for later (no entry
 * keeps a moment) and go on; < 0 only when that fails. */
int ckpt_megatron__dist_optim_failed(ckpt_megatron *m, int rc);
/* 0, or the error the optimizer state's read at open met, set again: call it where the
 * optimizer state is needed (megatron_dist_optim.c). */
int ckpt_megatron__dist_optim_unread(const ckpt_megatron *m);
/* Optimizer state item t of megatron-core 0.13's fully_sharded_model_space form (stored N-D
 * flattened) as a node of the parameter's shape (that of `full`); layer >= 0: t is the
 * stacked item of the decoder layers and the node that layer's (megatron_dist_optim_nd.c). */
int ckpt_megatron__nd_flattened(ckpt_megatron *m, const ckpt_tensor *t, int64_t layer, const ckpt_node *full,
                                const ckpt_node **out);
/* The checkpoint whose root holds the source's common state (torch_dist: common.pt; legacy:
 * rank 0's file), or NULLs for a model built tensor by tensor. */
void ckpt_megatron__dist_source(const ckpt_megatron *m, const ckpt_ckpt **ck, const ckpt_value **root);
/* The optimizer form of torch_dist target t (MG_DIST_NONE: none written), or an error for a
 * source or form not written (megatron_dist_optim_write.c); a legacy source's state is read
 * into moment[] for it. */
int ckpt_megatron__dist_target_form(ckpt_megatron *m, const ckpt_megatron_target *t, int *form);
/* A legacy source whose args say the distributed optimizer but whose rank directories have no
 * distrib_optim.pt: refused naming it (megatron_plan.c). */
int ckpt_megatron__distopt_missing(const ckpt_megatron *m);
/* The state key ("optimizer.state.<name>.<key>") of moment k of entry e in `form`; NULL for
 * the master copy of an fp32 model under the non-distributed optimizer (the weight itself). */
const char *ckpt_megatron__dist_moment_name(int form, const mg_entry *e, int k);
/* common.pt's `optimizer` and `opt_param_scheduler` entries for `form` at EP ep_size, added to root (plan
 * file `file`, its `args` already there: use_distributed_optimizer set to the form); then its
 * `content_metadata`, as megatron-core saves it. */
int ckpt_megatron__dist_optim_common(ckpt_megatron *m, int form, int ep_size, ckpt_plan *plan, size_t file,
                                     ckpt_value *root);
int ckpt_megatron__dist_content_metadata(ckpt_plan *plan, int form, ckpt_value *root);
/* common.pt's `optimizer` keeping a legacy source's non-distributed optimizer (its step and
 * param groups; megatron_dist_optim_legacy_plain.c). */
int ckpt_megatron__dist_plain_common_legacy(ckpt_megatron *m, ckpt_plan *plan, size_t file, ckpt_value **out);
/* The torch_dist key of entry e into out: "decoder.layers.<module key>" for a layer, stacked
 * (*stacked 1: the item has the layer axis in front), or "decoder.layers.<global>.<module key>"
 * where per_layer; "mtp.layers.<i>.<module key>" for a multi-token prediction layer (never
 * stacked). An expert's key is SequentialMLP's item "...mlp.experts.experts.<key>", its
 * global index in *expert (-1: not an expert). rename: local norms under TE's names. */
int ckpt_megatron__dist_key(const mg_entry *e, int rename, int per_layer, ckpt_buf *out, int64_t *expert, int *stacked);
/* Whether megatron-core keys a model's decoder layers each on its own (moe_layer_freq a list or
 * above 1, likewise linear_attention_freq: transformer_block.py non_homogeneous_layers), and
 * whether it names the local spec's norms as TE's (the local spec's keys map; its MLA layers
 * have none: gpt_layer_specs.py get_gpt_layer_local_spec). */
int ckpt_megatron__dist_per_layer(const ckpt_value *args);
int ckpt_megatron__dist_renames_norms(const ckpt_value *args);
/* Entries of a model built tensor by tensor into Megatron's order (megatron_build.c). */
int ckpt_megatron__sort(ckpt_megatron *m);

/* A set checked against its own args (megatron_set_check.c): every rank's args agree with
 * the first's and name the TP x PP x EP ranks found and the chunks each holds; a stage's
 * chunk holds the layers an even split gives it (unless args ask for another split); and
 * the model holds every tensor args imply, at the full shape they imply. */
int ckpt_megatron__check_ranks(const ckpt_megatron *m);
int ckpt_megatron__check_stage(const ckpt_megatron *m, int pp, int vp, int64_t layers);
int ckpt_megatron__check_shapes(const ckpt_megatron *m);

/* How megatron-core splits the decoder's layers over the pipeline (megatron_split.c): first
 * and last the layers of the first and last stage (0: an equal share), embedding and loss
 * whether each counts as a layer of the first (last) chunk. The split args give (refused:
 * a custom layout string, a standalone embedding stage) and the target's; megatron-core's
 * checks of it; the layers of chunk (pp, vp), the global index of its first layer, and the
 * chunk and the stage holding global layer `layer`. */
typedef struct mg_split {
    int64_t layers;
    int pp, vpp;
    int64_t first, last;
    int embedding, loss;
} mg_split;
int ckpt_megatron__split_of_args(const ckpt_value *args, int64_t layers, int pp, int vpp, const char *where,
                                 mg_split *out);
int ckpt_megatron__split_of_target(const ckpt_value *args, int64_t layers, const ckpt_megatron_target *t,
                                   mg_split *out);
int ckpt_megatron__split_check(const mg_split *s);
int ckpt_megatron__split_even(const mg_split *s);
int64_t ckpt_megatron__split_layers(const mg_split *s, int pp, int vp);
int64_t ckpt_megatron__split_offset(const mg_split *s, int pp, int vp);
void ckpt_megatron__split_chunk_of(const mg_split *s, int64_t layer, int *pp, int *vp);
int ckpt_megatron__split_stage_of(const mg_split *s, int64_t layer);

/* The attribute dict of an argparse.Namespace (its BUILD state), or NULL. */
const ckpt_value *ckpt_megatron__namespace_dict(const ckpt_value *ns);
/* An integer attribute of args (bools count), or `fallback` when absent or not an integer. */
int64_t ckpt_megatron__arg_int(const ckpt_value *args, const char *name, int64_t fallback);
/* The number of experts args give (0: a dense model). */
int64_t ckpt_megatron__num_experts(const ckpt_value *args);
/* The vocabulary rows that are not padding, from args (0 when args do not say). */
int64_t ckpt_megatron__true_vocab(const ckpt_value *args);
/* The model dict of a chunk: "model" when vpp == 1, else "model<vp>". */
const ckpt_value *ckpt_megatron__chunk_dict(const ckpt_value *root, int vpp, int vp);

/* The parameters of a target rank, in the order of its state dict, with their target shards:
 * what its optimizer state is written for. */
typedef struct mg_param_out {
    const mg_entry *entry;
    const ckpt_node *shard; /* the target rank's part of entry->full */
    int chunk;              /* the target model chunk holding it */
} mg_param_out;

/* A copy of v (from src) in the plan's arena, its tensors added to plan file `file`. */
int ckpt_megatron__carry(ckpt_plan *plan, size_t file, ckpt_graph *g, const ckpt_ckpt *src, const ckpt_value *v,
                         ckpt_value **out);

/* The target TP ranks' parts of `full` (the entry's tensor or an optimizer moment of it):
 * vocabulary tables resized to the target's padded size first (megatron_plan.c). */
int ckpt_megatron__split(const ckpt_megatron *m, const ckpt_megatron_target *t, int64_t padded_vocab,
                         const mg_entry *e, const ckpt_node *full, const ckpt_node **outs);

/* A source rank's non-distributed optimizer state matched to its parameters
 * (megatron_optim_view.c): per parameter of its model chunks, in state-dict order, its key,
 * chunk, state index, param group and place in the group. */
typedef struct mg_optim_view {
    const ckpt_ckpt *ck;
    const ckpt_value *sd;      /* {state, param_groups} (of the dense optimizer: sds[0]) */
    const ckpt_value *masters; /* fp32_from_fp16_params: a list per group, or NULL */
    /* a mixture of experts at EP > 1 chains a dense and an expert optimizer: the file's
       `optimizer` is the list of their states, n_opt 2 (else 1), and parameter i's is
       sds[which[i]] */
    const ckpt_value *sds[2], *masters_of[2];
    size_t n_opt;
    size_t n;
    const char **keys;
    int *vp, *which;
    int64_t *index;
    size_t *group, *pos;
} mg_optim_view;

int ckpt_megatron__optim_view_open(const ckpt_megatron *m, const mg_rank *r, mg_optim_view *v);
void ckpt_megatron__optim_view_free(mg_optim_view *v);

/* The views of every source rank, opened on first use. */
typedef struct mg_optim_views {
    const ckpt_megatron *m;
    mg_optim_view *views; /* [ep][pp][tp] like the ranks */
    int *opened;
    size_t n;
} mg_optim_views;

int ckpt_megatron__optim_views_init(mg_optim_views *c, const ckpt_megatron *m);
void ckpt_megatron__optim_views_dispose(mg_optim_views *c);
/* The state of entry e on source TP rank tp: its state dict entry (NULL when it has none)
 * and its master copy (NULL without fp32_from_fp16_params). */
int ckpt_megatron__optim_state(mg_optim_views *c, const mg_entry *e, int tp, const mg_optim_view **view,
                               const ckpt_value **entry, const ckpt_value **master);
/* {state, param_groups} in `opt`, bare or in the fp16 wrapper (then *masters is its
 * fp32_from_fp16_params, if any). */
int ckpt_megatron__find_state_dict(const ckpt_ckpt *ck, const ckpt_value *opt, const ckpt_value **sd,
                                   const ckpt_value **masters);
/* Megatron's weight-decay split: whether a parameter goes to the no-weight-decay group, and
 * per group (n of `groups`) 2 (the only group), 1 (no weight decay), 0 (weight decay) or -1
 * (neither, or a second group of a kind). */
int ckpt_megatron__no_weight_decay(const char *key, int ndim);
void ckpt_megatron__group_flags(const ckpt_value *groups, int *flags);
int ckpt_megatron__optim_unsupported(const ckpt_ckpt *ck, const char *why);
const ckpt_value *ckpt_megatron__int_key_get(const ckpt_value *dict, int64_t key);
const ckpt_value *ckpt_megatron__seq_at(const ckpt_value *v, size_t i);
size_t ckpt_megatron__seq_len(const ckpt_value *v);

/* The per-parameter form of the non-distributed optimizer (megatron_optim_plain.c): the
 * moments of every parameter entry read from the rank files' `optimizer`; the common step
 * count of the source's optimizer, plain or distributed; the `optimizer` entry of a target
 * rank file as the non-distributed optimizer saves it, from the moments, for the parameters
 * `params` (in state-dict order; tp, etp: the rank's TP and expert TP rank), its param groups
 * and grad scaler from template rank `tmpl` (a mixture of experts at EP > 1: the chained
 * [dense, expert] list); tensors are added to plan file `file`. */
int ckpt_megatron__read_plain_moments(ckpt_megatron *m);
int ckpt_megatron__optim_step(const ckpt_megatron *m, double *step);
int ckpt_megatron__optimizer_plain(ckpt_megatron *m, ckpt_plan *plan, size_t file, ckpt_arena *arena,
                                   const mg_rank *tmpl, const mg_param_out *params, size_t n_params, int tp, int etp,
                                   const ckpt_megatron_target *t, int64_t padded_vocab, ckpt_value **out);
/* The `optimizer` entry of a target rank file as the distributed optimizer saves it (its
 * param groups without 'params', each with the common step, and the grad scaler; a mixture of
 * experts at EP > 1: the chained [dense, expert] list) from a plain source's template rank
 * `tmpl` (megatron_optim_distributed_form.c). */
int ckpt_megatron__optimizer_distributed(ckpt_megatron *m, ckpt_plan *plan, size_t file, const mg_rank *tmpl,
                                         const ckpt_megatron_target *t, ckpt_value **out);
/* Its {'param_groups': [...]} alone (DistributedOptimizer.state_dict()['optimizer']). */
int ckpt_megatron__distributed_groups(ckpt_megatron *m, ckpt_plan *plan, size_t file, const mg_rank *tmpl,
                                      ckpt_value **out);
/* A torch_dist source's optimizer in a legacy target rank file `root` (t->optimizer plain or
 * distributed: the `optimizer` entry either kind saves, from the source's param groups and
 * step), and the source's `opt_param_scheduler`. */
int ckpt_megatron__optimizer_from_dist(ckpt_megatron *m, ckpt_plan *plan, size_t file, const mg_param_out *params,
                                       size_t n_params, int tp, const ckpt_megatron_target *t, int64_t padded_vocab,
                                       ckpt_value *root);
/* Every parameter entry's moment[] filled from whatever form the source holds (m->moments). */
int ckpt_megatron__moments(ckpt_megatron *m);

#endif
