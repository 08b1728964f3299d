/* Mixture-of-experts models under global expert indices (formats/megatron/megatron_experts.c):
 * the index in SequentialMLP and TEGroupedMLP names, which target EP rank owns an expert and
 * its local name there, and megatron-core 0.16.1's legacy save of
 * testdata/megatron/distopt/m_tp1pp1dp2_ep2 (4 experts at EP 2) read as one model: global
 * names, each layer's experts inside it in Megatron's order. The CLI runs (EP 2 -> 1 -> 2,
 * 2 -> 4 -> 2, refusals) are tests/cli/reshard/moe_ep.sh; expert TP below the TP as a source
 * tests/cli/reshard/moe_etp.sh. */
#include "../../formats/megatron/megatron_private.h"
#include "megatron_fixture.h"

CKPT_TEST(test_experts_index_in_names)
{
    ckpt_buf b = CKPT_BUF_INIT;
    int64_t i = -1;

    ASSERT_TRUE(ckpt_megatron__expert_index("decoder.layers.3.mlp.experts.local_experts.17.linear_fc1.weight", &i));
    ASSERT_EQ_INT((int)i, 17);
    ASSERT_TRUE(ckpt_megatron__expert_index("decoder.layers.0.mlp.experts.linear_fc2.weight5", &i));
    ASSERT_EQ_INT((int)i, 5);
    ASSERT_TRUE(ckpt_megatron__expert_index("decoder.layers.0.mlp.experts.linear_fc1.bias12", &i));
    ASSERT_EQ_INT((int)i, 12);
    /* no index: the router, TEGroupedLinear's _extra_state, a dense MLP */
    ASSERT_TRUE(!ckpt_megatron__expert_index("decoder.layers.0.mlp.router.weight", &i));
    ASSERT_TRUE(!ckpt_megatron__expert_index("decoder.layers.0.mlp.experts.linear_fc1._extra_state", &i));
    ASSERT_TRUE(!ckpt_megatron__expert_index("decoder.layers.0.mlp.linear_fc1.weight", &i));
    ASSERT_TRUE(!ckpt_megatron__expert_index("decoder.layers.0.mlp.experts.local_experts.x.linear_fc1.weight", &i));
    ASSERT_OK(ckpt_megatron__rename_expert("decoder.layers.3.mlp.experts.local_experts.17.linear_fc1.weight", 2, &b));
    ASSERT_EQ_STR((const char *)b.data, "decoder.layers.3.mlp.experts.local_experts.2.linear_fc1.weight");
    ckpt_buf_clear(&b);
    ASSERT_OK(ckpt_megatron__rename_expert("decoder.layers.0.mlp.experts.linear_fc2.weight5", 11, &b));
    ASSERT_EQ_STR((const char *)b.data, "decoder.layers.0.mlp.experts.linear_fc2.weight11");
    ckpt_buf_dispose(&b);
}

/* Whether EP rank ep's file holds the keys want[0..n) in this order (None values included). */
static int same_keys(const ckpt_megatron *m, int ep, const char *const *want, size_t n)
{
    const ckpt_value *d = ckpt_value_dict_get(mg_rank_at(m, 0, 0, ep)->root, "model");
    size_t i;

    if (!d || d->u.dict.map.n != n)
        return 0;
    for (i = 0; i < n; i++)
        if (!ckpt_value_is_str(d->u.dict.map.keys[i], want[i]))
            return 0;
    return 1;
}

