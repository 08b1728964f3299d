/* Running a model's pieces on a backend: a decoder layer (its ranks as tensor parallelism
 * runs them), the embeddings, the final norm, the output layer, and the whole forward pass.
 * Weights are read from the checkpoint when the piece runs and released after it. */
#include "run_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

double ckpt_run__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- device memory ---- */

int ckpt_run__alloc(run_ctx *r, size_t bytes, void **out)
{
    void *p;
    int rc;

    if (r->n_live == sizeof r->live / sizeof r->live[0])
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_BACKEND, "too many device buffers at once");
    if ((rc = r->vt->alloc(r->ctx, bytes, &p)) < 0)
        return rc;
    r->live[r->n_live++] = p;
    *out = p;
    return 0;
}

int ckpt_run__scratch(run_ctx *r, int slot, size_t bytes, void **out)
{
    int rc;

    if (r->scratch_bytes[slot] < bytes) {
        r->vt->release(r->ctx, r->scratch[slot]);
        r->scratch[slot] = NULL;
        r->scratch_bytes[slot] = 0;
        if ((rc = r->vt->alloc(r->ctx, bytes, &r->scratch[slot])) < 0)
            return rc;
        r->scratch_bytes[slot] = bytes;
    }
    *out = r->scratch[slot];
    return 0;
}

void ckpt_run__release_all(run_ctx *r)
{
    size_t i;

    while (r->n_live > 0)
        r->vt->release(r->ctx, r->live[--r->n_live]);
    for (i = 0; i < sizeof r->scratch / sizeof r->scratch[0]; i++) {
        r->vt->release(r->ctx, r->scratch[i]);
        r->scratch[i] = NULL;
        r->scratch_bytes[i] = 0;
    }
}

/* ---- weights ---- */

int ckpt_run__round_f32(const run_ctx *r, float *v, int64_t n, int plus_one)
{
    int64_t i;
    int rc;

    if (r->wdtype != CKPT_DTYPE_F32 && n > 0) {
        void *tmp = malloc((size_t)n * ckpt_dtype_size(r->wdtype));
        if (!tmp)
            return ckpt_error_oom();
        rc = ckpt_dtype_convert(r->wdtype, tmp, CKPT_DTYPE_F32, v, (size_t)n);
        if (rc == 0)
            rc = ckpt_dtype_convert(CKPT_DTYPE_F32, v, r->wdtype, tmp, (size_t)n);
        free(tmp);
        if (rc < 0)
            return rc;
    }
    for (i = 0; plus_one && i < n; i++)
        v[i] += 1.0f;
    return 0;
}

/* The CPU backend's memory is the host's, so tensors are read straight into it. */
int ckpt_run__upload(run_ctx *r, upload_job *jobs, size_t n)
{
    int direct = r->vt == &ckpt_backend__cpu;
    ckpt_error_first failed = { 0 };
    size_t i;
    long j;
    int rc = 0;
    double t0 = ckpt_run__now();

    for (i = 0; i < n && rc == 0; i++) {
        jobs[i].bytes = (size_t)ckpt_node_numel(jobs[i].node) * ckpt_dtype_size(jobs[i].dtype);
        rc = ckpt_run__alloc(r, jobs[i].bytes, jobs[i].dst);
        if (rc == 0 && !direct && !(jobs[i].host = malloc(jobs[i].bytes ? jobs[i].bytes : 1)))
            rc = ckpt_error_oom();
        if (rc == 0 && direct)
            jobs[i].host = *jobs[i].dst;
    }
    if (rc == 0) {
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(r->threads)
#endif
        for (j = 0; j < (long)n; j++) {
            upload_job *u = &jobs[j];
            int err = ckpt_node_read(u->node, 0, ckpt_node_numel(u->node), u->dtype, u->host);
            if (err == 0 && u->dtype == CKPT_DTYPE_F32)
                err = ckpt_run__round_f32(r, u->host, ckpt_node_numel(u->node), u->plus_one);
            if (err < 0)
                ckpt_error_first_record(&failed, err);
        }
        rc = ckpt_error_first_raise(&failed);
    }
    for (i = 0; i < n && rc == 0 && !direct; i++)
        rc = r->vt->upload(r->ctx, *jobs[i].dst, jobs[i].host, jobs[i].bytes);
    if (!direct)
        for (i = 0; i < n; i++)
            free(jobs[i].host);
    r->seconds_load += ckpt_run__now() - t0;
    return rc;
}

