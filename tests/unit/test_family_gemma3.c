/* Gemma 3 (Gemma3ForCausalLM, testdata/hf/transformers5/gemma3_tiny): its maps on the real
 * fixture. hf_gemma3_megatron gives Megatron-Bridge's Transformer Engine names (the sandwich
 * norms inside linear_proj and linear_fc2) and its inverse gives back every tensor byte for
 * byte; Megatron's layout cuts the GeGLU fc1 as [gate; up] and keeps the post norms whole on
 * every rank, in torch's module order; the two verify maps read the HF model and its Megatron
 * conversion as the same decoder, tensor for tensor. */
#include "test.h"

#include <ckpt/megatron.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define GEMMA "hf/transformers5/gemma3_tiny"
#define MAX_IN 96
#define N_LAYERS 4

typedef struct fixture {
    ckpt_ckpt *ck;
    ckpt_map_params *p;
    ckpt_map_input in[MAX_IN];
    size_t n;
} fixture;

static int fx_open(fixture *f, ckpt_graph *g)
{
    size_t i;
    int rc;

    memset(f, 0, sizeof *f);
    if ((rc = ckpt_open(&f->ck, ckpt_test_data(GEMMA "/model.safetensors"), NULL)) < 0 ||
        (rc = ckpt_map_params_new(&f->p)) < 0 || (rc = ckpt_map_params_set(f->p, "padded_vocab_size", 128)) < 0 ||
        (rc = ckpt_map_params_load_json(f->p, ckpt_test_data(GEMMA "/config.json"))) < 0)
        return rc;
    for (i = 0; i < ckpt_tensor_count(f->ck) && f->n < MAX_IN; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f->ck, i);
        f->in[f->n].name = t->name;
        if ((rc = ckpt_node_tensor(g, t, &f->in[f->n].node)) < 0)
            return rc;
        f->n++;
    }
    return 0;
}

static void fx_close(fixture *f)
{
    ckpt_close(f->ck);
    ckpt_map_params_free(f->p);
}

static const ckpt_node *fx_find(const fixture *f, const char *name)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        if (strcmp(f->in[i].name, name) == 0)
            return f->in[i].node;
    return NULL;
}

static int apply(const char *map, const ckpt_map_params *p, ckpt_graph *g, const ckpt_map_input *in, size_t n,
                 ckpt_map_result **r)
{
    ckpt_map *m = NULL;
    int rc = ckpt_map_builtin(&m, map);

    if (rc >= 0)
        rc = ckpt_map_apply(m, p, g, in, n, NULL, r);
    ckpt_map_free(m);
    return rc;
}

/* A result's outputs as inputs of the next map. */
static size_t as_inputs(const ckpt_map_result *r, ckpt_map_input *in)
{
    size_t i, n = ckpt_map_result_count(r);

    for (i = 0; i < n && i < MAX_IN; i++) {
        in[i].name = ckpt_map_result_at(r, i)->name;
        in[i].node = ckpt_map_result_at(r, i)->node;
        in[i].home = 0;
    }
    return i;
}

static const ckpt_node *find(const ckpt_map_result *r, const char *name)
{
    size_t i;

    for (i = 0; i < ckpt_map_result_count(r); i++)
        if (strcmp(ckpt_map_result_at(r, i)->name, name) == 0)
            return ckpt_map_result_at(r, i)->node;
    return NULL;
}

static int same_bytes(const ckpt_node *a, const ckpt_node *b)
{
    int64_t n = a && b ? ckpt_node_numel(a) : -1;
    size_t len = n > 0 ? (size_t)n * ckpt_dtype_size(ckpt_node_dtype(a)) : 0;
    unsigned char *x = malloc(len + 1), *y = malloc(len + 1);
    int same = 0;

    if (n > 0 && x && y && ckpt_node_dtype(a) == ckpt_node_dtype(b) && ckpt_node_ndim(a) == ckpt_node_ndim(b) &&
        memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) == 0 &&
        ckpt_node_read(a, 0, n, ckpt_node_dtype(a), x) == 0 && ckpt_node_read(b, 0, n, ckpt_node_dtype(b), y) == 0)
        same = memcmp(x, y, len) == 0;
    free(x);
    free(y);
    return same;
}

