/* The distributed optimizer's grad buffer layout (formats/megatron/optimizer/megatron_distopt_layout.c) on cases
 * worked by hand from megatron-core 0.16.1's _ParamAndGradBuffer: reverse order, 64-element
 * starts, the bucket close rule, the shared embedding's own bucket, lcm(DP, 128) bucket ends,
 * buffers per chunk and dtype, dense before expert, one bucket on later chunks; and the config
 * Megatron's args imply. */
#include "test.h"

#include "../../formats/megatron/optimizer/megatron_distopt.h"

#include <ckpt/megatron.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define BF16 CKPT_DTYPE_BF16
#define F32 CKPT_DTYPE_F32

static const mg_dopt_config plain_dp1 = { 1, 1, 0, 40000000, 0, 0, 1 };

#define ASSERT_RANGE(l, i, buf, bk, s, e, f)                                                                \
    do {                                                                                                   \
        ASSERT_EQ_INT((l).ranges[i].buffer, buf);                                                          \
        ASSERT_EQ_INT((l).ranges[i].bucket, bk);                                                           \
        ASSERT_EQ_INT((l).ranges[i].start, s);                                                             \
        ASSERT_EQ_INT((l).ranges[i].end, e);                                                               \
        ASSERT_EQ_INT((l).ranges[i].flat, f);                                                              \
    } while (0)

#define ASSERT_BUCKET(l, i, s, e, u)                                                                        \
    do {                                                                                                   \
        ASSERT_EQ_INT((l).buckets[i].start, s);                                                            \
        ASSERT_EQ_INT((l).buckets[i].end, e);                                                              \
        ASSERT_EQ_INT((l).buckets[i].numel_unpadded, u);                                                   \
    } while (0)

/* a(100) b(10) c(64), one bucket: c 0-64, b 64-74, a at 128 (74 rounded up to 64s) - 228; the
 * bucket ends at 256 (lcm(1, 128)), 228 of it saved. */
CKPT_TEST(test_layout_reverse_order_aligned_starts)
{
    mg_dopt_param p[] = { { 0, 100, BF16, 0, 0 }, { 0, 10, BF16, 0, 0 }, { 0, 64, BF16, 0, 0 } };
    mg_dopt_layout l;

    ASSERT_OK(ckpt_megatron__dopt_layout(p, 3, &plain_dp1, &l));
    ASSERT_EQ_INT(l.n_buffers, 1);
    ASSERT_EQ_INT(l.buffers[0].param_dtype, BF16);
    ASSERT_EQ_INT(l.buffers[0].grad_dtype, F32);
    ASSERT_EQ_INT(l.buffers[0].n_buckets, 1);
    ASSERT_EQ_INT(l.buffers[0].numel, 256);
    ASSERT_EQ_INT(l.buffers[0].numel_unpadded, 228);
    ASSERT_BUCKET(l, 0, 0, 256, 228);
    ASSERT_RANGE(l, 0, 0, 0, 128, 228, 128);
    ASSERT_RANGE(l, 1, 0, 0, 64, 74, 64);
    ASSERT_RANGE(l, 2, 0, 0, 0, 64, 0);
    ckpt_megatron__dopt_layout_free(&l);
}

/* bucket_size 100, DP 2: c(30) 0-30 stays open; b(70) 64-134 reaches 100 and closes the bucket
 * (134 saved, end 256); a(50) 256-306 in bucket 1, closed at the end (50 saved, end 384). The
 * flat state drops the padding: a starts at 134. */
CKPT_TEST(test_layout_buckets_close_at_bucket_size)
{
    mg_dopt_param p[] = { { 0, 50, BF16, 0, 0 }, { 0, 70, BF16, 0, 0 }, { 0, 30, BF16, 0, 0 } };
    mg_dopt_config cfg = { 2, 2, 1, 100, 0, 0, 1 };
    mg_dopt_layout l;

    ASSERT_OK(ckpt_megatron__dopt_layout(p, 3, &cfg, &l));
    ASSERT_EQ_INT(l.buffers[0].n_buckets, 2);
    ASSERT_EQ_INT(l.buffers[0].numel, 384);
    ASSERT_EQ_INT(l.buffers[0].numel_unpadded, 184);
    ASSERT_BUCKET(l, 0, 0, 256, 134);
    ASSERT_BUCKET(l, 1, 256, 384, 50);
    ASSERT_RANGE(l, 2, 0, 0, 0, 30, 0);
    ASSERT_RANGE(l, 1, 0, 0, 64, 134, 64);
    ASSERT_RANGE(l, 0, 0, 1, 256, 306, 134);
    ckpt_megatron__dopt_layout_free(&l);
}

