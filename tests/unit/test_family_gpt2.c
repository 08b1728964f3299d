/* GPT-2 (GPT2LMHeadModel) as data, on transformers' testdata/hf/gpt2_tiny: the built-in map
 * hf_gpt2_megatron turns every tensor into what megatron-core's GPT model holds (checked
 * element by element against the Conv1D weights: [in, out] transposed, c_attn's
 * [all q | all k | all v] interleaved per head), its inverse gives back every input byte, its
 * variant local names the norms as Megatron's local layers do; hub names without
 * `transformer.` map alike, a tensor no rule takes is refused naming it; verify_hf_gpt2 splits
 * c_attn as GPT2Attention does. The family (formats/families/gpt2.json) reads both fixtures'
 * configs, checks and orders the tensors, leaves GPT-2's buffers out, refuses what Megatron
 * cannot compute naming the field, writes the Megatron args and reads them back to the same
 * config.json, and tells GPT-2 args from others (gpt2style_tp2 still refused as before). */
#include "gpt2_fixture.h"

/* got [rows, cols] == want^T ([cols, rows]). */
static int is_transpose(const ckpt_node *got, const ckpt_node *want)
{
    float *x = values(got), *y = values(want);
    int64_t rows, cols, i, j;
    int ok = x && y && ckpt_node_ndim(got) == 2 && ckpt_node_ndim(want) == 2 &&
             ckpt_node_shape(got)[0] == ckpt_node_shape(want)[1] && ckpt_node_shape(got)[1] == ckpt_node_shape(want)[0];

    rows = ok ? ckpt_node_shape(got)[0] : 0;
    cols = ok ? ckpt_node_shape(got)[1] : 0;
    for (i = 0; i < rows && ok; i++)
        for (j = 0; j < cols && ok; j++)
            ok = x[i * cols + j] == y[j * rows + i];
    free(x);
    free(y);
    return ok;
}

/* linear_qkv (weight [3H, H] or bias [3H]) against c_attn ([H, 3H] or [3H]): row
 * (head * 3 + part) * d + r is column part * H + head * d + r. */
static int is_qkv(const ckpt_node *qkv, const ckpt_node *c_attn)
{
    float *x = values(qkv), *y = values(c_attn);
    int bias = ckpt_node_ndim(c_attn) == 1, ok = x && y;
    int64_t head, part, r, col, cols = bias ? 1 : HIDDEN;

    ok = ok && ckpt_node_shape(qkv)[0] == 3 * HIDDEN && (bias || ckpt_node_shape(qkv)[1] == HIDDEN);
    for (head = 0; head < HEADS && ok; head++)
        for (part = 0; part < 3 && ok; part++)
            for (r = 0; r < HEAD_DIM && ok; r++)
                for (col = 0; col < cols && ok; col++) {
                    int64_t row = (head * 3 + part) * HEAD_DIM + r, src = part * HIDDEN + head * HEAD_DIM + r;
                    ok = x[row * cols + col] == (bias ? y[src] : y[col * 3 * HIDDEN + src]);
                }
    free(x);
    free(y);
    return ok;
}

#define T(s) "transformer." s
#define D(s) "decoder.layers.1." s

