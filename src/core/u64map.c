/* Open addressing with linear probing over key/value pairs stored together (one cache
 * line per probe); the table doubles at half load, so probes stay short even for
 * adversarial index sequences (keys are mixed before use). */
#include "u64map.h"

#include <ckpt/sys/common.h>

#include <stdlib.h>
#include <string.h>

#define EMPTY UINT64_MAX

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static int grow(ckpt_u64map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64, i, j;
    ckpt_u64map_slot *slots;

    if (cap > SIZE_MAX / sizeof *slots)
        return ckpt_error_oom();
    if (!(slots = malloc(cap * sizeof *slots)))
        return ckpt_error_oom();
    memset(slots, 0xff, cap * sizeof *slots);
    for (i = 0; i < m->cap; i++) {
        if (m->slots[i].key == EMPTY)
            continue;
        for (j = (size_t)mix(m->slots[i].key) & (cap - 1); slots[j].key != EMPTY; j = (j + 1) & (cap - 1))
            ;
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int ckpt_u64map__put(ckpt_u64map *m, uint64_t key, uint64_t val)
{
    size_t j;
    int rc;

    CKPT_ASSERT(key != EMPTY);
    if ((m->n + 1) * 2 > m->cap && (rc = grow(m)) != 0)
        return rc;
    for (j = (size_t)mix(key) & (m->cap - 1); m->slots[j].key != EMPTY; j = (j + 1) & (m->cap - 1)) {
        if (m->slots[j].key == key) {
            m->slots[j].val = val;
            return 0;
        }
    }
    m->slots[j].key = key;
    m->slots[j].val = val;
    m->n++;
    return 0;
}

int ckpt_u64map__get(const ckpt_u64map *m, uint64_t key, uint64_t *val)
{
    size_t j;

    if (!m->cap || key == EMPTY)
        return 0;
    for (j = (size_t)mix(key) & (m->cap - 1); m->slots[j].key != EMPTY; j = (j + 1) & (m->cap - 1)) {
        if (m->slots[j].key == key) {
            if (val)
                *val = m->slots[j].val;
            return 1;
        }
    }
    return 0;
}

void ckpt_u64map__dispose(ckpt_u64map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->n = m->cap = 0;
}
