/* A mixture-of-experts MLP: router logits on the device, each token's top-k experts and
 * their weights on the host (tokens are few), each expert run on the rows routed to it, the
 * weighted sum on the host. Experts' weights are read one expert at a time and released
 * after it, so that a layer of many experts needs the memory of one. */
#include "run_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double score_key(float x)
{
    return isnan(x) ? -INFINITY : (double)x;
}

static int chosen(const int32_t *idx, int64_t n, int64_t e)
{
    int64_t j;
    for (j = 0; j < n; j++)
        if (idx[j] == e)
            return 1;
    return 0;
}

static float sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* Index of the largest key not yet in ti[0..n) and allowed (allowed NULL: all), the lower index
 * of equal keys; -1 when none is left. */
static int64_t best_of(const double *key, const unsigned char *allowed, int64_t experts, const int32_t *ti, int64_t n)
{
    int64_t e, best = -1;

    for (e = 0; e < experts; e++)
        if ((!allowed || allowed[e]) && !chosen(ti, n, e) && (best < 0 || key[e] > key[best]))
            best = e;
    return best;
}

/* DeepSeek-V3's group-limited choice: allowed[e] set for the experts of the topk_group groups
 * whose `top` best keys sum highest (the lower group of equal sums); gtop: `top` scratch indices. */
static void allow_groups(const double *key, int64_t experts, const ckpt_moe_routing *how, int32_t *gtop,
                         double *gscore, unsigned char *gpick, unsigned char *allowed)
{
    int64_t n_group = how->n_group, topk_group = how->topk_group, size = experts / n_group, g, e, j;

    for (g = 0; g < n_group; g++) {
        gscore[g] = 0.0;
        for (j = 0; j < how->group_top; j++) {
            int64_t best = best_of(key + g * size, NULL, size, gtop, j);
            gtop[j] = (int32_t)best;
            gscore[g] += key[g * size + best];
        }
        gpick[g] = 0;
    }
    for (j = 0; j < topk_group; j++) {
        int64_t best = -1;
        for (g = 0; g < n_group; g++)
            if (!gpick[g] && (best < 0 || gscore[g] > gscore[best]))
                best = g;
        if (best >= 0)
            gpick[best] = 1;
    }
    for (e = 0; e < experts; e++)
        allowed[e] = gpick[e / size];
}

/* The k weights of the chosen experts ti of logits x. */
static void weights(const float *x, int64_t experts, int64_t k, const ckpt_moe_routing *how, const int32_t *ti,
                    float *tw)
{
    int score = how->score;
    double mx = -INFINITY, sum = 0.0;
    int64_t e, j;

    if (score == CKPT_MOE_SIGMOID) {
        /* float32, as both frameworks compute them; the sum's 1e-20 is theirs */
        float fsum = 0.0f;
        for (j = 0; j < k; j++)
            fsum += sigmoid(x[ti[j]]);
        for (j = 0; j < k; j++) {
            float s = sigmoid(x[ti[j]]);
            tw[j] = (float)((how->norm && k > 1 ? s / (fsum + 1e-20f) : s) * how->scale);
        }
        return;
    }
    for (e = 0; e < (score == CKPT_MOE_SOFTMAX_ALL ? experts : k); e++) {
        double v = score == CKPT_MOE_SOFTMAX_ALL ? x[e] : x[ti[e]];
        mx = v > mx ? v : mx;
    }
    for (e = 0; e < (score == CKPT_MOE_SOFTMAX_ALL ? experts : k); e++)
        sum += exp((score == CKPT_MOE_SOFTMAX_ALL ? x[e] : x[ti[e]]) - mx);
    for (j = 0; j < k; j++)
        tw[j] = (float)(exp((double)x[ti[j]] - mx) / sum * how->scale);
}

int ckpt_moe__route_with(const float *logits, int64_t tokens, int64_t experts, int64_t k, const ckpt_moe_routing *how,
                         int32_t *idx, float *w)
{
    int grouped = how->n_group > 1 && how->topk_group < how->n_group;
    int sums = how->score == CKPT_MOE_SIGMOID && (how->bias || grouped);
    double *key = malloc((size_t)experts * sizeof *key), *gscore = malloc((size_t)how->n_group * sizeof *gscore);
    unsigned char *allowed = malloc((size_t)experts), *gpick = malloc((size_t)how->n_group);
    int32_t *gtop = malloc((size_t)(how->group_top > 0 ? how->group_top : 1) * sizeof *gtop);
    int64_t t, e, j;

    if (!key || !gscore || !allowed || !gpick || !gtop) {
        free(gtop);
        free(key);
        free(gscore);
        free(allowed);
        free(gpick);
        return ckpt_error_oom();
    }
    for (t = 0; t < tokens; t++) {
        const float *x = logits + t * experts;
        int32_t *ti = idx + t * k;

        /* softmax and sigmoid keep the order of the logits: choose on the logits themselves,
         * unless a bias is added or groups are scored by sums (of the sigmoid scores, float32) */
        for (e = 0; e < experts; e++)
            key[e] = !sums ? score_key(x[e]) : score_key(sigmoid(x[e]) + (how->bias ? how->bias[e] : 0.0f));
        if (grouped)
            allow_groups(key, experts, how, gtop, gscore, gpick, allowed);
        for (j = 0; j < k; j++)
            ti[j] = (int32_t)best_of(key, grouped ? allowed : NULL, experts, ti, j);
        weights(x, experts, k, how, ti, w + t * k);
    }
    free(key);
    free(gscore);
    free(allowed);
    free(gpick);
    free(gtop);
    return 0;
}