CKPT_TEST(test_family_gpt2_to_megatron)
{
    fixture f;
    ckpt_map_params *p = NULL;
    ckpt_map_result *r = NULL;
    float *emb, *wte;
    int64_t i;

    ASSERT_OK(gpt2_open(&f, 0));
    ASSERT_EQ_INT(f.n, 28);
    ASSERT_OK(params_for(&p, 256));
    ASSERT_OK(fx_apply("hf_gpt2_megatron", p, f.g, f.in, f.n, &r));
    ASSERT_EQ_INT(ckpt_map_result_count(r), 28);
    ASSERT_TRUE(
        is_qkv(fx_output(r, D("self_attention.linear_qkv.weight")), fx_input(&f, T("h.1.attn.c_attn.weight"))));
    ASSERT_TRUE(is_qkv(fx_output(r, D("self_attention.linear_qkv.bias")), fx_input(&f, T("h.1.attn.c_attn.bias"))));
    ASSERT_TRUE(is_transpose(fx_output(r, D("self_attention.linear_proj.weight")),
                             fx_input(&f, T("h.1.attn.c_proj.weight"))));
    ASSERT_TRUE(is_transpose(fx_output(r, D("mlp.linear_fc1.weight")), fx_input(&f, T("h.1.mlp.c_fc.weight"))));
    ASSERT_TRUE(is_transpose(fx_output(r, D("mlp.linear_fc2.weight")), fx_input(&f, T("h.1.mlp.c_proj.weight"))));
    ASSERT_TRUE(fx_same(fx_output(r, D("self_attention.linear_proj.bias")), fx_input(&f, T("h.1.attn.c_proj.bias"))));
    ASSERT_TRUE(fx_same(fx_output(r, D("self_attention.linear_qkv.layer_norm_weight")),
                        fx_input(&f, T("h.1.ln_1.weight"))));
    ASSERT_TRUE(fx_same(fx_output(r, D("self_attention.linear_qkv.layer_norm_bias")), fx_input(&f, T("h.1.ln_1.bias"))));
    ASSERT_TRUE(fx_same(fx_output(r, D("mlp.linear_fc1.layer_norm_bias")), fx_input(&f, T("h.1.ln_2.bias"))));
    ASSERT_TRUE(fx_same(fx_output(r, D("mlp.linear_fc1.bias")), fx_input(&f, T("h.1.mlp.c_fc.bias"))));
    ASSERT_TRUE(fx_same(fx_output(r, D("mlp.linear_fc2.bias")), fx_input(&f, T("h.1.mlp.c_proj.bias"))));
    ASSERT_TRUE(fx_same(fx_output(r, "embedding.position_embeddings.weight"), fx_input(&f, T("wpe.weight"))));
    ASSERT_TRUE(fx_same(fx_output(r, "decoder.final_layernorm.bias"), fx_input(&f, T("ln_f.bias"))));
    /* the vocabulary padded with zero rows */
    emb = values(fx_output(r, "embedding.word_embeddings.weight"));
    wte = values(fx_input(&f, T("wte.weight")));
    ASSERT_TRUE(emb && wte && ckpt_node_shape(fx_output(r, "embedding.word_embeddings.weight"))[0] == 256);
    for (i = 0; i < 256 * HIDDEN; i++)
        if (emb[i] != (i < VOCAB * HIDDEN ? wte[i] : 0.0f))
            break;
    free(emb);
    free(wte);
    ASSERT_EQ_INT(i, 256 * HIDDEN);
    ASSERT_TRUE(fx_output(r, "output_layer.weight") == NULL);
    ckpt_map_result_free(r);
    ckpt_map_params_free(p);
    fx_close(&f);
}

/* megatron_hf_gpt2(hf_gpt2_megatron(x)) == x, every tensor and nothing else; hub names
 * without the prefix give the same Megatron tensors. */
