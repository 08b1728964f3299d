/* A distributed optimizer's state read from distrib_optim.pt (formats/megatron/optimizer/megatron_distopt_read.c)
 * and written again (megatron_distopt_write.c), checked by a fact that owes nothing to the
 * buffer layout: an fp32 model's master copy IS its weight (megatron-core's fp32 optimizer
 * keeps no second copy; a bf16 model's weight is its master rounded), so after a real training
 * run every parameter's state slice must give its weight, element for element. A slice cut one element off, a wrong bucket offset or a
 * misplaced TP part breaks that; so would a writer that puts a parameter's state anywhere but
 * where the target's layout reads it back. */
#include "test.h"

#include "../../formats/megatron/optimizer/megatron_distopt.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

typedef struct opened {
    ckpt_set *set;
    ckpt_plan *plan;
    ckpt_megatron *m;
} opened;

static int open_ckpt(opened *o, const char *path)
{
    int rc;

    memset(o, 0, sizeof *o);
    if ((rc = ckpt_set_open(&o->set, path, NULL)) < 0 || (rc = ckpt_plan_new(&o->plan)) < 0)
        return rc;
    return ckpt_megatron_open(&o->m, o->set, ckpt_plan_graph(o->plan), NULL);
}

static void close_ckpt(opened *o)
{
    ckpt_megatron_close(o->m);
    ckpt_plan_free(o->plan);
    ckpt_set_close(o->set);
}

static float *read_f32(const ckpt_node *n)
{
    int64_t numel = ckpt_node_numel(n);
    float *v = malloc((size_t)(numel > 0 ? numel : 1) * sizeof *v);

    if (v && ckpt_node_read(n, 0, numel, CKPT_DTYPE_F32, v) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

/* Every parameter's master equals its weight; both moments have its shape, exp_avg_sq is not
 * negative and not all zero (three Adam steps ran). The number of parameters checked. */
static int masters_are_weights(ckpt_megatron *m, size_t *checked)
{
    size_t i;

    *checked = 0;
    if (!m->moments) {
        ckpt_test_fail(__FILE__, __LINE__, "no optimizer state read: %s", ckpt_error_last()->message);
        return -1;
    }
    for (i = 0; i < m->n_entries; i++) {
        const mg_entry *e = &m->entries[i];
        int64_t numel, j, nonzero = 0;
        float *w, *master, *sq;
        int ok;

        if (!e->param || !e->full)
            continue;
        const ckpt_node *as_weight = e->moment[MG_MASTER];
        numel = ckpt_node_numel(e->full);
        /* bf16/fp16 training: the weight is the master rounded to its dtype */
        if (ckpt_node_dtype(e->full) != CKPT_DTYPE_F32 &&
            ckpt_node_cast(m->g, e->moment[MG_MASTER], ckpt_node_dtype(e->full), &as_weight) < 0)
            as_weight = NULL;
        w = read_f32(e->full);
        master = as_weight ? read_f32(as_weight) : NULL;
        sq = read_f32(e->moment[MG_EXP_AVG_SQ]);
        ok = w && master && sq && ckpt_node_numel(e->moment[MG_MASTER]) == numel &&
             ckpt_node_numel(e->moment[MG_EXP_AVG]) == numel && ckpt_node_numel(e->moment[MG_EXP_AVG_SQ]) == numel &&
             memcmp(w, master, (size_t)numel * sizeof *w) == 0;
        for (j = 0; ok && j < numel; j++) {
            ok = sq[j] >= 0;
            nonzero += sq[j] > 0;
        }
        free(w);
        free(master);
        free(sq);
        if (!ok || nonzero == 0) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: the state read is not the weight's (or no Adam step)", e->name);
            return -1;
        }
        (*checked)++;
    }
    return 0;
}

/* Every fixture's legacy save (fp32 and bf16, TP, PP, buckets, tied embeddings, VPP). */
CKPT_TEST(test_distopt_read_masters_are_the_weights)
{
    DIR *d = opendir(ckpt_test_data("megatron/distopt"));
    struct dirent *de;
    size_t checked;
    int fixtures = 0;

    ASSERT_TRUE(d != NULL);
    while ((de = readdir(d)) != NULL) {
        char rel[320];
        size_t len = strlen(de->d_name);
        opened o;
        if (de->d_name[0] == '.' || strchr(de->d_name, '.'))
            continue;
        /* a_tp2pp1dp1_plain: the same model with the non-distributed optimizer */
        if (len > 6 && strcmp(de->d_name + len - 6, "_plain") == 0)
            continue;
        snprintf(rel, sizeof rel, "megatron/distopt/%s/legacy", de->d_name);
        if (open_ckpt(&o, ckpt_test_data(rel)) < 0 || !ckpt_megatron_info_of(o.m)->distributed_optimizer ||
            masters_are_weights(o.m, &checked) < 0 || checked < 10) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: %s", rel, ckpt_error_last()->message);
            close_ckpt(&o);
            break;
        }
        close_ckpt(&o);
        fixtures++;
    }
    closedir(d);
    ASSERT_TRUE(fixtures >= 2);
}

