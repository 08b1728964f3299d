/* PaddleNLP checkpoints as one logical model (ckpt/paddle.h) on the fixtures PaddleNLP
 * itself wrote (testdata/paddlenlp, see testdata/gen/README_paddlenlp_reshard.md): rank
 * coordinates from file names, the merged full tensors of every layout, plans and config.json
 * at other layouts, the per-rank cut, models built shard by shard, tensors left out by the
 * caller's hook, and the layout errors. Plans are executed and compared, tensor by
 * tensor and value by value, with the files PaddleNLP wrote for the target layout. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>

typedef struct opened {
    ckpt_set *set;
    ckpt_plan *plan;
    ckpt_paddle_model *m;
} opened;

/* A directory (a path, or "paddlenlp/<case>" under testdata when `fixture`) as a model whose
 * nodes live in a fresh plan's graph. */
static int open_model(opened *o, const char *dir, int fixture)
{
    char path[256];
    int rc;

    memset(o, 0, sizeof *o);
    snprintf(path, sizeof path, "paddlenlp/%s", dir);
    if ((rc = ckpt_set_open(&o->set, fixture ? ckpt_test_data(path) : dir, NULL)) < 0 ||
        (rc = ckpt_plan_new(&o->plan)) < 0)
        return rc;
    return ckpt_paddle_model_open(&o->m, o->set, ckpt_plan_graph(o->plan), NULL);
}

static void close_model(opened *o)
{
    ckpt_paddle_model_close(o->m);
    ckpt_plan_free(o->plan);
    ckpt_set_close(o->set);
    memset(o, 0, sizeof *o);
}

static const ckpt_node *find(const ckpt_paddle_model *m, const char *name, ckpt_tensor_layout *l)
{
    const ckpt_node *full = NULL;
    size_t i;

    for (i = 0; i < ckpt_paddle_model_tensor_count(m); i++)
        if (strcmp(ckpt_paddle_model_tensor_at(m, i, &full, l), name) == 0)
            return full;
    return NULL;
}

static int shape_is(const ckpt_node *n, int64_t d0, int64_t d1)
{
    return n && ckpt_node_ndim(n) == 2 && ckpt_node_shape(n)[0] == d0 && ckpt_node_shape(n)[1] == d1;
}

/* Index of the first tensor whose name or shape differs from ref's, or whose dtype is not
 * `dtype`; the count when all agree; -1 when the counts differ. */
static long first_mismatch(const ckpt_paddle_model *ref, const ckpt_paddle_model *m, ckpt_dtype dtype)
{
    size_t i, n = ckpt_paddle_model_tensor_count(ref);

    if (ckpt_paddle_model_tensor_count(m) != n)
        return -1;
    for (i = 0; i < n; i++) {
        const ckpt_node *a, *b;
        const char *na = ckpt_paddle_model_tensor_at(ref, i, &a, NULL);
        const char *nb = ckpt_paddle_model_tensor_at(m, i, &b, NULL);
        if (strcmp(na, nb) != 0 || !a || !b || ckpt_node_ndim(a) != ckpt_node_ndim(b) ||
            memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) != 0 ||
            ckpt_node_dtype(b) != dtype)
            return (long)i;
    }
    return (long)n;
}

static int copy_file(const char *src_rel, const char *dst)
{
    size_t len;
    unsigned char *data = ckpt_test_read_file(ckpt_test_data(src_rel), &len);

    if (!data)
        return -1;
    ckpt_test_write_file(dst, data, len);
    free(data);
    return 0;
}

/* A whole file as a NUL-terminated string (ckpt_test_read_file leaves room for the NUL). */
static char *read_text(const char *path)
{
    size_t len;
    unsigned char *data = ckpt_test_read_file(path, &len);

    if (data)
        data[len] = '\0';
    return (char *)data;
}

