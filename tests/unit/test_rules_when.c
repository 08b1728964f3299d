/* A rule with "when_present" (formats/maps/README.md): it takes its anchor only where the
 * tensor it names (the anchor's captures filled in) is an input too, else the next rule whose
 * anchor matches does, as DeepSeek-V3's pre-MLP norm goes where the layer's MLP is dense or a
 * mixture of experts; the inverse takes "inverse_when_present"; a pattern with a capture the
 * anchor lacks is refused when the map loads. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#define RULES "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": [" \
              "{\"from\": \"l.{L}.norm\", \"to\": \"l.{L}.fc1.norm\", \"when_present\": \"l.{L}.dense\"}," \
              "{\"from\": \"l.{L}.norm\", \"to\": \"l.{L}.pre_norm\"}"

static int parse(ckpt_map **m, const char *json)
{
    return ckpt_map_parse(m, json, strlen(json), "test.json");
}

/* names in, the names the map (or its inverse) gives */
static void apply(const char *json, int inverse, const char *const *names, size_t n, const char *const *want)
{
    ckpt_map_input in[8];
    ckpt_map_result *r = NULL;
    ckpt_graph *g = NULL;
    ckpt_map *m = NULL, *inv = NULL;
    int64_t shape[1] = { 2 };
    size_t i;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(parse(&m, json));
    if (inverse)
        ASSERT_OK(ckpt_map_invert(m, &inv));
    for (i = 0; i < n; i++) {
        in[i].name = names[i];
        in[i].home = 0;
        ASSERT_OK(ckpt_node_zeros(g, CKPT_DTYPE_F32, 1, shape, &in[i].node));
    }
    ASSERT_OK(ckpt_map_apply(inverse ? inv : m, NULL, g, in, n, NULL, &r));
    ASSERT_EQ_INT(ckpt_map_result_count(r), n);
    for (i = 0; i < n; i++)
        ASSERT_EQ_STR(ckpt_map_result_at(r, i)->name, want[i]);
    ckpt_map_result_free(r);
    ckpt_map_free(inv);
    ckpt_map_free(m);
    ckpt_graph_free(g);
}

CKPT_TEST(test_rules_when_present)
{
    static const char *const in[] = { "l.0.norm", "l.0.dense", "l.1.norm", "l.1.experts", "l.12.dense", "l.12.norm" };
    static const char *const out[] = { "l.0.fc1.norm", "l.0.dense", "l.1.pre_norm", "l.1.experts", "l.12.dense",
                                       "l.12.fc1.norm" };

    apply(RULES "]}", 0, in, 6, out);
}

CKPT_TEST(test_rules_when_present_inverse)
{
    /* the inverse's anchor is l.{L}.pre_norm; it applies where l.{L}.moe is there, else the
     * next rule over the same anchor does */
    static const char json[] = "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": ["
                               "{\"from\": \"a.{L}.x\", \"to\": \"b.{L}.x\", \"inverse_when_present\": \"b.{L}.moe\"},"
                               "{\"from\": \"c.{L}.x\", \"to\": \"b.{L}.x\"}]}";
    static const char *const in[] = { "b.0.x", "b.0.moe", "b.1.x" };
    static const char *const out[] = { "a.0.x", "b.0.moe", "c.1.x" };

    apply(json, 1, in, 3, out);
}

CKPT_TEST(test_rules_when_present_refused)
{
    ckpt_map *m = NULL;

    ASSERT_FAILS(CKPT_EFORMAT, parse(&m, "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": ["
                                         "{\"from\": \"l.{L}.norm\", \"to\": \"l.{L}.n\", \"when_present\": \"l.{E}.d\"}]}"));
    ASSERT_ERROR_MENTIONS("\"l.{E}.d\" uses a capture that \"l.{L}.norm\" does not have");
    ASSERT_FAILS(CKPT_EFORMAT, parse(&m, "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": ["
                                         "{\"from\": \"l.{L}.norm\", \"to\": \"l.{L}.n\", \"when_present\": [\"l.{L}.d\"]}]}"));
    ASSERT_ERROR_MENTIONS("\"when_present\" must be one pattern");
}
