/* The optimizer state of torch_dist checkpoints (formats/megatron_dist_optim*.c): the
 * non-distributed optimizer of testdata/megatron/distopt/a_tp2pp1dp1_plain (megatron-core 0.16) read per
 * parameter and layer, the target form chosen from the target, the dp_reshardable keys, the
 * grad buffer layout of a stage, and common.pt's optimizer of a legacy plain source. Round
 * trips through every form run in tests/cli/dcp. */
#include "../../formats/megatron/optimizer/megatron_dist_optim.h"
#include "megatron_fixture.h"

#include <stdlib.h>

/* Whether node x holds the elements of stacked tensor `stacked` of checkpoint ck at layer l. */
static int same_as_layer(const ckpt_megatron *m, const ckpt_node *x, const char *stacked, int64_t l)
{
    const ckpt_tensor *t = ckpt_tensor_find(m->dist_ck, stacked);
    const ckpt_node *all;
    int64_t n = ckpt_node_numel(x);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    int same = t && a && b && ckpt_node_tensor(m->g, t, &all) == 0 &&
               ckpt_node_read(x, 0, n, CKPT_DTYPE_F32, a) == 0 &&
               ckpt_node_read(all, l * n, n, CKPT_DTYPE_F32, b) == 0 && memcmp(a, b, (size_t)n * sizeof *a) == 0;

    free(a);
    free(b);
    return same;
}

CKPT_TEST(test_dist_optim_plain_read_per_layer)
{
    const mg_entry *e;
    size_t i, params = 0;
    opened o;

    ASSERT_OK(open_fixture(&o, "distopt/a_tp2pp1dp1_plain/torch_dist"));
    ASSERT_TRUE(o.m->moments);
    ASSERT_EQ_INT(o.m->dist_form, MG_DIST_PLAIN);
    ASSERT_TRUE(!o.m->info.distributed_optimizer);
    for (i = 0; i < o.m->n_entries; i++) {
        e = &o.m->entries[i];
        if (!e->param || !e->full)
            continue;
        params++;
        /* an fp32 model: the weight is its own master copy */
        ASSERT_TRUE(e->moment[MG_MASTER] == e->full);
        ASSERT_TRUE(e->moment[MG_EXP_AVG] && e->moment[MG_EXP_AVG_SQ]);
        ASSERT_EQ_INT(ckpt_node_ndim(e->moment[MG_EXP_AVG]), ckpt_node_ndim(e->full));
        ASSERT_TRUE(memcmp(ckpt_node_shape(e->moment[MG_EXP_AVG_SQ]), ckpt_node_shape(e->full),
                           (size_t)ckpt_node_ndim(e->full) * sizeof(int64_t)) == 0);
        ASSERT_EQ_INT(ckpt_node_dtype(e->moment[MG_EXP_AVG]), CKPT_DTYPE_F32);
    }
    ASSERT_EQ_INT((int)params, 15);
    /* layer 1's moments are layer 1 of the stacked keys, local norms under TE's names */
    ASSERT_TRUE((e = entry_named(o.m, "decoder.layers.1.self_attention.linear_proj.weight")) != NULL);
    ASSERT_TRUE(same_as_layer(o.m, e->moment[MG_EXP_AVG],
                              "optimizer.state.exp_avg.decoder.layers.self_attention.linear_proj.weight", 1));
    ASSERT_TRUE((e = entry_named(o.m, "decoder.layers.1.input_layernorm.weight")) != NULL);
    ASSERT_TRUE(same_as_layer(o.m, e->moment[MG_EXP_AVG_SQ],
                              "optimizer.state.exp_avg_sq.decoder.layers.self_attention.linear_qkv.layer_norm_weight",
                              1));
    close_fixture(&o);
}

CKPT_TEST(test_dist_optim_target_form)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    int form = -1;
    opened o;

    ASSERT_OK(open_fixture(&o, "distopt/a_tp2pp1dp1_plain/torch_dist"));
    ASSERT_OK(ckpt_megatron__dist_target_form(o.m, &t, &form));
    ASSERT_EQ_INT(form, MG_DIST_PLAIN);
    /* a form of the distributed optimizer's state asks for the distributed optimizer */
    t.sharding = CKPT_MEGATRON_SHARDING_FULLY_RESHARDABLE;
    ASSERT_OK(ckpt_megatron__dist_target_form(o.m, &t, &form));
    ASSERT_EQ_INT(form, MG_DIST_FULLY);
    /* Megatron's default form */
    t.sharding = CKPT_MEGATRON_SHARDING_AUTO;
    t.optimizer = CKPT_MEGATRON_OPTIM_DISTRIBUTED;
    ASSERT_OK(ckpt_megatron__dist_target_form(o.m, &t, &form));
    ASSERT_EQ_INT(form, MG_DIST_DP);
    t.optimizer = CKPT_MEGATRON_OPTIM_DROP;
    ASSERT_OK(ckpt_megatron__dist_target_form(o.m, &t, &form));
    ASSERT_EQ_INT(form, MG_DIST_NONE);
    close_fixture(&o);

    /* a legacy source's non-distributed optimizer: its state read per parameter, kept plain */
    ASSERT_OK(open_fixture(&o, "distopt/a_tp2pp1dp1_plain/legacy"));
    t.optimizer = CKPT_MEGATRON_OPTIM_KEEP;
    ASSERT_OK(ckpt_megatron__dist_target_form(o.m, &t, &form));
    ASSERT_EQ_INT(form, MG_DIST_PLAIN);
    ASSERT_TRUE(o.m->moments);
    t.optimizer = CKPT_MEGATRON_OPTIM_DISTRIBUTED;
    ASSERT_OK(ckpt_megatron__dist_target_form(o.m, &t, &form));
    ASSERT_EQ_INT(form, MG_DIST_DP);
    t.optimizer = CKPT_MEGATRON_OPTIM_KEEP;
    t.sharding = CKPT_MEGATRON_SHARDING_FULLY_RESHARDABLE;
    ASSERT_OK(ckpt_megatron__dist_target_form(o.m, &t, &form));
    ASSERT_EQ_INT(form, MG_DIST_FULLY);
    close_fixture(&o);
}

