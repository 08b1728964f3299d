/* verify's DeepSeek-V3 pieces (src/verify/run_mla.c, run_moe.c, run_model.c's YaRN tables,
 * model_config.c): the forward pass of the tiny DeepSeek-V3 models transformers 4.53 and 5.24
 * wrote (testdata/hf/deepseek_v3_tiny, testdata/hf/transformers5/deepseek_v3_tiny: MLA, YaRN
 * RoPE, a dense layer, grouped sigmoid routing with expert bias, a shared expert) gives their
 * logits.json, read with the config written out by hand (the engine apart from the family
 * data) and through the family; without the groups, the YaRN scale or frequencies, the
 * interleaved RoPE or the latent norms' own eps the logits move. Grouped routing (transformers' and Megatron's group scores) against values
 * worked by hand; the family's verify features give the config written by hand. Without
 * rope_scaling (derived from the fixture) the forward pass runs plain RoPE and gives
 * transformers' logits of that config. */
#include "family_fixture.h"

#define CKPT_BUILD
#include "../../formats/verify_source.h"
#include "../../src/verify/model_private.h"
#include "../../src/verify/run_private.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB 128
#define MAX_TOKENS 16

/* The fixtures' config.json, as verify's fields. */
static void deepseek_config(ckpt_model_config *c)
{
    c->num_layers = 3;
    c->hidden_size = 32;
    c->num_heads = c->num_kv_heads = 4;
    c->ffn_hidden_size = 64;
    c->vocab_size = VOCAB;
    c->norm_eps = 1e-5;
    c->mla_norm_eps = 1e-6; /* transformers' DeepseekV3RMSNorm default: the latent norms take no eps */
    c->norm = CKPT_NORM_RMS;
    c->act = CKPT_ACT_SWIGLU;
    c->position = CKPT_POSITION_ROPE;
    c->rope_theta = 10000.0;
    c->rope_interleaved = 1;
    c->qk_norm = 0;
    c->tied_embeddings = 0;
    c->q_lora_rank = 16;
    c->kv_lora_rank = 16;
    c->qk_nope_head_dim = 8;
    c->qk_rope_head_dim = 4;
    c->v_head_dim = 8;
    c->rope_yarn_factor = 4.0;
    c->rope_original_max_positions = 16;
    c->rope_yarn_beta_fast = 32.0;
    c->rope_yarn_beta_slow = 1.0;
    c->rope_yarn_mscale = 1.0;
    c->rope_yarn_mscale_all_dim = 1.0;
    c->num_experts = 8;
    c->moe_top_k = 2;
    c->moe_ffn_hidden_size = 16;
    c->moe_shared_ffn_hidden_size = 16;
    c->moe_first_dense = 1;
    c->moe_score = CKPT_MOE_SIGMOID;
    c->moe_topk_scale = 2.5;
    c->moe_expert_bias = 1;
    c->moe_n_group = 4;
    c->moe_topk_group = 2;
    c->moe_topk_norm = 1;
}

/* A model source reading a Hugging Face model.safetensors through verify's map, its config
 * from deepseek_config and the caller's overrides only. */
static int test_open(ckpt_model_builder *b)
{
    char weights[4096];
    ckpt_ckpt *c;
    const ckpt_map *map;
    ckpt_map_params *p;
    ckpt_map_input *in = NULL;
    size_t n = 0, cap = 0;
    vsrc_parts parts;
    int rc;

    deepseek_config(ckpt_model_builder_config(b));
    snprintf(weights, sizeof weights, "%s/model.safetensors", ckpt_model_builder_path(b));
    if ((rc = ckpt_open(&c, weights, NULL)) < 0 || (rc = ckpt_vsrc__keep_ckpt(b, c)) < 0)
        return rc;
    memset(&parts, 0, sizeof parts);
    if ((rc = ckpt_vsrc__inputs(b, c, NULL, &in, &n, &cap)) == 0 &&
        (rc = ckpt_vsrc__map(b, "verify_hf_llama", &map)) == 0 && (rc = ckpt_vsrc__map_params(b, &p)) == 0 &&
        (rc = ckpt_model_builder_set_ranks(b, 1)) == 0 && (rc = ckpt_vsrc__map_rank(b, 0, map, p, in, n, &parts)) == 0)
        rc = ckpt_vsrc__add_parts(b, &parts, 1);
    free(in);
    return rc;
}

