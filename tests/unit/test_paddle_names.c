/* The variable names PaddleNLP's LLaMA gives each process's parameters (formats/paddle/paddle_names.c),
 * against the names PaddleNLP 3 wrote itself (testdata/paddlenlp/fleet3_*, one process per
 * rank) and the 2.8.1 fixtures: counters per class from 0 in every pipeline stage, the head's
 * class by version, names the source gives kept for tensors PaddleNLP's LLaMA does not have,
 * Qwen2's fused q/k/v bias, and two parameters of one process with one name refused. */
#include "test.h"

#include "../../formats/paddle/paddle_private.h"

#include <stdlib.h>
#include <string.h>

typedef struct opened {
    ckpt_set *set;
    ckpt_plan *plan;
    ckpt_paddle_model *m;
} opened;

static int open_fixture(opened *o, const char *name)
{
    char path[256];
    int rc;

    memset(o, 0, sizeof *o);
    snprintf(path, sizeof path, "paddlenlp/%s", name);
    if ((rc = ckpt_set_open(&o->set, ckpt_test_data(path), NULL)) < 0 || (rc = ckpt_plan_new(&o->plan)) < 0)
        return rc;
    return ckpt_paddle_model_open(&o->m, o->set, ckpt_plan_graph(o->plan), NULL);
}

static void close_fixture(opened *o)
{
    ckpt_paddle_model_close(o->m);
    ckpt_plan_free(o->plan);
    ckpt_set_close(o->set);
}

static void free_vars(char **vars, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(vars[i]);
    free(vars);
}

/* The names a process of stage 1 of PP 2 gives layers 3-4, the norm and the head of the
 * 5-layer model: those PaddleNLP 3 wrote in fleet3_pp2's model_state.pp01.pdparams. */
CKPT_TEST(test_paddle_names_stage_counts_from_zero)
{
    opened src, pp2;
    const ckpt_value *table;
    const ckpt_ckpt *stage1 = NULL;
    size_t *sel, n = 0, i, j;
    char **vars;

    ASSERT_OK(open_fixture(&src, "fleet3_tp1"));
    ASSERT_OK(open_fixture(&pp2, "fleet3_pp2"));
    ASSERT_EQ_STR(ckpt_paddle__head_class(src.m, 2), "llama_lm_head_pipe");
    ASSERT_EQ_STR(ckpt_paddle__head_class(src.m, 1), "llama_lm_head");
    sel = malloc(src.m->n_entries * sizeof *sel);
    vars = calloc(src.m->n_entries, sizeof *vars);
    ASSERT_TRUE(sel && vars);
    for (i = 0; i < src.m->n_entries; i++) {
        const pd_entry *e = &src.m->entries[i];
        if (e->tensor && (e->layout.layer >= 3 || e->layout.stage == CKPT_STAGE_LAST))
            sel[n++] = i;
    }
    ASSERT_EQ_INT((long)n, 2 * 9 + 2);
    ASSERT_OK(ckpt_paddle__stage_vars(src.m, "llama_lm_head_pipe", 1, sel, n, vars));
    for (i = 0; i < ckpt_set_member_count(pp2.set); i++)
        if (strcmp(ckpt_set_member_at(pp2.set, i)->rel, "model_state.pp01.pdparams") == 0)
            ASSERT_OK(ckpt_set_member_open(pp2.set, i, &stage1));
    ASSERT_TRUE(stage1 != NULL);
    table = ckpt_value_dict_get(ckpt_root(stage1), CKPT_PADDLE_NAME_TABLE);
    ASSERT_TRUE(table && table->kind == CKPT_VAL_DICT && table->u.dict.map.n == n);
    for (j = 0; j < n; j++) {
        const ckpt_value *want = ckpt_value_dict_get(table, src.m->entries[sel[j]].name);
        ASSERT_TRUE(want && want->kind == CKPT_VAL_STR);
        ASSERT_EQ_STR(vars[j], want->u.str.ptr);
    }
    ASSERT_EQ_STR(vars[0], "linear_0.w_0");
    ASSERT_EQ_STR(vars[n - 1], "llama_lm_head_pipe_0.w_0");
    free_vars(vars, n);
    free(sel);
    close_fixture(&pp2);
    close_fixture(&src);
}

