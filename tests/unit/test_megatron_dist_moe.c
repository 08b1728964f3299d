/* Mixture-of-experts models in torch_dist checkpoints (formats/megatron/megatron_dist_moe.c):
 * megatron-core 0.16.1's dp_reshardable save of testdata/megatron/distopt/m_tp1pp1dp2_ep2
 * (EP 2, 4 experts, the chained optimizer) read at its EP, each expert a view of the item at
 * its global index; the chained optimizer's items, group indices and prefixes. The whole
 * reshard, against megatron-core's own saves, runs in tests/cli/dcp/optim_moe.sh. */
#include "../../formats/megatron/optimizer/megatron_dist_optim.h"
#include "megatron_fixture.h"

#include <stdlib.h>

static const mg_entry *entry(const ckpt_megatron *m, const char *name, int ep)
{
    size_t i;

    for (i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0 && m->entries[i].ep == ep)
            return &m->entries[i];
    return NULL;
}

/* Whether x holds [layer, expert] of item `item`. */
static int same_as_expert(const ckpt_megatron *m, const ckpt_node *x, const char *item, int64_t layer, int64_t expert)
{
    const ckpt_tensor *t = ckpt_tensor_find(m->dist_ck, item);
    const ckpt_node *all;
    int64_t n = ckpt_node_numel(x);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    int same = t && a && b && ckpt_node_tensor(m->g, t, &all) == 0 &&
               ckpt_node_read(x, 0, n, CKPT_DTYPE_F32, a) == 0 &&
               ckpt_node_read(all, (layer * t->shape[1] + expert) * n, n, CKPT_DTYPE_F32, b) == 0 &&
               memcmp(a, b, (size_t)n * sizeof *a) == 0;

    free(a);
    free(b);
    return same;
}

CKPT_TEST(test_dist_moe_experts_per_ep_rank)
{
    const mg_entry *e;
    ckpt_buf key = CKPT_BUF_INIT;
    int64_t global = -1;
    size_t i, experts = 0, params = 0;
    opened o;

    ASSERT_OK(open_fixture(&o, "distopt/m_tp1pp1dp2_ep2/dp_reshardable"));
    ASSERT_EQ_INT(o.m->info.ep, 2);
    ASSERT_TRUE(o.m->moments);
    ASSERT_EQ_INT(o.m->dist_form, MG_DIST_DP);
    ASSERT_TRUE(o.m->dist_chained);
    /* [dense, expert] param groups from the two saved optimizer objects */
    ASSERT_TRUE(o.m->dist_optim_sd && o.m->dist_optim_sd->kind == CKPT_VAL_LIST);
    ASSERT_EQ_INT((int)o.m->dist_optim_sd->u.seq.n, 2);
    for (i = 0; i < o.m->n_entries; i++) {
        e = &o.m->entries[i];
        if (!e->param || !e->full)
            continue;
        params++;
        experts += e->layout.expert;
        ASSERT_TRUE(e->moment[MG_MASTER] && e->moment[MG_EXP_AVG] && e->moment[MG_EXP_AVG_SQ]);
        ASSERT_TRUE(e->layout.expert ? e->ep >= 0 : e->ep < 0);
    }
    /* 2 layers x 4 experts x (fc1, fc2), and 13 dense parameters */
    ASSERT_EQ_INT((int)experts, 16);
    ASSERT_EQ_INT((int)params, 29);
    /* EP rank 1's local expert 1 of layer 1 is global expert 3, and named so */
    ASSERT_TRUE((e = entry(o.m, "decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight", 1)) != NULL);
    ASSERT_EQ_INT((int)e->expert, 3);
    ASSERT_TRUE(same_as_expert(o.m, e->full, "decoder.layers.mlp.experts.experts.linear_fc2.weight", 1, 3));
    ASSERT_EQ_INT(ckpt_megatron__dist_expert_key(o.m, e, &key, &global), 1);
    ASSERT_EQ_STR((const char *)key.data, "decoder.layers.mlp.experts.experts.linear_fc2.weight");
    ASSERT_EQ_INT((int)global, 3);
    ASSERT_TRUE((e = entry(o.m, "decoder.layers.0.mlp.router.weight", -1)) != NULL);
    ASSERT_EQ_INT(ckpt_megatron__dist_expert_key(o.m, e, &key, &global), 0);
    ckpt_buf_dispose(&key);
    close_fixture(&o);
}

