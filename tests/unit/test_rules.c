/* Mapping rules, the language: maps that do not parse say where and why; patterns capture
 * layer indices of any length; expressions keep precedence and refuse inexact division and
 * overflow; parameters come from config.json without overriding flags; detection tells
 * the four situations apart; inversion and its failures; and apply on small all-zero
 * tensors, where only names, order and shapes matter. */
#include "test.h"

#include "rules/rules_private.h"

#include <stdlib.h>

#define HEAD "{\"ckptconv_map\": 1, \"name\": \"t\", "

static int parse(ckpt_map **m, const char *json)
{
    return ckpt_map_parse(m, json, strlen(json), "test.json");
}

CKPT_TEST(test_rules_parse_errors)
{
    static const struct {
        const char *json, *mentions;
        int code;
    } cases[] = {
        { "{\"ckptconv_map\": 1,\n  \"name\": ,}", "test.json: invalid JSON at line 2, column 11", CKPT_EFORMAT },
        { HEAD "\"rules\": []} trailing", "test.json: invalid JSON at line 1, column 47", CKPT_EFORMAT },
        { "[]", "test.json: a map must be a JSON object", CKPT_EFORMAT },
        { "{\"name\": \"t\", \"rules\": []}", "not a ckptconv map", CKPT_EFORMAT },
        { "{\"ckptconv_map\": 2, \"name\": \"t\", \"rules\": []}", "map version 2 is newer", CKPT_EUNSUPPORTED },
        { HEAD "\"rule\": []}", "test.json: unknown key \"rule\"", CKPT_EFORMAT },
        { HEAD "\"rules\": [], \"rules\": []}", "key \"rules\" appears twice", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a.{L}\", \"to\": \"b.{L}\", \"ops\": [{\"op\": \"transpos\"}]}]}",
          "test.json: rules[0]: ops[0]: unknown op \"transpos\"", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a.{L\", \"to\": \"b\"}]}",
          "rules[0]: from[0]: bad pattern \"a.{L\": '{' must be followed by a name and '}'", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a.{L}{M}\", \"to\": \"b\"}]}", "two captures side by side", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a.{L}.{L}\", \"to\": \"b\"}]}", "a capture appears twice", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a}\", \"to\": \"b\"}]}", "'}' without '{'", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a.{L}\", \"to\": [\"b.{L}\", \"c.{L}\"]}]}",
          "rules[0]: takes 1 tensor and its ops leave 1, but \"to\" names 2", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"name\": \"x\", \"from\": [\"a{L}\", \"b{L}\"], \"to\": \"c{L}\", "
               "\"ops\": [{\"op\": \"split\", \"axis\": 0, \"parts\": [1, 1]}]}]}",
          "rules[0] (x): ops[0]: split takes one tensor, not 2", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": [\"a{L}\", \"b{L}\", \"c{L}\"], \"to\": \"d{L}\", "
               "\"ops\": [{\"op\": \"concat\", \"axis\": 0, \"parts\": [1, 2]}]}]}",
          "\"parts\" has 2 entries for 3 tensors", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a\", \"to\": \"b.{L}\"}]}",
          "\"b.{L}\" uses a capture that the first \"from\" pattern does not have", CKPT_EFORMAT },
        { HEAD "\"normalize\": [{\"from\": \"a\", \"to\": \"b\"}], \"rules\": []}",
          "normalize[0]: needs a \"name\"", CKPT_EFORMAT },
        { HEAD "\"normalize\": [{\"name\": \"f\", \"from\": \"a.{L}\", \"to\": \"b.{L}\"}, "
               "{\"name\": \"f\", \"from\": \"a.{L}\", \"to\": \"c.{L}\"}], \"rules\": []}",
          "normalize[1]: two rules named \"f\" take a.{L}", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a\", \"to\": \"b\", \"ops\": [{\"op\": \"pad\", \"axis\": 0, "
               "\"from\": \"n +\", \"to\": 3}]}]}",
          "bad expression \"n +\": unexpected end at column 4", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a\", \"to\": \"b\", \"ops\": [{\"op\": \"transpose\", \"perm\": [0, 0]}]}]}",
          "\"perm\" must hold each axis 0..n-1 once", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a\", \"to\": \"b\", \"ops\": [{\"op\": \"cast\", \"dtype\": \"f33\"}]}]}",
          "\"dtype\" must name a dtype", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": \"a\", \"to\": \"b\", \"ops\": [{\"op\": \"transpose\", \"axis\": 1}]}]}",
          "ops[0]: unknown key \"axis\"", CKPT_EFORMAT },
        { HEAD "\"params\": {\"x\": \"y + 1\", \"y\": \"x\"}, \"rules\": []}",
          "params: \"x\" is defined in terms of itself", CKPT_EFORMAT },
        { HEAD "\"rules\": [{\"from\": [\"a{L}\", \"a{L}\"], \"to\": \"b{L}\", \"ops\": [{\"op\": \"concat\", "
               "\"axis\": 0}]}]}",
          "\"a{L}\" is listed twice", CKPT_EFORMAT },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_map *m = NULL;
        int rc = parse(&m, cases[i].json);
        if (rc != cases[i].code || !strstr(ckpt_error_last()->message, cases[i].mentions)) {
            ckpt_test_fail(__FILE__, __LINE__, "case %zu: rc %d, \"%s\", expected %d and \"%s\"", i, rc,
                           ckpt_error_last()->message, cases[i].code, cases[i].mentions);
            ckpt_map_free(m);
            return;
        }
        ASSERT_TRUE(m == NULL);
    }
}

