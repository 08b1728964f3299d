/* DeepSpeed ZeRO checkpoints beyond zero_to_fp32's default: the tag option (and version-1
 * open options), frozen parameters flagged, optimizer states consolidated on request,
 * tensor-parallel tag directories (one state dict per model-parallel rank) and ZeRO-0. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A copy of testdata/zero/<name>/global_step3 as ./<dir>/<tag>, and ./<dir>/latest naming
 * `latest`. */
static int copy_tag(const char *name, const char *dir, const char *tag, const char *latest)
{
    char src[256], dst[512];

    if (mkdir(dir, 0755) != 0)
        return -1;
    snprintf(dst, sizeof dst, "%s/latest", dir);
    ckpt_test_write_file(dst, latest, strlen(latest));
    snprintf(src, sizeof src, "zero/%s/global_step3", name);
    snprintf(dst, sizeof dst, "%s/%s", dir, tag);
    return ckpt_test_copy_data_dir(src, dst);
}

static ckpt_ckpt *open_with(const char *path, const char *tag, int optimizer_states)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;

    o.tag = tag;
    o.optimizer_states = optimizer_states;
    return ckpt_open(&c, path, &o) < 0 ? NULL : c;
}

/* Every element of two tensors, as float32, equal. */
static int same_values(const ckpt_tensor *a, const ckpt_tensor *b)
{
    int64_t n = ckpt_tensor_numel(a);
    float *x = malloc((size_t)n * sizeof *x + 1), *y = malloc((size_t)n * sizeof *y + 1);
    int ok = n == ckpt_tensor_numel(b) && x && y && ckpt_tensor_read(a, 0, n, CKPT_DTYPE_F32, x) >= 0 &&
             ckpt_tensor_read(b, 0, n, CKPT_DTYPE_F32, y) >= 0 && memcmp(x, y, (size_t)n * sizeof *x) == 0;

    free(x);
    free(y);
    return ok;
}

CKPT_TEST(test_zero_tag_option_overrides_latest)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;

    ASSERT_TRUE(copy_tag("stage2_fp32_ws2", "ckpt", "global_step7", "global_step99") == 0);
    o.format = "deepspeed_zero";
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_open(&c, "ckpt", &o));
    ASSERT_ERROR_MENTIONS("global_step99");
    o.tag = "global_step7";
    ASSERT_OK(ckpt_open(&c, "ckpt", &o));
    ASSERT_EQ_INT(ckpt_tensor_count(c), 11);
    ckpt_close(c);
    o.tag = "global_step8";
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_open(&c, "ckpt", &o));
    ASSERT_ERROR_MENTIONS("tag directory ckpt/global_step8 does not exist");
    ASSERT_TRUE(c == NULL);
    o.tag = "../ckpt/global_step7"; /* a relative path, as DeepSpeed joins it */
    ASSERT_OK(ckpt_open(&c, "ckpt", &o));
    ckpt_close(c);
}

/* The options struct as callers built against version 1 lay it out. */
typedef struct open_options_v1 {
    unsigned version;
    const char *format;
    int verify_crc;
} open_options_v1;

CKPT_TEST(test_zero_version1_open_options_still_work)
{
    open_options_v1 *v1 = malloc(sizeof *v1); /* exactly its size: a read past it would be caught */
    ckpt_open_options bad = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;

    ASSERT_TRUE(v1 != NULL);
    v1->version = 1;
    v1->format = NULL;
    v1->verify_crc = 1;
    ASSERT_OK(ckpt_open(&c, ckpt_test_data("zero/stage1_fp32_ws2"), (const ckpt_open_options *)(void *)v1));
    ASSERT_EQ_INT(ckpt_tensor_count(c), 9);
    ckpt_close(c);
    free(v1);
    bad.version = 3;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_open(&c, ckpt_test_data("zero/stage1_fp32_ws2"), &bad));
    ASSERT_ERROR_MENTIONS("version 3");
}

