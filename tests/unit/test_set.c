/* Checkpoint sets: a Megatron-LM checkpoint root (or one iteration directory) seen as its
 * rank files with their coordinates; incomplete sets are errors of class LAYOUT. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A Megatron root whose rank files are copies of testdata/torch/megatron.pt. */
static int make_root(const char *root, const char *tracker, const char *dir, const char *const *ranks, size_t n)
{
    size_t len, i;
    unsigned char *pt = ckpt_test_read_file(ckpt_test_data("torch/megatron.pt"), &len);
    char path[512];

    if (!pt || mkdir(root, 0777) < 0)
        return -1;
    if (tracker) {
        snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", root);
        ckpt_test_write_file(path, tracker, strlen(tracker));
    }
    snprintf(path, sizeof path, "%s/%s", root, dir);
    if (mkdir(path, 0777) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s/%s", root, dir, ranks[i]);
        if (mkdir(path, 0777) < 0)
            return -1;
        snprintf(path, sizeof path, "%s/%s/%s/model_optim_rng.pt", root, dir, ranks[i]);
        ckpt_test_write_file(path, pt, len);
    }
    free(pt);
    return 0;
}

CKPT_TEST(test_set_megatron_root_with_tracker)
{
    static const char *const ranks[] = { "mp_rank_01_001", "mp_rank_00_000", "mp_rank_01_000", "mp_rank_00_001" };
    const ckpt_set_info *info;
    const ckpt_member *m;
    const ckpt_ckpt *ck, *again;
    ckpt_coords at = CKPT_COORDS_NONE;
    ckpt_set *s;
    long i;

    ASSERT_TRUE(make_root("ckpt", "10", "iter_0000010", ranks, 4) == 0);
    ASSERT_OK(ckpt_set_open(&s, "ckpt", NULL));
    info = ckpt_set_info_of(s);
    ASSERT_EQ_STR(info->layout, "megatron");
    ASSERT_EQ_STR(info->dir, "iter_0000010");
    ASSERT_EQ_INT(info->iteration, 10);
    ASSERT_EQ_INT(info->tp, 2);
    ASSERT_EQ_INT(info->pp, 2);
    ASSERT_EQ_INT(info->ep, 1);
    ASSERT_EQ_INT(ckpt_set_member_count(s), 4);
    /* stage-major order: (tp 0, pp 0), (tp 1, pp 0), (tp 0, pp 1), (tp 1, pp 1) */
    m = ckpt_set_member_at(s, 1);
    ASSERT_EQ_STR(m->rel, "iter_0000010/mp_rank_01_000/model_optim_rng.pt");
    ASSERT_EQ_INT(m->at.tp, 1);
    ASSERT_EQ_INT(m->at.pp, 0);
    ASSERT_EQ_STR(m->role, "model");
    at.tp = 0;
    at.pp = 1;
    at.ep = 0;
    i = ckpt_set_find(s, &at, "model");
    ASSERT_EQ_INT(i, 2);
    ASSERT_EQ_INT(ckpt_set_find(s, &at, "distrib_optim"), -1);
    ASSERT_OK(ckpt_set_member_open(s, (size_t)i, &ck));
    ASSERT_OK(ckpt_set_member_open(s, (size_t)i, &again));
    ASSERT_TRUE(ck == again && ckpt_tensor_count(ck) > 0);
    ASSERT_TRUE(ckpt_set_input_size(s) > 0);
    ckpt_set_close(s);
}

