/* One model of any framework at full shapes, and the one conversion path over it.
 *
 * A framework (megatron, paddle, huggingface, deepspeed) reads a checkpoint directory as one
 * model: every tensor at its full shape, with its parallel cut, the family it is and its config.
 * Another framework (or the same one, at another layout) then plans that model as its own
 * files. reshard, hf2mcore, mcore2hf, paddle2hf, hf2paddle, pd2te --tp and te2pd are this one
 * path with different flags (ckpt_job_plan). */
#ifndef CKPT_FRAMEWORK_H
#define CKPT_FRAMEWORK_H

#include "family.h"
#include "megatron.h"
#include "paddle.h"
#include "parallel.h"
#include "plan.h"

CKPT_BEGIN_DECL

typedef struct ckpt_fw ckpt_fw;

#define CKPT_FW_TARGET_VERSION 1
typedef struct ckpt_fw_target {
    unsigned version;                 /* CKPT_FW_TARGET_VERSION */
    int tp, pp, vpp, dp;              /* 0: the source's */
    const char *impl;                 /* megatron "transformer_engine" | "local", paddle "native" | "te"; NULL: the source's */
    const char *const *variants;      /* output variants of the family map ("fused_qkv") */
    size_t n_variants;
    uint64_t max_shard_size;          /* huggingface: 0 as save_pretrained */
    ckpt_megatron_target megatron;    /* framework extras, read by that framework only */
    ckpt_paddle_target paddle;
    const char *format;               /* megatron: "torch" (NULL) or "torch_dist" */
    int64_t iteration;                /* ckpt_fw_new: the iteration the checkpoint records */
    const char *source;               /* ckpt_fw_new: the source checkpoint's path, named in
                                         messages; a Hugging Face source's
                                         generation_config.json is kept (megatron:
                                         args.hf_generation_config) */
    int ep, etp;                      /* megatron: expert-parallel and expert tensor-parallel
                                         sizes of a mixture of experts; 0: the source's */
} ckpt_fw_target;
/* The source's layout in every field. */
#define CKPT_FW_TARGET_INIT { .version = CKPT_FW_TARGET_VERSION }

#define CKPT_FW_OPTIONS_VERSION 1
typedef struct ckpt_fw_options {
    unsigned version;                 /* CKPT_FW_OPTIONS_VERSION */
    const char *framework;            /* NULL: the frameworks bid */
    const ckpt_family *family;        /* NULL: detect */
    int64_t iteration;                /* -1: the latest */
    const char *tag;                  /* deepspeed */
    int no_optimizer;
    int64_t true_vocab_size;          /* 0: from the checkpoint */
    /* --drop: 1 when a tensor no rule consumes may be left out (the job reports it) */
    int (*leave_out)(void *payload, const char *name);
    void *leave_out_payload;
    int need_family;                  /* refuse a model of no known family, saying why
                                         (conversions); 0: open it without one (reshard) */
    const char *impl;                 /* paddle "te": the ranks hold Transformer Engine's layers
                                         (pd2te's), read back through paddle_te; NULL: the
                                         framework's own */
    const ckpt_paddle_te_options *paddle_te; /* impl "te": the map back (to_te 0) */
} ckpt_fw_options;
/* Every default: the latest iteration, the family detected, the frameworks bid. */
#define CKPT_FW_OPTIONS_INIT { .version = CKPT_FW_OPTIONS_VERSION, .iteration = -1 }

typedef struct ckpt_fw_info {
    const char *framework, *impl;
    int tp, pp, vpp, ep, dp;
    int64_t iteration;
    int has_optimizer;
} ckpt_fw_info;

/* Open the checkpoint at path (a directory, or a file standing for one) as one model; its
 * tensors are nodes of g. */
CKPT_EXTERN(int) ckpt_fw_open(ckpt_fw **out, const char *path, ckpt_graph *g, const ckpt_fw_options *o);
/* An empty model of `framework` at target t, to be filled with ckpt_fw_add and planned. */
CKPT_EXTERN(int) ckpt_fw_new(ckpt_fw **out, const char *framework, ckpt_graph *g, const ckpt_family *f,
                             const ckpt_family_config *c, const ckpt_fw_target *t);
/* Add a tensor at full shape under the framework's own name. */
CKPT_EXTERN(int) ckpt_fw_add(ckpt_fw *m, const char *name, const ckpt_node *full);
/* Every output file of m at target t into plan. */
CKPT_EXTERN(int) ckpt_fw_plan(ckpt_fw *m, const ckpt_fw_target *t, ckpt_plan *plan);
CKPT_EXTERN(void) ckpt_fw_close(ckpt_fw *m);

CKPT_EXTERN(const ckpt_fw_info *) ckpt_fw_info_of(const ckpt_fw *m);
CKPT_EXTERN(const ckpt_family *) ckpt_fw_family(const ckpt_fw *m);        /* borrowed from m */
CKPT_EXTERN(const ckpt_family_config *) ckpt_fw_config(const ckpt_fw *m); /* borrowed from m */
CKPT_EXTERN(size_t) ckpt_fw_tensor_count(const ckpt_fw *m);
/* The i-th tensor's name, full node and parallel cut (each borrowed from m). */
CKPT_EXTERN(const char *) ckpt_fw_tensor_at(const ckpt_fw *m, size_t i, const ckpt_node **full, ckpt_tensor_layout *l);
/* The framework's own state behind m (a ckpt_megatron *, a ckpt_paddle_model *), or NULL when m
 * is not of `framework`. */
CKPT_EXTERN(void *) ckpt_fw_native(ckpt_fw *m, const char *framework);
/* The checkpoint set m reads (borrowed from m); NULL for a framework without a directory
 * scheme and for a model made by ckpt_fw_new. */
CKPT_EXTERN(ckpt_set *) ckpt_fw_set(const ckpt_fw *m);

#define CKPT_JOB_OPTIONS_VERSION 1
typedef struct ckpt_job_options {
    unsigned version;                 /* CKPT_JOB_OPTIONS_VERSION */
    const char *to;                   /* target framework; NULL: the source's (reshard) */
    ckpt_fw_options from;
    ckpt_fw_target target;
    const char *name;                 /* the job in messages ("mcore2hf"); NULL: "ckpt_job_plan" */
} ckpt_job_options;
#define CKPT_JOB_OPTIONS_INIT \
    { .version = CKPT_JOB_OPTIONS_VERSION, .from = CKPT_FW_OPTIONS_INIT, .target = CKPT_FW_TARGET_INIT }

/* The one path: source framework -> (another framework: its map to Hugging Face names, then
 * Hugging Face names to the target's; the same framework: no map, optimizer kept) -> target.
 * Every source tensor is consumed by a rule, left out by the family's rule, or dropped by
 * o->from.leave_out; any other is refused (CKPT_EFORMAT naming it). The source stays open in
 * *source_out (the plan's nodes read from it) until the plan is executed. */
CKPT_EXTERN(int) ckpt_job_plan(ckpt_plan *plan, const char *in, const ckpt_job_options *o, ckpt_fw **source_out);

CKPT_END_DECL

#endif