static int test_bid(const char *path, int is_dir)
{
    (void)path;
    return is_dir ? 0 : -1;
}

static const ckpt_model_source_vtable test_source = {
    CKPT_MODEL_SOURCE_ABI_VERSION, "test", test_bid, test_open,
};

/* max |verify's logits - transformers'| of the fixture in testdata `dir`, read by `source`
 * (NULL: as ckpt_model_open reads it, through the family) with `change` applied to the options
 * (NULL: none); INFINITY (saying why) when the model does not run. */
static double logits_error_by(const char *dir, const ckpt_model_source_vtable *source,
                              void (*change)(ckpt_model_options *))
{
    ckpt_model_options o;
    ckpt_model *m = NULL;
    char rel[256], path[4096];
    size_t len;
    unsigned char *text;
    cJSON *j, *ids, *rows;
    int32_t tok[MAX_TOKENS];
    float out[MAX_TOKENS * VOCAB];
    double worst = INFINITY;
    int n, i, v;

    snprintf(rel, sizeof rel, "%s/logits.json", dir);
    text = ckpt_test_read_file(ckpt_test_data(rel), &len);
    snprintf(path, sizeof path, "%s", ckpt_test_data(dir));
    j = text ? cJSON_ParseWithLength((const char *)text, len) : NULL;
    free(text);
    ids = cJSON_GetObjectItem(j, "input_ids");
    rows = cJSON_GetObjectItem(j, "logits");
    n = cJSON_GetArraySize(ids);
    for (i = 0; i < n && i < MAX_TOKENS; i++)
        tok[i] = cJSON_GetArrayItem(ids, i)->valueint;
    ckpt_model_options_init(&o);
    if (change)
        change(&o);
    if (n < 1 || n > MAX_TOKENS ||
        (source ? ckpt_model__open_source(&m, path, source, &o) : ckpt_model_open(&m, path, &o)) < 0 ||
        ckpt_model_forward(m, NULL, tok, n, out) < 0) {
        fprintf(stderr, "%s: %s\n", dir, ckpt_error_last()->message);
    } else {
        worst = 0;
        for (i = 0; i < n; i++)
            for (v = 0; v < VOCAB; v++)
                worst = fmax(worst, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, i), v)->valuedouble -
                                         out[i * VOCAB + v]));
    }
    ckpt_model_close(m);
    cJSON_Delete(j);
    return worst;
}

static double logits_error(const char *dir, void (*change)(ckpt_model_options *))
{
    return logits_error_by(dir, &test_source, change);
}

static const char *const fixtures[] = { "hf/deepseek_v3_tiny", "hf/transformers5/deepseek_v3_tiny" };

CKPT_TEST(test_verify_mla_logits_transformers)
{
    size_t i;

    for (i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        double e = logits_error(fixtures[i], NULL);
        fprintf(stderr, "%s: max |verify - transformers| %.3g\n", fixtures[i], e);
        if (!(e <= 1e-5))
            ckpt_test_fail(__FILE__, __LINE__, "%s: max abs logit error %g", fixtures[i], e);
    }
}

/* The same through the DeepSeek-V3 family (formats/families/deepseek_v3.json): its verify
 * features give the config, verify_hf_llama the names. */
CKPT_TEST(test_verify_mla_logits_family)
{
    size_t i;

    for (i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        double e = logits_error_by(fixtures[i], NULL, NULL);
        fprintf(stderr, "%s through the family: max |verify - transformers| %.3g\n", fixtures[i], e);
        if (!(e <= 1e-5))
            ckpt_test_fail(__FILE__, __LINE__, "%s: max abs logit error %g", fixtures[i], e);
    }
}

