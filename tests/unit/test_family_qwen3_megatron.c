/* Qwen3 (testdata/hf/transformers5/qwen3_tiny) and verify: verify's Hugging Face reader gives
 * transformers' logits; written through hf_qwen3_megatron as a Megatron checkpoint at TP 2 PP 2,
 * its forward (verify's Megatron reader: per-head q/k RMSNorm, head_dim 16) gives them too, run
 * as ranks and merged, it reads back through megatron_hf_qwen3 to model.safetensors byte for
 * byte, and verify fails at layer 1 when that layer's q and k norms are swapped or its k norm
 * is missing. */
#include "qwen3_fixture.h"

/* What write_megatron breaks in layer 1 (the second pipeline stage's). */
enum { INTACT, SWAP_QK_NORM, NO_K_NORM };
#define Q_NORM1 "decoder.layers.1.self_attention.q_layernorm.weight"
#define K_NORM1 "decoder.layers.1.self_attention.k_layernorm.weight"

static int break_layer1(int broken, ckpt_graph *g, const ckpt_map_result *r, const char *name, const ckpt_node **node)
{
    (void)g;
    if (broken == NO_K_NORM && strcmp(name, K_NORM1) == 0)
        return 1;
    if (broken == SWAP_QK_NORM && strcmp(name, Q_NORM1) == 0)
        *node = fx_output(r, K_NORM1);
    else if (broken == SWAP_QK_NORM && strcmp(name, K_NORM1) == 0)
        *node = fx_output(r, Q_NORM1);
    return 0;
}

static int args_of(ckpt_arena *a, const char *impl, ckpt_value **args)
{
    (void)impl;
    *args = qwen3_args(a);
    return *args ? 0 : CKPT_ENOMEM;
}

/* hf_qwen3_megatron of the fixture as a Megatron checkpoint at TP 2 PP 2 (TE names) in dir. */
static int write_megatron(const char *dir, int broken)
{
    fx_megatron_spec s = { QWEN3 "/model.safetensors", NULL, NULL, args_of, "transformer_engine", 2, 2, 1,
                           break_layer1, broken };
    ckpt_map_params *p = NULL;
    ckpt_map *map = NULL;
    int rc;

    if ((rc = qwen3_params(&p)) == 0 && (rc = ckpt_map_builtin(&map, "hf_qwen3_megatron")) == 0) {
        s.to_megatron = map;
        s.p = p;
        rc = fx_write_megatron(dir, &s);
    }
    ckpt_map_free(map);
    ckpt_map_params_free(p);
    return rc;
}

/* The Megatron checkpoint at root read back through megatron_hf_qwen3, as model.safetensors in dir. */
static int write_back(const char *root, const char *dir)
{
    ckpt_map_params *p = NULL;
    ckpt_map *map = NULL;
    int rc;

    if ((rc = qwen3_params(&p)) == 0 && (rc = ckpt_map_builtin(&map, "megatron_hf_qwen3")) == 0)
        rc = fx_write_back(root, dir, map, p, NULL, NULL, NULL);
    ckpt_map_free(map);
    ckpt_map_params_free(p);
    return rc;
}

/* verify's Hugging Face reader runs Qwen3 as transformers does. */
CKPT_TEST(test_family_qwen3_hf_logits)
{
    const char *why;
    double e = fx_logits_error(ckpt_test_data(QWEN3), QWEN3, 128, 0, &why);

    if (!(e <= 1e-5))
        ckpt_test_fail(__FILE__, __LINE__, "max abs logit error %g (%s)", e, why);
}

CKPT_TEST(test_family_qwen3_megatron_tp2pp2)
{
    const char *why;
    double e;
    int merge;

    ASSERT_OK(write_megatron("mc", INTACT));
    for (merge = 0; merge < 2; merge++) {
        e = fx_logits_error("mc", QWEN3, 128, merge, &why);
        if (!(e <= 1e-5)) {
            ckpt_test_fail(__FILE__, __LINE__, "merge %d: max abs logit error %g (%s)", merge, e, why);
            return;
        }
    }
    ASSERT_OK(write_back("mc", "hf"));
    ASSERT_TRUE(fx_same_file("hf", QWEN3 "/model.safetensors"));
}

CKPT_TEST(test_family_qwen3_verify_breakage)
{
    const char *why;
    char buf[512];

    ASSERT_OK(write_megatron("mc", INTACT));
    ASSERT_OK(write_megatron("swapped", SWAP_QK_NORM));
    ASSERT_OK(write_megatron("removed", NO_K_NORM));
    ASSERT_EQ_INT(fx_first_failure("mc", "mc", &why, buf, sizeof buf), -2);
    ASSERT_EQ_INT(fx_first_failure("mc", "swapped", &why, buf, sizeof buf), 1);
    /* verify runs a layer whose k norm is missing without it: the layer is named, not the tensor */
    ASSERT_EQ_INT(fx_first_failure("mc", "removed", &why, buf, sizeof buf), 1);
}