CKPT_TEST(test_rules_load_file)
{
    static const char json[] = HEAD "\"description\": \"d\", \"rules\": [{\"from\": \"a.{L}\", \"to\": \"b.{L}\"}]}";
    ckpt_map *m = NULL;

    ckpt_test_write_file("m.json", json, sizeof json - 1);
    ASSERT_OK(ckpt_map_load(&m, "m.json"));
    ASSERT_EQ_STR(ckpt_map_name(m), "t");
    ASSERT_EQ_STR(ckpt_map_description(m), "d");
    ASSERT_EQ_STR(ckpt_map_source_kind(m), "source");
    ckpt_map_free(m);
    ckpt_test_write_file("bad.json", "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": [}", 42);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_load(&m, "bad.json"));
    ASSERT_ERROR_MENTIONS("bad.json: invalid JSON at line 1");
    ckpt_test_write_file("empty.json", "", 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_load(&m, "empty.json"));
    ASSERT_ERROR_MENTIONS("empty.json: invalid JSON");
    ASSERT_TRUE(ckpt_map_load(&m, "missing.json") < 0);
    ASSERT_ERROR_MENTIONS("missing.json");
}

CKPT_TEST(test_rules_builtins)
{
    static const char *const expected[] = { "hf_llama_megatron", "megatron_hf_llama", "hf_llama_megatron_local",
                                            "megatron_hf_llama_local", "llama_pd2te", "llama_te2pd",
                                            "megatron_gpt" };
    ckpt_map *m = NULL;
    size_t i, j, n = ckpt_map_builtin_count();

    /* every map with its inverse right after it, in file-name order */
    ASSERT_TRUE(n >= sizeof expected / sizeof expected[0]);
    for (i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        for (j = 0; j < n && strcmp(ckpt_map_builtin_at(j), expected[i]) != 0; j++)
            ;
        ASSERT_TRUE(j < n);
        ASSERT_OK(ckpt_map_builtin(&m, expected[i]));
        ASSERT_EQ_STR(ckpt_map_name(m), expected[i]);
        ckpt_map_free(m);
    }
    for (j = 0; j < n && strcmp(ckpt_map_builtin_at(j), "hf_llama_megatron") != 0; j++)
        ;
    ASSERT_EQ_STR(ckpt_map_builtin_at(j + 1), "megatron_hf_llama");
    ASSERT_TRUE(ckpt_map_builtin_at(n) == NULL);
    ASSERT_OK(ckpt_map_builtin(&m, "llama_te2pd"));
    ASSERT_EQ_STR(ckpt_map_name(m), "llama_te2pd");
    ASSERT_EQ_STR(ckpt_map_source_kind(m), "Transformer Engine");
    ASSERT_EQ_STR(ckpt_map_target_kind(m), "PaddleNLP LLaMA");
    ckpt_map_free(m);
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_map_builtin(&m, "llama_pd2hf"));
    ASSERT_ERROR_MENTIONS("llama_pd2hf");
}

static int eval_text(const char *text, const ckpt_map_params *p, int64_t *v)
{
    static const char json[] = HEAD "\"params\": {\"twice\": \"2 * n\"}, \"rules\": []}";
    const map_expr *e;
    ckpt_arena *a = NULL;
    ckpt_map *m = NULL;
    map_eval ev;
    int rc;

    if ((rc = ckpt_arena_new(&a)) < 0 || (rc = parse(&m, json)) < 0)
        goto done;
    ev.map = m;
    ev.params = p;
    ev.rule = "r";
    ev.tensor = "x.0";
    if ((rc = ckpt_rules__expr_parse(a, text, "here", &e)) < 0)
        goto done;
    rc = ckpt_rules__expr_eval(&ev, e, v);
done:
    ckpt_map_free(m);
    ckpt_arena_free(a);
    return rc;
}

