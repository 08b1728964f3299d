/* For library and format implementers: the one string map and the one 64-bit map/set.
 * Both are embeddable (zero-initialise with the INIT macro, release with *_dispose), hash
 * their keys (so untrusted names and raw pointers are fine keys) and keep probes short by
 * growing at half load. Nothing iterates them: they answer lookups only. */
#ifndef CKPT_SYS_TABLE_H
#define CKPT_SYS_TABLE_H

#include "common.h"

CKPT_BEGIN_DECL

/* String keys (bytes, not NUL-terminated; NULL with length 0 is the empty key) to 64-bit
 * values. Keys are borrowed: the bytes must outlive the map (tensor names, arena strings). */
typedef struct ckpt_strmap {
    struct ckpt_strmap_slot *slots;
    size_t n, cap; /* n keys; cap 0 or a power of two */
} ckpt_strmap;
#define CKPT_STRMAP_INIT { NULL, 0, 0 }

/* Add key -> val unless the key is there: 0 added; 1 already there (*existing, if non-NULL,
 * gets its value, which stays); CKPT_ENOMEM. */
CKPT_EXTERN(int) ckpt_strmap_add(ckpt_strmap *m, const char *key, size_t len, uint64_t val, uint64_t *existing);
/* Insert or replace: 0 or CKPT_ENOMEM. */
CKPT_EXTERN(int) ckpt_strmap_set(ckpt_strmap *m, const char *key, size_t len, uint64_t val);
/* 1 and *val (if non-NULL) when the key is there, else 0. */
CKPT_EXTERN(int) ckpt_strmap_get(const ckpt_strmap *m, const char *key, size_t len, uint64_t *val);
/* Room for n keys in all without growing again: 0 or CKPT_ENOMEM. */
CKPT_EXTERN(int) ckpt_strmap_reserve(ckpt_strmap *m, size_t n);
/* Free the slots (not the keys); the map is empty and usable again. */
CKPT_EXTERN(void) ckpt_strmap_dispose(ckpt_strmap *m);

/* 64-bit keys to 64-bit values, or a set of keys (values unused). UINT64_MAX marks empty
 * slots: it is never a key (set and add refuse it with CKPT_EINVALID, get never finds it). */
typedef struct ckpt_u64map {
    struct ckpt_u64map_slot *slots;
    size_t n, cap; /* n keys; cap 0 or a power of two */
} ckpt_u64map;
#define CKPT_U64MAP_INIT { NULL, 0, 0 }

/* Insert or replace: 0, CKPT_ENOMEM or CKPT_EINVALID. */
CKPT_EXTERN(int) ckpt_u64map_set(ckpt_u64map *m, uint64_t key, uint64_t val);
/* 1 and *val (if non-NULL) when the key is there, else 0. */
CKPT_EXTERN(int) ckpt_u64map_get(const ckpt_u64map *m, uint64_t key, uint64_t *val);
/* Set use: 1 added, 0 already there, CKPT_ENOMEM or CKPT_EINVALID. */
CKPT_EXTERN(int) ckpt_u64set_add(ckpt_u64map *s, uint64_t key);
/* Free the slots; the map is empty and usable again. */
CKPT_EXTERN(void) ckpt_u64map_dispose(ckpt_u64map *m);

/* A pointer as a key (never UINT64_MAX on the platforms the library supports). */
static inline uint64_t ckpt_u64map_ptrkey(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

CKPT_END_DECL

#endif