static void no_bias(ckpt_model_options *o)
{
    o->overrides.moe_expert_bias = 0;
}
static void no_groups(ckpt_model_options *o)
{
    o->overrides.moe_n_group = 1;
    o->overrides.moe_topk_group = 1;
}
static void no_mscale(ckpt_model_options *o)
{
    o->overrides.rope_yarn_mscale_all_dim = 0.0;
}
static void no_yarn(ckpt_model_options *o)
{
    o->overrides.rope_yarn_factor = 1.0;
}
static void rotate_half(ckpt_model_options *o)
{
    o->overrides.rope_interleaved = 0;
}
static void one_eps(ckpt_model_options *o)
{
    o->overrides.mla_norm_eps = 1e-5;
}
static void dense_first_two(ckpt_model_options *o)
{
    o->overrides.moe_first_dense = 2;
}

/* Each DeepSeek-V3 fact the forward pass computes moves the logits past float32 tolerance
 * when it is left out (the expert bias is ignored, a model reading without it is refused as
 * holding a tensor it does not use). */
CKPT_TEST(test_verify_mla_each_fact_counts)
{
    static const struct {
        void (*change)(ckpt_model_options *);
        const char *what;
    } changes[] = {
        { no_groups, "group-limited routing" }, { no_mscale, "YaRN's softmax scale" },
        { no_yarn, "YaRN's frequencies" },      { rotate_half, "interleaved RoPE" },
        { one_eps, "the latent norms' eps" },
    };
    ckpt_model_options o;
    ckpt_model *m;
    size_t i;

    for (i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        double e = logits_error(fixtures[0], changes[i].change);
        if (!(e > 1e-4 && isfinite(e)))
            ckpt_test_fail(__FILE__, __LINE__, "without %s: max abs logit error %g", changes[i].what, e);
    }
    ckpt_model_options_init(&o);
    no_bias(&o);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_model__open_source(&m, ckpt_test_data(fixtures[0]), &test_source, &o));
    ASSERT_ERROR_MENTIONS("layers.1.moe.router.expert_bias");
    ASSERT_ERROR_MENTIONS("the model's router has no expert bias");
    ckpt_error_clear();
    /* layer 1 holds experts where the config says dense */
    ckpt_model_options_init(&o);
    dense_first_two(&o);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_model__open_source(&m, ckpt_test_data(fixtures[0]), &test_source, &o));
    ASSERT_ERROR_MENTIONS("a dense layer before the first MoE layer");
    ckpt_error_clear();
}

/* The config's derived values: head_dim qk_nope + qk_rope, YaRN's attention factor (mscale
 * over mscale_all_dim: 1 here) and the softmax scale 12^-0.5 times (0.1 ln 4 + 1)^2. */
CKPT_TEST(test_verify_mla_config)
{
    ckpt_model_options o;
    ckpt_model *m;
    const ckpt_model_config *c;
    double mscale = 0.1 * log(4.0) + 1.0;

    ckpt_model_options_init(&o);
    ASSERT_OK(ckpt_model__open_source(&m, ckpt_test_data(fixtures[0]), &test_source, &o));
    c = ckpt_model_config_of(m);
    ASSERT_EQ_INT((int)c->head_dim, 12);
    ASSERT_TRUE(fabs(c->rope_attention_factor - 1.0) < 1e-12);
    ASSERT_TRUE(fabs(c->attn_scale - mscale * mscale / sqrt(12.0)) < 1e-12);
    ASSERT_TRUE(ckpt_model__layer_moe(m, 1) && ckpt_model__layer_moe(m, 2) && !ckpt_model__layer_moe(m, 0));
    ckpt_model_close(m);
}

/* A model config verify cannot run is refused: MLA whose head_dim is not the sum, an expert
 * bias under softmax scores, groups that do not divide the experts. */