int ckpt_moe__route(const float *logits, int64_t tokens, int64_t experts, int64_t k, int score, double scale,
                    int32_t *idx, float *w)
{
    ckpt_moe_routing how = { score, scale, NULL, 1, 1, 2, 1 };
    return ckpt_moe__route_with(logits, tokens, experts, k, &how, idx, w);
}

int ckpt_moe__routing_of(const ckpt_model *m, const vlayer *l, float *bias, ckpt_moe_routing *how)
{
    const ckpt_model_config *c = &m->cfg;
    int rc;

    *how = (ckpt_moe_routing){ c->moe_score,      c->moe_topk_scale, NULL, c->moe_n_group, c->moe_topk_group,
                               c->moe_group_top, c->moe_topk_norm };
    if (!l->expert_bias)
        return 0;
    /* read as it is stored: the released DeepSeek-V3 keeps it in float32 for its precision */
    if ((rc = ckpt_node_read(l->expert_bias, 0, l->n_experts, CKPT_DTYPE_F32, bias)) < 0)
        return rc;
    how->bias = bias;
    return 0;
}

static void release_to(run_ctx *r, size_t mark)
{
    while (r->n_live > mark)
        r->vt->release(r->ctx, r->live[--r->n_live]);
}

int ckpt_run__router(run_ctx *r, const ckpt_model *m, const vlayer *l, int64_t rows, const float *x, float *y)
{
    size_t mark = r->n_live;
    void *w = NULL;
    upload_job job = { l->router, r->wdtype, 0, &w, NULL, 0 };
    ckpt_backend_linear op = { rows, l->n_experts, m->cfg.hidden_size, x, NULL, r->wdtype, NULL, y, 0 };
    int rc;

    if ((rc = ckpt_run__upload(r, &job, 1)) == 0) {
        op.w = w;
        rc = r->vt->linear(r->ctx, &op);
    }
    release_to(r, mark);
    return rc;
}

typedef struct expert_weights {
    void *gate, *up, *bgate, *bup, *fc2;
} expert_weights;

int ckpt_run__expert(run_ctx *r, const ckpt_model *m, const vlayer *l, int64_t e, int64_t rows, const float *x,
                     float *y)
{
    int64_t H = m->cfg.hidden_size, F = 0;
    size_t mark = r->n_live, n = 0;
    expert_weights *w = calloc((size_t)l->n_ranks, sizeof *w);
    upload_job *jobs = calloc((size_t)l->n_ranks * 5, sizeof *jobs);
    float *g = NULL, *u = NULL;
    int i, rc = w && jobs ? 0 : ckpt_error_oom();

    for (i = 0; i < l->n_ranks && rc == 0; i++) {
        const vmlp *v = e < 0 ? &l->rank[i].shared : &l->rank[i].experts[e];
        const ckpt_node *nodes[5] = { v->gate, v->up, v->bgate, v->bup, v->fc2 };
        void **dst[5] = { &w[i].gate, &w[i].up, &w[i].bgate, &w[i].bup, &w[i].fc2 };
        int j;
        for (j = 0; j < 5; j++)
            if (nodes[j]) {
                upload_job job = { nodes[j], j == 2 || j == 3 ? CKPT_DTYPE_F32 : r->wdtype, 0, dst[j], NULL, 0 };
                jobs[n++] = job;
            }
        F = v->ffn > F ? v->ffn : F;
    }
    if (rc == 0)
        rc = ckpt_run__upload(r, jobs, n);
    if (rc == 0)
        rc = ckpt_run__alloc(r, (size_t)(rows * F) * sizeof(float), (void **)&g);
    if (rc == 0)
        rc = ckpt_run__alloc(r, (size_t)(rows * F) * sizeof(float), (void **)&u);
    for (i = 0; i < l->n_ranks && rc == 0; i++) {
        const vmlp *v = e < 0 ? &l->rank[i].shared : &l->rank[i].experts[e];
        ckpt_backend_linear op1 = { rows, v->ffn, H, x, w[i].gate, r->wdtype, w[i].bgate, g, 0 };
        ckpt_backend_linear op2 = { rows, v->ffn, H, x, w[i].up, r->wdtype, w[i].bup, u, 0 };
        ckpt_backend_linear op3 = { rows, H, v->ffn, g, w[i].fc2, r->wdtype, NULL, y, i > 0 };
        if ((rc = r->vt->linear(r->ctx, &op1)) < 0 || (w[i].up && (rc = r->vt->linear(r->ctx, &op2)) < 0))
            break;
        if ((rc = r->vt->act(r->ctx, (ckpt_act_kind)m->cfg.act, rows * v->ffn, g, w[i].up ? u : NULL, g)) < 0)
            break;
        rc = r->vt->linear(r->ctx, &op3);
    }
    release_to(r, mark);
    free(jobs);
    free(w);
    return rc;
}