CKPT_TEST(test_experts_global_names_in_megatron_order)
{
    const char *rank1[64];
    ckpt_buf b = CKPT_BUF_INIT;
    size_t i, n = 0, experts = 0;
    int64_t last = -1;
    opened o;

    ASSERT_OK(open_fixture(&o, "distopt/m_tp1pp1dp2_ep2/legacy"));
    ASSERT_EQ_INT(o.m->info.ep, 2);
    ASSERT_EQ_INT((int)ckpt_megatron__experts_at(o.m, 2), 2);
    ASSERT_EQ_INT((int)ckpt_megatron__experts_at(o.m, 4), 1);
    for (i = 0; i < o.m->n_entries; i++) {
        const mg_entry *e = &o.m->entries[i];
        if (e->expert < 0)
            continue;
        experts++;
        /* global index = EP rank * 2 + local, in the name; a layer's experts in order */
        ASSERT_EQ_INT((int)(e->expert / 2), e->ep);
        ASSERT_TRUE(ckpt_megatron__expert_index(e->name, &last));
        ASSERT_EQ_INT((int)last, (int)e->expert);
    }
    /* 2 layers x 4 experts x (fc1, fc2) x (weight, _extra_state) */
    ASSERT_EQ_INT((int)experts, 32);
    ASSERT_TRUE(entry_named(o.m, "decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight") != NULL);
    ASSERT_TRUE(entry_named(o.m, "decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight")->ep == 1);
    /* at EP rank 1 of EP 2, in that file's order under its local names: EP rank 1's file's keys */
    for (i = 0; i < o.m->n_entries && n < 64; i++) {
        const mg_entry *e = &o.m->entries[i];
        char *copy;
        if (!ckpt_megatron__on_ep(o.m, e, 2, 1))
            continue;
        ckpt_buf_clear(&b);
        ASSERT_OK(ckpt_megatron__local_expert_name(o.m, e, 2, e->name, &b));
        ASSERT_TRUE((copy = ckpt_arena_strndup(ckpt_plan_arena(o.plan), (const char *)b.data, b.len)) != NULL);
        rank1[n++] = copy;
    }
    ASSERT_TRUE(same_keys(o.m, 1, rank1, n));
    /* at EP 4, global expert 3 is EP rank 3's local expert 0; the router is on every rank */
    ASSERT_TRUE(ckpt_megatron__on_ep(o.m, entry_named(o.m, "decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight"),
                                     4, 3));
    ASSERT_TRUE(!ckpt_megatron__on_ep(o.m, entry_named(o.m, "decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight"),
                                      4, 1));
    ckpt_buf_clear(&b);
    ASSERT_OK(ckpt_megatron__local_expert_name(
        o.m, entry_named(o.m, "decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight"), 4,
        "decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight", &b));
    ASSERT_EQ_STR((const char *)b.data, "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight");
    ASSERT_TRUE(ckpt_megatron__on_ep(o.m, entry_named(o.m, "decoder.layers.0.mlp.router.weight"), 4, 2));
    ckpt_buf_dispose(&b);
    close_fixture(&o);
}

/* A model given tensor by tensor (hf2mcore's: every expert under its global index) written at
 * EP 2: EP rank r's file holds experts 2r, 2r + 1 as its local 0, 1, each layer's experts in
 * it, the router on every rank; args say the EP. */
