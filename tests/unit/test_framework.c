/* The framework interface: the rank loop and its split cache, a Megatron checkpoint opened
 * as one model by bid and by name, refusals naming what is wrong, and the one job path at
 * the same framework (reshard) planning what ckpt_megatron_plan plans, and verify opening a
 * directory with the verify source of the framework that wins its bid. */
#include "test.h"

#include <ckpt/framework.h>
#include <ckpt/sys/framework.h>
#include <ckpt/verify.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct rank_log {
    int splits[4];
    char order[64];
    size_t len;
    const ckpt_node *fake[3];
} rank_log;

static int split_fake(void *state, size_t entry, size_t slot, int n_tp, const ckpt_node **parts)
{
    rank_log *l = state;
    int i;

    l->splits[entry * 2 + slot]++;
    for (i = 0; i < n_tp; i++)
        parts[i] = l->fake[i];
    return 0;
}

static int log_stage(void *state, int pp, ckpt_fw_ranks *r)
{
    rank_log *l = state;
    (void)r;
    l->len += (size_t)snprintf(l->order + l->len, sizeof l->order - l->len, "S%d ", pp);
    return 0;
}

static int log_rank(void *state, int tp, int pp, int ep, ckpt_fw_ranks *r)
{
    rank_log *l = state;
    const ckpt_node *part;
    int rc = ckpt_fw_ranks_part(r, 1, 1, tp, &part);

    if (rc < 0)
        return rc;
    l->len += (size_t)snprintf(l->order + l->len, sizeof l->order - l->len, "%d%d%d ", ep, pp, tp);
    return part == l->fake[tp] ? 0 : CKPT_ERROR;
}

static int fail_at_second_rank(void *state, int tp, int pp, int ep, ckpt_fw_ranks *r)
{
    (void)r;
    (void)pp;
    (void)ep;
    ((rank_log *)state)->len++;
    return tp == 1 ? ckpt_error_set(CKPT_EINVALID, "rank 1") : 0;
}

CKPT_TEST(test_framework_ranks_split_once_per_entry_and_slot)
{
    rank_log l;
    ckpt_fw_ranks *r;
    const ckpt_node *part;

    memset(&l, 0, sizeof l);
    l.fake[0] = (const ckpt_node *)&l.splits[0];
    l.fake[1] = (const ckpt_node *)&l.splits[1];
    l.fake[2] = (const ckpt_node *)&l.splits[2];
    ASSERT_OK(ckpt_fw_ranks_new(&r, 2, 2, 3, split_fake, &l));
    ASSERT_OK(ckpt_fw_ranks_part(r, 0, 1, 2, &part));
    ASSERT_TRUE(part == l.fake[2]);
    ASSERT_OK(ckpt_fw_ranks_part(r, 0, 1, 0, &part));
    ASSERT_OK(ckpt_fw_ranks_part(r, 1, 0, 1, &part));
    ASSERT_EQ_INT(l.splits[1], 1);
    ASSERT_EQ_INT(l.splits[2], 1);
    ASSERT_EQ_INT(l.splits[0], 0);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_ranks_part(r, 2, 0, 0, &part));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_ranks_part(r, 0, 2, 0, &part));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_ranks_part(r, 0, 0, 3, &part));
    ckpt_fw_ranks_free(r);
    ckpt_fw_ranks_free(NULL);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_ranks_new(&r, 2, 1, 0, split_fake, &l));
}

/* A created model's tensors keep the order they were given in, past the first growth. */
CKPT_TEST(test_framework_tensor_list_keeps_order)
{
    ckpt_fw_tensor_list l = { 0 };
    const ckpt_node *nodes[200];
    char name[32];
    size_t i;

    for (i = 0; i < 200; i++) {
        nodes[i] = (const ckpt_node *)(uintptr_t)(i + 1);
        snprintf(name, sizeof name, "t%zu", i);
        ASSERT_OK(ckpt_fw_tensor_list_add(&l, name, nodes[i]));
    }
    ASSERT_TRUE(l.n == 200);
    for (i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "t%zu", i);
        ASSERT_EQ_STR(l.names[i], name);
        ASSERT_TRUE(l.nodes[i] == nodes[i]);
    }
    ckpt_fw_tensor_list_dispose(&l);
    ASSERT_TRUE(l.n == 0 && l.names == NULL);
}

