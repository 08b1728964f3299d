/* ckptconv zero-to-fp32: what is written where, decided before the first byte is written. */
#ifndef CKPT_CLI_ZERO_TO_FP32_H
#define CKPT_CLI_ZERO_TO_FP32_H

#include "cli.h"

/* One tensor of a state dict as zero_to_fp32 writes it. */
typedef struct zero_entry {
    const char *name;       /* its key in the output state dict */
    const ckpt_tensor *t;
    const ckpt_node *node;  /* as written (cast to float32); entries that share a node share one
                               storage in .bin output */
    size_t storage;         /* index of the first entry with the same storage (itself if none) */
    ckpt_dtype dtype;       /* as written: float32 for floating tensors */
    uint64_t nbytes;        /* bytes of its storage as written */
} zero_entry;

/* A state dict written as one file, or as shards plus an index. */
typedef struct zero_set {
    char *dir;       /* "" or "mp_rank_01/" */
    const char *base; /* "pytorch_model", "model" or "optimizer_states" */
    zero_entry *entries;
    size_t n_entries;
    ckpt_shard_plan *shards; /* files and index, named under OUTPUT_DIR; file entries index `entries` */
} zero_set;

typedef struct zero_plan_options {
    const char *format; /* of the files: "torch" (.bin, the default), "safetensors" or "hdf5" */
    int exclude_frozen;
    int optimizer_states;
    uint64_t max_shard_size;
} zero_plan_options;

typedef struct zero_plan {
    ckpt_plan *plan; /* set by set: its shards, then its index */
    zero_set *sets;
    size_t n_sets;
} zero_plan;

/* Every set of an opened ZeRO checkpoint (per model-parallel rank: weights, then optimizer
 * states), sharded by Hugging Face's split_torch_state_dict_into_shards rules, and the plan
 * that writes them. */
int zero_plan_build(zero_plan *p, const ckpt_ckpt *in, const zero_plan_options *o);
void zero_plan_free(zero_plan *p);

#endif
