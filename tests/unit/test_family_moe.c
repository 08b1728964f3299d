/* The mixture-of-experts families (formats/families/mixtral.json, qwen3_moe.json): their
 * configs as transformers 4.53 and 5.24 write them, what they refuse, their experts in the
 * tensor check and in transformers' order ({E} rows), and Megatron args, megatron-core's own
 * included, detected as the family whose routing they compute. */
#include "test.h"
#include "family_config_text.h"

#include <ckpt/family.h>
#include <ckpt/megatron.h>
#include <ckpt/set.h>
#include <ckpt/verify.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fixture's config.json read by the family its model_type names. */
static void fixture_config(const char *dir, const char *family, ckpt_family_config **c)
{
    char path[512];
    const ckpt_family *f;
    unsigned char *bytes;
    char *text;
    size_t len;

    snprintf(path, sizeof path, "%s/config.json", ckpt_test_data(dir));
    bytes = ckpt_test_read_file(path, &len);
    ASSERT_TRUE(bytes != NULL && (text = calloc(len + 1, 1)) != NULL); /* the file's bytes are not a C string */
    memcpy(text, bytes, len);
    free(bytes);
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, path, text));
    ASSERT_EQ_STR(ckpt_family_name(f), family);
    ASSERT_OK(ckpt_family_config_read(c, f, CKPT_FAMILY_HF, path, text));
    free(text);
}

CKPT_TEST(test_family_moe_fixture_configs)
{
    static const char *const dirs[] = { "hf/mixtral_tiny", "hf/transformers5/mixtral_tiny", "hf/qwen3_moe_tiny",
                                        "hf/transformers5/qwen3_moe_tiny" };
    ckpt_family_config *c;
    size_t i;

    /* 4.53 writes Qwen3-MoE's num_experts, 5.24 num_local_experts (its attribute_map) */
    for (i = 0; i < 4; i++) {
        fixture_config(dirs[i], i < 2 ? "mixtral" : "qwen3_moe", &c);
        ASSERT_EQ_INT(int_of(c, "num_experts"), 4);
        ASSERT_EQ_INT(int_of(c, "moe_topk"), 2);
        ASSERT_EQ_INT(int_of(c, "ffn_size"), 32);
        if (i >= 2) {
            ASSERT_EQ_INT(int_of(c, "norm_topk_prob"), 0);
            ASSERT_EQ_INT(int_of(c, "dense_ffn_size"), 64);
            ASSERT_EQ_INT(int_of(c, "head_dim"), 16);
        }
        ckpt_family_config_free(c);
    }
}

/* What verify runs for the fixtures: every layer MoE, the experts' count, top-k and width,
 * and the routing Qwen3-MoE's norm_topk_prob chooses (false: softmax over every expert, then the
 * top k as they are). */
CKPT_TEST(test_family_moe_model_config)
{
    static const char *const dirs[] = { "hf/mixtral_tiny", "hf/qwen3_moe_tiny" };
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_model_config mc;
    size_t i;

    for (i = 0; i < 2; i++) {
        fixture_config(dirs[i], i ? "qwen3_moe" : "mixtral", &c);
        ASSERT_OK(ckpt_family_builtin(&f, i ? "qwen3_moe" : "mixtral"));
        ASSERT_OK(ckpt_family_model_config(f, c, &mc));
        ASSERT_EQ_INT(mc.num_experts, 4);
        ASSERT_EQ_INT(mc.moe_top_k, 2);
        ASSERT_EQ_INT(mc.moe_ffn_hidden_size, 32);
        ASSERT_EQ_INT(mc.moe_layer_freq, 1);
        ASSERT_EQ_INT(mc.moe_shared_ffn_hidden_size, 0);
        ASSERT_EQ_INT(mc.moe_score, i ? CKPT_MOE_SOFTMAX_ALL : CKPT_MOE_SOFTMAX_TOPK);
        ckpt_family_config_free(c);
    }
    ASSERT_OK(ckpt_family_builtin(&f, "qwen3_moe"));
    ASSERT_OK(read_cfg("qwen3_moe", "\"model_type\": \"qwen3_moe\", \"num_experts\": 8, \"moe_intermediate_size\": 16, \"norm_topk_prob\": true", &c));
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_EQ_INT(mc.moe_score, CKPT_MOE_SOFTMAX_TOPK);
    ASSERT_EQ_INT(mc.num_experts, 8);
    ckpt_family_config_free(c);
    /* a dense family runs no experts */
    ASSERT_OK(ckpt_family_builtin(&f, "llama"));
    ASSERT_OK(read_cfg("llama", NULL, &c));
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.num_experts <= 0);
    ckpt_family_config_free(c);
}

