/* Value-tree internals used by the pickle reader: dict insertion with a hash the caller
 * has already computed (and may cache for memo-shared keys), and a leaner walk. */
#ifndef CKPT_VALUE_PRIVATE_H
#define CKPT_VALUE_PRIVATE_H

#ifndef CKPT_BUILD
#error "value_private.h is private to the library"
#endif

#include <ckpt/value.h>

/* The hash ckpt_value_dict_set uses for `key`: equal keys (per its rules) hash equal. */
uint64_t ckpt_value__key_hash(const ckpt_value *key);
/* ckpt_value_dict_set with `hash` == ckpt_value__key_hash(key). */
int ckpt_value__dict_set_hashed(ckpt_arena *a, ckpt_value *dict, ckpt_value *key, uint64_t hash,
                                ckpt_value *val);
/* Whether a node may be reached more than once, so that a walk must remember it. */
typedef int (*ckpt_value_shared_fn)(const ckpt_value *v, void *payload);
/* ckpt_value_walk's engine. With `shared` NULL it is ckpt_value_walk. Otherwise no paths
 * are built (the visit gets NULL; a depth failure still names the path) and only nodes
 * that `shared` approves are remembered: for a tree whose producer knows which nodes
 * have several parents, that is the same walk at a fraction of the cost. */
int ckpt_value__walk(const ckpt_value *root, unsigned max_depth, ckpt_value_shared_fn shared, ckpt_value_visit_fn fn,
                     void *payload);
/* Module name with py2 spellings mapped to py3 (`__builtin__` -> `builtins`). */
const char *ckpt_value__py3_module(const char *module);

#endif
