/* DeepSeek-V3 (formats/families/deepseek_v3.json) and the per-layer MoE list it brought
 * (src/rules/family_moe.c): both fixtures' configs (YaRN in transformers 4's rope_scaling and 5's
 * rope_parameters, first_k_dense_replace as the 0/1 list of MoE layers), the Megatron args
 * written from them and read back (moe_layer_freq as Megatron's list, first_k_dense_replace
 * from it), what args cannot say (a dense layer after a MoE layer), q_lora_rank null both ways,
 * the tensor check's per-layer condition and own_dtype flag, and what Megatron cannot compute
 * refused by the conversion, not by reading (verify runs the fixtures as transformers does). */
#include "test.h"

#include <ckpt/family.h>
#include <ckpt/megatron.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

    return ckpt_family_config_get(c, field, &v) == 0 && v->kind == CKPT_VAL_FLOAT ? v->u.real : -99;
}

/* the field's 0/1 list as text ("011"), "-" when it is no list */
static const char *list_of(const ckpt_family_config *c, const char *field, char *buf, size_t cap)
{
    const ckpt_value *v;
    size_t i;

    if (ckpt_family_config_get(c, field, &v) < 0 || v->kind != CKPT_VAL_LIST || v->u.seq.n >= cap)
        return "-";
    for (i = 0; i < v->u.seq.n; i++)
        buf[i] = v->u.seq.items[i]->kind == CKPT_VAL_INT ? (char)('0' + v->u.seq.items[i]->u.integer) : '?';
    buf[i] = 0;
    return buf;
}

/* The fixture's config.json text with `from` replaced by `to` (NULL: as it is). */
static char *fixture_text(const char *dir, const char *from, const char *to)
{
    char path[512], *text, *at;
    unsigned char *bytes;
    size_t len;

    snprintf(path, sizeof path, "%s/config.json", ckpt_test_data(dir));
    if (!(bytes = ckpt_test_read_file(path, &len)) || !(text = calloc(len + 64, 1))) {
        free(bytes);
        return NULL;
    }
    memcpy(text, bytes, len);
    free(bytes);
    if (from && (at = strstr(text, from)) != NULL && strlen(to) <= strlen(from) + 32) {
        memmove(at + strlen(to), at + strlen(from), strlen(at + strlen(from)) + 1);
        memcpy(at, to, strlen(to));
    }
    return text;
}

/* The fixture as hf2mcore takes it: rms_norm_eps 1e-6 and top 4 (2 x topk_group); then `from`
 * replaced by `to`. -1 where the fixture is not as the test expects. */