CKPT_TEST(test_experts_built_model_at_ep2)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_arena *a = NULL;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_value *args = NULL;
    const ckpt_node *w;
    const ckpt_plan_file *f;
    int64_t fc1[2] = { 16, 8 }, fc2[2] = { 8, 8 }, router[2] = { 4, 8 };
    char name[128];
    int g, rc;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_megatron_args_new(a, &args));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_layers", 1));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "hidden_size", 8));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_experts", 4));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "swiglu", 1));
    ASSERT_OK(ckpt_megatron_new(&m, ckpt_plan_graph(plan), args, 1, NULL));
    ASSERT_OK(ckpt_node_full(ckpt_plan_graph(plan), CKPT_DTYPE_F32, 2, router, 1.0, &w));
    ASSERT_OK(ckpt_megatron_add_tensor(m, "decoder.layers.0.mlp.router.weight", w));
    for (g = 3; g >= 0; g--) {
        ASSERT_OK(ckpt_node_full(ckpt_plan_graph(plan), CKPT_DTYPE_F32, 2, fc1, g, &w));
        snprintf(name, sizeof name, "decoder.layers.0.mlp.experts.local_experts.%d.linear_fc1.weight", g);
        ASSERT_OK(ckpt_megatron_add_tensor(m, name, w));
        ASSERT_OK(ckpt_node_full(ckpt_plan_graph(plan), CKPT_DTYPE_F32, 2, fc2, g, &w));
        snprintf(name, sizeof name, "decoder.layers.0.mlp.experts.local_experts.%d.linear_fc2.weight", g);
        ASSERT_OK(ckpt_megatron_add_tensor(m, name, w));
    }
    t.ep = 2;
    rc = ckpt_megatron_plan(m, &t, plan);
    ASSERT_OK(rc);
    ASSERT_EQ_INT((int)ckpt_plan_file_count(plan), 3);
    f = ckpt_plan_file_at(plan, 1);
    ASSERT_EQ_STR(f->rel, "iter_0000001/mp_rank_00_001/model_optim_rng.pt");
    ASSERT_EQ_INT((int)f->n_tensors, 5);
    ASSERT_EQ_STR(ckpt_plan_tensor_at(plan, 1, 0, NULL, NULL), "model/decoder.layers.0.mlp.router.weight");
    ASSERT_EQ_STR(ckpt_plan_tensor_at(plan, 1, 1, &w, NULL),
                  "model/decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight");
    {
        float v = -1;
        ASSERT_OK(ckpt_node_read(w, 0, 1, CKPT_DTYPE_F32, &v));
        ASSERT_TRUE(v == 2.0f); /* global expert 2 */
    }
    ASSERT_EQ_STR(ckpt_plan_tensor_at(plan, 1, 4, NULL, NULL),
                  "model/decoder.layers.0.mlp.experts.local_experts.1.linear_fc2.weight");
    ASSERT_EQ_INT((int)ckpt_megatron__arg_int(args, "expert_model_parallel_size", 1), 1);
    /* num_experts that EP does not divide */
    t.ep = 3;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_check_layout(args, &t));
    ASSERT_ERROR_MENTIONS("num_experts % EP != 0");
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
    ckpt_arena_free(a);
}

/* The node of plan tensor `name` of file f. */
static const ckpt_node *plan_tensor(const ckpt_plan *p, size_t f, const char *name)
{
    const ckpt_node *n;
    const char *at;
    size_t i;

    for (i = 0; (at = ckpt_plan_tensor_at(p, f, i, &n, NULL)) != NULL; i++)
        if (strcmp(at, name) == 0)
            return n;
    return NULL;
}

/* megatron-core's GroupedMLP: weight1.view(local, hidden, -1)[i] is local expert i's
 * linear_fc1.weight transposed, weight2.view(local, -1, hidden)[i] its linear_fc2.weight's;
 * the fixture at EP 1 (4 local experts, hidden 8, fc1 [32, 8], fc2 [8, 16]). */
CKPT_TEST(test_experts_grouped_mlp_weights)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    static float w1[8 * 128], w2[64 * 8], fc1[32 * 8], fc2[8 * 16];
    const ckpt_node *n1, *n2;
    char name[128];
    int i, r, k;
    opened o;

    ASSERT_OK(open_fixture(&o, "distopt/m_tp1pp1dp2_ep2/legacy"));
    t.ep = 1;
    t.optimizer = CKPT_MEGATRON_OPTIM_DROP;
    t.moe_grouped_gemm = 1;
    ASSERT_OK(ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_TRUE((n1 = plan_tensor(o.plan, 0, "model/decoder.layers.1.mlp.experts.weight1")) != NULL);
    ASSERT_TRUE((n2 = plan_tensor(o.plan, 0, "model/decoder.layers.1.mlp.experts.weight2")) != NULL);
    ASSERT_EQ_INT((int)ckpt_node_shape(n1)[0], 8);
    ASSERT_EQ_INT((int)ckpt_node_shape(n1)[1], 128);
    ASSERT_EQ_INT((int)ckpt_node_shape(n2)[0], 64);
    ASSERT_OK(ckpt_node_read(n1, 0, 8 * 128, CKPT_DTYPE_F32, w1));
    ASSERT_OK(ckpt_node_read(n2, 0, 64 * 8, CKPT_DTYPE_F32, w2));
    ASSERT_TRUE(plan_tensor(o.plan, 0, "model/decoder.layers.1.mlp.experts.local_experts.0.linear_fc1.weight") == NULL);
    for (i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "decoder.layers.1.mlp.experts.local_experts.%d.linear_fc1.weight", i);
        ASSERT_OK(ckpt_node_read(entry_named(o.m, name)->full, 0, 32 * 8, CKPT_DTYPE_F32, fc1));
        snprintf(name, sizeof name, "decoder.layers.1.mlp.experts.local_experts.%d.linear_fc2.weight", i);
        ASSERT_OK(ckpt_node_read(entry_named(o.m, name)->full, 0, 8 * 16, CKPT_DTYPE_F32, fc2));
        for (r = 0; r < 32; r++)
            for (k = 0; k < 8; k++)
                ASSERT_TRUE(w1[i * 8 * 32 + k * 32 + r] == fc1[r * 8 + k]);
        for (r = 0; r < 8; r++)
            for (k = 0; k < 16; k++)
                ASSERT_TRUE(w2[i * 16 * 8 + k * 8 + r] == fc2[r * 16 + k]);
    }
    close_fixture(&o);
}