CKPT_TEST(test_rules_expressions)
{
    static const struct {
        const char *text;
        int64_t value;
    } ok[] = {
        { "2 + 3 * 4", 14 }, { "(2 + 3) * 4", 20 }, { "20 / 4 / 5", 1 }, { "10 - 3 - 2", 5 },
        { "n", 6 }, { "twice * n / 4", 18 }, { " ( (n) ) ", 6 }, { "9223372036854775807", INT64_MAX },
    };
    ckpt_map_params *p = NULL;
    int64_t v;
    size_t i;

    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_map_params_set(p, "n", 6));
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ASSERT_OK(eval_text(ok[i].text, p, &v));
        ASSERT_EQ_INT(v, ok[i].value);
    }
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("n / 4", p, &v));
    ASSERT_ERROR_MENTIONS("x.0: rule r of t has \"n / 4\" = 6 / 4, which is not a whole number");
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("n / (n - 6)", p, &v));
    ASSERT_ERROR_MENTIONS("divides by zero");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP);
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("9223372036854775807 + 1", p, &v));
    ASSERT_ERROR_MENTIONS("overflows 64-bit integers");
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("4611686018427387904 * 2", p, &v));
    ASSERT_ERROR_MENTIONS("overflows");
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("0 - 9223372036854775807 - 2", p, &v));
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("99999999999999999999", p, &v));
    ASSERT_ERROR_MENTIONS("here: bad expression \"99999999999999999999\": number too large");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP);
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("n * (2", p, &v));
    ASSERT_ERROR_MENTIONS("expected ')'");
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("n % 2", p, &v));
    ASSERT_ERROR_MENTIONS("unexpected character at column 3");
    ASSERT_FAILS(CKPT_EFORMAT, eval_text("(((((((((((((((((((((((((((((((((("
                                         "1))))))))))))))))))))))))))))))))))", p, &v));
    ASSERT_ERROR_MENTIONS("nested too deeply");
    ASSERT_FAILS(CKPT_ENOTFOUND, eval_text("num_key_value_heads * 2", p, &v));
    ASSERT_ERROR_MENTIONS("x.0: rule r of t needs model parameter 'num_key_value_heads'");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP_PARAM);
    /* A derived parameter given directly wins over its formula. */
    ASSERT_OK(ckpt_map_params_set(p, "twice", 5));
    ASSERT_OK(eval_text("twice", p, &v));
    ASSERT_EQ_INT(v, 5);
    ckpt_map_params_free(p);
}

CKPT_TEST(test_rules_params_json)
{
    static const char config[] = "{\"hidden_size\": 64, \"num_attention_heads\": 4, \"rms_norm_eps\": 1e-06,\n"
                                 " \"fuse_attention_ffn\": true, \"huge\": 1e300, \"model_type\": \"llama\",\n"
                                 " \"neg\": -3, \"two\": 2.0, \"nested\": {\"x\": 1}, \"neg\": -5}";
    ckpt_map_params *p = NULL;
    int64_t v = 0;

    ckpt_test_write_file("config.json", config, sizeof config - 1);
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_map_params_set(p, "num_attention_heads", 8));
    ASSERT_OK(ckpt_map_params_load_json(p, "config.json"));
    ASSERT_TRUE(ckpt_map_params_get(p, "num_attention_heads", &v));
    ASSERT_EQ_INT(v, 8);
    ASSERT_TRUE(ckpt_map_params_get(p, "hidden_size", &v));
    ASSERT_EQ_INT(v, 64);
    ASSERT_TRUE(ckpt_map_params_get(p, "neg", &v));
    ASSERT_EQ_INT(v, -5);
    ASSERT_TRUE(ckpt_map_params_get(p, "two", &v));
    ASSERT_EQ_INT(v, 2);
    ASSERT_TRUE(!ckpt_map_params_get(p, "rms_norm_eps", &v));
    ASSERT_TRUE(!ckpt_map_params_get(p, "fuse_attention_ffn", &v));
    ASSERT_TRUE(!ckpt_map_params_get(p, "huge", &v));
    ASSERT_TRUE(!ckpt_map_params_get(p, "model_type", &v));
    ASSERT_TRUE(!ckpt_map_params_get(p, "x", &v));
    ckpt_test_write_file("broken.json", "{\"a\": ", 6);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_params_load_json(p, "broken.json"));
    ASSERT_ERROR_MENTIONS("broken.json: not valid JSON");
    ckpt_test_write_file("list.json", "[1, 2]", 6);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_params_load_json(p, "list.json"));
    ASSERT_ERROR_MENTIONS("list.json: not a JSON object");
    ASSERT_TRUE(ckpt_map_params_load_json(p, "absent.json") < 0);
    ASSERT_ERROR_MENTIONS("absent.json");
    ASSERT_OK(ckpt_map_params_load_json(p, ckpt_test_data("llama/fp32_tp1/config.json")));
    ASSERT_TRUE(ckpt_map_params_get(p, "num_key_value_heads", &v));
    ASSERT_EQ_INT(v, 2);
    ckpt_map_params_free(p);
}