/* the field moe_layers as text, "01": layer 0 dense, layer 1 MoE */
static const char *moe_layers(const ckpt_family_config *c)
{
    static char buf[16];
    const ckpt_value *v;
    size_t i;

    if (ckpt_family_config_get(c, "moe_layers", &v) < 0 || v->kind != CKPT_VAL_LIST || v->u.seq.n >= sizeof buf)
        return "-";
    for (i = 0; i < v->u.seq.n; i++)
        buf[i] = v->u.seq.items[i]->kind == CKPT_VAL_INT ? (char)('0' + v->u.seq.items[i]->u.integer) : '?';
    buf[i] = 0;
    return buf;
}

CKPT_TEST(test_family_moe_config_refused)
{
    ckpt_family_config *c = NULL;

    ASSERT_FAILS(CKPT_EFORMAT, read_cfg("mixtral", NULL, &c));
    ASSERT_ERROR_MENTIONS("num_local_experts is missing");
    ASSERT_OK(read_cfg("mixtral", "\"num_local_experts\": 8, \"router_jitter_noise\": 0.0", &c));
    ASSERT_EQ_INT(int_of(c, "moe_topk"), 2);
    ckpt_family_config_free(c);
    ASSERT_FAILS(CKPT_EFORMAT, read_cfg("mixtral", "\"num_local_experts\": 8, \"num_experts_per_tok\": 9", &c));
    ASSERT_ERROR_MENTIONS("cfg/config.json: num_experts_per_tok 9 is more than num_local_experts 8");
    ASSERT_OK(read_cfg("mixtral", "\"num_local_experts\": 8, \"num_experts_per_tok\": 8", &c));
    ckpt_family_config_free(c);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_cfg("mixtral", "\"num_local_experts\": 8, \"router_jitter_noise\": 0.1", &c));
    ASSERT_ERROR_MENTIONS("router_jitter_noise is 0.1, not 0");
    /* Qwen3-MoE's dense layers: transformers' rule, layer i dense where mlp_only_layers names it
     * or (i + 1) % decoder_sparse_step != 0 */
    ASSERT_OK(read_cfg("qwen3_moe", "\"num_experts\": 8, \"moe_intermediate_size\": 32, \"mlp_only_layers\": [0]", &c));
    ASSERT_EQ_STR(moe_layers(c), "01");
    ckpt_family_config_free(c);
    ASSERT_OK(read_cfg("qwen3_moe", "\"num_experts\": 8, \"moe_intermediate_size\": 32, \"decoder_sparse_step\": 2", &c));
    ASSERT_EQ_STR(moe_layers(c), "01");
    ckpt_family_config_free(c);
    ASSERT_FAILS(CKPT_EFORMAT, read_cfg("qwen3_moe", "\"num_experts\": 8, \"moe_intermediate_size\": 32, \"mlp_only_layers\": [0, 2]", &c));
    ASSERT_ERROR_MENTIONS("cfg/config.json: mlp_only_layers[1] is not a layer from 0 to 1");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_cfg("qwen3_moe", "\"num_experts\": 8, \"shared_expert_intermediate_size\": 64", &c));
    ASSERT_ERROR_MENTIONS("shared_expert_intermediate_size is set");
    /* the dense families still refuse experts */
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_cfg("qwen3", "\"num_experts\": 8", &c));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_cfg("mistral", "\"num_local_experts\": 8", &c));
}