/* Whether file `a` (here) holds exactly the bytes of testdata file `b`. */
static int same_bytes(const char *a, const char *b_rel)
{
    size_t la = 0, lb = 0;
    unsigned char *x = ckpt_test_read_file(a, &la), *y = ckpt_test_read_file(ckpt_test_data(b_rel), &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;

    free(x);
    free(y);
    return same;
}

static long find_member(const ckpt_set *s, const char *rel)
{
    size_t i;

    for (i = 0; i < ckpt_set_member_count(s); i++)
        if (strcmp(ckpt_set_member_at(s, i)->rel, rel) == 0)
            return (long)i;
    return -1;
}

/* The expected ranges are what Paddle 3.3's SegmentLayers gives over LlamaForCausalLMPipe's
 * layer list (embedding, the decoder layers, norm, head) with the method PaddleNLP picks:
 * "layer:LlamaDecoderLayer" when pp divides the layers, else "uniform" over all of them. */
CKPT_TEST(test_paddle_stage_layers_segmentation)
{
    static const struct {
        int64_t n;
        int pp, stage;
        int64_t lo, hi;
    } cases[] = {
        { 4, 2, 0, 0, 2 }, { 4, 2, 1, 2, 4 }, { 4, 4, 0, 0, 1 }, { 4, 4, 3, 3, 4 }, { 4, 1, 0, 0, 4 },
        { 5, 2, 0, 0, 3 }, { 5, 2, 1, 3, 5 },
        { 7, 3, 0, 0, 2 }, { 7, 3, 1, 2, 5 }, { 7, 3, 2, 5, 7 },
        { 10, 4, 0, 0, 2 }, { 10, 4, 1, 2, 5 }, { 10, 4, 2, 5, 8 }, { 10, 4, 3, 8, 10 },
        { 4, 3, 0, 0, 1 }, { 4, 3, 1, 1, 3 }, { 4, 3, 2, 3, 4 },
        { 5, 4, 0, 0, 1 }, { 5, 4, 1, 1, 3 }, { 5, 4, 2, 3, 5 }, { 5, 4, 3, 5, 5 }, /* the last: norm, head */
        { 3, 2, 0, 0, 2 }, { 3, 2, 1, 2, 3 },
    };
    int64_t n, lo, hi, prev;
    size_t i;
    int pp, s;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_paddle_stage_layers(cases[i].n, cases[i].pp, cases[i].stage, &lo, &hi);
        if (lo != cases[i].lo || hi != cases[i].hi)
            ckpt_test_fail(__FILE__, __LINE__, "%lld layers, stage %d of %d: [%lld, %lld), expected [%lld, %lld)",
                           (long long)cases[i].n, cases[i].stage, cases[i].pp, (long long)lo, (long long)hi,
                           (long long)cases[i].lo, (long long)cases[i].hi);
    }
    /* the stages tile [0, n) in order; equal shares when pp divides n */
    for (n = 1; n <= 40; n++)
        for (pp = 1; pp <= n && pp <= 12; pp++)
            for (s = 0, prev = 0; s < pp; s++) {
                ckpt_paddle_stage_layers(n, pp, s, &lo, &hi);
                if (lo != prev || hi < lo || (n % pp == 0 && hi - lo != n / pp)) {
                    ckpt_test_fail(__FILE__, __LINE__, "%lld layers, stage %d of %d: [%lld, %lld)", (long long)n, s,
                                   pp, (long long)lo, (long long)hi);
                    return;
                }
                prev = hi;
                if (s == pp - 1)
                    ASSERT_EQ_INT(hi, n);
            }
}

CKPT_TEST(test_paddle_rank_file_names)
{
    static const struct {
        const char *base, *ext;
        int tp, pp, n_tp, n_pp;
        const char *want;
    } cases[] = {
        { "model_state", ".pdparams", 0, 0, 1, 1, "model_state.pdparams" },
        { "model_state", ".pdparams", 1, 0, 2, 1, "model_state.tp01.pdparams" },
        { "model_state", ".pdparams", 0, 2, 1, 4, "model_state.pp02.pdparams" },
        { "model_state", ".pdparams", 1, 3, 2, 4, "model_state.tp01_pp03.pdparams" },
        { "optimizer", ".pdopt", 0, 1, 2, 2, "optimizer.tp00_pp01.pdopt" },
        { "optimizer", ".pdopt", 11, 0, 16, 1, "optimizer.tp11.pdopt" },
    };
    ckpt_buf b = CKPT_BUF_INIT;
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_buf_clear(&b);
        ASSERT_OK(ckpt_paddle_rank_file(cases[i].base, cases[i].ext, cases[i].tp, cases[i].pp, cases[i].n_tp,
                                        cases[i].n_pp, &b));
        ASSERT_EQ_STR((const char *)b.data, cases[i].want);
    }
    ckpt_buf_dispose(&b);
}

