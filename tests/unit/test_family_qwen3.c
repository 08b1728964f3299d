/* Qwen3 (testdata/hf/transformers5/qwen3_tiny, transformers 5.24: q/k RMSNorm per head,
 * head_dim 16 while hidden / heads is 8): the family (formats/families/qwen3.json) detects
 * and reads its config.json and the Megatron args that say it, checks its tensors naming what
 * is missing, and picks its maps; the built-in hf_qwen3_megatron maps, TE and local names,
 * carry q_norm/k_norm to Megatron's q_layernorm/k_layernorm and fuse q/k/v per query group at
 * head_dim 16; their inverses give back every input tensor byte for byte; the LLaMA map and
 * family refuse q_norm, naming it. verify's Hugging Face reader gives transformers' logits.
 * Written as a Megatron checkpoint at TP 2 PP 2, its forward
 * (verify's Megatron reader: per-head q/k RMSNorm, head_dim 16) gives transformers' logits run
 * as ranks and merged, it reads back to model.safetensors byte for byte, and verify fails at
 * layer 1 when that layer's q and k norms are swapped or its k norm is missing. */
#include "test.h"

#include <ckpt/family.h>
#include <ckpt/hf.h>
#include <ckpt/megatron.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#define QWEN3 "hf/transformers5/qwen3_tiny"
#define MAX_IN 64

typedef struct fixture {
    ckpt_ckpt *ck;
    ckpt_map_input in[MAX_IN];
    size_t n;
} fixture;

static int fx_open(fixture *f, ckpt_graph *g)
{
    size_t i;
    int rc;

    memset(f, 0, sizeof *f);
    if ((rc = ckpt_open(&f->ck, ckpt_test_data(QWEN3 "/model.safetensors"), NULL)) < 0)
        return rc;
    for (i = 0; i < ckpt_tensor_count(f->ck) && f->n < MAX_IN; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f->ck, i);
        f->in[f->n].name = t->name;
        if ((rc = ckpt_node_tensor(g, t, &f->in[f->n].node)) < 0)
            return rc;
        f->n++;
    }
    return 0;
}

static const ckpt_node *in_find(const fixture *f, const char *name)
{
    size_t i;
    for (i = 0; i < f->n; i++)
        if (strcmp(f->in[i].name, name) == 0)
            return f->in[i].node;
    return NULL;
}

static const ckpt_node *out_find(const ckpt_map_result *r, const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_map_result_count(r); i++)
        if (strcmp(ckpt_map_result_at(r, i)->name, name) == 0)
            return ckpt_map_result_at(r, i)->node;
    return NULL;
}

/* Same dtype, shape and bytes. */
static int same_node(const ckpt_node *a, const ckpt_node *b)
{
    size_t len;
    unsigned char *x, *y;
    int same;

    if (!a || !b || ckpt_node_dtype(a) != ckpt_node_dtype(b) || ckpt_node_ndim(a) != ckpt_node_ndim(b) ||
        memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) != 0)
        return 0;
    len = (size_t)ckpt_node_numel(a) * ckpt_dtype_size(ckpt_node_dtype(a));
    x = malloc(len + 1);
    y = malloc(len + 1);
    same = x && y && ckpt_node_read(a, 0, ckpt_node_numel(a), ckpt_node_dtype(a), x) >= 0 &&
           ckpt_node_read(b, 0, ckpt_node_numel(b), ckpt_node_dtype(b), y) >= 0 && memcmp(x, y, len) == 0;
    free(x);
    free(y);
    return same;
}

/* config.json's integers (head_dim 16 among them), and the vocabulary as Megatron pads it at
 * TP 2 (to a multiple of 128 x 2). */
