/* Any input either fails with a format error naming its source, or gives a tree that
 * walks within the reader's depth limit and stays within a bounded multiple of the
 * input's size. */
#include "fuzz.h"

#include <ckpt.h>
#include <ckpt/sys/pickle.h>

#include <string.h>

static int visit(const ckpt_value *v, const char *path, void *payload)
{
    char buf[96];

    (void)path;
    ckpt_value_repr(v, buf, sizeof buf);
    FUZZ_ASSERT(strlen(buf) < sizeof buf);
    (*(size_t *)payload)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_pickle_read_options o = CKPT_PICKLE_READ_OPTIONS_INIT;
    ckpt_arena *a;
    ckpt_value *v = NULL;
    size_t end = 0, nodes = 0;
    char buf[256];
    int rc;

    if (ckpt_arena_new(&a) != 0)
        return 0;
    o.source = "fuzz.pkl";
    rc = ckpt_pickle_read(&v, &end, a, data, size, &o);
    if (rc == 0) {
        FUZZ_ASSERT(v != NULL && end > 0 && end <= size && data[end - 1] == '.');
        FUZZ_ASSERT(ckpt_value_walk(v, 512, visit, &nodes) == 0);
        FUZZ_ASSERT(nodes <= 2 * size + 64);
        FUZZ_ASSERT(ckpt_value_repr(v, buf, sizeof buf) < sizeof buf);
    } else {
        FUZZ_ASSERT(rc == CKPT_EFORMAT || rc == CKPT_EUNSUPPORTED);
        FUZZ_ASSERT(v == NULL);
        FUZZ_ASSERT(strstr(ckpt_error_last()->message, "fuzz.pkl: pickle") != NULL);
    }
    FUZZ_ASSERT(ckpt_arena_used(a) <= 1024 * size + ((size_t)1 << 22));
    ckpt_arena_free(a);
    return 0;
}
