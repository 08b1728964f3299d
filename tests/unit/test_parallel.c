/* Parallel layouts: the "parallel" section of a map parses with the same strictness as the
 * rest of a map; the built-in megatron_gpt spec puts every Megatron tensor in its TP kind and
 * pipeline stage; layer indices are rewritten in place; and on real float32 tensors, split
 * then merge gives back the original bytes for every kind and rank count, while swiglu
 * shards hold [gate_r; up_r], not a plain chunk of [gate; up]. */
#include "test.h"

#include <ckpt/sys/io.h>

#include <stdlib.h>
#include <string.h>

#define HEAD "{\"ckptconv_map\": 1, \"name\": \"t\", \"rules\": [], "

static int parse(ckpt_map **m, const char *json)
{
    return ckpt_map_parse(m, json, strlen(json), "test.json");
}

CKPT_TEST(test_parallel_parse_errors)
{
    static const struct {
        const char *json, *mentions;
    } cases[] = {
        { HEAD "\"parallel\": []}", "test.json: parallel: must be an object" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [], \"layers\": 1}}",
          "test.json: parallel: unknown key \"layers\"" },
        { HEAD "\"parallel\": {\"tensors\": []}}", "test.json: parallel: needs \"layer\"" },
        { HEAD "\"parallel\": {\"layer\": \"l.\", \"tensors\": []}}", "\"l.\" must have exactly one capture" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.{M}.\", \"tensors\": []}}", "must have exactly one capture" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L\", \"tensors\": []}}", "parallel: bad pattern \"l.{L\"" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\"}}", "parallel: needs \"tensors\", a list of entries" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [], \"first_stage\": \"emb.\"}}",
          "\"first_stage\" must be a list of patterns" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [], \"expert\": [\"a}\"]}}",
          "parallel: expert[0]: bad pattern \"a}\"" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\", \"tp\": \"colum\"}]}}",
          "parallel: tensors[0]: \"tp\": unknown kind \"colum\"" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\"}]}}",
          "tensors[0]: needs \"tp\"" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"tp\": \"row\"}]}}",
          "tensors[0]: needs \"match\"" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\", \"tp\": \"row\", \"axs\": 0}]}}",
          "parallel: tensors[0]: unknown key \"axs\"" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"name\": \"n\", \"match\": \"w\", "
               "\"tp\": \"replicated\", \"axis\": 0}]}}",
          "tensors[0] (n): \"axis\" means nothing for a replicated tensor" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\", \"tp\": \"row\", "
               "\"axis\": -1}]}}",
          "\"axis\" must be an integer from 0 to" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\", \"tp\": \"row\", "
               "\"when\": \"2x\"}]}}",
          "\"when\": \"2x\" is not a parameter name" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\", \"tp\": \"row\"}, "
               "{\"match\": \"w\", \"tp\": \"column\"}]}}",
          "tensors[1]: tensors[0] already matches \"w\", so this entry never applies" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [], \"default\": \"copy\"}}",
          "parallel: \"default\": unknown kind \"copy\"" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\", \"tp\": \"sections\"}]}}",
          "tensors[0]: a sections entry needs \"parts\": 2 to 8 parameter names or integers" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\", \"tp\": \"sections\", "
               "\"parts\": [\"h\", 0]}]}}",
          "\"parts\"[1] is neither a parameter name nor a positive integer" },
        { HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": [{\"match\": \"w\", \"tp\": \"row\", "
               "\"parts\": [1, 1]}]}}",
          "\"parts\" belongs to a sections entry" },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_map *m = NULL;
        int rc = parse(&m, cases[i].json);
        if (rc != CKPT_EFORMAT || !strstr(ckpt_error_last()->message, cases[i].mentions)) {
            ckpt_test_fail(__FILE__, __LINE__, "case %zu: rc %d, \"%s\", expected \"%s\"", i, rc,
                           ckpt_error_last()->message, cases[i].mentions);
            ckpt_map_free(m);
            return;
        }
        ASSERT_TRUE(m == NULL);
    }
}

