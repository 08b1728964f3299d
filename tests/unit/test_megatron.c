/* Megatron checkpoints as one logical model, and plans at other layouts, on the checkpoints
 * megatron-core wrote (testdata/megatron). Values are checked by interop.test_reshard; here
 * the shapes, names, layouts and refusals. */
#include "megatron_fixture.h"

#include <stdlib.h>

static const ckpt_node *find(const ckpt_megatron *m, const char *name, ckpt_tensor_layout *l)
{
    const ckpt_node *full = NULL;
    size_t i;

    for (i = 0; i < ckpt_megatron_tensor_count(m); i++)
        if (strcmp(ckpt_megatron_tensor_at(m, i, &full, l), name) == 0)
            return full;
    return NULL;
}

CKPT_TEST(test_megatron_logical_model_of_tp2pp2)
{
    const ckpt_megatron_info *info;
    const ckpt_node *n;
    ckpt_tensor_layout l;
    opened o;

    ASSERT_OK(open_fixture(&o, "tp2pp2"));
    info = ckpt_megatron_info_of(o.m);
    ASSERT_EQ_INT(info->tp, 2);
    ASSERT_EQ_INT(info->pp, 2);
    ASSERT_EQ_INT(info->vpp, 1);
    ASSERT_EQ_INT(info->num_layers, 4);
    ASSERT_EQ_INT(info->padded_vocab_size, 256);
    ASSERT_EQ_INT(info->true_vocab_size, 201); /* NullTokenizer: 200 tokens and end-of-document */
    ASSERT_EQ_INT(info->iteration, 10);
    ASSERT_TRUE(!info->has_optimizer);
    /* stage 1's layers 0 and 1 are global layers 2 and 3, at full size */
    n = find(o.m, "decoder.layers.3.self_attention.linear_qkv.weight", &l);
    ASSERT_TRUE(n != NULL);
    ASSERT_EQ_INT(ckpt_node_shape(n)[0], (4 + 2 * 2) * 16);
    ASSERT_EQ_INT(ckpt_node_shape(n)[1], 64);
    ASSERT_EQ_INT(l.tp, CKPT_TP_COLUMN);
    ASSERT_EQ_INT(l.layer, 3);
    n = find(o.m, "decoder.layers.2.mlp.linear_fc1.weight", &l);
    ASSERT_TRUE(n && ckpt_node_shape(n)[0] == 192 && l.tp == CKPT_TP_SWIGLU);
    n = find(o.m, "decoder.layers.2.self_attention.linear_proj.weight", &l);
    ASSERT_TRUE(n && ckpt_node_shape(n)[1] == 64 && l.tp == CKPT_TP_ROW);
    n = find(o.m, "embedding.word_embeddings.weight", &l);
    ASSERT_TRUE(n && ckpt_node_shape(n)[0] == 256 && l.tp == CKPT_TP_VOCAB && l.stage == CKPT_STAGE_FIRST);
    n = find(o.m, "output_layer.weight", &l);
    ASSERT_TRUE(n && l.stage == CKPT_STAGE_LAST);
    ASSERT_TRUE(find(o.m, "decoder.layers.4.input_layernorm.weight", &l) == NULL);
    close_fixture(&o);
}

CKPT_TEST(test_megatron_virtual_chunks_count_layers_in_order)
{
    ckpt_tensor_layout l;
    opened o;
    size_t i;
    int64_t last = -1;

    ASSERT_OK(open_fixture(&o, "pp2_vpp2"));
    ASSERT_EQ_INT(ckpt_megatron_info_of(o.m)->vpp, 2);
    ASSERT_EQ_INT(ckpt_megatron_info_of(o.m)->num_layers, 4);
    /* Megatron's order: chunk 0 of stage 0, chunk 0 of stage 1, chunk 1 of stage 0, ... */
    for (i = 0; i < ckpt_megatron_tensor_count(o.m); i++) {
        ckpt_megatron_tensor_at(o.m, i, NULL, &l);
        if (l.layer >= 0) {
            ASSERT_TRUE(l.layer >= last);
            last = l.layer;
        }
    }
    ASSERT_EQ_INT(last, 3);
    close_fixture(&o);
}

CKPT_TEST(test_megatron_plan_files_of_a_layout)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    opened o;

    ASSERT_OK(open_fixture(&o, "tp1"));
    t.tp = 2;
    t.pp = 2;
    ASSERT_OK(ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_EQ_INT(ckpt_plan_file_count(o.plan), 5);
    ASSERT_EQ_STR(ckpt_plan_file_at(o.plan, 0)->rel, "iter_0000010/mp_rank_00_000/model_optim_rng.pt");
    ASSERT_EQ_STR(ckpt_plan_file_at(o.plan, 1)->rel, "iter_0000010/mp_rank_01_000/model_optim_rng.pt");
    ASSERT_EQ_STR(ckpt_plan_file_at(o.plan, 3)->rel, "iter_0000010/mp_rank_01_001/model_optim_rng.pt");
    ASSERT_EQ_STR(ckpt_plan_file_at(o.plan, 4)->rel, "latest_checkpointed_iteration.txt");
    ASSERT_EQ_STR(ckpt_plan_file_at(o.plan, 0)->format, "torch");
    close_fixture(&o);
}

