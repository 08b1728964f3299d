/* Megatron's distributed optimizer: the grad buffer layout of a rank (the rules are in
 * megatron_distopt.h). */
#include "megatron_distopt.h"
#include "../megatron_private.h"

#include <stdlib.h>
#include <string.h>

/* Offsets stay far below this, so rounding up never overflows. */
#define MG_DOPT_MAX_NUMEL ((int64_t)1 << 60)

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static int64_t lcm64(int64_t a, int64_t b)
{
    return a / gcd64(a, b) * b;
}

static int64_t round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

/* A buffer being laid out: its parameters are those of (chunk, expert, dtype pair). */
typedef struct buf_state {
    mg_dopt_layout *l;
    mg_dopt_buffer *b;
    int64_t pad_to;      /* bucket ends' multiple */
    int64_t bucket_size; /* 0: one bucket */
    int64_t bucket_start, flat;
    size_t in_bucket;    /* parameters in the open bucket */
} buf_state;

static int close_bucket(buf_state *s, int64_t last_end, int64_t *end)
{
    mg_dopt_bucket *bk;
    size_t cap = s->l->n_buckets;

    bk = realloc(s->l->buckets, (cap + 1) * sizeof *bk);
    if (!bk)
        return ckpt_error_oom();
    s->l->buckets = bk;
    bk += s->l->n_buckets++;
    bk->start = s->bucket_start;
    bk->end = round_up(last_end, s->pad_to);
    bk->numel_unpadded = last_end - s->bucket_start;
    s->flat += bk->numel_unpadded;
    s->b->n_buckets++;
    s->b->numel = bk->end;
    s->b->numel_unpadded = s->flat;
    s->bucket_start = bk->end;
    s->in_bucket = 0;
    *end = bk->end;
    return 0;
}

/* Lay out the parameters of one buffer, in reverse of the order given (backprop order). */
static int lay_out_buffer(buf_state *s, const mg_dopt_param *params, size_t n)
{
    mg_dopt_layout *l = s->l;
    size_t buffer = (size_t)(s->b - l->buffers), i;
    int64_t start = 0, end = 0;
    int rc;

    for (i = n; i-- > 0;) {
        const mg_dopt_param *p = &params[i];
        mg_dopt_range *r = &l->ranges[i];

        if (p->chunk != s->b->chunk || !p->expert != !s->b->expert || p->dtype != s->b->param_dtype)
            continue;
        if (p->numel < 0 || p->numel > MG_DOPT_MAX_NUMEL - start - 64)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                                   "distributed optimizer layout: parameter %zu of chunk %d has %lld elements, "
                                   "beyond what a grad buffer holds",
                                   i, p->chunk, (long long)p->numel);
        start = round_up(start, 64);
        if (p->shared_embedding && s->in_bucket > 0 && (rc = close_bucket(s, start, &start)) < 0)
            return rc;
        end = start + p->numel;
        r->buffer = buffer;
        r->bucket = s->b->n_buckets;
        r->start = start;
        r->end = end;
        r->flat = s->flat + (start - s->bucket_start);
        s->in_bucket++;
        if ((s->bucket_size > 0 && end - s->bucket_start >= s->bucket_size) || p->shared_embedding) {
            if ((rc = close_bucket(s, end, &start)) < 0)
                return rc;
        } else {
            start = end;
        }
    }
    return s->in_bucket > 0 ? close_bucket(s, end, &start) : 0;
}

/* Add the buffer of (chunk, expert, dtype) unless there is one. */
static int add_buffer(mg_dopt_layout *l, const mg_dopt_param *p, const mg_dopt_config *cfg, size_t *gbuf)
{
    mg_dopt_buffer *b;
    size_t i;

    for (i = 0; i < l->n_buffers; i++)
        if (l->buffers[i].chunk == p->chunk && !l->buffers[i].expert == !p->expert &&
            l->buffers[i].param_dtype == p->dtype)
            return 0;
    b = realloc(l->buffers, (l->n_buffers + 1) * sizeof *b);
    if (!b)
        return ckpt_error_oom();
    l->buffers = b;
    b += l->n_buffers++;
    memset(b, 0, sizeof *b);
    b->chunk = p->chunk;
    b->expert = p->expert != 0;
    b->gbuf = (*gbuf)++;
    b->param_dtype = p->dtype;
    b->grad_dtype = cfg->grad_fp32 ? CKPT_DTYPE_F32 : p->dtype;
    return 0;
}

