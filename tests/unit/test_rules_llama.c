/* The built-in llama_pd2te map and its inverse on the real PaddleNLP fixtures
 * (testdata/llama): every TE tensor equals what the test computes from the input bytes;
 * the plain, fused-qkv and unfused-ffn layouts of one model give the same TE bytes;
 * te2pd(pd2te(x)) gives back x tensor for tensor, in order, with the variants giving back
 * the fused-qkv and unfused-ffn layouts; and the error paths name the tensor. */
#include "test.h"

#include <stdlib.h>

#define MAX_IN 64

typedef struct fixture {
    ckpt_ckpt *ck[4];
    size_t n_ck;
    ckpt_map_input in[MAX_IN];
    size_t n;
} fixture;

/* Add every tensor of one file; home = the file's index. */
static int fx_add(fixture *f, ckpt_graph *g, const char *rel)
{
    ckpt_ckpt *c;
    size_t i;
    int rc;

    if ((rc = ckpt_open(&c, ckpt_test_data(rel), NULL)) < 0)
        return rc;
    f->ck[f->n_ck++] = c;
    for (i = 0; i < ckpt_tensor_count(c) && f->n < MAX_IN; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c, i);
        f->in[f->n].name = t->name;
        f->in[f->n].home = f->n_ck - 1;
        if ((rc = ckpt_node_tensor(g, t, &f->in[f->n].node)) < 0)
            return rc;
        f->n++;
    }
    return 0;
}

static void fx_close(fixture *f)
{
    size_t i;
    for (i = 0; i < f->n_ck; i++)
        ckpt_close(f->ck[i]);
    memset(f, 0, sizeof *f);
}

static void fx_drop(fixture *f, const char *name)
{
    size_t i;
    for (i = 0; i < f->n; i++) {
        if (strcmp(f->in[i].name, name) == 0) {
            memmove(&f->in[i], &f->in[i + 1], (f->n - i - 1) * sizeof f->in[0]);
            f->n--;
            return;
        }
    }
}

static const ckpt_map_input *fx_find(const fixture *f, const char *name)
{
    size_t i;
    for (i = 0; i < f->n; i++)
        if (strcmp(f->in[i].name, name) == 0)
            return &f->in[i];
    return NULL;
}

static const ckpt_map_output *out_find(const ckpt_map_result *r, const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_map_result_count(r); i++)
        if (strcmp(ckpt_map_result_at(r, i)->name, name) == 0)
            return ckpt_map_result_at(r, i);
    return NULL;
}

static unsigned char *node_bytes(const ckpt_node *x, size_t *len)
{
    size_t es = ckpt_dtype_size(ckpt_node_dtype(x));
    unsigned char *b;

    *len = (size_t)ckpt_node_numel(x) * es;
    b = malloc(*len + 1);
    if (b && ckpt_node_read(x, 0, ckpt_node_numel(x), ckpt_node_dtype(x), b) < 0) {
        free(b);
        b = NULL;
    }
    return b;
}

static int same_node(const ckpt_node *a, const ckpt_node *b)
{
    unsigned char *x, *y;
    size_t lx, ly;
    int same;

    if (!a || !b || ckpt_node_dtype(a) != ckpt_node_dtype(b) || ckpt_node_ndim(a) != ckpt_node_ndim(b) ||
        memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) != 0)
        return 0;
    x = node_bytes(a, &lx);
    y = node_bytes(b, &ly);
    same = x && y && lx == ly && memcmp(x, y, lx) == 0;
    free(x);
    free(y);
    return same;
}

