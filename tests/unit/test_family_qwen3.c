/* Qwen3 (testdata/hf/transformers5/qwen3_tiny) as a family and through its maps: the family
 * (formats/families/qwen3.json) detects and reads its config.json and the Megatron args that say
 * it, writes the config.json transformers wrote and the args, checks its tensors naming what is
 * missing, and picks its maps; the built-in hf_qwen3_megatron maps, TE and local names, carry
 * q_norm/k_norm to Megatron's q_layernorm/k_layernorm and fuse q/k/v per query group at
 * head_dim 16; their inverses give back every input tensor byte for byte; the LLaMA map and
 * family refuse q_norm, naming it. */
#include "qwen3_fixture.h"

#include <ckpt/family.h>

#include <cjson/cJSON.h>

/* Apply the map `name`, then its inverse to the outputs; *mid and *back are the results. */
static int there_and_back(const fixture *f, const ckpt_map_params *p, ckpt_graph *g, const char *name,
                          ckpt_map_result **mid, ckpt_map_result **back)
{
    ckpt_map_input in[MAX_IN];
    ckpt_map *m = NULL, *inv = NULL;
    size_t i, n;
    int rc;

    if ((rc = ckpt_map_builtin(&m, name)) < 0 || (rc = ckpt_map_invert(m, &inv)) < 0 ||
        (rc = ckpt_map_apply(m, p, g, f->in, f->n, NULL, mid)) < 0)
        goto done;
    n = ckpt_map_result_count(*mid);
    for (i = 0; i < n && i < MAX_IN; i++) {
        in[i].name = ckpt_map_result_at(*mid, i)->name;
        in[i].node = ckpt_map_result_at(*mid, i)->node;
        in[i].home = ckpt_map_result_at(*mid, i)->home;
    }
    rc = ckpt_map_apply(inv, p, g, in, n, NULL, back);
done:
    ckpt_map_free(m);
    ckpt_map_free(inv);
    return rc;
}

static void check_map(const char *map, const char *input_norm)
{
    fixture f;
    ckpt_graph *g = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map_result *mid = NULL, *back = NULL;
    const ckpt_node *qkv;
    char hf[128], mc[128];
    size_t i;
    int layer;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(qwen3_open(&f, g));
    ASSERT_EQ_INT(f.n, 25);
    ASSERT_OK(qwen3_params(&p));
    ASSERT_OK(there_and_back(&f, p, g, map, &mid, &back));
    for (layer = 0; layer < 2; layer++) {
        snprintf(hf, sizeof hf, "model.layers.%d.self_attn.q_norm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.q_layernorm.weight", layer);
        ASSERT_TRUE(fx_same(fx_input(&f, hf), fx_output(mid, mc)));
        snprintf(hf, sizeof hf, "model.layers.%d.self_attn.k_norm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.k_layernorm.weight", layer);
        ASSERT_TRUE(fx_same(fx_input(&f, hf), fx_output(mid, mc)));
        snprintf(hf, sizeof hf, "model.layers.%d.input_layernorm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.%s", layer, input_norm);
        ASSERT_TRUE(fx_same(fx_input(&f, hf), fx_output(mid, mc)));
        /* 2 query groups of [2 q heads | k | v] at head_dim 16 */
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.linear_qkv.weight", layer);
        ASSERT_TRUE((qkv = fx_output(mid, mc)) != NULL);
        ASSERT_EQ_INT(ckpt_node_shape(qkv)[0], 128);
        ASSERT_EQ_INT(ckpt_node_shape(qkv)[1], 32);
    }
    for (i = 0; i < ckpt_map_result_count(mid); i++)
        ASSERT_TRUE(strncmp(ckpt_map_result_at(mid, i)->name, "model.", 6) != 0);
    ASSERT_EQ_INT(ckpt_map_result_count(back), f.n);
    for (i = 0; i < f.n; i++)
        ASSERT_TRUE(fx_same(f.in[i].node, fx_output(back, f.in[i].name)));
    ckpt_map_result_free(mid);
    ckpt_map_result_free(back);
    ckpt_map_params_free(p);
    fx_close(&f);
    ckpt_graph_free(g);
}

CKPT_TEST(test_family_qwen3_map_te)
{
    check_map("hf_qwen3_megatron", "self_attention.linear_qkv.layer_norm_weight");
}

CKPT_TEST(test_family_qwen3_map_local)
{
    check_map("hf_qwen3_megatron_local", "input_layernorm.weight");
}