static int read_fixture(const char *dir, const char *from, const char *to, ckpt_family_config **c)
{
    const ckpt_family *f;
    char *text = fixture_text(dir, "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-06"), *at, *t2;
    int rc;

    if (!text || !(at = strstr(text, "\"num_experts_per_tok\": 2"))) {
        free(text);
        return -1;
    }
    at[strlen("\"num_experts_per_tok\": ")] = '4';
    if (from) {
        if (!(at = strstr(text, from)) || !(t2 = calloc(strlen(text) + strlen(to) + 1, 1))) {
            free(text);
            return -1;
        }
        sprintf(t2, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
        free(text);
        text = t2;
    }
    rc = ckpt_family_builtin(&f, "deepseek_v3");
    if (rc == 0)
        rc = ckpt_family_config_read(c, f, CKPT_FAMILY_HF, "cfg/config.json", text);
    free(text);
    return rc;
}

CKPT_TEST(test_family_deepseek_fixtures)
{
    static const char *const dirs[] = { "hf/deepseek_v3_tiny", "hf/transformers5/deepseek_v3_tiny" };
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_arena *a;
    ckpt_value *args;
    char buf[16], *text;
    size_t i;

    for (i = 0; i < 2; i++) {
        ASSERT_TRUE((text = fixture_text(dirs[i], NULL, NULL)) != NULL);
        ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_HF, "cfg/config.json", text));
        ASSERT_EQ_STR(ckpt_family_name(f), "deepseek_v3");
        /* as they are, a model transformers runs (verify reads it), but not Megatron: it would
         * normalise MLA's compressed q and kv with rms_norm_eps 1e-5, transformers with 1e-6 */
        ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "cfg/config.json", text));
        ASSERT_OK(ckpt_arena_new(&a));
        ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_config_args(f, c, a, 1, "local", &args));
        ASSERT_ERROR_MENTIONS("cfg/config.json: rms_norm_eps is not 1e-06: transformers' DeepSeek-V3 normalises");
        ckpt_arena_free(a);
        ckpt_family_config_free(c);
        free(text);
        ASSERT_OK(read_fixture(dirs[i], NULL, NULL, &c));
        ASSERT_EQ_STR(list_of(c, "moe_layers", buf, sizeof buf), "011");
        ASSERT_EQ_INT(int_of(c, "first_k_dense"), 1);
        ASSERT_EQ_INT(int_of(c, "q_lora_rank"), 16);
        ASSERT_EQ_INT(int_of(c, "n_shared"), 1);
        ASSERT_EQ_INT(int_of(c, "num_experts"), 8);
        ASSERT_EQ_INT(int_of(c, "ffn_size"), 16);
        ASSERT_EQ_INT(int_of(c, "dense_ffn_size"), 64);
        ASSERT_EQ_INT(int_of(c, "yarn_original_max_positions"), 16);
        ASSERT_TRUE(real_of(c, "yarn_factor") == 4.0 && real_of(c, "routed_scaling") == 2.5);
        ASSERT_TRUE(real_of(c, "rope_theta") == 10000.0);
        ckpt_family_config_free(c);
    }
    /* the fixture's own top 2 in groups the two sides score differently */
    ASSERT_OK(read_fixture(dirs[0], "\"num_experts_per_tok\": 4", "\"num_experts_per_tok\": 2", &c));
    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_config_args(ckpt_family_config_family(c), c, a, 1, "local", &args));
    ASSERT_ERROR_MENTIONS("cfg/config.json: n_group, topk_group and num_experts_per_tok");
    ckpt_arena_free(a);
    ckpt_family_config_free(c);
    /* more dense layers than layers */
    ASSERT_FAILS(CKPT_EFORMAT, read_fixture(dirs[1], "\"first_k_dense_replace\": 1", "\"first_k_dense_replace\": 4", &c));
    ASSERT_ERROR_MENTIONS("first_k_dense_replace 4 is more than num_hidden_layers 3");
}