/* out == concat(ins, axis 1).T for 2-D ins of equal rows, computed here element by element. */
static int is_concat_t(const ckpt_node *out, const ckpt_node *const *ins, size_t n)
{
    size_t es = ckpt_dtype_size(ckpt_node_dtype(ins[0])), k, h, j, len, got_len, col = 0;
    int64_t rows = ckpt_node_shape(ins[0])[0], cols = 0;
    unsigned char *want, *got;
    int ok;

    for (k = 0; k < n; k++)
        cols += ckpt_node_shape(ins[k])[1];
    if (ckpt_node_ndim(out) != 2 || ckpt_node_shape(out)[0] != cols || ckpt_node_shape(out)[1] != rows)
        return 0;
    if (!(want = malloc((size_t)(rows * cols) * es)))
        return 0;
    for (k = 0; k < n; k++) {
        size_t ck = (size_t)ckpt_node_shape(ins[k])[1];
        unsigned char *in = node_bytes(ins[k], &len);
        if (!in) {
            free(want);
            return 0;
        }
        for (h = 0; h < (size_t)rows; h++)
            for (j = 0; j < ck; j++)
                memcpy(want + ((col + j) * (size_t)rows + h) * es, in + (h * ck + j) * es, es);
        col += ck;
        free(in);
    }
    got = node_bytes(out, &got_len);
    ok = got && got_len == (size_t)(rows * cols) * es && memcmp(got, want, got_len) == 0;
    free(got);
    free(want);
    return ok;
}

static int load_params(ckpt_map_params **p, const char *rel)
{
    int rc = ckpt_map_params_new(p);
    return rc < 0 ? rc : ckpt_map_params_load_json(*p, ckpt_test_data(rel));
}

static int pd2te(const fixture *f, const ckpt_map_params *p, ckpt_graph *g, ckpt_map_result **r)
{
    ckpt_map *m = NULL;
    int rc = ckpt_map_builtin(&m, "llama_pd2te");
    if (rc >= 0)
        rc = ckpt_map_apply(m, p, g, f->in, f->n, NULL, r);
    ckpt_map_free(m);
    return rc;
}

/* te2pd on the outputs of a previous application. */
static int te2pd(const ckpt_map_result *te, const ckpt_map_params *p, ckpt_graph *g, const char *const *variants,
                 ckpt_map_result **r)
{
    ckpt_map_input in[MAX_IN];
    ckpt_map *m = NULL;
    size_t i, n = ckpt_map_result_count(te);
    int rc;

    for (i = 0; i < n && i < MAX_IN; i++) {
        in[i].name = ckpt_map_result_at(te, i)->name;
        in[i].node = ckpt_map_result_at(te, i)->node;
        in[i].home = ckpt_map_result_at(te, i)->home;
    }
    if ((rc = ckpt_map_builtin(&m, "llama_te2pd")) >= 0)
        rc = ckpt_map_apply(m, p, g, in, n, variants, r);
    ckpt_map_free(m);
    return rc;
}

#define L(i, s) "llama.layers." #i "." s