/* Megatron-Bridge's gemma3_bridge.py mapping_registry, per layer. */
static const char *const mcore_layer[] = {
    "self_attention.linear_qkv.layer_norm_weight", "self_attention.linear_qkv.weight",
    "self_attention.q_layernorm.weight",           "self_attention.k_layernorm.weight",
    "self_attention.linear_proj.weight",           "self_attention.linear_proj.post_layernorm.weight",
    "mlp.linear_fc1.layer_norm_weight",            "mlp.linear_fc1.weight",
    "mlp.linear_fc2.weight",                       "mlp.linear_fc2.post_layernorm.weight",
};
#define N_MCORE_LAYER (sizeof mcore_layer / sizeof mcore_layer[0])

CKPT_TEST(test_family_gemma3_megatron_names_round_trip)
{
    ckpt_map_input back_in[MAX_IN];
    ckpt_map_result *r = NULL, *back = NULL;
    ckpt_graph *g = NULL;
    fixture f;
    char name[160];
    size_t i, l, n;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_open(&f, g));
    ASSERT_EQ_INT(f.n, 2 + 13 * N_LAYERS); /* tied: no lm_head */
    ASSERT_OK(apply("hf_gemma3_megatron", f.p, g, f.in, f.n, &r));
    ASSERT_EQ_INT(ckpt_map_result_count(r), 2 + N_MCORE_LAYER * N_LAYERS);
    ASSERT_TRUE(find(r, "embedding.word_embeddings.weight") != NULL);
    ASSERT_TRUE(find(r, "decoder.final_layernorm.weight") != NULL);
    for (l = 0; l < N_LAYERS; l++)
        for (i = 0; i < N_MCORE_LAYER; i++) {
            snprintf(name, sizeof name, "decoder.layers.%zu.%s", l, mcore_layer[i]);
            if (!find(r, name))
                ckpt_test_fail(__FILE__, __LINE__, "no %s", name);
        }
    /* Gemma's post_attention_layernorm is the attention output's norm, not LLaMA's pre-MLP one */
    ASSERT_TRUE(same_bytes(find(r, "decoder.layers.1.self_attention.linear_proj.post_layernorm.weight"),
                           fx_find(&f, "model.layers.1.post_attention_layernorm.weight")));
    ASSERT_TRUE(same_bytes(find(r, "decoder.layers.1.mlp.linear_fc1.layer_norm_weight"),
                           fx_find(&f, "model.layers.1.pre_feedforward_layernorm.weight")));
    ASSERT_TRUE(same_bytes(find(r, "decoder.layers.1.mlp.linear_fc2.post_layernorm.weight"),
                           fx_find(&f, "model.layers.1.post_feedforward_layernorm.weight")));
    ASSERT_TRUE(same_bytes(find(r, "decoder.layers.1.self_attention.q_layernorm.weight"),
                           fx_find(&f, "model.layers.1.self_attn.q_norm.weight")));
    n = as_inputs(r, back_in);
    ASSERT_OK(apply("megatron_hf_gemma3", f.p, g, back_in, n, &back));
    ASSERT_EQ_INT(ckpt_map_result_count(back), f.n);
    for (i = 0; i < f.n; i++)
        if (!same_bytes(find(back, f.in[i].name), f.in[i].node))
            ckpt_test_fail(__FILE__, __LINE__, "%s does not come back byte for byte", f.in[i].name);
    ckpt_map_result_free(back);
    ckpt_map_result_free(r);
    fx_close(&f);
    ckpt_graph_free(g);
}

