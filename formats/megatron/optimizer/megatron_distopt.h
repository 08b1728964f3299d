/* Megatron's distributed optimizer (--use-distributed-optimizer), inside: where megatron-core's
 * grad buffers put each parameter of a rank (megatron_distopt_layout.c), which is where the
 * rank's flat optimizer state (distrib_optim.pt, torch_dist's dp_reshardable pieces) holds
 * that parameter's fp32 master copy and Adam moments.
 *
 * The rules, from megatron-core 0.16.1 (distributed/param_and_grad_buffer.py
 * _ParamAndGradBuffer.__init__, distributed/distributed_data_parallel.py,
 * optimizer/distrib_optimizer.py, Megatron-LM training.py get_model):
 * - every model chunk of the rank (virtual pipeline stage) has its own buffers, one per
 *   (param dtype, grad dtype) pair in the order the pairs first appear in named_parameters();
 *   dense parameters and expert-parallel ones (allreduce False) have separate buffers, kept by
 *   separate optimizers (the dense one first), each numbering its buffers ("gbuf_idx") from 0
 *   over the chunks in order;
 * - a buffer holds its parameters in REVERSE named_parameters() order, each start rounded up to
 *   a multiple of 64; a bucket closes after the parameter that brings it to bucket_size
 *   elements; a shared embedding (tied embeddings over pipeline stages) closes the bucket
 *   before it and gets one of its own; bucket ends are rounded up to lcm(DP, 128), or
 *   lcm(DP, 128, 2^16) with --ddp-pad-buckets-for-high-nccl-busbw;
 * - a bucket's numel_unpadded is its last parameter's end (or, before a shared embedding, that
 *   parameter's aligned start) less its start; the saved flat state is the buckets' unpadded
 *   parts one after the other.
 * Parameters are all taken to require grad (a checkpoint does not say which were frozen). */
#ifndef CKPT_FORMATS_MEGATRON_DISTOPT_H
#define CKPT_FORMATS_MEGATRON_DISTOPT_H

#include "../megatron_private.h"

#include <ckpt/dtype.h>
#include <ckpt/value.h>

#include <stddef.h>
#include <stdint.h>

/* One parameter of a rank, in named_parameters() order, chunk after chunk. */
typedef struct mg_dopt_param {
    int chunk;            /* the model chunk (virtual pipeline stage of the rank) holding it */
    int64_t numel;        /* elements of the rank's part (its TP shard) */
    ckpt_dtype dtype;     /* the parameter's dtype (bf16, fp16 or fp32 training) */
    int expert;           /* an expert-parallel parameter */
    int shared_embedding; /* the word embedding or output layer copy of tied embeddings, PP > 1 */
} mg_dopt_param;

/* What decides the layout, for one rank. */
typedef struct mg_dopt_config {
    int64_t dp;          /* the dense buffers' data-parallel group (DP x CP) */
    int64_t expert_dp;   /* the expert buffers' (expert data-parallel group) */
    int bucketing;       /* chunk 0 is cut into buckets (overlap_grad_reduce, first stage); else
                            it, like every later chunk, has one bucket per buffer */
    int64_t bucket_size; /* elements that close a bucket */
    int64_t num_buckets; /* --ddp-num-buckets: instead, the rank's parameter count over this */
    int pad_high_busbw;  /* --ddp-pad-buckets-for-high-nccl-busbw */
    int grad_fp32;       /* --accumulate-allreduce-grads-in-fp32: fp32 grads, else the param's dtype */
} mg_dopt_config;

typedef struct mg_dopt_bucket {
    int64_t start, end;     /* in the buffer, end padded */
    int64_t numel_unpadded;
} mg_dopt_bucket;

typedef struct mg_dopt_buffer {
    int chunk, expert;
    size_t gbuf;                       /* its index in its optimizer's state (dense, expert) */
    ckpt_dtype param_dtype, grad_dtype;
    size_t first_bucket, n_buckets;    /* in mg_dopt_layout.buckets */
    int64_t numel, numel_unpadded;     /* padded size; the saved flat state's size */
} mg_dopt_buffer;

