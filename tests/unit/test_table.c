/* The string map and the u64 map/set (src/core/table.c): add keeps the first value, set
 * replaces, lookups find exactly the keys given (bytes, not C strings), 1e5 keys, and a
 * failed allocation leaves the table as it was. The executable is linked with
 * --wrap=malloc,calloc so that allocations can be made to fail. */
#include "test.h"

#include <ckpt/sys/table.h>

#include <stdio.h>
#include <stdlib.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);

static int allocs_fail;

void *__wrap_malloc(size_t n)
{
    return allocs_fail ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return allocs_fail ? NULL : __real_calloc(n, size);
}

#define N_MANY 100000

CKPT_TEST(test_strmap_add_set_get)
{
    ckpt_strmap m = CKPT_STRMAP_INIT;
    uint64_t v = 99;

    ASSERT_EQ_INT(ckpt_strmap_get(&m, "a", 1, &v), 0);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, "a", 1, 1, NULL), 0);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, "b", 1, 2, NULL), 0);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "a", 1, &v), 1);
    ASSERT_EQ_INT(v, 1);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "b", 1, NULL), 1);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "c", 1, &v), 0);
    ASSERT_EQ_INT(v, 1);
    ASSERT_OK(ckpt_strmap_set(&m, "a", 1, 10));
    ASSERT_OK(ckpt_strmap_set(&m, "c", 1, 3));
    ASSERT_EQ_INT(m.n, 3);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "a", 1, &v), 1);
    ASSERT_EQ_INT(v, 10);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "c", 1, &v), 1);
    ASSERT_EQ_INT(v, 3);
    ckpt_strmap_dispose(&m);
    ASSERT_EQ_INT(m.n, 0);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "a", 1, &v), 0);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, "a", 1, 5, NULL), 0);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "a", 1, &v), 1);
    ASSERT_EQ_INT(v, 5);
    ckpt_strmap_dispose(&m);
}

/* add never replaces: the first value stays and is reported; the caller decides which
 * duplicate wins (safetensors and map rules: the first; names: an error). */
CKPT_TEST(test_strmap_duplicates)
{
    ckpt_strmap m = CKPT_STRMAP_INIT;
    uint64_t v = 0, existing = 0;

    ASSERT_EQ_INT(ckpt_strmap_add(&m, "w", 1, 7, &existing), 0);
    ASSERT_EQ_INT(existing, 0);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, "w", 1, 8, &existing), 1);
    ASSERT_EQ_INT(existing, 7);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, "w", 1, 9, NULL), 1);
    ASSERT_EQ_INT(m.n, 1);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "w", 1, &v), 1);
    ASSERT_EQ_INT(v, 7);
    ASSERT_OK(ckpt_strmap_set(&m, "w", 1, 9));
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "w", 1, &v), 1);
    ASSERT_EQ_INT(v, 9);
    ASSERT_EQ_INT(m.n, 1);
    ckpt_strmap_dispose(&m);
}

/* Keys are (bytes, length): a prefix, an embedded NUL and the empty key are keys of their own. */
CKPT_TEST(test_strmap_keys_are_bytes)
{
    static const char k[] = "ab\0cd";
    ckpt_strmap m = CKPT_STRMAP_INIT;
    uint64_t v = 0;

    ASSERT_EQ_INT(ckpt_strmap_add(&m, k, 5, 1, NULL), 0);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, k, 2, 2, NULL), 0);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, k, 3, 3, NULL), 0);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, "", 0, 4, NULL), 0);
    ASSERT_EQ_INT(ckpt_strmap_add(&m, "ab", 2, 5, &v), 1);
    ASSERT_EQ_INT(v, 2);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "ab\0cd", 5, &v), 1);
    ASSERT_EQ_INT(v, 1);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "ab\0", 3, &v), 1);
    ASSERT_EQ_INT(v, 3);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "x", 0, &v), 1);
    ASSERT_EQ_INT(v, 4);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "ab\0c", 4, &v), 0);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, "a", 1, &v), 0);
    ASSERT_EQ_INT(m.n, 4);
    ckpt_strmap_dispose(&m);
}