CKPT_TEST(test_family_gpt2_round_trip)
{
    fixture f, hub;
    ckpt_map_params *p = NULL;
    ckpt_map_result *mg = NULL, *back = NULL, *from_hub = NULL;
    ckpt_map_input in[MAX_IN];
    size_t i, n;

    ASSERT_OK(gpt2_open(&f, 0));
    ASSERT_OK(params_for(&p, 256));
    ASSERT_OK(fx_apply("hf_gpt2_megatron", p, f.g, f.in, f.n, &mg));
    n = ckpt_map_result_count(mg);
    for (i = 0; i < n; i++) {
        in[i].name = ckpt_map_result_at(mg, i)->name;
        in[i].node = ckpt_map_result_at(mg, i)->node;
        in[i].home = 0;
    }
    ASSERT_OK(fx_apply("megatron_hf_gpt2", p, f.g, in, n, &back));
    ASSERT_EQ_INT(ckpt_map_result_count(back), f.n);
    for (i = 0; i < f.n; i++)
        if (!fx_same(fx_output(back, f.in[i].name), f.in[i].node))
            break;
    ASSERT_EQ_INT(i, f.n);

    ASSERT_OK(gpt2_open(&hub, 1));
    ASSERT_TRUE(fx_input(&hub, "h.0.attn.c_attn.weight") != NULL);
    ASSERT_OK(fx_apply("hf_gpt2_megatron", p, hub.g, hub.in, hub.n, &from_hub));
    ASSERT_EQ_INT(ckpt_map_result_count(from_hub), n);
    for (i = 0; i < n; i++)
        if (!fx_same(fx_output(from_hub, ckpt_map_result_at(mg, i)->name), ckpt_map_result_at(mg, i)->node))
            break;
    ASSERT_EQ_INT(i, n);
    ckpt_map_result_free(from_hub);
    ckpt_map_result_free(back);
    ckpt_map_result_free(mg);
    ckpt_map_params_free(p);
    fx_close(&hub);
    fx_close(&f);
}

/* A layer tensor no rule takes is refused, naming it. */
CKPT_TEST(test_family_gpt2_unknown_tensor)
{
    fixture f;
    ckpt_map_params *p = NULL;
    ckpt_map_result *r = NULL;

    ASSERT_OK(gpt2_open(&f, 0));
    snprintf(f.names[3], sizeof f.names[3], "transformer.h.0.attn.c_foo.weight");
    ASSERT_OK(params_for(&p, 256));
    ASSERT_TRUE(fx_apply("hf_gpt2_megatron", p, f.g, f.in, f.n, &r) < 0);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "transformer.h.0.attn.c_foo.weight") != NULL);
    ckpt_map_params_free(p);
    fx_close(&f);
}

/* verify's reading: q, k, v are c_attn's column thirds, transposed, as GPT2Attention splits
 * them; Conv1D weights transposed; biases as they are. */
CKPT_TEST(test_family_gpt2_verify_map)
{
    fixture f;
    ckpt_map_result *r = NULL;
    float *q, *k, *v, *w;
    int64_t i, j, bad = 0;

    ASSERT_OK(gpt2_open(&f, 0));
    ASSERT_OK(fx_apply("verify_hf_gpt2", NULL, f.g, f.in, f.n, &r));
    ASSERT_EQ_INT(ckpt_map_result_count(r), 2 + 2 * 16 + 2);
    q = values(fx_output(r, "layers.1.attn.q.weight"));
    k = values(fx_output(r, "layers.1.attn.k.weight"));
    v = values(fx_output(r, "layers.1.attn.v.weight"));
    w = values(fx_input(&f, T("h.1.attn.c_attn.weight")));
    ASSERT_TRUE(q && k && v && w);
    for (i = 0; i < HIDDEN; i++)
        for (j = 0; j < HIDDEN; j++)
            bad += q[i * HIDDEN + j] != w[j * 3 * HIDDEN + i] || k[i * HIDDEN + j] != w[j * 3 * HIDDEN + HIDDEN + i] ||
                   v[i * HIDDEN + j] != w[j * 3 * HIDDEN + 2 * HIDDEN + i];
    free(q);
    free(k);
    free(v);
    free(w);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_TRUE(is_transpose(fx_output(r, "layers.1.mlp.fc2.weight"), fx_input(&f, T("h.1.mlp.c_proj.weight"))));
    ASSERT_TRUE(fx_same(fx_output(r, "pos_embed.weight"), fx_input(&f, T("wpe.weight"))));
    ASSERT_TRUE(fx_same(fx_output(r, "layers.0.attn_norm.bias"), fx_input(&f, T("h.0.ln_1.bias"))));
    ASSERT_TRUE(fx_output(r, "layers.0.attn.v.bias") != NULL && fx_output(r, "final_norm.bias") != NULL);
    ckpt_map_result_free(r);
    fx_close(&f);
}