typedef struct moe_model {
    ckpt_graph *g;
    ckpt_map_input in[160];
    char names[160][80];
    size_t n;
} moe_model;

static void add(moe_model *m, const char *name, int64_t rows, int64_t cols)
{
    int64_t shape[2] = { rows, cols };

    ASSERT_TRUE(m->n < 160);
    snprintf(m->names[m->n], sizeof m->names[m->n], "%s", name);
    ASSERT_OK(ckpt_node_zeros(m->g, CKPT_DTYPE_BF16, cols ? 2 : 1, shape, &m->in[m->n].node));
    m->in[m->n].name = m->names[m->n];
    m->n++;
}

/* Mixtral at SIZES with `experts` experts (intermediate 96), the experts of each layer listed
 * last to first so that the order has something to do. */
static void build(moe_model *m, int experts)
{
    char name[80];
    int l, e;

    m->n = 0;
    add(m, "lm_head.weight", 200, 64);
    add(m, "model.embed_tokens.weight", 200, 64);
    for (l = 1; l >= 0; l--) {
        for (e = experts - 1; e >= 0; e--) {
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e);
            add(m, name, 64, 96);
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e);
            add(m, name, 96, 64);
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, e);
            add(m, name, 96, 64);
        }
        snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", l);
        add(m, name, experts, 64);
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        add(m, name, 64, 0);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        add(m, name, 64, 0);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", l);
        add(m, name, 64, 64);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_proj.weight", l);
        add(m, name, 32, 64);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.v_proj.weight", l);
        add(m, name, 32, 64);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", l);
        add(m, name, 64, 64);
    }
    add(m, "model.norm.weight", 64, 0);
}