CKPT_TEST(test_megatron_refuses_impossible_targets)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    opened o;

    ASSERT_OK(open_fixture(&o, "tp1"));
    t.pp = 3;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    t.pp = 1;
    t.vpp = 2;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    t.vpp = 1;
    t.tp = 3; /* 4 heads do not split over 3 ranks */
    ASSERT_TRUE(ckpt_megatron_plan(o.m, &t, o.plan) < 0);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    t.tp = 2;
    t.padded_vocab_size = 100; /* below the 201 true rows */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    close_fixture(&o);
}

CKPT_TEST(test_megatron_padded_vocab_rule)
{
    ASSERT_EQ_INT(ckpt_megatron_padded_vocab(200, 128, 1), 256);
    ASSERT_EQ_INT(ckpt_megatron_padded_vocab(200, 128, 4), 512);
    ASSERT_EQ_INT(ckpt_megatron_padded_vocab(50257, 128, 8), 51200);
    ASSERT_EQ_INT(ckpt_megatron_padded_vocab(32000, 128, 2), 32000);
}

/* --padded-vocab-size 2^40 started writing a 256 TiB file */
CKPT_TEST(test_megatron_padded_vocab_bounded)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    opened o;

    ASSERT_OK(open_fixture(&o, "tp1"));
    t.padded_vocab_size = 1ll << 40;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("padded vocabulary size 1099511627776 is more than twice the true vocabulary (201 rows)");
    t.padded_vocab_size = 403; /* twice the 201 true rows and one */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    t.padded_vocab_size = 200;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_ERROR_MENTIONS("smaller than the true vocabulary (201 rows)");
    t.padded_vocab_size = 402;
    ASSERT_OK(ckpt_megatron_plan(o.m, &t, o.plan));
    close_fixture(&o);
}

CKPT_TEST(test_megatron_args_built_here)
{
    ckpt_arena *a;
    ckpt_value *args;
    const ckpt_value *v;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_megatron_args_new(a, &args));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_layers", 32));
    ASSERT_OK(ckpt_megatron_args_set_dtype(a, args, "params_dtype", CKPT_DTYPE_BF16));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_layers", 16));
    v = ckpt_megatron_arg(args, "num_layers");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_INT && v->u.integer == 16);
    v = ckpt_megatron_arg(args, "params_dtype");
    ASSERT_TRUE(v && ckpt_value_is_global(v, "torch", "bfloat16"));
    v = ckpt_megatron_arg(args, "tensor_model_parallel_size");
    ASSERT_TRUE(v && v->u.integer == 1);
    ASSERT_TRUE(ckpt_value_is_global(args->u.obj.callable, "argparse", "Namespace"));
    ckpt_arena_free(a);
}

/* args of a model with these sizes, as Megatron records them */
static ckpt_value *sized_args(ckpt_arena *a, int64_t layers, int64_t heads, int64_t groups, int64_t ffn)
{
    ckpt_value *args = NULL;

    if (ckpt_megatron_args_new(a, &args) < 0 || ckpt_megatron_args_set_int(a, args, "num_layers", layers) < 0 ||
        ckpt_megatron_args_set_int(a, args, "hidden_size", 64) < 0 ||
        ckpt_megatron_args_set_int(a, args, "num_attention_heads", heads) < 0 ||
        ckpt_megatron_args_set_bool(a, args, "group_query_attention", groups != heads) < 0 ||
        /* argparse's default without --group-query-attention: not a group count */
        ckpt_megatron_args_set_int(a, args, "num_query_groups", groups != heads ? groups : 1) < 0 ||
        ckpt_megatron_args_set_int(a, args, "ffn_hidden_size", ffn) < 0)
        return NULL;
    return args;
}

static int refused_layout(const ckpt_value *args, int tp, int pp, int vpp, int64_t padded_vocab, const char *rule)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;

    t.tp = tp;
    t.pp = pp;
    t.vpp = vpp;
    t.padded_vocab_size = padded_vocab;
    return ckpt_megatron_check_layout(args, &t) == CKPT_EINVALID &&
           ckpt_error_last()->klass == CKPT_ERRCLASS_LAYOUT && strstr(ckpt_error_last()->message, rule) != NULL;
}

static int fits_layout(const ckpt_value *args, int tp, int pp, int vpp)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;

    t.tp = tp;
    t.pp = pp;
    t.vpp = vpp;
    return ckpt_megatron_check_layout(args, &t) == 0;
}