/* A tensor the map does not know, under a layer, is refused naming it. */
CKPT_TEST(test_family_gemma3_unknown_tensor)
{
    ckpt_map_result *r = NULL;
    ckpt_graph *g = NULL;
    fixture f;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_open(&f, g));
    f.in[f.n] = f.in[1];
    f.in[f.n++].name = "model.layers.2.self_attn.q_proj.bias";
    ASSERT_FAILS(CKPT_EFORMAT, apply("hf_gemma3_megatron", f.p, g, f.in, f.n, &r));
    ASSERT_ERROR_MENTIONS("model.layers.2.self_attn.q_proj.bias");
    fx_close(&f);
    ckpt_graph_free(g);
}

static int set_args(ckpt_arena *a, ckpt_value **args)
{
    int rc;

    if ((rc = ckpt_megatron_args_new(a, args)) < 0 || (rc = ckpt_megatron_args_set_int(a, *args, "num_layers", 4)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "hidden_size", 32)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "ffn_hidden_size", 64)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "num_attention_heads", 4)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "num_query_groups", 2)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, *args, "group_query_attention", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "kv_channels", 16)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "padded_vocab_size", 128)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, *args, "swiglu", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, *args, "gated_linear_unit", 1)) < 0)
        return rc;
    return 0;
}

/* Built from HF order, the model is in torch's module order (each post_layernorm after its
 * linear's own tensors); fc1 is cut as [gate; up] though args.swiglu is false (GeGLU), the
 * post norms are whole on every TP rank. */
CKPT_TEST(test_family_gemma3_megatron_layout)
{
    static const char *const layer1[] = {
        "self_attention.core_attention._extra_state",
        "self_attention.linear_proj.weight",           "self_attention.linear_proj._extra_state",
        "self_attention.linear_proj.post_layernorm.weight", "self_attention.linear_qkv.layer_norm_weight",
        "self_attention.linear_qkv.weight",            "self_attention.linear_qkv._extra_state",
        "self_attention.q_layernorm.weight",           "self_attention.k_layernorm.weight",
        "mlp.linear_fc1.layer_norm_weight",            "mlp.linear_fc1.weight",
        "mlp.linear_fc1._extra_state",                 "mlp.linear_fc2.weight",
        "mlp.linear_fc2._extra_state",                 "mlp.linear_fc2.post_layernorm.weight",
    };
    ckpt_megatron *m = NULL;
    ckpt_map_result *r = NULL;
    ckpt_arena *a = NULL;
    ckpt_value *args = NULL;
    ckpt_graph *g = NULL;
    ckpt_tensor_layout lay;
    fixture f;
    size_t i, first = 0;
    char want[160];

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(fx_open(&f, g));
    ASSERT_OK(apply("hf_gemma3_megatron", f.p, g, f.in, f.n, &r));
    ASSERT_OK(set_args(a, &args));
    ASSERT_OK(ckpt_megatron_new(&m, g, args, 1, NULL));
    for (i = 0; i < ckpt_map_result_count(r); i++)
        ASSERT_OK(ckpt_megatron_add_tensor(m, ckpt_map_result_at(r, i)->name, ckpt_map_result_at(r, i)->node));
    ASSERT_OK(ckpt_megatron_add_extra_states(m, 1));
    while (first < ckpt_megatron_tensor_count(m) &&
           strncmp(ckpt_megatron_tensor_at(m, first, NULL, &lay), "decoder.layers.1.", 17) != 0)
        first++;
    for (i = 0; i < sizeof layer1 / sizeof layer1[0]; i++) {
        snprintf(want, sizeof want, "decoder.layers.1.%s", layer1[i]);
        ASSERT_EQ_STR(ckpt_megatron_tensor_at(m, first + i, NULL, &lay), want);
    }
    for (i = 0; i < ckpt_megatron_tensor_count(m); i++) {
        const char *name = ckpt_megatron_tensor_at(m, i, NULL, &lay);
        if (strstr(name, "post_layernorm"))
            ASSERT_EQ_INT(lay.tp, CKPT_TP_REPLICATED);
        if (strstr(name, "linear_fc1.weight"))
            ASSERT_EQ_INT(lay.tp, CKPT_TP_SWIGLU);
    }
    ckpt_megatron_close(m);
    ckpt_map_result_free(r);
    fx_close(&f);
    ckpt_arena_free(a);
    ckpt_graph_free(g);
}

