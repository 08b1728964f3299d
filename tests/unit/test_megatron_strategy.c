/* ckpt_megatron_strategy_read (formats/megatron/megatron_strategy.c): Galvatron strategy
 * files as TP and PP sizes, and the code and class of each refusal. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>

static void write_text(const char *path, const char *text)
{
    ckpt_test_write_file(path, text, strlen(text));
}

CKPT_TEST(test_strategy_uniform_tp)
{
    int tp = 0, pp = 0;

    write_text("s.json", "{\"pp_size\": 2, \"tp_size_list\": [4, 4, 4, 4], \"other\": 1}");
    ASSERT_OK(ckpt_megatron_strategy_read(&tp, &pp, "s.json"));
    ASSERT_EQ_INT(tp, 4);
    ASSERT_EQ_INT(pp, 2);
}

CKPT_TEST(test_strategy_refusals)
{
    int tp = 7, pp = 7;
    char *big;

    write_text("per_layer.json", "{\"pp_size\": 1, \"tp_size_list\": [2, 1, 2]}");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_megatron_strategy_read(&tp, &pp, "per_layer.json"));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_EQ_STR(ckpt_error_last()->message, "per_layer.json: tp_size_list must hold one size for every layer "
                                              "(per-layer TP sizes are not supported)");

    write_text("empty.json", "{\"pp_size\": 1, \"tp_size_list\": []}");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_megatron_strategy_read(&tp, &pp, "empty.json"));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_FORMAT);
    write_text("text.json", "pp_size = 2");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_megatron_strategy_read(&tp, &pp, "text.json"));
    ASSERT_ERROR_MENTIONS("text.json: expected {\"pp_size\": M, \"tp_size_list\": [N, ...]}");

    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_megatron_strategy_read(&tp, &pp, "missing.json"));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_OS);
    ASSERT_TRUE(mkdir("dir.json", 0755) == 0);
    ASSERT_FAILS(CKPT_EIO, ckpt_megatron_strategy_read(&tp, &pp, "dir.json"));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_OS);

    /* not read at all when far larger than a strategy file can be */
    big = calloc(1, (1 << 20) + 2);
    ASSERT_TRUE(big != NULL);
    memset(big, ' ', (1 << 20) + 1);
    write_text("big.json", big);
    free(big);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_megatron_strategy_read(&tp, &pp, "big.json"));
    ASSERT_ERROR_MENTIONS("too large for a strategy file");
    ASSERT_EQ_INT(tp, 7);
    ASSERT_EQ_INT(pp, 7);
}