CKPT_TEST(test_paddle_set_coordinates_from_names)
{
    static const struct {
        const char *rel, *role;
        int tp, pp;
    } want[] = {
        { "config.json", "other", -1, -1 }, { "expected.json", "other", -1, -1 },
        { "generation_config.json", "other", -1, -1 },
        { "model_state.tp00_pp00.pdparams", "model", 0, 0 }, { "model_state.tp00_pp01.pdparams", "model", 0, 1 },
        { "model_state.tp01_pp00.pdparams", "model", 1, 0 }, { "model_state.tp01_pp01.pdparams", "model", 1, 1 },
        { "optimizer.tp00_pp00.pdopt", "optimizer", 0, 0 },  { "optimizer.tp00_pp01.pdopt", "optimizer", 0, 1 },
        { "optimizer.tp01_pp00.pdopt", "optimizer", 1, 0 },  { "optimizer.tp01_pp01.pdopt", "optimizer", 1, 1 },
    };
    const ckpt_member *mb;
    opened o;
    ckpt_set *s;
    size_t i;
    long k;

    ASSERT_OK(ckpt_set_open(&s, ckpt_test_data("paddlenlp/fp32_tp2pp2"), NULL));
    ASSERT_EQ_STR(ckpt_set_info_of(s)->layout, "paddle");
    ASSERT_TRUE(ckpt_set_info_of(s)->tp == 2 && ckpt_set_info_of(s)->pp == 2 && ckpt_set_info_of(s)->dp == 1);
    ASSERT_EQ_INT(ckpt_set_member_count(s), sizeof want / sizeof want[0]);
    for (i = 0; i < sizeof want / sizeof want[0]; i++) {
        mb = ckpt_set_member_at(s, i);
        ASSERT_EQ_STR(mb->rel, want[i].rel);
        ASSERT_EQ_STR(mb->role, want[i].role);
        ASSERT_TRUE(mb->at.tp == want[i].tp && mb->at.pp == want[i].pp && mb->at.dp == -1 && mb->at.shard == -1);
    }
    ckpt_set_close(s);

    /* PP without TP names no tp part; a sharding rank (_shardZZ) is the dp coordinate */
    ASSERT_TRUE(mkdir("sd", 0777) == 0);
    ASSERT_TRUE(copy_file("paddlenlp/fp32_pp2/config.json", "sd/config.json") == 0);
    ASSERT_TRUE(copy_file("paddlenlp/fp32_pp2/model_state.pp00.pdparams", "sd/model_state.pp00.pdparams") == 0);
    ASSERT_TRUE(copy_file("paddlenlp/fp32_pp2/model_state.pp01.pdparams", "sd/model_state.pp01.pdparams") == 0);
    ASSERT_TRUE(copy_file("paddlenlp/fp32_pp2/optimizer.pp01.pdopt", "sd/optimizer.tp00_pp01_shard02.pdopt") == 0);
    ASSERT_OK(ckpt_set_open(&s, "sd", NULL));
    ASSERT_TRUE(ckpt_set_info_of(s)->tp == 1 && ckpt_set_info_of(s)->pp == 2 && ckpt_set_info_of(s)->dp == 3);
    ASSERT_TRUE((k = find_member(s, "model_state.pp01.pdparams")) >= 0);
    mb = ckpt_set_member_at(s, (size_t)k);
    ASSERT_TRUE(strcmp(mb->role, "model") == 0 && mb->at.tp == -1 && mb->at.pp == 1 && mb->at.dp == -1);
    ASSERT_TRUE((k = find_member(s, "optimizer.tp00_pp01_shard02.pdopt")) >= 0);
    mb = ckpt_set_member_at(s, (size_t)k);
    ASSERT_TRUE(strcmp(mb->role, "optimizer") == 0 && mb->at.tp == 0 && mb->at.pp == 1 && mb->at.dp == 2);
    ckpt_set_close(s);
    /* only stage 1 has an optimizer file: the model says so rather than merge half a state */
    ASSERT_FAILS(CKPT_ENOTFOUND, open_model(&o, "sd", 0));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("optimizer files for 1 of the 2 ranks");
    close_model(&o);

    /* expert-parallel files (moeNN) are not read as parts of one model */
    ASSERT_TRUE(mkdir("shm", 0777) == 0);
    ASSERT_TRUE(copy_file("paddlenlp/fp32_tp1/model_state.pdparams", "shm/model_state.moe01.pdparams") == 0);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_model(&o, "shm", 0));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("model_state.moe01.pdparams");
    close_model(&o);
}

CKPT_TEST(test_paddle_model_every_layout_merges_to_tp1)
{
    static const struct {
        const char *name;
        int tp, pp, bf16, optimizer;
    } cases[] = {
        { "fp32_tp1", 1, 1, 0, 1 },    { "fp32_tp2", 2, 1, 0, 1 },  { "fp32_pp2", 1, 2, 0, 1 },
        { "fp32_tp2pp2", 2, 2, 0, 1 }, { "fp32_pp4", 1, 4, 0, 1 },  { "fp32_tp4", 4, 1, 0, 1 },
        { "bf16_tp1", 1, 1, 1, 1 },    { "bf16_tp2", 2, 1, 1, 1 },  { "bf16_pp2", 1, 2, 1, 1 },
        { "bf16_tp2pp2", 2, 2, 1, 1 }, { "unified_fp32", 1, 1, 0, 0 },
        /* save_sharded_model: the sharding ranks' files together; bf16 from the master weights */
        { "fp32_tp2_shard2", 2, 1, 0, 1 }, { "bf16_tp2_shard2", 2, 1, 1, 1 },
    };
    const ckpt_paddle_model_info *info;
    ckpt_tensor_layout l;
    opened ref, o;
    size_t i;
    long bad;

    ASSERT_OK(open_model(&ref, "fp32_tp1", 1));
    ASSERT_EQ_INT(ckpt_paddle_model_tensor_count(ref.m), 35);
    ASSERT_EQ_STR(ckpt_paddle_model_tensor_at(ref.m, 0, NULL, NULL), "llama.embed_tokens.weight");
    ASSERT_EQ_STR(ckpt_paddle_model_tensor_at(ref.m, 34, NULL, NULL), "lm_head.weight");
    ASSERT_TRUE(ckpt_paddle_model_tensor_at(ref.m, 35, NULL, NULL) == NULL);
    ASSERT_TRUE(shape_is(find(ref.m, "llama.layers.3.mlp.gate_up_fused_proj.weight", &l), 16, 64));
    ASSERT_TRUE(l.tp == CKPT_TP_SWIGLU && l.layer == 3 && l.stage == CKPT_STAGE_LAYER);
    ASSERT_TRUE(shape_is(find(ref.m, "lm_head.weight", &l), 16, 128) && l.stage == CKPT_STAGE_LAST);
    ASSERT_TRUE(find(ref.m, "llama.embed_tokens.weight", &l) && l.stage == CKPT_STAGE_FIRST);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (open_model(&o, cases[i].name, 1) < 0) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: %s", cases[i].name, ckpt_error_last()->message);
            close_model(&o);
            break;
        }
        info = ckpt_paddle_model_info_of(o.m);
        ASSERT_EQ_INT(info->tp, cases[i].tp);
        ASSERT_EQ_INT(info->pp, cases[i].pp);
        ASSERT_EQ_INT(info->num_layers, 4);
        ASSERT_EQ_INT(info->has_optimizer, cases[i].optimizer);
        ASSERT_EQ_INT(info->master_weights, cases[i].bf16);
        /* .pdparams carry StructuredToParameterName@@; safetensors do not */
        ASSERT_EQ_INT(info->name_table, cases[i].optimizer);
        ASSERT_TRUE(info->config && strstr(info->config, "config.json"));
        ASSERT_TRUE(info->config_json && strstr(info->config_json, "\"vocab_size\": 128"));
        /* same names in the same order (unified: reordered from sorted), full shapes */
        bad = first_mismatch(ref.m, o.m, cases[i].bf16 ? CKPT_DTYPE_BF16 : CKPT_DTYPE_F32);
        if (bad != 35) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: tensor %ld (%s) differs from fp32_tp1's", cases[i].name, bad,
                           bad >= 0 ? ckpt_paddle_model_tensor_at(o.m, (size_t)bad, NULL, NULL) : "count");
            close_model(&o);
            break;
        }
        close_model(&o);
    }
    close_model(&ref);
}

