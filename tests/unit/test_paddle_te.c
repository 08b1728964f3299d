/* The PaddleNLP conversions planned by the library: pd2te / te2pd (ckpt_paddle_te_map,
 * ckpt_paddle_te_params, ckpt_paddle_te_plan file by file; pd2te at a target layout through
 * ckpt_job_plan with target impl "te") and paddle2hf / hf2paddle through ckpt_job_plan, LLaMA and
 * Qwen2. */
#include <ckpt/framework.h>
#include "test.h"

#include <string.h>

/* The plan's file at rel, or -1. */
static long file_index(const ckpt_plan *p, const char *rel)
{
    size_t i;

    for (i = 0; i < ckpt_plan_file_count(p); i++)
        if (strcmp(ckpt_plan_file_at(p, i)->rel, rel) == 0)
            return (long)i;
    return -1;
}

/* Whether file f of the plan holds a tensor called name. */
static int holds(const ckpt_plan *p, long f, const char *name)
{
    const ckpt_node *node;
    const char *t;
    size_t i;

    for (i = 0; f >= 0 && (t = ckpt_plan_tensor_at(p, (size_t)f, i, &node, NULL)); i++)
        if (strcmp(t, name) == 0)
            return 1;
    return 0;
}

/* pd2te at TP tp: the PaddleNLP model planned by its own framework with impl "te"; map NULL:
 * the family's te_map. */
static int plan_te(ckpt_plan *plan, const char *in, int tp, const ckpt_map *map, const ckpt_map_params *params,
                   ckpt_fw **src)
{
    ckpt_job_options jo = CKPT_JOB_OPTIONS_INIT;

    jo.to = CKPT_FAMILY_PADDLE;
    jo.from.framework = CKPT_FAMILY_PADDLE;
    jo.from.no_optimizer = 1;
    jo.target.tp = tp;
    jo.target.impl = "te";
    jo.target.paddle = (ckpt_paddle_target)CKPT_PADDLE_TARGET_INIT;
    jo.target.paddle.te_map = map;
    jo.target.paddle.te_params = params;
    return ckpt_job_plan(plan, in, &jo, src);
}

CKPT_TEST(test_paddle_te_plan_by_file_and_layout)
{
    ckpt_paddle_te_options o = CKPT_PADDLE_TE_OPTIONS_INIT;
    const char *dir = ckpt_test_data("llama/fp32_tp1");
    ckpt_map_params *params = NULL;
    ckpt_paddle_te_job j;
    ckpt_map *m = NULL;
    long f;

    ASSERT_OK(ckpt_paddle_te_map(&m, 1, NULL));
    ASSERT_EQ_STR(ckpt_map_name(m), "llama_pd2te");
    ASSERT_OK(ckpt_paddle_te_params(&params, 1, dir, NULL, 0, 0));
    o.map = m;
    o.params = params;
    /* file by file: one model file, its name kept, the other files copied */
    ASSERT_OK(ckpt_paddle_te_plan(&j, dir, &o));
    ASSERT_TRUE(j.dir != NULL);
    ASSERT_TRUE((f = file_index(j.plan, "model_state.pdparams")) >= 0);
    ASSERT_TRUE(holds(j.plan, f, "llama.layers.0.transformer.self_attention.layernorm_qkv.weight"));
    ASSERT_TRUE(!holds(j.plan, f, "llama.layers.0.self_attn.q_proj.weight"));
    ASSERT_TRUE(file_index(j.plan, "config.json") >= 0);
    ckpt_paddle_te_job_dispose(&j);
    /* at TP 2 it is the framework's: a file per rank, the map given or the family's */
    for (f = 0; f < 2; f++) {
        ckpt_plan *plan = NULL;
        ckpt_fw *src = NULL;
        ASSERT_OK(ckpt_plan_new(&plan));
        ASSERT_OK(plan_te(plan, dir, 2, f ? m : NULL, f ? params : NULL, &src));
        ASSERT_EQ_INT(ckpt_fw_info_of(src)->tp, 1);
        ASSERT_TRUE(file_index(plan, "model_state.tp00.pdparams") >= 0);
        ASSERT_TRUE(holds(plan, file_index(plan, "model_state.tp01.pdparams"),
                          "llama.layers.1.transformer.layernorm_mlp.fc2_weight"));
        ASSERT_TRUE(!holds(plan, file_index(plan, "model_state.tp01.pdparams"), "llama.layers.1.mlp.down_proj.weight"));
        ckpt_plan_free(plan);
        ckpt_fw_close(src);
    }
    ckpt_map_params_free(params);
    ckpt_map_free(m);
    /* the inverse map on a PaddleNLP directory: the other direction, named */
    ASSERT_OK(ckpt_paddle_te_map(&m, 0, NULL));
    ASSERT_EQ_STR(ckpt_map_name(m), "llama_te2pd");
    ASSERT_OK(ckpt_paddle_te_params(&params, 0, dir, NULL, 0, 0));
    o = (ckpt_paddle_te_options)CKPT_PADDLE_TE_OPTIONS_INIT;
    o.to_te = 0;
    o.map = m;
    o.params = params;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_te_plan(&j, dir, &o));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP_DIRECTION);
    ASSERT_ERROR_MENTIONS("fp32_tp1");
    ckpt_paddle_te_job_dispose(&j);
    ckpt_map_params_free(params);
    ckpt_map_free(m);
}

