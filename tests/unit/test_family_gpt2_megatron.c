/* GPT-2 written through the GPT-2 family (gpt2.json's Megatron args, hf_gpt2_megatron and its
 * variant local) as a Megatron-LM checkpoint at TP 2 PP 2, with Transformer Engine and with
 * local layer names: the model's forward (verify's Megatron reader: LayerNorm with biases,
 * gelu_tanh, linear biases, learned positions, tied embeddings), run as ranks and merged,
 * gives transformers' logits, and read back through the family's map it gives back
 * model.safetensors byte for byte; verify fails at layer 1 on a zeroed fused q/k/v bias and
 * refuses a removed weight naming it. */
#include "gpt2_fixture.h"

#include <math.h>

/* What write_megatron breaks in layer 1 (the second pipeline stage's). */
enum { INTACT, ZERO_QKV_BIAS, NO_FC2_WEIGHT };
#define BROKEN_BIAS "decoder.layers.1.self_attention.linear_qkv.bias"
#define REMOVED "decoder.layers.1.mlp.linear_fc2.weight"

/* The fixture through the GPT-2 family's map for `impl`, written as a Megatron checkpoint at
 * TP 2 PP 2 in dir, with layer 1 broken as `broken` says. */
static int write_megatron(const char *dir, int broken, const char *impl)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map_result *r = NULL;
    ckpt_value *args = NULL;
    ckpt_ckpt *c = NULL;
    ckpt_map_input in[MAX_IN];
    size_t i, n = 0;
    int rc;

    t.tp = t.pp = 2;
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = ckpt_open(&c, ckpt_test_data(FIXTURE), NULL)) < 0)
        goto done;
    for (i = 0; i < ckpt_tensor_count(c) && n < MAX_IN && rc == 0; i++, n++) {
        in[n].name = ckpt_tensor_at(c, i)->name;
        in[n].home = 0;
        rc = ckpt_node_tensor(ckpt_plan_graph(plan), ckpt_tensor_at(c, i), &in[n].node);
    }
    if (rc < 0 || (rc = params_for(&p, 256)) < 0 ||
        (rc = apply_family(impl, 0, p, ckpt_plan_graph(plan), in, n, &r)) < 0 ||
        (rc = family_args(ckpt_plan_arena(plan), impl, &args)) < 0 ||
        (rc = ckpt_megatron_new(&m, ckpt_plan_graph(plan), args, 1, &mo)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(r) && rc == 0; i++) {
        const char *name = ckpt_map_result_at(r, i)->name;
        const ckpt_node *node = ckpt_map_result_at(r, i)->node;
        if (broken == NO_FC2_WEIGHT && strcmp(name, REMOVED) == 0)
            continue;
        if (broken == ZERO_QKV_BIAS && strcmp(name, BROKEN_BIAS) == 0)
            rc = ckpt_node_zeros(ckpt_plan_graph(plan), CKPT_DTYPE_F32, 1, ckpt_node_shape(node), &node);
        if (rc == 0)
            rc = ckpt_megatron_add_tensor(m, name, node);
    }
    if (rc == 0 && (rc = ckpt_megatron_add_extra_states(m, strcmp(impl, "local") != 0)) == 0 &&
        (rc = ckpt_megatron_plan(m, &t, plan)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    ckpt_megatron_close(m);
    ckpt_map_result_free(r);
    ckpt_map_params_free(p);
    ckpt_plan_free(plan);
    ckpt_close(c);
    return rc;
}

/* The largest |difference| between the model's logits and transformers' (logits.json). */
static double logits_error(const char *path, int merge)
{
    ckpt_model_options o;
    ckpt_model *m = NULL;
    size_t len;
    unsigned char *text = ckpt_test_read_file(ckpt_test_data("hf/gpt2_tiny/logits.json"), &len);
    cJSON *j = text ? cJSON_ParseWithLength((const char *)text, len) : NULL;
    cJSON *ids = cJSON_GetObjectItem(j, "input_ids"), *rows = cJSON_GetObjectItem(j, "logits");
    int32_t tok[16];
    float out[16 * VOCAB];
    double worst = INFINITY;
    int n = cJSON_GetArraySize(ids), i, v;

    free(text);
    ckpt_model_options_init(&o);
    o.merge_tp = merge;
    for (i = 0; i < n && i < 16; i++)
        tok[i] = cJSON_GetArrayItem(ids, i)->valueint;
    if (n > 0 && n <= 16 && ckpt_model_open(&m, path, &o) == 0 && ckpt_model_config_of(m)->vocab_size == VOCAB &&
        ckpt_model_forward(m, NULL, tok, n, out) == 0) {
        worst = 0;
        for (i = 0; i < n; i++)
            for (v = 0; v < VOCAB; v++)
                worst = fmax(worst, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, i), v)->valuedouble -
                                         out[i * VOCAB + v]));
    }
    ckpt_model_close(m);
    cJSON_Delete(j);
    return worst;
}