CKPT_TEST(test_paddle_plan_files_of_a_layout)
{
    static const char *const files[] = {
        "model_state.tp00_pp00.pdparams", "optimizer.tp00_pp00.pdopt", "model_state.tp01_pp00.pdparams",
        "optimizer.tp01_pp00.pdopt",      "model_state.tp00_pp01.pdparams", "optimizer.tp00_pp01.pdopt",
        "model_state.tp01_pp01.pdparams", "optimizer.tp01_pp01.pdopt", "config.json", "expected.json",
        "generation_config.json",         "logits.json",
    };
    static const size_t tensors[] = { 17, 68, 17, 68, 18, 72, 18, 72 };
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    const ckpt_plan_file *f;
    ckpt_plan *plan;
    opened o;
    size_t i;

    ASSERT_OK(open_model(&o, "fp32_tp1", 1));
    t.tp = 2;
    t.pp = 2;
    ASSERT_OK(ckpt_paddle_plan(o.m, &t, o.plan));
    ASSERT_EQ_INT(ckpt_plan_file_count(o.plan), sizeof files / sizeof files[0]);
    for (i = 0; i < sizeof files / sizeof files[0]; i++) {
        f = ckpt_plan_file_at(o.plan, i);
        ASSERT_EQ_STR(f->rel, files[i]);
        if (i < 8) {
            ASSERT_EQ_INT(f->kind, CKPT_PLAN_TENSORS);
            ASSERT_EQ_STR(f->format, "pdparams");
            ASSERT_EQ_INT(f->n_tensors, tensors[i]);
        } else {
            /* config.json is rewritten, the rest copied from the source directory */
            ASSERT_EQ_INT(f->kind, i == 8 ? CKPT_PLAN_BYTES : CKPT_PLAN_COPY);
        }
    }
    /* stage 1 of 2 holds layers 2 and 3, globally numbered, then the norm and lm_head */
    ASSERT_EQ_STR(ckpt_plan_tensor_at(o.plan, 4, 0, NULL, NULL), "llama.layers.2.self_attn.q_proj.weight");
    ASSERT_EQ_STR(ckpt_plan_tensor_at(o.plan, 4, 17, NULL, NULL), "lm_head.weight");

    /* model files only */
    t.drop_optimizer = 1;
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_paddle_plan(o.m, &t, plan));
    ASSERT_EQ_INT(ckpt_plan_file_count(plan), 8);
    for (i = 0; i < ckpt_plan_file_count(plan); i++)
        ASSERT_TRUE(!strstr(ckpt_plan_file_at(plan, i)->rel, ".pdopt"));
    ckpt_plan_free(plan);
    close_model(&o);
}

/* 0 when the tensor file `path` holds the tensors of testdata file `rel` in the same order,
 * with the same dtypes, shapes and bytes (the pickles themselves need not be byte-equal). */