static const char *renamed(const ckpt_map *m, const char *from, ckpt_graph *g, ckpt_map_result **r)
{
    static const int64_t shape[1] = { 4 };
    ckpt_map_params *p = NULL;
    ckpt_map_input in;
    const char *name = NULL;

    in.name = from;
    in.home = 0;
    if (ckpt_node_zeros(g, CKPT_DTYPE_F32, 1, shape, &in.node) == 0 && ckpt_map_params_new(&p) == 0 &&
        ckpt_map_params_set(p, "hidden_size", 32) == 0 && ckpt_map_params_set(p, "num_attention_heads", 4) == 0 &&
        ckpt_map_apply(m, p, g, &in, 1, NULL, r) == 0 && ckpt_map_result_count(*r) == 1)
        name = ckpt_map_result_at(*r, 0)->name;
    ckpt_map_params_free(p);
    return name;
}

/* hf_gpt2_megatron's variant local (hf_gpt2_megatron_local and megatron_hf_gpt2_local, as
 * gpt2.json names them): the norms under Megatron's local names, everything else as the map
 * says. */
CKPT_TEST(test_family_gpt2_local_names)
{
    ckpt_map *m = NULL;
    ckpt_map_result *r = NULL;
    ckpt_graph *g = NULL;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_map_builtin(&m, "hf_gpt2_megatron_local"));
    ASSERT_EQ_STR(ckpt_map_name(m), "hf_gpt2_megatron_local");
    ASSERT_EQ_STR(renamed(m, "transformer.h.3.ln_1.bias", g, &r), "decoder.layers.3.input_layernorm.bias");
    ckpt_map_result_free(r);
    ASSERT_EQ_STR(renamed(m, "transformer.h.3.ln_2.weight", g, &r), "decoder.layers.3.pre_mlp_layernorm.weight");
    ckpt_map_result_free(r);
    ASSERT_EQ_STR(renamed(m, "transformer.h.3.attn.c_proj.bias", g, &r), "decoder.layers.3.self_attention.linear_proj.bias");
    ckpt_map_result_free(r);
    ckpt_map_free(m);

    ASSERT_OK(ckpt_map_builtin(&m, "megatron_hf_gpt2_local"));
    ASSERT_EQ_STR(ckpt_map_name(m), "megatron_hf_gpt2_local");
    ASSERT_EQ_STR(renamed(m, "decoder.layers.0.pre_mlp_layernorm.bias", g, &r), "transformer.h.0.ln_2.bias");
    ckpt_map_result_free(r);
    ckpt_map_free(m);

    ASSERT_OK(ckpt_map_builtin(&m, "hf_gpt2_megatron"));
    ASSERT_EQ_STR(renamed(m, "transformer.h.3.ln_1.bias", g, &r),
                  "decoder.layers.3.self_attention.linear_qkv.layer_norm_bias");
    ckpt_map_result_free(r);
    ckpt_map_free(m);

    ckpt_graph_free(g);
}

/* ---- the family (formats/families/gpt2.json) ---- */

/* Megatron args of a GPT-2 Megatron-LM trained itself (no hf_* attributes): LayerNorm, linear
 * biases, GELU in the tanh approximation (--openai-gelu, transformers' gelu_new), learned
 * absolute positions, multi-head attention, tied embeddings. */
