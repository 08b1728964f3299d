/* verify's mixture-of-experts pieces (src/verify/run_moe.c, model.c): the routing math of
 * each score kind against values worked by hand (top-k then softmax, softmax then top-k,
 * sigmoid), ties and NaN logits, the scaling factor, and the canonical MoE tensor names. The
 * runs on Megatron checkpoints (EP 2 against EP 1, swapped, zeroed, transposed experts) are
 * tests/cli/verify/moe.sh. The forward pass of a Qwen3-MoE with a dense layer after a MoE
 * layer, derived from testdata/hf/qwen3_moe_tiny, gives transformers' logits. */
#include "family_fixture.h"

#define CKPT_BUILD
#include "../../src/verify/run_private.h"

#include <ckpt/verify.h>
#include <math.h>

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-6 * (1.0 + fabs(b));
}

CKPT_TEST(test_moe_route_softmax_after_topk)
{
    /* Megatron's default: the top 2 logits, softmax over those two only */
    const float logits[8] = { 1, 3, 2, 0, /* token 1 */ -1, -2, 5, 4 };
    int32_t idx[4];
    float w[4];

    ckpt_moe__route(logits, 2, 4, 2, CKPT_MOE_SOFTMAX_TOPK, 1.0, idx, w);
    ASSERT_EQ_INT(idx[0], 1);
    ASSERT_EQ_INT(idx[1], 2);
    ASSERT_TRUE(near(w[0], exp(3.0) / (exp(3.0) + exp(2.0))));
    ASSERT_TRUE(near(w[1], exp(2.0) / (exp(3.0) + exp(2.0))));
    ASSERT_EQ_INT(idx[2], 2);
    ASSERT_EQ_INT(idx[3], 3);
    ASSERT_TRUE(near(w[2] + w[3], 1.0));
}

CKPT_TEST(test_moe_route_pre_softmax)
{
    /* moe_router_pre_softmax: softmax over all four, the top 2 probabilities as they are
     * (they do not sum to 1) */
    const float logits[4] = { 1, 3, 2, 0 };
    double sum = exp(1.0) + exp(3.0) + exp(2.0) + exp(0.0);
    int32_t idx[2];
    float w[2], post[2];

    ckpt_moe__route(logits, 1, 4, 2, CKPT_MOE_SOFTMAX_ALL, 1.0, idx, w);
    ASSERT_EQ_INT(idx[0], 1);
    ASSERT_EQ_INT(idx[1], 2);
    ASSERT_TRUE(near(w[0], exp(3.0) / sum));
    ASSERT_TRUE(near(w[1], exp(2.0) / sum));
    /* renormalised over the two, they are the weights of top-k-then-softmax (Mixtral's
     * softmax-then-renormalise is Megatron's default) */
    ckpt_moe__route(logits, 1, 4, 2, CKPT_MOE_SOFTMAX_TOPK, 1.0, idx, post);
    ASSERT_TRUE(near(post[0], w[0] / (w[0] + w[1])));
    ASSERT_TRUE(near(post[1], w[1] / (w[0] + w[1])));
}

CKPT_TEST(test_moe_route_ties_and_nan)
{
    /* equal scores: the lower expert index first, weights shared evenly */
    const float tie[4] = { 2, 2, 2, 1 };
    const float nan_first[3] = { NAN, 1, 1 };
    int32_t idx[2];
    float w[2];

    ckpt_moe__route(tie, 1, 4, 2, CKPT_MOE_SOFTMAX_TOPK, 1.0, idx, w);
    ASSERT_EQ_INT(idx[0], 0);
    ASSERT_EQ_INT(idx[1], 1);
    ASSERT_TRUE(near(w[0], 0.5) && near(w[1], 0.5));
    ckpt_moe__route(tie, 1, 4, 2, CKPT_MOE_SOFTMAX_ALL, 1.0, idx, w);
    ASSERT_EQ_INT(idx[0], 0);
    ASSERT_EQ_INT(idx[1], 1);
    /* a NaN logit is never picked over a number */
    ckpt_moe__route(nan_first, 1, 3, 1, CKPT_MOE_SOFTMAX_TOPK, 1.0, idx, w);
    ASSERT_EQ_INT(idx[0], 1);
    ASSERT_TRUE(near(w[0], 1.0));
}

