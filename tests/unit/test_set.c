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
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_set_open(&s, "c", NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
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
