/* Qwen3 (testdata/hf/transformers5/qwen3_tiny) and verify: verify's Hugging Face reader gives
 * transformers' logits; written through hf_qwen3_megatron as a Megatron checkpoint at TP 2 PP 2,
 * its forward (verify's Megatron reader: per-head q/k RMSNorm, head_dim 16) gives them too, run
 * as ranks and merged, it reads back through megatron_hf_qwen3 to model.safetensors byte for
 * byte, and verify fails at layer 1 when that layer's q and k norms are swapped or its k norm
 * is missing. */
#include "qwen3_fixture.h"

#include <ckpt/hf.h>

#include <cjson/cJSON.h>
#include <math.h>

/* What write_megatron breaks in layer 1 (the second pipeline stage's). */
enum { INTACT, SWAP_QK_NORM, NO_K_NORM };
#define Q_NORM1 "decoder.layers.1.self_attention.q_layernorm.weight"
#define K_NORM1 "decoder.layers.1.self_attention.k_layernorm.weight"

/* hf_qwen3_megatron of the fixture as a Megatron checkpoint at TP 2 PP 2 (TE names) in dir. */
static int write_megatron(const char *dir, int broken)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map *map = NULL;
    ckpt_map_result *r = NULL;
    ckpt_value *args;
    fixture f;
    size_t i;
    int rc;

    memset(&f, 0, sizeof f);
    t.tp = t.pp = 2;
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = fx_open(&f, ckpt_plan_graph(plan))) < 0 ||
        (rc = qwen3_params(&p)) < 0 || (rc = ckpt_map_builtin(&map, "hf_qwen3_megatron")) < 0 ||
        (rc = ckpt_map_apply(map, p, ckpt_plan_graph(plan), f.in, f.n, NULL, &r)) < 0)
        goto done;
    if (!(args = qwen3_args(ckpt_plan_arena(plan)))) {
        rc = CKPT_ENOMEM;
        goto done;
    }
    if ((rc = ckpt_megatron_new(&m, ckpt_plan_graph(plan), args, 1, &mo)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(r) && rc == 0; i++) {
        const char *name = ckpt_map_result_at(r, i)->name;
        const ckpt_node *node = ckpt_map_result_at(r, i)->node;
        if (broken == NO_K_NORM && strcmp(name, K_NORM1) == 0)
            continue;
        if (broken == SWAP_QK_NORM && strcmp(name, Q_NORM1) == 0)
            node = out_find(r, K_NORM1);
        else if (broken == SWAP_QK_NORM && strcmp(name, K_NORM1) == 0)
            node = out_find(r, Q_NORM1);
        rc = ckpt_megatron_add_tensor(m, name, node);
    }
    if (rc == 0 && (rc = ckpt_megatron_add_extra_states(m, 1)) == 0 && (rc = ckpt_megatron_plan(m, &t, plan)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    ckpt_megatron_close(m);
    ckpt_map_result_free(r);
    ckpt_map_free(map);
    ckpt_map_params_free(p);
    ckpt_close(f.ck);
    ckpt_plan_free(plan);
    return rc;
}

/* The largest |difference| between the model's logits at path and transformers' (logits.json). */
static double logits_error(const char *path, int merge, const char **why)
{
    ckpt_model_options o;
    ckpt_model *m = NULL;
    size_t len;
    unsigned char *text = ckpt_test_read_file(ckpt_test_data(QWEN3 "/logits.json"), &len);
    cJSON *j = text ? cJSON_ParseWithLength((const char *)text, len) : NULL;
    cJSON *ids = cJSON_GetObjectItem(j, "input_ids"), *rows = cJSON_GetObjectItem(j, "logits");
    int32_t tok[16];
    float out[16 * 128];
    double worst = INFINITY;
    int n = cJSON_GetArraySize(ids), i, v;

    free(text);
    *why = "";
    ckpt_model_options_init(&o);
    o.merge_tp = merge;
    for (i = 0; i < n && i < 16; i++)
        tok[i] = cJSON_GetArrayItem(ids, i)->valueint;
    if (n < 1 || n > 16 || ckpt_model_open(&m, path, &o) < 0 || ckpt_model_config_of(m)->vocab_size != 128 ||
        ckpt_model_forward(m, NULL, tok, n, out) < 0) {
        *why = ckpt_error_last()->message;
    } else {
        worst = 0;
        for (i = 0; i < n; i++)
            for (v = 0; v < 128; v++)
                worst = fmax(worst, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, i), v)->valuedouble -
                                         out[i * 128 + v]));
    }
    ckpt_model_close(m);
    cJSON_Delete(j);
    return worst;
}