CKPT_TEST(test_framework_ranks_each_order)
{
    rank_log l;
    ckpt_fw_ranks *r;

    memset(&l, 0, sizeof l);
    l.fake[0] = (const ckpt_node *)&l.splits[0];
    l.fake[1] = (const ckpt_node *)&l.splits[1];
    ASSERT_OK(ckpt_fw_ranks_new(&r, 2, 2, 2, split_fake, &l));
    /* megatron: EP outermost, then PP, TP fastest */
    ASSERT_OK(ckpt_fw_ranks_each(r, CKPT_FW_RANKS_EP_PP_TP, 2, 2, NULL, log_rank, &l));
    ASSERT_EQ_STR(l.order, "000 001 010 011 100 101 110 111 ");
    ASSERT_EQ_INT(l.splits[3], 1);
    /* paddle: each stage's callback before its TP ranks; no EP */
    l.len = 0;
    l.order[0] = '\0';
    ASSERT_OK(ckpt_fw_ranks_each(r, CKPT_FW_RANKS_PP_TP, 2, 3, log_stage, log_rank, &l));
    ASSERT_EQ_STR(l.order, "S0 000 001 S1 010 011 ");
    /* the first error stops the loop */
    l.len = 0;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_ranks_each(r, CKPT_FW_RANKS_PP_TP, 2, 1, NULL, fail_at_second_rank, &l));
    ASSERT_EQ_INT(l.len, 2);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_ranks_each(r, 7, 1, 1, NULL, log_rank, &l));
    ckpt_fw_ranks_free(r);
}

CKPT_TEST(test_framework_open_megatron_by_bid)
{
    ckpt_plan *plan;
    ckpt_fw *m;
    const ckpt_fw_info *info;
    const ckpt_node *full;
    ckpt_tensor_layout l;
    const char *name;
    size_t i, vocab = 0;

    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_fw_open(&m, ckpt_test_data("megatron/tp2pp2"), ckpt_plan_graph(plan), NULL));
    info = ckpt_fw_info_of(m);
    ASSERT_EQ_STR(info->framework, "megatron");
    ASSERT_EQ_INT(info->tp, 2);
    ASSERT_EQ_INT(info->pp, 2);
    ASSERT_TRUE(ckpt_fw_set(m) != NULL);
    ASSERT_TRUE(ckpt_fw_native(m, "megatron") != NULL);
    ASSERT_TRUE(ckpt_fw_native(m, "paddle") == NULL);
    ASSERT_EQ_INT(ckpt_fw_tensor_count(m), ckpt_megatron_tensor_count(ckpt_fw_native(m, "megatron")));
    for (i = 0; i < ckpt_fw_tensor_count(m); i++) {
        name = ckpt_fw_tensor_at(m, i, &full, &l);
        ASSERT_TRUE(name && full);
        if (strstr(name, "embedding.word_embeddings.weight")) {
            vocab++;
            ASSERT_EQ_INT(l.tp, CKPT_TP_VOCAB);
        }
    }
    ASSERT_EQ_INT(vocab, 1);
    ASSERT_TRUE(ckpt_fw_tensor_at(m, i, &full, &l) == NULL);
    ckpt_fw_close(m);
    ckpt_fw_close(NULL);
    ckpt_plan_free(plan);
}

CKPT_TEST(test_framework_refusals_name_what)
{
    ckpt_fw_options o = CKPT_FW_OPTIONS_INIT;
    ckpt_fw_target t = CKPT_FW_TARGET_INIT;
    ckpt_plan *plan;
    ckpt_fw *m;

    o.framework = "caffe";
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_fw_open(&m, "no-such-dir", ckpt_plan_graph(plan), NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "no-such-dir") != NULL);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_fw_open(&m, ".", ckpt_plan_graph(plan), &o));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "'caffe'") != NULL);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "megatron") != NULL);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_fw_open(&m, ".", ckpt_plan_graph(plan), NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_FORMAT);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_fw_new(&m, "caffe", ckpt_plan_graph(plan), NULL, NULL, &t));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_new(&m, "megatron", ckpt_plan_graph(plan), NULL, NULL, &t));
    t.version = 0;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_new(&m, "megatron", ckpt_plan_graph(plan), NULL, NULL, &t));
    o.version = 99;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_fw_open(&m, ".", ckpt_plan_graph(plan), &o));
    ckpt_plan_free(plan);
}

/* The same framework: the job plans what the framework's own planner plans. */
CKPT_TEST(test_framework_job_reshard_as_megatron_plan)
{
    ckpt_megatron_target mt = CKPT_MEGATRON_TARGET_INIT;
    ckpt_job_options o = CKPT_JOB_OPTIONS_INIT;
    ckpt_plan *plan, *direct;
    ckpt_set *set;
    ckpt_megatron *m;
    ckpt_fw *src;
    size_t i;

    o.target.megatron = mt;
    o.target.tp = 1;
    o.target.pp = 1;
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_job_plan(plan, ckpt_test_data("megatron/tp2pp2"), &o, &src));
    ASSERT_OK(ckpt_plan_new(&direct));
    ASSERT_OK(ckpt_set_open(&set, ckpt_test_data("megatron/tp2pp2"), NULL));
    ASSERT_OK(ckpt_megatron_open(&m, set, ckpt_plan_graph(direct), NULL));
    ASSERT_OK(ckpt_megatron_plan(m, &mt, direct));
    ASSERT_EQ_INT(ckpt_plan_file_count(plan), ckpt_plan_file_count(direct));
    for (i = 0; i < ckpt_plan_file_count(plan); i++) {
        ASSERT_EQ_STR(ckpt_plan_file_at(plan, i)->rel, ckpt_plan_file_at(direct, i)->rel);
        ASSERT_EQ_INT(ckpt_plan_file_at(plan, i)->n_tensors, ckpt_plan_file_at(direct, i)->n_tensors);
    }
    /* a --drop pattern that matches nothing is refused, naming it */
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_plan_drop_pattern(plan, "nothing.*"));
    ASSERT_TRUE(ckpt_job_plan(plan, ckpt_test_data("megatron/tp2pp2"), &o, &src) < 0);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "nothing.*") != NULL);
    ASSERT_TRUE(src == NULL);
    ckpt_plan_free(plan);
    ckpt_megatron_close(m);
    ckpt_set_close(set);
    ckpt_plan_free(direct);
}

