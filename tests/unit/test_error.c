/* The last error: code, class and message set together, kept by prefixing, reset by
 * clearing, carried from a worker thread to the one that waits; class values and names
 * fixed, since callers branch on them. */
#include "test.h"

#include <ckpt/sys/common.h>

#include <pthread.h>

CKPT_TEST(test_error_setc_records_code_class_and_message)
{
    ASSERT_EQ_INT(ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: %d ranks", "ckpt", 3), CKPT_EFORMAT);
    ASSERT_EQ_INT(ckpt_error_last()->code, CKPT_EFORMAT);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_EQ_STR(ckpt_error_last()->message, "ckpt: 3 ranks");
}

CKPT_TEST(test_error_set_derives_the_class_from_the_code)
{
    ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP, "before");
    ASSERT_EQ_INT(ckpt_error_set(CKPT_EFORMAT, "no class"), CKPT_EFORMAT);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_NONE);
    ckpt_error_set(CKPT_ENOTFOUND, "x");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_NONE);
    ckpt_error_set(CKPT_EIO, "a.pt: read failed");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_OS);
    ckpt_error_set(CKPT_ENOMEM, "no room");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_NOMEMORY);
    ASSERT_EQ_INT(ckpt_error_oom(), CKPT_ENOMEM);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_NOMEMORY);
    ASSERT_EQ_STR(ckpt_error_last()->message, "out of memory");
}

CKPT_TEST(test_error_prefix_keeps_code_and_class)
{
    ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MAP_PARAM, "needs model parameter 'n'");
    ckpt_error_prefix("%s/%s", "dir", "model_state.pdparams");
    ASSERT_EQ_STR(ckpt_error_last()->message, "dir/model_state.pdparams: needs model parameter 'n'");
    ASSERT_EQ_INT(ckpt_error_last()->code, CKPT_ENOTFOUND);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP_PARAM);
}

CKPT_TEST(test_error_clear_resets_the_class)
{
    ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP_DIRECTION, "use the inverse");
    ckpt_error_clear();
    ASSERT_EQ_INT(ckpt_error_last()->code, CKPT_OK);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_NONE);
    ASSERT_EQ_STR(ckpt_error_last()->message, "");
}

CKPT_TEST(test_error_class_values_are_fixed)
{
    ASSERT_EQ_INT(CKPT_ERRCLASS_NONE, 0);
    ASSERT_EQ_INT(CKPT_ERRCLASS_NOMEMORY, 1);
    ASSERT_EQ_INT(CKPT_ERRCLASS_OS, 2);
    ASSERT_EQ_INT(CKPT_ERRCLASS_FORMAT, 3);
    ASSERT_EQ_INT(CKPT_ERRCLASS_PICKLE, 4);
    ASSERT_EQ_INT(CKPT_ERRCLASS_ZIP, 5);
    ASSERT_EQ_INT(CKPT_ERRCLASS_MAP, 6);
    ASSERT_EQ_INT(CKPT_ERRCLASS_GRAPH, 7);
    ASSERT_EQ_INT(CKPT_ERRCLASS_MAP_PARAM, 8);
    ASSERT_EQ_INT(CKPT_ERRCLASS_MAP_DIRECTION, 9);
    ASSERT_EQ_INT(CKPT_ERRCLASS_LAYOUT, 10);
    ASSERT_EQ_INT(CKPT_ERRCLASS_BACKEND, 11);
    ASSERT_EQ_INT(CKPT_ERRCLASS_MODEL, 12);
    ASSERT_EQ_INT(CKPT_ERRCLASS_ARGUMENT, 13);
}

CKPT_TEST(test_error_class_names)
{
    int k;

    ASSERT_EQ_STR(ckpt_error_class_name(CKPT_ERRCLASS_NONE), "none");
    ASSERT_EQ_STR(ckpt_error_class_name(CKPT_ERRCLASS_MAP_PARAM), "map parameter");
    ASSERT_EQ_STR(ckpt_error_class_name(CKPT_ERRCLASS_MAP_DIRECTION), "map direction");
    ASSERT_EQ_STR(ckpt_error_class_name(CKPT_ERRCLASS_LAYOUT), "layout");
    ASSERT_EQ_STR(ckpt_error_class_name(-1), "unknown");
    ASSERT_EQ_STR(ckpt_error_class_name(CKPT_ERRCLASS_BACKEND), "backend");
    ASSERT_EQ_STR(ckpt_error_class_name(CKPT_ERRCLASS_MODEL), "model");
    ASSERT_EQ_STR(ckpt_error_class_name(CKPT_ERRCLASS_ARGUMENT), "argument");
    ASSERT_EQ_STR(ckpt_error_class_name(CKPT_ERRCLASS_ARGUMENT + 1), "unknown");
    /* a caller that prints the class must be able to tell the classes apart */
    for (k = CKPT_ERRCLASS_NONE; k <= CKPT_ERRCLASS_MODEL; k++) {
        int j;
        ASSERT_TRUE(strcmp(ckpt_error_class_name(k), "unknown") != 0);
        for (j = CKPT_ERRCLASS_NONE; j < k; j++)
            ASSERT_TRUE(strcmp(ckpt_error_class_name(j), ckpt_error_class_name(k)) != 0);
    }
}

static void *fail_in_worker(void *arg)
{
    ckpt_error_first_record(arg, ckpt_error_setc(CKPT_EIO, CKPT_ERRCLASS_OS, "shard.bin: file ends at offset 7"));
    return NULL;
}

CKPT_TEST(test_error_first_carries_a_worker_failure_to_the_waiting_thread)
{
    ckpt_error_first first = { 0 };
    pthread_t worker;

    ckpt_error_clear();
    ASSERT_EQ_INT(ckpt_error_first_raise(&first), 0);
    ASSERT_EQ_INT(pthread_create(&worker, NULL, fail_in_worker, &first), 0);
    ASSERT_EQ_INT(pthread_join(worker, NULL), 0);
    ASSERT_EQ_INT(ckpt_error_last()->code, CKPT_OK); /* the worker's error is its own */
    ASSERT_EQ_INT(ckpt_error_first_raise(&first), CKPT_EIO);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_OS);
    ASSERT_EQ_STR(ckpt_error_last()->message, "shard.bin: file ends at offset 7");
}

CKPT_TEST(test_error_first_keeps_the_first_failure)
{
    ckpt_error_first first = { 0 };

    ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_ZIP, "first");
    ckpt_error_first_record(&first, CKPT_EFORMAT);
    ckpt_error_oom();
    ckpt_error_first_record(&first, CKPT_ENOMEM);
    ASSERT_EQ_INT(ckpt_error_first_raise(&first), CKPT_EFORMAT);
    ASSERT_EQ_STR(ckpt_error_last()->message, "first");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ZIP);
}
