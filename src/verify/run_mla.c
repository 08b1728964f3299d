/* Multi-head latent attention (DeepSeek-V2/V3) as standard attention, from the operations
 * every backend has: the up projections' rows are laid out again on the host so that each
 * head comes out of a linear as [rope | nope | zeros], k_nope (from the normalised latent) with
 * zero rope rows, then k_rope (one for all heads, from the input) added into every head's rope
 * rows by a float32 linear of ones and zeros, and v padded with zeros to the same head size.
 * The zeros add exact zeros to scores and outputs, the ones copy exactly; RoPE then turns the
 * first qk_rope values of each head. */
#include "run_private.h"

#include <ckpt/sys/common.h>

#include <stdlib.h>
#include <string.h>

/* One rank's assembled weights (device). */
typedef struct mla_w {
    void *q_down, *q_norm, *q, *kv_lat, *kv_norm, *k_rope, *k_nope, *v, *o;
    void *spread; /* float32 [heads x head, qk_rope]: k_rope into each head's rope rows */
} mla_w;

/* The head size every head is run at: q and k need qk_nope + qk_rope, v needs v_head_dim,
 * and the size is raised to one the CUDA backend's attention kernels are built for (DeepSeek-V3's
 * 192 runs as 256), so that both backends run the same zero-padded heads. */
int64_t ckpt_run__mla_head(const ckpt_model_config *c)
{
    static const int64_t built[] = { 16, 32, 64, 80, 96, 128, 256 };
    int64_t d = c->head_dim > c->v_head_dim ? c->head_dim : c->v_head_dim;
    size_t i;

    for (i = 0; i < sizeof built / sizeof built[0]; i++)
        if (built[i] >= d)
            return built[i];
    return d;
}

static void release_to(run_ctx *r, size_t mark)
{
    while (r->n_live > mark)
        r->vt->release(r->ctx, r->live[--r->n_live]);
}

/* A host matrix of `rows` x `cols` in r->wdtype, zeroed. */
static void *host_zeros(const run_ctx *r, int64_t rows, int64_t cols)
{
    size_t n = (size_t)(rows * cols);
    return calloc(n ? n : 1, ckpt_dtype_size(r->wdtype));
}

