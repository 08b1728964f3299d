/* ckpt_deepspeed_fp32_new (formats/deepspeed/deepspeed_fp32_plan.c): the consolidated
 * output of real ZeRO fixtures as sets, entries, shards and plan files; the CLI's zero
 * suite checks the bytes written. */
#include "test.h"

#include <ckpt/deepspeed.h>

static ckpt_ckpt *open_zero(const char *rel, int optimizer_states)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;

    o.format = "deepspeed_zero";
    o.optimizer_states = optimizer_states;
    return ckpt_open(&c, ckpt_test_data(rel), &o) < 0 ? NULL : c;
}

static size_t find_entry(const ckpt_deepspeed_fp32_set *s, const char *name)
{
    size_t i;

    for (i = 0; i < s->n_entries; i++)
        if (strcmp(s->entries[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

/* One .bin; the tied lm_head is the embedding's storage and node; floats become float32. */
CKPT_TEST(test_fp32_one_file_tied_names_share)
{
    ckpt_deepspeed_fp32_options o = CKPT_DEEPSPEED_FP32_OPTIONS_INIT;
    ckpt_ckpt *c = open_zero("zero/stage3_bf16_ws2", 0);
    ckpt_deepspeed_fp32 *p = NULL;
    const ckpt_deepspeed_fp32_set *s;
    size_t embed, head, i;

    ASSERT_TRUE(c != NULL);
    ASSERT_OK(ckpt_deepspeed_fp32_new(&p, c, &o));
    ASSERT_EQ_INT(p->n_sets, 1);
    s = &p->sets[0];
    ASSERT_EQ_STR(s->dir, "");
    ASSERT_EQ_STR(s->base, "pytorch_model");
    ASSERT_EQ_INT(s->shards->n_files, 1);
    ASSERT_EQ_STR(s->shards->files[0].name, "pytorch_model.bin");
    ASSERT_TRUE(s->shards->index_name == NULL);
    ASSERT_EQ_INT(ckpt_plan_file_count(p->plan), 1);
    embed = find_entry(s, "embed.weight");
    head = find_entry(s, "lm_head.weight");
    ASSERT_TRUE(embed < head && head < s->n_entries);
    ASSERT_EQ_INT(s->entries[embed].storage, embed);
    ASSERT_EQ_INT(s->entries[head].storage, embed);
    ASSERT_TRUE(s->entries[head].node == s->entries[embed].node);
    for (i = 0; i < s->n_entries; i++)
        if (ckpt_dtype_is_float(s->entries[i].t->dtype))
            ASSERT_EQ_INT(s->entries[i].dtype, CKPT_DTYPE_F32);
    ckpt_deepspeed_fp32_free(p);
    ckpt_close(c);
}

/* safetensors cannot hold the tied names: refused, naming both. */
CKPT_TEST(test_fp32_safetensors_refuses_tied)
{
    ckpt_deepspeed_fp32_options o = CKPT_DEEPSPEED_FP32_OPTIONS_INIT;
    ckpt_ckpt *c = open_zero("zero/stage3_fp32_ws2", 0);
    ckpt_deepspeed_fp32 *p = NULL;

    ASSERT_TRUE(c != NULL);
    o.format = "safetensors";
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_deepspeed_fp32_new(&p, c, &o));
    ASSERT_TRUE(p == NULL);
    ASSERT_ERROR_MENTIONS("embed.weight and lm_head.weight are one tensor");
    ckpt_close(c);
}

/* Per model-parallel rank a directory, sharded with an index; with optimizer_states a
 * second set per rank. */
CKPT_TEST(test_fp32_ranks_shards_and_optimizer_states)
{
    ckpt_deepspeed_fp32_options o = CKPT_DEEPSPEED_FP32_OPTIONS_INIT;
    ckpt_ckpt *c = open_zero("zero/tp2_stage3_bf16_ws2", 0);
    ckpt_deepspeed_fp32 *p = NULL;

    ASSERT_TRUE(c != NULL);
    o.max_shard_size = 4000;
    ASSERT_OK(ckpt_deepspeed_fp32_new(&p, c, &o));
    ASSERT_EQ_INT(p->n_sets, 2);
    ASSERT_EQ_STR(p->sets[1].dir, "mp_rank_01/");
    ASSERT_EQ_INT(p->sets[1].shards->n_files, 2);
    ASSERT_EQ_STR(p->sets[1].shards->files[0].name, "mp_rank_01/pytorch_model-00001-of-00002.bin");
    ASSERT_EQ_STR(p->sets[1].shards->index_name, "mp_rank_01/pytorch_model.bin.index.json");
    ASSERT_EQ_INT(ckpt_plan_file_count(p->plan), 6);
    ckpt_deepspeed_fp32_free(p);
    ckpt_close(c);

    c = open_zero("zero/stage2_fp32_ws2", 1);
    ASSERT_TRUE(c != NULL);
    o = (ckpt_deepspeed_fp32_options)CKPT_DEEPSPEED_FP32_OPTIONS_INIT;
    o.optimizer_states = 1;
    ASSERT_OK(ckpt_deepspeed_fp32_new(&p, c, &o));
    ASSERT_EQ_INT(p->n_sets, 2);
    ASSERT_EQ_STR(p->sets[1].base, "optimizer_states");
    ASSERT_TRUE(find_entry(&p->sets[1], "fc1.weight.exp_avg_sq") < p->sets[1].n_entries);
    ASSERT_EQ_INT(find_entry(&p->sets[0], "fc1.weight.exp_avg_sq"), SIZE_MAX);
    ckpt_deepspeed_fp32_free(p);
    ckpt_close(c);
}

CKPT_TEST(test_fp32_options_version)
{
    ckpt_deepspeed_fp32_options o = CKPT_DEEPSPEED_FP32_OPTIONS_INIT;
    ckpt_ckpt *c = open_zero("zero/stage2_fp32_ws2", 0);
    ckpt_deepspeed_fp32 *p = NULL;

    ASSERT_TRUE(c != NULL);
    o.version = CKPT_DEEPSPEED_FP32_OPTIONS_VERSION + 1;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_deepspeed_fp32_new(&p, c, &o));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_TRUE(p == NULL);
    ckpt_deepspeed_fp32_free(NULL);
    ckpt_close(c);
}
