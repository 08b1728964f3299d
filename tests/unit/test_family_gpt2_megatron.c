/* GPT-2 written through the GPT-2 family (gpt2.json's Megatron args, hf_gpt2_megatron and its
 * variant local) as a Megatron-LM checkpoint at TP 2 PP 2, with Transformer Engine and with
 * local layer names: the model's forward (verify's Megatron reader: LayerNorm with biases,
 * gelu_tanh, linear biases, learned positions, tied embeddings), run as ranks and merged,
 * gives transformers' logits, and read back through the family's map it gives back
 * model.safetensors byte for byte; verify fails at layer 1 on a zeroed fused q/k/v bias and
 * refuses a removed weight naming it. */
#include "gpt2_fixture.h"

#include <math.h>

/* What write_megatron breaks in layer 1 (the second pipeline stage's). */
enum { INTACT, ZERO_QKV_BIAS, NO_FC2_WEIGHT };
#define BROKEN_BIAS "decoder.layers.1.self_attention.linear_qkv.bias"
#define REMOVED "decoder.layers.1.mlp.linear_fc2.weight"

static int break_layer1(int broken, ckpt_graph *g, const ckpt_map_result *r, const char *name, const ckpt_node **node)
{
    (void)r;
    if (broken == NO_FC2_WEIGHT && strcmp(name, REMOVED) == 0)
        return 1;
    if (broken == ZERO_QKV_BIAS && strcmp(name, BROKEN_BIAS) == 0)
        return ckpt_node_zeros(g, CKPT_DTYPE_F32, 1, ckpt_node_shape(*node), node);
    return 0;
}

/* The fixture through the GPT-2 family's map for `impl`, written as a Megatron checkpoint at
 * TP 2 PP 2 in dir, with layer 1 broken as `broken` says. */
static int write_megatron(const char *dir, int broken, const char *impl)
{
    fx_megatron_spec s = { FIXTURE, NULL, NULL, family_args, impl, 2, 2, strcmp(impl, "local") != 0,
                           break_layer1, broken };
    ckpt_map_params *p = NULL;
    ckpt_map *map = NULL;
    int rc;

    if ((rc = params_for(&p, 256)) == 0 && (rc = family_map(impl, 0, &map)) == 0) {
        s.to_megatron = map;
        s.p = p;
        rc = fx_write_megatron(dir, &s);
    }
    ckpt_map_free(map);
    ckpt_map_params_free(p);
    return rc;
}

/* The Megatron checkpoint read back and mapped to Hugging Face names (the family's map back
 * for `impl`), as model.safetensors in dir; *tied_copy says whether the output layer the
 * last stage keeps is the embedding (it is no tensor of GPT2LMHeadModel's files). */
static int write_back(const char *root, const char *dir, const char *impl, int *tied_copy)
{
    ckpt_map_params *p = NULL;
    ckpt_map *map = NULL;
    int rc;

    if ((rc = params_for(&p, 256)) == 0 && (rc = family_map(impl, 1, &map)) == 0)
        rc = fx_write_back(root, dir, map, p, "lm_head.weight", "transformer.wte.weight", tied_copy);
    ckpt_map_free(map);
    ckpt_map_params_free(p);
    return rc;
}

/* The largest |difference| between the model's logits and transformers' (logits.json). */
static double logits_error(const char *path, int merge)
{
    return fx_logits_error(path, "hf/gpt2_tiny", VOCAB, merge, NULL);
}

/* Whether the Megatron checkpoint at root holds a tensor named `name`. */
static int holds(const char *root, const char *name)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_set *set = NULL;
    ckpt_graph *g = NULL;
    ckpt_megatron *m = NULL;
    size_t i;
    int found = 0;

    so.layout = "megatron";
    if (ckpt_set_open(&set, root, &so) == 0 && ckpt_graph_new(&g) == 0 && ckpt_megatron_open(&m, set, g, &mo) == 0)
        for (i = 0; i < ckpt_megatron_tensor_count(m); i++) {
            const ckpt_node *full;
            ckpt_tensor_layout l;
            found |= strcmp(ckpt_megatron_tensor_at(m, i, &full, &l), name) == 0;
        }
    ckpt_megatron_close(m);
    ckpt_graph_free(g);
    ckpt_set_close(set);
    return found;
}

/* transformers' own files, as verify's Hugging Face reader runs them through the GPT-2
 * family (verify_hf_gpt2, LayerNorm, gelu_tanh, learned positions, tied), under both
 * transformers versions' configs. */
CKPT_TEST(test_family_gpt2_hf_logits)
{
    double e = logits_error(ckpt_test_data("hf/gpt2_tiny"), 0);

    e = fmax(e, logits_error(ckpt_test_data("hf/transformers5/gpt2_tiny"), 0));
    if (!(e <= 1e-5))
        ckpt_test_fail(__FILE__, __LINE__, "max abs logit error %g (%s)", e, ckpt_error_last()->message);
}

/* With Transformer Engine and with local layer names. */
CKPT_TEST(test_family_gpt2_megatron_tp2pp2)
{
    static const char *const impls[] = { "transformer_engine", "local" };
    static const char *const norms[] = { "decoder.layers.1.mlp.linear_fc1.layer_norm_bias",
                                         "decoder.layers.1.pre_mlp_layernorm.bias" };
    size_t i;
    int tied_copy = 0;
    double e;

    for (i = 0; i < 2; i++) {
        char mc[32], hf[32];
        snprintf(mc, sizeof mc, "mc_%s", impls[i]);
        snprintf(hf, sizeof hf, "hf_%s", impls[i]);
        ASSERT_OK(write_megatron(mc, INTACT, impls[i]));
        ASSERT_TRUE(holds(mc, norms[i]) && !holds(mc, norms[1 - i]));
        e = fmax(logits_error(mc, 0), logits_error(mc, 1));
        if (!(e <= 1e-5)) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: max abs logit error %g (%s)", impls[i], e,
                           ckpt_error_last()->message);
            return;
        }
        ASSERT_OK(write_back(mc, hf, impls[i], &tied_copy));
        ASSERT_TRUE(tied_copy);
        ASSERT_TRUE(fx_same_file(hf, FIXTURE));
    }
}

/* verify of a conversion with layer 1's fused q/k/v bias zeroed against the intact one
 * fails at layer 1 (layer 0 passes); one with layer 1's fc2 weight gone is refused naming
 * the tensor. */
CKPT_TEST(test_family_gpt2_verify_breakage)
{
    const char *why;
    char buf[512];

    ASSERT_OK(write_megatron("mc", INTACT, "transformer_engine"));
    ASSERT_OK(write_megatron("zero_bias", ZERO_QKV_BIAS, "local"));
    ASSERT_OK(write_megatron("removed", NO_FC2_WEIGHT, "transformer_engine"));
    ASSERT_EQ_INT(fx_first_failure("mc", "mc", &why, buf, sizeof buf), -2);
    ASSERT_EQ_INT(fx_first_failure("mc", "zero_bias", &why, buf, sizeof buf), 1);
    ASSERT_TRUE(why == NULL);
    ASSERT_EQ_INT(fx_first_failure("mc", "removed", &why, buf, sizeof buf), -3);
    ASSERT_TRUE(why && strstr(why, "no '" REMOVED "'") != NULL);
}
