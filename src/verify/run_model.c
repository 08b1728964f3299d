/* The model-level pieces (RoPE tables, embeddings, final norm, output layer) and the whole
 * forward pass. */
#include "run_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Inverse frequencies as LLaMA and Megatron compute them (base^(-2i/d) in float32), with
 * Llama 3's scaling of the long wavelengths and linear scaling (positions / factor) when the
 * config asks for them; windowed layers with a base of their own are not scaled. */
static float inv_freq(const ckpt_model_config *c, int local, int64_t i, int64_t rotary_dim)
{
    double base = local ? c->rope_theta_local : c->rope_theta;
    float f = (float)(1.0 / pow(base, (double)(float)(2 * i) / (double)rotary_dim));
    double wavelen, low, high, smooth, scaled;

    if (local)
        return f;
    if (c->rope_linear_factor != 1.0)
        f = (float)(f / c->rope_linear_factor);
    if (c->rope_scaling_factor == 1.0)
        return f;
    wavelen = 2.0 * M_PI / f;
    low = (double)c->rope_original_max_positions / c->rope_low_freq_factor;
    high = (double)c->rope_original_max_positions / c->rope_high_freq_factor;
    if (wavelen < high)
        return f;
    if (wavelen > low)
        return (float)(f / c->rope_scaling_factor);
    smooth = ((double)c->rope_original_max_positions / wavelen - c->rope_low_freq_factor) /
             (c->rope_high_freq_factor - c->rope_low_freq_factor);
    scaled = (1.0 - smooth) * f / c->rope_scaling_factor + smooth * f;
    return (float)scaled;
}