CKPT_TEST(test_rules_llama_pd2te_values)
{
    static const char *const names[] = { "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                         "self_attn.v_proj.weight" };
    fixture f = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 };
    ckpt_map_result *r = NULL;
    ckpt_graph *g = NULL;
    char name[128];
    size_t i, k;
    int layer;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_add(&f, g, "llama/fp32_tp1/model_state.pdparams"));
    ASSERT_EQ_INT(f.n, 19);
    ASSERT_OK(pd2te(&f, NULL, g, &r));
    ASSERT_EQ_INT(ckpt_map_result_count(r), 15);
    ASSERT_EQ_STR(ckpt_map_result_at(r, 0)->name, "llama.embed_tokens.weight");
    ASSERT_EQ_STR(ckpt_map_result_at(r, 1)->name, L(0, "transformer.self_attention.layernorm_qkv.weight"));
    ASSERT_EQ_STR(ckpt_map_result_at(r, 1)->rule, "qkv");
    ASSERT_EQ_STR(ckpt_map_result_at(r, 2)->rule, "llama.layers.{L}.self_attn.o_proj.weight -> "
                                                  "llama.layers.{L}.transformer.self_attention.proj.weight");
    for (i = 0; i < ckpt_map_result_count(r); i++)
        ASSERT_TRUE(!strstr(ckpt_map_result_at(r, i)->name, "self_attn"));
    for (layer = 0; layer < 2; layer++) {
        const ckpt_node *qkv[3];
        static const char *const pairs[][2] = {
            { "self_attn.o_proj.weight", "transformer.self_attention.proj.weight" },
            { "mlp.gate_up_fused_proj.weight", "transformer.layernorm_mlp.fc1_weight" },
            { "mlp.down_proj.weight", "transformer.layernorm_mlp.fc2_weight" },
            { "input_layernorm.weight", "transformer.self_attention.layernorm_qkv.ln_weight" },
            { "post_attention_layernorm.weight", "transformer.layernorm_mlp.ln_weight" },
        };
        for (k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "llama.layers.%d.%s", layer, names[k]);
            ASSERT_TRUE(fx_find(&f, name) != NULL);
            qkv[k] = fx_find(&f, name)->node;
        }
        snprintf(name, sizeof name, "llama.layers.%d.transformer.self_attention.layernorm_qkv.weight", layer);
        ASSERT_TRUE(out_find(r, name) && is_concat_t(out_find(r, name)->node, qkv, 3));
        for (k = 0; k < 5; k++) {
            const ckpt_map_output *o;
            const ckpt_map_input *in;
            snprintf(name, sizeof name, "llama.layers.%d.%s", layer, pairs[k][0]);
            in = fx_find(&f, name);
            snprintf(name, sizeof name, "llama.layers.%d.%s", layer, pairs[k][1]);
            o = out_find(r, name);
            ASSERT_TRUE(in && o);
            if (k < 3) {
                ASSERT_TRUE(is_concat_t(o->node, &in->node, 1));
            } else {
                ASSERT_TRUE(ckpt_node_is_copy(o->node));
                ASSERT_TRUE(same_node(o->node, in->node));
            }
        }
    }
    for (i = 0; i < 3; i++) {
        static const char *const kept[] = { "llama.embed_tokens.weight", "llama.norm.weight", "lm_head.weight" };
        ASSERT_TRUE(out_find(r, kept[i]) && out_find(r, kept[i])->node == fx_find(&f, kept[i])->node);
        ASSERT_TRUE(out_find(r, kept[i])->rule == NULL);
    }
    ckpt_map_result_free(r);
    ckpt_graph_free(g);
    fx_close(&f);
}

/* Plain, fused-qkv and unfused-ffn inputs of one model give the same TE tensors. */
CKPT_TEST(test_rules_llama_layouts_agree)
{
    fixture plain = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 }, fused = plain, unfused = plain;
    ckpt_map_result *rp = NULL, *rf = NULL, *ru = NULL;
    ckpt_map_params *p = NULL;
    ckpt_graph *g = NULL;
    size_t i;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_add(&plain, g, "llama/fp32_tp1/model_state.pdparams"));
    ASSERT_OK(fx_add(&fused, g, "llama/fused_qkv_tp1/model_state.pdparams"));
    ASSERT_OK(fx_add(&unfused, g, "llama/unfused_ffn_tp1/model_state.pdparams"));
    ASSERT_OK(pd2te(&plain, NULL, g, &rp));
    ASSERT_FAILS(CKPT_ENOTFOUND, pd2te(&fused, NULL, g, &rf));
    ASSERT_ERROR_MENTIONS("llama.layers.0.self_attn.qkv_proj.weight: rule fused_qkv of llama_pd2te needs model "
                          "parameter 'num_attention_heads'");
    ASSERT_OK(load_params(&p, "llama/fused_qkv_tp1/config.json"));
    ASSERT_OK(pd2te(&fused, p, g, &rf));
    ASSERT_OK(pd2te(&unfused, NULL, g, &ru));
    ASSERT_EQ_INT(ckpt_map_result_count(rf), 15);
    ASSERT_EQ_INT(ckpt_map_result_count(ru), 15);
    for (i = 0; i < ckpt_map_result_count(rp); i++) {
        const ckpt_map_output *o = ckpt_map_result_at(rp, i);
        ASSERT_TRUE(out_find(rf, o->name) && same_node(o->node, out_find(rf, o->name)->node));
        ASSERT_TRUE(out_find(ru, o->name) && same_node(o->node, out_find(ru, o->name)->node));
    }
    ASSERT_EQ_STR(out_find(rf, L(1, "transformer.self_attention.layernorm_qkv.weight"))->rule, "fused_qkv + qkv");
    ASSERT_TRUE(strncmp(out_find(ru, L(1, "transformer.layernorm_mlp.fc1_weight"))->rule, "unfused_ffn + ", 14) == 0);
    /* 4 heads in 3 groups: the block sizes cannot be computed. */
    ckpt_map_result_free(rf);
    ASSERT_OK(ckpt_map_params_set(p, "num_key_value_heads", 3));
    ASSERT_FAILS(CKPT_EFORMAT, pd2te(&fused, p, g, &rf));
    ASSERT_ERROR_MENTIONS("rule fused_qkv of llama_pd2te has \"num_attention_heads / num_key_value_heads\" = 4 / 3");
    /* The heads do not fit the q/k/v sizes: 64:32:32 is not 4:1:1. */
    ASSERT_OK(ckpt_map_params_set(p, "num_key_value_heads", 1));
    ASSERT_FAILS(CKPT_EFORMAT, pd2te(&plain, p, g, &rf));
    ASSERT_ERROR_MENTIONS("llama.layers.0.self_attn.q_proj.weight: rule qkv of llama_pd2te: concat: along axis 1 "
                          "the tensors have 64, 32, 32, not in the ratio 4:1:1");
    ckpt_map_params_free(p);
    ckpt_map_result_free(rp);
    ckpt_map_result_free(ru);
    ckpt_graph_free(g);
    fx_close(&plain);
    fx_close(&fused);
    fx_close(&unfused);
}