typedef struct rank_weights {
    void *ln1_w, *ln1_b, *ln2_w, *ln2_b, *qn_w, *qn_b, *kn_w, *kn_b, *post1_w, *post1_b, *post2_w, *post2_b;
    void *q, *k, *v, *bq, *bk, *bv, *o, *gate, *up, *bgate, *bup, *fc2;
} rank_weights;

#define JOB(node_, dtype_, dst_, plus_)                                                                    \
    do {                                                                                                   \
        if (node_) {                                                                                       \
            jobs[n].node = (node_);                                                                        \
            jobs[n].dtype = (dtype_);                                                                      \
            jobs[n].plus_one = (plus_);                                                                    \
            jobs[n].dst = (void **)(dst_);                                                                 \
            jobs[n].host = NULL;                                                                           \
            n++;                                                                                           \
        }                                                                                                  \
    } while (0)

static int upload_layer(run_ctx *r, const ckpt_model *m, const vlayer *l, rank_weights *w, void **bo, void **bfc2)
{
    int p1 = m->cfg.norm_weight_plus_one, rank, rc;
    ckpt_dtype wt = r->wdtype, f32 = CKPT_DTYPE_F32;
    upload_job *jobs = calloc((size_t)l->n_ranks * 24 + 2, sizeof *jobs);
    size_t n = 0;

    if (!jobs)
        return ckpt_error_oom();
    for (rank = 0; rank < l->n_ranks; rank++) {
        const vrank *v = &l->rank[rank];
        rank_weights *x = &w[rank];
        memset(x, 0, sizeof *x);
        JOB(v->attn_norm_w, f32, &x->ln1_w, p1);
        JOB(v->attn_norm_b, f32, &x->ln1_b, 0);
        JOB(v->mlp_norm_w, f32, &x->ln2_w, p1);
        JOB(v->mlp_norm_b, f32, &x->ln2_b, 0);
        JOB(v->q_norm_w, f32, &x->qn_w, p1);
        JOB(v->q_norm_b, f32, &x->qn_b, 0);
        JOB(v->k_norm_w, f32, &x->kn_w, p1);
        JOB(v->k_norm_b, f32, &x->kn_b, 0);
        JOB(v->attn_post_w, f32, &x->post1_w, p1);
        JOB(v->attn_post_b, f32, &x->post1_b, 0);
        JOB(v->mlp_post_w, f32, &x->post2_w, p1);
        JOB(v->mlp_post_b, f32, &x->post2_b, 0);
        /* MLA's projections are laid out again by run_mla.c */
        JOB(m->cfg.kv_lora_rank > 0 ? NULL : v->q, wt, &x->q, 0);
        JOB(v->k, wt, &x->k, 0);
        JOB(v->v, wt, &x->v, 0);
        JOB(v->bq, f32, &x->bq, 0);
        JOB(v->bk, f32, &x->bk, 0);
        JOB(v->bv, f32, &x->bv, 0);
        JOB(m->cfg.kv_lora_rank > 0 ? NULL : v->o, wt, &x->o, 0);
        JOB(v->mlp.gate, wt, &x->gate, 0);
        JOB(v->mlp.up, wt, &x->up, 0);
        JOB(v->mlp.bgate, f32, &x->bgate, 0);
        JOB(v->mlp.bup, f32, &x->bup, 0);
        JOB(v->mlp.fc2, wt, &x->fc2, 0);
    }
    *bo = *bfc2 = NULL;
    JOB(l->bo, f32, bo, 0);
    JOB(l->bfc2, f32, bfc2, 0);
    rc = ckpt_run__upload(r, jobs, n);
    free(jobs);
    return rc;
}

/* ---- the layer ---- */

static int linear(run_ctx *r, int64_t rows, int64_t out, int64_t in, const float *x, const void *w,
                  const void *bias, float *y, int accumulate)
{
    ckpt_backend_linear op = { rows, out, in, x, w, r->wdtype, bias, y, accumulate };
    return r->vt->linear(r->ctx, &op);
}

static int norm(run_ctx *r, const ckpt_model *m, int64_t rows, int64_t cols, const float *x, const void *w,
                const void *b, float *y)
{
    return r->vt->norm(r->ctx, (ckpt_norm_kind)m->cfg.norm, rows, cols, x, w, b, m->cfg.norm_eps, y);
}

/* Buffers of one layer's activations, sized for its largest rank. */
typedef struct acts {
    float *h1, *q, *k, *v, *a, *attn, *res, *h2, *g, *u, *mlp;
} acts;