static int same_tensors(const char *path, const char *rel)
{
    static unsigned char x[65536], y[65536];
    ckpt_ckpt *a = NULL, *b = NULL;
    ckpt_graph *g = NULL;
    size_t i;
    int rc;

    if ((rc = ckpt_open(&a, path, NULL)) < 0 || (rc = ckpt_open(&b, ckpt_test_data(rel), NULL)) < 0 ||
        (rc = ckpt_graph_new(&g)) < 0)
        goto done;
    rc = ckpt_tensor_count(a) == ckpt_tensor_count(b) ? 0 : -1;
    for (i = 0; i < ckpt_tensor_count(b) && rc == 0; i++) {
        const ckpt_tensor *ta = ckpt_tensor_at(a, i), *tb = ckpt_tensor_at(b, i);
        const ckpt_node *na = NULL, *nb = NULL;
        int64_t n = 0;
        if (strcmp(ta->name, tb->name) != 0 || ta->dtype != tb->dtype || ta->ndim != tb->ndim ||
            memcmp(ta->shape, tb->shape, (size_t)ta->ndim * sizeof(int64_t)) != 0 ||
            ckpt_node_tensor(g, ta, &na) < 0 || ckpt_node_tensor(g, tb, &nb) < 0 ||
            (size_t)(n = ckpt_node_numel(na)) * ckpt_dtype_size(ta->dtype) > sizeof x ||
            ckpt_node_read(na, 0, n, ta->dtype, x) < 0 || ckpt_node_read(nb, 0, n, tb->dtype, y) < 0 ||
            memcmp(x, y, (size_t)n * ckpt_dtype_size(ta->dtype)) != 0) {
            fprintf(stderr, "  %s: tensor %zu (%s) differs from %s\n", path, i, tb->name, rel);
            rc = -1;
        }
    }
done:
    ckpt_graph_free(g);
    ckpt_close(a);
    ckpt_close(b);
    return rc;
}

/* Execute the plan of paddlenlp/<from> at tp x pp into `out`: every file PaddleNLP wrote for
 * that layout (paddlenlp/<want>) is there, tensor files with the same tensors, config.json
 * byte for byte; the files copied through equal the source's. */
static void check_written_layout(const char *from, int tp, int pp, const char *out, const char *want)
{
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    char path[256], rel[256];
    opened o;
    size_t i;
    int n_tensor_files = 0;

    t.tp = tp;
    t.pp = pp;
    ASSERT_OK(open_model(&o, from, 1));
    ASSERT_OK(ckpt_paddle_plan(o.m, &t, o.plan));
    ASSERT_OK(ckpt_plan_execute(o.plan, out, NULL, NULL));
    for (i = 0; i < ckpt_plan_file_count(o.plan); i++) {
        const ckpt_plan_file *f = ckpt_plan_file_at(o.plan, i);
        n_tensor_files += f->kind == CKPT_PLAN_TENSORS;
        snprintf(path, sizeof path, "%s/%s", out, f->rel);
        snprintf(rel, sizeof rel, "paddlenlp/%s/%s", f->kind == CKPT_PLAN_COPY ? from : want, f->rel);
        if (f->kind == CKPT_PLAN_TENSORS ? same_tensors(path, rel) != 0 : !same_bytes(path, rel))
            ckpt_test_fail(__FILE__, __LINE__, "%s at TP %d x PP %d: %s differs from %s", from, tp, pp, f->rel, rel);
    }
    ASSERT_EQ_INT(n_tensor_files, 2 * tp * pp); /* a model and an optimizer file per rank */
    close_model(&o);
}

CKPT_TEST(test_paddle_plan_writes_what_paddlenlp_wrote)
{
    opened back;
    char *cfg;

    /* config.json: tensor_parallel_degree added in key order at TP 2 ... */
    check_written_layout("fp32_tp1", 2, 1, "tp2", "fp32_tp2");
    ASSERT_TRUE((cfg = read_text("tp2/config.json")) != NULL);
    ASSERT_TRUE(strstr(cfg, "  \"sequence_parallel\": false,\n  \"tensor_parallel_degree\": 2,\n"
                                          "  \"tensor_parallel_output\": true,") != NULL);
    free(cfg);
    /* ... the pipeline class and degree 1 for PP alone ... */
    check_written_layout("fp32_tp1", 1, 2, "pp2", "fp32_pp2");
    ASSERT_TRUE((cfg = read_text("pp2/config.json")) != NULL);
    ASSERT_TRUE(strstr(cfg, "\"LlamaForCausalLMPipe\"") && strstr(cfg, "degree\": 1,"));
    free(cfg);
    /* ... and no degree at all back on one card */
    check_written_layout("fp32_tp2", 1, 1, "tp1", "fp32_tp1");
    ASSERT_TRUE((cfg = read_text("tp1/config.json")) != NULL);
    ASSERT_TRUE(strstr(cfg, "tensor_parallel_degree") == NULL);
    free(cfg);
    /* k/v whole on every rank at TP 4; bf16's (name, array) pairs and master weights */
    check_written_layout("fp32_tp1", 4, 1, "tp4", "fp32_tp4");
    check_written_layout("bf16_tp2pp2", 1, 2, "bf16pp2", "bf16_pp2");
    /* what was written reads back as a model of its layout */
    ASSERT_OK(open_model(&back, "tp2", 0));
    ASSERT_EQ_INT(ckpt_paddle_model_info_of(back.m)->tp, 2);
    ASSERT_EQ_INT(ckpt_paddle_model_info_of(back.m)->has_optimizer, 1);
    ASSERT_EQ_INT(ckpt_paddle_model_tensor_count(back.m), 35);
    close_model(&back);
}

/* The node of `name` among a rank's tensors. */
static const ckpt_node *in_rank(const char **names, const ckpt_node **nodes, size_t n, const char *name)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return nodes[i];
    return NULL;
}