CKPT_TEST(test_rules_params_complete)
{
    ckpt_map_params *p = NULL;
    const char *missing = NULL;
    ckpt_map *m = NULL;

    ASSERT_OK(ckpt_map_builtin(&m, "llama_pd2te"));
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_EQ_INT(ckpt_map_params_complete(m, p, &missing), 0);
    ASSERT_EQ_STR(missing, "num_attention_heads, num_key_value_heads, hidden_size");
    ASSERT_OK(ckpt_map_params_set(p, "num_attention_heads", 4));
    ASSERT_OK(ckpt_map_params_set(p, "num_key_value_heads", 2));
    ASSERT_EQ_INT(ckpt_map_params_complete(m, p, &missing), 0);
    ASSERT_EQ_STR(missing, "hidden_size");
    /* A derived parameter given directly stands in for its inputs. */
    ASSERT_OK(ckpt_map_params_set(p, "head_dim", 16));
    ASSERT_EQ_INT(ckpt_map_params_complete(m, p, &missing), 1);
    ASSERT_EQ_STR(missing, "");
    ckpt_map_params_free(p);
    ckpt_map_free(m);
}

CKPT_TEST(test_rules_detect)
{
    const char *pd[] = { "llama.embed_tokens.weight", "llama.layers.0.self_attn.q_proj.weight" };
    const char *te[] = { "llama.embed_tokens.weight", "llama.layers.0.transformer.self_attention.proj.weight" };
    const char *both[] = { pd[1], te[1] };
    const char *neither[] = { "model.embed_tokens.weight", "model.norm.weight" };
    ckpt_map *m = NULL, *inv = NULL;

    ASSERT_OK(ckpt_map_builtin(&m, "llama_pd2te"));
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_OK(ckpt_map_detect(m, pd, 2));
    ASSERT_OK(ckpt_map_detect(inv, te, 2));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_detect(m, te, 2));
    ASSERT_ERROR_MENTIONS("input is a Transformer Engine checkpoint (names like "
                          "'llama.layers.0.transformer.self_attention.proj.weight'); use the inverse map llama_te2pd");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP_DIRECTION);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_detect(inv, pd, 2));
    ASSERT_ERROR_MENTIONS("input is a PaddleNLP LLaMA checkpoint");
    ASSERT_ERROR_MENTIONS("use the inverse map llama_pd2te");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP_DIRECTION);
    /* Neither side, or both: no inverse would help, so not the direction class. */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_detect(m, both, 2));
    ASSERT_ERROR_MENTIONS("The input checkpoint is not a valid checkpoint.");
    ASSERT_ERROR_MENTIONS("both PaddleNLP LLaMA names (containing 'self_attn'");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_detect(m, neither, 2));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP);
    ASSERT_ERROR_MENTIONS("The input checkpoint is not a valid checkpoint.");
    ASSERT_ERROR_MENTIONS("No tensor name contains 'self_attn' (PaddleNLP LLaMA) or 'transformer'");
    ASSERT_ERROR_MENTIONS("'model.embed_tokens.weight'");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_detect(m, NULL, 0));
    ckpt_map_free(inv);
    ckpt_map_free(m);
}

CKPT_TEST(test_rules_invert)
{
    static const char reshape[] = HEAD "\"rules\": [{\"from\": \"a.{L}\", \"to\": \"b.{L}\", \"ops\": "
                                       "[{\"op\": \"reshape\", \"shape\": [-1]}]}]}";
    static const char cast[] = HEAD "\"rules\": [{\"name\": \"c\", \"from\": \"a.{L}\", \"to\": \"b.{L}\", \"ops\": "
                                    "[{\"op\": \"transpose\"}, {\"op\": \"cast\", \"dtype\": \"bf16\"}]}]}";
    static const char lossy[] = HEAD "\"rules\": [{\"from\": \"a.{L}.{E}\", \"to\": [\"b.{L}\", \"c.{L}.{E}\"], "
                                     "\"ops\": [{\"op\": \"split\", \"axis\": 0, \"parts\": [1, 1]}]}]}";
    ckpt_map *m = NULL, *inv = NULL, *back = NULL;

    ASSERT_OK(ckpt_map_builtin(&m, "llama_pd2te"));
    ASSERT_EQ_INT(ckpt_map_variant_count(m), 0);
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_EQ_STR(ckpt_map_name(inv), "llama_te2pd");
    ASSERT_EQ_STR(ckpt_map_source_kind(inv), "Transformer Engine");
    ASSERT_TRUE(strstr(ckpt_map_description(inv), "back to PaddleNLP") != NULL);
    ASSERT_EQ_INT(ckpt_map_variant_count(inv), 2);
    ASSERT_EQ_STR(ckpt_map_variant_at(inv, 0), "fused_qkv");
    ASSERT_EQ_STR(ckpt_map_variant_at(inv, 1), "unfused_ffn");
    ASSERT_TRUE(ckpt_map_variant_at(inv, 2) == NULL);
    ASSERT_OK(ckpt_map_invert(inv, &back));
    ASSERT_EQ_STR(ckpt_map_name(back), "llama_pd2te");
    ASSERT_EQ_STR(ckpt_map_description(back), ckpt_map_description(m));
    ASSERT_EQ_INT(ckpt_map_variant_count(back), 0);
    ckpt_map_free(back);
    ckpt_map_free(inv);
    ckpt_map_free(m);

    ASSERT_OK(parse(&m, reshape));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_map_invert(m, &inv));
    ASSERT_ERROR_MENTIONS("test.json: rule a.{L} -> b.{L}: op reshape (ops[0]) cannot be inverted: it has no "
                          "\"inverse_shape\"");
    ckpt_map_free(m);
    ASSERT_OK(parse(&m, cast));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_map_invert(m, &inv));
    ASSERT_ERROR_MENTIONS("rule c: op cast (ops[1]) cannot be inverted: it has no \"inverse_dtype\"");
    ckpt_map_free(m);
    ASSERT_OK(parse(&m, lossy));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_map_invert(m, &inv));
    ASSERT_ERROR_MENTIONS("\"a.{L}.{E}\" uses a capture that \"b.{L}\" does not have");
    ckpt_map_free(m);
}