CKPT_TEST(test_parallel_classify_spec)
{
    static const char json[] =
        HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"every_stage\": [\"shared.\"], \"tensors\": ["
             "{\"name\": \"gated\", \"match\": \"l.{L}.fc1\", \"when\": \"gated\", \"tp\": \"swiglu\"},"
             "{\"match\": \"l.{L}.fc1\", \"tp\": \"column\"},"
             "{\"match\": \"l.{L}.proj\", \"tp\": \"row\"},"
             "{\"match\": \"l.{L}.proj_bias\", \"tp\": \"row\", \"axis\": 0}]}}";
    ckpt_map_params *p = NULL;
    ckpt_map *m = NULL, *inv = NULL;
    const ckpt_parallel_spec *s;
    ckpt_tensor_layout l;

    ASSERT_OK(parse(&m, json));
    ASSERT_TRUE((s = ckpt_map_parallel(m)) != NULL);
    ASSERT_OK(ckpt_map_params_new(&p));
    /* "when" on a parameter nobody gave is an error, never a guess. */
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_parallel_classify(s, p, "l.3.fc1", 2, &l));
    ASSERT_ERROR_MENTIONS("l.3.fc1: parallel layout entry gated of t needs model parameter 'gated'");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP_PARAM);
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_parallel_classify(s, NULL, "l.3.fc1", 2, &l));
    ASSERT_OK(ckpt_map_params_set(p, "gated", 0));
    ASSERT_OK(ckpt_parallel_classify(s, p, "l.3.fc1", 2, &l));
    ASSERT_EQ_INT(l.tp, CKPT_TP_COLUMN);
    ASSERT_EQ_STR(l.entry, "l.{L}.fc1");
    ASSERT_OK(ckpt_map_params_set(p, "gated", 1));
    ASSERT_OK(ckpt_parallel_classify(s, p, "l.3.fc1", 2, &l));
    ASSERT_EQ_INT(l.tp, CKPT_TP_SWIGLU);
    ASSERT_EQ_STR(l.entry, "gated");
    ASSERT_EQ_INT(l.layer, 3);
    ASSERT_EQ_INT(l.stage, CKPT_STAGE_LAYER);
    ASSERT_EQ_INT(l.expert, 0);
    /* An entry that applies only where its parameter is set is not even asked about others. */
    ASSERT_OK(ckpt_parallel_classify(s, NULL, "l.3.proj", 2, &l));
    ASSERT_EQ_INT(l.tp, CKPT_TP_ROW);
    ASSERT_EQ_INT(l.axis, 1);
    /* row on a 1-D tensor: axis 1 does not exist, unless the entry says which axis. */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_parallel_classify(s, NULL, "l.3.proj", 1, &l));
    ASSERT_ERROR_MENTIONS("l.3.proj: parallel layout entry l.{L}.proj of t cuts axis 1, but the tensor has 1 "
                          "dimension; give the entry an \"axis\"");
    ASSERT_OK(ckpt_parallel_classify(s, NULL, "l.3.proj", 0, &l));
    ASSERT_OK(ckpt_parallel_classify(s, NULL, "l.3.proj_bias", 1, &l));
    ASSERT_EQ_INT(l.axis, 0);
    /* No default: an unknown tensor is an error naming it and the map. */
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_parallel_classify(s, NULL, "shared.w", 2, &l));
    ASSERT_ERROR_MENTIONS("shared.w: no parallel layout entry of t matches this tensor");
    /* The inverse of a map without rules describes the same tensors, so it keeps the spec. */
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_TRUE(ckpt_map_parallel(inv) != NULL);
    ASSERT_OK(ckpt_parallel_classify(ckpt_map_parallel(inv), NULL, "l.3.proj", 2, &l));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_parallel_classify(ckpt_map_parallel(inv), NULL, "x", 2, &l));
    ASSERT_ERROR_MENTIONS("x: no parallel layout entry of t_inverse matches");
    ckpt_map_free(inv);
    ckpt_map_free(m);
    ckpt_map_params_free(p);
}