/* Which legacy files a target at an expert TP below the TP has (megatron-core's expert
 * data-parallel rank 0 of each (expert TP, EP) rank writes one, named by its dense TP rank):
 * TP 2, EP 4, expert TP 1 writes mp_rank_00_000, 01_001, 00_002, 01_003, the last two by dense
 * data-parallel rank 1 (no dense optimizer state). */
CKPT_TEST(test_experts_saving_ranks)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    int etp = -1, dense = -1;

    t.tp = 2;
    t.etp = 1;
    ASSERT_TRUE(ckpt_megatron__saving_rank(&t, 0, 0, &etp, &dense));
    ASSERT_EQ_INT(etp, 0);
    ASSERT_EQ_INT(dense, 0);
    ASSERT_TRUE(!ckpt_megatron__saving_rank(&t, 1, 0, &etp, &dense));
    ASSERT_TRUE(ckpt_megatron__saving_rank(&t, 1, 1, &etp, &dense));
    ASSERT_EQ_INT(dense, 0);
    ASSERT_TRUE(!ckpt_megatron__saving_rank(&t, 0, 1, &etp, &dense));
    ASSERT_TRUE(ckpt_megatron__saving_rank(&t, 0, 2, &etp, &dense));
    ASSERT_EQ_INT(dense, 1);
    ASSERT_TRUE(ckpt_megatron__saving_rank(&t, 1, 3, &etp, &dense));
    ASSERT_EQ_INT(dense, 1);
    /* expert TP = TP: every (tp, ep), the file of dense data-parallel rank ep */
    t.etp = 0;
    ASSERT_TRUE(ckpt_megatron__saving_rank(&t, 1, 2, &etp, &dense));
    ASSERT_EQ_INT(etp, 1);
    ASSERT_EQ_INT(dense, 2);
    ASSERT_EQ_INT(ckpt_megatron__etp(&t), 2);
}

/* The fixture's tensors given one by one (as hf2mcore gives a model) with the local spec's
 * _extra_state keys, written at its layout: each EP rank file holds the keys megatron-core's
 * file holds, in its order, None values included (a MoE layer has its experts' _extra_state
 * and no dense MLP's). */
CKPT_TEST(test_experts_built_model_extra_states)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    const ckpt_node *full;
    const char *name;
    size_t i;
    int ep;
    opened o, back;

    ASSERT_OK(open_fixture(&o, "distopt/m_tp1pp1dp2_ep2/legacy"));
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_megatron_new(&m, ckpt_plan_graph(plan), ckpt_megatron_args(o.m), 3, NULL));
    for (i = 0; (name = ckpt_megatron_tensor_at(o.m, i, &full, NULL)) != NULL; i++)
        ASSERT_OK(ckpt_megatron_add_tensor(m, name, full));
    ASSERT_OK(ckpt_megatron_add_extra_states(m, 0));
    t.ep = 2;
    t.optimizer = CKPT_MEGATRON_OPTIM_DROP;
    ASSERT_OK(ckpt_megatron_plan(m, &t, plan));
    ASSERT_OK(ckpt_plan_execute(plan, "built_extra_states", &po, NULL));
    ASSERT_OK(open_path(&back, "built_extra_states"));
    for (ep = 0; ep < 2; ep++) {
        const ckpt_value *want = ckpt_value_dict_get(mg_rank_at(o.m, 0, 0, ep)->root, "model");
        const ckpt_value *built = ckpt_value_dict_get(mg_rank_at(back.m, 0, 0, ep)->root, "model");
        ASSERT_TRUE(want && built);
        ASSERT_EQ_INT((int)built->u.dict.map.n, (int)want->u.dict.map.n);
        for (i = 0; i < want->u.dict.map.n; i++) {
            ASSERT_EQ_STR(built->u.dict.map.keys[i]->u.str.ptr, want->u.dict.map.keys[i]->u.str.ptr);
            ASSERT_EQ_INT(built->u.dict.map.vals[i]->kind, want->u.dict.map.vals[i]->kind);
        }
    }
    close_fixture(&back);
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
    close_fixture(&o);
}