/* The rows of hx routed to expert e (their tokens into rows[], their weights into wts[]). */
static int64_t gather(const int32_t *idx, const float *wt, int64_t tokens, int64_t k, int64_t e, int64_t *rows,
                      float *wts)
{
    int64_t t, j, n = 0;

    for (t = 0; t < tokens; t++)
        for (j = 0; j < k; j++)
            if (idx[t * k + j] == e) {
                rows[n] = t;
                wts[n++] = wt[t * k + j];
            }
    return n;
}

int ckpt_run__moe(run_ctx *r, const ckpt_model *m, const vlayer *l, const float *x, float *y)
{
    int64_t T = r->tokens, H = m->cfg.hidden_size, E = l->n_experts, k = m->cfg.moe_top_k, e, i, j;
    size_t mark = r->n_live, TH = (size_t)(T * H);
    float *logits = malloc((size_t)(T * E) * sizeof *logits), *wt = malloc((size_t)(T * k) * sizeof *wt);
    float *hx = malloc(TH * sizeof *hx), *acc = calloc(TH, sizeof *acc), *hy = malloc(TH * sizeof *hy);
    float *wts = malloc((size_t)T * sizeof *wts), *dx = NULL, *dy = NULL, *dl = NULL;
    float *bias = malloc((size_t)E * sizeof *bias);
    ckpt_moe_routing how;
    int32_t *idx = malloc((size_t)(T * k) * sizeof *idx);
    int64_t *rows = malloc((size_t)T * sizeof *rows);
    int rc = logits && wt && hx && acc && hy && wts && idx && rows && bias ? 0 : ckpt_error_oom();

    if (rc == 0)
        rc = ckpt_run__alloc(r, TH * sizeof(float), (void **)&dx);
    if (rc == 0)
        rc = ckpt_run__alloc(r, TH * sizeof(float), (void **)&dy);
    if (rc == 0)
        rc = ckpt_run__alloc(r, (size_t)(T * E) * sizeof(float), (void **)&dl);
    if (rc == 0)
        rc = ckpt_run__router(r, m, l, T, x, dl);
    if (rc == 0)
        rc = r->vt->download(r->ctx, logits, dl, (size_t)(T * E) * sizeof(float));
    if (rc == 0)
        rc = r->vt->download(r->ctx, hx, x, TH * sizeof(float));
    if (rc == 0 && (rc = ckpt_moe__routing_of(m, l, bias, &how)) == 0)
        rc = ckpt_moe__route_with(logits, T, E, k, &how, idx, wt);
    for (e = 0; e < E && rc == 0; e++) {
        int64_t n = gather(idx, wt, T, k, e, rows, wts);
        if (n == 0)
            continue;
        for (i = 0; i < n; i++)
            memcpy(hy + i * H, hx + rows[i] * H, (size_t)H * sizeof(float));
        if ((rc = r->vt->upload(r->ctx, dx, hy, (size_t)(n * H) * sizeof(float))) < 0 ||
            (rc = ckpt_run__expert(r, m, l, e, n, dx, dy)) < 0 ||
            (rc = r->vt->download(r->ctx, hy, dy, (size_t)(n * H) * sizeof(float))) < 0)
            break;
        for (i = 0; i < n; i++)
            for (j = 0; j < H; j++)
                acc[rows[i] * H + j] += wts[i] * hy[i * H + j];
    }
    /* the shared expert: every token, unweighted (Megatron's MoELayer adds its output) */
    if (rc == 0 && l->rank[0].shared.ffn > 0 && (rc = ckpt_run__expert(r, m, l, -1, T, x, dy)) == 0 &&
        (rc = r->vt->download(r->ctx, hy, dy, TH * sizeof(float))) == 0)
        for (i = 0; i < (int64_t)TH; i++)
            acc[i] += hy[i];
    if (rc == 0)
        rc = r->vt->upload(r->ctx, y, acc, TH * sizeof(float));
    /* the upload reads acc when it runs */
    if (rc == 0 && r->vt->synchronize)
        rc = r->vt->synchronize(r->ctx);
    release_to(r, mark);
    free(logits);
    free(wt);
    free(hx);
    free(acc);
    free(hy);
    free(wts);
    free(idx);
    free(rows);
    free(bias);
    return rc;
}