CKPT_TEST(test_zero_frozen_parameters_are_flagged)
{
    static const char *const cases[] = { "stage2_fp32_ws2", "stage3_bf16_ws2", "stage1_fp32_ws2" };
    size_t k, i;

    for (k = 0; k < 3; k++) {
        char rel[64];
        ckpt_ckpt *c;
        size_t frozen = 0;
        snprintf(rel, sizeof rel, "zero/%s", cases[k]);
        c = open_with(ckpt_test_data(rel), NULL, 0);
        ASSERT_TRUE(c != NULL);
        for (i = 0; i < ckpt_tensor_count(c); i++) {
            const ckpt_tensor *t = ckpt_tensor_at(c, i);
            int want = strcmp(t->name, "pos") == 0 || strcmp(t->name, "fc2.bias") == 0;
            ASSERT_EQ_INT((t->flags & CKPT_TENSOR_FROZEN) != 0, want);
            ASSERT_EQ_INT(t->flags & CKPT_TENSOR_OPTIMIZER_STATE, 0);
            frozen += want;
        }
        /* stage 1 saves no frozen parameters at all */
        ASSERT_EQ_INT(frozen, k == 2 ? 0 : 2);
        ckpt_close(c);
    }
}

/* exp_avg of param group 0 at stage 2: rank 0 holds elements [0, 540), rank 1 the rest;
 * fc1.weight = elements [481, 780) straddles them. */
CKPT_TEST(test_zero_optimizer_states_are_the_partitions)
{
    const char *dir = "zero/stage2_fp32_ws2/global_step3";
    ckpt_ckpt *c = open_with(ckpt_test_data("zero/stage2_fp32_ws2"), NULL, 1), *r[2];
    const ckpt_tensor *t;
    float flat[1080], got[299];
    size_t i, n_states = 0;
    int k;

    ASSERT_TRUE(c != NULL);
    ASSERT_EQ_INT(ckpt_tensor_count(c), 11 + 12);
    for (k = 0; k < 2; k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s/zero_pp_rank_%d_mp_rank_00_optim_states.pt", dir, k);
        r[k] = open_with(ckpt_test_data(rel), NULL, 0);
        ASSERT_TRUE(r[k] != NULL);
        t = ckpt_tensor_find(r[k], "optimizer_state_dict/base_optimizer_state/state/0/exp_avg");
        ASSERT_TRUE(t != NULL && ckpt_tensor_numel(t) == 540);
        ASSERT_OK(ckpt_tensor_read(t, 0, 540, CKPT_DTYPE_F32, flat + 540 * k));
    }
    t = ckpt_tensor_find(c, "fc1.weight.exp_avg");
    ASSERT_TRUE(t != NULL && t->ndim == 2 && t->shape[0] == 23 && t->shape[1] == 13);
    ASSERT_TRUE(t->flags == CKPT_TENSOR_OPTIMIZER_STATE && t->storage->n_extents == 2);
    ASSERT_OK(ckpt_tensor_read(t, 0, 299, CKPT_DTYPE_F32, got));
    ASSERT_TRUE(memcmp(got, flat + 481, sizeof got) == 0);
    for (i = 0; i < ckpt_tensor_count(c); i++)
        n_states += (ckpt_tensor_at(c, i)->flags & CKPT_TENSOR_OPTIMIZER_STATE) != 0;
    ASSERT_EQ_INT(n_states, 12);
    ASSERT_TRUE(ckpt_tensor_find(c, "norm.bias.exp_avg_sq") != NULL);
    ASSERT_TRUE(ckpt_tensor_find(c, "pos.exp_avg") == NULL); /* frozen: no optimizer state */
    ckpt_close(r[0]);
    ckpt_close(r[1]);
    ckpt_close(c);

    /* stage 3: ceil(481/2) = 241 elements of embed's moments on rank 0, 240 on rank 1 */
    c = open_with(ckpt_test_data("zero/stage3_fp32_ws2_subgroups"), NULL, 1);
    ASSERT_TRUE(c != NULL);
    t = ckpt_tensor_find(c, "embed.weight.exp_avg_sq");
    ASSERT_TRUE(t != NULL && t->storage->n_extents == 2);
    ASSERT_EQ_INT(t->storage->extents[0].size, 241 * 4);
    ckpt_close(c);
}

