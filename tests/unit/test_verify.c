/* Models and verify: the CPU core reproduces the logits the frameworks computed themselves
 * at fixture time (transformers, megatron-core, PaddleNLP; committed logits.json), for every
 * layout they can be read in; configs are read from the files and missing values named;
 * verify's report follows its options. */
#include "test.h"

#include <ckpt/megatron.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

/* The logits file's input ids and logits (rows of `cols` values); NULL when unreadable. */
static cJSON *load_logits(const char *rel, int32_t *ids, int *n_ids)
{
    size_t len;
    unsigned char *text = ckpt_test_read_file(ckpt_test_data(rel), &len);
    cJSON *j, *in;
    int i;

    if (!text)
        return NULL;
    j = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    in = cJSON_GetObjectItem(j, "input_ids");
    *n_ids = cJSON_GetArraySize(in);
    for (i = 0; i < *n_ids && i < 64; i++)
        ids[i] = cJSON_GetArrayItem(in, i)->valueint;
    return j;
}

/* The model at `path` (merged or run as ranks) reproduces the logits in `logits` within 1e-5,
 * over the model's true vocabulary. */
static double logits_error(const char *path, const char *logits, int merge, int zero_module, const char **why)
{
    ckpt_model_options o;
    ckpt_model *m = NULL;
    int32_t ids[64];
    int n = 0, t;
    int64_t v, V;
    double worst = 0;
    float *out;
    cJSON *j = load_logits(logits, ids, &n), *rows;

    *why = NULL;
    if (!j) {
        *why = "cannot read the logits file";
        return INFINITY;
    }
    ckpt_model_options_init(&o);
    o.merge_tp = merge;
    o.zero_module = zero_module;
    if (ckpt_model_open(&m, ckpt_test_data(path), &o) < 0) {
        *why = ckpt_error_last()->message;
        cJSON_Delete(j);
        return INFINITY;
    }
    V = ckpt_model_config_of(m)->vocab_size;
    out = malloc((size_t)(n * V) * sizeof *out);
    if (ckpt_model_forward(m, NULL, ids, n, out) < 0) {
        *why = ckpt_error_last()->message;
        worst = INFINITY;
    }
    rows = cJSON_GetObjectItem(j, "logits");
    for (t = 0; t < n && !*why; t++)
        for (v = 0; v < V; v++)
            worst = fmax(worst, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, t), (int)v)->valuedouble - out[t * V + v]));
    free(out);
    ckpt_model_close(m);
    cJSON_Delete(j);
    return worst;
}

#define ASSERT_LOGITS(path, logits, merge, module)                                                        \
    do {                                                                                                  \
        const char *why_;                                                                                 \
        double e_ = logits_error(path, logits, merge, module, &why_);                                     \
        if (!(e_ <= 1e-5)) {                                                                              \
            ckpt_test_fail(__FILE__, __LINE__, "%s: max abs logit error %g (%s)", path, e_, why_ ? why_ : ""); \
            return;                                                                                       \
        }                                                                                                 \
    } while (0)

CKPT_TEST(test_verify_logits_transformers)
{
    ASSERT_LOGITS("hf/llama_tiny", "hf/llama_tiny/logits.json", 0, 0);
}

/* Mistral's sliding window (4 keys, of 8 tokens): transformers 4 and 5 configs. */
CKPT_TEST(test_verify_logits_mistral_window)
{
    ckpt_model *m;

    ASSERT_LOGITS("hf/mistral_tiny", "hf/mistral_tiny/logits.json", 0, 0);
    ASSERT_LOGITS("hf/transformers5/mistral_tiny", "hf/transformers5/mistral_tiny/logits.json", 0, 0);
    ASSERT_OK(ckpt_model_open(&m, ckpt_test_data("hf/mistral_tiny"), NULL));
    ASSERT_EQ_INT(ckpt_model_config_of(m)->window, 4);
    ckpt_model_close(m);
}