CKPT_TEST(test_parallel_default_and_inverse)
{
    static const char with_default[] =
        HEAD "\"parallel\": {\"layer\": \"h.{N}\", \"every_stage\": [\"h.{N}.shared\"], \"tensors\": [], "
             "\"default\": \"row\"}}";
    static const char with_rules[] =
        "{\"ckptconv_map\": 1, \"name\": \"r\", \"rules\": [{\"from\": \"a.{L}\", \"to\": \"b.{L}\"}], "
        "\"parallel\": {\"layer\": \"a.{L}\", \"tensors\": []}}";
    ckpt_map *m = NULL, *inv = NULL;
    ckpt_tensor_layout l;

    ASSERT_OK(parse(&m, with_default));
    ASSERT_OK(ckpt_parallel_classify(ckpt_map_parallel(m), NULL, "h.12.w", 2, &l));
    ASSERT_EQ_INT(l.tp, CKPT_TP_ROW);
    ASSERT_EQ_INT(l.axis, 1);
    ASSERT_EQ_STR(l.entry, "default");
    ASSERT_EQ_INT(l.layer, 12);
    ASSERT_EQ_INT(l.stage, CKPT_STAGE_LAYER);
    /* A stage list wins over the layer pattern; the layer index is still reported. */
    ASSERT_OK(ckpt_parallel_classify(ckpt_map_parallel(m), NULL, "h.12.shared", 2, &l));
    ASSERT_EQ_INT(l.stage, CKPT_STAGE_EVERY);
    ASSERT_EQ_INT(l.layer, 12);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_parallel_classify(ckpt_map_parallel(m), NULL, "h.99999999999999999999.w", 2, &l));
    ASSERT_ERROR_MENTIONS("layer index 99999999999999999999");
    ckpt_map_free(m);
    m = NULL;
    ASSERT_OK(parse(&m, HEAD "\"comment\": \"no layout\"}"));
    ASSERT_TRUE(ckpt_map_parallel(m) == NULL);
    ASSERT_TRUE(ckpt_map_parallel(NULL) == NULL);
    ckpt_map_free(m);
    m = NULL;
    /* Renaming rules would make the spec's patterns name the wrong side. */
    ASSERT_OK(parse(&m, with_rules));
    ASSERT_TRUE(ckpt_map_parallel(m) != NULL);
    ASSERT_OK(ckpt_map_invert(m, &inv));
    ASSERT_TRUE(ckpt_map_parallel(inv) == NULL);
    ckpt_map_free(inv);
    ckpt_map_free(m);
}

typedef struct gpt_case {
    const char *name;
    int ndim;
    ckpt_tp_kind tp;
    int axis;
    ckpt_stage stage;
    int64_t layer;
    int expert;
} gpt_case;

static int check_gpt(const ckpt_parallel_spec *s, const ckpt_map_params *p, const gpt_case *c, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        ckpt_tensor_layout l;
        if (ckpt_parallel_classify(s, p, c[i].name, c[i].ndim, &l) < 0) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: %s", c[i].name, ckpt_error_last()->message);
            return 0;
        }
        if (l.tp != c[i].tp || l.axis != c[i].axis || l.stage != c[i].stage || l.layer != c[i].layer ||
            l.expert != c[i].expert) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: tp %d axis %d stage %d layer %lld expert %d (entry %s)",
                           c[i].name, (int)l.tp, l.axis, (int)l.stage, (long long)l.layer, l.expert, l.entry);
            return 0;
        }
    }
    return 1;
}

#define R CKPT_TP_REPLICATED
#define LAYER CKPT_STAGE_LAYER