static int trained_gpt2_args(ckpt_arena *a, const char *impl, ckpt_value **args)
{
    ckpt_value *v = NULL;
    int rc;

    if ((rc = ckpt_megatron_args_new(a, &v)) < 0 || (rc = ckpt_megatron_args_set_int(a, v, "num_layers", 2)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "hidden_size", HIDDEN)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "ffn_hidden_size", FFN)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "num_attention_heads", HEADS)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "num_query_groups", HEADS)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, v, "group_query_attention", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "kv_channels", HEAD_DIM)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "max_position_embeddings", POSITIONS)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "seq_length", POSITIONS)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "vocab_size", VOCAB)) < 0 ||
        (rc = ckpt_megatron_args_set_int(a, v, "padded_vocab_size", 256)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, v, "position_embedding_type", "learned_absolute")) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, v, "add_position_embedding", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, v, "normalization", "LayerNorm")) < 0 ||
        (rc = ckpt_megatron_args_set_float(a, v, "layernorm_epsilon", 1e-5)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, v, "swiglu", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, v, "openai_gelu", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, v, "add_bias_linear", 1)) < 0 ||
        (rc = ckpt_megatron_args_set_bool(a, v, "untie_embeddings_and_output_weights", 0)) < 0 ||
        (rc = ckpt_megatron_args_set_dtype(a, v, "params_dtype", CKPT_DTYPE_F32)) < 0 ||
        (rc = ckpt_megatron_args_set_str(a, v, "transformer_impl", impl)) < 0)
        return rc;
    *args = v;
    return 0;
}

/* Both fixtures (transformers 4 and 5 configs) are GPT-2 with the sizes GPT2Config takes,
 * n_inner null being 4 x n_embd; the tensors are what the config implies, in state-dict order. */
CKPT_TEST(test_family_gpt2_config)
{
    static const char *const dirs[] = { "hf/gpt2_tiny", "hf/transformers5/gpt2_tiny" };
    const ckpt_family *f;
    ckpt_family_config *c;
    ckpt_model_config mc;
    const ckpt_value *v;
    fixture fx;
    const char *names[MAX_IN];
    size_t perm[MAX_IN], i;

    for (i = 0; i < 2; i++) {
        ASSERT_OK(read_config(dirs[i], NULL, 0, &f, &c));
        ASSERT_EQ_STR(ckpt_family_name(f), "gpt2");
        ASSERT_EQ_STR(ckpt_family_title(f), "GPT-2");
        ASSERT_TRUE(fx_int(c, "hidden_size") == HIDDEN && fx_int(c, "num_layers") == 2 &&
                    fx_int(c, "num_heads") == HEADS && fx_int(c, "head_dim") == HEAD_DIM &&
                    fx_int(c, "num_kv_heads") == HEADS && fx_int(c, "ffn_size") == FFN &&
                    fx_int(c, "vocab_size") == VOCAB && fx_int(c, "max_positions") == POSITIONS &&
                    fx_int(c, "tied") == 1 && fx_int(c, "bos_token_id") == 127);
        ASSERT_OK(ckpt_family_config_get(c, "norm_eps", &v));
        ASSERT_TRUE(v->kind == CKPT_VAL_FLOAT && v->u.real == 1e-5);
        ckpt_family_config_free(c);
    }
    ASSERT_OK(read_config(dirs[0], NULL, 0, &f, &c));
    /* the forward pass verify runs: GPT-2's math */
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.norm == CKPT_NORM_LAYER && mc.act == CKPT_ACT_GELU_TANH && mc.position == CKPT_POSITION_LEARNED &&
                mc.tied_embeddings && !mc.qk_norm && !mc.norm_weight_plus_one);
    ASSERT_TRUE(mc.num_layers == 2 && mc.hidden_size == HIDDEN && mc.num_heads == HEADS && mc.num_kv_heads == HEADS &&
                mc.head_dim == HEAD_DIM && mc.ffn_hidden_size == FFN && mc.vocab_size == VOCAB && mc.norm_eps == 1e-5);
    ASSERT_EQ_STR(ckpt_family_string(f, "verify.maps.huggingface"), "verify_hf_gpt2");
    ASSERT_OK(gpt2_open(&fx, 0));
    ASSERT_OK(ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "in/config.json", "in/model.safetensors", fx.in, fx.n));
    for (i = 0; i < fx.n; i++)
        names[i] = fx.in[i].name;
    ASSERT_OK(ckpt_family_order(f, CKPT_FAMILY_HF, names, fx.n, perm));
    ASSERT_EQ_STR(names[perm[0]], "transformer.wte.weight");
    ASSERT_EQ_STR(names[perm[1]], "transformer.wpe.weight");
    ASSERT_EQ_STR(names[perm[2]], "transformer.h.0.ln_1.weight");
    ASSERT_EQ_STR(names[perm[4]], "transformer.h.0.attn.c_attn.weight");
    ASSERT_EQ_STR(names[perm[13]], "transformer.h.0.mlp.c_proj.bias");
    ASSERT_EQ_STR(names[perm[27]], "transformer.ln_f.bias");
    ASSERT_EQ_STR(ckpt_family_left_out(f, CKPT_FAMILY_HF, "transformer.h.3.attn.bias"),
                  "GPT-2's causal-mask buffer (attn.bias), which every reader rebuilds");
    ASSERT_TRUE(ckpt_family_left_out(f, CKPT_FAMILY_HF, "transformer.h.3.attn.masked_bias") != NULL);
    ASSERT_TRUE(ckpt_family_left_out(f, CKPT_FAMILY_HF, "transformer.h.3.attn.c_attn.bias") == NULL);

    /* a tensor missing, one of the wrong shape (n_inner 96), one no GPT-2 has */
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "in/config.json",
                                                           "in/model.safetensors", fx.in, fx.n - 1));
    ASSERT_ERROR_MENTIONS("transformer.wte.weight");
    snprintf(fx.names[3], sizeof fx.names[3], "transformer.h.0.attn.q_proj.weight");
    ASSERT_TRUE(ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "in/config.json", "in/model.safetensors", fx.in,
                                          fx.n) < 0);
    ASSERT_ERROR_MENTIONS("transformer.h.0.attn.q_proj.weight");
    ckpt_family_config_free(c);
    {
        static const char *const n_inner[] = { "n_inner", "96" };
        ASSERT_OK(read_config(dirs[0], n_inner, 2, &f, &c));
        snprintf(fx.names[3], sizeof fx.names[3], "transformer.h.0.attn.c_proj.weight");
        ASSERT_TRUE(ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "in/config.json", "in/model.safetensors", fx.in,
                                              fx.n) < 0);
        ASSERT_ERROR_MENTIONS("transformer.h.0.mlp.c_fc");
        ASSERT_ERROR_MENTIONS("n_inner");
        ckpt_family_config_free(c);
    }
    fx_close(&fx);
}