/* Logits of `path` for 8 fixed ids with overrides o (NULL on failure; free()). */
static float *forward(const char *path, const ckpt_model_options *o, int64_t *vocab)
{
    static const int32_t ids[8] = { 1, 17, 42, 99, 120, 3, 127, 64 };
    ckpt_model *m;
    float *out;

    if (ckpt_model_open(&m, ckpt_test_data(path), o) < 0)
        return NULL;
    *vocab = ckpt_model_config_of(m)->vocab_size;
    out = malloc((size_t)(8 * *vocab) * sizeof *out);
    if (ckpt_model_forward(m, NULL, ids, 8, out) < 0) {
        free(out);
        out = NULL;
    }
    ckpt_model_close(m);
    return out;
}

/* Which layers the window applies to: per-layer flags, Megatron's every-Nth-layer-full
 * pattern, and the values that are refused. */
CKPT_TEST(test_verify_config_window)
{
    static const unsigned char all[2] = { 1, 1 }, none[2] = { 0, 0 }, first[2] = { 1, 0 };
    ckpt_model_options o;
    ckpt_model *m;
    float *base, *causal, *x;
    int64_t V = 0;
    size_t bytes;

    ckpt_model_options_init(&o);
    ASSERT_TRUE((base = forward("hf/mistral_tiny", &o, &V)) != NULL);
    bytes = (size_t)(8 * V) * sizeof *base;
    o.overrides.window = 0;
    ASSERT_TRUE((causal = forward("hf/mistral_tiny", &o, &V)) != NULL);
    ASSERT_TRUE(memcmp(base, causal, bytes) != 0);
    ckpt_model_options_init(&o);
    o.overrides.layer_window = all;
    ASSERT_TRUE((x = forward("hf/mistral_tiny", &o, &V)) != NULL && memcmp(x, base, bytes) == 0);
    free(x);
    o.overrides.layer_window = none;
    ASSERT_TRUE((x = forward("hf/mistral_tiny", &o, &V)) != NULL && memcmp(x, causal, bytes) == 0);
    free(x);
    ckpt_model_options_init(&o);
    o.overrides.window_full_every = 1;
    ASSERT_TRUE((x = forward("hf/mistral_tiny", &o, &V)) != NULL && memcmp(x, causal, bytes) == 0);
    free(x);
    /* every 2nd layer (1-based) full: layer 0 windowed, layer 1 not */
    o.overrides.window_full_every = 2;
    ASSERT_TRUE((x = forward("hf/mistral_tiny", &o, &V)) != NULL);
    ckpt_model_options_init(&o);
    o.overrides.layer_window = first;
    ASSERT_TRUE((base = (free(base), forward("hf/mistral_tiny", &o, &V))) != NULL && memcmp(x, base, bytes) == 0);
    ASSERT_TRUE(memcmp(x, causal, bytes) != 0);
    free(x), free(base), free(causal);

    ckpt_model_options_init(&o);
    o.overrides.rope_linear_factor = 0;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_model_open(&m, ckpt_test_data("hf/mistral_tiny"), &o));
    ckpt_model_options_init(&o);
    o.overrides.attn_scale = 0;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_model_open(&m, ckpt_test_data("hf/mistral_tiny"), &o));
    ckpt_model_options_init(&o);
    o.version = 1;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_model_open(&m, ckpt_test_data("hf/mistral_tiny"), &o));
}

/* A gated MLP of another activation (GeGLU) merges its TP ranks' [gate_r; up_r] as SwiGLU's:
 * PaddleNLP llama/fp32_tp2 (merged by verify itself, not by a layout)
 * run as GeGLU gives the same logits run as its ranks and merged. */
CKPT_TEST(test_verify_geglu_merge)
{
    ckpt_model_options o;
    float *ranks, *merged;
    int64_t V = 0, i;
    double worst = 0;

    ckpt_model_options_init(&o);
    o.overrides.act = CKPT_ACT_GEGLU_TANH;
    ASSERT_TRUE((ranks = forward("llama/fp32_tp2", &o, &V)) != NULL);
    o.merge_tp = 1;
    ASSERT_TRUE((merged = forward("llama/fp32_tp2", &o, &V)) != NULL);
    for (i = 0; i < 8 * V; i++)
        worst = fmax(worst, fabs((double)ranks[i] - merged[i]));
    ASSERT_TRUE(worst < 1e-5);
    free(ranks);
    free(merged);
}