/* Tied embeddings, last stage: the output layer copy (200), laid out first, closes its own
 * bucket (end 256); the layer (100) follows at 256. */
CKPT_TEST(test_layout_shared_embedding_last_stage)
{
    mg_dopt_param p[] = { { 0, 100, BF16, 0, 0 }, { 0, 200, BF16, 0, 1 } };
    mg_dopt_layout l;

    ASSERT_OK(ckpt_megatron__dopt_layout(p, 2, &plain_dp1, &l));
    ASSERT_EQ_INT(l.buffers[0].n_buckets, 2);
    ASSERT_BUCKET(l, 0, 0, 256, 200);
    ASSERT_BUCKET(l, 1, 256, 384, 100);
    ASSERT_RANGE(l, 1, 0, 0, 0, 200, 0);
    ASSERT_RANGE(l, 0, 0, 1, 256, 356, 200);
    ckpt_megatron__dopt_layout_free(&l);
}

/* Tied embeddings, first stage: the layer (100) at 0; the embedding closes the bucket before it
 * at its aligned start 128 (128 saved: the alignment gap counts) and gets 128-328 alone. */
CKPT_TEST(test_layout_shared_embedding_first_stage)
{
    mg_dopt_param p[] = { { 0, 200, BF16, 0, 1 }, { 0, 100, BF16, 0, 0 } };
    mg_dopt_layout l;

    ASSERT_OK(ckpt_megatron__dopt_layout(p, 2, &plain_dp1, &l));
    ASSERT_EQ_INT(l.buffers[0].n_buckets, 2);
    ASSERT_BUCKET(l, 0, 0, 128, 128);
    ASSERT_BUCKET(l, 1, 128, 384, 200);
    ASSERT_EQ_INT(l.buffers[0].numel_unpadded, 328);
    ASSERT_RANGE(l, 1, 0, 0, 0, 100, 0);
    ASSERT_RANGE(l, 0, 0, 1, 128, 328, 128);
    ckpt_megatron__dopt_layout_free(&l);
}

/* Buffers per chunk and dtype pair in first-appearance order; grads in the param's dtype
 * without fp32 accumulation; chunk 1 has one bucket even with bucketing on. */
CKPT_TEST(test_layout_buffers_per_chunk_and_dtype)
{
    mg_dopt_param p[] = { { 0, 20, BF16, 0, 0 }, { 0, 20, F32, 0, 0 }, { 0, 20, BF16, 0, 0 },
                          { 1, 20, BF16, 0, 0 }, { 1, 20, BF16, 0, 0 } };
    mg_dopt_config cfg = { 1, 1, 1, 10, 0, 0, 0 };
    mg_dopt_layout l;

    ASSERT_OK(ckpt_megatron__dopt_layout(p, 5, &cfg, &l));
    ASSERT_EQ_INT(l.n_buffers, 3);
    ASSERT_EQ_INT(l.n_dense, 3);
    ASSERT_EQ_INT(l.buffers[0].chunk, 0);
    ASSERT_EQ_INT(l.buffers[0].param_dtype, BF16);
    ASSERT_EQ_INT(l.buffers[0].grad_dtype, BF16);
    ASSERT_EQ_INT(l.buffers[0].n_buckets, 2);
    ASSERT_EQ_INT(l.buffers[1].param_dtype, F32);
    ASSERT_EQ_INT(l.buffers[1].gbuf, 1);
    ASSERT_EQ_INT(l.buffers[2].chunk, 1);
    ASSERT_EQ_INT(l.buffers[2].gbuf, 2);
    ASSERT_EQ_INT(l.buffers[2].n_buckets, 1);
    ASSERT_EQ_INT(l.buffers[2].numel_unpadded, 84);
    ASSERT_RANGE(l, 2, 0, 0, 0, 20, 0);
    ASSERT_RANGE(l, 0, 0, 1, 128, 148, 20);
    ASSERT_RANGE(l, 1, 1, 0, 0, 20, 0);
    ASSERT_RANGE(l, 4, 2, 0, 0, 20, 0);
    ASSERT_RANGE(l, 3, 2, 0, 64, 84, 64);
    ckpt_megatron__dopt_layout_free(&l);
}