CKPT_TEST(test_set_megatron_iteration_dir_and_release)
{
    static const char *const one[] = { "mp_rank_00" };
    ckpt_set *s;
    ckpt_set_options o = CKPT_SET_OPTIONS_INIT;

    ASSERT_TRUE(make_root("a", NULL, "iter_0000020", one, 1) == 0);
    ASSERT_OK(ckpt_set_open(&s, "a/iter_0000020", NULL));
    ASSERT_EQ_INT(ckpt_set_info_of(s)->iteration, 20);
    ASSERT_EQ_STR(ckpt_set_member_at(s, 0)->rel, "mp_rank_00/model_optim_rng.pt");
    ckpt_set_close(s);

    ASSERT_TRUE(make_root("r", "release\n", "release", one, 1) == 0);
    ASSERT_OK(ckpt_set_open(&s, "r", NULL));
    ASSERT_EQ_INT(ckpt_set_info_of(s)->release, 1);
    ASSERT_EQ_INT(ckpt_set_info_of(s)->iteration, 0);
    ckpt_set_close(s);

    /* --iteration picks a directory the tracker does not name */
    ASSERT_TRUE(make_root("b", "5", "iter_0000007", one, 1) == 0);
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_set_open(&s, "b", NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    o.iteration = 7;
    ASSERT_OK(ckpt_set_open(&s, "b", &o));
    ckpt_set_close(s);
}

CKPT_TEST(test_set_megatron_incomplete_is_a_layout_error)
{
    static const char *const three[] = { "mp_rank_00_000", "mp_rank_01_000", "mp_rank_00_001" };
    ckpt_set *s;

    ASSERT_TRUE(make_root("c", "10", "iter_0000010", three, 3) == 0);
    /* the rank directory that is missing, named */
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_set_open(&s, "c", NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "no mp_rank_01_001") != NULL);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "TP 2 x PP 2") != NULL);

    ASSERT_TRUE(make_root("d", "ten", "iter_0000010", three, 1) == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_set_open(&s, "d", NULL));
    ASSERT_TRUE(mkdir("e", 0777) == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_set_open(&s, "e", NULL));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_set_open(&s, "missing", NULL));
}

CKPT_TEST(test_set_layouts_are_listed)
{
    const char *desc = NULL;

    ASSERT_TRUE(ckpt_layout_count() >= 1);
    ASSERT_EQ_STR(ckpt_layout_at(0, &desc), "megatron");
    ASSERT_TRUE(desc && *desc);
    ASSERT_TRUE(ckpt_layout_at(ckpt_layout_count(), NULL) == NULL);
}

/* ---- PaddleNLP directories (layout "paddle") ---- */

static long find_member(const ckpt_set *s, const char *rel)
{
    size_t i;

    for (i = 0; i < ckpt_set_member_count(s); i++)
        if (strcmp(ckpt_set_member_at(s, i)->rel, rel) == 0)
            return (long)i;
    return -1;
}

CKPT_TEST(test_set_paddle_ranks_from_names)
{
    ckpt_coords at = CKPT_COORDS_NONE;
    const ckpt_member *m;
    ckpt_set *s;
    long i;

    ASSERT_OK(ckpt_set_open(&s, ckpt_test_data("llama/fp32_tp2"), NULL));
    ASSERT_EQ_STR(ckpt_set_info_of(s)->layout, "paddle");
    ASSERT_EQ_STR(ckpt_set_info_of(s)->dir, "");
    ASSERT_EQ_INT(ckpt_set_info_of(s)->tp, 2);
    ASSERT_EQ_INT(ckpt_set_info_of(s)->pp, 1);
    ASSERT_EQ_INT(ckpt_set_member_count(s), 4); /* config.json, expected_te.json and the two ranks */
    m = ckpt_set_member_at(s, 0);
    ASSERT_EQ_STR(m->rel, "config.json");
    ASSERT_EQ_STR(m->role, "other");
    at.tp = 1;
    ASSERT_EQ_INT(i = ckpt_set_find(s, &at, "model"), 3);
    m = ckpt_set_member_at(s, (size_t)i);
    ASSERT_EQ_STR(m->rel, "model_state.tp01.pdparams");
    ASSERT_EQ_INT(m->at.pp, -1);
    ASSERT_EQ_INT(m->at.shard, -1);
    ckpt_set_close(s);

    ASSERT_OK(ckpt_set_open(&s, ckpt_test_data("llama/bf16_pp2"), NULL));
    ASSERT_EQ_INT(ckpt_set_info_of(s)->pp, 2);
    m = ckpt_set_member_at(s, (size_t)find_member(s, "model_state.tp00_pp01.pdparams"));
    ASSERT_EQ_INT(m->at.tp, 0);
    ASSERT_EQ_INT(m->at.pp, 1);
    ckpt_set_close(s);
}