/* ---- apply, on all-zero tensors ---- */

typedef struct zeros_input {
    const char *name;
    int ndim;
    int64_t shape[2];
    size_t home;
} zeros_input;

static int apply_zeros(const char *json, const ckpt_map_params *p, const zeros_input *zs, size_t n,
                       const char *const *variants, ckpt_graph **g, ckpt_map_result **r)
{
    ckpt_map_input in[16];
    ckpt_map *m = NULL;
    size_t i;
    int rc;

    *r = NULL;
    if ((rc = ckpt_graph_new(g)) < 0 || (rc = parse(&m, json)) < 0)
        goto done;
    for (i = 0; i < n; i++) {
        in[i].name = zs[i].name;
        in[i].home = zs[i].home;
        if ((rc = ckpt_node_zeros(*g, CKPT_DTYPE_F32, zs[i].ndim, zs[i].shape, &in[i].node)) < 0)
            goto done;
    }
    rc = ckpt_map_apply(m, p, *g, in, n, variants, r);
done:
    ckpt_map_free(m);
    return rc;
}

CKPT_TEST(test_rules_apply_patterns)
{
    static const char json[] = HEAD "\"rules\": [{\"from\": \"a.{L}.x\", \"to\": \"b.{L}.y\"}, "
                                    "{\"from\": \"v{N}0.w\", \"to\": \"n{N}\"}]}";
    static const zeros_input zs[] = {
        { "a.100.x", 1, { 2 }, 0 }, { "a.12345.x", 1, { 2 }, 0 }, { "a.7.x.extra", 1, { 2 }, 0 },
        { "a..x", 1, { 2 }, 0 },    { "a.1b.x", 1, { 2 }, 0 },    { "v100.w", 1, { 2 }, 0 },
        { "c", 1, { 2 }, 0 },
    };
    static const char *const want[] = { "b.100.y", "b.12345.y", "a.7.x.extra", "a..x", "a.1b.x", "n10", "c" };
    ckpt_map_result *r = NULL;
    ckpt_graph *g = NULL;
    size_t i;

    ASSERT_OK(apply_zeros(json, NULL, zs, 7, NULL, &g, &r));
    ASSERT_EQ_INT(ckpt_map_result_count(r), 7);
    for (i = 0; i < 7; i++)
        ASSERT_EQ_STR(ckpt_map_result_at(r, i)->name, want[i]);
    ASSERT_EQ_STR(ckpt_map_result_at(r, 0)->rule, "a.{L}.x -> b.{L}.y");
    ASSERT_TRUE(ckpt_map_result_at(r, 2)->rule == NULL);
    ASSERT_TRUE(ckpt_map_result_at(r, 7) == NULL);
    ckpt_map_result_free(r);
    ckpt_graph_free(g);
}

CKPT_TEST(test_rules_apply_order_and_home)
{
    static const char json[] = HEAD "\"rules\": [{\"name\": \"qkv\", \"from\": [\"q.{L}\", \"k.{L}\", \"v.{L}\"], "
                                    "\"to\": \"qkv.{L}\", \"ops\": [{\"op\": \"concat\", \"axis\": 0, "
                                    "\"parts\": [\"h\", \"kv\", \"kv\"]}]}]}";
    static const zeros_input zs[] = {
        { "k.0", 1, { 2 }, 1 }, { "x", 1, { 1 }, 2 }, { "q.0", 1, { 4 }, 3 }, { "v.0", 1, { 2 }, 4 },
    };
    const ckpt_map_output *o;
    ckpt_map_result *r = NULL;
    ckpt_map_params *p = NULL;
    ckpt_graph *g = NULL;

    ASSERT_OK(apply_zeros(json, NULL, zs, 4, NULL, &g, &r));
    ASSERT_EQ_INT(ckpt_map_result_count(r), 2);
    o = ckpt_map_result_at(r, 0);
    ASSERT_EQ_STR(o->name, "qkv.0");
    ASSERT_EQ_STR(o->rule, "qkv");
    ASSERT_EQ_INT(o->home, 3);
    ASSERT_EQ_INT(ckpt_node_shape(o->node)[0], 8);
    ASSERT_EQ_STR(ckpt_map_result_at(r, 1)->name, "x");
    ASSERT_EQ_INT(ckpt_map_result_at(r, 1)->home, 2);
    ckpt_map_result_free(r);
    ckpt_graph_free(g);
    /* With the parameters known, the sizes must be in their ratio. */
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_map_params_set(p, "h", 4));
    ASSERT_OK(ckpt_map_params_set(p, "kv", 1));
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(json, p, zs, 4, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("q.0: rule qkv of t: concat: along axis 0 the tensors have 4, 2, 2, not in the ratio "
                          "4:1:1 = h : kv : kv with h=4, kv=1");
    ckpt_graph_free(g);
    ckpt_map_params_free(p);
}