/* Qwen2 with fuse_attention_qkv: the fused qkv_proj's bias is its linear's linear_N.b_0, as in
 * the name table PaddleNLP 3 wrote itself (qwen2_tp2_fused), the tied head the embedding's. */
CKPT_TEST(test_paddle_names_qwen2_fused_bias)
{
    opened o;
    const ckpt_value *table;
    const ckpt_ckpt *rank0 = NULL;
    size_t *sel, n = 0, i;
    char **vars;

    ASSERT_OK(open_fixture(&o, "qwen2_tp2_fused"));
    sel = malloc(o.m->n_entries * sizeof *sel);
    vars = calloc(o.m->n_entries, sizeof *vars);
    ASSERT_TRUE(sel && vars);
    for (i = 0; i < o.m->n_entries; i++)
        if (o.m->entries[i].tensor)
            sel[n++] = i;
    ASSERT_EQ_INT((long)n, 2 * 7 + 3);
    ASSERT_OK(ckpt_paddle__stage_vars(o.m, "qwen2_lm_head", 0, sel, n, vars));
    for (i = 0; i < ckpt_set_member_count(o.set); i++)
        if (strcmp(ckpt_set_member_at(o.set, i)->rel, "model_state.tp00.pdparams") == 0)
            ASSERT_OK(ckpt_set_member_open(o.set, i, &rank0));
    ASSERT_TRUE(rank0 != NULL);
    table = ckpt_value_dict_get(ckpt_root(rank0), CKPT_PADDLE_NAME_TABLE);
    ASSERT_TRUE(table && table->kind == CKPT_VAL_DICT && table->u.dict.map.n == n);
    for (i = 0; i < n; i++) {
        const ckpt_value *want = ckpt_value_dict_get(table, o.m->entries[sel[i]].name);
        ASSERT_TRUE(want && want->kind == CKPT_VAL_STR);
        ASSERT_EQ_STR(vars[i], want->u.str.ptr);
    }
    ASSERT_EQ_STR(o.m->entries[sel[2]].name, "qwen2.layers.0.self_attn.qkv_proj.bias");
    ASSERT_EQ_STR(vars[2], "linear_0.b_0");
    for (i = 0; i < n; i++) {
        free(vars[i]);
        vars[i] = NULL;
    }
    /* layer 1 on a stage of its own counts from 0: not the source's linear_4.b_0 */
    for (i = 0, n = 0; i < o.m->n_entries; i++)
        if (o.m->entries[i].tensor && o.m->entries[i].layout.layer == 1)
            sel[n++] = i;
    ASSERT_OK(ckpt_paddle__stage_vars(o.m, "qwen2_lm_head_pipe", 1, sel, n, vars));
    ASSERT_EQ_STR(o.m->entries[sel[1]].name, "qwen2.layers.1.self_attn.qkv_proj.bias");
    ASSERT_EQ_STR(vars[0], "linear_0.w_0");
    ASSERT_EQ_STR(vars[1], "linear_0.b_0");
    free_vars(vars, o.m->n_entries);
    free(sel);
    close_fixture(&o);
}

/* PaddleNLP 2.8's pipeline builds LlamaLMHead: a source whose config.json has
 * "paddlenlp_version": null, or a pipeline source whose head says so. */