CKPT_TEST(test_set_paddle_size_shards_and_index)
{
    static const char *const names[] = { "llama.norm.weight", "caf\xc3\xa9" };
    static const char *const files[] = { "model_state-00002-of-00002.pdparams", "model_state-00001-of-00002.pdparams" };
    const ckpt_paddle_group *g;
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_paddle *p;
    ckpt_set *s;
    long i;

    ASSERT_OK(ckpt_set_open(&s, ckpt_test_data("llama/fp32_sharded"), NULL));
    ASSERT_EQ_STR(ckpt_set_info_of(s)->layout, "paddle");
    ASSERT_TRUE((i = find_member(s, "model_state-00002-of-00002.pdparams")) >= 0);
    ASSERT_EQ_STR(ckpt_set_member_at(s, (size_t)i)->role, "model");
    ASSERT_EQ_INT(ckpt_set_member_at(s, (size_t)i)->at.shard, 1);
    ASSERT_EQ_INT(ckpt_set_member_at(s, (size_t)find_member(s, "model_state-00001-of-00002.pdparams"))->at.shard, 0);
    ASSERT_TRUE((i = find_member(s, "model_state.pdparams.index.json")) >= 0);
    ASSERT_EQ_STR(ckpt_set_member_at(s, (size_t)i)->role, "index");

    ASSERT_OK(ckpt_paddle_open(&p, s));
    ASSERT_EQ_INT(ckpt_paddle_group_count(p), 1);
    g = ckpt_paddle_group_at(p, 0);
    ASSERT_EQ_INT(g->index, i);
    ASSERT_EQ_INT(g->n_files, 2);
    ASSERT_EQ_STR(ckpt_set_member_at(s, g->files[0])->rel, "model_state-00001-of-00002.pdparams");
    ASSERT_OK(ckpt_paddle_group_check(p, 0));
    ASSERT_EQ_INT(ckpt_paddle_extra_count(p), 3);
    ASSERT_EQ_STR(ckpt_paddle_extra_at(p, 2)->rel, "generation_config.json");
    ASSERT_TRUE(ckpt_paddle_extra_at(p, 2)->skip == NULL);

    /* weight_map first, in the order given, then the input's metadata with the new total */
    ASSERT_OK(ckpt_paddle_index_json(p, 0, names, files, 2, 1234, &json));
    ASSERT_EQ_STR((const char *)json.data, "{\n"
                                           "    \"weight_map\": {\n"
                                           "        \"llama.norm.weight\": \"model_state-00002-of-00002.pdparams\",\n"
                                           "        \"caf\\u00e9\": \"model_state-00001-of-00002.pdparams\"\n"
                                           "    },\n"
                                           "    \"metadata\": {\n"
                                           "        \"total_size\": 1234\n"
                                           "    }\n"
                                           "}");
    ckpt_buf_dispose(&json);
    ckpt_paddle_close(p);
    ckpt_set_close(s);
}

CKPT_TEST(test_set_paddle_files_copied_and_skipped)
{
    const ckpt_paddle_extra *x;
    ckpt_paddle *p;
    ckpt_set *s;
    size_t i;

    ASSERT_TRUE(ckpt_test_copy_data_dir("llama/fp32_tp1", "pd") == 0);
    ASSERT_TRUE(mkdir("pd/sub", 0777) == 0);
    ASSERT_OK(ckpt_set_open(&s, "pd", NULL));
    ASSERT_EQ_STR(ckpt_set_member_at(s, (size_t)find_member(s, "optimizer.pdopt"))->role, "optimizer");
    ASSERT_EQ_INT(find_member(s, "sub"), -1);
    ASSERT_OK(ckpt_paddle_open(&p, s));
    ASSERT_EQ_INT(ckpt_paddle_group_count(p), 1);
    ASSERT_EQ_INT(ckpt_paddle_group_at(p, 0)->index, -1);
    ASSERT_OK(ckpt_paddle_group_check(p, 0));
    for (i = 0; i < ckpt_paddle_extra_count(p); i++) {
        x = ckpt_paddle_extra_at(p, i);
        if (strcmp(x->rel, "optimizer.pdopt") == 0)
            ASSERT_TRUE(x->skip && strstr(x->skip, "optimizer state"));
        else if (strcmp(x->rel, "sub") == 0)
            ASSERT_TRUE(x->skip && strstr(x->skip, "a directory"));
        else
            ASSERT_TRUE(x->skip == NULL && strstr(x->path, x->rel));
    }
    /* config, expected_te, generation_config, logits, optimizer.pdopt, sub, tokenizer_config */
    ASSERT_EQ_INT(ckpt_paddle_extra_count(p), 7);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_index_json(p, 0, NULL, NULL, 0, 0, NULL));
    ckpt_paddle_close(p);
    ckpt_set_close(s);
}

