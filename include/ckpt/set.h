/* Checkpoint sets: a checkpoint written as many files (one per tensor-parallel rank,
 * pipeline stage, expert rank, data-parallel rank or size shard) seen as one list of member
 * files with their coordinates. Each member is opened lazily, through the format modules,
 * the first time it is asked for, and stays open until the set is closed.
 *
 * Which files make a set, and what their coordinates are, is known to layout modules
 * (formats/, one per framework's directory scheme), as formats are known to format modules:
 * ckpt_set_open asks each layout whether the path is its own. */
#ifndef CKPT_SET_H
#define CKPT_SET_H

#include "checkpoint.h"

CKPT_BEGIN_DECL

typedef struct ckpt_set ckpt_set;

/* A member's place in the parallel layout; -1 for an axis the layout does not have. */
typedef struct ckpt_coords {
    int tp, pp, ep, dp, shard;
} ckpt_coords;

#define CKPT_COORDS_NONE { -1, -1, -1, -1, -1 }

typedef struct ckpt_member {
    const char *rel;  /* path relative to the set's directory: "iter_0000010/mp_rank_01_000/model_optim_rng.pt" */
    const char *path; /* the path to open */
    ckpt_coords at;
    const char *role; /* what the file holds: "model" (weights and whatever the framework keeps
                         beside them), "optimizer" (a separate optimizer file), ... */
} ckpt_member;

/* The layout as a whole. Sizes are 1 for axes the set does not use. */
typedef struct ckpt_set_info {
    const char *layout;   /* the layout module: "megatron" */
    const char *root;     /* the directory the member paths are relative to */
    const char *dir;      /* the members' directory under root ("iter_0000010", "release"), or "" */
    int tp, pp, ep, dp;
    int64_t iteration;    /* -1 when the layout has none; 0 for a Megatron release checkpoint */
    int release;          /* a Megatron "release" checkpoint */
} ckpt_set_info;

typedef struct ckpt_set_options {
    unsigned version;
    const char *layout;   /* a layout name; NULL: every layout bids */
    int64_t iteration;    /* -1: the one the tracker names; else this one */
    ckpt_open_options open;
} ckpt_set_options;

#define CKPT_SET_OPTIONS_VERSION 1
#define CKPT_SET_OPTIONS_INIT { CKPT_SET_OPTIONS_VERSION, NULL, -1, CKPT_OPEN_OPTIONS_INIT }

/* Open a set at `path` (a checkpoint root, an iteration directory, ...). Nothing but the
 * directory listing and the tracker is read. Errors name the path and what is missing, with
 * class CKPT_ERRCLASS_LAYOUT for an incomplete or inconsistent set. */
CKPT_EXTERN(int) ckpt_set_open(ckpt_set **out, const char *path, const ckpt_set_options *opts);
CKPT_EXTERN(void) ckpt_set_close(ckpt_set *s);

CKPT_EXTERN(const ckpt_set_info *) ckpt_set_info_of(const ckpt_set *s);
CKPT_EXTERN(size_t) ckpt_set_member_count(const ckpt_set *s);
CKPT_EXTERN(const ckpt_member *) ckpt_set_member_at(const ckpt_set *s, size_t i);
/* The member at these coordinates with this role (NULL role: any); -1 when there is none. */
CKPT_EXTERN(long) ckpt_set_find(const ckpt_set *s, const ckpt_coords *at, const char *role);
/* Open member i (once; later calls return the same checkpoint), valid until ckpt_set_close. */
CKPT_EXTERN(int) ckpt_set_member_open(ckpt_set *s, size_t i, const ckpt_ckpt **out);
/* Total size of the member files. */
CKPT_EXTERN(uint64_t) ckpt_set_input_size(const ckpt_set *s);

/* Registered layouts, for --help. */
CKPT_EXTERN(size_t) ckpt_layout_count(void);
CKPT_EXTERN(const char *) ckpt_layout_at(size_t i, const char **description);

CKPT_END_DECL

#endif