/* The Megatron checkpoint read back and mapped to Hugging Face names (the family's map back
 * for `impl`), as model.safetensors in dir; *tied_copy says whether the output layer the
 * last stage keeps is the embedding. */
static int write_back(const char *root, const char *dir, const char *impl, int *tied_copy)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_set *set = NULL;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map_params *p = NULL;
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
    if ((rc = params_for(&p, 256)) < 0 || (rc = apply_family(impl, 1, p, ckpt_plan_graph(plan), in, n, &r)) < 0)
        goto done;
    /* tied: the last stage's copy of the embedding is no tensor of GPT2LMHeadModel's files */
    for (i = 0, n = 0; i < ckpt_map_result_count(r); i++) {
        if (strcmp(ckpt_map_result_at(r, i)->name, "lm_head.weight") == 0) {
            *tied_copy = same_bytes(ckpt_map_result_at(r, i)->node, out_node(r, "transformer.wte.weight"));
            continue;
        }
        names[n] = ckpt_map_result_at(r, i)->name;
        nodes[n++] = ckpt_map_result_at(r, i)->node;
    }
    if ((rc = ckpt_hf_plan_safetensors(plan, names, nodes, n, 0)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    ckpt_map_result_free(r);
    ckpt_map_params_free(p);
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
    ckpt_set_close(set);
    return rc;
}

/* Whether the Megatron checkpoint at root holds a tensor named `name`. */
static int holds(const char *root, const char *name)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_set *set = NULL;
    ckpt_graph *g = NULL;
    ckpt_megatron *m = NULL;
    size_t i;
    int found = 0;

    so.layout = "megatron";
    if (ckpt_set_open(&set, root, &so) == 0 && ckpt_graph_new(&g) == 0 && ckpt_megatron_open(&m, set, g, &mo) == 0)
        for (i = 0; i < ckpt_megatron_tensor_count(m); i++) {
            const ckpt_node *full;
            ckpt_tensor_layout l;
            found |= strcmp(ckpt_megatron_tensor_at(m, i, &full, &l), name) == 0;
        }
    ckpt_megatron_close(m);
    ckpt_graph_free(g);
    ckpt_set_close(set);
    return found;
}

/* transformers' own files, as verify's Hugging Face reader runs them through the GPT-2
 * family (verify_hf_gpt2, LayerNorm, gelu_tanh, learned positions, tied), under both
 * transformers versions' configs. */
CKPT_TEST(test_family_gpt2_hf_logits)
{
    char v4[4096], v5[4096];
    double e;

    /* ckpt_test_data's buffer is reused by logits_error */
    snprintf(v4, sizeof v4, "%s", ckpt_test_data("hf/gpt2_tiny"));
    snprintf(v5, sizeof v5, "%s", ckpt_test_data("hf/transformers5/gpt2_tiny"));
    e = fmax(logits_error(v4, 0), logits_error(v5, 0));
    if (!(e <= 1e-5))
        ckpt_test_fail(__FILE__, __LINE__, "max abs logit error %g (%s)", e, ckpt_error_last()->message);
}