CKPT_TEST(test_family_deepseek_args)
{
    const ckpt_family *f;
    ckpt_family_config *c, *back;
    ckpt_arena *a;
    ckpt_value *args;
    const ckpt_value *v;
    ckpt_buf json = CKPT_BUF_INIT;
    char buf[16];

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(read_fixture("hf/deepseek_v3_tiny", NULL, NULL, &c));
    f = ckpt_family_config_family(c);
    ASSERT_OK(ckpt_family_config_args(f, c, a, 2, "local", &args));
    v = ckpt_megatron_arg(args, "moe_layer_freq");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_LIST && v->u.seq.n == 3 && v->u.seq.items[0]->u.integer == 0 &&
                v->u.seq.items[2]->u.integer == 1);
    ASSERT_TRUE((v = ckpt_megatron_arg(args, "moe_shared_expert_intermediate_size")) && v->u.integer == 16);
    ASSERT_TRUE((v = ckpt_megatron_arg(args, "qk_head_dim")) && v->u.integer == 8);
    ASSERT_TRUE((v = ckpt_megatron_arg(args, "kv_channels")) && v->u.integer == 8);
    ASSERT_EQ_STR(ckpt_family_name(f), "deepseek_v3");
    ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(list_of(back, "moe_layers", buf, sizeof buf), "011");
    ASSERT_EQ_INT(int_of(back, "first_k_dense"), 1);
    ASSERT_EQ_INT(int_of(back, "n_shared"), 1);
    ASSERT_EQ_INT(int_of(back, "norm_topk_prob"), 1);
    ASSERT_OK(ckpt_family_config_json(f, back, CKPT_FAMILY_HF, CKPT_DTYPE_BF16, &json));
    ASSERT_TRUE(strstr((const char *)json.data, "\"first_k_dense_replace\": 1,") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"original_max_position_embeddings\": 16,\n    \"rope_type\": \"yarn\",\n"
                                                "    \"type\": \"yarn\"\n  }") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"rope_theta\": 10000.0,\n    \"rope_type\": \"yarn\"\n  }") != NULL);
    ckpt_buf_dispose(&json);
    ckpt_family_config_free(back);

    /* megatron-core's int form: every 2nd layer MoE from layer 0 makes layer 1 dense after a MoE layer */
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "moe_layer_freq", 2));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("args.moe_layer_freq makes layer 1 dense after a MoE layer, which first_k_dense_replace");
    ASSERT_OK(ckpt_megatron_args_set_int_list(a, args, "moe_layer_freq", (const int64_t[]){ 0, 1 }, 2));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("args.moe_layer_freq is neither a positive integer nor a list of num_layers 3");
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "moe_layer_freq", 1));
    /* args whose routing transformers scores otherwise are refused when read */
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "moe_router_topk", 2));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_ERROR_MENTIONS("args: n_group, topk_group and num_experts_per_tok");
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "moe_router_topk", 4));
    ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(list_of(back, "moe_layers", buf, sizeof buf), "111");
    ASSERT_EQ_INT(int_of(back, "first_k_dense"), 0);
    ckpt_family_config_free(back);
    ckpt_family_config_free(c);

    /* no query compression: q_lora_rank null is None in args and null again */
    ASSERT_OK(read_fixture("hf/deepseek_v3_tiny", "\"q_lora_rank\": 16", "\"q_lora_rank\": null", &c));
    ASSERT_EQ_INT(int_of(c, "q_lora_rank"), -1);
    ASSERT_OK(ckpt_family_config_args(f, c, a, 1, "transformer_engine", &args));
    ASSERT_TRUE((v = ckpt_megatron_arg(args, "q_lora_rank")) && v->kind == CKPT_VAL_NONE);
    ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_INT(int_of(back, "q_lora_rank"), -1);
    ASSERT_OK(ckpt_family_config_json(f, back, CKPT_FAMILY_HF, CKPT_DTYPE_BF16, &json));
    ASSERT_TRUE(strstr((const char *)json.data, "\"q_lora_rank\": null,") != NULL);
    ckpt_buf_dispose(&json);
    ckpt_family_config_free(back);
    ckpt_family_config_free(c);
    ckpt_arena_free(a);
}

typedef struct model {
    ckpt_graph *g;
    ckpt_map_input in[160];
    char names[160][80];
    size_t n;
} model;

static void add(model *m, const char *name, ckpt_dtype dt, int64_t rows, int64_t cols)
{
    int64_t shape[2] = { rows, cols };

    ASSERT_TRUE(m->n < 160);
    snprintf(m->names[m->n], sizeof m->names[m->n], "%s", name);
    m->in[m->n].name = m->names[m->n];
    m->in[m->n].home = 0;
    ASSERT_OK(ckpt_node_zeros(m->g, dt, cols ? 2 : 1, shape, &m->in[m->n].node));
    m->n++;
}

