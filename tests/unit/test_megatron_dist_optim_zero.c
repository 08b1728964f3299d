/* megatron-core 0.13.1's torch_dist optimizer form dp_zero_gather_scatter
 * (formats/megatron/optimizer/megatron_dist_optim_zero.c): each model-parallel rank's legacy distrib_optim.pt
 * state as a saved object, read in place. testdata/megatron/distopt/core013_a_tp2pp1dp2_buckets
 * holds it beside the legacy save of the same state; every parameter's master and moments read
 * from one equal those read from the other, and a state that does not fit its layout is
 * refused naming the data file and the item. */
#include "../../formats/megatron/optimizer/megatron_dist_optim.h"
#include "megatron_fixture.h"

#include <stdlib.h>

#define FIXTURE "distopt/core013_a_tp2pp1dp2_buckets/"

static int same_nodes(const ckpt_node *x, const ckpt_node *y)
{
    int64_t n = ckpt_node_numel(x);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    int same = a && b && n == ckpt_node_numel(y) && ckpt_node_read(x, 0, n, CKPT_DTYPE_F32, a) == 0 &&
               ckpt_node_read(y, 0, n, CKPT_DTYPE_F32, b) == 0 && memcmp(a, b, (size_t)n * sizeof *a) == 0;

    free(a);
    free(b);
    return same;
}

CKPT_TEST(test_dist_optim_zero_equals_legacy)
{
    opened z, l;
    size_t i, params = 0;
    int k;

    ASSERT_OK(open_fixture(&z, FIXTURE "dp_zero_gather_scatter"));
    ASSERT_OK(open_fixture(&l, FIXTURE "legacy"));
    ASSERT_TRUE(z.m->moments && l.m->moments);
    /* read as dp_reshardable: its param groups are the same saved object */
    ASSERT_EQ_INT(z.m->dist_form, MG_DIST_DP);
    ASSERT_TRUE(z.m->dist_optim_sd != NULL);
    ASSERT_TRUE(ckpt_megatron_info_of(z.m)->distributed_optimizer && ckpt_megatron_info_of(z.m)->has_optimizer);
    for (i = 0; i < l.m->n_entries; i++) {
        const mg_entry *b = &l.m->entries[i], *a;
        if (!b->param || !b->full)
            continue;
        a = entry_named(z.m, b->name);
        ASSERT_TRUE(a != NULL);
        for (k = 0; k < MG_N_MOMENTS; k++)
            if (!same_nodes(a->moment[k], b->moment[k]))
                ckpt_test_fail(__FILE__, __LINE__, "%s: moment %d differs from the legacy save's", b->name, k);
        params++;
    }
    ASSERT_EQ_INT(params, 15);
    close_fixture(&z);
    close_fixture(&l);
}

CKPT_TEST(test_dist_optim_zero_checks_the_layout)
{
    const ckpt_tensor *flat[2 * MG_N_MOMENTS];
    const ckpt_ckpt *ck;
    mg_dist_sizes zs;
    mg_dist_stage s;
    opened z;

    ASSERT_OK(open_fixture(&z, FIXTURE "dp_zero_gather_scatter"));
    ck = z.m->dist_ck;
    memset(&zs, 0, sizeof zs);
    zs.tp = 2;
    zs.pp = 1;
    zs.vpp = 1;
    ASSERT_OK(ckpt_megatron__dist_stage(z.m, z.m->args, &zs, 0, &s));
    ASSERT_EQ_INT(s.l.n_buffers, 1);
    memset(flat, 0, sizeof flat);
    ASSERT_OK(ckpt_megatron__dist_zero_flat(z.m, ck, z.m->dist_root, 0, &s.l, flat));
    ASSERT_TRUE(flat[0] && flat[1] && flat[2] && ckpt_tensor_numel(flat[MG_EXP_AVG]) == 1344);
    /* the layout of another DP puts another numel_unpadded in the buffer */
    s.l.buffers[0].numel_unpadded++;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_megatron__dist_zero_flat(z.m, ck, z.m->dist_root, 0, &s.l, flat));
    ASSERT_ERROR_MENTIONS("__0_1.distcp, item 'optimizer.distributed.dp_group_idx_0.param_state/shard_0_1': "
                          "grad buffer 0: numel_unpadded 1344");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    /* a rank the checkpoint has no state for */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_megatron__dist_zero_flat(z.m, ck, z.m->dist_root, 2, &s.l, flat));
    ASSERT_ERROR_MENTIONS("no 'optimizer.distributed.dp_group_idx_2.param_state/shard_0_1'");
    ckpt_megatron__dist_stage_free(&s);
    close_fixture(&z);
}