static void bad_head_dim(ckpt_model_options *o)
{
    o->overrides.head_dim = 4;
}
static void bias_softmax(ckpt_model_options *o)
{
    o->overrides.moe_score = CKPT_MOE_SOFTMAX_TOPK;
}
static void groups_uneven(ckpt_model_options *o)
{
    o->overrides.moe_n_group = 3;
}

CKPT_TEST(test_verify_mla_config_refused)
{
    static void (*const changes[])(ckpt_model_options *) = { bad_head_dim, bias_softmax, groups_uneven };
    static const char *const says[] = { "MLA with", "expert bias or group-limited", "experts in 3 groups" };
    ckpt_model_options o;
    ckpt_model *m;
    size_t i;

    for (i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        ckpt_model_options_init(&o);
        changes[i](&o);
        ASSERT_TRUE(ckpt_model__open_source(&m, ckpt_test_data(fixtures[0]), &test_source, &o) < 0);
        ASSERT_ERROR_MENTIONS(says[i]);
        ckpt_error_clear();
    }
}

static float sig(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* 8 experts in 4 groups of 2, the best 2 groups, top 2. Logits whose best two experts (0 and 7)
 * sit in groups 0 and 3, but whose group sums favour groups 1 and 2: the choice is 2 and 4
 * (group scores: g0 0.9+(-3), g1 0.5+0.4, g2 0.6+0.3, g3 -3+0.95), weights the unbiased
 * sigmoid scores normalised, times 2.5. With a bias lifting expert 5, group 2 scores
 * sig(0.6)+sig(0.3)+... and expert 5 is chosen over 4 although its weight stays its own
 * sigmoid score. */
CKPT_TEST(test_verify_mla_route_grouped)
{
    static const float logits[8] = { 2.0f, -3.0f, 0.5f, 0.4f, 0.6f, 0.3f, -3.0f, 1.9f };
    float bias[8] = { 0 }, w[2];
    int32_t idx[2];
    ckpt_moe_routing how = { CKPT_MOE_SIGMOID, 2.5, NULL, 4, 2, 2, 1 };
    float s2, s4, s5;

    ASSERT_OK(ckpt_moe__route_with(logits, 1, 8, 2, &how, idx, w));
    /* group sums of sigmoid scores: g0 0.881+0.047, g1 0.622+0.599, g2 0.646+0.574, g3 0.047+0.870 */
    ASSERT_EQ_INT(idx[0], 4);
    ASSERT_EQ_INT(idx[1], 2);
    s2 = sig(0.5f);
    s4 = sig(0.6f);
    ASSERT_TRUE(fabs(w[0] - s4 / (s2 + s4) * 2.5) < 1e-6 && fabs(w[1] - s2 / (s2 + s4) * 2.5) < 1e-6);

    /* Megatron's group score, the best top_k / topk_group = 1 of each: groups 0 and 3 */
    how.group_top = 1;
    ASSERT_OK(ckpt_moe__route_with(logits, 1, 8, 2, &how, idx, w));
    ASSERT_EQ_INT(idx[0], 0);
    ASSERT_EQ_INT(idx[1], 7);
    how.group_top = 2;

    /* ungrouped, the best two are experts 0 and 7 */
    how.n_group = how.topk_group = 1;
    ASSERT_OK(ckpt_moe__route_with(logits, 1, 8, 2, &how, idx, w));
    ASSERT_EQ_INT(idx[0], 0);
    ASSERT_EQ_INT(idx[1], 7);

    /* the bias chooses (expert 5 over 4 and 2), the weights stay the unbiased scores */
    how.n_group = 4;
    how.topk_group = 2;
    bias[5] = 0.2f;
    how.bias = bias;
    ASSERT_OK(ckpt_moe__route_with(logits, 1, 8, 2, &how, idx, w));
    ASSERT_EQ_INT(idx[0], 5);
    ASSERT_EQ_INT(idx[1], 4);
    s5 = sig(0.3f);
    ASSERT_TRUE(fabs(w[0] - s5 / (s4 + s5) * 2.5) < 1e-6);

    /* without normalisation: the scores times the scale */
    how.norm = 0;
    ASSERT_OK(ckpt_moe__route_with(logits, 1, 8, 2, &how, idx, w));
    ASSERT_TRUE(fabs(w[0] - s5 * 2.5) < 1e-6 && fabs(w[1] - s4 * 2.5) < 1e-6);
}

/* The fixture read through the DeepSeek-V3 family's verify features (formats/families/
 * deepseek_v3.json) runs as the config written by hand above: the same config values and
 * the same logits, bit for bit. */
CKPT_TEST(test_verify_mla_family_config)
{
    static const int32_t ids[8] = { 3, 17, 40, 99, 5, 64, 127, 0 };
    ckpt_model_options o;
    ckpt_model *fam = NULL, *hand = NULL;
    const ckpt_model_config *a, *b;
    float la[8 * VOCAB], lb[8 * VOCAB];
    char path[4096];

    snprintf(path, sizeof path, "%s", ckpt_test_data(fixtures[0]));
    ckpt_model_options_init(&o);
    ASSERT_OK(ckpt_model_open(&fam, path, &o));
    ASSERT_OK(ckpt_model__open_source(&hand, path, &test_source, &o));
    a = ckpt_model_config_of(fam);
    b = ckpt_model_config_of(hand);
    ASSERT_TRUE(a->q_lora_rank == b->q_lora_rank && a->kv_lora_rank == b->kv_lora_rank &&
                a->qk_nope_head_dim == b->qk_nope_head_dim && a->qk_rope_head_dim == b->qk_rope_head_dim &&
                a->v_head_dim == b->v_head_dim && a->head_dim == b->head_dim && a->mla_norm_eps == b->mla_norm_eps);
    ASSERT_TRUE(a->rope_yarn_factor == b->rope_yarn_factor && a->rope_original_max_positions == b->rope_original_max_positions &&
                a->rope_yarn_beta_fast == b->rope_yarn_beta_fast && a->rope_yarn_beta_slow == b->rope_yarn_beta_slow &&
                a->rope_yarn_mscale == b->rope_yarn_mscale && a->rope_yarn_mscale_all_dim == b->rope_yarn_mscale_all_dim &&
                a->rope_interleaved == 1 && a->attn_scale == b->attn_scale);
    ASSERT_TRUE(a->num_experts == 8 && a->moe_top_k == 2 && a->moe_ffn_hidden_size == 16 && a->ffn_hidden_size == 64 &&
                a->moe_shared_ffn_hidden_size == 16 && a->moe_first_dense == 1 && a->moe_score == CKPT_MOE_SIGMOID &&
                a->moe_topk_scale == 2.5 && a->moe_expert_bias == 1 && a->moe_n_group == 4 && a->moe_topk_group == 2 &&
                a->moe_topk_norm == 1 && a->moe_group_top == 2);
    ASSERT_OK(ckpt_model_forward(fam, NULL, ids, 8, la));
    ASSERT_OK(ckpt_model_forward(hand, NULL, ids, 8, lb));
    ASSERT_TRUE(memcmp(la, lb, sizeof la) == 0);
    ckpt_model_close(fam);
    ckpt_model_close(hand);
}

/* testdata/hf/deepseek_v3_tiny as hf2mcore converts it (num_experts_per_tok 4, rms_norm_eps
 * 1e-6) without rope_scaling, as testdata/gen/gen_derived_logits.py derives
 * deepseek_v3_plain_rope */
static void plain_rope(cJSON *c)
{
    cJSON_ReplaceItemInObject(c, "num_experts_per_tok", cJSON_CreateNumber(4));
    cJSON_ReplaceItemInObject(c, "rms_norm_eps", cJSON_CreateNumber(1e-6));
    cJSON_DeleteItemFromObject(c, "rope_scaling");
}

CKPT_TEST(test_verify_mla_plain_rope_logits_transformers)
{
    ckpt_model_config yarn;
    const char *why;
    double e;

    ASSERT_OK(fx_derive_hf("plain", "hf/deepseek_v3_tiny", plain_rope, NULL));
    e = fx_logits_error_of("plain", "gen/logits_deepseek_v3_plain_rope.json", VOCAB, 0, NULL, &why);
    fprintf(stderr, "DeepSeek-V3 without rope_scaling: max |verify - transformers| %.3g %s\n", e, why);
    ASSERT_TRUE(e <= 1e-5);
    /* run with the fixture's YaRN (its frequencies and mscale in the softmax scale) instead,
     * the logits move */
    ckpt_model_config_unset(&yarn);
    yarn.rope_yarn_factor = 4.0;
    yarn.rope_original_max_positions = 16;
    yarn.rope_yarn_mscale = yarn.rope_yarn_mscale_all_dim = 1.0;
    e = fx_logits_error_of("plain", "gen/logits_deepseek_v3_plain_rope.json", VOCAB, 0, &yarn, &why);
    fprintf(stderr, "the same run with YaRN: max |verify - transformers| %.3g %s\n", e, why);
    ASSERT_TRUE(e > 1e-4 && isfinite(e));
}

/* testdata/hf/deepseek_v3_tiny as hf2mcore converts it (num_experts_per_tok 4, rms_norm_eps
 * 1e-6) without query compression, as testdata/gen/gen_derived_logits.py derives
 * deepseek_v3_q_proj and tests/cli/deepseek_v3/make_q_proj.py: q_lora_rank null, each layer's
 * q_a_proj, q_a_layernorm and q_b_proj replaced by q_proj = [q_b_proj | q_b_proj] (hidden 32,
 * q_lora_rank 16) */
static void no_q_lora(cJSON *c)
{
    cJSON_ReplaceItemInObject(c, "num_experts_per_tok", cJSON_CreateNumber(4));
    cJSON_ReplaceItemInObject(c, "rms_norm_eps", cJSON_CreateNumber(1e-6));
    cJSON_ReplaceItemInObject(c, "q_lora_rank", cJSON_CreateNull());
}

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), k = strlen(end);
    return n >= k && strcmp(s + n - k, end) == 0;
}

