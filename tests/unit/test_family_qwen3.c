/* Qwen3 (testdata/hf/transformers5/qwen3_tiny, transformers 5.24: q/k RMSNorm per head,
 * head_dim 16 while hidden / heads is 8): the built-in hf_qwen3_megatron maps, TE and local
 * names, carry q_norm/k_norm to Megatron's q_layernorm/k_layernorm and fuse q/k/v per query
 * group at head_dim 16; their inverses give back every input tensor byte for byte; the LLaMA
 * map refuses q_norm, naming it. */
#include "test.h"

#include <stdlib.h>

#define QWEN3 "hf/transformers5/qwen3_tiny"
#define MAX_IN 64

typedef struct fixture {
    ckpt_ckpt *ck;
    ckpt_map_input in[MAX_IN];
    size_t n;
} fixture;

static int fx_open(fixture *f, ckpt_graph *g)
{
    size_t i;
    int rc;

    memset(f, 0, sizeof *f);
    if ((rc = ckpt_open(&f->ck, ckpt_test_data(QWEN3 "/model.safetensors"), NULL)) < 0)
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

static const ckpt_node *in_find(const fixture *f, const char *name)
{
    size_t i;
    for (i = 0; i < f->n; i++)
        if (strcmp(f->in[i].name, name) == 0)
            return f->in[i].node;
    return NULL;
}

static const ckpt_node *out_find(const ckpt_map_result *r, const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_map_result_count(r); i++)
        if (strcmp(ckpt_map_result_at(r, i)->name, name) == 0)
            return ckpt_map_result_at(r, i)->node;
    return NULL;
}

/* Same dtype, shape and bytes. */
static int same_node(const ckpt_node *a, const ckpt_node *b)
{
    size_t len;
    unsigned char *x, *y;
    int same;

    if (!a || !b || ckpt_node_dtype(a) != ckpt_node_dtype(b) || ckpt_node_ndim(a) != ckpt_node_ndim(b) ||
        memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) != 0)
        return 0;
    len = (size_t)ckpt_node_numel(a) * ckpt_dtype_size(ckpt_node_dtype(a));
    x = malloc(len + 1);
    y = malloc(len + 1);
    same = x && y && ckpt_node_read(a, 0, ckpt_node_numel(a), ckpt_node_dtype(a), x) >= 0 &&
           ckpt_node_read(b, 0, ckpt_node_numel(b), ckpt_node_dtype(b), y) >= 0 && memcmp(x, y, len) == 0;
    free(x);
    free(y);
    return same;
}

/* config.json's integers (head_dim 16 among them), and the vocabulary as Megatron pads it. */
static int qwen3_params(ckpt_map_params **p)
{
    int rc = ckpt_map_params_new(p);
    if (rc >= 0)
        rc = ckpt_map_params_load_json(*p, ckpt_test_data(QWEN3 "/config.json"));
    return rc < 0 ? rc : ckpt_map_params_set(*p, "padded_vocab_size", 128);
}

/* Apply the map `name`, then its inverse to the outputs; *mid and *back are the results. */
static int there_and_back(const fixture *f, const ckpt_map_params *p, ckpt_graph *g, const char *name,
                          ckpt_map_result **mid, ckpt_map_result **back)
{
    ckpt_map_input in[MAX_IN];
    ckpt_map *m = NULL, *inv = NULL;
    size_t i, n;
    int rc;

    if ((rc = ckpt_map_builtin(&m, name)) < 0 || (rc = ckpt_map_invert(m, &inv)) < 0 ||
        (rc = ckpt_map_apply(m, p, g, f->in, f->n, NULL, mid)) < 0)
        goto done;
    n = ckpt_map_result_count(*mid);
    for (i = 0; i < n && i < MAX_IN; i++) {
        in[i].name = ckpt_map_result_at(*mid, i)->name;
        in[i].node = ckpt_map_result_at(*mid, i)->node;
        in[i].home = ckpt_map_result_at(*mid, i)->home;
    }
    rc = ckpt_map_apply(inv, p, g, in, n, NULL, back);
done:
    ckpt_map_free(m);
    ckpt_map_free(inv);
    return rc;
}

static void check_map(const char *map, const char *input_norm)
{
    fixture f;
    ckpt_graph *g = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map_result *mid = NULL, *back = NULL;
    const ckpt_node *qkv;
    char hf[128], mc[128];
    size_t i;
    int layer;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_open(&f, g));
    ASSERT_EQ_INT(f.n, 25);
    ASSERT_OK(qwen3_params(&p));
    ASSERT_OK(there_and_back(&f, p, g, map, &mid, &back));
    for (layer = 0; layer < 2; layer++) {
        snprintf(hf, sizeof hf, "model.layers.%d.self_attn.q_norm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.q_layernorm.weight", layer);
        ASSERT_TRUE(same_node(in_find(&f, hf), out_find(mid, mc)));
        snprintf(hf, sizeof hf, "model.layers.%d.self_attn.k_norm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.k_layernorm.weight", layer);
        ASSERT_TRUE(same_node(in_find(&f, hf), out_find(mid, mc)));
        snprintf(hf, sizeof hf, "model.layers.%d.input_layernorm.weight", layer);
        snprintf(mc, sizeof mc, "decoder.layers.%d.%s", layer, input_norm);
        ASSERT_TRUE(same_node(in_find(&f, hf), out_find(mid, mc)));
        /* 2 query groups of [2 q heads | k | v] at head_dim 16 */
        snprintf(mc, sizeof mc, "decoder.layers.%d.self_attention.linear_qkv.weight", layer);
        ASSERT_TRUE((qkv = out_find(mid, mc)) != NULL);
        ASSERT_EQ_INT(ckpt_node_shape(qkv)[0], 128);
        ASSERT_EQ_INT(ckpt_node_shape(qkv)[1], 32);
    }
    for (i = 0; i < ckpt_map_result_count(mid); i++)
        ASSERT_TRUE(strncmp(ckpt_map_result_at(mid, i)->name, "model.", 6) != 0);
    ASSERT_EQ_INT(ckpt_map_result_count(back), f.n);
    for (i = 0; i < f.n; i++)
        ASSERT_TRUE(same_node(f.in[i].node, out_find(back, f.in[i].name)));
    ckpt_map_result_free(mid);
    ckpt_map_result_free(back);
    ckpt_map_params_free(p);
    ckpt_close(f.ck);
    ckpt_graph_free(g);
}

CKPT_TEST(test_family_qwen3_map_te)
{
    check_map("hf_qwen3_megatron", "self_attention.linear_qkv.layer_norm_weight");
}

CKPT_TEST(test_family_qwen3_map_local)
{
    check_map("hf_qwen3_megatron_local", "input_layernorm.weight");
}

/* LLaMA's map has no rule for q_norm: a Qwen3 model through it is refused, naming the tensor. */
CKPT_TEST(test_family_qwen3_llama_map_refuses_q_norm)
{
    fixture f;
    ckpt_graph *g = NULL;
    ckpt_map_params *p = NULL;
    ckpt_map *m = NULL;
    ckpt_map_result *r = NULL;

    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(fx_open(&f, g));
    ASSERT_OK(qwen3_params(&p));
    ASSERT_OK(ckpt_map_builtin(&m, "hf_llama_megatron"));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_map_apply(m, p, g, f.in, f.n, NULL, &r));
    ASSERT_ERROR_MENTIONS("self_attn.k_norm.weight");
    ckpt_map_free(m);
    ckpt_map_params_free(p);
    ckpt_close(f.ck);
    ckpt_graph_free(g);
}