/* LLaMA's map has no rule for q_norm: a Qwen3 model through it is refused, naming the tensor. */
CKPT_TEST(test_family_qwen3_llama_map_refuses_q_norm)
{
    fixture f;
    ckpt_graph *g = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map *m = NULL;
    ckpt_map_result *r = NULL;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(qwen3_open(&f, g));
    ASSERT_OK(qwen3_params(&p));
    ASSERT_OK(ckpt_map_builtin(&m, "hf_llama_megatron"));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_apply(m, p, g, f.in, f.n, NULL, &r));
    ASSERT_ERROR_MENTIONS("self_attn.k_norm.weight");
    ckpt_map_free(m);
    ckpt_map_params_free(p);
    fx_close(&f);
    ckpt_graph_free(g);
}

CKPT_TEST(test_family_qwen3_config)
{
    const ckpt_family *f;
    ckpt_family_config *c;
    char *text = fx_text(QWEN3, "config.json");
    ckpt_map *m;

    ASSERT_TRUE(text != NULL);
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, "qwen3/config.json", text));
    ASSERT_EQ_STR(ckpt_family_name(f), "qwen3");
    ASSERT_EQ_STR(ckpt_family_title(f), "Qwen3");
    ASSERT_EQ_STR(ckpt_family_string(f, "hf.class"), "Qwen3ForCausalLM");
    ASSERT_TRUE(ckpt_family_string(f, "paddle.class") == NULL);
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "qwen3/config.json", text));
    ASSERT_TRUE(fx_int(c, "head_dim") == 16 && fx_int(c, "num_heads") == 4 && fx_int(c, "num_kv_heads") == 2);
    ASSERT_TRUE(fx_int(c, "qkv_bias") == 0 && fx_int(c, "tied") == 0);
    ASSERT_TRUE(fx_int(c, "sliding_window") == -1 && fx_real(c, "rope_theta") == 1e6);
    ckpt_family_config_free(c);
    free(text);

    /* transformers' Qwen3Config takes head_dim 128 when config.json has none, not hidden / heads */
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "c",
                                      "{\"model_type\": \"qwen3\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 128}"));
    ASSERT_TRUE(fx_int(c, "head_dim") == 128);
    ckpt_family_config_free(c);
    ASSERT_FAILS(CKPT_EUNSUPPORTED,
                 ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "c",
                                         "{\"model_type\": \"qwen3\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                         "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 128, "
                                         "\"use_sliding_window\": true}"));
    ASSERT_ERROR_MENTIONS("c: use_sliding_window is true (Qwen3's window on the layers past max_window_layers only)");

    ASSERT_OK(ckpt_family_map(f, CKPT_FAMILY_MEGATRON, NULL, 0, &m));
    ASSERT_EQ_STR(ckpt_map_name(m), "hf_qwen3_megatron");
    ckpt_map_free(m);
    ASSERT_OK(ckpt_family_map(f, CKPT_FAMILY_MEGATRON, "local", 1, &m));
    ASSERT_EQ_STR(ckpt_map_name(m), "megatron_hf_qwen3_local");
    ckpt_map_free(m);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_map(f, CKPT_FAMILY_PADDLE, NULL, 1, &m));
}

/* The config.json the family writes for transformers holds every key transformers 5 wrote for
 * the fixture, with the same value (transformers_version aside); the Megatron args say
 * qk_layernorm and kv_channels 16 and read back as Qwen3, max_window_layers with them; verify
 * runs q/k norms at head_dim 16. */
CKPT_TEST(test_family_qwen3_config_out)
{
    const ckpt_family *f, *again;
    ckpt_family_config *c, *back;
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_model_config mc;
    ckpt_arena *a;
    ckpt_value *args;
    const ckpt_value *v;
    char *text = fx_text(QWEN3, "config.json");
    cJSON *want, *got, *item;

    ASSERT_TRUE(text != NULL);
    ASSERT_OK(ckpt_family_builtin(&f, "qwen3"));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "c", text));
    ASSERT_OK(ckpt_family_config_json(f, c, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &json));
    want = cJSON_Parse(text);
    got = cJSON_ParseWithLength((const char *)json.data, json.len);
    ASSERT_TRUE(want && got);
    cJSON_ArrayForEach(item, want) {
        if (strcmp(item->string, "transformers_version") == 0)
            continue;
        if (!cJSON_Compare(item, cJSON_GetObjectItemCaseSensitive(got, item->string), 1))
            ckpt_test_fail(__FILE__, __LINE__, "config.json key %s differs from transformers'", item->string);
    }
    cJSON_Delete(want);
    cJSON_Delete(got);

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 2, "local", &args));
    v = ckpt_megatron_arg(args, "qk_layernorm");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BOOL && v->u.boolean);
    v = ckpt_megatron_arg(args, "kv_channels");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_INT && v->u.integer == 16);
    ASSERT_TRUE(ckpt_value_is_str(ckpt_megatron_arg(args, "hf_model_type"), "qwen3"));
    ASSERT_OK(ckpt_family_detect(&again, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(again), "qwen3");
    ASSERT_OK(ckpt_family_config_read(&back, again, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(fx_int(back, "head_dim") == 16 && fx_int(back, "tied") == 0 && fx_real(back, "rope_theta") == 1e6);
    ASSERT_TRUE(fx_int(back, "max_window_layers") == 28);
    ckpt_family_config_free(back);
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.qk_norm == 1 && mc.head_dim == 16 && mc.num_heads == 4 && mc.num_kv_heads == 2);
    ASSERT_TRUE(mc.norm == CKPT_NORM_RMS && mc.act == CKPT_ACT_SWIGLU && mc.tied_embeddings == 0);
    ckpt_family_config_free(c);

    /* max_window_layers (no effect without use_sliding_window) comes back as it was */
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "c",
                                      "{\"model_type\": \"qwen3\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 128, "
                                      "\"head_dim\": 16, \"max_window_layers\": 36}"));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 1, "transformer_engine", &args));
    ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(fx_int(back, "max_window_layers") == 36);
    ckpt_family_config_free(back);

    ckpt_arena_free(a);
    ckpt_family_config_free(c);
    ckpt_buf_dispose(&json);
    free(text);
}

