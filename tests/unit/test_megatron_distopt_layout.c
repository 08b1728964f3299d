/* The distributed optimizer's grad buffer layout (formats/megatron_distopt_layout.c) on cases
 * worked by hand from megatron-core 0.16.1's _ParamAndGradBuffer: reverse order, 64-element
 * starts, the bucket close rule, the shared embedding's own bucket, lcm(DP, 128) bucket ends,
 * buffers per chunk and dtype, dense before expert, one bucket on later chunks; and the config
 * Megatron's args imply. */
#include "test.h"

#include "../../formats/megatron_distopt.h"

#include <ckpt/megatron.h>

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
 * overlap_grad_reduce or after the first stage; the target DP replaces args'; the
 * partial distributed optimizer refused. */
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
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "num_distributed_optimizer_instances", 2));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_megatron__dopt_config(args, 0, 0, "x", &cfg));
    ckpt_arena_free(a);
}