typedef int (*args_fn)(ckpt_arena *a, ckpt_value *args);

/* A Megatron fixture written again to `out` with its args changed by `set` (NULL: as they are)
 * and without the tensor `skip` (NULL: none). */
static int rewrite(const char *fixture, const char *out, args_fn set, const char *skip)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_megatron *src = NULL, *dst = NULL;
    ckpt_value *args = NULL;
    ckpt_plan *plan = NULL;
    ckpt_graph *g = NULL;
    ckpt_arena *a = NULL;
    ckpt_set *set_ = NULL;
    size_t i;
    int rc;

    if ((rc = ckpt_graph_new(&g)) < 0 || (rc = ckpt_arena_new(&a)) < 0 ||
        (rc = ckpt_set_open(&set_, ckpt_test_data(fixture), NULL)) < 0 ||
        (rc = ckpt_megatron_open(&src, set_, g, NULL)) < 0 ||
        (rc = ckpt_value_clone(a, ckpt_megatron_args(src), NULL, NULL, &args)) < 0 ||
        (set && (rc = set(a, args)) < 0) ||
        (rc = ckpt_megatron_new(&dst, g, args, 10, NULL)) < 0)
        goto done;
    for (i = 0; i < ckpt_megatron_tensor_count(src) && rc == 0; i++) {
        const ckpt_node *full;
        const char *name = ckpt_megatron_tensor_at(src, i, &full, NULL);
        if (!strstr(name, "_extra_state") && (!skip || strcmp(name, skip) != 0))
            rc = ckpt_megatron_add_tensor(dst, name, full);
    }
    if (rc == 0 && (rc = ckpt_plan_new(&plan)) == 0 && (rc = ckpt_megatron_plan(dst, &t, plan)) == 0)
        rc = ckpt_plan_execute(plan, out, NULL, NULL);
done:
    ckpt_plan_free(plan);
    ckpt_megatron_close(dst);
    ckpt_megatron_close(src);
    ckpt_set_close(set_);
    ckpt_arena_free(a);
    ckpt_graph_free(g);
    return rc;
}

static int window_args(ckpt_arena *a, ckpt_value *args)
{
    int rc;

    if ((rc = ckpt_megatron_args_set_int_pair(a, args, "window_size", 3, 0)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, args, "window_attn_skip_freq", 2)) < 0)
        return rc;
    return ckpt_megatron_args_set_float(a, args, "softmax_scale", 0.25);
}

static int window_list_args(ckpt_arena *a, ckpt_value *args)
{
    static const int64_t flags[] = { 1, 0, 0, 1 };
    int rc;

    if ((rc = ckpt_megatron_args_set_int_pair(a, args, "window_size", 1, 0)) < 0)
        return rc;
    return ckpt_megatron_args_set_int_list(a, args, "window_attn_skip_freq", flags, 4);
}

static int named_llama_windowed(ckpt_arena *a, ckpt_value *args)
{
    int rc = ckpt_megatron_args_set_str(a, args, "hf_model_type", "llama");
    return rc < 0 ? rc : ckpt_megatron_args_set_int_pair(a, args, "window_size", 3, 0);
}

static int bad_window_args(ckpt_arena *a, ckpt_value *args)
{
    return ckpt_megatron_args_set_int_pair(a, args, "window_size", 3, 2);
}

/* What verify reads from Megatron's args for windowed models: window_size (W - 1, 0) and
 * window_attn_skip_freq (every Nth layer full, or a list of 1 for windowed layers),
 * softmax_scale; a window that looks ahead is refused. The forward pass with the pattern
 * equals the one with the same flags given per layer. */