CKPT_TEST(test_set_paddle_inconsistent_is_a_layout_error)
{
    static const char index[] = "{\"weight_map\": {\"a\": \"model_state-00001-of-00002.pdparams\", "
                                "\"b\": \"model_state-00003-of-00003.pdparams\"}}";
    static const char other[] = "{\"weight_map\": {\"llama.norm.weight\": \"model_state-00001-of-00002.pdparams\"}}";
    ckpt_set_options o = CKPT_SET_OPTIONS_INIT;
    ckpt_paddle *p;
    ckpt_set *s;

    ASSERT_TRUE(ckpt_test_copy_data_dir("llama/fp32_sharded", "sh") == 0);
    ckpt_test_write_file("sh/model_state.pdparams.index.json", index, strlen(index));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_set_open(&s, "sh", NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("sh/model_state-00003-of-00003.pdparams: missing, but its index "
                          "sh/model_state.pdparams.index.json puts b in it");

    /* an index that disagrees with its files is found once they are open */
    ASSERT_TRUE(ckpt_test_copy_data_dir("llama/fp32_sharded", "sh2") == 0);
    ckpt_test_write_file("sh2/model_state.pdparams.index.json", other, strlen(other));
    ASSERT_OK(ckpt_set_open(&s, "sh2", NULL));
    ASSERT_OK(ckpt_paddle_open(&p, s));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_group_check(p, 0));
    ASSERT_ERROR_MENTIONS("is not in its weight_map");
    ckpt_paddle_close(p);
    ckpt_set_close(s);

    /* a directory without model files is no PaddleNLP checkpoint, even when asked for */
    ASSERT_TRUE(mkdir("cfg", 0777) == 0);
    ckpt_test_write_file("cfg/config.json", "{}", 2);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_set_open(&s, "cfg", NULL));
    o.layout = "paddle";
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_set_open(&s, "cfg", &o));
    ASSERT_ERROR_MENTIONS("no model_state*.pdparams files");
}

/* ---- DeepSpeed checkpoint directories (layout "deepspeed") ---- */

CKPT_TEST(test_set_deepspeed_root_and_tag_dir)
{
    const ckpt_set_info *info;
    const ckpt_member *m;
    const ckpt_ckpt *ck;
    ckpt_ckpt *whole;
    ckpt_set *s;

    ASSERT_OK(ckpt_set_open(&s, ckpt_test_data("zero/stage2_bf16_ws2"), NULL));
    info = ckpt_set_info_of(s);
    ASSERT_EQ_STR(info->layout, "deepspeed");
    ASSERT_EQ_STR(info->dir, "global_step3");
    ASSERT_EQ_INT(info->iteration, 3);
    ASSERT_EQ_INT(info->tp, 1);
    ASSERT_EQ_INT(info->dp, 2);
    ASSERT_EQ_INT(ckpt_set_member_count(s), 3);
    m = ckpt_set_member_at(s, 0);
    ASSERT_EQ_STR(m->rel, "global_step3/mp_rank_00_model_states.pt");
    ASSERT_EQ_STR(m->role, "model");
    ASSERT_EQ_INT(m->at.tp, 0);
    ASSERT_EQ_INT(m->at.dp, -1);
    m = ckpt_set_member_at(s, 2);
    ASSERT_EQ_STR(m->rel, "global_step3/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt");
    ASSERT_EQ_STR(m->role, "optimizer");
    ASSERT_EQ_INT(m->at.dp, 1);
    ASSERT_OK(ckpt_set_member_open(s, 2, &ck));
    ASSERT_TRUE(ckpt_tensor_count(ck) > 0);
    ckpt_set_close(s);

    /* the tag directory itself; the directory still opens as one consolidated checkpoint */
    ASSERT_OK(ckpt_set_open(&s, ckpt_test_data("zero/stage2_bf16_ws2/global_step3"), NULL));
    ASSERT_EQ_STR(ckpt_set_info_of(s)->dir, "");
    ASSERT_EQ_INT(ckpt_set_info_of(s)->iteration, 3);
    ASSERT_EQ_STR(ckpt_set_member_at(s, 0)->rel, "mp_rank_00_model_states.pt");
    ckpt_set_close(s);
    ASSERT_OK(ckpt_open(&whole, ckpt_test_data("zero/stage2_bf16_ws2"), NULL));
    ASSERT_EQ_STR(ckpt_format_name(whole), "deepspeed_zero");
    ckpt_close(whole);
}