CKPT_TEST(test_family_moe_tensors)
{
    const ckpt_family *mixtral;
    ckpt_family_config *c;
    const char *names[160];
    size_t perm[160], i;
    moe_model m;

    ASSERT_OK(ckpt_graph_new(&m.g));
    ASSERT_OK(ckpt_family_builtin(&mixtral, "mixtral"));
    ASSERT_OK(read_cfg("mixtral", "\"num_local_experts\": 11", &c));
    build(&m, 11);
    ASSERT_OK(ckpt_family_check_tensors(mixtral, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));

    /* transformers' order: attention, router, expert 0's w1 w2 w3, expert 1's, ... (2 before 10), norms */
    for (i = 0; i < m.n; i++)
        names[i] = m.in[i].name;
    ASSERT_OK(ckpt_family_order(mixtral, CKPT_FAMILY_HF, names, m.n, perm));
    ASSERT_EQ_STR(names[perm[0]], "model.embed_tokens.weight");
    ASSERT_EQ_STR(names[perm[4]], "model.layers.0.self_attn.o_proj.weight");
    ASSERT_EQ_STR(names[perm[5]], "model.layers.0.block_sparse_moe.gate.weight");
    ASSERT_EQ_STR(names[perm[6]], "model.layers.0.block_sparse_moe.experts.0.w1.weight");
    ASSERT_EQ_STR(names[perm[7]], "model.layers.0.block_sparse_moe.experts.0.w2.weight");
    ASSERT_EQ_STR(names[perm[8]], "model.layers.0.block_sparse_moe.experts.0.w3.weight");
    ASSERT_EQ_STR(names[perm[9]], "model.layers.0.block_sparse_moe.experts.1.w1.weight");
    ASSERT_EQ_STR(names[perm[12]], "model.layers.0.block_sparse_moe.experts.2.w1.weight");
    ASSERT_EQ_STR(names[perm[36]], "model.layers.0.block_sparse_moe.experts.10.w1.weight");
    ASSERT_EQ_STR(names[perm[39]], "model.layers.0.input_layernorm.weight");
    ASSERT_EQ_STR(names[perm[40]], "model.layers.0.post_attention_layernorm.weight");
    ASSERT_EQ_STR(names[perm[m.n - 1]], "lm_head.weight");

    /* an expert past num_local_experts, one with a leading zero, one missing, a misshapen one */
    add(&m, "model.layers.1.block_sparse_moe.experts.11.w1.weight", 96, 64);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(mixtral, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.layers.1.block_sparse_moe.experts.11.w1.weight is not one of the 11 experts "
                          "that num_local_experts in c says");
    m.n--;
    add(&m, "model.layers.1.block_sparse_moe.experts.01.w1.weight", 96, 64);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(mixtral, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("tensor model.layers.1.block_sparse_moe.experts.01.w1.weight is not a weight of the Mixtral model");
    m.n--;
    m.in[2] = m.in[--m.n]; /* layer 1's expert 10 w2 goes */
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_family_check_tensors(mixtral, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: no tensor model.layers.1.block_sparse_moe.experts.10.w2.weight, which c implies "
                          "(num_hidden_layers 2, num_local_experts 11)");
    build(&m, 11);
    m.in[3].node = m.in[2 + 3 * 11].node; /* layer 1's expert 10 w1 with the router's shape */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(mixtral, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.layers.1.block_sparse_moe.experts.10.w1.weight has shape [11, 64], not the "
                          "[96, 64] that c says (intermediate_size, hidden_size)");

    /* transformers 5's fused experts (save_original_format=False) are refused saying so */
    build(&m, 11);
    snprintf(m.names[2], sizeof m.names[2], "model.layers.1.mlp.experts.gate_up_proj");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_check_tensors(mixtral, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.layers.1.mlp.experts.gate_up_proj is transformers 5's fused experts");
    ckpt_family_config_free(c);
    ckpt_graph_free(m.g);
}

static ckpt_value *mcore_args(ckpt_arena *a)
{
    ckpt_value *args = NULL;

    if (ckpt_megatron_args_new(a, &args) < 0 || ckpt_megatron_args_set_bool(a, args, "swiglu", 1) < 0 ||
        ckpt_megatron_args_set_str(a, args, "normalization", "RMSNorm") < 0 ||
        ckpt_megatron_args_set_str(a, args, "position_embedding_type", "rope") < 0 ||
        ckpt_megatron_args_set_int(a, args, "hidden_size", 64) < 0 ||
        ckpt_megatron_args_set_int(a, args, "ffn_hidden_size", 96) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_attention_heads", 4) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_layers", 2) < 0 ||
        ckpt_megatron_args_set_int(a, args, "vocab_size", 200) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_experts", 8) < 0 ||
        ckpt_megatron_args_set_int(a, args, "moe_router_topk", 2) < 0 ||
        ckpt_megatron_args_set_int(a, args, "moe_ffn_hidden_size", 48) < 0 ||
        ckpt_megatron_args_set_str(a, args, "moe_router_score_function", "softmax") < 0 ||
        ckpt_megatron_args_set_bool(a, args, "moe_router_pre_softmax", 0) < 0 ||
        ckpt_megatron_args_set_int(a, args, "moe_layer_freq", 1) < 0)
        return NULL;
    return args;
}

static const char *detected(const ckpt_value *args)
{
    const ckpt_family *f;
    return ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args) < 0 ? "refused" : ckpt_family_name(f);
}