CKPT_TEST(test_verify_megatron_args_window)
{
    static const int32_t ids[6] = { 1, 2, 3, 4, 5, 6 };
    static const unsigned char pattern[4] = { 1, 0, 1, 0 };
    const ckpt_model_config *c;
    ckpt_model_options o;
    ckpt_model *m;
    float *x, *y;
    size_t bytes;

    ASSERT_OK(rewrite("megatron/tp1", "skip", window_args, NULL));
    ASSERT_OK(ckpt_model_open(&m, "skip", NULL));
    c = ckpt_model_config_of(m);
    ASSERT_EQ_INT(c->window, 4);
    ASSERT_EQ_INT(c->window_full_every, 2);
    ASSERT_TRUE(c->attn_scale == 0.25 && c->layer_window == NULL);
    bytes = (size_t)(6 * c->vocab_size) * sizeof *x;
    x = malloc(bytes);
    y = malloc(bytes);
    ASSERT_OK(ckpt_model_forward(m, NULL, ids, 6, x));
    ckpt_model_close(m);
    ckpt_model_options_init(&o);
    o.overrides.window_full_every = 0;
    o.overrides.layer_window = pattern;
    ASSERT_OK(ckpt_model_open(&m, "skip", &o));
    ASSERT_OK(ckpt_model_forward(m, NULL, ids, 6, y));
    ASSERT_TRUE(memcmp(x, y, bytes) == 0);
    ckpt_model_close(m);
    ckpt_model_options_init(&o);
    o.overrides.window = 0;
    ASSERT_OK(ckpt_model_open(&m, "skip", &o));
    ASSERT_OK(ckpt_model_forward(m, NULL, ids, 6, y));
    ASSERT_TRUE(memcmp(x, y, bytes) != 0);
    ckpt_model_close(m);
    free(x);
    free(y);

    ASSERT_OK(rewrite("megatron/tp1", "list", window_list_args, NULL));
    ASSERT_OK(ckpt_model_open(&m, "list", NULL));
    c = ckpt_model_config_of(m);
    ASSERT_EQ_INT(c->window, 2);
    ASSERT_TRUE(c->layer_window && c->layer_window[0] == 1 && c->layer_window[1] == 0 && c->layer_window[2] == 0 &&
                c->layer_window[3] == 1);
    ckpt_model_close(m);

    ASSERT_OK(rewrite("megatron/tp1", "ahead", bad_window_args, NULL));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_model_open(&m, "ahead", NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "window_size") != NULL);
}

#define MOE_FIXTURE "megatron/distopt/m_tp1pp1dp2_ep2/legacy"

static int moe_sigmoid_args(ckpt_arena *a, ckpt_value *args)
{
    int rc = ckpt_megatron_args_set_str(a, args, "moe_router_score_function", "sigmoid");
    return rc < 0 ? rc : ckpt_megatron_args_set_float(a, args, "moe_router_topk_scaling_factor", 2.0);
}

static int moe_pre_softmax_args(ckpt_arena *a, ckpt_value *args)
{
    return ckpt_megatron_args_set_bool(a, args, "moe_router_pre_softmax", 1);
}

static int moe_every_other_args(ckpt_arena *a, ckpt_value *args)
{
    return ckpt_megatron_args_set_int(a, args, "moe_layer_freq", 2);
}

static int moe_dense_list_args(ckpt_arena *a, ckpt_value *args)
{
    static const int64_t freq[] = { 1, 0 };
    return ckpt_megatron_args_set_int_list(a, args, "moe_layer_freq", freq, 2);
}

static int moe_shared_gate_args(ckpt_arena *a, ckpt_value *args)
{
    return ckpt_megatron_args_set_bool(a, args, "moe_shared_expert_gate", 1);
}

static int moe_groups_args(ckpt_arena *a, ckpt_value *args)
{
    return ckpt_megatron_args_set_int(a, args, "moe_router_num_groups", 2);
}

static int moe_capacity_args(ckpt_arena *a, ckpt_value *args)
{
    return ckpt_megatron_args_set_float(a, args, "moe_expert_capacity_factor", 1.0);
}

static int mla_args(ckpt_arena *a, ckpt_value *args)
{
    return ckpt_megatron_args_set_bool(a, args, "multi_latent_attention", 1);
}

static int mla_unknown_rope_args(ckpt_arena *a, ckpt_value *args)
{
    int rc = mla_args(a, args);
    if (rc == 0)
        rc = ckpt_megatron_args_set_bool(a, args, "qk_layernorm", 1);
    return rc < 0 ? rc : ckpt_megatron_args_set_str(a, args, "rope_type", "dynamic");
}

/* The logits of the model at `path` for 8 tokens into x (vocab_size per token); the model's
 * config into *c_out, copied. */