CKPT_TEST(test_family_qwen3_megatron_args)
{
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_arena *a;
    ckpt_value *args;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_TRUE((args = qwen3_args(a)) != NULL);
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "qwen3");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(fx_int(c, "head_dim") == 16 && fx_int(c, "tied") == 0);
    ckpt_family_config_free(c);
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_model_type", "qwen3"));
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "qwen3");

    /* the family the args name must be what the args are */
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_model_type", "llama"));
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args) < 0);
    ASSERT_ERROR_MENTIONS("args.qk_layernorm is set, which no Hugging Face llama, mistral or qwen2 config says");
    ASSERT_TRUE((args = qwen3_args(a)) != NULL);
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_model_type", "qwen3"));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 0));
    ASSERT_TRUE(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args) < 0 ||
                ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args) < 0);
    ASSERT_ERROR_MENTIONS("not a Qwen3 model: args.qk_layernorm is not True");
    ckpt_arena_free(a);
}

CKPT_TEST(test_family_qwen3_tensors)
{
    const ckpt_family *f, *llama;
    ckpt_family_config *c, *lc;
    char *text = fx_text(QWEN3, "config.json");
    const char *names[MAX_IN];
    size_t perm[MAX_IN], i, k_norm = MAX_IN;
    ckpt_graph *g = NULL;
    fixture fx;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(qwen3_open(&fx, g));
    ASSERT_OK(ckpt_family_builtin(&f, "qwen3"));
    ASSERT_OK(ckpt_family_builtin(&llama, "llama"));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "c", text));
    ASSERT_OK(ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "c", "w", fx.in, fx.n));

    /* transformers' state_dict order within a layer: q_norm and k_norm come with the layer */
    for (i = 0; i < fx.n; i++)
        names[i] = fx.in[i].name;
    ASSERT_OK(ckpt_family_order(f, CKPT_FAMILY_HF, names, fx.n, perm));
    ASSERT_EQ_STR(names[perm[0]], "model.embed_tokens.weight");
    ASSERT_EQ_STR(names[perm[1]], "model.layers.0.self_attn.q_proj.weight");
    ASSERT_EQ_STR(names[perm[fx.n - 1]], "lm_head.weight");
    for (i = 0; i < fx.n; i++)
        if (strcmp(names[perm[i]], "model.layers.0.self_attn.k_norm.weight") == 0)
            k_norm = i;
    ASSERT_TRUE(k_norm < 12);

    /* the LLaMA family takes no q_norm */
    ASSERT_OK(ckpt_family_config_read(&lc, llama, CKPT_FAMILY_HF, "c",
                                      "{\"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2, "
                                      "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
                                      "\"vocab_size\": 128}"));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(llama, lc, CKPT_FAMILY_HF, "c", "w", fx.in, fx.n));
    ASSERT_ERROR_MENTIONS("norm.weight is not a weight of the LLaMA model c describes");

    /* layer 1's k_norm missing, or at another size, is named */
    for (i = 0; i < fx.n && strcmp(fx.in[i].name, "model.layers.1.self_attn.k_norm.weight") != 0; i++)
        ;
    ASSERT_TRUE(i < fx.n);
    fx.in[i] = fx.in[--fx.n];
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "c", "w", fx.in, fx.n));
    ASSERT_ERROR_MENTIONS("w: no tensor model.layers.1.self_attn.k_norm.weight, which c implies (num_hidden_layers 2)");
    ASSERT_OK(ckpt_family_config_set_int(c, "head_dim", 8));
    fx.n++;
    ASSERT_TRUE(ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "c", "w", fx.in, fx.n) < 0);
    ckpt_family_config_free(c);
    ckpt_family_config_free(lc);
    fx_close(&fx);
    ckpt_graph_free(g);
    free(text);
}