#define PADDED_VOCAB 256
static int qwen3_params(ckpt_map_params **p)
{
    int rc = ckpt_map_params_new(p);
    if (rc >= 0)
        rc = ckpt_map_params_load_json(*p, ckpt_test_data(QWEN3 "/config.json"));
    return rc < 0 ? rc : ckpt_map_params_set(*p, "padded_vocab_size", PADDED_VOCAB);
}

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
    ASSERT_OK(fx_open(&f, g));
    ASSERT_EQ_INT(f.n, 25);
    ASSERT_OK(qwen3_params(&p));
    ASSERT_OK(there_and_back(&f, p, g, map, &mid, &back));
    for (layer = 0; layer < 2; layer++) {
        snprintf(hf, sizeof hf, "model.layers.%d.self_attn.q_norm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.q_layernorm.weight", layer);
        ASSERT_TRUE(same_node(in_find(&f, hf), out_find(mid, mc)));
        snprintf(hf, sizeof hf, "model.layers.%d.self_attn.k_norm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.k_layernorm.weight", layer);
        ASSERT_TRUE(same_node(in_find(&f, hf), out_find(mid, mc)));
        snprintf(hf, sizeof hf, "model.layers.%d.input_layernorm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.%s", layer, input_norm);
        ASSERT_TRUE(same_node(in_find(&f, hf), out_find(mid, mc)));
        /* 2 query groups of [2 q heads | k | v] at head_dim 16 */
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.linear_qkv.weight", layer);
        ASSERT_TRUE((qkv = out_find(mid, mc)) != NULL);
        ASSERT_EQ_INT(ckpt_node_shape(qkv)[0], 128);
        ASSERT_EQ_INT(ckpt_node_shape(qkv)[1], 32);
    }
    for (i = 0; i < ckpt_map_result_count(mid); i++)
        ASSERT_TRUE(strncmp(ckpt_map_result_at(mid, i)->name, "model.", 6) != 0);
    ASSERT_EQ_INT(ckpt_map_result_count(back), f.n);
    for (i = 0; i < f.n; i++)
        ASSERT_TRUE(same_node(f.in[i].node, out_find(back, f.in[i].name)));
    ckpt_map_result_free(mid);
    ckpt_map_result_free(back);
    ckpt_map_params_free(p);
    ckpt_close(f.ck);
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
    ASSERT_OK(fx_open(&f, g));
    ASSERT_OK(qwen3_params(&p));
    ASSERT_OK(ckpt_map_builtin(&m, "hf_llama_megatron"));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_apply(m, p, g, f.in, f.n, NULL, &r));
    ASSERT_ERROR_MENTIONS("self_attn.k_norm.weight");
    ckpt_map_free(m);
    ckpt_map_params_free(p);
    ckpt_close(f.ck);
    ckpt_graph_free(g);
}

static int64_t int_of(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0)
        return -99;
    return v->kind == CKPT_VAL_INT ? v->u.integer : v->kind == CKPT_VAL_BOOL ? v->u.boolean : v->kind == CKPT_VAL_NONE ? -1 : -98;
}

static double real_of(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0)
        return -99;
    return v->kind == CKPT_VAL_FLOAT ? v->u.real : v->kind == CKPT_VAL_INT ? (double)v->u.integer : -98;
}

/* config.json as the NUL-terminated text the family reads. */
static char *fixture_config(void)
{
    size_t len;
    unsigned char *raw = ckpt_test_read_file(ckpt_test_data(QWEN3 "/config.json"), &len);
    char *text = raw ? malloc(len + 1) : NULL;

    if (text) {
        memcpy(text, raw, len);
        text[len] = 0;
    }
    free(raw);
    return text;
}

CKPT_TEST(test_family_qwen3_config)
{
    const ckpt_family *f;
    ckpt_family_config *c;
    char *text = fixture_config();
    ckpt_map *m;

    ASSERT_TRUE(text != NULL);
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, "qwen3/config.json", text));
    ASSERT_EQ_STR(ckpt_family_name(f), "qwen3");
    ASSERT_EQ_STR(ckpt_family_title(f), "Qwen3");
    ASSERT_EQ_STR(ckpt_family_string(f, "hf.class"), "Qwen3ForCausalLM");
    ASSERT_TRUE(ckpt_family_string(f, "paddle.class") == NULL);
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "qwen3/config.json", text));
    ASSERT_TRUE(int_of(c, "head_dim") == 16 && int_of(c, "num_heads") == 4 && int_of(c, "num_kv_heads") == 2);
    ASSERT_TRUE(int_of(c, "qkv_bias") == 0 && int_of(c, "tied") == 0);
    ASSERT_TRUE(int_of(c, "sliding_window") == -1 && real_of(c, "rope_theta") == 1e6);
    ckpt_family_config_free(c);
    free(text);

    /* transformers' Qwen3Config takes head_dim 128 when config.json has none, not hidden / heads */
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "c",
                                      "{\"model_type\": \"qwen3\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 128}"));
    ASSERT_TRUE(int_of(c, "head_dim") == 128);
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
 * qk_layernorm and kv_channels 16 and read back as Qwen3; verify runs q/k norms at head_dim 16. */