/* verify reads the HF model (verify_hf_gemma3) and its Megatron names (verify_megatron_gpt) as
 * one decoder: the same names, the sandwich norms as attn_post_norm and mlp_post_norm, the same
 * bytes. */
CKPT_TEST(test_family_gemma3_verify_maps_agree)
{
    ckpt_map_input mc[MAX_IN];
    ckpt_map_result *r = NULL, *hf = NULL, *mg = NULL;
    ckpt_graph *g = NULL;
    fixture f;
    size_t i, n;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_open(&f, g));
    ASSERT_OK(apply("verify_hf_gemma3", f.p, g, f.in, f.n, &hf));
    ASSERT_TRUE(find(hf, "layers.3.attn_post_norm.weight") != NULL);
    ASSERT_TRUE(find(hf, "layers.3.mlp_post_norm.weight") != NULL);
    ASSERT_TRUE(find(hf, "layers.3.mlp_norm.weight") != NULL);
    ASSERT_TRUE(find(hf, "layers.3.attn.q_norm.weight") != NULL);
    ASSERT_OK(apply("hf_gemma3_megatron", f.p, g, f.in, f.n, &r));
    n = as_inputs(r, mc);
    ASSERT_OK(ckpt_map_params_set(f.p, "group_size", 2)); /* verify's Megatron reader sets it from args */
    ASSERT_OK(apply("verify_megatron_gpt", f.p, g, mc, n, &mg));
    ASSERT_EQ_INT(ckpt_map_result_count(mg), ckpt_map_result_count(hf));
    for (i = 0; i < ckpt_map_result_count(hf); i++) {
        const char *name = ckpt_map_result_at(hf, i)->name;
        const ckpt_node *x = find(mg, name);
        /* the Megatron embedding is padded: compare the true rows through the HF side's shape */
        if (strcmp(name, "embed.weight") == 0)
            ASSERT_EQ_INT(ckpt_node_shape(x)[0], 128);
        else if (!same_bytes(x, ckpt_map_result_at(hf, i)->node))
            ckpt_test_fail(__FILE__, __LINE__, "%s differs between the two verify maps", name);
    }
    ckpt_map_result_free(mg);
    ckpt_map_result_free(hf);
    ckpt_map_result_free(r);
    fx_close(&f);
    ckpt_graph_free(g);
}

/* The args a Gemma 3 conversion writes (gemma3.json's megatron.args_out), at TP 1. */
static int gemma_args(ckpt_arena *a, ckpt_value **args)
{
    int rc;

    if ((rc = set_args(a, args)) < 0 || (rc = ckpt_megatron_args_set_int(a, *args, "vocab_size", 128)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "padded_vocab_size", 256)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, *args, "position_embedding_type", "rope")) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, *args, "rotary_base", 1e6)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, *args, "normalization", "RMSNorm")) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, *args, "norm_epsilon", 1e-6)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, *args, "add_bias_linear", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, *args, "openai_gelu", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, *args, "apply_layernorm_1p", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, *args, "qk_layernorm", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_int_pair(a, *args, "window_size", 3, 0)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "window_attn_skip_freq", 4)) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, *args, "softmax_scale", 0.2041241452319315)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, *args, "hf_model_type", "gemma3_text")) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, *args, "hf_query_pre_attn_scalar", 24)) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, *args, "hf_rope_local_base_freq", 1e4)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, *args, "untie_embeddings_and_output_weights", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, *args, "transformer_impl", "transformer_engine")) < 0)
        return rc;
    return 0;
}

/* hf2mcore's work on `in` as the family does it: hf_gemma3_megatron, the args above, the TE
 * extra states, the rank files at TP `tp` PP `pp` under `out`; `drop` (a Megatron name) left
 * out, as a faulty converter would. */