/* common.pt's optimizer from a legacy plain source: the state dict without per-parameter
 * state ({'state': {'common_step'}, 'param_groups'} without 'params'), unwrapped from the fp16
 * wrapper's masters. */
static void check_plain_common(const char *fixture, int wrapped)
{
    const ckpt_value *sd, *groups, *state, *step;
    ckpt_value *out;
    size_t file, g;
    opened o;

    ASSERT_OK(open_fixture(&o, fixture));
    ASSERT_OK(ckpt_plan_add_file(o.plan, "common.pt", "torch", &file));
    ASSERT_OK(ckpt_megatron__dist_plain_common_legacy(o.m, o.plan, file, &out));
    ASSERT_TRUE(out->kind == CKPT_VAL_DICT);
    ASSERT_TRUE(!ckpt_value_dict_get(out, "fp32_from_fp16_params"));
    sd = wrapped ? ckpt_value_dict_get(out, "optimizer") : out;
    ASSERT_TRUE(sd && sd->kind == CKPT_VAL_DICT && sd->u.dict.map.n == 2);
    ASSERT_TRUE(ckpt_value_is_str(sd->u.dict.map.keys[0], "state"));
    state = ckpt_value_dict_get(sd, "state");
    step = ckpt_value_dict_get(state, "common_step");
    ASSERT_TRUE(state->u.dict.map.n == 1 && step && step->kind == CKPT_VAL_TENSOR);
    groups = ckpt_value_dict_get(sd, "param_groups");
    ASSERT_EQ_INT((int)groups->u.seq.n, 2);
    for (g = 0; g < groups->u.seq.n; g++) {
        ASSERT_TRUE(!ckpt_value_dict_get(groups->u.seq.items[g], "params"));
        ASSERT_TRUE(ckpt_value_dict_get(groups->u.seq.items[g], "weight_decay") != NULL);
    }
    close_fixture(&o);
}

CKPT_TEST(test_dist_optim_plain_common_legacy)
{
    check_plain_common("distopt/a_tp2pp1dp1_plain/legacy", 0);
    check_plain_common("tp2pp2_bf16_optim", 1);
}

CKPT_TEST(test_dist_optim_bucket_key)
{
    mg_dopt_buffer b;
    ckpt_buf key = CKPT_BUF_INIT;

    memset(&b, 0, sizeof b);
    b.gbuf = 1;
    b.param_dtype = CKPT_DTYPE_BF16;
    b.grad_dtype = CKPT_DTYPE_F32;
    ASSERT_OK(ckpt_megatron__dist_bucket_key(3, &b, 2, "exp_avg", &key));
    ASSERT_EQ_STR((const char *)key.data,
                  "optimizer.distributed.dp_group_idx_3.gbuf_idx_1.dtype_(torch.bfloat16, torch.float32)."
                  "bucket_idx_2.exp_avg");
    b.param_dtype = CKPT_DTYPE_I64;
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_megatron__dist_bucket_key(0, &b, 0, "param", &key));
    ckpt_buf_dispose(&key);
}

/* distopt/a_tp2pp1dp1_plain at TP2, PP2, DP2 (one bucket per buffer: no overlap_grad_reduce in its
 * args): each stage's parameters are those of its layers, each range a shard's size, the
 * flat offsets the padded ones. */
CKPT_TEST(test_dist_optim_stage_layout)
{
    mg_dist_sizes z = { 2, 2, 1, 2, 0, 0 };
    mg_dist_stage s;
    int64_t total[2] = { 0, 0 }, want = 0;
    size_t i;
    int pp;
    opened o;

    ASSERT_OK(open_fixture(&o, "distopt/a_tp2pp1dp1_plain/torch_dist"));
    for (i = 0; i < o.m->n_entries; i++)
        if (o.m->entries[i].param && o.m->entries[i].full)
            want += ckpt_node_numel(o.m->entries[i].full) /
                    (o.m->entries[i].layout.tp == CKPT_TP_REPLICATED ? 1 : 2);
    for (pp = 0; pp < 2; pp++) {
        ASSERT_OK(ckpt_megatron__dist_stage(o.m, o.m->args, &z, pp, &s));
        ASSERT_EQ_INT((int)s.l.n_buffers, 1);
        ASSERT_EQ_INT((int)s.l.buffers[0].n_buckets, 1);
        ASSERT_EQ_INT(s.l.buckets[0].end % 128, 0);
        for (i = 0; i < s.n; i++) {
            ASSERT_EQ_INT(s.l.ranges[i].end - s.l.ranges[i].start, s.params[i].numel);
            ASSERT_EQ_INT(s.l.ranges[i].start % 64, 0);
            ASSERT_EQ_INT(s.l.ranges[i].flat, s.l.ranges[i].start);
            total[pp] += s.params[i].numel;
        }
        ckpt_megatron__dist_stage_free(&s);
    }
    ASSERT_EQ_INT(total[0] + total[1], want);
    ASSERT_TRUE(total[0] > 0 && total[1] > 0);
    close_fixture(&o);
}
