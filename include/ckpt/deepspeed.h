/* DeepSpeed ZeRO checkpoints consolidated as DeepSpeed's zero_to_fp32.py does: the output
 * files (names, shards, index, tensors and their order) planned before the first byte is
 * written. The checkpoint itself is opened with ckpt_open and format "deepspeed_zero", whose
 * root is the consolidated state dict (per model-parallel rank: { "mp_rank_00": {...}, ... }). */
#ifndef CKPT_DEEPSPEED_H
#define CKPT_DEEPSPEED_H

#include "checkpoint.h"
#include "graph.h"
#include "plan.h"
#include "shard.h"

CKPT_BEGIN_DECL

/* One tensor of a consolidated state dict as zero_to_fp32 writes it. */
typedef struct ckpt_deepspeed_fp32_entry {
    const char *name;      /* its key in the output state dict (borrowed from the checkpoint) */
    const ckpt_tensor *t;  /* the input tensor (borrowed from the checkpoint) */
    const ckpt_node *node; /* as written (cast to float32); entries that share a node share one
                              storage in .bin output */
    size_t storage;        /* index of the first entry with the same storage (itself if none) */
    ckpt_dtype dtype;      /* as written: float32 for floating tensors */
    uint64_t nbytes;       /* bytes of its storage as written */
} ckpt_deepspeed_fp32_entry;

/* A state dict written as one file, or as shards plus an index. */
typedef struct ckpt_deepspeed_fp32_set {
    char *dir;        /* "" or "mp_rank_01/" */
    const char *base; /* "pytorch_model", "model" or "optimizer_states" */
    ckpt_deepspeed_fp32_entry *entries;
    size_t n_entries;
    ckpt_shard_plan *shards; /* files and index, named relative to the output directory; the
                                files' entries index `entries` */
} ckpt_deepspeed_fp32_set;

typedef struct ckpt_deepspeed_fp32_options {
    unsigned version;        /* CKPT_DEEPSPEED_FP32_OPTIONS_VERSION */
    const char *format;      /* of the files: "torch" (.bin; NULL means it too), "safetensors" or "hdf5" */
    int exclude_frozen;      /* leave out the frozen (requires_grad=False) parameters */
    int optimizer_states;    /* also a set of each parameter's optimizer state (<param>.exp_avg ...)
                                per rank; the checkpoint must be opened with optimizer_states */
    uint64_t max_shard_size; /* largest file before sharding (huggingface_hub's rules) */
} ckpt_deepspeed_fp32_options;

#define CKPT_DEEPSPEED_FP32_OPTIONS_VERSION 1
#define CKPT_DEEPSPEED_FP32_OPTIONS_INIT { CKPT_DEEPSPEED_FP32_OPTIONS_VERSION, NULL, 0, 0, 5000000000ull }

/* The consolidated output of a checkpoint, and the plan that writes it. */
typedef struct ckpt_deepspeed_fp32 {
    ckpt_plan *plan;              /* every set's shards, then its index; run with ckpt_plan_execute */
    ckpt_deepspeed_fp32_set *sets; /* per model-parallel rank: the weights, then the optimizer states */
    size_t n_sets;
} ckpt_deepspeed_fp32;

/* Plan the output of `in` (opened as "deepspeed_zero"), sharded by Hugging Face's
 * split_torch_state_dict_into_shards rules: floating tensors as float32, names that view one
 * storage the same way (tied weights) as one tensor, which safetensors output refuses
 * (CKPT_EUNSUPPORTED). CKPT_EFORMAT when the root is not a state dict or a dict of them. The
 * result borrows from `in`, which must outlive it. */
CKPT_EXTERN(int) ckpt_deepspeed_fp32_new(ckpt_deepspeed_fp32 **out, const ckpt_ckpt *in,
                                         const ckpt_deepspeed_fp32_options *o);
/* NULL-safe. */
CKPT_EXTERN(void) ckpt_deepspeed_fp32_free(ckpt_deepspeed_fp32 *p);

CKPT_END_DECL

#endif