static int write_megatron(const fixture *f, const ckpt_map_input *in, size_t n, ckpt_graph *g, const char *drop,
                          int tp, int pp, const char *out)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_map_result *r = NULL;
    ckpt_megatron *m = NULL;
    ckpt_plan *plan = NULL;
    ckpt_arena *a = NULL;
    ckpt_value *args = NULL;
    size_t i;
    int rc;

    t.tp = tp;
    t.pp = pp;
    if ((rc = ckpt_arena_new(&a)) < 0 || (rc = ckpt_map_params_set(f->p, "padded_vocab_size", 256)) < 0 ||
        (rc = apply("hf_gemma3_megatron", f->p, g, in, n, &r)) < 0 || (rc = gemma_args(a, &args)) < 0 ||
        (rc = ckpt_megatron_new(&m, g, args, 1, NULL)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(r) && rc == 0; i++)
        if (!drop || strcmp(ckpt_map_result_at(r, i)->name, drop) != 0)
            rc = ckpt_megatron_add_tensor(m, ckpt_map_result_at(r, i)->name, ckpt_map_result_at(r, i)->node);
    if (rc < 0 || (rc = ckpt_megatron_add_extra_states(m, 1)) < 0 || (rc = ckpt_plan_new(&plan)) < 0 ||
        (rc = ckpt_megatron_plan(m, &t, plan)) < 0)
        goto done;
    rc = ckpt_plan_execute(plan, out, NULL, NULL);
done:
    ckpt_plan_free(plan);
    ckpt_megatron_close(m);
    ckpt_map_result_free(r);
    ckpt_arena_free(a);
    return rc;
}

/* verify reads GeGLU (gated_linear_unit with openai_gelu), the window, softmax_scale and the
 * zero-centred norms from Megatron's args and runs the sandwich norms it finds; the embedding
 * scale and the local RoPE base are the family's to say (formats/families/gemma3.json), so
 * they are given as options, as they are for gemma3_tiny. */
static int open_gemma(const char *path, int merge, ckpt_model **m)
{
    ckpt_model_options o;

    ckpt_model_options_init(&o);
    o.merge_tp = merge;
    o.overrides.embed_scale = sqrt(32.0);
    o.overrides.rope_theta_local = 1e4;
    return ckpt_model_open(m, path, &o);
}

/* verify's CPU forward of the Megatron model at `path` (its ranks, or merged) against
 * transformers' logits of the fixture. */
static double gemma_logits_error(const char *path, int merge, const char **why)
{
    ckpt_model *m = NULL;
    unsigned char *text;
    cJSON *j, *in, *rows;
    int32_t ids[16];
    float out[16 * 128];
    size_t len;
    int n, t, v;
    double worst = 0;

    *why = NULL;
    if (!(text = ckpt_test_read_file(ckpt_test_data(GEMMA "/logits.json"), &len)))
        return INFINITY;
    j = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    in = cJSON_GetObjectItem(j, "input_ids");
    rows = cJSON_GetObjectItem(j, "logits");
    n = cJSON_GetArraySize(in);
    for (t = 0; t < n && t < 16; t++)
        ids[t] = cJSON_GetArrayItem(in, t)->valueint;
    if (open_gemma(path, merge, &m) < 0 || ckpt_model_forward(m, NULL, ids, n, out) < 0) {
        *why = ckpt_error_last()->message;
        worst = INFINITY;
    }
    for (t = 0; t < n && !*why; t++)
        for (v = 0; v < 128; v++)
            worst = fmax(worst, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, t), v)->valuedouble - out[t * 128 + v]));
    ckpt_model_close(m);
    cJSON_Delete(j);
    return worst;
}

/* The Megatron model written at TP 2 PP 2 (rank files on disk, the fc1 [gate; up] cut per rank,
 * post norms on every rank), read back and merged, maps back to the HF tensors byte for byte
 * (the tied output layer the last stage holds is the embedding), and verify's forward of it,
 * run as its ranks and merged, gives transformers' logits. */