CKPT_TEST(test_strmap_many_keys)
{
    ckpt_strmap m = CKPT_STRMAP_INIT;
    char *names = malloc((size_t)N_MANY * 48), probe[48];
    size_t i, cap;
    uint64_t v;

    ASSERT_TRUE(names);
    for (i = 0; i < N_MANY; i++) {
        snprintf(names + i * 48, 48, "model.layers.%zu.self_attn.q_proj.weight", i);
        if (ckpt_strmap_add(&m, names + i * 48, strlen(names + i * 48), i, NULL) != 0)
            break;
    }
    ASSERT_EQ_INT(i, N_MANY);
    ASSERT_EQ_INT(m.n, N_MANY);
    for (i = 0; i < N_MANY; i++) {
        snprintf(probe, sizeof probe, "model.layers.%zu.self_attn.q_proj.weight", i);
        if (!ckpt_strmap_get(&m, probe, strlen(probe), &v) || v != i)
            break;
        snprintf(probe, sizeof probe, "model.layers.%zu.self_attn.k_proj.weight", i);
        if (ckpt_strmap_get(&m, probe, strlen(probe), NULL))
            break;
    }
    ASSERT_EQ_INT(i, N_MANY);
    ckpt_strmap_dispose(&m);

    /* reserved up front, the table does not grow while it fills */
    ASSERT_OK(ckpt_strmap_reserve(&m, N_MANY));
    cap = m.cap;
    ASSERT_TRUE(cap >= 2 * N_MANY);
    for (i = 0; i < N_MANY; i++)
        if (ckpt_strmap_set(&m, names + i * 48, strlen(names + i * 48), i) != 0)
            break;
    ASSERT_EQ_INT(i, N_MANY);
    ASSERT_EQ_INT(m.cap, cap);
    ckpt_strmap_dispose(&m);
    free(names);
}

CKPT_TEST(test_strmap_out_of_memory)
{
    ckpt_strmap m = CKPT_STRMAP_INIT;
    char keys[64][8];
    uint64_t v;
    size_t i, cap;
    int rc;

    /* a size whose slots cannot be counted in bytes fails before allocating */
    ASSERT_FAILS(CKPT_ENOMEM, ckpt_strmap_reserve(&m, SIZE_MAX / 2));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_NOMEMORY);
    ASSERT_EQ_INT(m.cap, 0);

    /* the first allocation fails */
    allocs_fail = 1;
    rc = ckpt_strmap_add(&m, "a", 1, 1, NULL);
    allocs_fail = 0;
    ASSERT_EQ_INT(rc, CKPT_ENOMEM);
    ASSERT_EQ_INT(m.n, 0);

    /* growing fails: every key is still there, and the map goes on working */
    for (i = 0; i < 64; i++)
        snprintf(keys[i], sizeof keys[i], "k%zu", i);
    for (i = 0, rc = 0; i < 64 && rc >= 0; i++) {
        if (m.cap && (m.n + 1) * 2 > m.cap)
            allocs_fail = 1;
        rc = ckpt_strmap_add(&m, keys[i], strlen(keys[i]), i, NULL);
        allocs_fail = 0;
    }
    ASSERT_EQ_INT(rc, CKPT_ENOMEM);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_NOMEMORY);
    cap = m.cap;
    ASSERT_EQ_INT(m.n, i - 1);
    ASSERT_EQ_INT(m.n * 2, cap);
    for (i = 0; i < m.n; i++)
        ASSERT_TRUE(ckpt_strmap_get(&m, keys[i], strlen(keys[i]), &v) && v == i);
    ASSERT_EQ_INT(ckpt_strmap_get(&m, keys[m.n], strlen(keys[m.n]), NULL), 0);
    allocs_fail = 1;
    rc = ckpt_strmap_set(&m, keys[m.n], strlen(keys[m.n]), 0);
    allocs_fail = 0;
    ASSERT_EQ_INT(rc, CKPT_ENOMEM);
    ASSERT_OK(ckpt_strmap_set(&m, keys[m.n], strlen(keys[m.n]), 0));
    ASSERT_TRUE(m.cap > cap);
    ckpt_strmap_dispose(&m);
}