/* A Hugging Face directory by bid: its family from config.json, every tensor of its weights. */
CKPT_TEST(test_framework_open_huggingface_by_bid)
{
    ckpt_plan *plan;
    ckpt_fw *m;

    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_fw_open(&m, ckpt_test_data("hf/qwen2_tiny"), ckpt_plan_graph(plan), NULL));
    ASSERT_EQ_STR(ckpt_fw_info_of(m)->framework, "huggingface");
    ASSERT_EQ_INT(ckpt_fw_info_of(m)->tp, 1);
    ASSERT_TRUE(ckpt_fw_family(m) != NULL && ckpt_fw_config(m) != NULL);
    ASSERT_EQ_STR(ckpt_family_name(ckpt_fw_family(m)), "qwen2");
    ASSERT_TRUE(ckpt_fw_set(m) == NULL);
    ASSERT_TRUE(ckpt_fw_tensor_count(m) > 10);
    ckpt_fw_close(m);
    ckpt_plan_free(plan);
}

/* verify's source of a directory is the verify member of the framework that wins the bid
 * there: one registration names both. */
CKPT_TEST(test_framework_verify_source_is_the_frameworks)
{
    static const char *const dirs[] = { "megatron/tp2", "hf/qwen2_tiny", "paddlenlp/fp32_tp2",
                                        "zero/llama_stage2_bf16_ws2" };
    size_t i;

    for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        ckpt_plan *plan;
        ckpt_model *v;
        ckpt_fw *m;

        ASSERT_OK(ckpt_plan_new(&plan));
        ASSERT_OK(ckpt_fw_open(&m, ckpt_test_data(dirs[i]), ckpt_plan_graph(plan), NULL));
        ASSERT_OK(ckpt_model_open(&v, ckpt_test_data(dirs[i]), NULL));
        ASSERT_EQ_STR(ckpt_model_source(v), ckpt_fw_info_of(m)->framework);
        ckpt_model_close(v);
        ckpt_fw_close(m);
        ckpt_plan_free(plan);
    }
}

/* Hugging Face to Megatron: every tensor through the family's map, the rank files planned. */
CKPT_TEST(test_framework_job_hf_to_megatron)
{
    ckpt_megatron_target mt = CKPT_MEGATRON_TARGET_INIT;
    ckpt_job_options o = CKPT_JOB_OPTIONS_INIT;
    ckpt_plan *plan;
    ckpt_fw *src;

    o.to = "megatron";
    o.target.megatron = mt;
    o.target.tp = 2;
    o.target.pp = 2;
    o.target.iteration = 1;
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_job_plan(plan, ckpt_test_data("hf/qwen2_tiny"), &o, &src));
    /* 4 rank files and the tracker */
    ASSERT_EQ_INT(ckpt_plan_file_count(plan), 5);
    ASSERT_EQ_STR(ckpt_plan_file_at(plan, 4)->rel, "latest_checkpointed_iteration.txt");
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
}

/* DeepSpeed, read only: a ZeRO directory by bid, each parameter consolidated; nothing created. */
CKPT_TEST(test_framework_deepspeed_read_only)
{
    ckpt_fw_target t = CKPT_FW_TARGET_INIT;
    ckpt_plan *plan;
    ckpt_fw *m;

    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_fw_open(&m, ckpt_test_data("zero/stage3_fp32_ws2"), ckpt_plan_graph(plan), NULL));
    ASSERT_EQ_STR(ckpt_fw_info_of(m)->framework, "deepspeed");
    ASSERT_EQ_INT(ckpt_fw_info_of(m)->dp, 2);
    ASSERT_EQ_INT(ckpt_fw_info_of(m)->has_optimizer, 1);
    ASSERT_TRUE(ckpt_fw_tensor_count(m) > 0);
    ASSERT_TRUE(ckpt_fw_family(m) == NULL);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_fw_plan(m, &t, plan));
    ckpt_fw_close(m);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_fw_new(&m, "deepspeed", ckpt_plan_graph(plan), NULL, NULL, &t));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "reads checkpoints only") != NULL);
    ckpt_plan_free(plan);
}