CKPT_TEST(test_moe_route_sigmoid_and_scale)
{
    const float logits[3] = { 0, 2, -1 };
    double s1 = 1.0 / (1.0 + exp(-2.0)), s0 = 0.5;
    int32_t idx[2];
    float w[2];

    /* k > 1: the sigmoids of the picked experts divided by their sum */
    ckpt_moe__route(logits, 1, 3, 2, CKPT_MOE_SIGMOID, 1.0, idx, w);
    ASSERT_EQ_INT(idx[0], 1);
    ASSERT_EQ_INT(idx[1], 0);
    ASSERT_TRUE(near(w[0], s1 / (s1 + s0)));
    /* k = 1: the sigmoid itself, then the scaling factor */
    ckpt_moe__route(logits, 1, 3, 1, CKPT_MOE_SIGMOID, 2.5, idx, w);
    ASSERT_TRUE(near(w[0], 2.5 * s1));
    ckpt_moe__route(logits, 1, 3, 2, CKPT_MOE_SOFTMAX_TOPK, 2.5, idx, w);
    ASSERT_TRUE(near(w[0] + w[1], 2.5));
}

CKPT_TEST(test_moe_canonical_names)
{
    ASSERT_EQ_INT((int)ckpt_model__canonical_layer("layers.3.moe.router.weight"), 3);
    ASSERT_EQ_INT((int)ckpt_model__canonical_layer("layers.3.moe.experts.12.fc1.weight"), 3);
    ASSERT_EQ_INT((int)ckpt_model__expert_of("layers.3.moe.experts.12.fc1.weight"), 12);
    ASSERT_EQ_INT((int)ckpt_model__expert_of("layers.0.moe.experts.0.fc2.weight"), 0);
    /* not in the scheme: no index, an unknown piece, a bias of fc2, the router as an expert */
    ASSERT_EQ_INT((int)ckpt_model__canonical_layer("layers.3.moe.experts.x.fc1.weight"), -2);
    ASSERT_EQ_INT((int)ckpt_model__canonical_layer("layers.3.moe.experts.1.fc3.weight"), -2);
    ASSERT_EQ_INT((int)ckpt_model__canonical_layer("layers.3.moe.experts.1.fc2.bias"), -2);
    ASSERT_EQ_INT((int)ckpt_model__canonical_layer("layers.3.moe.experts.fc1.weight"), -2);
    ASSERT_EQ_INT((int)ckpt_model__expert_of("layers.3.moe.router.weight"), -1);
    ASSERT_EQ_INT((int)ckpt_model__expert_of("layers.3.mlp.fc1.weight"), -1);
}

/* testdata/hf/qwen3_moe_tiny with layer 1 dense, its expert 0 as the dense MLP (as
 * testdata/gen/gen_derived_logits.py derives qwen3_moe_dense) */
static void dense_layer_1(cJSON *c)
{
    cJSON *layers = cJSON_CreateArray();

    cJSON_AddItemToArray(layers, cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(c, "mlp_only_layers", layers);
    cJSON_ReplaceItemInObject(c, "intermediate_size", cJSON_CreateNumber(32));
}

static int expert_0_dense(const char *name, char *buf, size_t cap)
{
    static const char layer[] = "model.layers.1.mlp.";
    const char *rest = strncmp(name, layer, sizeof layer - 1) == 0 ? name + sizeof layer - 1 : NULL;

    if (rest && strncmp(rest, "experts.0.", 10) == 0)
        snprintf(buf, cap, "%s%s", layer, rest + 10);
    else if (rest && (strncmp(rest, "experts.", 8) == 0 || strcmp(rest, "gate.weight") == 0))
        return 0;
    else
        snprintf(buf, cap, "%s", name);
    return 1;
}

CKPT_TEST(test_moe_dense_layer_logits_transformers)
{
    ckpt_model_config swapped;
    unsigned char moe[2] = { 0, 1 };
    const char *why;
    double e;

    ASSERT_OK(fx_derive_hf("dense", "hf/qwen3_moe_tiny", dense_layer_1, expert_0_dense));
    e = fx_logits_error_of("dense", "gen/logits_qwen3_moe_dense.json", 128, 0, NULL, &why);
    fprintf(stderr, "Qwen3-MoE with layer 1 dense: max |verify - transformers| %.3g %s\n", e, why);
    ASSERT_TRUE(e <= 1e-5);
    /* the dense layer said to be layer 0: its router and experts are refused, naming the layer */
    ckpt_model_config_unset(&swapped);
    swapped.layer_moe = moe;
    e = fx_logits_error_of("dense", "gen/logits_qwen3_moe_dense.json", 128, 0, &swapped, &why);
    ASSERT_TRUE(isinf(e));
    ASSERT_ERROR_MENTIONS("layers.0.moe.experts.0.fc1.weight: a dense layer by the config's list of MoE layers");
}