CKPT_TEST(test_family_gemma3_megatron_tp2pp2_files)
{
    ckpt_map_input back_in[MAX_IN];
    const ckpt_node *output = NULL, *embedding = NULL;
    ckpt_megatron *read = NULL;
    ckpt_map_result *back = NULL;
    ckpt_graph *g = NULL, *g2 = NULL;
    ckpt_set *set = NULL;
    const char *why;
    fixture f;
    size_t i, n = 0;
    double e;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_graph_new(&g2));
    ASSERT_OK(fx_open(&f, g));
    ASSERT_OK(write_megatron(&f, f.in, f.n, g, NULL, 2, 2, "mc"));
    ASSERT_OK(ckpt_set_open(&set, "mc", NULL));
    ASSERT_OK(ckpt_megatron_open(&read, set, g2, NULL));
    ASSERT_EQ_INT(ckpt_megatron_info_of(read)->tp, 2);
    ASSERT_EQ_INT(ckpt_megatron_info_of(read)->pp, 2);
    for (i = 0; i < ckpt_megatron_tensor_count(read) && n < MAX_IN; i++) {
        const char *name = ckpt_megatron_tensor_at(read, i, &back_in[n].node, NULL);
        if (strstr(name, "_extra_state"))
            continue;
        /* tied: the last stage's copy of the embedding (megatron-core keeps one with PP > 1) */
        if (strcmp(name, "output_layer.weight") == 0) {
            output = back_in[n].node;
            continue;
        }
        if (strcmp(name, "embedding.word_embeddings.weight") == 0)
            embedding = back_in[n].node;
        back_in[n].name = name;
        back_in[n++].home = 0;
    }
    ASSERT_TRUE(same_bytes(output, embedding));
    ASSERT_OK(apply("megatron_hf_gemma3", f.p, g2, back_in, n, &back));
    ASSERT_EQ_INT(ckpt_map_result_count(back), f.n);
    for (i = 0; i < f.n; i++)
        if (!same_bytes(find(back, f.in[i].name), f.in[i].node))
            ckpt_test_fail(__FILE__, __LINE__, "%s does not come back byte for byte", f.in[i].name);
    for (i = 0; i < 2; i++)
        if ((e = gemma_logits_error("mc", (int)i, &why)) > 1e-5)
            ckpt_test_fail(__FILE__, __LINE__, "mc%s: max abs logit error %g (%s)", i ? " merged" : "", e,
                           why ? why : "");
    ckpt_map_result_free(back);
    ckpt_megatron_close(read);
    ckpt_set_close(set);
    fx_close(&f);
    ckpt_graph_free(g2);
    ckpt_graph_free(g);
}

/* The fixture's safetensors with 1 added to every element of the named float32 tensors, as
 * `out`: a converter that stores Gemma's (1 + w) where a zero-centred norm wants w. */
static int plus_one(const char *out, const char *const *names, size_t n_names)
{
    size_t len, k;
    unsigned char *b = ckpt_test_read_file(ckpt_test_data(GEMMA "/model.safetensors"), &len);
    uint64_t hlen = 0;
    cJSON *h = NULL;
    int rc = CKPT_EFORMAT;

    for (k = 0; b && k < 8; k++)
        hlen |= (uint64_t)b[k] << (8 * k);
    if (!b || hlen > len - 8 || !(h = cJSON_ParseWithLength((const char *)b + 8, (size_t)hlen)))
        goto done;
    for (k = 0; k < n_names; k++) {
        const cJSON *offs = cJSON_GetObjectItem(cJSON_GetObjectItem(h, names[k]), "data_offsets");
        size_t at = 8 + (size_t)hlen, i;
        float x;
        if (!offs)
            goto done;
        for (i = (size_t)cJSON_GetArrayItem(offs, 0)->valuedouble; i < (size_t)cJSON_GetArrayItem(offs, 1)->valuedouble;
             i += 4) {
            memcpy(&x, b + at + i, 4);
            x += 1.0f;
            memcpy(b + at + i, &x, 4);
        }
    }
    ckpt_test_write_file(out, b, len);
    rc = 0;
done:
    cJSON_Delete(h);
    free(b);
    return rc;
}

/* The global index of the first layer verify finds different between two conversions (-1:
 * none), and in `error` (cap bytes) why it could not run, if so. */