CKPT_TEST(test_paddle_names_head_class_by_version)
{
    opened o;
    ckpt_paddle_model *m = NULL;
    ckpt_graph *g = NULL;

    ASSERT_OK(open_fixture(&o, "fp32_tp1"));
    ASSERT_EQ_INT(ckpt_paddle__config_major(o.m), 2);
    ASSERT_EQ_STR(ckpt_paddle__head_class(o.m, 4), "llama_lm_head");
    close_fixture(&o);
    ASSERT_OK(open_fixture(&o, "fp32_pp2"));
    ASSERT_EQ_STR(ckpt_paddle__head_class(o.m, 2), "llama_lm_head");
    close_fixture(&o);
    ASSERT_OK(open_fixture(&o, "fleet3_pp3"));
    ASSERT_EQ_INT(ckpt_paddle__config_major(o.m), 3);
    ASSERT_EQ_STR(ckpt_paddle__head_class(o.m, 2), "llama_lm_head_pipe");
    close_fixture(&o);
    /* a config without paddlenlp_version (another tool wrote it): the current PaddleNLP */
    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_paddle_model_new(&m, g, 1, 1, "{\"num_attention_heads\": 4}", NULL));
    ASSERT_EQ_INT(ckpt_paddle__config_major(m), 3);
    ckpt_paddle_model_close(m);
    ASSERT_OK(ckpt_paddle_model_new(&m, g, 1, 1, "{\"paddlenlp_version\": \"2.8.1.post\"}", NULL));
    ASSERT_EQ_INT(ckpt_paddle__config_major(m), 2);
    ckpt_paddle_model_close(m);
    ckpt_graph_free(g);
}

/* A tensor PaddleNLP's LLaMA does not build keeps the source's name, or none; one that takes
 * a name the stage gives another parameter is refused, naming both. */
CKPT_TEST(test_paddle_names_unknown_tensors)
{
    opened o;
    ckpt_paddle_model *m = NULL;
    const ckpt_node *node = NULL;
    size_t sel[3] = { 0, 1, 2 };
    char *vars[3] = { NULL, NULL, NULL };
    size_t i;

    ASSERT_OK(open_fixture(&o, "fleet3_tp1"));
    ASSERT_TRUE(ckpt_paddle_model_tensor_at(o.m, 0, &node, NULL) != NULL);
    ASSERT_OK(ckpt_paddle_model_new(&m, ckpt_plan_graph(o.plan), 1, 1, NULL, NULL));
    ASSERT_OK(ckpt_paddle_model_add_shard(m, 0, 0, "llama.layers.0.self_attn.q_proj.weight", node, "linear_7.w_0"));
    ASSERT_OK(ckpt_paddle_model_add_shard(m, 0, 0, "llama.layers.0.adapter.weight", node, "adapter_0.w_0"));
    ASSERT_OK(ckpt_paddle_model_add_shard(m, 0, 0, "llama.layers.0.extra.weight", node, NULL));
    ASSERT_OK(ckpt_paddle__stage_vars(m, "llama_lm_head", 0, sel, 3, vars));
    ASSERT_EQ_STR(vars[0], "linear_0.w_0");
    ASSERT_EQ_STR(vars[1], "adapter_0.w_0");
    ASSERT_TRUE(vars[2] == NULL);
    for (i = 0; i < 3; i++) {
        free(vars[i]);
        vars[i] = NULL;
    }
    ckpt_paddle_model_close(m);

    ASSERT_OK(ckpt_paddle_model_new(&m, ckpt_plan_graph(o.plan), 1, 1, NULL, NULL));
    ASSERT_OK(ckpt_paddle_model_add_shard(m, 0, 0, "llama.layers.0.self_attn.q_proj.weight", node, "linear_3.w_0"));
    ASSERT_OK(ckpt_paddle_model_add_shard(m, 0, 0, "llama.layers.0.lora.weight", node, "linear_0.w_0"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_paddle__stage_vars(m, "llama_lm_head", 0, sel, 2, vars));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("'llama.layers.0.self_attn.q_proj.weight' and 'llama.layers.0.lora.weight' would both "
                          "be variable 'linear_0.w_0' on pipeline stage 0");
    for (i = 0; i < 3; i++)
        free(vars[i]);
    ckpt_paddle_model_close(m);
    close_fixture(&o);
}
