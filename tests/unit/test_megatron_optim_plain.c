/* The per-parameter optimizer state of Megatron checkpoints (ckpt_megatron_optimizer_state)
 * from the non-distributed optimizer's and the distributed optimizer's files, and plans that
 * write either kind from it, on the checkpoints megatron-core wrote (testdata/megatron). */
#include "../../formats/megatron/megatron_private.h"
#include "megatron_fixture.h"

#include <stdlib.h>

/* Whether two nodes hold the same float32 values. */
static int same_values(const ckpt_node *a, const ckpt_node *b)
{
    int64_t n = ckpt_node_numel(a);
    float *x = malloc((size_t)n * sizeof *x + 1), *y = malloc((size_t)n * sizeof *y + 1);
    int same = x && y && n == ckpt_node_numel(b) && ckpt_node_read(a, 0, n, CKPT_DTYPE_F32, x) == 0 &&
               ckpt_node_read(b, 0, n, CKPT_DTYPE_F32, y) == 0 && memcmp(x, y, (size_t)n * sizeof *x) == 0;

    free(x);
    free(y);
    return same;
}

static long find(const ckpt_megatron *m, const char *name)
{
    size_t i;

    for (i = 0; i < ckpt_megatron_tensor_count(m); i++)
        if (strcmp(ckpt_megatron_tensor_at(m, i, NULL, NULL), name) == 0)
            return (long)i;
    return -1;
}

/* Every parameter of a has the state of the same name in b, value for value. */
static int same_state(ckpt_megatron *a, ckpt_megatron *b)
{
    size_t i;
    int k;

    for (i = 0; i < ckpt_megatron_tensor_count(a); i++) {
        const ckpt_node *sa[3], *sb[3];
        long j = find(b, ckpt_megatron_tensor_at(a, i, NULL, NULL));
        if (ckpt_megatron_optimizer_state(a, i, sa, NULL) < 0 || !sa[0])
            continue;
        if (j < 0 || ckpt_megatron_optimizer_state(b, (size_t)j, sb, NULL) < 0 || !sb[0])
            return 0;
        for (k = 0; k < 3; k++)
            if (!same_values(sa[k], sb[k]))
                return 0;
    }
    return 1;
}

CKPT_TEST(plain_state_at_full_shape_fp32_master_is_the_weight)
{
    const ckpt_node *state[3], *full;
    const char *copy_of = "unset";
    size_t i, params = 0;
    opened o;

    ASSERT_OK(open_fixture(&o, "distopt/a_tp2pp1dp1_plain/legacy"));
    for (i = 0; i < ckpt_megatron_tensor_count(o.m); i++) {
        ckpt_megatron_tensor_at(o.m, i, &full, NULL);
        ASSERT_OK(ckpt_megatron_optimizer_state(o.m, i, state, &copy_of));
        ASSERT_TRUE(copy_of == NULL);
        if (!state[0])
            continue;
        params++;
        ASSERT_EQ_INT(ckpt_node_dtype(state[1]), CKPT_DTYPE_F32);
        ASSERT_EQ_INT(ckpt_node_ndim(state[1]), ckpt_node_ndim(full));
        ASSERT_TRUE(memcmp(ckpt_node_shape(state[2]), ckpt_node_shape(full),
                           (size_t)ckpt_node_ndim(full) * sizeof(int64_t)) == 0);
        /* an fp32 model trains its weights themselves */
        ASSERT_TRUE(same_values(state[0], full));
    }
    ASSERT_EQ_INT(params, 15);
    close_fixture(&o);
}

CKPT_TEST(bf16_masters_are_fp32_from_fp16_params)
{
    const ckpt_node *state[3], *full;
    long i;
    opened o;

    ASSERT_OK(open_fixture(&o, "tp2pp2_bf16_optim"));
    i = find(o.m, "decoder.layers.3.mlp.linear_fc1.weight");
    ASSERT_TRUE(i >= 0);
    ckpt_megatron_tensor_at(o.m, (size_t)i, &full, NULL);
    ASSERT_OK(ckpt_megatron_optimizer_state(o.m, (size_t)i, state, NULL));
    ASSERT_EQ_INT(ckpt_node_dtype(full), CKPT_DTYPE_BF16);
    ASSERT_EQ_INT(ckpt_node_dtype(state[0]), CKPT_DTYPE_F32);
    ASSERT_EQ_INT(ckpt_node_shape(state[0])[0], 192);
    /* the bf16 weight is the master rounded, not the master */
    ASSERT_TRUE(!same_values(state[0], full));
    close_fixture(&o);
}

/* src written at the target through the per-parameter form, read again: the same state. */
static void through_plan(const char *src, ckpt_megatron_optimizer kind, int tp, int pp, const char *out)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_plan_report rep;
    opened o, back;

    memset(&rep, 0, sizeof rep);
    t.tp = tp;
    t.pp = pp;
    t.optimizer = kind;
    ASSERT_OK(open_fixture(&o, src));
    ASSERT_OK(ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_OK(ckpt_plan_execute(o.plan, out, &po, &rep));
    ckpt_plan_report_dispose(&rep);
    ASSERT_OK(open_path(&back, out));
    ASSERT_EQ_INT(ckpt_megatron_info_of(back.m)->distributed_optimizer, kind == CKPT_MEGATRON_OPTIM_DISTRIBUTED);
    ASSERT_TRUE(same_state(o.m, back.m));
    ASSERT_TRUE(same_state(back.m, o.m));
    close_fixture(&back);
    close_fixture(&o);
}