/* Expert parameters go to the expert optimizer's buffers (numbered from 0, after the dense
 * ones), padded for the expert DP; lcm(3, 128, 2^16) with high-busbw padding. */
CKPT_TEST(test_layout_expert_buffers_and_busbw_padding)
{
    mg_dopt_param p[] = { { 0, 10, BF16, 0, 0 }, { 0, 20, BF16, 1, 0 }, { 0, 10, BF16, 0, 0 } };
    mg_dopt_config cfg = { 4, 3, 0, 40000000, 0, 0, 1 };
    mg_dopt_layout l;

    ASSERT_OK(ckpt_megatron__dopt_layout(p, 3, &cfg, &l));
    ASSERT_EQ_INT(l.n_buffers, 2);
    ASSERT_EQ_INT(l.n_dense, 1);
    ASSERT_EQ_INT(l.buffers[0].numel, 128);
    ASSERT_EQ_INT(l.buffers[0].numel_unpadded, 74);
    ASSERT_EQ_INT(l.buffers[1].expert, 1);
    ASSERT_EQ_INT(l.buffers[1].gbuf, 0);
    ASSERT_EQ_INT(l.buffers[1].numel, 384);
    ASSERT_RANGE(l, 0, 0, 0, 64, 74, 64);
    ASSERT_RANGE(l, 1, 1, 0, 0, 20, 0);
    ckpt_megatron__dopt_layout_free(&l);

    cfg.expert_dp = 1;
    cfg.dp = 3;
    cfg.pad_high_busbw = 1;
    ASSERT_OK(ckpt_megatron__dopt_layout(p, 1, &cfg, &l));
    ASSERT_EQ_INT(l.buffers[0].numel, 196608);
    ASSERT_EQ_INT(l.buffers[0].numel_unpadded, 10);
    ckpt_megatron__dopt_layout_free(&l);
}

/* --ddp-num-buckets: the rank's parameter count (all chunks) over it: 4 x 100 / 2 = 200. */
CKPT_TEST(test_layout_num_buckets)
{
    mg_dopt_param p[] = { { 0, 100, BF16, 0, 0 }, { 0, 100, BF16, 0, 0 }, { 0, 100, BF16, 0, 0 },
                          { 1, 100, BF16, 0, 0 } };
    mg_dopt_config cfg = { 1, 1, 1, 40000000, 2, 0, 1 };
    mg_dopt_layout l;

    ASSERT_OK(ckpt_megatron__dopt_layout(p, 4, &cfg, &l));
    ASSERT_EQ_INT(l.buffers[0].n_buckets, 2);
    ASSERT_BUCKET(l, 0, 0, 256, 228);
    ckpt_megatron__dopt_layout_free(&l);
}

CKPT_TEST(test_layout_refuses_chunks_out_of_order)
{
    mg_dopt_param p[] = { { 1, 10, BF16, 0, 0 }, { 0, 10, BF16, 0, 0 } };
    mg_dopt_config cfg = plain_dp1;
    mg_dopt_layout l;

    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron__dopt_layout(p, 2, &cfg, &l));
    ckpt_megatron__dopt_layout_free(&l);
    cfg.dp = 0;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron__dopt_layout(p + 1, 1, &cfg, &l));
    ckpt_megatron__dopt_layout_free(&l);
}

