/* The input tensors a plan leaves out: built-in rules and --drop patterns are recorded with
 * their reason, a pattern that matches nothing and a tensor no rule takes are errors that name
 * them. */
#include "test.h"

#include <stdlib.h>

CKPT_TEST(test_plan_drop_rules_and_patterns)
{
    ckpt_plan *p;
    const char *reason;

    ASSERT_OK(ckpt_plan_new(&p));
    ASSERT_EQ_INT(ckpt_plan_dropped_count(p), 0);
    ASSERT_EQ_INT(ckpt_plan_leave_out(p, "model.extra.weight", NULL), 0);
    ASSERT_OK(ckpt_plan_drop_pattern(p, "model.*.inv_freq"));
    ASSERT_OK(ckpt_plan_drop_pattern(p, "lm_head.?ias"));
    ASSERT_EQ_INT(ckpt_plan_leave_out(p, "model.layers.10.self_attn.rotary_emb.inv_freq", NULL), 1);
    ASSERT_EQ_INT(ckpt_plan_leave_out(p, "model.extra.weight", NULL), 0);
    ASSERT_EQ_INT(ckpt_plan_leave_out(p, "x._extra_state", "module metadata"), 1);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_check_drop_patterns(p));
    ASSERT_ERROR_MENTIONS("--drop lm_head.?ias matches no input tensor");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_EQ_INT(ckpt_plan_leave_out(p, "lm_head.bias", NULL), 1);
    ASSERT_OK(ckpt_plan_check_drop_patterns(p));
    ASSERT_EQ_INT(ckpt_plan_dropped_count(p), 3);
    ASSERT_EQ_STR(ckpt_plan_dropped_at(p, 0, &reason), "model.layers.10.self_attn.rotary_emb.inv_freq");
    ASSERT_EQ_STR(reason, "--drop model.*.inv_freq");
    ASSERT_EQ_STR(ckpt_plan_dropped_at(p, 1, &reason), "x._extra_state");
    ASSERT_EQ_STR(reason, "module metadata");
    ASSERT_TRUE(ckpt_plan_dropped_at(p, 3, &reason) == NULL);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_drop_pattern(p, ""));
    ckpt_plan_free(p);
}

CKPT_TEST(test_plan_drop_untaken_named)
{
    const char *names[10] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" };

    ASSERT_OK(ckpt_plan_refuse_untaken("in/", "hf2mcore", names, 0));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_refuse_untaken("in/", "hf2mcore", names, 1));
    ASSERT_ERROR_MENTIONS("in/: no rule of hf2mcore takes tensor 'a'; leave it out on purpose with --drop PATTERN");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MODEL);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_refuse_untaken("in/", "hf2mcore", names, 10));
    ASSERT_ERROR_MENTIONS("takes tensors 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h' and 2 more; leave them out");
}

/* A map passes through a name no rule matches: that tensor is one no rule takes. */
CKPT_TEST(test_plan_drop_map_passthrough)
{
    static const char map_json[] =
        "{\"ckptconv_map\": 1, \"name\": \"m\", \"rules\": [{\"from\": \"a.{L}.w\", \"to\": \"b.{L}.w\"}]}";
    static const int64_t shape[1] = { 2 };
    ckpt_map *m;
    ckpt_plan *p;
    ckpt_map_result *r;
    ckpt_map_input in[2];

    ASSERT_OK(ckpt_plan_new(&p));
    ASSERT_OK(ckpt_map_parse(&m, map_json, sizeof map_json - 1, "test"));
    in[0].name = "a.0.w";
    in[1].name = "c.w";
    in[0].home = in[1].home = 0;
    ASSERT_OK(ckpt_node_zeros(ckpt_plan_graph(p), CKPT_DTYPE_F32, 1, shape, &in[0].node));
    in[1].node = in[0].node;
    ASSERT_OK(ckpt_map_apply(m, NULL, ckpt_plan_graph(p), in, 1, NULL, &r));
    ASSERT_OK(ckpt_plan_check_taken("in", "job", r));
    ckpt_map_result_free(r);
    ASSERT_OK(ckpt_map_apply(m, NULL, ckpt_plan_graph(p), in, 2, NULL, &r));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_check_taken("in", "job", r));
    ASSERT_ERROR_MENTIONS("in: no rule of job takes tensor 'c.w'");
    ckpt_map_result_free(r);
    ckpt_map_free(m);
    ckpt_plan_free(p);
}