/* Whether nodes a and b hold the same float32 values. */
static int same_values(const ckpt_node *a, const ckpt_node *b)
{
    static float x[4096], y[4096];
    int64_t n = ckpt_node_numel(a);

    if (n != ckpt_node_numel(b) || n > 4096 || ckpt_node_read(a, 0, n, CKPT_DTYPE_F32, x) < 0 ||
        ckpt_node_read(b, 0, n, CKPT_DTYPE_F32, y) < 0)
        return 0;
    return memcmp(x, y, (size_t)n * sizeof *x) == 0;
}

/* A set at expert TP 1 under TP 2 read back (megatron_experts.c stand-ins): TP 2 EP 4 has the
 * files of ranks 0-3 only, mp_rank_00_000, 01_001, 00_002, 01_003; the others stand in by
 * their dense TP rank's file (dense data-parallel rank 0: EP rank tp / ETP), each expert TP
 * rank's experts come from the one file holding them, and the model with its distributed
 * optimizer state is the source's, value for value. */
CKPT_TEST(test_experts_expert_tp_set_read)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    size_t i;
    int k;
    opened o, back;

    ASSERT_OK(open_fixture(&o, "distopt/m_tp1pp1dp2_ep2/legacy"));
    t.tp = 2;
    t.ep = 4;
    t.etp = 1;
    t.dp = 2;
    ASSERT_OK(ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_OK(ckpt_plan_execute(o.plan, "etp_set", &po, NULL));
    ASSERT_OK(open_path(&back, "etp_set"));
    ASSERT_EQ_INT(back.m->info.tp, 2);
    ASSERT_EQ_INT(back.m->info.ep, 4);
    ASSERT_EQ_INT(back.m->etp, 1);
    ASSERT_TRUE(!mg_rank_at(back.m, 1, 0, 1)->stand_in && !mg_rank_at(back.m, 0, 0, 2)->stand_in);
    ASSERT_TRUE(mg_rank_at(back.m, 1, 0, 0)->stand_in && mg_rank_at(back.m, 0, 0, 3)->stand_in);
    ASSERT_TRUE(mg_rank_at(back.m, 1, 0, 0)->ck == mg_rank_at(back.m, 1, 0, 1)->ck);
    ASSERT_TRUE(mg_rank_at(back.m, 0, 0, 3)->ck == mg_rank_at(back.m, 0, 0, 0)->ck);
    ASSERT_EQ_INT(mg_expert_tp(back.m, 0, 3), 1);
    ASSERT_EQ_INT(mg_dense_ep(back.m, 1), 1);
    ASSERT_EQ_INT(mg_dense_dp(back.m, 0, 2), 1);
    ASSERT_EQ_INT(mg_dense_dp(back.m, 1, 1), 0);
    ASSERT_TRUE(back.m->moments);
    for (i = 0; i < o.m->n_entries; i++) {
        const mg_entry *e = &o.m->entries[i], *f = entry_named(back.m, e->name);
        ASSERT_TRUE(f != NULL);
        if (!e->full)
            continue;
        ASSERT_TRUE(same_values(e->full, f->full));
        for (k = 0; e->param && k < MG_N_MOMENTS; k++)
            ASSERT_TRUE(same_values(e->moment[k], f->moment[k]));
    }
    close_fixture(&back);
    close_fixture(&o);
}