CKPT_TEST(test_u64map_set_get)
{
    ckpt_u64map m = CKPT_U64MAP_INIT;
    uint64_t v = 0;
    int x, y;

    ASSERT_EQ_INT(ckpt_u64map_get(&m, 0, &v), 0);
    ASSERT_OK(ckpt_u64map_set(&m, 0, 100));
    ASSERT_OK(ckpt_u64map_set(&m, ckpt_u64map_ptrkey(&x), 1));
    ASSERT_OK(ckpt_u64map_set(&m, ckpt_u64map_ptrkey(&y), 2));
    ASSERT_OK(ckpt_u64map_set(&m, UINT64_MAX - 1, 3));
    ASSERT_EQ_INT(m.n, 4);
    ASSERT_EQ_INT(ckpt_u64map_get(&m, 0, &v), 1);
    ASSERT_EQ_INT(v, 100);
    ASSERT_EQ_INT(ckpt_u64map_get(&m, ckpt_u64map_ptrkey(&y), &v), 1);
    ASSERT_EQ_INT(v, 2);
    ASSERT_OK(ckpt_u64map_set(&m, ckpt_u64map_ptrkey(&y), 20));
    ASSERT_EQ_INT(ckpt_u64map_get(&m, ckpt_u64map_ptrkey(&y), &v), 1);
    ASSERT_EQ_INT(v, 20);
    ASSERT_EQ_INT(m.n, 4);
    ASSERT_EQ_INT(ckpt_u64map_get(&m, UINT64_MAX - 1, NULL), 1);
    ASSERT_EQ_INT(ckpt_u64map_get(&m, 1, NULL), 0);
    /* the empty-slot marker is no key */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_u64map_set(&m, UINT64_MAX, 1));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_u64set_add(&m, UINT64_MAX));
    ASSERT_EQ_INT(ckpt_u64map_get(&m, UINT64_MAX, &v), 0);
    ASSERT_EQ_INT(m.n, 4);
    ckpt_u64map_dispose(&m);
    ASSERT_EQ_INT(ckpt_u64map_get(&m, 0, NULL), 0);
}

CKPT_TEST(test_u64set_many_keys)
{
    ckpt_u64map s = CKPT_U64MAP_INIT;
    uint64_t i, v;

    /* keys that differ only in their high bits (addresses, file offsets) spread too */
    for (i = 0; i < N_MANY; i++)
        if (ckpt_u64set_add(&s, i << 32) != 1)
            break;
    ASSERT_EQ_INT(i, N_MANY);
    for (i = 0; i < N_MANY; i += 7)
        if (ckpt_u64set_add(&s, i << 32) != 0)
            break;
    ASSERT_TRUE(i >= N_MANY);
    ASSERT_EQ_INT(s.n, N_MANY);
    for (i = 0; i < N_MANY; i++)
        if (!ckpt_u64map_get(&s, i << 32, &v) || ckpt_u64map_get(&s, (i << 32) + 1, NULL))
            break;
    ASSERT_EQ_INT(i, N_MANY);
    ckpt_u64map_dispose(&s);
}

CKPT_TEST(test_u64map_out_of_memory)
{
    ckpt_u64map m = CKPT_U64MAP_INIT;
    uint64_t i, v;
    int rc;

    allocs_fail = 1;
    rc = ckpt_u64set_add(&m, 5);
    allocs_fail = 0;
    ASSERT_EQ_INT(rc, CKPT_ENOMEM);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_NOMEMORY);
    for (i = 0, rc = 0; i < 100 && rc >= 0; i++) {
        if (m.cap && (m.n + 1) * 2 > m.cap)
            allocs_fail = 1;
        rc = ckpt_u64map_set(&m, i, i * 3);
        allocs_fail = 0;
    }
    ASSERT_EQ_INT(rc, CKPT_ENOMEM);
    ASSERT_EQ_INT(m.n, i - 1);
    for (i = 0; i < m.n; i++)
        ASSERT_TRUE(ckpt_u64map_get(&m, i, &v) && v == i * 3);
    ASSERT_EQ_INT(ckpt_u64map_get(&m, m.n, NULL), 0);
    ckpt_u64map_dispose(&m);
}
