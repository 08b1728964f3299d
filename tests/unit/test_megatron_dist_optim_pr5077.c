/* The PR #5077 save-defect check of fully_reshardable state (formats/megatron/optimizer/megatron_dist_optim_pr5077.c)
 * on megatron-core 0.16.1's defective save of testdata/megatron/distopt/t210_a_tp2pp1dp2_gaps
 * (bucket 0 end-padded, so the parameters of the later buckets are moved): refused as saved;
 * with each master set to its weight (a right save) passed, in fp32 and with bf16 weights that
 * are the masters rounded; a bf16 weight that is not its master rounded refused. */
#include "test.h"

#include "../../formats/megatron/optimizer/megatron_dist_optim.h"

typedef struct opened {
    ckpt_set *set;
    ckpt_plan *plan;
    ckpt_megatron *m;
} opened;

static int open_gaps(opened *o)
{
    int rc;

    memset(o, 0, sizeof *o);
    if ((rc = ckpt_set_open(&o->set, ckpt_test_data("megatron/distopt/t210_a_tp2pp1dp2_gaps/fully_reshardable"),
                            NULL)) < 0 ||
        (rc = ckpt_plan_new(&o->plan)) < 0)
        return rc;
    return ckpt_megatron_open(&o->m, o->set, ckpt_plan_graph(o->plan), NULL);
}

static void close_gaps(opened *o)
{
    ckpt_megatron_close(o->m);
    ckpt_plan_free(o->plan);
    ckpt_set_close(o->set);
}

static mg_entry *entry(ckpt_megatron *m, const char *name)
{
    size_t i;

    for (i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0)
            return &m->entries[i];
    return NULL;
}

static mg_dist_sizes gaps_sizes(void)
{
    mg_dist_sizes z;

    memset(&z, 0, sizeof z);
    z.tp = 2;
    z.pp = 1;
    z.vpp = 1;
    return z;
}

CKPT_TEST(test_pr5077_defective_save_refused)
{
    opened o;

    ASSERT_OK(open_gaps(&o));
    /* the model opens; what needs the state gets the reason */
    ASSERT_TRUE(!o.m->moments);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_megatron__dist_optim_unread(o.m));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("PR #5077");
    ASSERT_ERROR_MENTIONS("'embedding.word_embeddings.weight' differs from its weight (element 0)");
    ckpt_error_clear();
    close_gaps(&o);
}

CKPT_TEST(test_pr5077_right_save_passes)
{
    mg_dist_sizes z = gaps_sizes();
    mg_entry *emb, *out;
    size_t i;
    opened o;

    ASSERT_OK(open_gaps(&o));
    for (i = 0; i < o.m->n_entries; i++)
        o.m->entries[i].moment[MG_MASTER] = o.m->entries[i].param ? o.m->entries[i].full : NULL;
    ASSERT_OK(ckpt_megatron__dist_check_pr5077(o.m, &z));
    /* bf16 weights: each the fp32 master rounded to nearest even */
    for (i = 0; i < o.m->n_entries; i++) {
        mg_entry *e = &o.m->entries[i];
        if (e->param && e->full)
            ASSERT_OK(ckpt_node_cast(o.m->g, e->moment[MG_MASTER], CKPT_DTYPE_BF16, &e->full));
    }
    ASSERT_OK(ckpt_megatron__dist_check_pr5077(o.m, &z));
    /* the moved embedding's master another parameter's elements (as the defect gives) */
    ASSERT_TRUE((emb = entry(o.m, "embedding.word_embeddings.weight")) != NULL);
    ASSERT_TRUE((out = entry(o.m, "output_layer.weight")) != NULL);
    ASSERT_EQ_INT(ckpt_node_numel(emb->full), ckpt_node_numel(out->full));
    emb->moment[MG_MASTER] = out->moment[MG_MASTER];
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_megatron__dist_check_pr5077(o.m, &z));
    ASSERT_ERROR_MENTIONS("'embedding.word_embeddings.weight' differs from its weight");
    ckpt_error_clear();
    close_gaps(&o);
}