static int check_config(const mg_dopt_param *params, size_t n, const mg_dopt_config *cfg)
{
    size_t i;
    int any_expert = 0;

    for (i = 0; i < n; i++) {
        if (params[i].chunk < 0 || (i > 0 && params[i].chunk < params[i - 1].chunk))
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                                   "distributed optimizer layout: parameter %zu is in chunk %d, after chunk %d", i,
                                   params[i].chunk, i > 0 ? params[i - 1].chunk : 0);
        any_expert |= params[i].expert;
    }
    if (cfg->dp < 1 || cfg->dp > MG_DOPT_MAX_NUMEL / 65536 || (any_expert && cfg->expert_dp < 1) ||
        cfg->expert_dp > MG_DOPT_MAX_NUMEL / 65536 || cfg->num_buckets < 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "distributed optimizer layout: data-parallel size %lld (experts %lld), bucket size "
                               "%lld, %lld buckets: out of range",
                               (long long)cfg->dp, (long long)cfg->expert_dp, (long long)cfg->bucket_size,
                               (long long)cfg->num_buckets);
    return 0;
}

int ckpt_megatron__dopt_layout(const mg_dopt_param *params, size_t n, const mg_dopt_config *cfg,
                               mg_dopt_layout *out)
{
    int64_t bucket_size = cfg->bucket_size, total = 0;
    size_t i, gbuf[2] = { 0, 0 };
    int expert, rc;

    memset(out, 0, sizeof *out);
    if ((rc = check_config(params, n, cfg)) < 0)
        return rc;
    if (n && !(out->ranges = calloc(n, sizeof *out->ranges)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++)
        if (params[i].numel > 0 && CKPT_ADD_OVERFLOWS(total, params[i].numel, &total))
            total = INT64_MAX;
    if (cfg->num_buckets > 0)
        bucket_size = total / cfg->num_buckets;
    /* a size of 0 closes a bucket after every parameter, as 1 does */
    if (bucket_size < 1)
        bucket_size = 1;
    /* the dense optimizer's buffers first, then the expert one's, each chunk by chunk */
    for (expert = 0; expert < 2; expert++) {
        for (i = 0; i < n; i++)
            if (!params[i].expert == !expert && (rc = add_buffer(out, &params[i], cfg, &gbuf[expert])) < 0)
                return rc;
        if (!expert)
            out->n_dense = out->n_buffers;
    }
    for (i = 0; i < out->n_buffers; i++) {
        mg_dopt_buffer *b = &out->buffers[i];
        int64_t dp = b->expert ? cfg->expert_dp : cfg->dp;
        buf_state s = { out, b, lcm64(lcm64(dp, 128), cfg->pad_high_busbw ? 65536 : 1),
                        b->chunk == 0 && cfg->bucketing ? bucket_size : 0, 0, 0, 0 };

        b->first_bucket = out->n_buckets;
        if ((rc = lay_out_buffer(&s, params, n)) < 0)
            return rc;
    }
    return 0;
}

void ckpt_megatron__dopt_layout_free(mg_dopt_layout *l)
{
    if (!l)
        return;
    free(l->buffers);
    free(l->buckets);
    free(l->ranges);
    memset(l, 0, sizeof *l);
}

static int arg_set(const ckpt_value *args, const char *name)
{
    return ckpt_megatron__arg_int(args, name, 0) != 0;
}

int ckpt_megatron__dopt_config(const ckpt_value *args, int64_t dp, int pp_rank, const char *file,
                               mg_dopt_config *out)
{
    int64_t cp = ckpt_megatron__arg_int(args, "context_parallel_size", 1);
    int64_t tp = ckpt_megatron__arg_int(args, "tensor_model_parallel_size", 1);
    int64_t etp = ckpt_megatron__arg_int(args, "expert_tensor_parallel_size", tp);
    int64_t ep = ckpt_megatron__arg_int(args, "expert_model_parallel_size", 1);
    int64_t inst = ckpt_megatron__arg_int(args, "num_distributed_optimizer_instances", 1);
    const ckpt_value *bucket = ckpt_megatron_arg(args, "ddp_bucket_size");

    memset(out, 0, sizeof *out);
    if (dp <= 0)
        dp = ckpt_megatron__arg_int(args, "data_parallel_size", 1);
    /* one optimizer per model chunk 0 and per the other chunks (megatron-core 0.16.1
       get_megatron_optimizer): distrib_optim.pt is their list, buffers numbered per optimizer */
    if (arg_set(args, "overlap_param_gather_with_optimizer_step"))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: args.overlap_param_gather_with_optimizer_step: megatron-core gives model chunk 0 "
                               "a distributed optimizer of its own and the other chunks another, so distrib_optim.pt "
                               "is a list of two states with grad buffers numbered per optimizer; not read",
                               file);
    /* a target's EP and DP: the experts' data-parallel group must come out whole */
    if (cp >= 1 && tp >= 1 && etp >= 1 && ep > 1 && dp >= 1 && dp <= MG_DOPT_MAX_NUMEL / 65536 / cp &&
        (dp * cp * tp) % (etp * ep) != 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: data-parallel size %lld with expert-parallel size %lld (tensor %lld, expert "
                               "tensor %lld, context %lld): the experts' data-parallel group DP x CP x TP / (expert "
                               "TP x EP) is no whole number; give a --dp (or --ep) that fits it",
                               file, (long long)dp, (long long)ep, (long long)tp, (long long)etp, (long long)cp);
    if (cp < 1 || tp < 1 || etp < 1 || ep < 1 || dp < 1 || dp > MG_DOPT_MAX_NUMEL / 65536 / cp ||
        (dp * cp * tp) % (etp * ep) != 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "%s: args: data-parallel size %lld, context %lld, tensor %lld, expert tensor %lld, "
                               "expert %lld do not make a layout",
                               file, (long long)dp, (long long)cp, (long long)tp, (long long)etp, (long long)ep);
    /* --num-distributed-optimizer-instances N: N replicas of the optimizer, each sharding over
       1/N of the data-parallel group, whose buffers are laid out (padded, split into DP
       shards) for that part (DDP's intra_dp_cp_group, parallel_state.py) */
    if (inst < 1 || (dp * cp) % inst != 0 || (dp * cp * tp / (etp * ep)) % inst != 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: args: num_distributed_optimizer_instances %lld does not divide the data-parallel "
                               "size %lld (x context %lld; expert data-parallel %lld)",
                               file, (long long)inst, (long long)dp, (long long)cp,
                               (long long)(dp * cp * tp / (etp * ep)));
    out->dp = dp * cp / inst;
    out->expert_dp = dp * cp * tp / (etp * ep) / inst;
    out->num_buckets = ckpt_megatron__arg_int(args, "ddp_num_buckets", 0);
    /* Megatron's default scales with the whole DP x CP group, every instance's */
    if (bucket && bucket->kind == CKPT_VAL_INT)
        out->bucket_size = bucket->u.integer;
    else
        out->bucket_size = dp * cp * 1000000 > 40000000 ? dp * cp * 1000000 : 40000000;
    out->bucketing = arg_set(args, "overlap_grad_reduce") && pp_rank == 0;
    out->pad_high_busbw = arg_set(args, "ddp_pad_buckets_for_high_nccl_busbw");
    out->grad_fp32 = arg_set(args, "accumulate_allreduce_grads_in_fp32");
    return 0;
}