CKPT_TEST(test_parallel_megatron_gpt)
{
    static const gpt_case always[] = {
        { "embedding.word_embeddings.weight", 2, CKPT_TP_VOCAB, 0, CKPT_STAGE_FIRST, -1, 0 },
        { "embedding.position_embeddings.weight", 2, R, 0, CKPT_STAGE_FIRST, -1, 0 },
        { "decoder.layers.0.self_attention.linear_qkv.weight", 2, CKPT_TP_COLUMN, 0, LAYER, 0, 0 },
        { "decoder.layers.0.self_attention.linear_qkv.bias", 1, CKPT_TP_COLUMN, 0, LAYER, 0, 0 },
        { "decoder.layers.1.self_attention.linear_qkv.layer_norm_weight", 1, R, 0, LAYER, 1, 0 },
        { "decoder.layers.1.self_attention.linear_qkv.layer_norm_bias", 1, R, 0, LAYER, 1, 0 },
        { "decoder.layers.2.input_layernorm.weight", 1, R, 0, LAYER, 2, 0 },
        { "decoder.layers.2.input_layernorm.bias", 1, R, 0, LAYER, 2, 0 },
        { "decoder.layers.3.self_attention.q_layernorm.weight", 1, R, 0, LAYER, 3, 0 },
        { "decoder.layers.3.self_attention.k_layernorm.bias", 1, R, 0, LAYER, 3, 0 },
        { "decoder.layers.4.self_attention.linear_proj.weight", 2, CKPT_TP_ROW, 1, LAYER, 4, 0 },
        { "decoder.layers.4.self_attention.linear_proj.bias", 1, R, 0, LAYER, 4, 0 },
        { "decoder.layers.5.mlp.linear_fc1.layer_norm_weight", 1, R, 0, LAYER, 5, 0 },
        { "decoder.layers.5.pre_mlp_layernorm.bias", 1, R, 0, LAYER, 5, 0 },
        { "decoder.layers.6.mlp.linear_fc2.weight", 2, CKPT_TP_ROW, 1, LAYER, 6, 0 },
        { "decoder.layers.6.mlp.linear_fc2.bias", 1, R, 0, LAYER, 6, 0 },
        { "decoder.layers.123.self_attention.core_attention._extra_state", 1, R, 0, LAYER, 123, 0 },
        { "decoder.layers.7.self_attention.core_attention.fused_attention._extra_state", 0, R, 0, LAYER, 7, 0 },
        { "decoder.layers.7.self_attention.linear_qkv._extra_state", 1, R, 0, LAYER, 7, 0 },
        { "decoder.layers.7.mlp.linear_fc2._extra_state", 0, R, 0, LAYER, 7, 0 },
        { "decoder.layers.7.pre_mlp_layernorm._extra_state", 1, R, 0, LAYER, 7, 0 },
        { "decoder.layers.8.mlp.router.weight", 2, R, 0, LAYER, 8, 0 },
        { "decoder.layers.8.mlp.experts.local_experts.3.linear_fc2.weight", 2, CKPT_TP_ROW, 1, LAYER, 8, 1 },
        { "decoder.layers.8.mlp.experts.linear_fc2.weight15", 2, CKPT_TP_ROW, 1, LAYER, 8, 1 },
        { "decoder.layers.8.mlp.experts.linear_fc1._extra_state", 1, R, 0, LAYER, 8, 1 },
        { "decoder.layers.8.mlp.shared_experts.linear_fc2.weight", 2, CKPT_TP_ROW, 1, LAYER, 8, 0 },
        { "decoder.final_layernorm.weight", 1, R, 0, CKPT_STAGE_LAST, -1, 0 },
        { "decoder.final_layernorm.bias", 1, R, 0, CKPT_STAGE_LAST, -1, 0 },
        { "decoder.final_layernorm._extra_state", 1, R, 0, CKPT_STAGE_LAST, -1, 0 },
        { "output_layer.weight", 2, CKPT_TP_VOCAB, 0, CKPT_STAGE_LAST, -1, 0 },
        { "output_layer._extra_state", 0, R, 0, CKPT_STAGE_LAST, -1, 0 },
    };
    static const char *const fc1[] = {
        "decoder.layers.9.mlp.linear_fc1.weight",
        "decoder.layers.9.mlp.linear_fc1.bias",
        "decoder.layers.9.mlp.experts.local_experts.0.linear_fc1.weight",
        "decoder.layers.9.mlp.experts.linear_fc1.weight7",
        "decoder.layers.9.mlp.shared_experts.linear_fc1.weight",
    };
    ckpt_map_params *p = NULL;
    ckpt_map *m = NULL;
    const ckpt_parallel_spec *s;
    ckpt_tensor_layout l;
    size_t i;

    ASSERT_OK(ckpt_map_builtin(&m, "megatron_gpt"));
    ASSERT_EQ_STR(ckpt_map_source_kind(m), "Megatron-LM GPT (mcore)");
    ASSERT_TRUE((s = ckpt_map_parallel(m)) != NULL);
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_TRUE(check_gpt(s, p, always, sizeof always / sizeof always[0]));
    for (i = 0; i < sizeof fc1 / sizeof fc1[0]; i++) {
        ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_parallel_classify(s, p, fc1[i], 2, &l));
        ASSERT_ERROR_MENTIONS("needs model parameter 'swiglu'");
        ASSERT_ERROR_MENTIONS(fc1[i]);
    }
    ASSERT_OK(ckpt_map_params_set(p, "swiglu", 1));
    for (i = 0; i < sizeof fc1 / sizeof fc1[0]; i++) {
        ASSERT_OK(ckpt_parallel_classify(s, p, fc1[i], 2, &l));
        ASSERT_EQ_INT(l.tp, CKPT_TP_SWIGLU);
        ASSERT_EQ_INT(l.expert, i == 2 || i == 3);
    }
    ASSERT_OK(ckpt_map_params_set(p, "swiglu", 0));
    for (i = 0; i < sizeof fc1 / sizeof fc1[0]; i++) {
        ASSERT_OK(ckpt_parallel_classify(s, p, fc1[i], 2, &l));
        ASSERT_EQ_INT(l.tp, CKPT_TP_COLUMN);
    }
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_parallel_classify(s, p, "decoder.layers.0.mlp.mystery.weight", 2, &l));
    ASSERT_ERROR_MENTIONS("decoder.layers.0.mlp.mystery.weight: no parallel layout entry of megatron_gpt matches");
    ckpt_map_free(m);
    m = NULL;
    ASSERT_OK(ckpt_map_builtin(&m, "megatron_gpt_inverse"));
    ASSERT_TRUE(check_gpt(ckpt_map_parallel(m), p, always, 3));
    ckpt_map_free(m);
    ckpt_map_params_free(p);
}