CKPT_TEST(test_family_qwen3_config_out)
{
    const ckpt_family *f, *again;
    ckpt_family_config *c, *back;
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_model_config mc;
    ckpt_arena *a;
    ckpt_value *args;
    const ckpt_value *v;
    char *text = fixture_config();
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
    ASSERT_TRUE(int_of(back, "head_dim") == 16 && int_of(back, "tied") == 0 && real_of(back, "rope_theta") == 1e6);
    ASSERT_TRUE(int_of(back, "max_window_layers") == 28);
    ckpt_family_config_free(back);

    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.qk_norm == 1 && mc.head_dim == 16 && mc.num_heads == 4 && mc.num_kv_heads == 2);
    ASSERT_TRUE(mc.norm == CKPT_NORM_RMS && mc.act == CKPT_ACT_SWIGLU && mc.tied_embeddings == 0);
    ckpt_arena_free(a);
    ckpt_family_config_free(c);
    ckpt_buf_dispose(&json);
    free(text);
}

/* The args hf2mcore writes for qwen3_tiny say Qwen3 with or without hf_model_type. */
static ckpt_value *qwen3_args(ckpt_arena *a)
{
    ckpt_value *args = NULL;

    if (ckpt_megatron_args_new(a, &args) < 0 || ckpt_megatron_args_set_int(a, args, "num_layers", 2) < 0 ||
        ckpt_megatron_args_set_int(a, args, "hidden_size", 32) < 0 ||
        ckpt_megatron_args_set_int(a, args, "ffn_hidden_size", 64) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_attention_heads", 4) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_query_groups", 2) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "group_query_attention", 1) < 0 ||
        ckpt_megatron_args_set_int(a, args, "kv_channels", 16) < 0 ||
        ckpt_megatron_args_set_int(a, args, "vocab_size", 128) < 0 ||
        ckpt_megatron_args_set_str(a, args, "position_embedding_type", "rope") < 0 ||
        ckpt_megatron_args_set_float(a, args, "rotary_base", 1e6) < 0 ||
        ckpt_megatron_args_set_str(a, args, "normalization", "RMSNorm") < 0 ||
        ckpt_megatron_args_set_bool(a, args, "swiglu", 1) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "add_bias_linear", 0) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 1) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "untie_embeddings_and_output_weights", 1) < 0 ||
        ckpt_megatron_args_set_int(a, args, "padded_vocab_size", PADDED_VOCAB) < 0 ||
        ckpt_megatron_args_set_int(a, args, "max_position_embeddings", 64) < 0 ||
        ckpt_megatron_args_set_int(a, args, "seq_length", 64) < 0 ||
        ckpt_megatron_args_set_float(a, args, "norm_epsilon", 1e-5) < 0 ||
        ckpt_megatron_args_set_dtype(a, args, "params_dtype", CKPT_DTYPE_F32) < 0 ||
        ckpt_megatron_args_set_str(a, args, "transformer_impl", "transformer_engine") < 0)
        return NULL;
    return args;
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
    ASSERT_TRUE(int_of(c, "head_dim") == 16 && int_of(c, "tied") == 0);
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
    char *text = fixture_config();
    const char *names[MAX_IN];
    size_t perm[MAX_IN], i, k_norm = MAX_IN;
    ckpt_graph *g = NULL;
    fixture fx;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_open(&fx, g));
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
    ckpt_close(fx.ck);
    ckpt_graph_free(g);
    free(text);
}

/* What write_megatron breaks in layer 1 (the second pipeline stage's). */
enum { INTACT, SWAP_QK_NORM, NO_K_NORM };
#define Q_NORM1 "decoder.layers.1.self_attention.q_layernorm.weight"
#define K_NORM1 "decoder.layers.1.self_attention.k_layernorm.weight"