static int moe_logits(const char *path, float *x, ckpt_model_config *c_out)
{
    static const int32_t ids[8] = { 1, 17, 4, 9, 15, 3, 19, 6 };
    ckpt_model *m;
    int rc = ckpt_model_open(&m, path, NULL);

    if (rc < 0)
        return rc;
    *c_out = *ckpt_model_config_of(m);
    rc = ckpt_model_forward(m, NULL, ids, 8, x);
    ckpt_model_close(m);
    return rc;
}

/* The MoE facts verify reads from Megatron's args: experts, top-k, expert MLP, the score
 * function (top-k then softmax, pre-softmax, sigmoid) and the scaling factor, each changing
 * the logits; an integer moe_layer_freq that makes a layer holding experts dense is refused
 * naming its tensors, and routing verify does not compute is refused naming the arg (or, for
 * groups under softmax scores and MLA without its latent norms, what is not run). */
CKPT_TEST(test_verify_megatron_args_moe)
{
    static const struct {
        args_fn set;
        const char *arg;
    } refused[] = {
        { moe_shared_gate_args, "moe_shared_expert_gate" },
        { moe_groups_args, "group-limited routing with scores other than sigmoid" },
        { moe_capacity_args, "moe_expert_capacity_factor" },
        { mla_args, "qk_layernorm is not set: MLA without its q and kv norms" },
        { mla_unknown_rope_args, "args.rope_type 'dynamic' is not run by verify" },
    };
    float base[8 * 29], other[8 * 29];
    ckpt_model_config c;
    ckpt_model *m;
    size_t i;

    ASSERT_OK(moe_logits(ckpt_test_data(MOE_FIXTURE), base, &c));
    ASSERT_EQ_INT((int)c.num_experts, 4);
    ASSERT_EQ_INT((int)c.moe_top_k, 2);
    ASSERT_EQ_INT((int)c.moe_ffn_hidden_size, 16);
    ASSERT_EQ_INT((int)c.moe_layer_freq, 1);
    ASSERT_EQ_INT(c.moe_score, CKPT_MOE_SOFTMAX_TOPK);
    ASSERT_TRUE(c.moe_topk_scale == 1.0 && c.vocab_size == 29 && c.moe_shared_ffn_hidden_size == 0);

    ASSERT_OK(rewrite(MOE_FIXTURE, "pre", moe_pre_softmax_args, NULL));
    ASSERT_OK(moe_logits("pre", other, &c));
    ASSERT_EQ_INT(c.moe_score, CKPT_MOE_SOFTMAX_ALL);
    ASSERT_TRUE(memcmp(base, other, sizeof base) != 0);

    ASSERT_OK(rewrite(MOE_FIXTURE, "sig", moe_sigmoid_args, NULL));
    ASSERT_OK(moe_logits("sig", other, &c));
    ASSERT_EQ_INT(c.moe_score, CKPT_MOE_SIGMOID);
    ASSERT_TRUE(c.moe_topk_scale == 2.0);
    ASSERT_TRUE(memcmp(base, other, sizeof base) != 0);

    ASSERT_OK(rewrite(MOE_FIXTURE, "freq2", moe_every_other_args, NULL));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_model_open(&m, "freq2", NULL));
    ASSERT_ERROR_MENTIONS("layers.1.moe.");
    ASSERT_ERROR_MENTIONS("a dense layer by moe_layer_freq");

    /* a list with a dense layer after a MoE layer is run as it says: layer 1's experts are
     * refused as a dense layer's */
    ASSERT_OK(rewrite(MOE_FIXTURE, "list", moe_dense_list_args, NULL));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_model_open(&m, "list", NULL));
    ASSERT_ERROR_MENTIONS("layers.1.moe.experts.0.fc1.weight: a dense layer by the config's list of MoE layers");

    for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char dir[32];
        snprintf(dir, sizeof dir, "refused%zu", i);
        ASSERT_OK(rewrite(MOE_FIXTURE, dir, refused[i].set, NULL));
        ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_model_open(&m, dir, NULL));
        ASSERT_ERROR_MENTIONS(refused[i].arg);
        ckpt_error_clear();
    }
}

