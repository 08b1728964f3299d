/* Hash index from tensor name to tensor index: checkpoints hold 100k+ tensors and every
 * mapping rule looks names up. */
#include "engine.h"

#include <string.h>

int ckpt_names__build(ckpt_strmap *ix, const ckpt_tensor *tensors, size_t n)
{
    size_t i;
    int rc;

    ckpt_strmap_dispose(ix);
    if ((rc = ckpt_strmap_reserve(ix, n)) < 0)
        return rc;
    for (i = 0; i < n; i++) {
        rc = ckpt_strmap_add(ix, tensors[i].name, strlen(tensors[i].name), i, NULL);
        if (rc < 0)
            return rc;
        if (rc == 1)
            return ckpt_error_set(CKPT_EFORMAT, "two tensors are named '%s'", tensors[i].name);
    }
    return 0;
}

long ckpt_names__find(const ckpt_strmap *ix, const char *name)
{
    uint64_t i;

    return ckpt_strmap_get(ix, name, strlen(name), &i) ? (long)i : -1;
}
