/* Format names: the registry answers for names, aliases and extensions, so that every
 * command line accepts the same spellings; conversion takes them too. */
#include "test.h"

CKPT_TEST(test_format_find_names)
{
    ASSERT_EQ_STR(ckpt_format_find("torch"), "torch");
    ASSERT_EQ_STR(ckpt_format_find("pdparams"), "pdparams");
    ASSERT_EQ_STR(ckpt_format_find("safetensors"), "safetensors");
    ASSERT_EQ_STR(ckpt_format_find("deepspeed_zero"), "deepspeed_zero");
}

CKPT_TEST(test_format_find_aliases)
{
    ASSERT_EQ_STR(ckpt_format_find("pytorch"), "torch");
    ASSERT_EQ_STR(ckpt_format_find("paddle"), "pdparams");
    ASSERT_EQ_STR(ckpt_format_find("st"), "safetensors");
    ASSERT_EQ_STR(ckpt_format_find("deepspeed"), "deepspeed_zero");
}

CKPT_TEST(test_format_find_extensions_with_or_without_dot)
{
    ASSERT_EQ_STR(ckpt_format_find("pt"), "torch");
    ASSERT_EQ_STR(ckpt_format_find(".pt"), "torch");
    ASSERT_EQ_STR(ckpt_format_find("pth"), "torch");
    ASSERT_EQ_STR(ckpt_format_find("bin"), "torch");
    ASSERT_EQ_STR(ckpt_format_find(".ckpt"), "torch");
    ASSERT_EQ_STR(ckpt_format_find(".pdparams"), "pdparams");
    ASSERT_EQ_STR(ckpt_format_find("pdopt"), "pdparams");
    ASSERT_EQ_STR(ckpt_format_find(".safetensors"), "safetensors");
}

CKPT_TEST(test_format_find_refuses_the_rest)
{
    ASSERT_TRUE(ckpt_format_find(NULL) == NULL);
    ASSERT_TRUE(ckpt_format_find("") == NULL);
    ASSERT_TRUE(ckpt_format_find(".") == NULL);
    ASSERT_TRUE(ckpt_format_find("Torch") == NULL);
    ASSERT_TRUE(ckpt_format_find("torc") == NULL);
    ASSERT_TRUE(ckpt_format_find("torchx") == NULL);
    ASSERT_TRUE(ckpt_format_find("p") == NULL);
    ASSERT_TRUE(ckpt_format_find("..pt") == NULL);
    ASSERT_TRUE(ckpt_format_find("model.pt") == NULL);
    ASSERT_TRUE(ckpt_format_find("pt ") == NULL);
    ASSERT_TRUE(ckpt_format_find("pt pth") == NULL);
}

/* Every registered name and extension leads back to its own format: no spelling is
 * claimed by two formats, and the answer is the registry's own string. */
CKPT_TEST(test_format_find_agrees_with_the_registry)
{
    size_t i;

    ASSERT_TRUE(ckpt_format_count() >= 4);
    for (i = 0; i < ckpt_format_count(); i++) {
        const char *ext, *name = ckpt_format_at(i, NULL, &ext);
        ASSERT_TRUE(ckpt_format_find(name) == name);
        while (*ext) {
            char one[32];
            size_t n = strcspn(ext, " ");
            ASSERT_TRUE(n < sizeof one);
            memcpy(one, ext, n);
            one[n] = '\0';
            ASSERT_EQ_STR(ckpt_format_find(one), name);
            ASSERT_EQ_STR(ckpt_format_find(one + 1), name);
            ASSERT_EQ_STR(ckpt_format_for_path(one), name);
            ext += n + strspn(ext + n, " ");
        }
    }
}

/* Conversion takes an alias or an extension for its output format. */
CKPT_TEST(test_format_convert_takes_aliases)
{
    static const char *const spellings[] = { "st", ".safetensors", "safetensors" };
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_ckpt *c;
    size_t i;

    ASSERT_OK(ckpt_open(&c, ckpt_test_data("sample/tiny_llama.pt"), NULL));
    for (i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        char out[64];
        ckpt_ckpt *back;
        snprintf(out, sizeof out, "out%zu.weights", i);
        o.format = spellings[i];
        ASSERT_OK(ckpt_convert(c, out, &o, NULL));
        ASSERT_OK(ckpt_open(&back, out, NULL));
        ASSERT_EQ_STR(ckpt_format_name(back), "safetensors");
        ASSERT_EQ_INT(ckpt_tensor_count(back), ckpt_tensor_count(c));
        ckpt_close(back);
    }
    o.format = "deepspeed";
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_convert(c, "zero.out", &o, NULL));
    ASSERT_ERROR_MENTIONS("format 'deepspeed_zero' cannot be written");
    o.format = "nope";
    ASSERT_FAILS(CKPT_EINVALID, ckpt_convert(c, "nope.out", &o, NULL));
    ASSERT_ERROR_MENTIONS("unknown output format 'nope'");
    ckpt_close(c);
}