/* pd2te's map is LLaMA's: a Qwen2 config or directory is refused, by config and by layout. */
CKPT_TEST(test_paddle_te_refuses_qwen2)
{
    ckpt_map_params *params = NULL;
    ckpt_plan *plan = NULL;
    ckpt_fw *src = NULL;
    ckpt_map *m = NULL;

    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_paddle_te_params(&params, 1, ckpt_test_data("paddlenlp/qwen2_tp2"), NULL,
                                                          0, 0));
    ASSERT_TRUE(params == NULL);
    ASSERT_ERROR_MENTIONS("model_type qwen2: pd2te converts PaddleNLP's LLaMA (model_type llama) only");
    ASSERT_OK(ckpt_paddle_te_map(&m, 1, NULL));
    ASSERT_OK(ckpt_map_params_new(&params));
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, plan_te(plan, ckpt_test_data("paddlenlp/qwen2_tp2"), 1, m, params, &src));
    ASSERT_ERROR_MENTIONS("model_type qwen2: pd2te converts");
    ASSERT_TRUE(src == NULL);
    ckpt_plan_free(plan);
    ckpt_map_params_free(params);
    ckpt_map_free(m);
}

/* paddle2hf of PaddleNLP 3's Qwen2 at TP 2 through the job path: Hugging Face names, biases kept,
 * the tied head (saved under both names) left out and said so; hf2paddle back at TP 2, also
 * with --fused-qkv (weight and bias fused); PaddleNLP's fused save to Hugging Face. */
static int plan_paddle_hf(ckpt_plan *plan, const char *in, int to_hf, int tp, const char *variant, ckpt_fw **src)
{
    ckpt_job_options jo = CKPT_JOB_OPTIONS_INIT;

    jo.to = to_hf ? CKPT_FAMILY_HF : CKPT_FAMILY_PADDLE;
    jo.from.framework = to_hf ? CKPT_FAMILY_PADDLE : CKPT_FAMILY_HF;
    jo.from.no_optimizer = 1;
    jo.target.tp = tp;
    jo.target.variants = &variant;
    jo.target.n_variants = variant != NULL;
    return ckpt_job_plan(plan, in, &jo, src);
}

CKPT_TEST(test_paddle_plan_qwen2_with_hf)
{
    ckpt_plan *plan = NULL;
    ckpt_fw *src = NULL;
    const char *reason = NULL;
    long f;

    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(plan_paddle_hf(plan, ckpt_test_data("paddlenlp/qwen2_tp2"), 1, 0, NULL, &src));
    ASSERT_TRUE((f = file_index(plan, "model.safetensors")) >= 0);
    ASSERT_TRUE(holds(plan, f, "model.layers.1.self_attn.v_proj.bias"));
    ASSERT_TRUE(!holds(plan, f, "lm_head.weight"));
    ASSERT_TRUE(file_index(plan, "config.json") >= 0);
    ASSERT_EQ_INT(ckpt_plan_dropped_count(plan), 1);
    ASSERT_EQ_STR(ckpt_plan_dropped_at(plan, 0, &reason), "lm_head.weight");
    ASSERT_TRUE(reason && strstr(reason, "tied head"));
    ckpt_plan_free(plan);
    ckpt_fw_close(src);
    src = NULL;

    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(plan_paddle_hf(plan, ckpt_test_data("hf/qwen2_tiny"), 0, 2, NULL, &src));
    ASSERT_TRUE(holds(plan, file_index(plan, "model_state.tp01.pdparams"), "qwen2.layers.0.self_attn.k_proj.bias"));
    ASSERT_TRUE(file_index(plan, "config.json") >= 0);
    ckpt_plan_free(plan);
    ckpt_fw_close(src);
    src = NULL;
    /* variant fused_qkv is both of its rules: qkv_proj's weight and its bias */
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(plan_paddle_hf(plan, ckpt_test_data("hf/qwen2_tiny"), 0, 2, "fused_qkv", &src));
    f = file_index(plan, "model_state.tp01.pdparams");
    ASSERT_TRUE(holds(plan, f, "qwen2.layers.1.self_attn.qkv_proj.weight"));
    ASSERT_TRUE(holds(plan, f, "qwen2.layers.1.self_attn.qkv_proj.bias"));
    ASSERT_TRUE(!holds(plan, f, "qwen2.layers.1.self_attn.q_proj.bias"));
    ASSERT_TRUE(!holds(plan, f, "qwen2.layers.1.self_attn.k_proj.weight"));
    ckpt_plan_free(plan);
    ckpt_fw_close(src);
    src = NULL;
    /* ... but not at TP 4, which keeps the 2 KV heads whole on every rank */
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_FAILS(CKPT_EINVALID, plan_paddle_hf(plan, ckpt_test_data("hf/qwen2_tiny"), 0, 4, "fused_qkv", &src));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("fuse_attention_qkv");
    ckpt_plan_free(plan);
    ckpt_fw_close(src);
    src = NULL;
    /* PaddleNLP's fused save: q/k/v and their biases split per KV group */
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(plan_paddle_hf(plan, ckpt_test_data("paddlenlp/qwen2_tp2_fused"), 1, 0, NULL, &src));
    ASSERT_TRUE((f = file_index(plan, "model.safetensors")) >= 0);
    ASSERT_TRUE(holds(plan, f, "model.layers.1.self_attn.v_proj.bias"));
    ASSERT_TRUE(holds(plan, f, "model.layers.1.mlp.up_proj.weight"));
    ckpt_plan_free(plan);
    ckpt_fw_close(src);
}