CKPT_TEST(test_dist_moe_chained_keys)
{
    /* dense: rank in TP x PP; expert: in expert TP x EP x PP */
    ASSERT_EQ_INT((int)ckpt_megatron__dist_group(2, 4, 1, 3, 1, 0), 3);
    ASSERT_EQ_INT((int)ckpt_megatron__dist_group(2, 4, 1, 3, 1, 1), 1 + 2 * 3 + 2 * 4 * 1);
    ASSERT_EQ_INT((int)ckpt_megatron__dist_group(1, 2, 0, 1, 0, 1), 1);
    ASSERT_EQ_STR(ckpt_megatron__chained_prefix(0, 1), "");
    ASSERT_EQ_STR(ckpt_megatron__chained_prefix(1, 0), "chained_0.");
    ASSERT_EQ_STR(ckpt_megatron__chained_prefix(1, 1), "chained_1.");
    ASSERT_TRUE(ckpt_megatron__dist_is_expert("decoder.layers.mlp.experts.experts.linear_fc1.weight"));
    ASSERT_TRUE(!ckpt_megatron__dist_is_expert("decoder.layers.mlp.router.weight"));
    /* dp_reshardable is always prefixed; fully_reshardable unless the save avoids it */
    ASSERT_TRUE(ckpt_megatron__dist_chained_prefix(NULL, MG_DIST_DP));
    ASSERT_TRUE(ckpt_megatron__dist_chained_prefix(NULL, MG_DIST_FULLY));
}

CKPT_TEST(test_dist_moe_fully_prefix_by_content_metadata)
{
    ckpt_arena *a = NULL;
    ckpt_value *root, *md;

    ASSERT_OK(ckpt_arena_new(&a));
    root = ckpt_value_new(a, CKPT_VAL_DICT);
    md = ckpt_value_new(a, CKPT_VAL_DICT);
    ASSERT_TRUE(root && md);
    ASSERT_OK(ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "content_metadata", 16), md));
    ASSERT_TRUE(ckpt_megatron__dist_chained_prefix(root, MG_DIST_FULLY));
    ASSERT_OK(ckpt_value_dict_set(a, md, ckpt_value_new_str(a, "chained_optim_avoid_prefix", 26),
                                  ckpt_value_new_bool(a, 1)));
    ASSERT_TRUE(!ckpt_megatron__dist_chained_prefix(root, MG_DIST_FULLY));
    ASSERT_TRUE(ckpt_megatron__dist_chained_prefix(root, MG_DIST_DP));
    /* the non-distributed optimizer's items have no sharding type: the flag alone decides */
    ASSERT_TRUE(!ckpt_megatron__dist_chained_prefix(root, MG_DIST_PLAIN));
    ckpt_arena_free(a);
}

CKPT_TEST(test_dist_moe_zero_gather_scatter_refused)
{
    /* common.pt's optimizer {0: dense, 1: expert}, both dp_zero_gather_scatter: the expert
       buffers' per-rank legacy state is not read, and that is said before any item is looked at */
    ckpt_arena *a = NULL;
    ckpt_value *root, *opt, *inner;
    opened o;
    int64_t i;

    ASSERT_OK(open_fixture(&o, "distopt/m_tp1pp1dp2_ep2/dp_reshardable"));
    ASSERT_OK(ckpt_arena_new(&a));
    root = ckpt_value_new(a, CKPT_VAL_DICT);
    opt = ckpt_value_new(a, CKPT_VAL_DICT);
    ASSERT_TRUE(root && opt);
    ASSERT_OK(ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "optimizer", 9), opt));
    for (i = 0; i < 2; i++) {
        ASSERT_TRUE((inner = ckpt_value_new(a, CKPT_VAL_DICT)) != NULL);
        ASSERT_OK(ckpt_value_dict_set(a, inner, ckpt_value_new_str(a, "param_state_sharding_type", 25),
                                      ckpt_value_new_str(a, "dp_zero_gather_scatter", 22)));
        ASSERT_OK(ckpt_value_dict_set(a, opt, ckpt_value_new_int(a, i), inner));
    }
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_megatron__read_dist_optim(o.m, NULL, root, 0));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("chained optimizer saved as dp_zero_gather_scatter");
    ckpt_arena_free(a);
    close_fixture(&o);
}
