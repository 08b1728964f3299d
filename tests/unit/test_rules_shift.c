/* A capture with a parameter ("{M+num_hidden_layers}", formats/maps/README.md): it matches
 * an index not below the parameter and carries the index less it, so DeepSeek-V3's
 * multi-token prediction layer (HF layer num_hidden_layers + M) is Megatron's mtp.layers.M
 * and back; a decoder layer below it goes on to the next rule; a parameter not given is an
 * error naming it. */
#include "test.h"

#include <string.h>

static const char json[] = "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": ["
                           "{\"from\": \"l.{M+n_layers}.x\", \"to\": \"mtp.{M}.x\"},"
                           "{\"from\": \"l.{L}.x\", \"to\": \"dec.{L}.x\"}]}";

static void run(int inverse, const ckpt_map_params *p, const char *const *names, size_t n, const char *const *want,
                int *out)
{
    ckpt_map_input in[8];
    ckpt_map_result *r = NULL;
    ckpt_graph *g = NULL;
    ckpt_map *m = NULL, *inv = NULL;
    int64_t shape[1] = { 2 };
    size_t i;
    int rc;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_map_parse(&m, json, strlen(json), "test.json"));
    if (inverse)
        ASSERT_OK(ckpt_map_invert(m, &inv));
    for (i = 0; i < n; i++) {
        in[i].name = names[i];
        in[i].home = 0;
        ASSERT_OK(ckpt_node_zeros(g, CKPT_DTYPE_F32, 1, shape, &in[i].node));
    }
    rc = ckpt_map_apply(inverse ? inv : m, p, g, in, n, NULL, &r);
    if (rc == 0) {
        ASSERT_EQ_INT(ckpt_map_result_count(r), n);
        for (i = 0; i < n; i++)
            ASSERT_EQ_STR(ckpt_map_result_at(r, i)->name, want[i]);
    }
    ckpt_map_result_free(r);
    ckpt_map_free(inv);
    ckpt_map_free(m);
    ckpt_graph_free(g);
    *out = rc;
}

CKPT_TEST(test_rules_shift_forward_and_back)
{
    static const char *const hf[] = { "l.0.x", "l.9.x", "l.10.x", "l.12.x" };
    static const char *const mc[] = { "dec.0.x", "dec.9.x", "mtp.0.x", "mtp.2.x" };
    ckpt_map_params *p = NULL;
    int rc;

    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_map_params_set(p, "n_layers", 10));
    run(0, p, hf, 4, mc, &rc);
    ASSERT_OK(rc);
    run(1, p, mc, 4, hf, &rc);
    ASSERT_OK(rc);
    ckpt_map_params_free(p);
}

CKPT_TEST(test_rules_shift_needs_parameter)
{
    static const char *const hf[] = { "l.3.x" };
    ckpt_map_params *p = NULL;
    int rc;

    ASSERT_OK(ckpt_map_params_new(&p));
    run(0, p, hf, 1, hf, &rc);
    ASSERT_FAILS(CKPT_ENOTFOUND, rc);
    ASSERT_ERROR_MENTIONS("needs model parameter 'n_layers'");
    ckpt_map_params_free(p);
}

CKPT_TEST(test_rules_shift_bad_pattern)
{
    ckpt_map *m = NULL;
    static const char bad[] = "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": ["
                              "{\"from\": \"l.{M+}.x\", \"to\": \"mtp.{M}.x\"}]}";

    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_parse(&m, bad, strlen(bad), "test.json"));
    ASSERT_ERROR_MENTIONS("'+' in a capture must be followed by a parameter name");
}