static int alloc_acts(run_ctx *r, const ckpt_model *m, const vlayer *l, acts *s)
{
    int64_t T = r->tokens, H = m->cfg.hidden_size, d = m->cfg.head_dim, heads = 0, kv = 0, ffn = 0;
    float **bufs[] = { &s->h1, &s->q, &s->k, &s->v, &s->a, &s->attn, &s->res, &s->h2, &s->g, &s->u, &s->mlp };
    int64_t sizes[11];
    int i, rc = 0;

    for (i = 0; i < l->n_ranks; i++) {
        heads = l->rank[i].heads > heads ? l->rank[i].heads : heads;
        kv = l->rank[i].kv_heads > kv ? l->rank[i].kv_heads : kv;
        ffn = l->rank[i].mlp.ffn > ffn ? l->rank[i].mlp.ffn : ffn;
    }
    sizes[0] = sizes[5] = sizes[6] = sizes[7] = sizes[10] = T * H;
    sizes[1] = sizes[4] = T * heads * d;
    sizes[2] = sizes[3] = T * kv * d;
    sizes[8] = sizes[9] = T * ffn;
    for (i = 0; i < 11 && rc == 0; i++)
        rc = ckpt_run__scratch(r, i, (size_t)sizes[i] * sizeof(float), (void **)bufs[i]);
    return rc;
}

static int attention_part(run_ctx *r, const ckpt_model *m, const vlayer *l, int rank, const rank_weights *w,
                          const float *x, const void *bo, acts *s)
{
    const ckpt_model_config *c = &m->cfg;
    const vrank *v = &l->rank[rank];
    int64_t T = r->tokens, H = c->hidden_size, d = c->head_dim, nq = v->heads * d, nkv = v->kv_heads * d;
    int windowed = ckpt_model__layer_windowed(m, l->index), first = rank == 0;
    const float *cs = windowed ? r->cos_local : r->cos, *sn = windowed ? r->sin_local : r->sin;
    ckpt_backend_attention at = { T, v->heads, v->kv_heads, d, s->q, s->k, s->v, s->a, c->attn_scale, 1,
                                  r->wdtype, windowed ? c->window : 0 };
    int rc;

    if (c->kv_lora_rank > 0)
        return (rc = norm(r, m, T, H, x, w->ln1_w, w->ln1_b, s->h1)) < 0 ? rc
                                                                           : ckpt_run__mla(r, m, v, s->h1, bo, first, s->attn);
    if ((rc = norm(r, m, T, H, x, w->ln1_w, w->ln1_b, s->h1)) < 0 ||
        (rc = linear(r, T, nq, H, s->h1, w->q, w->bq, s->q, 0)) < 0 ||
        (rc = linear(r, T, nkv, H, s->h1, w->k, w->bk, s->k, 0)) < 0 ||
        (rc = linear(r, T, nkv, H, s->h1, w->v, w->bv, s->v, 0)) < 0)
        return rc;
    if (c->qk_norm && ((rc = norm(r, m, T * v->heads, d, s->q, w->qn_w, w->qn_b, s->q)) < 0 ||
                       (rc = norm(r, m, T * v->kv_heads, d, s->k, w->kn_w, w->kn_b, s->k)) < 0))
        return rc;
    if (c->position == CKPT_POSITION_ROPE &&
        ((rc = r->vt->rope(r->ctx, T, v->heads, d, r->rotary_dim, s->q, cs, sn, c->rope_interleaved)) < 0 ||
         (rc = r->vt->rope(r->ctx, T, v->kv_heads, d, r->rotary_dim, s->k, cs, sn, c->rope_interleaved)) < 0))
        return rc;
    if ((rc = r->vt->attention(r->ctx, &at)) < 0)
        return rc;
    /* Row-parallel: the ranks' partial products summed, the bias added once. */
    return linear(r, T, H, nq, s->a, w->o, first ? bo : NULL, s->attn, !first);
}

static int mlp_part(run_ctx *r, const ckpt_model *m, const vrank *v, const rank_weights *w, const void *bfc2,
                    int first, acts *s)
{
    const ckpt_model_config *c = &m->cfg;
    int64_t T = r->tokens, H = c->hidden_size, F = v->mlp.ffn;
    int rc;

    if ((rc = linear(r, T, F, H, s->h2, w->gate, w->bgate, s->g, 0)) < 0)
        return rc;
    if (w->up && (rc = linear(r, T, F, H, s->h2, w->up, w->bup, s->u, 0)) < 0)
        return rc;
    if ((rc = r->vt->act(r->ctx, (ckpt_act_kind)c->act, T * F, s->g, w->up ? s->u : NULL, s->g)) < 0)
        return rc;
    return linear(r, T, H, F, s->g, w->fc2, first ? bfc2 : NULL, s->mlp, !first);
}