CKPT_TEST(test_megatron_check_layout_tensor_parallel_rules)
{
    ckpt_arena *a;
    ckpt_value *mha, *gqa, *odd_ffn;

    ASSERT_OK(ckpt_arena_new(&a));
    mha = sized_args(a, 4, 4, 4, 96);
    gqa = sized_args(a, 4, 12, 3, 96);
    odd_ffn = sized_args(a, 4, 16, 16, 100);
    ASSERT_TRUE(mha && gqa && odd_ffn);
    /* heads over TP, saying which rule in words */
    ASSERT_TRUE(refused_layout(mha, 8, 1, 1, 0, "TP 8: 4 attention heads cannot be split over 8 tensor-parallel "
                                                "ranks (num_attention_heads % TP != 0)"));
    ASSERT_TRUE(refused_layout(mha, 3, 1, 1, 0, "num_attention_heads % TP"));
    ASSERT_TRUE(fits_layout(mha, 4, 1, 1)); /* num_query_groups 1 without GQA is not a group count */
    /* query groups: a multiple or a divisor of TP (megatron-core replicates groups over ranks) */
    ASSERT_TRUE(fits_layout(gqa, 3, 1, 1));
    ASSERT_TRUE(fits_layout(gqa, 6, 1, 1));
    ASSERT_TRUE(refused_layout(gqa, 2, 1, 1, 0, "3 query groups are neither a multiple nor a divisor of 2"));
    ASSERT_TRUE(refused_layout(gqa, 4, 1, 1, 0, "(num_query_groups)"));
    /* the MLP's hidden size, then the padded vocabulary */
    ASSERT_TRUE(fits_layout(odd_ffn, 4, 1, 1));
    ASSERT_TRUE(refused_layout(odd_ffn, 8, 1, 1, 0, "(ffn_hidden_size % TP != 0)"));
    ASSERT_TRUE(refused_layout(mha, 4, 1, 1, 250, "a padded vocabulary of 250 rows cannot be split over 4"));
    ASSERT_TRUE(refused_layout(mha, 0, 1, 1, 0, "sizes must be at least 1"));
    ckpt_arena_free(a);
}

CKPT_TEST(test_megatron_check_layout_pipeline_rules)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_arena *a;
    ckpt_value *args, *unsized;

    ASSERT_OK(ckpt_arena_new(&a));
    args = sized_args(a, 8, 4, 4, 96);
    ASSERT_OK(ckpt_megatron_args_new(a, &unsized));
    ASSERT_TRUE(args != NULL);
    ASSERT_TRUE(fits_layout(args, 1, 4, 2));
    ASSERT_TRUE(refused_layout(args, 1, 16, 1, 0, "PP 16: 8 layers cannot fill 16 pipeline stages"));
    ASSERT_TRUE(refused_layout(args, 1, 3, 1, 0, "(num_layers % PP != 0)"));
    ASSERT_TRUE(refused_layout(args, 1, 4, 4, 0, "the 2 layers of each pipeline stage do not split evenly into 4"));
    ASSERT_TRUE(refused_layout(args, 1, 1, 2, 0, "needs at least 2 pipeline stages"));
    /* sizes args do not give are not checked */
    ASSERT_TRUE(fits_layout(unsized, 8, 3, 1));
    t.version = 99;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_check_layout(args, &t));
    ckpt_arena_free(a);
}

CKPT_TEST(test_megatron_plan_checks_the_target_layout)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    opened o;

    ASSERT_OK(open_fixture(&o, "tp2"));
    t.tp = 8; /* 4 heads: both writers refuse before planning a file */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_ERROR_MENTIONS("num_attention_heads % TP != 0");
    t.optimizer = CKPT_MEGATRON_OPTIM_DROP;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan_dist(o.m, &t, o.plan));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_EQ_INT(ckpt_plan_file_count(o.plan), 0);
    close_fixture(&o);
}

/* The caller's leave_out callback: asked with global names (stage 1's local layer 1 is
 * layer 3 under PP 2); a tensor it leaves out is not in the model, and with the optimizer
 * state kept a parameter left out is refused (the state follows the parameters in order). */
static int leave_out_norm(void *payload, const char *name)
{
    int *global = payload;

    *global |= strcmp(name, "decoder.layers.3.mlp.linear_fc2.weight") == 0;
    return strcmp(name, "decoder.final_layernorm.weight") == 0;
}

CKPT_TEST(test_megatron_leave_out)
{
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_tensor_layout l;
    opened o;
    int global = 0;

    ASSERT_OK(open_fixture(&o, "tp2pp2_bf16_optim"));
    ASSERT_TRUE(find(o.m, "decoder.final_layernorm.weight", &l) != NULL);
    ckpt_megatron_close(o.m);
    o.m = NULL;
    mo.leave_out = leave_out_norm;
    mo.leave_out_payload = &global;
    ASSERT_OK(ckpt_megatron_open(&o.m, o.set, ckpt_plan_graph(o.plan), &mo));
    ASSERT_TRUE(global);
    ASSERT_TRUE(find(o.m, "decoder.final_layernorm.weight", &l) == NULL);
    ASSERT_TRUE(find(o.m, "decoder.layers.3.mlp.linear_fc2.weight", &l) != NULL);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron_plan(o.m, &t, o.plan));
    ASSERT_ERROR_MENTIONS("1 parameter is left out");
    t.optimizer = CKPT_MEGATRON_OPTIM_DROP;
    ASSERT_OK(ckpt_megatron_plan(o.m, &t, o.plan));
    close_fixture(&o);
}
