/* read -> write -> read gives the same tree, sharing included, and writing the same tree
 * twice gives the same bytes. The last input byte picks protocol 2 or 4. The writer may
 * refuse a tree only as CKPT_EINVALID: a global name with a newline at protocol 2, or a
 * cycle that only sets and tuples close (which Python cannot build). */
#include "fuzz.h"
#include "../unit/value_dump.h"

#include <ckpt.h>
#include <ckpt/sys/pickle.h>

#include <string.h>

typedef struct out {
    uint8_t *buf;
    size_t cap;
} out;

static int collect(uint64_t offset, const void *data, size_t len, void *payload)
{
    out *o = payload;
    FUZZ_ASSERT(offset + len <= o->cap);
    memcpy(o->buf + offset, data, len);
    return 0;
}

/* The written stream, or NULL when the writer refused the tree. */
static uint8_t *write_tree(const ckpt_value *v, int proto, size_t *len)
{
    ckpt_pickler *p;
    out o = { NULL, 0 };
    int rc;

    FUZZ_ASSERT(ckpt_pickler_new(&p, proto, NULL, NULL) == 0);
    rc = ckpt_pickler_begin(p);
    if (rc == 0)
        rc = ckpt_pickler_value(p, v);
    if (rc == 0)
        rc = ckpt_pickler_end(p);
    if (rc != 0) {
        FUZZ_ASSERT(rc == CKPT_EINVALID);
        ckpt_pickler_free(p);
        return NULL;
    }
    FUZZ_ASSERT(ckpt_pickler_hole_count(p) == 0);
    o.cap = (size_t)ckpt_pickler_size(p);
    o.buf = malloc(o.cap);
    FUZZ_ASSERT(o.buf != NULL);
    FUZZ_ASSERT(ckpt_pickler_emit(p, collect, &o) == 0);
    ckpt_pickler_free(p);
    *len = o.cap;
    return o.buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_arena *a;
    ckpt_value *v, *back;
    ckpt_buf before = CKPT_BUF_INIT, after = CKPT_BUF_INIT;
    uint8_t *first, *second;
    size_t len1 = 0, len2 = 0;
    int proto;

    if (size == 0 || ckpt_arena_new(&a) != 0)
        return 0;
    proto = (data[size - 1] & 1) ? 4 : 2;
    if (ckpt_pickle_read(&v, NULL, a, data, size, NULL) != 0) {
        ckpt_arena_free(a);
        return 0;
    }
    first = write_tree(v, proto, &len1);
    if (first) {
        second = write_tree(v, proto, &len2);
        FUZZ_ASSERT(second && len1 == len2 && memcmp(first, second, len1) == 0);
        FUZZ_ASSERT(ckpt_pickle_read(&back, NULL, a, first, len1, NULL) == 0);
        FUZZ_ASSERT(ckpt_test_dump(v, 1, &before) == 0);
        FUZZ_ASSERT(ckpt_test_dump(back, 1, &after) == 0);
        FUZZ_ASSERT(before.len == after.len && memcmp(before.data, after.data, before.len) == 0);
        free(second);
        free(first);
    }
    ckpt_buf_dispose(&before);
    ckpt_buf_dispose(&after);
    ckpt_arena_free(a);
    return 0;
}