CKPT_TEST(test_family_moe_megatron_args)
{
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_arena *a;
    ckpt_value *args;
    ckpt_buf json = CKPT_BUF_INIT;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_TRUE((args = mcore_args(a)) != NULL);
    ASSERT_EQ_STR(detected(args), "mixtral");
    ASSERT_OK(ckpt_family_builtin(&f, "mixtral"));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_INT(int_of(c, "num_experts"), 8);
    ASSERT_EQ_INT(int_of(c, "ffn_size"), 48); /* moe_ffn_hidden_size before ffn_hidden_size */
    ASSERT_OK(ckpt_family_config_json(f, c, CKPT_FAMILY_HF, CKPT_DTYPE_BF16, &json));
    ASSERT_TRUE(strstr((const char *)json.data, "\"num_local_experts\": 8,") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"intermediate_size\": 48,") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"model_type\": \"mixtral\",") != NULL);
    ckpt_buf_dispose(&json);
    ckpt_family_config_free(c);

    /* softmax over every expert before the top-k: Qwen3-MoE's norm_topk_prob false, not Mixtral */
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "moe_router_pre_softmax", 1));
    ASSERT_EQ_STR(detected(args), "refused");
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 1));
    ASSERT_EQ_STR(detected(args), "qwen3_moe");
    ASSERT_OK(ckpt_family_builtin(&f, "qwen3_moe"));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_INT(int_of(c, "norm_topk_prob"), 0);
    ASSERT_EQ_INT(int_of(c, "dense_ffn_size"), 96);
    ckpt_family_config_free(c);
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "moe_router_pre_softmax", 0));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_INT(int_of(c, "norm_topk_prob"), 1);
    ckpt_family_config_free(c);

    /* what neither family computes */
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "moe_router_score_function", "sigmoid"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_args_check(f, args));
    ASSERT_ERROR_MENTIONS("args.moe_router_score_function is sigmoid, not softmax (Qwen3-MoE's router)");
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "moe_router_score_function", "softmax"));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "moe_shared_expert_intermediate_size", 64));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_args_check(f, args));
    ASSERT_ERROR_MENTIONS("args.moe_shared_expert_intermediate_size is set, which Qwen3-MoE's router and experts do not compute");
    ASSERT_OK(ckpt_megatron_args_set_none(a, args, "moe_shared_expert_intermediate_size"));
    /* grouped-GEMM experts are the same model: the Megatron reader gives them per expert */
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "moe_grouped_gemm", 1));
    ASSERT_OK(ckpt_family_args_check(f, args));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "moe_grouped_gemm", 0));
    /* every 2nd layer MoE from layer 0 (megatron-core's int moe_layer_freq): layer 1 dense,
     * mlp_only_layers [1] in config.json */
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "moe_layer_freq", 2));
    ASSERT_OK(ckpt_family_args_check(f, args));
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(moe_layers(c), "10");
    ASSERT_OK(ckpt_family_config_json(f, c, CKPT_FAMILY_HF, CKPT_DTYPE_BF16, &json));
    ASSERT_TRUE(strstr((const char *)json.data, "\"mlp_only_layers\": [\n    1\n  ],") != NULL);
    ckpt_buf_dispose(&json);
    ckpt_family_config_free(c);
    /* a dense Qwen3 is not a Qwen3-MoE */
    ASSERT_OK(ckpt_megatron_args_set_none(a, args, "num_experts"));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "moe_layer_freq", 1));
    ASSERT_EQ_STR(detected(args), "qwen3");
    ckpt_arena_free(a);
}

/* megatron-core 0.16.1's own MoE args (testdata/megatron/distopt/m_tp1pp1dp2_ep2: SwiGLU,
 * RMSNorm, RoPE, 4 experts, top 2, softmax after the top-k, no hf_model_type) are Mixtral's. */
CKPT_TEST(test_family_moe_mcore_args)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    const ckpt_value *args;
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_set *set = NULL;
    ckpt_graph *g = NULL;
    ckpt_megatron *m = NULL;
    ckpt_buf json = CKPT_BUF_INIT;

    so.layout = "megatron";
    ASSERT_OK(ckpt_set_open(&set, ckpt_test_data("megatron/distopt/m_tp1pp1dp2_ep2/legacy"), &so));
    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_megatron_open(&m, set, g, &mo));
    args = ckpt_megatron_args(m);
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "mixtral");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_INT(int_of(c, "num_experts"), 4);
    ASSERT_EQ_INT(int_of(c, "moe_topk"), 2);
    ASSERT_EQ_INT(int_of(c, "ffn_size"), 16);
    ASSERT_OK(ckpt_family_config_json(f, c, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &json));
    ASSERT_TRUE(strstr((const char *)json.data, "\"num_local_experts\": 4,") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"num_experts_per_tok\": 2,") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"router_aux_loss_coef\": 0.0,") != NULL);
    ckpt_buf_dispose(&json);
    ckpt_family_config_free(c);
    ckpt_megatron_close(m);
    ckpt_graph_free(g);
    ckpt_set_close(set);
}