CKPT_TEST(test_parallel_rename_layer)
{
    ckpt_buf b = CKPT_BUF_INIT;
    ckpt_map *m = NULL;
    const ckpt_parallel_spec *s;

    ASSERT_OK(ckpt_map_builtin(&m, "megatron_gpt"));
    s = ckpt_map_parallel(m);
    ASSERT_OK(ckpt_buf_puts(&b, "model/"));
    ASSERT_OK(ckpt_parallel_rename_layer(s, "decoder.layers.7.mlp.linear_fc1.weight", 123, &b));
    ASSERT_EQ_STR((const char *)b.data, "model/decoder.layers.123.mlp.linear_fc1.weight");
    ckpt_buf_clear(&b);
    /* Only the layer capture changes, never an expert index, and no padding is kept. */
    ASSERT_OK(ckpt_parallel_rename_layer(s, "decoder.layers.007.mlp.experts.local_experts.7.linear_fc2.weight", 0, &b));
    ASSERT_EQ_STR((const char *)b.data, "decoder.layers.0.mlp.experts.local_experts.7.linear_fc2.weight");
    ckpt_buf_clear(&b);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_rename_layer(s, "embedding.word_embeddings.weight", 1, &b));
    ASSERT_ERROR_MENTIONS("embedding.word_embeddings.weight: holds no layer index");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_rename_layer(s, "decoder.layers.1.x", -1, &b));
    ckpt_buf_dispose(&b);
    ckpt_map_free(m);
}

/* ---- merge and split on real tensors ---- */

#define NVALS 1024

/* float32 0, 1, 2, ... in a mapped file: a value names its position in the full tensor. */
typedef struct fixture {
    ckpt_file *file;
    ckpt_storage s;
    ckpt_extent e;
    ckpt_graph *g;
    ckpt_tensor t[4];
} fixture;

static void fixture_open(fixture *f)
{
    static float vals[NVALS];
    int i;

    for (i = 0; i < NVALS; i++)
        vals[i] = (float)i;
    memset(f, 0, sizeof *f);
    ckpt_test_write_file("vals.bin", vals, sizeof vals);
    if (ckpt_file_open(&f->file, "vals.bin") < 0 || ckpt_graph_new(&f->g) < 0)
        abort();
    f->e.file = f->file;
    f->e.stored_size = f->e.size = sizeof vals;
    f->s.key = "vals";
    f->s.dtype = CKPT_DTYPE_F32;
    f->s.nbytes = sizeof vals;
    f->s.n_extents = 1;
    f->s.extents = &f->e;
}

static void fixture_close(fixture *f)
{
    ckpt_graph_free(f->g);
    ckpt_file_close(f->file);
}

/* Tensor slot i of the fixture: the values 0.. in C order with the given shape. */
static const ckpt_node *tensor(fixture *f, int i, int ndim, int64_t d0, int64_t d1)
{
    ckpt_tensor *t = &f->t[i];
    const ckpt_node *x = NULL;

    memset(t, 0, sizeof *t);
    t->name = "w";
    t->dtype = CKPT_DTYPE_F32;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->storage = &f->s;
    ckpt_tensor_set_contiguous(t);
    if (ckpt_node_tensor(f->g, t, &x) < 0)
        abort();
    return x;
}

static int read_all(const ckpt_node *x, float *out)
{
    return ckpt_node_read(x, 0, ckpt_node_numel(x), CKPT_DTYPE_F32, out);
}

