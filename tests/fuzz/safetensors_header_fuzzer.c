/* The safetensors header parser on hostile bytes: the input is a whole file (length,
 * JSON, data). It must never crash, and whatever it accepts must be sound: tensors that
 * tile the data section exactly, byte sizes that match dtype and shape, unique names. */
#define CKPT_FUZZ_SAFETENSORS
#include "../../formats/safetensors_private.h"
#include "fuzz.h"

#include <string.h>

static int span_cmp(const void *a, const void *b)
{
    const ckpt_st_entry *x = *(const ckpt_st_entry *const *)a, *y = *(const ckpt_st_entry *const *)b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static void check_accepted(const ckpt_st_header *h, uint64_t size)
{
    const ckpt_st_entry **order;
    uint64_t pos = 0;
    size_t i, j;

    FUZZ_ASSERT(h->header_len <= CKPT_ST_MAX_HEADER && h->data_offset == 8 + h->header_len);
    FUZZ_ASSERT(h->data_offset <= size);
    order = malloc((h->n_entries + 1) * sizeof *order);
    FUZZ_ASSERT(order);
    for (i = 0; i < h->n_entries; i++) {
        const ckpt_st_entry *e = &h->entries[i];
        uint64_t n = ckpt_dtype_size(e->dtype);
        int d;

        FUZZ_ASSERT(e->name && n > 0);
        FUZZ_ASSERT(e->ndim >= 0 && e->ndim <= CKPT_MAX_DIMS);
        FUZZ_ASSERT(ckpt_safetensors__dtype_to_ckpt(e->st_dtype) == e->dtype);
        for (d = 0; d < e->ndim; d++) {
            FUZZ_ASSERT(e->shape[d] >= 0);
            FUZZ_ASSERT(!CKPT_MUL_OVERFLOWS(n, (uint64_t)e->shape[d], &n));
        }
        FUZZ_ASSERT(e->end >= e->begin && e->end - e->begin == n);
        /* Names are few in a fuzz input; quadratic is fine here. */
        for (j = 0; j < i; j++)
            FUZZ_ASSERT(strcmp(h->entries[j].name, e->name) != 0);
        order[i] = e;
    }
    qsort(order, h->n_entries, sizeof *order, span_cmp);
    for (i = 0; i < h->n_entries; i++) {
        FUZZ_ASSERT(order[i]->begin == pos);
        pos = order[i]->end;
    }
    FUZZ_ASSERT(h->data_offset + pos == size);
    for (i = 0; i < h->n_meta; i++)
        FUZZ_ASSERT(h->meta[i].key && h->meta[i].value);
    free(order);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_st_header h;
    int rc = ckpt_safetensors__parse(&h, "fuzz.safetensors", data, size);

    if (rc == 0) {
        check_accepted(&h, size);
        ckpt_safetensors__header_dispose(&h);
    } else {
        FUZZ_ASSERT(rc == CKPT_EFORMAT || rc == CKPT_EUNSUPPORTED || rc == CKPT_ENOMEM);
        FUZZ_ASSERT(rc == CKPT_ENOMEM ||
                    strncmp(ckpt_error_last()->message, "fuzz.safetensors: safetensors: ", 31) == 0);
        FUZZ_ASSERT(h.json == NULL && h.entries == NULL && h.meta == NULL);
    }
    return 0;
}
