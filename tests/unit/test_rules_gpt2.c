/* A family config row read through "values" (GPT-2's activation_function: "gelu_new" is
 * openai_gelu true, "gelu" false): a listed string reads as its value, written back as that
 * string in config.json, carried as the Megatron arg, and choosing verify's activation
 * ({"by": field}); an unlisted string is refused listing the known ones; a "values" on a
 * row that is no bool field is refused when the family is loaded. */
#include "gpt2_fixture.h"

/* The GPT-2 fixture's config with activation_function set to `act`. */
static int read_act(const char *act, const ckpt_family **f, ckpt_family_config **c)
{
    const char *edit[2] = { "activation_function", act };

    return read_config("hf/gpt2_tiny", edit, 2, f, c);
}

CKPT_TEST(test_rules_gpt2_values_read_and_written)
{
    static const struct {
        const char *act, *written;
        int openai_gelu, verify_act;
        const char *arg;
    } cases[] = {
        { "\"gelu_new\"", "\"activation_function\": \"gelu_new\"", 1, CKPT_ACT_GELU_TANH, "True" },
        { "\"gelu\"", "\"activation_function\": \"gelu\"", 0, CKPT_ACT_GELU, "False" },
        { NULL, "\"activation_function\": \"gelu_new\"", 1, CKPT_ACT_GELU_TANH, "True" },
    };
    const ckpt_family *f;
    ckpt_family_config *c = NULL, *back = NULL;
    ckpt_model_config mc;
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_arena *a = NULL;
    ckpt_value *args = NULL;
    const ckpt_value *v;
    char repr[32];
    size_t i;

    ASSERT_OK(ckpt_arena_new(&a));
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ASSERT_OK(read_act(cases[i].act, &f, &c));
        ASSERT_OK(ckpt_family_config_get(c, "openai_gelu", &v));
        ASSERT_TRUE(v->kind == CKPT_VAL_BOOL && v->u.boolean == cases[i].openai_gelu);
        ASSERT_OK(ckpt_family_config_json(f, c, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &json));
        ASSERT_TRUE(strstr((const char *)json.data, cases[i].written) != NULL);
        ckpt_buf_clear(&json);
        ASSERT_OK(ckpt_family_model_config(f, c, &mc));
        ASSERT_EQ_INT(mc.act, cases[i].verify_act);
        ASSERT_OK(ckpt_family_config_args(f, c, a, 1, "local", &args));
        ckpt_value_repr(ckpt_megatron_arg(args, "openai_gelu"), repr, sizeof repr);
        ASSERT_EQ_STR(repr, cases[i].arg);
        /* and back from the args */
        ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
        ASSERT_OK(ckpt_family_config_json(f, back, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &json));
        ASSERT_TRUE(strstr((const char *)json.data, cases[i].written) != NULL);
        ckpt_buf_clear(&json);
        ckpt_family_config_free(back);
        ckpt_family_config_free(c);
    }
    ckpt_buf_dispose(&json);
    ckpt_arena_free(a);
}

CKPT_TEST(test_rules_gpt2_values_refused)
{
    static const char bad[] =
        "{\"ckptconv_family\": 1, \"name\": \"mine\", \"title\": \"Mine\", \"extends\": \"gpt2\", "
        "\"hf\": {\"model_type\": \"mine\", \"arch_prefix\": \"Mine\", \"class\": \"MineLMHeadModel\"}, "
        "\"config\": [{\"f\": \"num_layers\", \"values\": {\"two\": 2}}]}";
    static const char bad_string[] =
        "{\"ckptconv_family\": 1, \"name\": \"mine\", \"title\": \"Mine\", \"extends\": \"gpt2\", "
        "\"hf\": {\"model_type\": \"mine\", \"arch_prefix\": \"Mine\", \"class\": \"MineLMHeadModel\"}, "
        "\"config\": [{\"f\": \"kind\", \"type\": \"string\", \"hf\": \"kind\", \"values\": {\"two\": 2}}]}";
    const ckpt_family *f;
    ckpt_family *mine = NULL;
    ckpt_family_config *c = NULL;

    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_act("\"relu\"", &f, &c));
    ASSERT_ERROR_MENTIONS("in/config.json: activation_function is relu, not one of gelu_new, gelu (");
    ASSERT_TRUE(c == NULL && ckpt_error_last()->klass == CKPT_ERRCLASS_MODEL);
    ASSERT_FAILS(CKPT_EFORMAT, read_act("1", &f, &c));
    ASSERT_ERROR_MENTIONS("in/config.json: activation_function is not one of gelu_new, gelu");

    ckpt_test_write_file("mine.json", bad, sizeof bad - 1);
    ASSERT_TRUE(ckpt_family_load(&mine, "mine.json") < 0);
    ASSERT_ERROR_MENTIONS("\"values\" must be an object of the strings a bool or string field is read from");
    /* a string row's values are strings (DeepSeek-V3's rope_type default read as rope) */
    ckpt_test_write_file("mine2.json", bad_string, sizeof bad_string - 1);
    ASSERT_TRUE(ckpt_family_load(&mine, "mine2.json") < 0);
    ASSERT_ERROR_MENTIONS("\"values\" of a string field map strings to strings");
}