/* te2pd(pd2te(x)) == x, same names in the same order, byte for byte. */
static void round_trip(const char *file, const char *config)
{
    fixture f = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 };
    ckpt_map_result *te = NULL, *pd = NULL;
    ckpt_map_params *p = NULL;
    ckpt_graph *g = NULL;
    size_t i;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_add(&f, g, file));
    ASSERT_OK(load_params(&p, config));
    ASSERT_OK(pd2te(&f, NULL, g, &te));
    ASSERT_OK(te2pd(te, p, g, NULL, &pd));
    ASSERT_EQ_INT(ckpt_map_result_count(pd), f.n);
    for (i = 0; i < f.n; i++) {
        ASSERT_EQ_STR(ckpt_map_result_at(pd, i)->name, f.in[i].name);
        ASSERT_TRUE(same_node(ckpt_map_result_at(pd, i)->node, f.in[i].node));
    }
    ckpt_map_params_free(p);
    ckpt_map_result_free(pd);
    ckpt_map_result_free(te);
    ckpt_graph_free(g);
    fx_close(&f);
}

CKPT_TEST(test_rules_llama_round_trip)
{
    round_trip("llama/fp32_tp1/model_state.pdparams", "llama/fp32_tp1/config.json");
    round_trip("llama/bf16_tp1/model_state.pdparams", "llama/bf16_tp1/config.json");
    round_trip("llama/fp32_tp2/model_state.tp00.pdparams", "llama/fp32_tp2/config.json");
    round_trip("llama/fp32_tp2/model_state.tp01.pdparams", "llama/fp32_tp2/config.json");
    round_trip("llama/bf16_pp2/model_state.tp00_pp01.pdparams", "llama/bf16_pp2/config.json");
    round_trip("llama/bf16_pp51_last/model_state.tp00_pp50.pdparams", "llama/bf16_pp51_last/config.json");
}

CKPT_TEST(test_rules_llama_layer_100_and_no_heads)
{
    fixture f = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 };
    ckpt_map_result *te = NULL, *pd = NULL;
    ckpt_graph *g = NULL;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_add(&f, g, "llama/bf16_pp51_last/model_state.tp00_pp50.pdparams"));
    ASSERT_OK(pd2te(&f, NULL, g, &te));
    ASSERT_TRUE(out_find(te, L(100, "transformer.self_attention.layernorm_qkv.weight")) != NULL);
    ASSERT_TRUE(out_find(te, L(101, "transformer.layernorm_mlp.fc2_weight")) != NULL);
    /* te2pd cannot split layernorm_qkv without head counts (the original silently split
     * it in three equal parts, wrong for GQA). */
    ASSERT_FAILS(CKPT_ENOTFOUND, te2pd(te, NULL, g, NULL, &pd));
    ASSERT_ERROR_MENTIONS("llama.layers.100.transformer.self_attention.layernorm_qkv.weight: rule qkv of "
                          "llama_te2pd needs model parameter 'num_attention_heads'");
    ckpt_map_result_free(te);
    ckpt_graph_free(g);
    fx_close(&f);
}