/* Split x into n shards and merge them back: the same values, in a tensor of the same shape. */
static int round_trip(fixture *f, const ckpt_tensor_layout *l, const ckpt_node *x, size_t n)
{
    static float want[NVALS], got[NVALS];
    const ckpt_node *shards[4], *back;
    int64_t numel = ckpt_node_numel(x);

    if (ckpt_parallel_split(f->g, l, "w", x, n, shards) < 0 || ckpt_parallel_merge(f->g, l, "w", shards, n, &back) < 0)
        return -1;
    if (ckpt_node_ndim(back) != ckpt_node_ndim(x) ||
        memcmp(ckpt_node_shape(back), ckpt_node_shape(x), (size_t)ckpt_node_ndim(x) * sizeof(int64_t)) != 0 ||
        read_all(x, want) < 0 || read_all(back, got) < 0)
        return -1;
    return memcmp(want, got, (size_t)numel * sizeof *got) == 0 ? 0 : -1;
}

/* Resharding without writing anything in between: 2 ranks -> full -> 4 ranks -> full. */
static int reshard_chain(fixture *f, const ckpt_tensor_layout *l, const ckpt_node *x)
{
    static float want[NVALS], got[NVALS];
    const ckpt_node *two[2], *four[4], *mid, *back;

    if (ckpt_parallel_split(f->g, l, "w", x, 2, two) < 0 || ckpt_parallel_merge(f->g, l, "w", two, 2, &mid) < 0 ||
        ckpt_parallel_split(f->g, l, "w", mid, 4, four) < 0 || ckpt_parallel_merge(f->g, l, "w", four, 4, &back) < 0 ||
        read_all(x, want) < 0 || read_all(back, got) < 0)
        return -1;
    return memcmp(want, got, (size_t)ckpt_node_numel(x) * sizeof *got) == 0 ? 0 : -1;
}

CKPT_TEST(test_parallel_round_trips)
{
    static const struct {
        ckpt_tp_kind tp;
        int axis, ndim;
        int64_t d0, d1;
    } cases[] = {
        { CKPT_TP_REPLICATED, 0, 2, 8, 4 }, { CKPT_TP_COLUMN, 0, 2, 8, 4 }, { CKPT_TP_COLUMN, 0, 1, 16, 0 },
        { CKPT_TP_ROW, 1, 2, 4, 8 },        { CKPT_TP_VOCAB, 0, 2, 16, 3 }, { CKPT_TP_SWIGLU, 0, 2, 8, 3 },
        { CKPT_TP_SWIGLU, 0, 1, 16, 0 },    { CKPT_TP_SWIGLU, 1, 2, 3, 8 },
    };
    static const size_t ns[] = { 1, 2, 4 };
    fixture f;
    size_t i, k;

    fixture_open(&f);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_tensor_layout l = { cases[i].tp, cases[i].axis, CKPT_STAGE_LAYER, 0, 0, "test", 0, 0, { 0 } };
        const ckpt_node *x = tensor(&f, 0, cases[i].ndim, cases[i].d0, cases[i].d1);
        for (k = 0; k < sizeof ns / sizeof ns[0]; k++)
            if (round_trip(&f, &l, x, ns[k]) < 0) {
                ckpt_test_fail(__FILE__, __LINE__, "case %zu, n = %zu: %s", i, ns[k], ckpt_error_last()->message);
                fixture_close(&f);
                return;
            }
        if (reshard_chain(&f, &l, x) < 0) {
            ckpt_test_fail(__FILE__, __LINE__, "case %zu, 2 -> 4 ranks: %s", i, ckpt_error_last()->message);
            fixture_close(&f);
            return;
        }
    }
    fixture_close(&f);
}

/* fc1 of F = 4 rows per half, H = 3: gate is rows 0..3, up rows 4..7, row r holding 3r..3r+2.
 * At TP 2, rank 0 holds [gate rows 0, 1; up rows 4, 5] and rank 1 [gate 2, 3; up 6, 7]. */