/* The config from args: the default bucket size max(40e6, 1e6 x DP x CP); the expert DP
 * (DP x CP x TP over expert TP x EP: 32 x 2 x 2 / (2 x 4)); no bucketing without
 * overlap_grad_reduce or after the first stage; the target DP replaces args'; N optimizer
 * instances lay out for 1/N of the group, and must divide it (expert DP 16 too: 32 does not);
 * one optimizer per chunk (overlap_param_gather_with_optimizer_step) refused. */
CKPT_TEST(test_layout_config_from_args)
{
    ckpt_arena *a;
    ckpt_value *args;
    mg_dopt_config cfg;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_megatron_args_new(a, &args));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "data_parallel_size", 32));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "context_parallel_size", 2));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "tensor_model_parallel_size", 2));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "expert_model_parallel_size", 4));
    ASSERT_OK(ckpt_megatron_args_set_none(a, args, "ddp_bucket_size"));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "overlap_grad_reduce", 1));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "accumulate_allreduce_grads_in_fp32", 1));
    ASSERT_OK(ckpt_megatron__dopt_config(args, 0, 0, "x", &cfg));
    ASSERT_EQ_INT(cfg.dp, 64);
    ASSERT_EQ_INT(cfg.expert_dp, 16);
    ASSERT_EQ_INT(cfg.bucket_size, 64000000);
    ASSERT_EQ_INT(cfg.bucketing, 1);
    ASSERT_EQ_INT(cfg.grad_fp32, 1);
    ASSERT_OK(ckpt_megatron__dopt_config(args, 4, 1, "x", &cfg));
    ASSERT_EQ_INT(cfg.dp, 8);
    ASSERT_EQ_INT(cfg.bucket_size, 40000000);
    ASSERT_EQ_INT(cfg.bucketing, 0);
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "ddp_bucket_size", 1000));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "overlap_grad_reduce", 0));
    ASSERT_OK(ckpt_megatron__dopt_config(args, 0, 0, "x", &cfg));
    ASSERT_EQ_INT(cfg.bucket_size, 1000);
    ASSERT_EQ_INT(cfg.bucketing, 0);
    /* N optimizer instances: the buffers of DP x CP / N (and expert DP / N), the default
       bucket size still the whole group's */
    ASSERT_OK(ckpt_megatron_args_set_none(a, args, "ddp_bucket_size"));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_distributed_optimizer_instances", 4));
    ASSERT_OK(ckpt_megatron__dopt_config(args, 0, 0, "x", &cfg));
    ASSERT_EQ_INT(cfg.dp, 16);
    ASSERT_EQ_INT(cfg.expert_dp, 4);
    ASSERT_EQ_INT(cfg.bucket_size, 64000000);
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_distributed_optimizer_instances", 3));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron__dopt_config(args, 0, 0, "x", &cfg));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_distributed_optimizer_instances", 32));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_megatron__dopt_config(args, 0, 0, "x", &cfg));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_distributed_optimizer_instances", 1));
    ASSERT_OK(ckpt_megatron_args_set_bool(a, args, "overlap_param_gather_with_optimizer_step", 1));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_megatron__dopt_config(args, 0, 0, "x", &cfg));
    ckpt_arena_free(a);
}

/* Against megatron-core itself: every fixture under testdata/megatron/distopt/ (real runs of
 * megatron-core's DistributedOptimizer) comes with expected.json, where each rank dumped its
 * live grad buffers (param_index_map, bucket offsets). The layout computed from the
 * checkpoint's args and shapes must be that one, number for number. */
typedef struct dump_ctx {
    const ckpt_megatron *m;
    const char *fixture;
    int ranks; /* rank dumps compared */
} dump_ctx;