/* What a GPT-2 config says that Megatron-LM's GPT model does not compute is refused, naming
 * config.json, the field and why. */
CKPT_TEST(test_family_gpt2_refused)
{
    static const struct {
        const char *key, *value, *message;
    } cases[] = {
        { "activation_function", "\"relu\"", "in/config.json: activation_function is relu, not one of gelu_new, gelu" },
        { "scale_attn_by_inverse_layer_idx", "true",
          "in/config.json: scale_attn_by_inverse_layer_idx is true (attention scores divided by the layer number" },
        { "reorder_and_upcast_attn", "true", "in/config.json: reorder_and_upcast_attn is true" },
        { "scale_attn_weights", "false", "in/config.json: scale_attn_weights is false" },
        { "add_cross_attention", "true", "in/config.json: add_cross_attention is true" },
        { "n_head", "5", "in/config.json: n_embd 32 is not a multiple of n_head 5" },
        { "n_embd", NULL, "in/config.json: n_embd is missing" },
        { "model_type", "\"llama\"", "in/config.json: architectures names GPT2LMHeadModel, not a llama model" },
    };
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *edit[2] = { cases[i].key, cases[i].value };
        ASSERT_TRUE(read_config("hf/gpt2_tiny", edit, 2, &f, &c) < 0);
        ASSERT_TRUE(c == NULL && ckpt_error_last()->klass == CKPT_ERRCLASS_MODEL);
        ASSERT_ERROR_MENTIONS(cases[i].message);
    }
}

/* Megatron args: a GPT-2 model's are GPT-2's; megatron/gpt2style_tp2 (q/k layernorms) is no
 * family's, refused with the first family's reason as before GPT-2 was one. */