CKPT_TEST(test_paddle_model_rank_cuts_full_tensors)
{
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    const char **names;
    const ckpt_node **nodes, *norm;
    size_t n, i;
    opened o;

    ASSERT_OK(open_model(&o, "fp32_tp1", 1));
    t.tp = 2;
    ASSERT_OK(ckpt_paddle_model_rank(o.m, &t, 1, 0, &names, &nodes, &n));
    ASSERT_EQ_INT(n, 35);
    for (i = 0; i < n; i++)
        ASSERT_EQ_STR(names[i], ckpt_paddle_model_tensor_at(o.m, i, NULL, NULL));
    /* Paddle's Linear weights are [in, out]: column cuts axis 1, row axis 0 */
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "llama.layers.0.self_attn.q_proj.weight"), 16, 8));
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "llama.layers.0.self_attn.o_proj.weight"), 8, 16));
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "llama.layers.0.self_attn.k_proj.weight"), 16, 4));
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "llama.layers.0.mlp.gate_up_fused_proj.weight"), 16, 32));
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "llama.embed_tokens.weight"), 64, 16));
    norm = in_rank(names, nodes, n, "llama.norm.weight");
    ASSERT_TRUE(norm && ckpt_node_ndim(norm) == 1 && ckpt_node_shape(norm)[0] == 16);
    free((void *)names);
    free((void *)nodes);

    /* TP 4: k/v stay whole (2 kv heads % 4 != 0), the vocabulary divides */
    t.tp = 4;
    ASSERT_OK(ckpt_paddle_model_rank(o.m, &t, 3, 0, &names, &nodes, &n));
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "llama.layers.2.self_attn.k_proj.weight"), 16, 8));
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "llama.layers.2.self_attn.q_proj.weight"), 16, 4));
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "llama.embed_tokens.weight"), 32, 16));
    ASSERT_TRUE(shape_is(in_rank(names, nodes, n, "lm_head.weight"), 16, 32));
    free((void *)names);
    free((void *)nodes);

    /* PP 2: stage 0 = embedding + layers 0-1, stage 1 = layers 2-3 + norm + lm_head */
    t.tp = 1;
    t.pp = 2;
    ASSERT_OK(ckpt_paddle_model_rank(o.m, &t, 0, 1, &names, &nodes, &n));
    ASSERT_EQ_INT(n, 18);
    ASSERT_EQ_STR(names[0], "llama.layers.2.self_attn.q_proj.weight");
    ASSERT_TRUE(strcmp(names[17], "lm_head.weight") == 0 && shape_is(nodes[17], 16, 128));
    free((void *)names);
    free((void *)nodes);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_model_rank(o.m, &t, 0, 2, &names, &nodes, &n));
    ASSERT_TRUE(names == NULL && nodes == NULL && n == 0);
    close_model(&o);
}

CKPT_TEST(test_paddle_model_layout_errors)
{
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    opened o;

    /* a missing TP rank: its optimizer file says the layout has two */
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_tp2", "miss") == 0);
    ASSERT_TRUE(remove("miss/model_state.tp01.pdparams") == 0);
    ASSERT_FAILS(CKPT_ENOTFOUND, open_model(&o, "miss", 0));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("TP rank 1");
    close_model(&o);

    /* stage 0's model with the whole model's optimizer: layers 2-3's moments have no parameter */
    ASSERT_TRUE(mkdir("orphan", 0777) == 0);
    ASSERT_TRUE(copy_file("paddlenlp/fp32_tp1/config.json", "orphan/config.json") == 0);
    ASSERT_TRUE(copy_file("paddlenlp/fp32_pp2/model_state.pp00.pdparams", "orphan/model_state.pdparams") == 0);
    ASSERT_TRUE(copy_file("paddlenlp/fp32_tp1/optimizer.pdopt", "orphan/optimizer.pdopt") == 0);
    ASSERT_FAILS(CKPT_EFORMAT, open_model(&o, "orphan", 0));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("optimizer.pdopt");
    ASSERT_ERROR_MENTIONS("'linear_12.w_0_moment1_0' belongs to no parameter");
    close_model(&o);
    /* ... which --no-optimizer leaves unread; the model is still half of what config.json says */
    {
        ckpt_paddle_model_options mo = CKPT_PADDLE_MODEL_OPTIONS_INIT;
        mo.no_optimizer = 1;
        ASSERT_OK(ckpt_set_open(&o.set, "orphan", NULL));
        ASSERT_OK(ckpt_plan_new(&o.plan));
        ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_paddle_model_open(&o.m, o.set, ckpt_plan_graph(o.plan), &mo));
        ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MODEL);
        ASSERT_ERROR_MENTIONS("no tensor of decoder layer 2, but orphan/config.json says num_hidden_layers 4");
        close_model(&o);
    }

    /* targets that do not fit: TP 3 divides no head count nor size; more stages than layers */
    ASSERT_OK(open_model(&o, "fp32_tp1", 1));
    t.tp = 3;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_plan(o.m, &t, o.plan));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("4 attention heads cannot be split over 3 tensor-parallel ranks");
    t.tp = 1;
    t.pp = 5;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_plan(o.m, &t, o.plan));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    close_model(&o);

    /* another framework's set */
    ASSERT_OK(ckpt_set_open(&o.set, ckpt_test_data("megatron/tp1"), NULL));
    ASSERT_OK(ckpt_plan_new(&o.plan));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_model_open(&o.m, o.set, ckpt_plan_graph(o.plan), NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("megatron");
    ASSERT_TRUE(o.m == NULL);
    close_model(&o);
}