/* Where a parameter lies. */
typedef struct mg_dopt_range {
    size_t buffer;      /* in mg_dopt_layout.buffers */
    size_t bucket;      /* the buffer's bucket index */
    int64_t start, end; /* in the buffer (padded offsets) */
    int64_t flat;       /* its start in the saved flat state (padding between buckets removed) */
} mg_dopt_range;

typedef struct mg_dopt_layout {
    mg_dopt_buffer *buffers; /* dense buffers chunk by chunk, then expert ones */
    size_t n_buffers, n_dense;
    mg_dopt_bucket *buckets;
    size_t n_buckets;
    mg_dopt_range *ranges; /* one per parameter, in the order given */
} mg_dopt_layout;

/* The layout of a rank's parameters (n of them, chunks non-decreasing). 0, or CKPT_EINVALID
 * (class LAYOUT) for an input megatron-core could not have built; free with
 * ckpt_megatron__dopt_layout_free (also after an error). */
int ckpt_megatron__dopt_layout(const mg_dopt_param *params, size_t n, const mg_dopt_config *cfg,
                               mg_dopt_layout *out);
void ckpt_megatron__dopt_layout_free(mg_dopt_layout *l);

/* The config of the rank at pipeline stage pp_rank of a checkpoint whose Megatron args are
 * `args`, laid out for data-parallel size dp (0: args.data_parallel_size). CKPT_EUNSUPPORTED
 * (class MODEL) naming the argument for settings whose layout is not this one
 * (--num-distributed-optimizer-instances > 1, --overlap-param-gather-with-optimizer-step);
 * `file` names the checkpoint in messages. */
int ckpt_megatron__dopt_config(const ckpt_value *args, int64_t dp, int pp_rank, const char *file,
                               mg_dopt_config *out);

/* Whether parameter `name` of a model with these args at `pp` stages is a shared embedding:
 * tied embeddings over several stages make the first stage's word embedding and the last
 * stage's output layer copy one, with a bucket of its own. */
int ckpt_megatron__dopt_shared_embedding(const ckpt_value *args, int pp, const char *name);
/* The layout's view of n parameters: entries[i] (its name and layout), its chunk, its part at
 * this rank `shards[i]` (numel, dtype), for a model of pp_size stages and ep_size EP ranks
 * (experts are expert-parallel parameters at ep_size > 1 only). Free *out. */
int ckpt_megatron__dopt_params(const ckpt_megatron *m, const mg_entry *const *entries, const int *chunks,
                               const ckpt_node *const *shards, size_t n, int pp_size, int ep_size,
                               mg_dopt_param **out);
/* The layout of source rank (tp, pp, ep) of a legacy checkpoint (the dense parameters and EP
 * rank ep's experts): *entries and *shards (its parts as stored), n of them, in the order of
 * l->ranges. Free *entries, *shards, and l. */
int ckpt_megatron__dopt_source_layout(const ckpt_megatron *m, int tp, int pp, int ep, const mg_entry ***entries,
                                      const ckpt_node ***shards, size_t *n, mg_dopt_layout *l);
/* The flat tensors of a distributed optimizer state `root` (distrib_optim.pt's top level, in
 * file ck) of the file of dense data-parallel rank dense_dp (mg_dense_dp), each checked
 * against layout l: flat[buffer * MG_N_MOMENTS + moment], left NULL for the buffers the file
 * does not hold (the dense ones unless dense_dp is 0). */
int ckpt_megatron__dopt_flat(const ckpt_ckpt *ck, const ckpt_value *root, const mg_dopt_layout *l, int dense_dp,
                             const ckpt_tensor **flat);

/* Fill every parameter entry's moment[] from the source ranks' distrib_optim.pt
 * (megatron_distopt_read.c) and set m->moments; on an error none is set. */
int ckpt_megatron__read_distopt(ckpt_megatron *m);
/* Add distrib_optim.pt at `rel` for the target rank (tp, pp, ep) whose parameters are `params`
 * (state-dict order, chunk by chunk), laid out as the target's args (`targs`: its DP, its
 * buckets) make its grad buffers (megatron_distopt_write.c). */
int ckpt_megatron__distopt_write(ckpt_megatron *m, const ckpt_megatron_target *t, const ckpt_value *targs,
                                 ckpt_plan *plan, const char *rel, const mg_param_out *params, size_t n, int tp,
                                 int etp, int pp, int dense_rank, int64_t padded_vocab);

#endif
