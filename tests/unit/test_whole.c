/* ckpt_whole over the fixture checkpoints: sets compared at full shape, the reasons a path
 * is refused, a map applied to one side, the map parameters a checkpoint states, the side
 * of a pair a map renames. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

static int diff_paths(const char *pa, const char *pb, ckpt_diff_report **r)
{
    ckpt_whole *a = NULL, *b = NULL;
    ckpt_diff_input *ia = NULL, *ib = NULL;
    size_t i;
    int rc;

    if ((rc = ckpt_whole_open(&a, pa)) == 0 && (rc = ckpt_whole_open(&b, pb)) == 0) {
        ia = calloc(ckpt_whole_count(a) + 1, sizeof *ia);
        ib = calloc(ckpt_whole_count(b) + 1, sizeof *ib);
        for (i = 0; i < ckpt_whole_count(a); i++)
            ia[i].name = ckpt_whole_at(a, i, &ia[i].node);
        for (i = 0; i < ckpt_whole_count(b); i++)
            ib[i].name = ckpt_whole_at(b, i, &ib[i].node);
        rc = ckpt_diff(ia, ckpt_whole_count(a), ib, ckpt_whole_count(b), NULL, r);
    }
    free(ia);
    free(ib);
    ckpt_whole_close(a);
    ckpt_whole_close(b);
    return rc;
}

CKPT_TEST(sets_compare_at_full_shape)
{
    char tp2[512];
    ckpt_diff_report *r;

    snprintf(tp2, sizeof tp2, "%s", ckpt_test_data("megatron/tp2"));
    ASSERT_OK(diff_paths(tp2, ckpt_test_data("megatron/tp1"), &r));
    ASSERT_TRUE(r->n > 10 && r->equal == r->n);
    ckpt_diff_report_free(r);
    snprintf(tp2, sizeof tp2, "%s", ckpt_test_data("paddlenlp/fp32_tp2"));
    ASSERT_OK(diff_paths(tp2, ckpt_test_data("paddlenlp/fp32_tp1"), &r));
    ASSERT_TRUE(r->n > 10 && r->equal == r->n);
    ckpt_diff_report_free(r);
}

CKPT_TEST(whole_open_says_why_not)
{
    ckpt_whole *w = NULL;

    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_whole_open(&w, "no-such-checkpoint"));
    ASSERT_ERROR_MENTIONS("no-such-checkpoint");
    ASSERT_TRUE(w == NULL);
    ASSERT_TRUE(ckpt_whole_open(&w, ".") < 0);
    ASSERT_TRUE(w == NULL);
}

CKPT_TEST(a_map_renames_one_side)
{
    static const char map_json[] =
        "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": ["
        "{\"from\": \"model.layers.{L}.mlp.down_proj.weight\", \"to\": \"model.layers.{L}.down.weight\", "
        "\"ops\": [{\"op\": \"transpose\"}]}]}";
    ckpt_whole *w = NULL;
    ckpt_map *map = NULL;
    ckpt_map_params *params = NULL;
    const ckpt_node *before = NULL, *after = NULL;
    size_t i, n;

    ASSERT_OK(ckpt_whole_open(&w, ckpt_test_data("hf/llama_tiny")));
    ASSERT_TRUE(ckpt_whole_config(w) != NULL);
    n = ckpt_whole_count(w);
    for (i = 0; i < n; i++)
        if (strcmp(ckpt_whole_at(w, i, &before), "model.layers.1.mlp.down_proj.weight") == 0)
            break;
    ASSERT_TRUE(i < n);
    ASSERT_OK(ckpt_map_parse(&map, map_json, sizeof map_json - 1, "t"));
    ASSERT_OK(ckpt_map_params_new(&params));
    ASSERT_OK(ckpt_whole_apply_map(w, map, params));
    ASSERT_EQ_INT(ckpt_whole_count(w), n);
    for (i = 0; i < n; i++)
        if (strcmp(ckpt_whole_at(w, i, &after), "model.layers.1.down.weight") == 0)
            break;
    ASSERT_TRUE(i < n);
    ASSERT_EQ_INT(ckpt_node_shape(after)[0], ckpt_node_shape(before)[1]);
    ckpt_map_params_free(params);
    ckpt_map_free(map);
    ckpt_whole_close(w);
}

CKPT_TEST(map_parameters_come_from_the_checkpoints)
{
    ckpt_whole *w = NULL;
    ckpt_map_params *p = NULL;
    const ckpt_node *emb = NULL;
    int64_t v;
    size_t i;

    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_whole_open(&w, ckpt_test_data("megatron/tp2")));
    ASSERT_TRUE(strcmp(ckpt_whole_params_source(w), "Megatron-LM args") == 0);
    for (i = 0; i < ckpt_whole_count(w); i++)
        ASSERT_TRUE(!ckpt_whole_is_state(w, i));
    ASSERT_OK(ckpt_map_params_set(p, "hidden_size", 1)); /* set before: kept */
    ASSERT_OK(ckpt_whole_map_params(w, p));
    for (i = 0; i < ckpt_whole_count(w); i++)
        if (strcmp(ckpt_whole_at(w, i, &emb), "embedding.word_embeddings.weight") == 0)
            break;
    ASSERT_TRUE(i < ckpt_whole_count(w));
    ASSERT_TRUE(ckpt_map_params_get(p, "padded_vocab_size", &v) && v == ckpt_node_shape(emb)[0]);
    ASSERT_TRUE(ckpt_map_params_get(p, "num_attention_heads", &v) && v > 0);
    ASSERT_TRUE(ckpt_map_params_get(p, "num_key_value_heads", &v) && v > 0);
    ASSERT_TRUE(ckpt_map_params_get(p, "head_dim", &v) && v > 0);
    ASSERT_TRUE(ckpt_map_params_get(p, "hidden_size", &v) && v == 1);
    ASSERT_TRUE(ckpt_map_params_get(p, "tensor_model_parallel_size", &v) && v == 2);
    ckpt_whole_close(w);
    ckpt_map_params_free(p);
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_whole_open(&w, ckpt_test_data("hf/llama_tiny")));
    ASSERT_TRUE(strcmp(ckpt_whole_params_source(w), "config.json") == 0);
    ASSERT_OK(ckpt_whole_map_params(w, p));
    ASSERT_TRUE(ckpt_map_params_get(p, "vocab_size", &v) && v == 200);
    ASSERT_TRUE(!ckpt_map_params_get(p, "padded_vocab_size", &v));
    ckpt_whole_close(w);
    ckpt_map_params_free(p);
}

