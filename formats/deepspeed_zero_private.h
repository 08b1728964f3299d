/* Shared by the files of the DeepSpeed ZeRO format module (deepspeed_zero.c: directory,
 * rank files, stage; deepspeed_zero_merge.c: the consolidated tensors). Facts: docs
 * formats/zero.md. */
#ifndef CKPT_FORMATS_DEEPSPEED_ZERO_PRIVATE_H
#define CKPT_FORMATS_DEEPSPEED_ZERO_PRIVATE_H

#if !defined(CKPT_BUILD)
#error "deepspeed_zero_private.h is internal to the DeepSpeed ZeRO format module"
#endif

#include <ckpt/sys/format.h>

/* One *_model_states.pt or *_optim_states.pt file of the tag directory. */
typedef struct ckpt_zero_file {
    char *path;
    long long rank;         /* D of zero_pp_rank_D, or -1 when the name has none */
    const ckpt_file *file;  /* the reader's own mapping: every extent points here */
    ckpt_ckpt *ck;          /* the same file opened by the torch reader */
    const ckpt_value *root;
} ckpt_zero_file;

typedef struct ckpt_zero_state {
    ckpt_zero_file *model, *optim;
    size_t n_model, n_optim;
} ckpt_zero_state;

/* What the merge needs to know, decided by deepspeed_zero.c. */
typedef struct ckpt_zero_build {
    ckpt_reader *r;
    const char *dir;          /* the tag directory, for messages */
    const ckpt_zero_state *st;
    int stage;                /* 1, 2 or 3; a BF16_Optimizer checkpoint merges as 1 */
    int64_t world;            /* partition count W */
    ckpt_value *root;         /* DICT name -> TENSOR, in zero_to_fp32's order */
    /* extents of the storage being assembled */
    ckpt_extent *ext;
    size_t n_ext, cap_ext;
    ckpt_dtype dtype;
    int byteswap;
} ckpt_zero_build;

/* A str-keyed entry of a DICT value, or NULL. */
const ckpt_value *ckpt_zero__get(const ckpt_value *dict, const char *key);
/* An int, or an int enum (ZeroStageEnum(2)); 0 or -1 (no error set). */
int ckpt_zero__int(const ckpt_value *v, int64_t *out);

/* Add buffers, frozen and trainable parameters and tied aliases to b->root and the
 * reader's tensor table. */
int ckpt_zero__merge(ckpt_zero_build *b);
void ckpt_zero__build_dispose(ckpt_zero_build *b);

#endif