/* A Megatron model with qk_layernorm (LayerNorm, with biases) whose layer 1 lost its
 * k_layernorm.bias is refused naming it, not run as a k norm without bias. */
CKPT_TEST(test_verify_megatron_qk_norm_bias_lost)
{
    static const int32_t ids[4] = { 1, 2, 3, 4 };
    ckpt_model *m;
    float *x;

    ASSERT_OK(rewrite("megatron/gpt2style_tp2", "nokb", NULL, "decoder.layers.1.self_attention.k_layernorm.bias"));
    ASSERT_OK(ckpt_model_open(&m, "nokb", NULL));
    x = malloc((size_t)(4 * ckpt_model_config_of(m)->vocab_size) * sizeof *x);
    ASSERT_TRUE(x != NULL);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_model_forward(m, NULL, ids, 4, x));
    ASSERT_ERROR_MENTIONS("layer 1, rank 0: no attn.k_norm.bias beside attn.q_norm.bias");
    free(x);
    ckpt_model_close(m);
}

/* megatron-core's own forward at TP 1; the same weights at other layouts run as their ranks,
 * and merged: fewer query groups than ranks (TP 4, 2 groups), PP with virtual chunks. */
CKPT_TEST(test_verify_logits_megatron)
{
    static const char *const layouts[] = { "megatron/tp1", "megatron/tp2", "megatron/pp2", "megatron/tp2pp2",
                                           "megatron/tp4_ng2", "megatron/pp2_vpp2" };
    size_t i;
    int merge;

    for (i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        for (merge = 0; merge < 2; merge++)
            ASSERT_LOGITS(layouts[i], "megatron/tp1/logits.json", merge, 0);
}

/* LayerNorm with biases, GELU, linear biases, learned positions, QK layernorm, tied
 * embeddings: megatron-core's forward of gpt2style_tp2's TP1 master. */
CKPT_TEST(test_verify_logits_megatron_gpt2_style)
{
    ASSERT_LOGITS("megatron/gpt2style_tp2", "megatron/gpt2style_tp2/logits.json", 0, 0);
    ASSERT_LOGITS("megatron/gpt2style_tp2", "megatron/gpt2style_tp2/logits.json", 1, 0);
}

/* Mixture of experts (4 experts, top-2 softmax routing, SwiGLU experts): megatron-core's
 * forward of the fixture loaded at EP 1, reproduced from the EP 2 legacy files and from the
 * dp_reshardable torch_dist save (testdata/gen/gen_megatron_moe_logits.py). */
CKPT_TEST(test_verify_logits_megatron_moe)
{
    ASSERT_LOGITS("megatron/distopt/m_tp1pp1dp2_ep2/legacy", "megatron/distopt/m_tp1pp1dp2_ep2/logits.json", 0, 0);
    ASSERT_LOGITS("megatron/distopt/m_tp1pp1dp2_ep2/dp_reshardable", "megatron/distopt/m_tp1pp1dp2_ep2/logits.json", 0,
                  0);
}

/* A shared expert beside the routed ones (testdata/gen/gen_megatron_moe_shared.py). */
CKPT_TEST(test_verify_logits_megatron_moe_shared)
{
    ckpt_model *m;

    ASSERT_LOGITS("megatron/moe_shared_tp1", "megatron/moe_shared_tp1/logits.json", 0, 0);
    ASSERT_OK(ckpt_model_open(&m, ckpt_test_data("megatron/moe_shared_tp1"), NULL));
    ASSERT_EQ_INT((int)ckpt_model_config_of(m)->moe_shared_ffn_hidden_size, 16);
    ckpt_model_close(m);
}

CKPT_TEST(test_verify_logits_paddlenlp)
{
    ASSERT_LOGITS("llama/fp32_tp1", "llama/fp32_tp1/logits.json", 0, 0);
    ASSERT_LOGITS("llama/fp32_tp2", "llama/fp32_tp1/logits.json", 0, 0);
    ASSERT_LOGITS("llama/fp32_tp2", "llama/fp32_tp1/logits.json", 1, 0);
    ASSERT_LOGITS("llama/fp32_tp1/model_state.pdparams", "llama/fp32_tp1/logits.json", 0, 0);
    ASSERT_LOGITS("llama/bf16_tp1", "llama/bf16_tp1/logits.json", 0, 0);
}

/* transformers' forward of DeepSpeed's zero_to_fp32 output, and of the bf16 weights the
 * engine held; here the consolidation is ours. */
CKPT_TEST(test_verify_logits_deepspeed)
{
    ASSERT_LOGITS("zero/llama_stage2_bf16_ws2", "zero/llama_stage2_bf16_ws2/logits.json", 0, 0);
    ASSERT_LOGITS("zero/llama_stage3_bf16_ws2", "zero/llama_stage3_bf16_ws2/logits.json", 0, 0);
    ASSERT_LOGITS("zero/llama_stage2_bf16_ws2", "zero/llama_stage2_bf16_ws2/bf16_logits.json", 0, 1);
}

CKPT_TEST(test_verify_config)
{
    ckpt_model *m;
    ckpt_model_options o;
    const ckpt_model_config *c;

    ASSERT_OK(ckpt_model_open(&m, ckpt_test_data("megatron/gpt2style_tp2"), NULL));
    c = ckpt_model_config_of(m);
    ASSERT_EQ_STR(ckpt_model_source(m), "megatron");
    ASSERT_EQ_INT(ckpt_model_tp(m), 2);
    ASSERT_EQ_INT(c->norm, CKPT_NORM_LAYER);
    ASSERT_EQ_INT(c->act, CKPT_ACT_GELU);
    ASSERT_EQ_INT(c->position, CKPT_POSITION_LEARNED);
    ASSERT_EQ_INT(c->qk_norm, 1);
    ASSERT_EQ_INT(c->tied_embeddings, 1);
    ASSERT_TRUE(ckpt_model_has_embedding(m) && ckpt_model_has_final_norm(m) && !ckpt_model_has_output(m));
    ckpt_model_close(m);

    /* a weights file without config.json anywhere near: what is missing is named */
    ckpt_test_copy_data_dir("hf/llama_tiny", "hf");
    ASSERT_TRUE(rename("hf/config.json", "hf/elsewhere.json") == 0);
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_model_open(&m, "hf/model-00002-of-00007.safetensors", NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MODEL);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "num_heads") && strstr(ckpt_error_last()->message, "norm_eps"));
    /* ... and overrides give it */
    ckpt_model_options_init(&o);
    o.overrides.num_heads = 4;
    o.overrides.num_kv_heads = 2;
    o.overrides.norm_eps = 1e-5;
    o.overrides.norm = CKPT_NORM_RMS;
    o.overrides.act = CKPT_ACT_SWIGLU;
    o.overrides.position = CKPT_POSITION_ROPE;
    ASSERT_OK(ckpt_model_open(&m, "hf/model-00002-of-00007.safetensors", &o));
    ASSERT_EQ_INT(ckpt_model_config_of(m)->head_dim, 16);
    ASSERT_EQ_INT(ckpt_model_config_of(m)->ffn_hidden_size, 96);
    ckpt_model_close(m);

    ASSERT_FAILS(CKPT_EFORMAT, ckpt_model_open(&m, ckpt_test_data("torch"), NULL));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_model_open(&m, "no/such/dir", NULL));
}