/* Every tensor of each TP rank file of fp32_tp2 as a shard of m. */
static int add_tp2_shards(ckpt_paddle_model *m, ckpt_graph *g, ckpt_ckpt **ck)
{
    static const char *const files[] = { "paddlenlp/fp32_tp2/model_state.tp00.pdparams",
                                         "paddlenlp/fp32_tp2/model_state.tp01.pdparams" };
    const ckpt_node *node;
    size_t i;
    int r, rc;

    for (r = 0; r < 2; r++) {
        if ((rc = ckpt_open(&ck[r], ckpt_test_data(files[r]), NULL)) < 0)
            return rc;
        for (i = 0; i < ckpt_tensor_count(ck[r]); i++) {
            const ckpt_tensor *t = ckpt_tensor_at(ck[r], i);
            if ((rc = ckpt_node_tensor(g, t, &node)) < 0 || (rc = ckpt_paddle_model_add_shard(m, r, 0, t->name, node,
                                                                                             NULL)) < 0)
                return rc;
        }
    }
    return 0;
}

CKPT_TEST(test_paddle_model_built_shard_by_shard)
{
    ckpt_ckpt *ck[2] = { NULL, NULL };
    ckpt_paddle_model *m = NULL, *two = NULL;
    const ckpt_tensor *t;
    const ckpt_node *node;
    ckpt_graph *g;
    char *cfg;
    opened ref;

    ASSERT_TRUE((cfg = read_text(ckpt_test_data("paddlenlp/fp32_tp2/config.json"))) != NULL);
    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_paddle_model_new(&m, g, 2, 1, cfg, NULL));
    free(cfg);
    ASSERT_OK(add_tp2_shards(m, g, ck));
    t = ckpt_tensor_at(ck[0], 0);
    ASSERT_OK(ckpt_node_tensor(g, t, &node));
    /* the same shard again */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_model_add_shard(m, 0, 0, t->name, node, NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS(t->name);
    /* outside the layout; a full tensor to a model of two ranks */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_model_add_shard(m, 2, 0, "x", node, NULL));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_model_add_shard(m, 0, 1, "x", node, NULL));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_model_add_tensor(m, "x", node));
    ASSERT_OK(ckpt_paddle_model_finish(m));
    ASSERT_EQ_INT(ckpt_paddle_model_info_of(m)->num_layers, 4);
    ASSERT_OK(open_model(&ref, "fp32_tp1", 1));
    ASSERT_EQ_INT(first_mismatch(ref.m, m, CKPT_DTYPE_F32), 35);
    close_model(&ref);

    /* a name two stages hold (a tied weight) */
    ASSERT_OK(ckpt_paddle_model_new(&two, g, 1, 2, NULL, NULL));
    ASSERT_OK(ckpt_paddle_model_add_shard(two, 0, 0, "llama.norm.weight", node, NULL));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_paddle_model_add_shard(two, 0, 1, "llama.norm.weight", node, NULL));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("stages 0 and 1");
    ckpt_paddle_model_close(two);
    two = NULL;

    /* a shard that only TP rank 0 gave */
    ASSERT_OK(ckpt_paddle_model_new(&two, g, 2, 1, "{\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                                                   "\"vocab_size\": 128}", NULL));
    ASSERT_OK(ckpt_paddle_model_add_shard(two, 0, 0, "llama.norm.weight", node, NULL));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_model_finish(two));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("TP rank 1");
    ckpt_paddle_model_close(two);
    /* a layout of two TP ranks without a config cannot say whether k/v are split */
    ASSERT_OK(ckpt_paddle_model_new(&two, g, 2, 1, NULL, NULL));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_paddle_model_finish(two));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ckpt_paddle_model_close(two);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_model_new(&two, g, 0, 1, NULL, NULL));

    ckpt_paddle_model_close(m);
    ckpt_graph_free(g);
    ckpt_close(ck[0]);
    ckpt_close(ck[1]);
}

/* Variable names given shard by shard (copied by the model) become the name table of the
 * files written, in the model's order; the plan outlives the model. */