CKPT_TEST(test_zero_tensor_parallel_ranks_are_consolidated_one_by_one)
{
    static const char *const src[2] = { "zero/stage2_fp32_ws2", "zero/stage2_fp32_ws2_untied" };
    ckpt_ckpt *c = open_with(ckpt_test_data("zero/tp2_stage2_fp32_ws2"), NULL, 0);
    const ckpt_value *root;
    size_t mp, i;

    ASSERT_TRUE(c != NULL);
    root = ckpt_root(c);
    ASSERT_TRUE(root && root->kind == CKPT_VAL_DICT && root->u.dict.map.n == 2);
    for (mp = 0; mp < 2; mp++) {
        const ckpt_value *sd = root->u.dict.map.vals[mp];
        ckpt_ckpt *ref = open_with(ckpt_test_data(src[mp]), NULL, 0);
        char key[16];
        snprintf(key, sizeof key, "mp_rank_%02zu", mp);
        ASSERT_TRUE(ckpt_value_is_str(root->u.dict.map.keys[mp], key));
        ASSERT_TRUE(ref != NULL && sd->kind == CKPT_VAL_DICT && sd->u.dict.map.n == ckpt_tensor_count(ref));
        for (i = 0; i < sd->u.dict.map.n; i++) {
            const ckpt_tensor *t = ckpt_tensor_at(c, sd->u.dict.map.vals[i]->u.tensor.index);
            const ckpt_tensor *r = ckpt_tensor_at(ref, i);
            char name[128];
            snprintf(name, sizeof name, "%s/%s", key, r->name);
            ASSERT_TRUE(ckpt_value_is_str(sd->u.dict.map.keys[i], r->name));
            ASSERT_EQ_STR(t->name, name);
            ASSERT_TRUE(same_values(t, r));
        }
        ckpt_close(ref);
    }
    ASSERT_TRUE(ckpt_tensor_find(c, "mp_rank_00/lm_head.weight")->storage ==
                ckpt_tensor_find(c, "mp_rank_00/embed.weight")->storage);
    ASSERT_TRUE(ckpt_tensor_find(c, "mp_rank_01/lm_head.weight")->storage !=
                ckpt_tensor_find(c, "mp_rank_01/embed.weight")->storage);
    ckpt_close(c);
}

CKPT_TEST(test_zero_tensor_parallel_missing_rank_names_its_rank)
{
    ckpt_ckpt *c = NULL;

    ASSERT_TRUE(copy_tag("tp2_stage3_bf16_ws2", "tp", "global_step3", "global_step3") == 0);
    ASSERT_TRUE(unlink("tp/global_step3/bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt") == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "tp", NULL));
    ASSERT_ERROR_MENTIONS("expected 2 *_mp_rank_01_optim_states.pt files for world size 2, found 1: "
                          "zero_pp_rank_1 missing");
    ASSERT_TRUE(unlink("tp/global_step3/zero_pp_rank_0_mp_rank_01_model_states.pt") == 0);
    ASSERT_TRUE(unlink("tp/global_step3/zero_pp_rank_1_mp_rank_01_model_states.pt") == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "tp", NULL));
    ASSERT_ERROR_MENTIONS("has no model-states file of its model-parallel rank");
}

CKPT_TEST(test_zero_stage0_fp32_is_the_module_state_dict)
{
    ckpt_ckpt *c = open_with(ckpt_test_data("zero/stage0_fp32_ws2"), NULL, 0), *m;
    const char *model = "zero/stage0_fp32_ws2/global_step3/mp_rank_00_model_states.pt";
    static const char *const order[] = { "token_counts", "logit_scale", "pos", "embed.weight", "fc1.weight",
                                         "fc1.bias", "norm.weight", "norm.bias", "fc2.weight", "fc2.bias",
                                         "lm_head.weight" };
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    size_t i;

    ASSERT_TRUE(c != NULL);
    m = open_with(ckpt_test_data(model), NULL, 0);
    ASSERT_TRUE(m != NULL);
    ASSERT_EQ_INT(ckpt_tensor_count(c), 11);
    for (i = 0; i < 11; i++) {
        char name[64];
        ASSERT_EQ_STR(ckpt_tensor_at(c, i)->name, order[i]);
        snprintf(name, sizeof name, "module/%s", order[i]);
        ASSERT_TRUE(same_values(ckpt_tensor_at(c, i), ckpt_tensor_find(m, name)));
    }
    ASSERT_TRUE(ckpt_tensor_find(c, "lm_head.weight")->storage == ckpt_tensor_find(c, "embed.weight")->storage);
    ASSERT_EQ_INT(ckpt_note_count(c), 2);
    ASSERT_TRUE(strstr(ckpt_note_at(c, 1), "2 of its 8 parameters have no optimizer state") != NULL);
    ckpt_close(m);
    ckpt_close(c);

    o.optimizer_states = 1;
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_open(&c, ckpt_test_data("zero/stage0_fp32_ws2"), &o));
    ASSERT_ERROR_MENTIONS("keyed by parameter position");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_open(&c, ckpt_test_data("zero/stage0_bf16_ws2"), NULL));
    ASSERT_ERROR_MENTIONS("ZeRO-0 checkpoint of a bfloat16 model");
}