static int64_t first_failure(const char *good, const char *bad, char *error, size_t cap)
{
    ckpt_verify_options o = CKPT_VERIFY_OPTIONS_INIT;
    ckpt_verify_report *rep = NULL;
    ckpt_model *a = NULL, *b = NULL;
    int64_t at = -2;

    o.device = CKPT_DEVICE_CPU;
    o.tokens = 8;
    error[0] = 0;
    if (open_gemma(good, 0, &a) < 0 || open_gemma(bad, 0, &b) < 0 || ckpt_verify(a, b, &o, &rep) < 0)
        snprintf(error, cap, "%s", ckpt_error_last()->message);
    else if (rep->first_failure) {
        at = rep->first_failure->index;
        snprintf(error, cap, "%s", rep->first_failure->error ? rep->first_failure->error : "");
    } else
        at = -1;
    ckpt_verify_report_free(rep);
    ckpt_model_close(a);
    ckpt_model_close(b);
    return at;
}

CKPT_TEST(test_family_gemma3_verify_names_the_broken_layer)
{
    static const char *const norms[] = {
        "model.layers.1.input_layernorm.weight",           "model.layers.1.post_attention_layernorm.weight",
        "model.layers.1.pre_feedforward_layernorm.weight", "model.layers.1.post_feedforward_layernorm.weight",
        "model.layers.1.self_attn.q_norm.weight",          "model.layers.1.self_attn.k_norm.weight",
    };
    const ckpt_node *q = NULL;
    ckpt_ckpt *twice = NULL;
    ckpt_map_input in[MAX_IN];
    ckpt_graph *g = NULL;
    char error[512];
    fixture f;
    size_t i;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_open(&f, g));
    ASSERT_OK(write_megatron(&f, f.in, f.n, g, NULL, 2, 1, "good"));
    ASSERT_EQ_INT(first_failure("good", "good", error, sizeof error), -1);

    /* (1 + w) stored for layer 1's norms: Megatron's zero-centred norms add the 1 again */
    ASSERT_OK(plus_one("twice.safetensors", norms, sizeof norms / sizeof norms[0]));
    ASSERT_OK(ckpt_open(&twice, "twice.safetensors", NULL));
    memcpy(in, f.in, f.n * sizeof in[0]);
    for (i = 0; i < f.n; i++)
        ASSERT_OK(ckpt_node_tensor(g, ckpt_tensor_at(twice, i), &in[i].node));
    ASSERT_OK(write_megatron(&f, in, f.n, g, NULL, 2, 1, "plus_one"));
    ASSERT_EQ_INT(first_failure("good", "plus_one", error, sizeof error), 1);

    /* layer 1's q_norm and k_norm swapped */
    memcpy(in, f.in, f.n * sizeof in[0]);
    q = fx_find(&f, "model.layers.1.self_attn.q_norm.weight");
    for (i = 0; i < f.n; i++)
        if (strcmp(in[i].name, "model.layers.1.self_attn.q_norm.weight") == 0)
            in[i].node = fx_find(&f, "model.layers.1.self_attn.k_norm.weight");
        else if (strcmp(in[i].name, "model.layers.1.self_attn.k_norm.weight") == 0)
            in[i].node = q;
    ASSERT_OK(write_megatron(&f, in, f.n, g, NULL, 2, 1, "swapped"));
    ASSERT_EQ_INT(first_failure("good", "swapped", error, sizeof error), 1);

    /* layer 1's post-MLP norm left out */
    ASSERT_OK(write_megatron(&f, f.in, f.n, g, "decoder.layers.1.mlp.linear_fc2.post_layernorm.weight", 2, 1, "cut"));
    ASSERT_EQ_INT(first_failure("good", "cut", error, sizeof error), 1);
    if (!strstr(error, "mlp_post_norm"))
        ckpt_test_fail(__FILE__, __LINE__, "layer 1 fails for another reason: %s", error);

    ckpt_close(twice);
    fx_close(&f);
    ckpt_graph_free(g);
}