CKPT_TEST(plain_to_distributed_and_distributed_to_plain_keep_every_state)
{
    through_plan("tp2pp2_bf16_optim", CKPT_MEGATRON_OPTIM_DISTRIBUTED, 1, 2, "dist");
    through_plan("distopt/b_tp2pp2dp1_bf16_tied/legacy", CKPT_MEGATRON_OPTIM_PLAIN, 2, 2, "plain");
    through_plan("distopt/a_tp2pp1dp1_plain/legacy", CKPT_MEGATRON_OPTIM_PLAIN, 1, 1, "plain_tp1");
}

/* o written at TP 1 PP 1 EP ep with the optimizer of `kind` into `out`, opened as back. */
static void at_ep(opened *o, ckpt_megatron_optimizer kind, int ep, const char *out, opened *back)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;

    t.ep = ep;
    t.dp = ep > 2 ? ep : 2;
    t.optimizer = kind;
    ASSERT_OK(ckpt_megatron_plan(o->m, &t, o->plan));
    ASSERT_OK(ckpt_plan_execute(o->plan, out, &po, NULL));
    ASSERT_OK(open_path(back, out));
}

/* A mixture of experts (4 experts, EP 2) with the non-distributed optimizer: at EP > 1 each
 * rank file's optimizer is ChainedOptimizer's [dense, expert] list, each state dict numbering
 * its own parameters (an expert's state in the second); at EP 1 one. Written from the
 * distributed optimizer's state and moved to EP 1 and EP 4, every parameter keeps its state. */
CKPT_TEST(moe_plain_state_is_chained_by_expert_parallel_size)
{
    const ckpt_value *opt;
    mg_optim_view v;
    size_t i;
    opened o, plain, ep1, ep4;

    ASSERT_OK(open_fixture(&o, "distopt/m_tp1pp1dp2_ep2/legacy"));
    at_ep(&o, CKPT_MEGATRON_OPTIM_PLAIN, 2, "moe_plain", &plain);
    ASSERT_TRUE(same_state(o.m, plain.m) && same_state(plain.m, o.m));
    opt = ckpt_value_dict_get(mg_rank_at(plain.m, 0, 0, 1)->root, "optimizer");
    ASSERT_TRUE(opt && opt->kind == CKPT_VAL_LIST && opt->u.seq.n == 2);
    ASSERT_OK(ckpt_megatron__optim_view_open(plain.m, mg_rank_at(plain.m, 0, 0, 1), &v));
    ASSERT_EQ_INT((int)v.n_opt, 2);
    for (i = 0; i < v.n; i++)
        ASSERT_EQ_INT(v.which[i], strstr(v.keys[i], ".local_experts.") != NULL);
    ckpt_megatron__optim_view_free(&v);
    at_ep(&plain, CKPT_MEGATRON_OPTIM_KEEP, 1, "moe_plain_ep1", &ep1);
    opt = ckpt_value_dict_get(mg_rank_at(ep1.m, 0, 0, 0)->root, "optimizer");
    ASSERT_TRUE(opt && opt->kind == CKPT_VAL_DICT && ckpt_value_dict_get(opt, "state"));
    ASSERT_TRUE(same_state(plain.m, ep1.m) && same_state(ep1.m, plain.m));
    at_ep(&ep1, CKPT_MEGATRON_OPTIM_KEEP, 4, "moe_plain_ep4", &ep4);
    ASSERT_TRUE(same_state(o.m, ep4.m) && same_state(ep4.m, o.m));
    close_fixture(&ep4);
    close_fixture(&ep1);
    close_fixture(&plain);
    close_fixture(&o);
}

CKPT_TEST(a_tied_output_layer_copy_names_the_embedding)
{
    const char *copy_of = NULL;
    const ckpt_node *state[3];
    long i;
    opened o;

    ASSERT_OK(open_fixture(&o, "distopt/b_tp2pp2dp1_bf16_tied/legacy"));
    i = find(o.m, "output_layer.weight");
    ASSERT_TRUE(i >= 0);
    ASSERT_OK(ckpt_megatron_optimizer_state(o.m, (size_t)i, state, &copy_of));
    ASSERT_EQ_STR(copy_of, "embedding.word_embeddings.weight");
    close_fixture(&o);
}

CKPT_TEST(refusals_name_the_checkpoint_and_the_reason)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    const ckpt_node *state[3];
    opened o;

    ASSERT_OK(open_fixture(&o, "tp1"));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_optimizer_state(o.m, 0, state, NULL));
    ASSERT_ERROR_MENTIONS("no optimizer state");
    t.optimizer = CKPT_MEGATRON_OPTIM_PLAIN;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_ERROR_MENTIONS("megatron/tp1");
    close_fixture(&o);
    ASSERT_OK(open_fixture(&o, "distopt/a_tp2pp1dp1_plain/legacy"));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_optimizer_state(o.m, ckpt_megatron_tensor_count(o.m), state, NULL));
    close_fixture(&o);
}