static int json_int(const cJSON *o, const char *key, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = -1;
    if (!cJSON_IsNumber(v))
        return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int dump_fails(const dump_ctx *c, int64_t tp, int64_t pp, const char *what, int64_t got, int64_t want)
{
    ckpt_test_fail(__FILE__, __LINE__, "%s TP %lld PP %lld: %s: ours %lld, megatron-core's %lld", c->fixture,
                   (long long)tp, (long long)pp, what, (long long)got, (long long)want);
    return -1;
}

static int compare_param(const dump_ctx *c, int64_t tp, int64_t pp, const mg_dopt_layout *l, size_t b,
                         const mg_entry *const *entries, size_t n, const cJSON *p)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
    int64_t start, end, bucket;
    size_t i;

    if (!cJSON_IsString(name) || json_int(p, "start", &start) || json_int(p, "end", &end) ||
        json_int(p, "bucket", &bucket))
        return dump_fails(c, tp, pp, "a parameter without name/start/end/bucket", 0, 0);
    for (i = 0; i < n; i++)
        if (entries[i]->src_vp == l->buffers[b].chunk && strcmp(entries[i]->local, name->valuestring) == 0)
            break;
    if (i == n) {
        ckpt_test_fail(__FILE__, __LINE__, "%s TP %lld PP %lld: no parameter %s in chunk %d", c->fixture,
                       (long long)tp, (long long)pp, name->valuestring, l->buffers[b].chunk);
        return -1;
    }
    if (l->ranges[i].buffer != b)
        return dump_fails(c, tp, pp, name->valuestring, (int64_t)l->ranges[i].buffer, (int64_t)b);
    if (l->ranges[i].start != start)
        return dump_fails(c, tp, pp, name->valuestring, l->ranges[i].start, start);
    if (l->ranges[i].end != end)
        return dump_fails(c, tp, pp, name->valuestring, l->ranges[i].end, end);
    if ((int64_t)l->ranges[i].bucket != bucket)
        return dump_fails(c, tp, pp, name->valuestring, (int64_t)l->ranges[i].bucket, bucket);
    return 0;
}

static int compare_buffer(const dump_ctx *c, int64_t tp, int64_t pp, const mg_dopt_layout *l, size_t b,
                          const mg_entry *const *entries, size_t n, const cJSON *jb)
{
    const mg_dopt_buffer *buf = &l->buffers[b];
    const cJSON *buckets = cJSON_GetObjectItemCaseSensitive(jb, "buckets"), *x;
    const cJSON *pdt = cJSON_GetObjectItemCaseSensitive(jb, "param_dtype");
    const cJSON *gdt = cJSON_GetObjectItemCaseSensitive(jb, "grad_dtype");
    int64_t v, params = 0;
    size_t k = 0;

    if (json_int(jb, "model_chunk", &v) || v != buf->chunk)
        return dump_fails(c, tp, pp, "a buffer's chunk", buf->chunk, v);
    if (!cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(jb, "expert")) ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(jb, "expert")) != !buf->expert)
        return dump_fails(c, tp, pp, "a buffer's expert flag", buf->expert, !buf->expert);
    if (!cJSON_IsString(pdt) || strcmp(pdt->valuestring, ckpt_dtype_name(buf->param_dtype)) != 0 ||
        !cJSON_IsString(gdt) || strcmp(gdt->valuestring, ckpt_dtype_name(buf->grad_dtype)) != 0)
        return dump_fails(c, tp, pp, "a buffer's dtypes", buf->param_dtype, buf->grad_dtype);
    if (json_int(jb, "numel", &v) || v != buf->numel)
        return dump_fails(c, tp, pp, "buffer numel", buf->numel, v);
    if (json_int(jb, "numel_unpadded", &v) || v != buf->numel_unpadded)
        return dump_fails(c, tp, pp, "buffer numel_unpadded", buf->numel_unpadded, v);
    if ((size_t)cJSON_GetArraySize(buckets) != buf->n_buckets)
        return dump_fails(c, tp, pp, "buckets", (int64_t)buf->n_buckets, cJSON_GetArraySize(buckets));
    cJSON_ArrayForEach(x, buckets) {
        const mg_dopt_bucket *bk = &l->buckets[buf->first_bucket + k++];
        int64_t s = 0, e = 0, u = 0;
        if (json_int(x, "start", &s) || json_int(x, "end", &e) || json_int(x, "numel_unpadded", &u) ||
            s != bk->start || e != bk->end || u != bk->numel_unpadded)
            return dump_fails(c, tp, pp, "a bucket's end (start, numel_unpadded)", bk->end, e);
    }
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(jb, "params")) {
        if (compare_param(c, tp, pp, l, b, entries, n, x) < 0)
            return -1;
        params++;
    }
    for (k = 0; k < n; k++)
        params -= l->ranges[k].buffer == b;
    return params == 0 ? 0 : dump_fails(c, tp, pp, "parameters the dump lists less ours", params, 0);
}