/* The Megatron checkpoint at root read back through megatron_hf_qwen3, as model.safetensors in dir. */
static int write_back(const char *root, const char *dir)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_set *set = NULL;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map *map = NULL;
    ckpt_map_result *r = NULL;
    ckpt_map_input in[MAX_IN];
    const char *names[MAX_IN];
    const ckpt_node *nodes[MAX_IN];
    size_t i, n = 0;
    int rc;

    so.layout = "megatron";
    if ((rc = ckpt_set_open(&set, root, &so)) < 0 || (rc = ckpt_plan_new(&plan)) < 0 ||
        (rc = ckpt_megatron_open(&m, set, ckpt_plan_graph(plan), &mo)) < 0)
        goto done;
    for (i = 0; i < ckpt_megatron_tensor_count(m) && n < MAX_IN; i++) {
        ckpt_tensor_layout l;
        const char *name = ckpt_megatron_tensor_at(m, i, &in[n].node, &l);
        if (strstr(name, "_extra_state"))
            continue;
        in[n].name = name;
        in[n++].home = 0;
    }
    if ((rc = qwen3_params(&p)) < 0 || (rc = ckpt_map_builtin(&map, "megatron_hf_qwen3")) < 0 ||
        (rc = ckpt_map_apply(map, p, ckpt_plan_graph(plan), in, n, NULL, &r)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(r); i++) {
        names[i] = ckpt_map_result_at(r, i)->name;
        nodes[i] = ckpt_map_result_at(r, i)->node;
    }
    if ((rc = ckpt_hf_plan_safetensors(plan, names, nodes, ckpt_map_result_count(r), 0)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    ckpt_map_result_free(r);
    ckpt_map_free(map);
    ckpt_map_params_free(p);
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
    ckpt_set_close(set);
    return rc;
}

/* verify's Hugging Face reader runs Qwen3 as transformers does. */
CKPT_TEST(test_family_qwen3_hf_logits)
{
    const char *why;
    char dir[1024];
    double e;

    snprintf(dir, sizeof dir, "%s", ckpt_test_data(QWEN3)); /* ckpt_test_data's buffer is reused */
    e = logits_error(dir, 0, &why);
    if (!(e <= 1e-5))
        ckpt_test_fail(__FILE__, __LINE__, "max abs logit error %g (%s)", e, why);
}

CKPT_TEST(test_family_qwen3_megatron_tp2pp2)
{
    unsigned char *a, *b;
    size_t la, lb;
    const char *why;
    double e;
    int merge;

    ASSERT_OK(write_megatron("mc", INTACT));
    for (merge = 0; merge < 2; merge++) {
        e = logits_error("mc", merge, &why);
        if (!(e <= 1e-5)) {
            ckpt_test_fail(__FILE__, __LINE__, "merge %d: max abs logit error %g (%s)", merge, e, why);
            return;
        }
    }
    ASSERT_OK(write_back("mc", "hf"));
    a = ckpt_test_read_file("hf/model.safetensors", &la);
    b = ckpt_test_read_file(ckpt_test_data(QWEN3 "/model.safetensors"), &lb);
    ASSERT_TRUE(a && b && la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
}

/* The first failing layer of verify(a, b): -2 all passed, -1 a model-level entry, -3 verify
 * could not run (*why then says why). */
static int64_t first_failure(const char *a, const char *b, char *why, size_t cap)
{
    ckpt_verify_options vo = CKPT_VERIFY_OPTIONS_INIT;
    ckpt_model *x = NULL, *y = NULL;
    ckpt_verify_report *rep = NULL;
    int64_t layer = -3;

    vo.device = CKPT_DEVICE_CPU;
    why[0] = 0;
    if (ckpt_model_open(&x, a, NULL) == 0 && ckpt_model_open(&y, b, NULL) == 0 && ckpt_verify(x, y, &vo, &rep) == 0)
        layer = rep->first_failure ? rep->first_failure->index : -2;
    else
        snprintf(why, cap, "%s", ckpt_error_last()->message);
    ckpt_verify_report_free(rep);
    ckpt_model_close(x);
    ckpt_model_close(y);
    return layer;
}

CKPT_TEST(test_family_qwen3_verify_breakage)
{
    char why[512];

    ASSERT_OK(write_megatron("mc", INTACT));
    ASSERT_OK(write_megatron("swapped", SWAP_QK_NORM));
    ASSERT_OK(write_megatron("removed", NO_K_NORM));
    ASSERT_EQ_INT(first_failure("mc", "mc", why, sizeof why), -2);
    ASSERT_EQ_INT(first_failure("mc", "swapped", why, sizeof why), 1);
    /* verify runs a layer whose k norm is missing without it: the layer is named, not the tensor */
    ASSERT_EQ_INT(first_failure("mc", "removed", why, sizeof why), 1);
}
