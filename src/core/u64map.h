/* A small open-addressing map from 64-bit keys to 64-bit values, for visited sets and
 * memo tables keyed by pointers or indices. Keys are hashed, so callers may use raw
 * pointers (cast through uintptr_t) or untrusted indices. UINT64_MAX is reserved as
 * the empty-slot marker and may not be used as a key. */
#ifndef CKPT_U64MAP_H
#define CKPT_U64MAP_H

#ifndef CKPT_BUILD
#error "u64map.h is private to the library"
#endif

#include <stddef.h>
#include <stdint.h>

typedef struct ckpt_u64map_slot {
    uint64_t key, val;
} ckpt_u64map_slot;

typedef struct ckpt_u64map {
    ckpt_u64map_slot *slots;
    size_t n, cap; /* cap is 0 or a power of two */
} ckpt_u64map;

#define CKPT_U64MAP_INIT { NULL, 0, 0 }

/* Insert or replace. 0, or CKPT_ENOMEM. */
int ckpt_u64map__put(ckpt_u64map *m, uint64_t key, uint64_t val);
/* 1 and *val (if non-NULL) when present, else 0. */
int ckpt_u64map__get(const ckpt_u64map *m, uint64_t key, uint64_t *val);
void ckpt_u64map__dispose(ckpt_u64map *m);

static inline uint64_t ckpt_u64map__ptrkey(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

#endif