/* hf_qwen3_megatron of the fixture as a Megatron checkpoint at TP 2 PP 2 (TE names) in dir. */
static int write_megatron(const char *dir, int broken)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map *map = NULL;
    ckpt_map_result *r = NULL;
    ckpt_value *args;
    fixture f;
    size_t i;
    int rc;

    memset(&f, 0, sizeof f);
    t.tp = t.pp = 2;
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = fx_open(&f, ckpt_plan_graph(plan))) < 0 ||
        (rc = qwen3_params(&p)) < 0 || (rc = ckpt_map_builtin(&map, "hf_qwen3_megatron")) < 0 ||
        (rc = ckpt_map_apply(map, p, ckpt_plan_graph(plan), f.in, f.n, NULL, &r)) < 0)
        goto done;
    if (!(args = qwen3_args(ckpt_plan_arena(plan)))) {
        rc = CKPT_ENOMEM;
        goto done;
    }
    if ((rc = ckpt_megatron_new(&m, ckpt_plan_graph(plan), args, 1, &mo)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(r) && rc == 0; i++) {
        const char *name = ckpt_map_result_at(r, i)->name;
        const ckpt_node *node = ckpt_map_result_at(r, i)->node;
        if (broken == NO_K_NORM && strcmp(name, K_NORM1) == 0)
            continue;
        if (broken == SWAP_QK_NORM && strcmp(name, Q_NORM1) == 0)
            node = out_find(r, K_NORM1);
        else if (broken == SWAP_QK_NORM && strcmp(name, K_NORM1) == 0)
            node = out_find(r, Q_NORM1);
        rc = ckpt_megatron_add_tensor(m, name, node);
    }
    if (rc == 0 && (rc = ckpt_megatron_add_extra_states(m, 1)) == 0 && (rc = ckpt_megatron_plan(m, &t, plan)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    ckpt_megatron_close(m);
    ckpt_map_result_free(r);
    ckpt_map_free(map);
    ckpt_map_params_free(p);
    ckpt_close(f.ck);
    ckpt_plan_free(plan);
    return rc;
}

/* The largest |difference| between the model's logits at path and transformers' (logits.json). */
static double logits_error(const char *path, int merge, const char **why)
{
    ckpt_model_options o;
    ckpt_model *m = NULL;
    size_t len;
    unsigned char *text = ckpt_test_read_file(ckpt_test_data(QWEN3 "/logits.json"), &len);
    cJSON *j = text ? cJSON_ParseWithLength((const char *)text, len) : NULL;
    cJSON *ids = cJSON_GetObjectItem(j, "input_ids"), *rows = cJSON_GetObjectItem(j, "logits");
    int32_t tok[16];
    float out[16 * 128];
    double worst = INFINITY;
    int n = cJSON_GetArraySize(ids), i, v;

    free(text);
    *why = "";
    ckpt_model_options_init(&o);
    o.merge_tp = merge;
    for (i = 0; i < n && i < 16; i++)
        tok[i] = cJSON_GetArrayItem(ids, i)->valueint;
    if (n < 1 || n > 16 || ckpt_model_open(&m, path, &o) < 0 || ckpt_model_config_of(m)->vocab_size != 128 ||
        ckpt_model_forward(m, NULL, tok, n, out) < 0) {
        *why = ckpt_error_last()->message;
    } else {
        worst = 0;
        for (i = 0; i < n; i++)
            for (v = 0; v < 128; v++)
                worst = fmax(worst, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, i), v)->valuedouble -
                                         out[i * 128 + v]));
    }
    ckpt_model_close(m);
    cJSON_Delete(j);
    return worst;
}

