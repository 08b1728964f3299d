/* Implementation variants of a forward map ("variants": {"local": [rules]}), as GPT-2's
 * hf_gpt2_megatron uses them for Megatron's local layer names: a variant's rules replace the
 * rules of the same name, the built-in map's variant and its inverse load by their own names
 * ("<map>_<variant>", "<inverse>_<variant>"), and a variant that names no rule or does not
 * parse is refused when the map is loaded, naming it. */
#include "test.h"

#include <stdlib.h>

#define MAP_HEAD "{\"ckptconv_map\": 1, \"name\": \"m\", \"rules\": [" \
                 "{\"name\": \"norm\", \"from\": \"a.{L}.n\", \"to\": \"b.{L}.te_n\"}," \
                 "{\"from\": \"a.{L}.w\", \"to\": \"b.{L}.w\", \"ops\": [{\"op\": \"transpose\"}]}], "

static int parse(const char *text, ckpt_map **m)
{
    return ckpt_map_parse(m, text, strlen(text), "m.json");
}

CKPT_TEST(test_rules_gpt2_variant_checked)
{
    ckpt_map *m = NULL;

    ASSERT_OK(parse(MAP_HEAD "\"variants\": {\"local\": [{\"name\": \"norm\", \"from\": \"a.{L}.n\", "
                             "\"to\": \"b.{L}.local_n\"}]}}", &m));
    ASSERT_EQ_STR(ckpt_map_name(m), "m");
    ckpt_map_free(m);
    ASSERT_FAILS(CKPT_EFORMAT, parse(MAP_HEAD "\"variants\": {\"local\": [{\"name\": \"nrm\", \"from\": \"a.{L}.n\", "
                                              "\"to\": \"b.{L}.local_n\"}]}}", &m));
    ASSERT_ERROR_MENTIONS("m.json: variants: local[0]");
    ASSERT_ERROR_MENTIONS("needs the \"name\" of a rule of \"rules\" it replaces");
    ASSERT_FAILS(CKPT_EFORMAT, parse(MAP_HEAD "\"variants\": {\"local\": [{\"name\": \"norm\", \"from\": \"a.{L}.n\", "
                                              "\"to\": \"b.{X}.local_n\"}]}}", &m));
    ASSERT_ERROR_MENTIONS("m.json (variant local)");
    ASSERT_ERROR_MENTIONS("b.{X}.local_n");
    ASSERT_FAILS(CKPT_EFORMAT, parse(MAP_HEAD "\"variants\": {\"local\": []}}", &m));
    ASSERT_ERROR_MENTIONS("\"local\" must be a name with a non-empty list of rules");
    ASSERT_FAILS(CKPT_EFORMAT, parse(MAP_HEAD "\"variants\": [1]}", &m));
    ASSERT_ERROR_MENTIONS("\"variants\" must be an object");
}

static const char *renamed(const ckpt_map *m, const char *from, ckpt_graph *g, ckpt_map_result **r)
{
    static const int64_t shape[1] = { 4 };
    ckpt_map_params *p = NULL;
    ckpt_map_input in;
    const char *name = NULL;

    in.name = from;
    in.home = 0;
    if (ckpt_node_zeros(g, CKPT_DTYPE_F32, 1, shape, &in.node) == 0 && ckpt_map_params_new(&p) == 0 &&
        ckpt_map_params_set(p, "hidden_size", 32) == 0 && ckpt_map_params_set(p, "num_attention_heads", 4) == 0 &&
        ckpt_map_apply(m, p, g, &in, 1, NULL, r) == 0 && ckpt_map_result_count(*r) == 1)
        name = ckpt_map_result_at(*r, 0)->name;
    ckpt_map_params_free(p);
    return name;
}

/* hf_gpt2_megatron_local and megatron_hf_gpt2_local: the norms under local names, everything
 * else as the map says; an unknown variant is no map. */
CKPT_TEST(test_rules_gpt2_variant_builtin)
{
    ckpt_map *m = NULL;
    ckpt_map_result *r = NULL;
    ckpt_graph *g = NULL;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_map_builtin(&m, "hf_gpt2_megatron_local"));
    ASSERT_EQ_STR(ckpt_map_name(m), "hf_gpt2_megatron_local");
    ASSERT_EQ_STR(renamed(m, "transformer.h.3.ln_1.bias", g, &r), "decoder.layers.3.input_layernorm.bias");
    ckpt_map_result_free(r);
    ASSERT_EQ_STR(renamed(m, "transformer.h.3.ln_2.weight", g, &r), "decoder.layers.3.pre_mlp_layernorm.weight");
    ckpt_map_result_free(r);
    ASSERT_EQ_STR(renamed(m, "transformer.h.3.attn.c_proj.bias", g, &r), "decoder.layers.3.self_attention.linear_proj.bias");
    ckpt_map_result_free(r);
    ckpt_map_free(m);

    ASSERT_OK(ckpt_map_builtin(&m, "megatron_hf_gpt2_local"));
    ASSERT_EQ_STR(ckpt_map_name(m), "megatron_hf_gpt2_local");
    ASSERT_EQ_STR(renamed(m, "decoder.layers.0.pre_mlp_layernorm.bias", g, &r), "transformer.h.0.ln_2.bias");
    ckpt_map_result_free(r);
    ckpt_map_free(m);

    ASSERT_OK(ckpt_map_builtin(&m, "hf_gpt2_megatron"));
    ASSERT_EQ_STR(renamed(m, "transformer.h.3.ln_1.bias", g, &r),
                  "decoder.layers.3.self_attention.linear_qkv.layer_norm_bias");
    ckpt_map_result_free(r);
    ckpt_map_free(m);

    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_map_builtin(&m, "hf_gpt2_megatron_fused"));
    ASSERT_ERROR_MENTIONS("no built-in map is named 'hf_gpt2_megatron_fused'");
    ASSERT_OK(ckpt_map_builtin(&m, "hf_llama_megatron_local"));
    ASSERT_EQ_STR(ckpt_map_name(m), "hf_llama_megatron_local");
    ckpt_map_free(m);
    ckpt_graph_free(g);
}