static int q_proj_of(ckpt_graph *g, const fixture *f, size_t i, char *buf, size_t cap, const ckpt_node **node,
                     void *payload)
{
    const char *name = f->in[i].name, *at = strstr(name, "q_a_proj.weight");
    char qb[96];
    size_t k;

    (void)payload;
    if (ends_with(name, "q_a_layernorm.weight") || ends_with(name, "q_b_proj.weight"))
        return 0;
    if (!at || !ends_with(name, "q_a_proj.weight")) {
        *node = f->in[i].node;
        return snprintf(buf, cap, "%s", name) < (int)cap ? 1 : CKPT_EINVALID;
    }
    snprintf(qb, sizeof qb, "%.*sq_b_proj.weight", (int)(at - name), name);
    snprintf(buf, cap, "%.*sq_proj.weight", (int)(at - name), name);
    for (k = 0; k < f->n; k++)
        if (strcmp(f->in[k].name, qb) == 0) {
            const ckpt_node *both[2] = { f->in[k].node, f->in[k].node };
            return ckpt_node_concat(g, both, 2, 1, node) < 0 ? CKPT_EINVALID : 1;
        }
    return CKPT_ENOTFOUND;
}

CKPT_TEST(test_verify_mla_no_q_lora_logits_transformers)
{
    const char *why;
    double e;

    ASSERT_OK(fx_derive_hf_with("noqlora", "hf/deepseek_v3_tiny", no_q_lora, q_proj_of, NULL));
    e = fx_logits_error_of("noqlora", "gen/logits_deepseek_v3_q_proj.json", VOCAB, 0, NULL, &why);
    fprintf(stderr, "DeepSeek-V3 with q_lora_rank null: max |verify - transformers| %.3g %s\n", e, why);
    ASSERT_TRUE(e <= 1e-5);
}