/* config.json without the line of `key` (transformers writes one key a line). */
static void drop_key(const char *path, const char *key)
{
    size_t len;
    char *text = (char *)ckpt_test_read_file(path, &len), *at, *end;

    if (text)
        text[len] = '\0'; /* read_file leaves room for it */
    if (text && (at = strstr(text, key)) && (end = strchr(at, '\n'))) {
        while (at > text && at[-1] != '\n')
            at--;
        memmove(at, end + 1, len - (size_t)(end + 1 - text));
        len -= (size_t)(end + 1 - at);
        ckpt_test_write_file(path, text, len);
    }
    free(text);
}

/* A config.json is read through its family: a key it has a default for is taken at it, as
 * transformers takes it, and the model notes which; Megatron args that contradict the family
 * their hf_model_type names are refused, naming the checkpoint. */
CKPT_TEST(test_verify_config_family)
{
    ckpt_model *m;

    ckpt_test_copy_data_dir("hf/llama_tiny", "hf");
    drop_key("hf/config.json", "\"rms_norm_eps\"");
    ASSERT_OK(ckpt_model_open(&m, "hf", NULL));
    ASSERT_TRUE(ckpt_model_config_of(m)->norm_eps == 1e-6);
    ASSERT_EQ_INT(ckpt_model_note_count(m), 1);
    ASSERT_EQ_STR(ckpt_model_note_at(m, 0), "hf/config.json: rms_norm_eps is not given: 1e-06 (LLaMA's default)");
    ckpt_model_close(m);

    ASSERT_OK(rewrite("megatron/tp1", "mg", named_llama_windowed, NULL));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_model_open(&m, "mg", NULL));
    ASSERT_ERROR_MENTIONS("mg: args.hf_model_type is llama but args have a window_size");
}