/* The inverse writes the fused-qkv and unfused-ffn layouts back on request. */
CKPT_TEST(test_rules_llama_variants)
{
    static const char *const qkv[] = { "fused_qkv", NULL };
    static const char *const ffn[] = { "unfused_ffn", NULL };
    static const char *const wrong[] = { "fused", NULL };
    static const char *const cases[][2] = {
        { "llama/fused_qkv_tp1/model_state.pdparams", "fused_qkv" },
        { "llama/unfused_ffn_tp1/model_state.pdparams", "unfused_ffn" },
    };
    ckpt_map_params *p = NULL;
    size_t c, i;

    ASSERT_OK(load_params(&p, "llama/fp32_tp1/config.json"));
    for (c = 0; c < 2; c++) {
        fixture f = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 };
        ckpt_map_result *te = NULL, *pd = NULL;
        ckpt_graph *g = NULL;
        ASSERT_OK(ckpt_graph_new(&g));
        ASSERT_OK(fx_add(&f, g, cases[c][0]));
        ASSERT_OK(pd2te(&f, p, g, &te));
        ASSERT_OK(te2pd(te, p, g, c == 0 ? qkv : ffn, &pd));
        ASSERT_EQ_INT(ckpt_map_result_count(pd), f.n);
        for (i = 0; i < f.n; i++) {
            ASSERT_EQ_STR(ckpt_map_result_at(pd, i)->name, f.in[i].name);
            ASSERT_TRUE(same_node(ckpt_map_result_at(pd, i)->node, f.in[i].node));
        }
        ASSERT_TRUE(strstr(out_find(pd, L(0, "mlp.down_proj.weight"))->rule, cases[c][1]) == NULL);
        ckpt_map_result_free(pd);
        if (c == 0) {
            ASSERT_FAILS(CKPT_ENOTFOUND, te2pd(te, p, g, wrong, &pd));
            ASSERT_ERROR_MENTIONS("llama_te2pd has no output variant 'fused' (it has: fused_qkv, unfused_ffn)");
        }
        ckpt_map_result_free(te);
        ckpt_graph_free(g);
        fx_close(&f);
    }
    ckpt_map_params_free(p);
}