/* With Transformer Engine and with local layer names. */
CKPT_TEST(test_family_gpt2_megatron_tp2pp2)
{
    static const char *const impls[] = { "transformer_engine", "local" };
    static const char *const norms[] = { "decoder.layers.1.mlp.linear_fc1.layer_norm_bias",
                                         "decoder.layers.1.pre_mlp_layernorm.bias" };
    unsigned char *a, *b;
    size_t la, lb, i;
    int tied_copy = 0;
    double e;

    for (i = 0; i < 2; i++) {
        char mc[32], hf[32], st[64];
        snprintf(mc, sizeof mc, "mc_%s", impls[i]);
        snprintf(hf, sizeof hf, "hf_%s", impls[i]);
        snprintf(st, sizeof st, "%s/model.safetensors", hf);
        ASSERT_OK(write_megatron(mc, INTACT, impls[i]));
        ASSERT_TRUE(holds(mc, norms[i]) && !holds(mc, norms[1 - i]));
        e = fmax(logits_error(mc, 0), logits_error(mc, 1));
        if (!(e <= 1e-5)) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: max abs logit error %g (%s)", impls[i], e,
                           ckpt_error_last()->message);
            return;
        }
        ASSERT_OK(write_back(mc, hf, impls[i], &tied_copy));
        ASSERT_TRUE(tied_copy);
        a = ckpt_test_read_file(st, &la);
        b = ckpt_test_read_file(ckpt_test_data(FIXTURE), &lb);
        ASSERT_TRUE(a && b && la == lb && memcmp(a, b, la) == 0);
        free(a);
        free(b);
    }
}

/* The first failing layer of verify(a, b), -2 when every entry passed, -1 a model-level
 * entry, -3 when verify could not run; *why says why a layer or verify could not run. */
static int64_t first_failure(const char *a, const char *b, const char **why, char *buf, size_t cap)
{
    ckpt_verify_options vo = CKPT_VERIFY_OPTIONS_INIT;
    ckpt_model *x = NULL, *y = NULL;
    ckpt_verify_report *rep = NULL;
    int64_t layer = -3;

    vo.device = CKPT_DEVICE_CPU;
    *why = NULL;
    if (ckpt_model_open(&x, a, NULL) == 0 && ckpt_model_open(&y, b, NULL) == 0 && ckpt_verify(x, y, &vo, &rep) == 0)
        layer = rep->first_failure ? rep->first_failure->index : -2;
    if (rep && rep->first_failure && rep->first_failure->error) {
        snprintf(buf, cap, "%s", rep->first_failure->error);
        *why = buf;
    } else if (layer == -3) {
        snprintf(buf, cap, "%s", ckpt_error_last()->message);
        *why = buf;
    }
    ckpt_verify_report_free(rep);
    ckpt_model_close(x);
    ckpt_model_close(y);
    return layer;
}

/* verify of a conversion with layer 1's fused q/k/v bias zeroed against the intact one
 * fails at layer 1 (layer 0 passes); one with layer 1's fc2 weight gone is refused naming
 * the tensor. */
CKPT_TEST(test_family_gpt2_verify_breakage)
{
    const char *why;
    char buf[512];

    ASSERT_OK(write_megatron("mc", INTACT, "transformer_engine"));
    ASSERT_OK(write_megatron("zero_bias", ZERO_QKV_BIAS, "local"));
    ASSERT_OK(write_megatron("removed", NO_FC2_WEIGHT, "transformer_engine"));
    ASSERT_EQ_INT(first_failure("mc", "mc", &why, buf, sizeof buf), -2);
    ASSERT_EQ_INT(first_failure("mc", "zero_bias", &why, buf, sizeof buf), 1);
    ASSERT_TRUE(why == NULL);
    ASSERT_EQ_INT(first_failure("mc", "removed", &why, buf, sizeof buf), -3);
    ASSERT_TRUE(why && strstr(why, "no '" REMOVED "'") != NULL);
}