CKPT_TEST(test_verify_counterpart)
{
    ckpt_model *a, *b;

    ASSERT_OK(ckpt_model_open(&a, ckpt_test_data("megatron/tp1"), NULL));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_model_open_counterpart(&b, a, NULL));
    ckpt_model_close(a);
    ASSERT_OK(ckpt_model_open(&a, ckpt_test_data("megatron/tp2pp2"), NULL));
    ASSERT_OK(ckpt_model_open_counterpart(&b, a, NULL));
    ASSERT_EQ_INT(ckpt_model_tp(a), 2);
    ASSERT_EQ_INT(ckpt_model_tp(b), 1);
    ckpt_model_close(b);
    ckpt_model_close(a);
    ASSERT_OK(ckpt_model_open(&a, ckpt_test_data("zero/llama_stage3_bf16_ws2"), NULL));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_model_open_counterpart(&b, a, NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "stage 3") != NULL);
    ckpt_model_close(a);
}

static int calls;
static void count(size_t done, size_t total, const char *what, void *payload)
{
    (void)what;
    (void)payload;
    if (done <= total)
        calls++;
}

CKPT_TEST(test_verify_report)
{
    ckpt_model *a, *b;
    ckpt_verify_options o = CKPT_VERIFY_OPTIONS_INIT;
    ckpt_verify_report *r;
    int64_t layers[] = { 3, 1 };
    size_t i;

    ASSERT_OK(ckpt_model_open(&a, ckpt_test_data("megatron/tp1"), NULL));
    ASSERT_OK(ckpt_model_open(&b, ckpt_test_data("megatron/tp2pp2"), NULL));
    o.device = CKPT_DEVICE_CPU;
    o.layers = layers;
    o.n_layers = 2;
    o.tokens = 5;
    o.progress = count;
    ASSERT_OK(ckpt_verify(a, b, &o, &r));
    ASSERT_TRUE(r->pass && !r->first_failure && r->tokens == 5 && r->tol == 1e-5);
    ASSERT_EQ_INT(r->n_entries, 5);
    ASSERT_EQ_INT(r->entries[0].index, 3);
    ASSERT_EQ_INT(r->entries[1].index, 1);
    ASSERT_EQ_STR(r->entries[4].name, "logits");
    for (i = 0; i < r->n_entries; i++)
        ASSERT_TRUE(r->entries[i].rel_l2 < 1e-6 && r->entries[i].cosine > 0.999999);
    ASSERT_TRUE(calls >= 3);
    ckpt_verify_report_free(r);

    /* a tolerance of 0 given means "the default"; a tiny one fails the layers that round */
    o.tol = 1e-30;
    ASSERT_OK(ckpt_verify(a, b, &o, &r));
    ASSERT_TRUE(!r->pass && r->first_failure && r->first_failure->index == 3);
    ckpt_verify_report_free(r);

    layers[0] = 9;
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_verify(a, b, &o, &r));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "layer 9") != NULL);
    ckpt_model_close(b);
    ASSERT_OK(ckpt_model_open(&b, ckpt_test_data("hf/llama_tiny"), NULL));
    o.layers = NULL;
    /* same hidden size, another model: it runs and fails from the first layer */
    ASSERT_OK(ckpt_verify(a, b, &o, &r));
    ASSERT_TRUE(!r->pass && r->first_failure == &r->entries[0]);
    ckpt_verify_report_free(r);
    ckpt_model_close(b);
    ckpt_model_close(a);
}
