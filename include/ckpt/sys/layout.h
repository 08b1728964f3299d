/* For layout implementers: the vtable a layout module exports (formats/<name>_layout.c) and the
 * builder its list hook fills. A layout module knows one framework's directory scheme and
 * nothing else: it names the member files and their coordinates, and never opens a tensor. */
#ifndef CKPT_SYS_LAYOUT_H
#define CKPT_SYS_LAYOUT_H

#include "../set.h"
#include "common.h"

CKPT_BEGIN_DECL

#define CKPT_LAYOUT_ABI_VERSION 1

typedef struct ckpt_set_builder ckpt_set_builder;

/* Add a member; rel is relative to the root given with ckpt_set_builder_info (copied). */
CKPT_EXTERN(int) ckpt_set_builder_add(ckpt_set_builder *b, const char *rel, const ckpt_coords *at, const char *role);
/* The set's info (strings copied); sizes not given (0) are derived from the members. */
CKPT_EXTERN(int) ckpt_set_builder_info(ckpt_set_builder *b, const ckpt_set_info *info);
CKPT_EXTERN(const ckpt_set_options *) ckpt_set_builder_options(const ckpt_set_builder *b);

typedef struct ckpt_layout_vtable {
    unsigned abi_version; /* CKPT_LAYOUT_ABI_VERSION */
    const char *name;
    const char *description;
    /* -1 not mine, else how sure (as format bids). */
    int (*bid)(const char *path, int is_dir);
    /* Name the members of the set at path. */
    int (*list)(ckpt_set_builder *b, const char *path);
} ckpt_layout_vtable;

CKPT_END_DECL

#endif
