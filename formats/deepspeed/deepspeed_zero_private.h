/* Shared by the files of the DeepSpeed ZeRO format module (deepspeed_zero.c: directory,
 * rank files, model-parallel ranks, stage; deepspeed_zero_merge.c: buffers, frozen
 * parameters, aliases and the extents of a consolidated tensor; deepspeed_zero_flat.c: the
 * trainable parameters and their optimizer states, cut from the flat partitions;
 * deepspeed_zero_stage0.c: ZeRO-0 checkpoints). Facts: docs formats/zero.md. */
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
    long long mp;           /* MM of mp_rank_MM, or -1 when the name has none */
    const ckpt_file *file;  /* the reader's own mapping: every extent points here */
    ckpt_ckpt *ck;          /* the same file opened by the torch reader */
    const ckpt_value *root;
} ckpt_zero_file;

/* The files of the tag directory, or (as a view into them) those of one model-parallel
 * rank. */
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
    const char *prefix;       /* "mp_rank_01/" before tensor names when there are several */
    ckpt_value *root;         /* DICT name -> TENSOR, in zero_to_fp32's order */
    /* extents of the storage being assembled */
    ckpt_extent *ext;
    size_t n_ext, cap_ext;
    ckpt_dtype dtype;
    int byteswap;
} ckpt_zero_build;

/* One piece of a virtual concatenation: a contiguous tensor of a rank file. */
typedef struct ckpt_zero_part {
    const ckpt_zero_file *f;
    const ckpt_tensor *t;
    int64_t numel;
} ckpt_zero_part;

/* A str-keyed entry of a DICT value, or NULL. */
const ckpt_value *ckpt_zero__get(const ckpt_value *dict, const char *key);
/* The entry of a DICT whose key is the int k (optimizer state is keyed by index), or NULL. */
const ckpt_value *ckpt_zero__get_int(const ckpt_value *dict, int64_t k);
/* An int, or an int enum (ZeroStageEnum(2)); 0 or -1 (no error set). */
int ckpt_zero__int(const ckpt_value *v, int64_t *out);
/* torch.Size((d0, d1, ...)) or a tuple/list of ints; 0 or -1 (no error set). */
int ckpt_zero__shape(const ckpt_value *v, int *ndim, int64_t *shape, int64_t *numel);
const char *ckpt_zero__base(const char *path);
const ckpt_tensor *ckpt_zero__tensor(const ckpt_zero_file *f, const ckpt_value *v);

/* v as a contiguous tensor of f; `what` names it in errors. */
int ckpt_zero__part_of(const ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_value *v, const char *what,
                       ckpt_zero_part *out);
/* Start a storage with the element type and byte order of tensor t. */
void ckpt_zero__begin(ckpt_zero_build *b, const ckpt_tensor *t);
/* Append elements [first, first+count) of the concatenation of parts. */
int ckpt_zero__push_range(ckpt_zero_build *b, const ckpt_zero_part *parts, size_t n_parts, int64_t first,
                          int64_t count, const char *name);
/* A C-contiguous tensor of the given shape on the extents gathered since begin, named
 * prefix + name, with the given flags, added to the root. */
int ckpt_zero__emit(ckpt_zero_build *b, const char *name, int ndim, const int64_t *shape, uint32_t flags);
/* A tensor of a rank file exactly as saved (its own bytes when contiguous, else its whole
 * storage with the same view). */
int ckpt_zero__emit_saved(ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_tensor *t, const char *name,
                          uint32_t flags);
/* Tensor `source` of the reader's table again under name (prefix + name): same storage,
 * view and flags (the alias of a frozen parameter is frozen). */
int ckpt_zero__alias(ckpt_zero_build *b, size_t source, const char *name);

/* Trainable parameters (flat partitions, stages 1-3), then, when the reader's options ask
 * for them, their optimizer states. */
int ckpt_zero__trainable(ckpt_zero_build *b);
int ckpt_zero__optimizer_states(ckpt_zero_build *b);

/* Add buffers, frozen and trainable parameters and tied aliases to b->root and the
 * reader's tensor table. */
int ckpt_zero__merge(ckpt_zero_build *b);
/* A ZeRO-0 checkpoint (no optimizer partitions): its fp32 module state dict. */
int ckpt_zero__stage0(ckpt_zero_build *b);
void ckpt_zero__build_dispose(ckpt_zero_build *b);

#endif