CKPT_TEST(test_parallel_swiglu_shards)
{
    static const int rows[2][4] = { { 0, 1, 4, 5 }, { 2, 3, 6, 7 } };
    ckpt_tensor_layout swiglu = { CKPT_TP_SWIGLU, 0, CKPT_STAGE_LAYER, 0, 0, "swiglu", 0, 0, { 0 } };
    ckpt_tensor_layout column = { CKPT_TP_COLUMN, 0, CKPT_STAGE_LAYER, 0, 0, "column", 0, 0, { 0 } };
    const ckpt_node *full, *shards[2], *naive[2], *merged, *concat;
    float got[24], want[24], naive_vals[24];
    fixture f;
    int r, i, j;

    fixture_open(&f);
    full = tensor(&f, 0, 2, 8, 3);
    ASSERT_OK(ckpt_parallel_split(f.g, &swiglu, "fc1", full, 2, shards));
    for (r = 0; r < 2; r++) {
        ASSERT_EQ_INT(ckpt_node_shape(shards[r])[0], 4);
        ASSERT_EQ_INT(ckpt_node_shape(shards[r])[1], 3);
        ASSERT_OK(read_all(shards[r], got));
        for (i = 0; i < 4; i++)
            for (j = 0; j < 3; j++)
                want[i * 3 + j] = (float)(rows[r][i] * 3 + j);
        ASSERT_TRUE(memcmp(got, want, 12 * sizeof *got) == 0);
    }
    /* Megatron-LM#360: a plain dim-0 chunk of the merged [gate; up] gives rank 0 gate rows
     * 0..3 and no up rows at all. */
    ASSERT_OK(ckpt_parallel_split(f.g, &column, "fc1", full, 2, naive));
    ASSERT_OK(read_all(shards[0], got));
    ASSERT_OK(read_all(naive[0], naive_vals));
    ASSERT_TRUE(memcmp(got, naive_vals, 12 * sizeof *got) != 0);
    /* Merging: rank shards regroup into [gate; up]; concatenating them does not. */
    ASSERT_OK(ckpt_parallel_merge(f.g, &swiglu, "fc1", shards, 2, &merged));
    ASSERT_OK(ckpt_parallel_merge(f.g, &column, "fc1", shards, 2, &concat));
    ASSERT_OK(read_all(merged, got));
    ASSERT_OK(read_all(full, want));
    ASSERT_TRUE(memcmp(got, want, 24 * sizeof *got) == 0);
    ASSERT_OK(read_all(concat, got));
    ASSERT_TRUE(memcmp(got, want, 24 * sizeof *got) != 0);
    fixture_close(&f);
}

CKPT_TEST(test_parallel_errors)
{
    ckpt_tensor_layout column = { CKPT_TP_COLUMN, 0, CKPT_STAGE_LAYER, 0, 0, "c", 0, 0, { 0 } };
    ckpt_tensor_layout row = { CKPT_TP_ROW, 1, CKPT_STAGE_LAYER, 0, 0, "r", 0, 0, { 0 } };
    ckpt_tensor_layout swiglu = { CKPT_TP_SWIGLU, 0, CKPT_STAGE_LAYER, 0, 0, "s", 0, 0, { 0 } };
    ckpt_tensor_layout repl = { CKPT_TP_REPLICATED, 0, CKPT_STAGE_EVERY, -1, 0, "n", 0, 0, { 0 } };
    const ckpt_node *outs[4], *x, *y, *out, *pair[2];
    fixture f;

    fixture_open(&f);
    x = tensor(&f, 0, 2, 6, 4);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_split(f.g, &column, "emb", x, 4, outs));
    ASSERT_ERROR_MENTIONS("emb: the tensor has 6 along axis 0, which does not divide into 4 TP ranks");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_split(f.g, &swiglu, "fc1", x, 2, outs));
    ASSERT_ERROR_MENTIONS("fc1: each swiglu half (gate, up) has 3 along axis 0, which does not divide into 2 TP ranks");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_OK(ckpt_parallel_split(f.g, &swiglu, "fc1", x, 3, outs));
    y = tensor(&f, 1, 2, 5, 4);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_split(f.g, &swiglu, "fc1", y, 1, outs));
    ASSERT_ERROR_MENTIONS("fc1: swiglu tensor [5, 4] has 5 along axis 0, which is not two halves [gate; up]");
    /* Shards that are not equal parts of one tensor. */
    pair[0] = x;
    pair[1] = y;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_parallel_merge(f.g, &column, "qkv", pair, 2, &out));
    ASSERT_ERROR_MENTIONS("qkv: TP rank 1 holds float32 [5, 4], rank 0 holds float32 [6, 4]");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_parallel_merge(f.g, &repl, "norm", pair, 2, &out));
    pair[1] = y;
    pair[0] = y;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_parallel_merge(f.g, &swiglu, "fc1", pair, 2, &out));
    ASSERT_ERROR_MENTIONS("is not two halves");
    /* Replicated: shard 0 itself, whatever the other shards' bytes. */
    pair[0] = x;
    pair[1] = tensor(&f, 2, 2, 6, 4);
    ASSERT_OK(ckpt_parallel_merge(f.g, &repl, "norm", pair, 2, &out));
    ASSERT_TRUE(out == x);
    ASSERT_OK(ckpt_parallel_split(f.g, &repl, "norm", x, 3, outs));
    ASSERT_TRUE(outs[0] == x && outs[2] == x);
    /* An axis the tensor does not have, and no ranks at all. */
    x = tensor(&f, 3, 1, 8, 0);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_split(f.g, &row, "proj.bias", x, 2, outs));
    ASSERT_ERROR_MENTIONS("proj.bias: the layout cuts axis 1, but the tensor is [8]");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_split(f.g, &column, "w", x, 0, outs));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_merge(f.g, &column, "w", pair, 0, &out));
    fixture_close(&f);
}