CKPT_TEST(a_map_pair_takes_parameters_from_both_sides)
{
    ckpt_whole *w[2] = { NULL, NULL };
    ckpt_map *map = NULL;
    ckpt_map_params *p = NULL;
    int mapped = -1;
    size_t i;

    ASSERT_OK(ckpt_map_builtin(&map, "hf_llama_megatron"));
    ASSERT_OK(ckpt_whole_open(&w[0], ckpt_test_data("hf/llama_tiny")));
    ASSERT_OK(ckpt_whole_open(&w[1], ckpt_test_data("hf/llama_tiny")));
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_whole_map_pair(w, map, p, &mapped));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_ERROR_MENTIONS("the map hf_llama_megatron needs padded_vocab_size");
    ASSERT_EQ_INT(mapped, -1);
    ASSERT_OK(ckpt_map_params_set(p, "padded_vocab_size", 256));
    ASSERT_OK(ckpt_whole_map_pair(w, map, p, &mapped));
    ASSERT_EQ_INT(mapped, 0);
    for (i = 0; i < ckpt_whole_count(w[0]); i++)
        if (strcmp(ckpt_whole_at(w[0], i, NULL), "embedding.word_embeddings.weight") == 0)
            break;
    ASSERT_TRUE(i < ckpt_whole_count(w[0]));
    ckpt_map_params_free(p);
    ckpt_map_free(map);
    ckpt_whole_close(w[0]);
    ckpt_whole_close(w[1]);
}