CKPT_TEST(test_paddle_model_given_names_are_written)
{
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    ckpt_ckpt *src = NULL, *out = NULL;
    ckpt_paddle_model *m = NULL;
    ckpt_plan *plan = NULL;
    const ckpt_value *names, *table;
    char var[64];
    size_t i;

    ASSERT_OK(ckpt_open(&src, ckpt_test_data("paddlenlp/fp32_tp1/model_state.pdparams"), NULL));
    names = ckpt_value_dict_get(ckpt_root(src), "StructuredToParameterName@@");
    ASSERT_TRUE(names && names->kind == CKPT_VAL_DICT);
    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_paddle_model_new(&m, ckpt_plan_graph(plan), 1, 1, NULL, NULL));
    for (i = 0; i < ckpt_tensor_count(src); i++) {
        const ckpt_tensor *ten = ckpt_tensor_at(src, i);
        const ckpt_value *v = ckpt_value_dict_get(names, ten->name);
        const ckpt_node *node;
        ASSERT_TRUE(v && v->kind == CKPT_VAL_STR);
        snprintf(var, sizeof var, "%s", v->u.str.ptr);
        ASSERT_OK(ckpt_node_tensor(ckpt_plan_graph(plan), ten, &node));
        ASSERT_OK(ckpt_paddle_model_add_shard(m, 0, 0, ten->name, node, var));
        memset(var, 'x', sizeof var - 1);
    }
    ASSERT_OK(ckpt_paddle_model_finish(m));
    ASSERT_TRUE(ckpt_paddle_model_info_of(m)->name_table);
    ASSERT_OK(ckpt_paddle_plan(m, &t, plan));
    ckpt_paddle_model_close(m);
    ASSERT_OK(ckpt_plan_execute(plan, "named", NULL, NULL));
    ASSERT_OK(ckpt_open(&out, "named/model_state.pdparams", NULL));
    table = ckpt_value_dict_get(ckpt_root(out), "StructuredToParameterName@@");
    ASSERT_TRUE(table && table->kind == CKPT_VAL_DICT && table->u.dict.map.n == names->u.dict.map.n);
    for (i = 0; i < names->u.dict.map.n; i++) {
        ASSERT_EQ_STR(table->u.dict.map.keys[i]->u.str.ptr, names->u.dict.map.keys[i]->u.str.ptr);
        ASSERT_EQ_STR(table->u.dict.map.vals[i]->u.str.ptr, names->u.dict.map.vals[i]->u.str.ptr);
    }
    ckpt_close(out);
    ckpt_plan_free(plan);
    ckpt_close(src);
}

/* Leaves out llama.norm.weight; counts the tensors it was asked about. */
static int leave_out_norm(void *payload, const char *name)
{
    ++*(size_t *)payload;
    return strcmp(name, "llama.norm.weight") == 0;
}

static int refuse_all(void *payload, const char *name)
{
    (void)name;
    ++*(size_t *)payload;
    return CKPT_EINVALID;
}

CKPT_TEST(test_paddle_model_leave_out_hook)
{
    ckpt_paddle_model_options mo = CKPT_PADDLE_MODEL_OPTIONS_INIT;
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    ckpt_map *spec = NULL;
    size_t asked = 0, all;
    opened o;

    ASSERT_OK(open_model(&o, "fp32_tp2", 1));
    all = ckpt_paddle_model_tensor_count(o.m);
    close_model(&o);

    /* a spec given by the caller: the LLaMA checks, which need the final norm, are not run */
    ASSERT_OK(ckpt_map_builtin(&spec, "paddlenlp_llama"));
    mo.spec_map = spec;
    mo.leave_out = leave_out_norm;
    mo.leave_out_payload = &asked;
    ASSERT_OK(ckpt_set_open(&o.set, ckpt_test_data("paddlenlp/fp32_tp2"), NULL));
    ASSERT_OK(ckpt_plan_new(&o.plan));
    ASSERT_OK(ckpt_paddle_model_open(&o.m, o.set, ckpt_plan_graph(o.plan), &mo));
    ASSERT_EQ_INT((long long)asked, (long long)all);
    ASSERT_EQ_INT((long long)ckpt_paddle_model_tensor_count(o.m), (long long)all - 1);
    ASSERT_TRUE(find(o.m, "llama.norm.weight", NULL) == NULL);
    /* its optimizer state left with it: the optimizer files cannot be written, the model files can */
    t.tp = 1;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_plan(o.m, &t, o.plan));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("1 parameter with optimizer state left out (--drop)");
    ASSERT_ERROR_MENTIONS("--no-optimizer");
    t.drop_optimizer = 1;
    ASSERT_OK(ckpt_paddle_plan(o.m, &t, o.plan));
    close_model(&o);

    /* the hook's error is the open's, and it is asked no more */
    mo.leave_out = refuse_all;
    asked = 0;
    ASSERT_OK(ckpt_set_open(&o.set, ckpt_test_data("paddlenlp/fp32_tp2"), NULL));
    ASSERT_OK(ckpt_plan_new(&o.plan));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_model_open(&o.m, o.set, ckpt_plan_graph(o.plan), &mo));
    ASSERT_EQ_INT((long long)asked, 1);
    ASSERT_TRUE(o.m == NULL);
    close_model(&o);

    /* a version 1 caller's struct ends before the hook: whatever follows is not read */
    mo.version = 1;
    ASSERT_OK(ckpt_set_open(&o.set, ckpt_test_data("paddlenlp/fp32_tp2"), NULL));
    ASSERT_OK(ckpt_plan_new(&o.plan));
    ASSERT_OK(ckpt_paddle_model_open(&o.m, o.set, ckpt_plan_graph(o.plan), &mo));
    ASSERT_EQ_INT((long long)ckpt_paddle_model_tensor_count(o.m), (long long)all);
    close_model(&o);
    mo.version = 3;
    ASSERT_OK(ckpt_set_open(&o.set, ckpt_test_data("paddlenlp/fp32_tp2"), NULL));
    ASSERT_OK(ckpt_plan_new(&o.plan));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_paddle_model_open(&o.m, o.set, ckpt_plan_graph(o.plan), &mo));
    close_model(&o);
    ckpt_map_free(spec);
}