/* Transformer Engine's fused QKV [all q | all k | all v] of 4 query heads and 2 KV heads of
 * one row each (rows q0..q3, k0, k1, v0, v1): at TP 2, rank r holds [q_r | k_r | v_r] =
 * rows 2r, 2r+1 of q, row r of k and of v; merging gives the input back. A sections entry
 * takes its ratio from the model parameters it names, and needs them. */
CKPT_TEST(test_parallel_sections)
{
    static const char json[] =
        HEAD "\"parallel\": {\"layer\": \"l.{L}.\", \"tensors\": ["
             "{\"match\": \"l.{L}.qkv\", \"tp\": \"sections\", \"parts\": [\"heads\", \"kv\", \"kv\"]}]}}";
    static const int rows[2][4] = { { 0, 1, 4, 6 }, { 2, 3, 5, 7 } };
    ckpt_map *m = NULL;
    ckpt_map_params *p = NULL;
    ckpt_tensor_layout l;
    const ckpt_node *full, *shards[2], *merged, *odd;
    float got[24], want[24];
    fixture f;
    int r, i, j;

    ASSERT_OK(parse(&m, json));
    ASSERT_OK(ckpt_map_params_new(&p));
    ASSERT_OK(ckpt_map_params_set(p, "heads", 4));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_parallel_classify(ckpt_map_parallel(m), p, "l.0.qkv", 2, &l));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MAP_PARAM);
    ASSERT_ERROR_MENTIONS("'kv'");
    ASSERT_OK(ckpt_map_params_set(p, "kv", 2));
    ASSERT_OK(ckpt_parallel_classify(ckpt_map_parallel(m), p, "l.0.qkv", 2, &l));
    ASSERT_EQ_INT(l.tp, CKPT_TP_SECTIONS);
    ASSERT_EQ_INT(l.n_sections, 3);
    ASSERT_TRUE(l.sections[0] == 4 && l.sections[1] == 2 && l.sections[2] == 2);

    fixture_open(&f);
    full = tensor(&f, 0, 2, 8, 3);
    ASSERT_OK(ckpt_parallel_split(f.g, &l, "qkv", full, 2, shards));
    for (r = 0; r < 2; r++) {
        ASSERT_EQ_INT(ckpt_node_shape(shards[r])[0], 4);
        ASSERT_OK(read_all(shards[r], got));
        for (i = 0; i < 4; i++)
            for (j = 0; j < 3; j++)
                want[i * 3 + j] = (float)(rows[r][i] * 3 + j);
        ASSERT_TRUE(memcmp(got, want, 12 * sizeof *got) == 0);
    }
    ASSERT_OK(ckpt_parallel_merge(f.g, &l, "qkv", shards, 2, &merged));
    ASSERT_OK(read_all(merged, got));
    ASSERT_OK(read_all(full, want));
    ASSERT_TRUE(memcmp(got, want, 24 * sizeof *got) == 0);
    /* 2 KV heads do not divide over 4 ranks; 7 rows are not in the ratio 4:2:2 */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_split(f.g, &l, "qkv", full, 4, shards));
    ASSERT_ERROR_MENTIONS("section 1 has 2 along axis 0, which does not divide into 4 TP ranks");
    odd = tensor(&f, 0, 2, 7, 3);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_parallel_split(f.g, &l, "qkv", odd, 2, shards));
    ASSERT_ERROR_MENTIONS("not in the sections' ratio 4:2:2");
    fixture_close(&f);
    ckpt_map_params_free(p);
    ckpt_map_free(m);
}