CKPT_TEST(test_rules_llama_errors)
{
    static const int64_t vec[1] = { 32 }, mat[2] = { 64, 64 };
    fixture f = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 };
    ckpt_map_result *r = NULL;
    ckpt_map_params *p = NULL;
    ckpt_graph *g = NULL;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_add(&f, g, "llama/fp32_tp1/model_state.pdparams"));
    f.in[f.n].name = L(0, "self_attn.rotary_emb.inv_freq");
    f.in[f.n].home = 0;
    ASSERT_OK(ckpt_node_zeros(g, CKPT_DTYPE_F32, 1, vec, &f.in[f.n].node));
    f.n++;
    ASSERT_FAILS(CKPT_EFORMAT, pd2te(&f, NULL, g, &r));
    ASSERT_ERROR_MENTIONS("llama.layers.0.self_attn.rotary_emb.inv_freq: no rule of llama_pd2te matches this tensor");
    f.n--;
    fx_drop(&f, L(1, "self_attn.k_proj.weight"));
    ASSERT_FAILS(CKPT_EFORMAT, pd2te(&f, NULL, g, &r));
    ASSERT_ERROR_MENTIONS("llama.layers.1.self_attn.q_proj.weight: rule qkv of llama_pd2te needs "
                          "llama.layers.1.self_attn.k_proj.weight as well");
    fx_close(&f);

    /* qkv_proj and q_proj of one layer together. */
    ASSERT_OK(load_params(&p, "llama/fused_qkv_tp1/config.json"));
    ASSERT_OK(fx_add(&f, g, "llama/fused_qkv_tp1/model_state.pdparams"));
    f.in[f.n].name = L(0, "self_attn.q_proj.weight");
    f.in[f.n].home = 0;
    ASSERT_OK(ckpt_node_zeros(g, CKPT_DTYPE_F32, 2, mat, &f.in[f.n].node));
    f.n++;
    ASSERT_FAILS(CKPT_EFORMAT, pd2te(&f, p, g, &r));
    ASSERT_ERROR_MENTIONS("llama.layers.0.self_attn.q_proj.weight: llama_pd2te makes two tensors of this name "
                          "(from fused_qkv and from the input)");
    fx_close(&f);

    ASSERT_OK(fx_add(&f, g, "llama/unfused_ffn_tp1/model_state.pdparams"));
    fx_drop(&f, L(0, "mlp.up_proj.weight"));
    ASSERT_FAILS(CKPT_EFORMAT, pd2te(&f, NULL, g, &r));
    ASSERT_ERROR_MENTIONS("llama.layers.0.mlp.gate_proj.weight: rule unfused_ffn of llama_pd2te needs "
                          "llama.layers.0.mlp.up_proj.weight as well");
    fx_close(&f);
    ckpt_map_params_free(p);
    ckpt_graph_free(g);
}

/* A size-sharded checkpoint: q/k/v of layer 1 in two files. Converted together, the fused
 * tensor goes to q_proj's file. */
CKPT_TEST(test_rules_llama_sharded_homes)
{
    fixture f = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 };
    ckpt_map_result *r = NULL;
    const ckpt_map_output *o;
    ckpt_graph *g = NULL;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_add(&f, g, "llama/fp32_sharded/model_state-00001-of-00002.pdparams"));
    ASSERT_OK(fx_add(&f, g, "llama/fp32_sharded/model_state-00002-of-00002.pdparams"));
    ASSERT_TRUE(fx_find(&f, L(1, "self_attn.q_proj.weight"))->home == 0);
    ASSERT_TRUE(fx_find(&f, L(1, "self_attn.k_proj.weight"))->home == 1);
    ASSERT_OK(pd2te(&f, NULL, g, &r));
    o = out_find(r, L(1, "transformer.self_attention.layernorm_qkv.weight"));
    ASSERT_TRUE(o != NULL);
    ASSERT_EQ_INT(o->home, 0);
    ASSERT_EQ_INT(out_find(r, "lm_head.weight")->home, 1);
    ckpt_map_result_free(r);
    ckpt_graph_free(g);
    fx_close(&f);
}

/* The inverse of the inverse computes the same nodes as the map itself. */
CKPT_TEST(test_rules_llama_invert_twice)
{
    fixture f = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 };
    ckpt_map *m = NULL, *inv = NULL, *back = NULL;
    ckpt_map_result *r1 = NULL, *r2 = NULL;
    ckpt_map_params *p = NULL;
    ckpt_graph *g = NULL;
    size_t i;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_add(&f, g, "llama/fused_qkv_tp1/model_state.pdparams"));
    ASSERT_OK(load_params(&p, "llama/fused_qkv_tp1/config.json"));
    ASSERT_OK(ckpt_map_builtin(&m, "llama_pd2te"));
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_OK(ckpt_map_invert(inv, &back));
    ASSERT_OK(ckpt_map_apply(m, p, g, f.in, f.n, NULL, &r1));
    ASSERT_OK(ckpt_map_apply(back, p, g, f.in, f.n, NULL, &r2));
    ASSERT_EQ_INT(ckpt_map_result_count(r1), ckpt_map_result_count(r2));
    for (i = 0; i < ckpt_map_result_count(r1); i++) {
        const ckpt_map_output *a = ckpt_map_result_at(r1, i), *b = ckpt_map_result_at(r2, i);
        ckpt_buf da = CKPT_BUF_INIT, db = CKPT_BUF_INIT;
        int same;
        ASSERT_EQ_STR(a->name, b->name);
        ASSERT_TRUE((a->rule == NULL) == (b->rule == NULL));
        ASSERT_TRUE(!a->rule || strcmp(a->rule, b->rule) == 0);
        ASSERT_OK(ckpt_node_describe(a->node, &da));
        ASSERT_OK(ckpt_node_describe(b->node, &db));
        same = da.len == db.len && memcmp(da.data, db.data, da.len) == 0;
        ckpt_buf_dispose(&da);
        ckpt_buf_dispose(&db);
        ASSERT_TRUE(same);
        ASSERT_TRUE(same_node(a->node, b->node));
    }
    ckpt_map_result_free(r1);
    ckpt_map_result_free(r2);
    ckpt_map_free(back);
    ckpt_map_free(inv);
    ckpt_map_free(m);
    ckpt_map_params_free(p);
    ckpt_graph_free(g);
    fx_close(&f);
}