/* A rank's dump: {"tp", "pp", "buffers": [...]} anywhere in expected.json. */
static int compare_dumps(dump_ctx *c, const cJSON *j)
{
    const cJSON *buffers = cJSON_GetObjectItemCaseSensitive(j, "buffers"), *x;
    int64_t tp, pp, ep;

    if (cJSON_IsArray(buffers) && json_int(j, "tp", &tp) == 0 && json_int(j, "pp", &pp) == 0) {
        const mg_entry **entries = NULL;
        const ckpt_node **shards = NULL;
        mg_dopt_layout l;
        size_t n = 0, b = 0;
        int rc;

        /* a mixture of experts' dumps name their EP rank (the dense buffers, then its experts') */
        if (json_int(j, "ep", &ep) < 0)
            ep = 0;
        rc = ckpt_megatron__dopt_source_layout(c->m, (int)tp, (int)pp, (int)ep, &entries, &shards, &n, &l);

        if (rc < 0)
            ckpt_test_fail(__FILE__, __LINE__, "%s TP %lld PP %lld: %s", c->fixture, (long long)tp, (long long)pp,
                           ckpt_error_last()->message);
        else if ((size_t)cJSON_GetArraySize(buffers) != l.n_buffers)
            rc = dump_fails(c, tp, pp, "grad buffers", (int64_t)l.n_buffers, cJSON_GetArraySize(buffers));
        cJSON_ArrayForEach(x, buffers) {
            if (rc < 0 || (rc = compare_buffer(c, tp, pp, &l, b++, entries, n, x)) < 0)
                break;
        }
        ckpt_megatron__dopt_layout_free(&l);
        free(entries);
        free(shards);
        c->ranks++;
        return rc;
    }
    for (x = j ? j->child : NULL; x; x = x->next)
        if ((cJSON_IsObject(x) || cJSON_IsArray(x)) && compare_dumps(c, x) < 0)
            return -1;
    return 0;
}

static int compare_fixture(const char *name, int *ranks)
{
    char rel[256];
    unsigned char *text;
    size_t len;
    cJSON *j;
    ckpt_set *set = NULL;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    dump_ctx c = { NULL, name, 0 };
    int rc;

    snprintf(rel, sizeof rel, "megatron/distopt/%s/expected.json", name);
    if (!(text = ckpt_test_read_file(ckpt_test_data(rel), &len))) {
        ckpt_test_fail(__FILE__, __LINE__, "%s: missing", rel);
        return -1;
    }
    j = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    snprintf(rel, sizeof rel, "megatron/distopt/%s/legacy", name);
    rc = ckpt_set_open(&set, ckpt_test_data(rel), NULL);
    if (rc == 0)
        rc = ckpt_plan_new(&plan);
    if (rc == 0)
        rc = ckpt_megatron_open(&m, set, ckpt_plan_graph(plan), NULL);
    if (rc < 0)
        ckpt_test_fail(__FILE__, __LINE__, "%s: %s", rel, ckpt_error_last()->message);
    c.m = m;
    if (rc == 0 && j)
        rc = compare_dumps(&c, j);
    *ranks += c.ranks;
    cJSON_Delete(j);
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
    ckpt_set_close(set);
    return rc;
}

CKPT_TEST(test_layout_matches_megatron_dumps)
{
    DIR *d = opendir(ckpt_test_data("megatron/distopt"));
    struct dirent *e;
    int ranks = 0, fixtures = 0;

    ASSERT_TRUE(d != NULL);
    while ((e = readdir(d)) != NULL) {
        if (strchr(e->d_name, '.')) /* oracle.json, dot files */
            continue;
        if (compare_fixture(e->d_name, &ranks) < 0)
            break;
        fixtures++;
    }
    closedir(d);
    /* every fixture has its dumps: a run that compared none proves nothing */
    ASSERT_TRUE(fixtures > 0);
    ASSERT_TRUE(ranks >= fixtures);
}