/* Normalize rules sharing a name are one layout, and one output variant of the inverse: asked for
 * by that name, every rule of it is applied (a fused weight and its fused bias). */
CKPT_TEST(test_rules_variant_of_two_rules)
{
    static const char json[] = HEAD "\"normalize\": ["
                                    "{\"name\": \"fused\", \"from\": \"w.{L}\", \"to\": [\"wa.{L}\", \"wb.{L}\"], "
                                    "\"ops\": [{\"op\": \"split\", \"axis\": 1, \"parts\": [1, 1]}]}, "
                                    "{\"name\": \"other\", \"from\": \"x.{L}\", \"to\": [\"xa.{L}\", \"xb.{L}\"], "
                                    "\"ops\": [{\"op\": \"split\", \"axis\": 0, \"parts\": [1, 1]}]}, "
                                    "{\"name\": \"fused\", \"from\": \"b.{L}\", \"to\": [\"ba.{L}\", \"bb.{L}\"], "
                                    "\"ops\": [{\"op\": \"split\", \"axis\": 0, \"parts\": [1, 1]}]}], "
                                    "\"rules\": []}";
    static const zeros_input zs[] = {
        { "wa.0", 2, { 2, 3 }, 0 }, { "wb.0", 2, { 2, 3 }, 0 }, { "ba.0", 1, { 3 }, 0 }, { "bb.0", 1, { 3 }, 0 },
    };
    static const char *const fused[] = { "fused", NULL };
    static const char *const nope[] = { "nope", NULL };
    ckpt_map *m = NULL, *inv = NULL;
    ckpt_graph *g = NULL;
    ckpt_map_input in[4];
    ckpt_map_result *r = NULL;
    size_t i;

    ASSERT_OK(parse(&m, json));
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_EQ_INT(ckpt_map_variant_count(inv), 2);
    ASSERT_EQ_STR(ckpt_map_variant_at(inv, 0), "fused");
    ASSERT_EQ_STR(ckpt_map_variant_at(inv, 1), "other");
    ASSERT_TRUE(ckpt_map_variant_at(inv, 2) == NULL);
    ASSERT_OK(ckpt_graph_new(&g));
    for (i = 0; i < 4; i++) {
        in[i].name = zs[i].name;
        in[i].home = 0;
        ASSERT_OK(ckpt_node_zeros(g, CKPT_DTYPE_F32, zs[i].ndim, zs[i].shape, &in[i].node));
    }
    ASSERT_OK(ckpt_map_apply(inv, NULL, g, in, 4, fused, &r));
    ASSERT_EQ_INT(ckpt_map_result_count(r), 2);
    ASSERT_EQ_STR(ckpt_map_result_at(r, 0)->name, "w.0");
    ASSERT_EQ_INT(ckpt_node_shape(ckpt_map_result_at(r, 0)->node)[1], 6);
    ASSERT_EQ_STR(ckpt_map_result_at(r, 1)->name, "b.0");
    ASSERT_EQ_INT(ckpt_node_shape(ckpt_map_result_at(r, 1)->node)[0], 6);
    ckpt_map_result_free(r);
    /* an unknown variant lists each name once */
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_map_apply(inv, NULL, g, in, 4, nope, &r));
    ASSERT_ERROR_MENTIONS("has no output variant 'nope' (it has: fused, other)");
    ckpt_graph_free(g);
    ckpt_map_free(inv);
    ckpt_map_free(m);
}