/* The dimension YaRN's frequency `rotations` turns fall on (transformers' find_correction_dim). */
static double yarn_dim(double rotations, int64_t dim, double base, int64_t positions)
{
    return (double)dim * log((double)positions / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

/* YaRN's inverse frequency i of rotary_dim, in float32 as transformers' _compute_yarn_parameters
 * and Megatron's YarnRotaryEmbedding compute it: interpolated (divided by the factor) below
 * the correction range, extrapolated (as they are) above it, a linear ramp between. */
static float yarn_inv_freq(const ckpt_model_config *c, int64_t i, int64_t dim)
{
    float pos = powf((float)c->rope_theta, (float)(2 * i) / (float)dim);
    float extra = 1.0f / pos, inter = 1.0f / ((float)c->rope_yarn_factor * pos), ramp, keep;
    double low = yarn_dim(c->rope_yarn_beta_fast, dim, c->rope_theta, c->rope_original_max_positions);
    double high = yarn_dim(c->rope_yarn_beta_slow, dim, c->rope_theta, c->rope_original_max_positions);

    if (c->rope_yarn_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    low = low > 0 ? low : 0;
    high = high < (double)(dim - 1) ? high : (double)(dim - 1);
    if (low == high)
        high += 0.001;
    ramp = ((float)i - (float)low) / (float)(high - low);
    ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
    keep = 1.0f - ramp;
    return inter * (1.0f - keep) + extra * keep;
}

static int rope_table(run_ctx *r, const ckpt_model_config *c, int local, float **cos_out, float **sin_out)
{
    int64_t half = r->rotary_dim / 2, t, i;
    size_t bytes = (size_t)(r->tokens * half) * sizeof(float);
    float *cs = malloc(bytes ? bytes : 1), *sn = malloc(bytes ? bytes : 1);
    int rc;

    if (!cs || !sn) {
        free(cs);
        free(sn);
        return ckpt_error_oom();
    }
    for (i = 0; i < half; i++) {
        float f = !local && c->rope_yarn_factor != 1.0 ? yarn_inv_freq(c, i, r->rotary_dim)
                                                        : inv_freq(c, local, i, r->rotary_dim);
        /* YaRN's attention factor scales cos and sin (transformers' attention_scaling, Megatron's mscale) */
        float scale = local ? 1.0f : (float)c->rope_attention_factor;
        for (t = 0; t < r->tokens; t++) {
            float angle = (float)t * f;
            cs[t * half + i] = (float)cos((double)angle) * scale;
            sn[t * half + i] = (float)sin((double)angle) * scale;
        }
    }
    rc = ckpt_run__alloc(r, bytes, (void **)cos_out);
    if (rc == 0)
        rc = ckpt_run__alloc(r, bytes, (void **)sin_out);
    if (rc == 0)
        rc = r->vt->upload(r->ctx, *cos_out, cs, bytes);
    if (rc == 0)
        rc = r->vt->upload(r->ctx, *sin_out, sn, bytes);
    free(cs);
    free(sn);
    return rc;
}

int ckpt_run__rope(run_ctx *r, const ckpt_model *m)
{
    const ckpt_model_config *c = &m->cfg;
    int rc;

    r->cos = r->sin = r->cos_local = r->sin_local = NULL;
    if (c->position != CKPT_POSITION_ROPE)
        return 0;
    r->rotary_dim = c->kv_lora_rank > 0 ? c->qk_rope_head_dim : (int64_t)((double)c->head_dim * c->rotary_percent);
    if ((rc = rope_table(r, c, 0, &r->cos, &r->sin)) < 0)
        return rc;
    if (isnan(c->rope_theta_local) || c->window <= 0) {
        r->cos_local = r->cos;
        r->sin_local = r->sin;
        return 0;
    }
    return rope_table(r, c, 1, &r->cos_local, &r->sin_local);
}

/* Row `row` of a [rows, cols] table as float32, by way of r->wdtype (so that a more precise
 * table is rounded as its model's weights are). */
static int table_row(run_ctx *r, const ckpt_node *table, int64_t row, int64_t cols, float *dst, void *tmp)
{
    int rc;

    if (r->wdtype == CKPT_DTYPE_F32)
        return ckpt_node_read(table, row * cols, cols, CKPT_DTYPE_F32, dst);
    if ((rc = ckpt_node_read(table, row * cols, cols, r->wdtype, tmp)) < 0)
        return rc;
    return ckpt_dtype_convert(CKPT_DTYPE_F32, dst, r->wdtype, tmp, (size_t)cols);
}

/* Gemma's embeddings times sqrt(hidden): the factor rounded to the weights' type, the products
 * too, as torch multiplies a bfloat16 table by a bfloat16 scalar. */
static int scale_embeddings(run_ctx *r, double scale, float *x, int64_t n)
{
    float f = (float)scale;
    int64_t i;
    int rc;

    if ((rc = ckpt_run__round_f32(r, &f, 1, 0)) < 0)
        return rc;
    for (i = 0; i < n; i++)
        x[i] *= f;
    return ckpt_run__round_f32(r, x, n, 0);
}

int ckpt_run__embed(run_ctx *r, const ckpt_model *m, const int32_t *ids, float *out)
{
    int64_t H = m->cfg.hidden_size, T = r->tokens, t, i;
    float *host = malloc((size_t)(T * H) * sizeof *host), *pos = malloc((size_t)H * sizeof *pos);
    void *tmp = malloc((size_t)H * 8);
    double t0 = ckpt_run__now();
    int rc = 0;

    if (!host || !pos || !tmp)
        rc = ckpt_error_oom();
    else if (!m->embed)
        rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no word embeddings", m->path);
    for (t = 0; t < T && rc == 0; t++) {
        rc = table_row(r, m->embed, ids[t], H, host + t * H, tmp);
        if (rc == 0 && m->cfg.embed_scale > 0)
            rc = scale_embeddings(r, m->cfg.embed_scale, host + t * H, H);
        if (rc == 0 && m->cfg.position == CKPT_POSITION_LEARNED) {
            if (t >= ckpt_node_shape(m->pos_embed)[0])
                rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                                     "%s: %lld tokens, but position embeddings for %lld", m->path, (long long)T,
                                     (long long)ckpt_node_shape(m->pos_embed)[0]);
            else if ((rc = table_row(r, m->pos_embed, t, H, pos, tmp)) == 0)
                for (i = 0; i < H; i++)
                    host[t * H + i] += pos[i];
        }
    }
    if (rc == 0)
        rc = r->vt->upload(r->ctx, out, host, (size_t)(T * H) * sizeof *host);
    free(host);
    free(pos);
    free(tmp);
    r->seconds_load += ckpt_run__now() - t0;
    return rc;
}

static int upload_f32(run_ctx *r, const ckpt_node *n, int plus_one, void **out)
{
    int64_t len = ckpt_node_numel(n);
    float *host = malloc((size_t)len * sizeof *host);
    int rc;

    if (!host)
        return ckpt_error_oom();
    rc = ckpt_node_read(n, 0, len, CKPT_DTYPE_F32, host);
    if (rc == 0)
        rc = ckpt_run__round_f32(r, host, len, plus_one);
    if (rc == 0)
        rc = ckpt_run__alloc(r, (size_t)len * sizeof *host, out);
    if (rc == 0)
        rc = r->vt->upload(r->ctx, *out, host, (size_t)len * sizeof *host);
    free(host);
    return rc;
}

int ckpt_run__final_norm(run_ctx *r, const ckpt_model *m, const float *x, float *y)
{
    void *w = NULL, *b = NULL;
    size_t mark = r->n_live;
    int rc = 0;

    if (!m->final_w)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no final norm", m->path);
    rc = upload_f32(r, m->final_w, m->cfg.norm_weight_plus_one, &w);
    if (rc == 0 && m->final_b)
        rc = upload_f32(r, m->final_b, 0, &b);
    if (rc == 0)
        rc = r->vt->norm(r->ctx, (ckpt_norm_kind)m->cfg.norm, r->tokens, m->cfg.hidden_size, x, w, b,
                         m->cfg.norm_eps, y);
    while (r->n_live > mark)
        r->vt->release(r->ctx, r->live[--r->n_live]);
    return rc;
}

int ckpt_run__logits(run_ctx *r, const ckpt_model *m, const float *x, int64_t vocab, float *y)
{
    const ckpt_node *table = m->output ? m->output : m->cfg.tied_embeddings ? m->embed : NULL, *rows;
    int64_t H = m->cfg.hidden_size;
    size_t mark = r->n_live, bytes;
    void *w = NULL, *host = NULL;
    double t0 = ckpt_run__now();
    ckpt_backend_linear op;
    int rc;

    if (!table)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no output layer", m->path);
    if (vocab > ckpt_node_shape(table)[0])
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: the output layer has %lld rows, not %lld",
                               m->path, (long long)ckpt_node_shape(table)[0], (long long)vocab);
    bytes = (size_t)(vocab * H) * ckpt_dtype_size(r->wdtype);
    rc = ckpt_node_slice(m->g, table, 0, 0, vocab, &rows);
    if (rc == 0 && !(host = malloc(bytes ? bytes : 1)))
        rc = ckpt_error_oom();
    if (rc == 0)
        rc = ckpt_node_read(rows, 0, vocab * H, r->wdtype, host);
    if (rc == 0)
        rc = ckpt_run__alloc(r, bytes, &w);
    if (rc == 0)
        rc = r->vt->upload(r->ctx, w, host, bytes);
    free(host);
    r->seconds_load += ckpt_run__now() - t0;
    if (rc == 0) {
        op = (ckpt_backend_linear){ r->tokens, vocab, H, x, w, r->wdtype, NULL, y, 0 };
        rc = r->vt->linear(r->ctx, &op);
    }
    while (r->n_live > mark)
        r->vt->release(r->ctx, r->live[--r->n_live]);
    return rc;
}

/* ---- the forward pass ---- */

static int forward_layers(run_ctx *r, ckpt_model *m, float **x, float **spare, float *delta)
{
    int64_t L;
    int rc = 0;

    for (L = 0; L < m->cfg.num_layers && rc == 0; L++) {
        vlayer l;
        float *swap;
        if ((rc = ckpt_model__layer(m, L, &l)) < 0)
            break;
        rc = ckpt_run__layer(r, m, &l, *x, delta, *spare);
        ckpt_model__layer_dispose(&l);
        swap = *x;
        *x = *spare;
        *spare = swap;
    }
    return rc;
}

int ckpt_model_forward(ckpt_model *m, ckpt_backend *b, const int32_t *ids, int64_t n_tokens, float *logits)
{
    ckpt_backend *own = NULL;
    run_ctx r;
    float *x = NULL, *spare = NULL, *delta = NULL, *y = NULL;
    int64_t H = m->cfg.hidden_size, V = m->cfg.vocab_size, t;
    int rc;

    if (n_tokens <= 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "forward of %lld tokens", (long long)n_tokens);
    for (t = 0; t < n_tokens; t++)
        if (ids[t] < 0 || ids[t] >= V)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "token id %d is outside the vocabulary of %lld",
                                   (int)ids[t], (long long)V);
    if ((int64_t)m->n_layers != m->cfg.num_layers || (m->n_layers && m->layers[m->n_layers - 1] != m->cfg.num_layers - 1))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                               "%s: a forward pass needs all %lld layers; the files hold %zu", m->path,
                               (long long)m->cfg.num_layers, m->n_layers);
    if (!b && (rc = ckpt_backend_open(&own, "cpu", 0)) < 0)
        return rc;
    memset(&r, 0, sizeof r);
    r.vt = ckpt_backend_vt(b ? b : own);
    r.ctx = ckpt_backend_ctx(b ? b : own);
    r.tokens = n_tokens;
    r.wdtype = m->dtype == CKPT_DTYPE_F32 || m->dtype == CKPT_DTYPE_F16 ? m->dtype : CKPT_DTYPE_BF16;
    if (m->dtype == CKPT_DTYPE_F64)
        r.wdtype = CKPT_DTYPE_F32;
    rc = ckpt_run__rope(&r, m);
    if (rc == 0)
        rc = ckpt_run__alloc(&r, (size_t)(n_tokens * H) * sizeof(float), (void **)&x);
    if (rc == 0)
        rc = ckpt_run__alloc(&r, (size_t)(n_tokens * H) * sizeof(float), (void **)&spare);
    if (rc == 0)
        rc = ckpt_run__alloc(&r, (size_t)(n_tokens * H) * sizeof(float), (void **)&delta);
    if (rc == 0)
        rc = ckpt_run__alloc(&r, (size_t)(n_tokens * V) * sizeof(float), (void **)&y);
    if (rc == 0)
        rc = ckpt_run__embed(&r, m, ids, x);
    if (rc == 0)
        rc = forward_layers(&r, m, &x, &spare, delta);
    if (rc == 0)
        rc = ckpt_run__final_norm(&r, m, x, spare);
    if (rc == 0)
        rc = ckpt_run__logits(&r, m, spare, V, y);
    if (rc == 0)
        rc = r.vt->download(r.ctx, logits, y, (size_t)(n_tokens * V) * sizeof(float));
    ckpt_run__release_all(&r);
    ckpt_backend_close(own);
    return rc;
}