CKPT_TEST(test_set_deepspeed_tensor_parallel_stage3)
{
    ckpt_coords at = CKPT_COORDS_NONE;
    const ckpt_member *m;
    ckpt_set *s;

    ASSERT_OK(ckpt_set_open(&s, ckpt_test_data("zero/tp2_stage3_bf16_ws2"), NULL));
    ASSERT_EQ_INT(ckpt_set_info_of(s)->tp, 2);
    ASSERT_EQ_INT(ckpt_set_info_of(s)->dp, 2);
    ASSERT_EQ_INT(ckpt_set_member_count(s), 8);
    /* rank by rank: model states by data-parallel rank, then optimizer states */
    m = ckpt_set_member_at(s, 1);
    ASSERT_EQ_STR(m->rel, "global_step3/zero_pp_rank_1_mp_rank_00_model_states.pt");
    ASSERT_EQ_INT(m->at.dp, 1);
    at.tp = 1;
    at.dp = 1;
    ASSERT_EQ_INT(ckpt_set_find(s, &at, "optimizer"), 7);
    ASSERT_EQ_INT(ckpt_set_find(s, &at, "model"), 5);
    ckpt_set_close(s);
}

CKPT_TEST(test_set_deepspeed_tags_and_missing_ranks)
{
    ckpt_set_options o = CKPT_SET_OPTIONS_INIT;
    ckpt_set *s;

    ASSERT_TRUE(mkdir("ds", 0777) == 0);
    ckpt_test_write_file("ds/latest", "global_step9\n", 13);
    ASSERT_TRUE(ckpt_test_copy_data_dir("zero/stage3_fp32_ws4/global_step3", "ds/global_step3") == 0);
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_set_open(&s, "ds", NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    o.open.tag = "global_step3";
    ASSERT_OK(ckpt_set_open(&s, "ds", &o));
    ASSERT_EQ_INT(ckpt_set_info_of(s)->dp, 4);
    ASSERT_EQ_INT(ckpt_set_member_count(s), 8);
    ckpt_set_close(s);
    o.open.tag = NULL;
    o.iteration = 3;
    ASSERT_OK(ckpt_set_open(&s, "ds", &o));
    ASSERT_EQ_STR(ckpt_set_info_of(s)->dir, "global_step3");
    ckpt_set_close(s);

    ASSERT_TRUE(unlink("ds/global_step3/zero_pp_rank_2_mp_rank_00_optim_states.pt") == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_set_open(&s, "ds", &o));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("zero_pp_rank_2 missing");
}

CKPT_TEST(test_set_new_layouts_are_listed)
{
    const char *desc = NULL;
    size_t i, found = 0;

    for (i = 0; i < ckpt_layout_count(); i++) {
        const char *name = ckpt_layout_at(i, &desc);
        found += strcmp(name, "paddle") == 0 || strcmp(name, "deepspeed") == 0;
        ASSERT_TRUE(desc && *desc);
    }
    ASSERT_EQ_INT(found, 2);
}
