/* PaddleNLP as a framework: a directory of any TP/PP layout (and a unified safetensors
 * checkpoint, which Hugging Face's bid would take too) opened as one model at full shapes with
 * its family, the job at the same framework planning what ckpt_paddle_plan plans, and a
 * Hugging Face model written as PaddleNLP's rank files. */
#include "test.h"

#include <ckpt/framework.h>
#include <ckpt/sys/framework.h>

#include <stdlib.h>

static void open_paddle(const char *dir, ckpt_plan **plan, ckpt_fw **m)
{
    ASSERT_OK(ckpt_plan_new(plan));
    ASSERT_OK(ckpt_fw_open(m, ckpt_test_data(dir), ckpt_plan_graph(*plan), NULL));
    ASSERT_EQ_STR(ckpt_fw_info_of(*m)->framework, "paddle");
}

CKPT_TEST(test_framework_paddle_open_by_bid_full_shapes)
{
    ckpt_plan *plan;
    ckpt_fw *m;
    const ckpt_node *full;
    ckpt_tensor_layout l;
    const char *name;
    size_t i, embed = 0;

    open_paddle("paddlenlp/fp32_tp2pp2", &plan, &m);
    ASSERT_EQ_INT(ckpt_fw_info_of(m)->tp, 2);
    ASSERT_EQ_INT(ckpt_fw_info_of(m)->pp, 2);
    ASSERT_EQ_INT(ckpt_fw_info_of(m)->has_optimizer, 1);
    ASSERT_EQ_STR(ckpt_fw_info_of(m)->impl, "native");
    ASSERT_TRUE(ckpt_fw_set(m) != NULL);
    ASSERT_TRUE(ckpt_fw_native(m, "paddle") != NULL);
    ASSERT_TRUE(ckpt_fw_native(m, "megatron") == NULL);
    ASSERT_EQ_STR(ckpt_family_name(ckpt_fw_family(m)), "llama");
    ASSERT_EQ_INT(ckpt_fw_tensor_count(m), ckpt_paddle_model_tensor_count(ckpt_fw_native(m, "paddle")));
    for (i = 0; i < ckpt_fw_tensor_count(m); i++) {
        name = ckpt_fw_tensor_at(m, i, &full, &l);
        if (strcmp(name, "llama.embed_tokens.weight") == 0) {
            const ckpt_value *vocab;
            embed++;
            /* the merged table, not one rank's half */
            ASSERT_OK(ckpt_family_config_get(ckpt_fw_config(m), "vocab_size", &vocab));
            ASSERT_EQ_INT(ckpt_node_shape(full)[0], vocab->u.integer);
        }
    }
    ASSERT_EQ_INT(embed, 1);
    ckpt_fw_close(m);
    ckpt_plan_free(plan);
}

/* config.json and model-0000i-of-0000n.safetensors: PaddleNLP's names, so PaddleNLP's bid. */
CKPT_TEST(test_framework_paddle_wins_unified_checkpoint)
{
    ckpt_plan *plan;
    ckpt_fw *m;

    open_paddle("paddlenlp/unified_fp32", &plan, &m);
    ASSERT_EQ_INT(ckpt_fw_info_of(m)->tp, 1);
    ckpt_fw_close(m);
    ckpt_plan_free(plan);
    /* a Hugging Face directory stays Hugging Face's */
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_fw_open(&m, ckpt_test_data("hf/llama_tiny"), ckpt_plan_graph(plan), NULL));
    ASSERT_EQ_STR(ckpt_fw_info_of(m)->framework, "huggingface");
    ckpt_fw_close(m);
    ckpt_plan_free(plan);
}

CKPT_TEST(test_framework_paddle_qwen2_family)
{
    ckpt_plan *plan;
    ckpt_fw *m;

    open_paddle("paddlenlp/qwen2_tp2", &plan, &m);
    ASSERT_EQ_STR(ckpt_family_name(ckpt_fw_family(m)), "qwen2");
    ckpt_fw_close(m);
    ckpt_plan_free(plan);
}

/* The same framework: the job plans what ckpt_paddle_plan plans, file by file. */
CKPT_TEST(test_framework_paddle_job_reshard_as_paddle_plan)
{
    ckpt_paddle_model_options mo = CKPT_PADDLE_MODEL_OPTIONS_INIT;
    ckpt_paddle_target pt = CKPT_PADDLE_TARGET_INIT;
    ckpt_job_options o = CKPT_JOB_OPTIONS_INIT;
    ckpt_plan *plan, *direct;
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_set *set;
    ckpt_paddle_model *pm;
    ckpt_fw *src;
    size_t i;

    o.target.tp = 2;
    o.target.pp = 1;
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_job_plan(plan, ckpt_test_data("paddlenlp/fp32_pp4"), &o, &src));
    ASSERT_EQ_STR(ckpt_fw_info_of(src)->framework, "paddle");
    ASSERT_OK(ckpt_plan_new(&direct));
    so.layout = "paddle";
    ASSERT_OK(ckpt_set_open(&set, ckpt_test_data("paddlenlp/fp32_pp4"), &so));
    ASSERT_OK(ckpt_paddle_model_open(&pm, set, ckpt_plan_graph(direct), &mo));
    pt.tp = 2;
    pt.pp = 1;
    ASSERT_OK(ckpt_paddle_plan(pm, &pt, direct));
    ASSERT_EQ_INT(ckpt_plan_file_count(plan), ckpt_plan_file_count(direct));
    for (i = 0; i < ckpt_plan_file_count(plan); i++) {
        ASSERT_EQ_STR(ckpt_plan_file_at(plan, i)->rel, ckpt_plan_file_at(direct, i)->rel);
        ASSERT_EQ_INT(ckpt_plan_file_at(plan, i)->n_tensors, ckpt_plan_file_at(direct, i)->n_tensors);
    }
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
    ckpt_paddle_model_close(pm);
    ckpt_set_close(set);
    ckpt_plan_free(direct);
}

/* Hugging Face to PaddleNLP: the family's map to PaddleNLP's names, the rank files planned. */
CKPT_TEST(test_framework_paddle_job_from_huggingface)
{
    ckpt_job_options o = CKPT_JOB_OPTIONS_INIT;
    ckpt_plan *plan;
    ckpt_fw *src;
    size_t i;
    int config = 0;

    o.to = "paddle";
    o.target.tp = 2;
    o.target.pp = 1;
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_job_plan(plan, ckpt_test_data("hf/qwen2_tiny"), &o, &src));
    for (i = 0; i < ckpt_plan_file_count(plan); i++)
        config += strcmp(ckpt_plan_file_at(plan, i)->rel, "config.json") == 0;
    ASSERT_EQ_INT(config, 1);
    ASSERT_EQ_STR(ckpt_plan_file_at(plan, 0)->rel, "model_state.tp00.pdparams");
    ASSERT_EQ_STR(ckpt_plan_file_at(plan, 1)->rel, "model_state.tp01.pdparams");
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
    /* a layout PaddleNLP cannot run is refused */
    o.target.tp = 3;
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_TRUE(ckpt_job_plan(plan, ckpt_test_data("hf/qwen2_tiny"), &o, &src) < 0);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_TRUE(src == NULL);
    ckpt_plan_free(plan);
}