/* Written at other layouts (TP, PP, DP, buckets) and read back: masters are still the
 * weights, and both moments are the source's, bit for bit, by parameter name. */
static int same_moments(const ckpt_megatron *a, const ckpt_megatron *b)
{
    size_t i, j;
    int k;

    for (i = 0; i < a->n_entries; i++) {
        const mg_entry *e = &a->entries[i];
        if (!e->param || !e->full)
            continue;
        for (j = 0; j < b->n_entries && strcmp(b->entries[j].name, e->name) != 0; j++)
            ;
        if (j == b->n_entries) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: not in the output", e->name);
            return -1;
        }
        for (k = 0; k < MG_N_MOMENTS; k++) {
            float *x = read_f32(e->moment[k]), *y = read_f32(b->entries[j].moment[k]);
            int ok = x && y && ckpt_node_numel(e->moment[k]) == ckpt_node_numel(b->entries[j].moment[k]) &&
                     memcmp(x, y, (size_t)ckpt_node_numel(e->moment[k]) * sizeof *x) == 0;
            free(x);
            free(y);
            if (!ok) {
                ckpt_test_fail(__FILE__, __LINE__, "%s: state %d differs after the reshard", e->name, k);
                return -1;
            }
        }
    }
    return 0;
}

CKPT_TEST(test_distopt_write_then_read)
{
    static const struct {
        int tp, pp, dp;
        int64_t bucket;
    } targets[] = { { 1, 1, 1, CKPT_MEGATRON_NO_BUCKETS }, { 4, 1, 3, 200 }, { 1, 2, 2, 0 }, { 2, 2, 8, 64 } };
    size_t t, checked;
    opened src;

    ASSERT_OK(open_ckpt(&src, ckpt_test_data("megatron/distopt/a_tp2pp1dp2_buckets/legacy")));
    for (t = 0; t < sizeof targets / sizeof *targets; t++) {
        ckpt_megatron_target target = CKPT_MEGATRON_TARGET_INIT;
        ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
        ckpt_plan *plan;
        char out[32];
        opened back;

        target.tp = targets[t].tp;
        target.pp = targets[t].pp;
        target.dp = targets[t].dp;
        target.ddp_bucket_size = targets[t].bucket;
        snprintf(out, sizeof out, "out%zu", t);
        ASSERT_OK(ckpt_plan_new(&plan));
        ASSERT_OK(ckpt_megatron_plan(src.m, &target, plan));
        ASSERT_OK(ckpt_plan_execute(plan, out, &po, NULL));
        ckpt_plan_free(plan);
        ASSERT_OK(open_ckpt(&back, out));
        ASSERT_EQ_INT(ckpt_megatron_info_of(back.m)->tp, targets[t].tp);
        ASSERT_OK(masters_are_weights(back.m, &checked));
        ASSERT_OK(same_moments(src.m, back.m));
        close_ckpt(&back);
    }
    close_ckpt(&src);
}

/* A model-only use of a checkpoint whose distrib_optim.pt cannot be read still opens (no state
 * then), and a plan that keeps the optimizer fails with the reason. */
CKPT_TEST(test_distopt_unreadable_state_fails_only_when_kept)
{
    ckpt_megatron_target target = CKPT_MEGATRON_TARGET_INIT;
    ckpt_plan *plan;
    opened o;

    ASSERT_TRUE(ckpt_test_copy_data_dir("megatron/distopt/a_tp1pp1dp1/legacy", "in") == 0);
    ASSERT_TRUE(ckpt_test_copy_data_dir("megatron/distopt/a_tp1pp1dp1/legacy/iter_0000003", "in/iter_0000003") == 0);
    ASSERT_TRUE(ckpt_test_copy_data_dir("megatron/distopt/a_tp1pp1dp1/legacy/iter_0000003/mp_rank_00",
                                        "in/iter_0000003/mp_rank_00") == 0);
    ckpt_test_write_file("in/iter_0000003/mp_rank_00/distrib_optim.pt", "not a zip", 9);
    ASSERT_OK(open_ckpt(&o, "in"));
    ASSERT_TRUE(!o.m->moments);
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_TRUE(ckpt_megatron_plan(o.m, &target, plan) < 0);
    ASSERT_ERROR_MENTIONS("distrib_optim.pt");
    ckpt_plan_free(plan);
    target.optimizer = CKPT_MEGATRON_OPTIM_DROP;
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_megatron_plan(o.m, &target, plan));
    ckpt_plan_free(plan);
    close_ckpt(&o);
}