/* The Megatron checkpoint at root read back through megatron_hf_qwen3, as model.safetensors in dir. */
static int write_back(const char *root, const char *dir)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_set *set = NULL;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map *map = NULL;
    ckpt_map_result *r = NULL;
    ckpt_map_input in[MAX_IN];
    const char *names[MAX_IN];
    const ckpt_node *nodes[MAX_IN];
    size_t i, n = 0;
    int rc;

    so.layout = "megatron";
    if ((rc = ckpt_set_open(&set, root, &so)) < 0 || (rc = ckpt_plan_new(&plan)) < 0 ||
        (rc = ckpt_megatron_open(&m, set, ckpt_plan_graph(plan), &mo)) < 0)
        goto done;
    for (i = 0; i < ckpt_megatron_tensor_count(m) && n < MAX_IN; i++) {
        ckpt_tensor_layout l;
        const char *name = ckpt_megatron_tensor_at(m, i, &in[n].node, &l);
        if (strstr(name, "_extra_state"))
            continue;
        in[n].name = name;
        in[n++].home = 0;
    }
    if ((rc = qwen3_params(&p)) < 0 || (rc = ckpt_map_builtin(&map, "megatron_hf_qwen3")) < 0 ||
        (rc = ckpt_map_apply(map, p, ckpt_plan_graph(plan), in, n, NULL, &r)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(r); i++) {
        names[i] = ckpt_map_result_at(r, i)->name;
        nodes[i] = ckpt_map_result_at(r, i)->node;
    }
    if ((rc = ckpt_hf_plan_safetensors(plan, names, nodes, ckpt_map_result_count(r), 0)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    ckpt_map_result_free(r);
    ckpt_map_free(map);
    ckpt_map_params_free(p);
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
    ckpt_set_close(set);
    return rc;
}

/* verify's Hugging Face reader runs Qwen3 as transformers does. */
CKPT_TEST(test_family_qwen3_hf_logits)
{
    const char *why;
    char dir[1024];
    double e;

    snprintf(dir, sizeof dir, "%s", ckpt_test_data(QWEN3)); /* ckpt_test_data's buffer is reused */
    e = logits_error(dir, 0, &why);
    if (!(e <= 1e-5))
        ckpt_test_fail(__FILE__, __LINE__, "max abs logit error %g (%s)", e, why);
}

CKPT_TEST(test_family_qwen3_megatron_tp2pp2)
{
    unsigned char *a, *b;
    size_t la, lb;
    const char *why;
    double e;
    int merge;

    ASSERT_OK(write_megatron("mc", INTACT));
    for (merge = 0; merge < 2; merge++) {
        e = logits_error("mc", merge, &why);
        if (!(e <= 1e-5)) {
            ckpt_test_fail(__FILE__, __LINE__, "merge %d: max abs logit error %g (%s)", merge, e, why);
            return;
        }
    }
    ASSERT_OK(write_back("mc", "hf"));
    a = ckpt_test_read_file("hf/model.safetensors", &la);
    b = ckpt_test_read_file(ckpt_test_data(QWEN3 "/model.safetensors"), &lb);
    ASSERT_TRUE(a && b && la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
}

/* The first failing layer of verify(a, b): -2 all passed, -1 a model-level entry, -3 verify
 * could not run (*why then says why). */
static int64_t first_failure(const char *a, const char *b, char *why, size_t cap)
{
    ckpt_verify_options vo = CKPT_VERIFY_OPTIONS_INIT;
    ckpt_model *x = NULL, *y = NULL;
    ckpt_verify_report *rep = NULL;
    int64_t layer = -3;

    vo.device = CKPT_DEVICE_CPU;
    why[0] = 0;
    if (ckpt_model_open(&x, a, NULL) == 0 && ckpt_model_open(&y, b, NULL) == 0 && ckpt_verify(x, y, &vo, &rep) == 0)
        layer = rep->first_failure ? rep->first_failure->index : -2;
    else
        snprintf(why, cap, "%s", ckpt_error_last()->message);
    ckpt_verify_report_free(rep);
    ckpt_model_close(x);
    ckpt_model_close(y);
    return layer;
}

CKPT_TEST(test_family_qwen3_verify_breakage)
{
    char why[512];

    ASSERT_OK(write_megatron("mc", INTACT));
    ASSERT_OK(write_megatron("swapped", SWAP_QK_NORM));
    ASSERT_OK(write_megatron("removed", NO_K_NORM));
    ASSERT_EQ_INT(first_failure("mc", "mc", why, sizeof why), -2);
    ASSERT_EQ_INT(first_failure("mc", "swapped", why, sizeof why), 1);
    /* verify runs a layer whose k norm is missing without it: the layer is named, not the tensor */
    ASSERT_EQ_INT(first_failure("mc", "removed", why, sizeof why), 1);
}
