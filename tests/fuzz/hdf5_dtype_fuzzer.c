/* The HDF5 reader's type rules on hostile descriptions: a datatype (as libhdf5 would
 * describe it) and a "dtype" attribute or opaque tag, both from the input. Whatever is
 * accepted must be one of our types, of the datatype's size, and a rejection must say why. */
#define CKPT_FUZZ_HDF5
#include "../../formats/hdf5_private.h"
#include "fuzz.h"

#include <string.h>

static size_t take(const uint8_t **p, size_t *n)
{
    size_t v = 0;

    if (*n) {
        v = **p;
        (*p)++;
        (*n)--;
    }
    return v;
}

static void atom(ckpt_h5_atom *a, const uint8_t **p, size_t *n)
{
    static const size_t sizes[] = { 1, 2, 4, 8, 3, 16 };

    a->cls = (ckpt_h5_class)(take(p, n) % 6);
    a->size = sizes[take(p, n) % 6];
    a->big_endian = (int)(take(p, n) & 1);
    a->is_signed = (int)(take(p, n) & 1);
    a->precision = take(p, n) & 1 ? take(p, n) : a->size * 8;
    a->bit_offset = take(p, n) % 3 == 0;
    a->spos = take(p, n);
    a->epos = take(p, n);
    a->esize = take(p, n);
    a->mpos = take(p, n);
    a->msize = take(p, n);
    a->ebias = take(p, n) * 8 + take(p, n);
    a->norm_implied = (int)(take(p, n) & 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = { "r", "i", "FALSE", "TRUE", "x" };
    ckpt_h5_type t;
    ckpt_dtype d;
    unsigned info;
    int swap, rc, k;
    char attr[64], tag[64], why[256];
    size_t len;

    memset(&t, 0, sizeof t);
    t.cls = (ckpt_h5_class)(take(&data, &size) % 6);
    atom(&t.atom, &data, &size);
    t.size = take(&data, &size) & 1 ? take(&data, &size) % 20 : t.atom.size;
    t.n_members = take(&data, &size) % 4;
    for (k = 0; k < CKPT_H5_MAX_MEMBERS; k++) {
        t.member_name[k] = take(&data, &size) & 1 ? names[take(&data, &size) % 5] : NULL;
        t.enum_value[k] = (int64_t)take(&data, &size) - 1;
        t.member_offset[k] = take(&data, &size) % 20;
        atom(&t.member[k], &data, &size);
    }
    len = take(&data, &size) % sizeof tag;
    len = len < size ? len : size;
    memcpy(tag, data, len);
    tag[len] = '\0';
    data += len;
    size -= len;
    t.tag = take(&data, &size) & 1 ? tag : NULL;
    len = size < sizeof attr - 1 ? size : sizeof attr - 1;
    memcpy(attr, data, len);
    attr[len] = '\0';

    rc = ckpt_hdf5__dtype(&t, len ? attr : NULL, &d, &swap, &info, why, sizeof why);
    if (rc == 0) {
        FUZZ_ASSERT(d > CKPT_DTYPE_INVALID && d < CKPT_DTYPE_COUNT);
        FUZZ_ASSERT(ckpt_dtype_size(d) == t.size);
        FUZZ_ASSERT(swap == 0 || swap == 1);
    } else {
        FUZZ_ASSERT(rc == CKPT_EUNSUPPORTED || rc == CKPT_EFORMAT);
        FUZZ_ASSERT(why[0] != '\0');
    }
    d = ckpt_hdf5__dtype_name(attr);
    FUZZ_ASSERT(d >= CKPT_DTYPE_INVALID && d < CKPT_DTYPE_COUNT);
    return 0;
}