/* The fixture's tensors: layer 0 dense, layers 1-2 MoE; the expert bias in `bias_dt`. */
static void fixture_tensors(model *m, ckpt_dtype bias_dt)
{
    static const struct { const char *name; int64_t r, c; } attn[] = {
        { "self_attn.q_a_proj.weight", 16, 32 }, { "self_attn.q_a_layernorm.weight", 16, 0 },
        { "self_attn.q_b_proj.weight", 48, 16 }, { "self_attn.kv_a_proj_with_mqa.weight", 20, 32 },
        { "self_attn.kv_a_layernorm.weight", 16, 0 }, { "self_attn.kv_b_proj.weight", 64, 16 },
        { "self_attn.o_proj.weight", 32, 32 }, { "input_layernorm.weight", 32, 0 },
        { "post_attention_layernorm.weight", 32, 0 } };
    char name[80];
    int l, e;
    size_t i;

    memset(m, 0, sizeof *m);
    ASSERT_OK(ckpt_graph_new(&m->g));
    add(m, "model.embed_tokens.weight", CKPT_DTYPE_BF16, 128, 32);
    for (l = 0; l < 3; l++) {
        for (i = 0; i < sizeof attn / sizeof attn[0]; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", l, attn[i].name);
            add(m, name, CKPT_DTYPE_BF16, attn[i].r, attn[i].c);
        }
        if (l == 0) {
            add(m, "model.layers.0.mlp.gate_proj.weight", CKPT_DTYPE_BF16, 64, 32);
            add(m, "model.layers.0.mlp.up_proj.weight", CKPT_DTYPE_BF16, 64, 32);
            add(m, "model.layers.0.mlp.down_proj.weight", CKPT_DTYPE_BF16, 32, 64);
            continue;
        }
        for (e = 0; e < 8; e++) {
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e);
            add(m, name, CKPT_DTYPE_BF16, 16, 32);
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.up_proj.weight", l, e);
            add(m, name, CKPT_DTYPE_BF16, 16, 32);
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
            add(m, name, CKPT_DTYPE_BF16, 32, 16);
        }
        snprintf(name, sizeof name, "model.layers.%d.mlp.gate.weight", l);
        add(m, name, CKPT_DTYPE_BF16, 8, 32);
        snprintf(name, sizeof name, "model.layers.%d.mlp.gate.e_score_correction_bias", l);
        add(m, name, bias_dt, 8, 0);
        snprintf(name, sizeof name, "model.layers.%d.mlp.shared_experts.gate_proj.weight", l);
        add(m, name, CKPT_DTYPE_BF16, 16, 32);
        snprintf(name, sizeof name, "model.layers.%d.mlp.shared_experts.up_proj.weight", l);
        add(m, name, CKPT_DTYPE_BF16, 16, 32);
        snprintf(name, sizeof name, "model.layers.%d.mlp.shared_experts.down_proj.weight", l);
        add(m, name, CKPT_DTYPE_BF16, 32, 16);
    }
    add(m, "model.norm.weight", CKPT_DTYPE_BF16, 32, 0);
    add(m, "lm_head.weight", CKPT_DTYPE_BF16, 128, 32);
}

CKPT_TEST(test_family_deepseek_tensors)
{
    ckpt_family_config *c;
    const ckpt_family *f;
    model m;

    ASSERT_OK(read_fixture("hf/deepseek_v3_tiny", NULL, NULL, &c));
    f = ckpt_family_config_family(c);
    /* the released model keeps its expert bias in float32 beside bfloat16 weights */
    fixture_tensors(&m, CKPT_DTYPE_F32);
    ASSERT_OK(ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ckpt_graph_free(m.g);
    fixture_tensors(&m, CKPT_DTYPE_BF16);
    ASSERT_OK(ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    /* a dense layer's MLP in a MoE layer, named with what says the layer is MoE */
    snprintf(m.names[0], sizeof m.names[0], "model.layers.1.mlp.down_proj.weight");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "c", "w", m.in, m.n));
    ASSERT_ERROR_MENTIONS("w: tensor model.layers.1.mlp.down_proj.weight is there but c says a mixture of experts in this layer");
    ckpt_graph_free(m.g);
    ckpt_family_config_free(c);
}
