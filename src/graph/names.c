/* Hash index from tensor name to tensor index: checkpoints hold 100k+ tensors and every
 * mapping rule looks names up. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    while (*s) {
        h ^= (unsigned char)*s++;
        h *= 1099511628211ull;
    }
    return h;
}

int ckpt_names__build(ckpt_name_index *ix, const ckpt_tensor *tensors, size_t n)
{
    size_t cap = 16, i;

    while (cap < n * 2) {
        if (cap > SIZE_MAX / 4)
            return ckpt_error_oom();
        cap *= 2;
    }
    free(ix->slots);
    ix->slots = calloc(cap, sizeof *ix->slots);
    if (!ix->slots) {
        ix->cap = 0;
        return ckpt_error_oom();
    }
    ix->cap = cap;
    for (i = 0; i < n; i++) {
        size_t slot = (size_t)hash_name(tensors[i].name) & (cap - 1);
        while (ix->slots[slot]) {
            if (strcmp(tensors[ix->slots[slot] - 1].name, tensors[i].name) == 0)
                return ckpt_error_set(CKPT_EFORMAT, "two tensors are named '%s'", tensors[i].name);
            slot = (slot + 1) & (cap - 1);
        }
        ix->slots[slot] = i + 1;
    }
    return 0;
}

long ckpt_names__find(const ckpt_name_index *ix, const ckpt_tensor *tensors, const char *name)
{
    size_t slot;

    if (!ix->cap)
        return -1;
    slot = (size_t)hash_name(name) & (ix->cap - 1);
    while (ix->slots[slot]) {
        size_t i = ix->slots[slot] - 1;
        if (strcmp(tensors[i].name, name) == 0)
            return (long)i;
        slot = (slot + 1) & (ix->cap - 1);
    }
    return -1;
}

void ckpt_names__free(ckpt_name_index *ix)
{
    free(ix->slots);
    ix->slots = NULL;
    ix->cap = 0;
}