int ckpt_run__attention(run_ctx *r, const ckpt_model *m, const vlayer *l, const float *x, float *y)
{
    size_t mark = r->n_live;
    rank_weights *w = calloc((size_t)l->n_ranks, sizeof *w);
    void *bo = NULL, *bfc2 = NULL;
    acts s;
    int i, rc;

    if (!w)
        return ckpt_error_oom();
    rc = upload_layer(r, m, l, w, &bo, &bfc2);
    if (rc == 0)
        rc = alloc_acts(r, m, l, &s);
    if (rc == 0)
        s.attn = y;
    for (i = 0; i < l->n_ranks && rc == 0; i++)
        rc = attention_part(r, m, l, i, &w[i], x, bo, &s);
    if (rc == 0 && m->cfg.sandwich_norms)
        rc = norm(r, m, r->tokens, m->cfg.hidden_size, y, w[0].post1_w, w[0].post1_b, y);
    if (rc == 0 && r->vt->synchronize)
        rc = r->vt->synchronize(r->ctx);
    while (r->n_live > mark)
        r->vt->release(r->ctx, r->live[--r->n_live]);
    free(w);
    return rc;
}

int ckpt_run__layer(run_ctx *r, const ckpt_model *m, const vlayer *l, const float *x, float *delta, float *out)
{
    int64_t n = r->tokens * m->cfg.hidden_size;
    size_t mark = r->n_live;
    rank_weights *w = calloc((size_t)l->n_ranks, sizeof *w);
    void *bo = NULL, *bfc2 = NULL;
    double t0;
    acts s;
    int i, rc;

    if (!w)
        return ckpt_error_oom();
    rc = upload_layer(r, m, l, w, &bo, &bfc2);
    /* copies to a device are queued: they belong to reading the weights, not to the layer */
    if (rc == 0 && r->vt->synchronize) {
        t0 = ckpt_run__now();
        rc = r->vt->synchronize(r->ctx);
        r->seconds_load += ckpt_run__now() - t0;
    }
    t0 = ckpt_run__now();
    if (rc == 0)
        rc = alloc_acts(r, m, l, &s);
    for (i = 0; i < l->n_ranks && rc == 0; i++)
        rc = attention_part(r, m, l, i, &w[i], x, bo, &s);
    /* Sandwich norms act on the whole (summed) output; every rank would compute the same */
    if (rc == 0 && m->cfg.sandwich_norms)
        rc = norm(r, m, r->tokens, m->cfg.hidden_size, s.attn, w[0].post1_w, w[0].post1_b, s.attn);
    if (rc == 0)
        rc = r->vt->add(r->ctx, n, x, s.attn, s.res);
    for (i = 0; i < l->n_ranks && rc == 0 && !l->router; i++)
        if ((rc = norm(r, m, r->tokens, m->cfg.hidden_size, s.res, w[i].ln2_w, w[i].ln2_b, s.h2)) == 0)
            rc = mlp_part(r, m, &l->rank[i], &w[i], bfc2, i == 0, &s);
    /* a MoE layer's experts take rank 0's normalised input, the one its router routes */
    if (rc == 0 && l->router && (rc = norm(r, m, r->tokens, m->cfg.hidden_size, s.res, w[0].ln2_w, w[0].ln2_b, s.h2)) == 0)
        rc = ckpt_run__moe(r, m, l, s.h2, s.mlp);
    if (rc == 0 && m->cfg.sandwich_norms)
        rc = norm(r, m, r->tokens, m->cfg.hidden_size, s.mlp, w[0].post2_w, w[0].post2_b, s.mlp);
    if (rc == 0)
        rc = r->vt->add(r->ctx, n, s.attn, s.mlp, delta);
    if (rc == 0 && out)
        rc = r->vt->add(r->ctx, n, s.res, s.mlp, out);
    if (rc == 0 && r->vt->synchronize)
        rc = r->vt->synchronize(r->ctx);
    r->seconds_run += ckpt_run__now() - t0;
    while (r->n_live > mark)
        r->vt->release(r->ctx, r->live[--r->n_live]);
    free(w);
    if (rc < 0)
        ckpt_error_prefix("%s: layer %lld", m->path, (long long)l->index);
    return rc;
}