CKPT_TEST(test_rules_apply_errors)
{
    static const char qkv[] = HEAD "\"rules\": [{\"from\": [\"q.{L}\", \"k.{L}\", \"v.{L}\"], \"to\": \"qkv.{L}\", "
                                   "\"ops\": [{\"op\": \"concat\", \"axis\": 0}]}]}";
    static const char twice[] = HEAD "\"rules\": [{\"name\": \"A\", \"from\": [\"a.{L}\", \"b.{L}\"], \"to\": "
                                     "\"c.{L}\", \"ops\": [{\"op\": \"concat\", \"axis\": 0}]}, "
                                     "{\"name\": \"B\", \"from\": \"b.{L}\", \"to\": \"d.{L}\"}]}";
    static const char strict[] = HEAD "\"strict\": [\"l.{L}.\"], \"rules\": [{\"from\": \"l.{L}.w\", \"to\": "
                                      "\"m.{L}.w\", \"ops\": [{\"op\": \"transpose\"}]}]}";
    static const char rename[] = HEAD "\"rules\": [{\"from\": \"a.{L}\", \"to\": \"b.{L}\"}]}";
    static const char split[] = HEAD "\"rules\": [{\"name\": \"s\", \"from\": \"a\", \"to\": [\"b\", \"c\"], "
                                     "\"ops\": [{\"op\": \"split\", \"axis\": -1, \"parts\": [\"x\", \"y\"]}]}]}";
    static const zeros_input dup[] = { { "a.0", 1, { 2 }, 0 }, { "a.0", 1, { 2 }, 0 } };
    static const zeros_input qk[] = { { "q.0", 1, { 2 }, 0 }, { "k.0", 1, { 2 }, 0 } };
    static const zeros_input ab[] = { { "b.0", 1, { 2 }, 0 }, { "a.0", 1, { 2 }, 0 } };
    static const zeros_input l1[] = { { "l.3.w", 1, { 2 }, 0 } };
    static const zeros_input l2[] = { { "lx.3.b", 2, { 2, 3 }, 0 }, { "l.3.bias", 1, { 2 }, 0 } };
    static const zeros_input m45[] = { { "a", 2, { 4, 5 }, 0 } };
    static const char *const nope[] = { "nope", NULL };
    ckpt_map_params *p = NULL;
    ckpt_map_result *r = NULL;
    ckpt_graph *g = NULL;

    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(rename, NULL, dup, 2, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("a.0: two input tensors have this name");
    ckpt_graph_free(g);
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(qkv, NULL, qk, 2, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("q.0: rule q.{L} -> qkv.{L} of t needs v.0 as well, and the input has no such tensor");
    ckpt_graph_free(g);
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(twice, NULL, ab, 2, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("b.0: two rules of t use this tensor: B (with b.0) and A (with a.0)");
    ckpt_graph_free(g);
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(strict, NULL, l1, 1, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("l.3.w: rule l.{L}.w -> m.{L}.w of t: transpose: without \"perm\" it swaps the axes of a "
                          "2-D tensor, not of 1-D");
    ckpt_graph_free(g);
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(strict, NULL, l2, 2, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("l.3.bias: no rule of t matches this tensor");
    ckpt_graph_free(g);
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(rename, NULL, ab, 2, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("b.0: t makes two tensors of this name (from the input and from a.{L} -> b.{L})");
    ckpt_graph_free(g);
    ASSERT_FAILS(CKPT_ENOTFOUND, apply_zeros(rename, NULL, ab, 2, nope, &g, &r));
    ASSERT_ERROR_MENTIONS("t has no output variant 'nope' (it has none)");
    ASSERT_TRUE(ckpt_error_last()->klass != CKPT_ERRCLASS_MAP_PARAM);
    ckpt_graph_free(g);
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_map_params_set(p, "x", 1));
    ASSERT_FAILS(CKPT_ENOTFOUND, apply_zeros(split, p, m45, 1, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("a: rule s of t needs model parameter 'y'");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP_PARAM);
    ckpt_graph_free(g);
    ASSERT_OK(ckpt_map_params_set(p, "y", 2));
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(split, p, m45, 1, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("a: rule s of t: split: axis 1 of length 5 does not divide into parts 1:2 = x : y with x=1, "
                          "y=2");
    ckpt_graph_free(g);
    ASSERT_OK(ckpt_map_params_set(p, "x", 3));
    ASSERT_OK(apply_zeros(split, p, m45, 1, NULL, &g, &r));
    ASSERT_EQ_INT(ckpt_node_shape(ckpt_map_result_at(r, 0)->node)[1], 3);
    ASSERT_EQ_INT(ckpt_node_shape(ckpt_map_result_at(r, 1)->node)[1], 2);
    ckpt_map_result_free(r);
    ckpt_graph_free(g);
    ckpt_map_params_free(p);
}

/* Each-tensor ops forward, then the inverse map brings shape and dtype back. */
CKPT_TEST(test_rules_apply_each_ops_and_inverse)
{
    static const char json[] = HEAD "\"rules\": [{\"name\": \"r\", \"from\": \"p.{L}\", \"to\": \"q.{L}\", \"ops\": ["
                                    "{\"op\": \"pad\", \"axis\": 0, \"from\": \"rows\", \"to\": \"rows + 2\"}, "
                                    "{\"op\": \"transpose\", \"perm\": [1, 0]}, "
                                    "{\"op\": \"reshape\", \"shape\": [2, -1], \"inverse_shape\": [4, \"rows + 2\"]}, "
                                    "{\"op\": \"cast\", \"dtype\": \"bfloat16\", \"inverse_dtype\": \"float32\"}]}]}";
    static const zeros_input zs[] = { { "p.0", 2, { 3, 4 }, 0 } };
    static const zeros_input bad[] = { { "p.0", 2, { 5, 4 }, 0 } };
    ckpt_map *m = NULL, *inv = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map_result *r = NULL, *back = NULL;
    ckpt_map_input in;
    ckpt_graph *g = NULL;
    uint16_t got[20];
    size_t i;

    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_map_params_set(p, "rows", 3));
    ASSERT_OK(apply_zeros(json, p, zs, 1, NULL, &g, &r));
    in.name = ckpt_map_result_at(r, 0)->name;
    in.node = ckpt_map_result_at(r, 0)->node;
    in.home = 0;
    ASSERT_EQ_STR(in.name, "q.0");
    ASSERT_EQ_INT(ckpt_node_dtype(in.node), CKPT_DTYPE_BF16);
    ASSERT_EQ_INT(ckpt_node_ndim(in.node), 2);
    ASSERT_EQ_INT(ckpt_node_shape(in.node)[0], 2);
    ASSERT_EQ_INT(ckpt_node_shape(in.node)[1], 10);
    ASSERT_OK(ckpt_node_read(in.node, 0, 20, CKPT_DTYPE_BF16, got));
    for (i = 0; i < 20; i++)
        ASSERT_EQ_INT(got[i], 0);
    ASSERT_OK(parse(&m, json));
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_OK(ckpt_map_apply(inv, p, g, &in, 1, NULL, &back));
    ASSERT_EQ_STR(ckpt_map_result_at(back, 0)->name, "p.0");
    ASSERT_EQ_INT(ckpt_node_dtype(ckpt_map_result_at(back, 0)->node), CKPT_DTYPE_F32);
    ASSERT_EQ_INT(ckpt_node_shape(ckpt_map_result_at(back, 0)->node)[0], 3);
    ASSERT_EQ_INT(ckpt_node_shape(ckpt_map_result_at(back, 0)->node)[1], 4);
    ckpt_map_result_free(back);
    ckpt_map_result_free(r);
    ckpt_graph_free(g);
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(json, p, bad, 1, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("p.0: rule r of t: pad: axis 0 has length 5, not 3 (\"rows\")");
    ckpt_graph_free(g);
    ckpt_map_free(inv);
    ckpt_map_free(m);
    ckpt_map_params_free(p);
}

CKPT_TEST(test_rules_apply_regroup_errors)
{
    static const char de[] = HEAD "\"rules\": [{\"name\": \"d\", \"from\": \"a\", \"to\": [\"b\", \"c\"], \"ops\": "
                                  "[{\"op\": \"deinterleave\", \"axis\": 0, \"blocks\": [2, 1]}]}]}";
    static const char in[] = HEAD "\"rules\": [{\"name\": \"i\", \"from\": [\"b\", \"c\"], \"to\": \"a\", \"ops\": "
                                  "[{\"op\": \"interleave\", \"axis\": 0, \"blocks\": [2, 1]}]}]}";
    static const char cat[] = HEAD "\"rules\": [{\"name\": \"c\", \"from\": [\"x\", \"y\"], \"to\": \"z\", \"ops\": "
                                   "[{\"op\": \"concat\", \"axis\": 0}]}]}";
    static const zeros_input a7[] = { { "a", 1, { 7 }, 0 } };
    static const zeros_input a6[] = { { "a", 1, { 6 }, 0 } };
    static const zeros_input bc[] = { { "b", 1, { 4 }, 0 }, { "c", 1, { 3 }, 0 } };
    static const zeros_input z5[] = { { "z", 1, { 5 }, 0 } };
    ckpt_map *m = NULL, *inv = NULL;
    ckpt_map_result *r = NULL;
    ckpt_map_input one;
    ckpt_graph *g = NULL;

    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(de, NULL, a7, 1, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("a: rule d of t: deinterleave: axis 0 of length 7 is not a whole number of groups of "
                          "blocks 2:1");
    ckpt_graph_free(g);
    ASSERT_OK(apply_zeros(de, NULL, a6, 1, NULL, &g, &r));
    ASSERT_EQ_INT(ckpt_node_shape(ckpt_map_result_at(r, 0)->node)[0], 4);
    ASSERT_EQ_INT(ckpt_node_shape(ckpt_map_result_at(r, 1)->node)[0], 2);
    ckpt_map_result_free(r);
    ckpt_graph_free(g);
    ASSERT_FAILS(CKPT_EFORMAT, apply_zeros(in, NULL, bc, 2, NULL, &g, &r));
    ASSERT_ERROR_MENTIONS("b: rule i of t: interleave: along axis 0 the tensors have 4, 3, not the same number of "
                          "blocks 2:1");
    ckpt_graph_free(g);
    /* A concat without parts inverts to a split in equal parts. */
    ASSERT_OK(parse(&m, cat));
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_OK(ckpt_graph_new(&g));
    one.name = "z";
    one.home = 0;
    ASSERT_OK(ckpt_node_zeros(g, CKPT_DTYPE_F32, 1, z5[0].shape, &one.node));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_apply(inv, NULL, g, &one, 1, NULL, &r));
    ASSERT_ERROR_MENTIONS("z: rule c of t_inverse: split: axis 0 of length 5 does not divide into 2 equal parts");
    ckpt_graph_free(g);
    ckpt_map_free(inv);
    ckpt_map_free(m);
}