/* A 3-D permute on real bytes (output axis i is input axis perm[i]) and the inverse map
 * giving back the input. */
CKPT_TEST(test_rules_llama_permute)
{
    static const char json[] = "{\"ckptconv_map\": 1, \"name\": \"perm\", \"rules\": [{\"from\": "
                               "\"llama.layers.{L}.self_attn.o_proj.weight\", \"to\": \"o.{L}\", \"ops\": ["
                               "{\"op\": \"reshape\", \"shape\": [4, 16, 64], \"inverse_shape\": [64, 64]}, "
                               "{\"op\": \"transpose\", \"perm\": [2, 0, 1]}, "
                               "{\"op\": \"pad\", \"axis\": 0, \"from\": 64, \"to\": 70}]}]}";
    fixture f = { { NULL }, 0, { { NULL, NULL, 0 } }, 0 };
    ckpt_map_result *r = NULL, *back = NULL;
    ckpt_map *m = NULL, *inv = NULL;
    const ckpt_map_input *o_proj;
    ckpt_map_input one;
    float *in = NULL, *out = NULL;
    ckpt_graph *g = NULL;
    size_t len, i, a, b;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_add(&f, g, "llama/fp32_tp1/model_state.pdparams"));
    ASSERT_OK(ckpt_map_parse(&m, json, sizeof json - 1, "perm.json"));
    ASSERT_OK(ckpt_map_apply(m, NULL, g, f.in, f.n, NULL, &r));
    o_proj = fx_find(&f, L(1, "self_attn.o_proj.weight"));
    one = *o_proj;
    one.node = out_find(r, "o.1")->node;
    one.name = "o.1";
    ASSERT_EQ_INT(ckpt_node_ndim(one.node), 3);
    ASSERT_EQ_INT(ckpt_node_shape(one.node)[0], 70);
    ASSERT_EQ_INT(ckpt_node_shape(one.node)[1], 4);
    ASSERT_EQ_INT(ckpt_node_shape(one.node)[2], 16);
    in = (float *)node_bytes(o_proj->node, &len);
    out = (float *)node_bytes(one.node, &len);
    ASSERT_TRUE(in && out && len == 70 * 64 * sizeof(float));
    for (i = 0; i < 70; i++)
        for (a = 0; a < 4; a++)
            for (b = 0; b < 16; b++)
                ASSERT_TRUE(memcmp(&out[(i * 4 + a) * 16 + b], i < 64 ? &in[(a * 16 + b) * 64 + i] : &(float){ 0 },
                                   sizeof(float)) == 0);
    free(in);
    free(out);
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_OK(ckpt_map_apply(inv, NULL, g, &one, 1, NULL, &back));
    ASSERT_EQ_STR(ckpt_map_result_at(back, 0)->name, L(1, "self_attn.o_proj.weight"));
    ASSERT_TRUE(same_node(ckpt_map_result_at(back, 0)->node, o_proj->node));
    ckpt_map_result_free(back);
    ckpt_map_result_free(r);
    ckpt_map_free(inv);
    ckpt_map_free(m);
    ckpt_graph_free(g);
    fx_close(&f);
}