static int read_host(const run_ctx *r, const ckpt_node *n, void **out)
{
    int64_t len = ckpt_node_numel(n);
    int rc;

    if (!(*out = malloc((size_t)(len ? len : 1) * ckpt_dtype_size(r->wdtype))))
        return ckpt_error_oom();
    if ((rc = ckpt_node_read(n, 0, len, r->wdtype, *out)) < 0) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

static int upload_host(run_ctx *r, void *host, size_t bytes, void **out)
{
    int rc = ckpt_run__alloc(r, bytes, out);
    if (rc == 0)
        rc = r->vt->upload(r->ctx, *out, host, bytes);
    return rc;
}

/* Row `from` of src (cols wide) to row `to` of dst, `n` rows. */
static void rows_copy(void *dst, int64_t to, const void *src, int64_t from, int64_t n, int64_t cols, size_t es)
{
    memcpy((char *)dst + (size_t)(to * cols) * es, (const char *)src + (size_t)(from * cols) * es,
           (size_t)(n * cols) * es);
}

/* The up projections per head as [rope | nope | zeros] (q, k) and [v | zeros], attn.o's
 * columns per head [v | zeros], kv_down cut into its latent and k_rope rows, and the float32
 * ones that spread k_rope over the heads. */
static int assemble(run_ctx *r, const ckpt_model_config *c, const vrank *v, void **host)
{
    int64_t h = v->heads, D = ckpt_run__mla_head(c), N = c->qk_nope_head_dim, R = c->qk_rope_head_dim;
    int64_t V = c->v_head_dim, L = c->kv_lora_rank, H = c->hidden_size, qin = ckpt_node_shape(v->q)[1], j, i;
    size_t es = ckpt_dtype_size(r->wdtype);
    void *q = NULL, *kvd = NULL, *kvu = NULL, *o = NULL;
    int rc;

    if ((rc = read_host(r, v->q, &q)) < 0 || (rc = read_host(r, v->kv_down, &kvd)) < 0 ||
        (rc = read_host(r, v->kv_up, &kvu)) < 0 || (rc = read_host(r, v->o, &o)) < 0)
        goto out;
    host[0] = host_zeros(r, h * D, qin);
    host[1] = host_zeros(r, R, H);
    host[2] = host_zeros(r, h * D, L);
    host[3] = host_zeros(r, h * D, L);
    host[4] = host_zeros(r, H, h * D);
    host[5] = host_zeros(r, L, H);
    host[6] = calloc((size_t)(h * D * R), sizeof(float));
    if (!host[0] || !host[1] || !host[2] || !host[3] || !host[4] || !host[5] || !host[6]) {
        rc = ckpt_error_oom();
        goto out;
    }
    rows_copy(host[5], 0, kvd, 0, L, H, es);
    rows_copy(host[1], 0, kvd, L, R, H, es);
    for (j = 0; j < h; j++) {
        for (i = 0; i < R; i++)
            ((float *)host[6])[(j * D + i) * R + i] = 1.0f;
        rows_copy(host[0], j * D, q, j * (N + R) + N, R, qin, es);
        rows_copy(host[0], j * D + R, q, j * (N + R), N, qin, es);
        rows_copy(host[2], j * D + R, kvu, j * (N + V), N, L, es);
        rows_copy(host[3], j * D, kvu, j * (N + V) + N, V, L, es);
        for (i = 0; i < H; i++)
            memcpy((char *)host[4] + (size_t)(i * h * D + j * D) * es, (char *)o + (size_t)(i * h * V + j * V) * es,
                   (size_t)V * es);
    }
out:
    free(q);
    free(kvd);
    free(kvu);
    free(o);
    return rc;
}

static int upload_weights(run_ctx *r, const ckpt_model *m, const vrank *v, mla_w *w)
{
    const ckpt_model_config *c = &m->cfg;
    int64_t h = v->heads, D = ckpt_run__mla_head(c), L = c->kv_lora_rank, H = c->hidden_size;
    int64_t R = c->qk_rope_head_dim, qin = ckpt_node_shape(v->q)[1];
    size_t es = ckpt_dtype_size(r->wdtype);
    void *host[7] = { NULL };
    upload_job jobs[3];
    size_t n = 0, i;
    int rc;

    memset(w, 0, sizeof *w);
    jobs[n++] = (upload_job){ v->kv_down_norm, CKPT_DTYPE_F32, c->norm_weight_plus_one, &w->kv_norm, NULL, 0 };
    if (v->q_down) {
        jobs[n++] = (upload_job){ v->q_down, r->wdtype, 0, &w->q_down, NULL, 0 };
        jobs[n++] = (upload_job){ v->q_down_norm, CKPT_DTYPE_F32, c->norm_weight_plus_one, &w->q_norm, NULL, 0 };
    }
    if ((rc = ckpt_run__upload(r, jobs, n)) < 0)
        return rc;
    rc = assemble(r, c, v, host);
    if (rc == 0)
        rc = upload_host(r, host[0], (size_t)(h * D * qin) * es, &w->q);
    if (rc == 0)
        rc = upload_host(r, host[1], (size_t)(R * H) * es, &w->k_rope);
    if (rc == 0)
        rc = upload_host(r, host[6], (size_t)(h * D * R) * sizeof(float), &w->spread);
    if (rc == 0)
        rc = upload_host(r, host[2], (size_t)(h * D * L) * es, &w->k_nope);
    if (rc == 0)
        rc = upload_host(r, host[3], (size_t)(h * D * L) * es, &w->v);
    if (rc == 0)
        rc = upload_host(r, host[4], (size_t)(H * h * D) * es, &w->o);
    if (rc == 0)
        rc = upload_host(r, host[5], (size_t)(L * H) * es, &w->kv_lat);
    /* the uploads read the host copies when they run */
    if (rc == 0 && r->vt->synchronize)
        rc = r->vt->synchronize(r->ctx);
    for (i = 0; i < 7; i++)
        free(host[i]);
    return rc;
}

static int linear(run_ctx *r, int64_t rows, int64_t out, int64_t in, const float *x, const void *w,
                  const void *bias, float *y, int accumulate)
{
    ckpt_backend_linear op = { rows, out, in, x, w, r->wdtype, bias, y, accumulate };
    return r->vt->linear(r->ctx, &op);
}

int ckpt_run__mla(run_ctx *r, const ckpt_model *m, const vrank *v, const float *h1, const void *bo, int first,
                  float *attn)
{
    const ckpt_model_config *c = &m->cfg;
    int64_t T = r->tokens, H = c->hidden_size, h = v->heads, D = ckpt_run__mla_head(c), L = c->kv_lora_rank;
    int64_t QL = c->q_lora_rank, R = c->qk_rope_head_dim;
    size_t mark = r->n_live, hd = (size_t)(T * h * D) * sizeof(float);
    float *cq = NULL, *lat = NULL, *q = NULL, *k = NULL, *val = NULL, *a = NULL, *kr = NULL;
    ckpt_backend_linear spread;
    ckpt_backend_attention at;
    mla_w w;
    int rc;

    if ((rc = upload_weights(r, m, v, &w)) < 0)
        goto out;
    if ((rc = ckpt_run__alloc(r, (size_t)(T * L) * sizeof(float), (void **)&lat)) < 0 ||
        (rc = ckpt_run__alloc(r, (size_t)(T * R) * sizeof(float), (void **)&kr)) < 0 ||
        (QL > 0 && (rc = ckpt_run__alloc(r, (size_t)(T * QL) * sizeof(float), (void **)&cq)) < 0) ||
        (rc = ckpt_run__alloc(r, hd, (void **)&q)) < 0 || (rc = ckpt_run__alloc(r, hd, (void **)&k)) < 0 ||
        (rc = ckpt_run__alloc(r, hd, (void **)&val)) < 0 || (rc = ckpt_run__alloc(r, hd, (void **)&a)) < 0)
        goto out;
    if (QL > 0 && ((rc = linear(r, T, QL, H, h1, w.q_down, NULL, cq, 0)) < 0 ||
                   (rc = r->vt->norm(r->ctx, CKPT_NORM_RMS, T, QL, cq, w.q_norm, NULL, c->mla_norm_eps, cq)) < 0))
        goto out;
    if ((rc = linear(r, T, h * D, QL > 0 ? QL : H, QL > 0 ? cq : h1, w.q, NULL, q, 0)) < 0 ||
        (rc = linear(r, T, L, H, h1, w.kv_lat, NULL, lat, 0)) < 0 ||
        (rc = r->vt->norm(r->ctx, CKPT_NORM_RMS, T, L, lat, w.kv_norm, NULL, c->mla_norm_eps, lat)) < 0 ||
        (rc = linear(r, T, R, H, h1, w.k_rope, NULL, kr, 0)) < 0 ||
        (rc = linear(r, T, h * D, L, lat, w.k_nope, NULL, k, 0)) < 0 ||
        (rc = linear(r, T, h * D, L, lat, w.v, NULL, val, 0)) < 0)
        goto out;
    spread = (ckpt_backend_linear){ T, h * D, R, kr, w.spread, CKPT_DTYPE_F32, NULL, k, 1 };
    if ((rc = r->vt->linear(r->ctx, &spread)) < 0)
        goto out;
    if ((rc = r->vt->rope(r->ctx, T, h, D, R, q, r->cos, r->sin, c->rope_interleaved)) < 0 ||
        (rc = r->vt->rope(r->ctx, T, h, D, R, k, r->cos, r->sin, c->rope_interleaved)) < 0)
        goto out;
    at = (ckpt_backend_attention){ T, h, h, D, q, k, val, a, c->attn_scale, 1, r->wdtype, 0 };
    if ((rc = r->vt->attention(r->ctx, &at)) < 0)
        goto out;
    /* row-parallel, as attention_part: partial products summed, the bias added once */
    rc = linear(r, T, H, h * D, a, w.o, first ? bo : NULL, attn, !first);
    if (rc == 0 && r->vt->synchronize)
        rc = r->vt->synchronize(r->ctx);
out:
    release_to(r, mark);
    return rc;
}