CKPT_TEST(test_family_gpt2_megatron_detect)
{
    static const char *const want[] = { "normalization", "'LayerNorm'", "position_embedding_type", "'learned_absolute'",
                                        "add_position_embedding", "True", "swiglu", "False", "openai_gelu", "True",
                                        "add_bias_linear", "True", "num_query_groups", "4", "group_query_attention",
                                        "False", "kv_channels", "8", "ffn_hidden_size", "128",
                                        "max_position_embeddings", "64", "padded_vocab_size", "256", "vocab_size", "128",
                                        "untie_embeddings_and_output_weights", "False", "hf_model_type", "'gpt2'",
                                        "hf_bos_token_id", "127", "transformer_impl", "'local'" };
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    const ckpt_family *f;
    ckpt_family_config *c = NULL, *back = NULL;
    ckpt_buf direct = CKPT_BUF_INIT, through = CKPT_BUF_INIT;
    ckpt_arena *a = NULL;
    ckpt_value *args = NULL;
    ckpt_set *set = NULL;
    ckpt_graph *g = NULL;
    ckpt_megatron *m = NULL;
    char repr[128];
    size_t i;

    /* what hf2mcore writes, and the config.json it gives back */
    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(family_args(a, "local", &args));
    for (i = 0; i < sizeof want / sizeof want[0]; i += 2) {
        const ckpt_value *v = ckpt_megatron_arg(args, want[i]);
        ASSERT_TRUE(v != NULL);
        ckpt_value_repr(v, repr, sizeof repr);
        ASSERT_EQ_STR(repr, want[i + 1]);
    }
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "gpt2");
    ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_OK(ckpt_family_config_json(f, back, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &through));
    ASSERT_OK(read_config("hf/gpt2_tiny", NULL, 0, &f, &c));
    ASSERT_OK(ckpt_family_config_json(f, c, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &direct));
    ASSERT_TRUE(through.len == direct.len && memcmp(through.data, direct.data, direct.len) == 0);
    ASSERT_TRUE(strstr((const char *)direct.data, "\"activation_function\": \"gelu_new\"") != NULL);
    ASSERT_TRUE(strstr((const char *)direct.data, "\"architectures\": [\n    \"GPT2LMHeadModel\"\n  ]") != NULL);
    ASSERT_TRUE(strstr((const char *)direct.data, "\"n_inner\"") == NULL);
    ckpt_buf_dispose(&through);
    ckpt_buf_dispose(&direct);
    ckpt_family_config_free(back);
    ckpt_family_config_free(c);

    /* a GPT-2 Megatron trained itself: found by what its args compute */
    ASSERT_OK(trained_gpt2_args(a, "transformer_engine", &args));
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "gpt2");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(fx_int(c, "hidden_size") == HIDDEN && fx_int(c, "num_kv_heads") == HEADS &&
                fx_int(c, "ffn_size") == FFN && fx_int(c, "max_positions") == POSITIONS &&
                fx_int(c, "vocab_size") == VOCAB && fx_int(c, "tied") == 1);
    ckpt_family_config_free(c);
    /* Megatron's default GELU is the erf one: transformers' gelu */
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "openai_gelu", 0));
    ASSERT_OK(ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_EQ_STR(ckpt_family_name(f), "gpt2");
    ASSERT_OK(ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, NULL, args));
    ASSERT_TRUE(fx_int(c, "openai_gelu") == 0);
    ckpt_family_config_free(c);
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "group_query_attention", 1));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, args));

    so.layout = "megatron";
    ASSERT_OK(ckpt_set_open(&set, ckpt_test_data("megatron/gpt2style_tp2"), &so));
    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_megatron_open(&m, set, g, &mo));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, NULL, ckpt_megatron_args(m)));
    ASSERT_ERROR_MENTIONS("not a LLaMA-style model: args.swiglu is not True");
    ckpt_megatron_close(m);
    ckpt_graph_free(g);
    ckpt_set_close(set);
    ckpt_arena_free(a);
}
