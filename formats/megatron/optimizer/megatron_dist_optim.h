/* torch_dist optimizer state, inside: the distributed optimizer's grad buffer layout of a
 * pipeline stage of the model at some TP/PP/VPP/DP (megatron_dist_optim.c), shared by the
 * dp_reshardable reader and writer. */
#ifndef CKPT_FORMATS_MEGATRON_DIST_OPTIM_H
#define CKPT_FORMATS_MEGATRON_DIST_OPTIM_H

#include "megatron_distopt.h"
#include "../megatron_private.h"

#include <ckpt/dcp.h>

#define CKPT_MEGATRON_DIST_PREFIX "optimizer.distributed."

/* A parallel layout. */
typedef struct mg_dist_sizes {
    int tp, pp, vpp;
    int64_t dp;           /* 0: args.data_parallel_size */
    int64_t padded_vocab; /* vocabulary rows; 0: as the model stores them */
    int ep;               /* a MoE model's EP rank: the dense parameters and its experts */
} mg_dist_sizes;

/* A stage's parameters in named_parameters() order (entries' indices in idx[], -1 for the
 * last stage's copy of a tied embedding) and their grad buffer layout. */
typedef struct mg_dist_stage {
    mg_dopt_param *params;
    long *idx;
    size_t n;
    mg_dopt_layout l;
} mg_dist_stage;

/* The layout of pipeline stage pp at sizes z, by `args` (the model's, or a target's rewritten
 * ones: bucket size, overlap_grad_reduce, ...). Free with ckpt_megatron__dist_stage_free, also
 * after an error. */
int ckpt_megatron__dist_stage(const ckpt_megatron *m, const ckpt_value *args, const mg_dist_sizes *z, int pp,
                              mg_dist_stage *s);
void ckpt_megatron__dist_stage_free(mg_dist_stage *s);

/* The dp_reshardable key of a bucket's state `moment` (param, exp_avg, exp_avg_sq) for
 * model-parallel rank `group` (tp + TP * pp), into out. */
int ckpt_megatron__dist_bucket_key(int64_t group, const mg_dopt_buffer *b, size_t bucket, const char *moment,
                                   ckpt_buf *out);
/* DistributedOptimizer.state_dict() for the target, {'param_groups': [... each with 'step']},
 * from the source's form (tensors in it go to plan file `file`), and the source's grad scaler
 * state (NULL if none; ckpt_megatron__dist_scaler) (megatron_dist_optim_write.c). */
int ckpt_megatron__dist_optim_sd(ckpt_megatron *m, ckpt_plan *plan, size_t file, ckpt_value **sd,
                                 const ckpt_value **scaler);
/* The dp_reshardable items' data-parallel group index of rank (tp, ep, pp) of a model at TP
 * tp_size and EP ep_size: its rank in the dense optimizer's model-parallel group (TP x PP:
 * tp + TP * pp), or in the expert one's (expert TP x EP x PP, expert TP = TP here: tp + TP * ep +
 * TP * EP * pp; megatron-core 0.16.1 optimizer/__init__.py get_megatron_optimizer,
 * parallel_state.py RankGenerator 'tp-ep-pp'), and the items' prefix: "chained_<i>." for inner
 * optimizer i of a chained one (dense 0, expert 1) in the dp_reshardable form, else "". */
int64_t ckpt_megatron__dist_group(int tp_size, int64_t ep_size, int tp, int ep, int pp, int expert);
const char *ckpt_megatron__chained_prefix(int chained, int expert);
/* A chained optimizer's DistributedOptimizer.state_dict()s, the list [dense, expert], from
 * fully_reshardable's common.pt optimizer {0: {'optimizer': ...}, 1: ...} or a legacy
 * model_optim_rng.pt's [{'optimizer': ...}, ...] (megatron_dist_moe.c). */
int ckpt_megatron__dist_chained_sd(ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_value *opt,
                                   ckpt_value **sd);
/* The refusal of a chained optimizer's grad scaler (its place per inner optimizer is not
 * carried), naming `file`. */
int ckpt_megatron__chained_scaler(const char *file);
/* The dp_reshardable state of target t: bucket tensors and saved objects per target rank, in
 * d (megatron_dist_optim_dp.c). Param groups holding tensors are refused (file: see above). */
int ckpt_megatron__dist_write_dp(ckpt_megatron *m, const ckpt_megatron_target *t, int64_t padded_vocab,
                                 ckpt_plan *plan, size_t file, ckpt_dcp_out *d);
/* The grad scaler's state (fp16; megatron_dist_scaler.c): read from a dp_reshardable
 * checkpoint's saved objects (`root`: its items), else found in the source's
 * root['optimizer'] on first use; *out NULL when the source has none. Its tensors are leaves
 * of m->scaler_nodes: carry it into plan file `file`, or make it a saved object's bytes
 * (v: the value to save, the state or a list holding it). */
int ckpt_megatron__read_dp_scaler(ckpt_megatron *m, const ckpt_value *root);
int ckpt_megatron__dist_scaler(ckpt_megatron *m, const ckpt_value **out);
int ckpt_megatron__scaler_carry(const ckpt_megatron *m, ckpt_plan *plan, size_t file, const ckpt_value *v,
                                ckpt_value **out);
int ckpt_megatron__scaler_object(const ckpt_megatron *m, const ckpt_value *v, ckpt_buf *out);
/* megatron-core 0.13's dp_zero_gather_scatter: the flat state tensors of model-parallel rank
 * `group` (its legacy distrib_optim.pt dict, saved as an object), checked against its stage's
 * layout l, into flat as ckpt_megatron__dopt_flat gives them; ck the torch_dist checkpoint,
 * root its root (megatron_dist_optim_zero.c). */
int ckpt_megatron__dist_zero_flat(const ckpt_megatron *m, const ckpt_ckpt *ck, const ckpt_value *root, int64_t group,
                                  const mg_dopt_layout *l, const ckpt_tensor **flat);
/* Refuses a fully_reshardable state (read into m's entries, source sizes z) that has the
 * save defect of megatron-core before Megatron-LM PR #5077 (megatron_dist_optim_pr5077.c). */
int ckpt_megatron__dist_check_pr5077(const ckpt_megatron *m, const mg_dist_sizes *z);
/* "torch.float32" etc., or NULL. */
const char *ckpt_megatron__torch_dtype(ckpt_dtype d);

#endif
