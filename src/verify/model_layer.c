/* A model's tensors in the runner's terms: the model-level parts, and each layer's weights
 * per rank, checked against the config so that a shape that does not fit is an error naming
 * the tensor, never a wrong result. */
#include "model_private.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const model_level[] = {
    "embed.weight", "pos_embed.weight", "final_norm.weight", "final_norm.bias", "output.weight",
};

int ckpt_model__model_parts(ckpt_model *m)
{
    size_t i;
    int r;

    for (r = 1; r < m->ranks; r++)
        for (i = 0; i < sizeof model_level / sizeof model_level[0]; i++)
            if (ckpt_model__find(m, r, model_level[i]))
                return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                                       "%s: %s given for rank %d (model-level tensors are given once, whole)", m->path,
                                       model_level[i], r);
    m->embed = ckpt_model__find(m, 0, "embed.weight");
    m->pos_embed = ckpt_model__find(m, 0, "pos_embed.weight");
    m->final_w = ckpt_model__find(m, 0, "final_norm.weight");
    m->final_b = ckpt_model__find(m, 0, "final_norm.bias");
    m->output = ckpt_model__find(m, 0, "output.weight");
    return 0;
}

static const ckpt_node *layer_tensor(const ckpt_model *m, int r, int64_t layer, const char *suffix)
{
    char name[128];

    snprintf(name, sizeof name, "layers.%lld.%s", (long long)layer, suffix);
    return ckpt_model__find(m, r, name);
}

static int shape_error(const ckpt_model *m, int64_t layer, int r, const char *suffix, const ckpt_node *x,
                       const char *expected)
{
    char shape[128];

    ckpt_shape_format(ckpt_node_shape(x), ckpt_node_ndim(x), shape, sizeof shape);
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: layer %lld, rank %d: %s has shape %s, expected %s",
                           m->path, (long long)layer, r, suffix, shape, expected);
}

/* A required tensor of `ndim` dimensions whose last one (the input) is `cols` (0: any). */
static int need(const ckpt_model *m, int r, int64_t layer, const char *suffix, int ndim, int64_t cols,
                const ckpt_node **out)
{
    char expected[96];

    *out = layer_tensor(m, r, layer, suffix);
    if (!*out)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: layer %lld has no %s%s", m->path,
                               (long long)layer, suffix, m->ranks > 1 ? " on every rank" : "");
    if (ckpt_node_ndim(*out) != ndim || (cols > 0 && ckpt_node_shape(*out)[ndim - 1] != cols)) {
        snprintf(expected, sizeof expected, "%d dimension%s%s%lld", ndim, ndim > 1 ? "s" : "",
                 cols > 0 ? ", the last of " : "", cols > 0 ? (long long)cols : 0LL);
        return shape_error(m, layer, r, suffix, *out, expected);
    }
    return 0;
}

/* An optional 1-D tensor of length n. */
static int optional_vector(const ckpt_model *m, int r, int64_t layer, const char *suffix, int64_t n,
                           const ckpt_node **out)
{
    char expected[64];

    *out = layer_tensor(m, r, layer, suffix);
    if (*out && (ckpt_node_ndim(*out) != 1 || ckpt_node_shape(*out)[0] != n)) {
        snprintf(expected, sizeof expected, "[%lld]", (long long)n);
        return shape_error(m, layer, r, suffix, *out, expected);
    }
    return 0;
}

static int norms(const ckpt_model *m, int r, int64_t L, vrank *v)
{
    const ckpt_model_config *c = &m->cfg;
    int rc;

    if ((rc = need(m, r, L, "attn_norm.weight", 1, c->hidden_size, &v->attn_norm_w)) < 0 ||
        (rc = optional_vector(m, r, L, "attn_norm.bias", c->hidden_size, &v->attn_norm_b)) < 0 ||
        (rc = need(m, r, L, "mlp_norm.weight", 1, c->hidden_size, &v->mlp_norm_w)) < 0 ||
        (rc = optional_vector(m, r, L, "mlp_norm.bias", c->hidden_size, &v->mlp_norm_b)) < 0)
        return rc;
    if (c->sandwich_norms &&
        ((rc = need(m, r, L, "attn_post_norm.weight", 1, c->hidden_size, &v->attn_post_w)) < 0 ||
         (rc = optional_vector(m, r, L, "attn_post_norm.bias", c->hidden_size, &v->attn_post_b)) < 0 ||
         (rc = need(m, r, L, "mlp_post_norm.weight", 1, c->hidden_size, &v->mlp_post_w)) < 0 ||
         (rc = optional_vector(m, r, L, "mlp_post_norm.bias", c->hidden_size, &v->mlp_post_b)) < 0))
        return rc;
    if (!c->qk_norm)
        return 0;
    if ((rc = need(m, r, L, "attn.q_norm.weight", 1, c->head_dim, &v->q_norm_w)) < 0 ||
        (rc = optional_vector(m, r, L, "attn.q_norm.bias", c->head_dim, &v->q_norm_b)) < 0 ||
        (rc = need(m, r, L, "attn.k_norm.weight", 1, c->head_dim, &v->k_norm_w)) < 0 ||
        (rc = optional_vector(m, r, L, "attn.k_norm.bias", c->head_dim, &v->k_norm_b)) < 0)
        return rc;
    /* q and k are normed alike: a LayerNorm's bias on one side only is a lost tensor, which
     * would otherwise run as a norm without bias (invisible without RoPE, a wrong layer with it) */
    if (!v->q_norm_b != !v->k_norm_b)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: layer %lld, rank %d: no %s beside %s", m->path,
                               (long long)L, r, v->q_norm_b ? "attn.k_norm.bias" : "attn.q_norm.bias",
                               v->q_norm_b ? "attn.q_norm.bias" : "attn.k_norm.bias");
    return 0;
}

/* A 2-D tensor of exactly rows x cols. */
static int need_shape(const ckpt_model *m, int r, int64_t L, const char *suffix, int64_t rows, int64_t cols,
                      const ckpt_node **out)
{
    char expected[64];
    int rc;

    if ((rc = need(m, r, L, suffix, 2, cols, out)) < 0)
        return rc;
    snprintf(expected, sizeof expected, "[%lld, %lld]", (long long)rows, (long long)cols);
    return ckpt_node_shape(*out)[0] == rows ? 0 : shape_error(m, L, r, suffix, *out, expected);
}

/* Multi-head latent attention: the down projections and their norms on every rank (the down
 * projections whole, or cut by rows as Megatron's local ColumnParallelLinear holds them and
 * gathers their outputs: gather_down joins them), the up projections and attn.o cut by heads. */
static int mla(const ckpt_model *m, int r, int64_t L, vrank *v)
{
    const ckpt_model_config *c = &m->cfg;
    int64_t d = c->head_dim, kvd = c->qk_nope_head_dim + c->v_head_dim, in = c->hidden_size, rows;
    const char *qname = c->q_lora_rank > 0 ? "attn.q_up.weight" : "attn.q.weight";
    char expected[128];
    int rc;

    if (c->q_lora_rank > 0) {
        if ((rc = need(m, r, L, "attn.q_down.weight", 2, c->hidden_size, &v->q_down)) < 0 ||
            (rc = need(m, r, L, "attn.q_down_norm.weight", 1, c->q_lora_rank, &v->q_down_norm)) < 0)
            return rc;
        in = c->q_lora_rank;
    }
    if ((rc = need(m, r, L, qname, 2, in, &v->q)) < 0 ||
        (rc = need(m, r, L, "attn.kv_down.weight", 2, c->hidden_size, &v->kv_down)) < 0 ||
        (rc = need(m, r, L, "attn.kv_down_norm.weight", 1, c->kv_lora_rank, &v->kv_down_norm)) < 0)
        return rc;
    rows = ckpt_node_shape(v->q)[0];
    v->heads = v->kv_heads = rows / d;
    snprintf(expected, sizeof expected, "a multiple of qk_nope_head_dim + qk_rope_head_dim %lld rows", (long long)d);
    if (rows % d || v->heads == 0)
        return shape_error(m, L, r, qname, v->q, expected);
    if ((rc = need_shape(m, r, L, "attn.kv_up.weight", v->heads * kvd, c->kv_lora_rank, &v->kv_up)) < 0 ||
        (rc = need_shape(m, r, L, "attn.o.weight", c->hidden_size, v->heads * c->v_head_dim, &v->o)) < 0)
        return rc;
    return 0;
}

/* A down projection (`suffix`, `rows` in all) as every rank uses it: each rank's whole, or the
 * ranks' row parts joined in rank order (what the gather gives each rank). */
static int gather_down(ckpt_model *m, int64_t L, vlayer *out, const char *suffix, int64_t rows, int q)
{
    const ckpt_node **parts = calloc((size_t)m->ranks, sizeof *parts), *joined = NULL;
    char expected[128];
    int64_t sum = 0;
    int r, whole = 1, rc = parts ? 0 : ckpt_error_oom();

    for (r = 0; r < m->ranks && rc == 0; r++) {
        parts[r] = q ? out->rank[r].q_down : out->rank[r].kv_down;
        sum += ckpt_node_shape(parts[r])[0];
        whole &= ckpt_node_shape(parts[r])[0] == rows;
    }
    snprintf(expected, sizeof expected, "[%lld, %lld], whole or its rows cut over the %d ranks", (long long)rows,
             (long long)m->cfg.hidden_size, m->ranks);
    if (rc == 0 && !whole && sum != rows)
        rc = shape_error(m, L, 0, suffix, parts[0], expected);
    if (rc == 0 && !whole && (rc = ckpt_node_concat(m->g, parts, (size_t)m->ranks, 0, &joined)) == 0)
        for (r = 0; r < m->ranks; r++)
            *(q ? &out->rank[r].q_down : &out->rank[r].kv_down) = joined;
    free(parts);
    return rc;
}

static int attention(const ckpt_model *m, int r, int64_t L, vrank *v)
{
    const ckpt_model_config *c = &m->cfg;
    int64_t d = c->head_dim, rows;
    char expected[96];
    int rc;

    if (c->kv_lora_rank > 0)
        return mla(m, r, L, v);

    if ((rc = need(m, r, L, "attn.q.weight", 2, c->hidden_size, &v->q)) < 0 ||
        (rc = need(m, r, L, "attn.k.weight", 2, c->hidden_size, &v->k)) < 0 ||
        (rc = need(m, r, L, "attn.v.weight", 2, c->hidden_size, &v->v)) < 0)
        return rc;
    rows = ckpt_node_shape(v->q)[0];
    v->heads = rows / d;
    v->kv_heads = ckpt_node_shape(v->k)[0] / d;
    snprintf(expected, sizeof expected, "a multiple of head_dim %lld rows", (long long)d);
    if (rows % d || v->heads == 0)
        return shape_error(m, L, r, "attn.q.weight", v->q, expected);
    if (ckpt_node_shape(v->k)[0] % d || v->kv_heads == 0 || v->heads % v->kv_heads)
        return shape_error(m, L, r, "attn.k.weight", v->k, "head_dim rows per KV head, a divisor of the query heads");
    snprintf(expected, sizeof expected, "[%lld, %lld] like attn.k.weight", (long long)(v->kv_heads * d),
             (long long)c->hidden_size);
    if (ckpt_node_shape(v->v)[0] != v->kv_heads * d)
        return shape_error(m, L, r, "attn.v.weight", v->v, expected);
    if ((rc = need(m, r, L, "attn.o.weight", 2, v->heads * d, &v->o)) < 0)
        return rc;
    snprintf(expected, sizeof expected, "[%lld, %lld]", (long long)c->hidden_size, (long long)(v->heads * d));
    if (ckpt_node_shape(v->o)[0] != c->hidden_size)
        return shape_error(m, L, r, "attn.o.weight", v->o, expected);
    if ((rc = optional_vector(m, r, L, "attn.q.bias", rows, &v->bq)) < 0 ||
        (rc = optional_vector(m, r, L, "attn.k.bias", v->kv_heads * d, &v->bk)) < 0 ||
        (rc = optional_vector(m, r, L, "attn.v.bias", v->kv_heads * d, &v->bv)) < 0)
        return rc;
    return 0;
}

/* The MLP under `prefix` ("mlp", "moe.experts.3"): fc1 (gated: its gate and up halves) and fc2. */
static int mlp(ckpt_model *m, int r, int64_t L, const char *prefix, vmlp *v)
{
    const ckpt_model_config *c = &m->cfg;
    int gated = c->act == CKPT_ACT_SWIGLU || c->act == CKPT_ACT_GEGLU_TANH;
    const ckpt_node *fc1, *b1;
    char expected[224], n1[96], n2[96], nb[96];
    int64_t rows;
    int rc;

    snprintf(n1, sizeof n1, "%s.fc1.weight", prefix);
    snprintf(n2, sizeof n2, "%s.fc2.weight", prefix);
    snprintf(nb, sizeof nb, "%s.fc1.bias", prefix);
    if ((rc = need(m, r, L, n1, 2, c->hidden_size, &fc1)) < 0 || (rc = need(m, r, L, n2, 2, 0, &v->fc2)) < 0)
        return rc;
    v->ffn = ckpt_node_shape(v->fc2)[1];
    rows = ckpt_node_shape(fc1)[0];
    snprintf(expected, sizeof expected, "[%lld, %lld]%s%s", (long long)(gated ? 2 * v->ffn : v->ffn),
             (long long)c->hidden_size, gated ? " (gate and up halves, as the input of " : "", gated ? n2 : "");
    if (gated)
        strncat(expected, ")", sizeof expected - strlen(expected) - 1);
    if (rows != (gated ? 2 * v->ffn : v->ffn))
        return shape_error(m, L, r, n1, fc1, expected);
    snprintf(expected, sizeof expected, "[%lld, %lld]", (long long)c->hidden_size, (long long)v->ffn);
    if (ckpt_node_shape(v->fc2)[0] != c->hidden_size)
        return shape_error(m, L, r, n2, v->fc2, expected);
    if ((rc = optional_vector(m, r, L, nb, rows, &b1)) < 0)
        return rc;
    if (!gated) {
        v->gate = fc1;
        v->bgate = b1;
        return 0;
    }
    if ((rc = ckpt_node_slice(m->g, fc1, 0, 0, v->ffn, &v->gate)) < 0 ||
        (rc = ckpt_node_slice(m->g, fc1, 0, v->ffn, v->ffn, &v->up)) < 0)
        return rc;
    if (b1 && ((rc = ckpt_node_slice(m->g, b1, 0, 0, v->ffn, &v->bgate)) < 0 ||
               (rc = ckpt_node_slice(m->g, b1, 0, v->ffn, v->ffn, &v->bup)) < 0))
        return rc;
    return 0;
}

/* A MoE layer: the router (every rank's of one shape; rank 0's routes) and each expert's part
 * on every rank, the parts of an expert adding up to the config's expert MLP. */
static int moe(ckpt_model *m, int64_t L, vlayer *out)
{
    const ckpt_model_config *c = &m->cfg;
    int64_t e, ffn;
    char prefix[64], expected[64];
    int r, rc = 0;

    out->n_experts = c->num_experts;
    for (r = 0; r < m->ranks && rc == 0; r++) {
        const ckpt_node *router;
        if ((rc = need(m, r, L, "moe.router.weight", 2, c->hidden_size, &router)) < 0)
            return rc;
        snprintf(expected, sizeof expected, "[%lld, %lld]", (long long)c->num_experts, (long long)c->hidden_size);
        if (ckpt_node_shape(router)[0] != c->num_experts)
            return shape_error(m, L, r, "moe.router.weight", router, expected);
        if (r == 0)
            out->router = router;
        if (c->moe_expert_bias && (rc = need(m, r, L, "moe.router.expert_bias", 1, c->num_experts,
                                             r == 0 ? &out->expert_bias : &router)) < 0)
            return rc;
        if (!(out->rank[r].experts = calloc((size_t)c->num_experts, sizeof *out->rank[r].experts)))
            return ckpt_error_oom();
    }
    for (e = c->moe_shared_ffn_hidden_size > 0 ? -1 : 0; e < c->num_experts && rc == 0; e++) {
        int64_t want = e < 0 ? c->moe_shared_ffn_hidden_size : c->moe_ffn_hidden_size;
        if (e < 0)
            snprintf(prefix, sizeof prefix, "moe.shared");
        else
            snprintf(prefix, sizeof prefix, "moe.experts.%lld", (long long)e);
        for (r = 0, ffn = 0; r < m->ranks && rc == 0; r++) {
            vmlp *v = e < 0 ? &out->rank[r].shared : &out->rank[r].experts[e];
            rc = mlp(m, r, L, prefix, v);
            ffn += v->ffn;
        }
        if (rc == 0 && e < 0 && ffn != want)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                 "%s: layer %lld: the shared expert holds an MLP of %lld over its %d rank%s; the config "
                                 "says %lld",
                                 m->path, (long long)L, (long long)ffn, m->ranks, m->ranks > 1 ? "s" : "",
                                 (long long)want);
        else if (rc == 0 && ffn != want)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                 "%s: layer %lld: expert %lld holds an MLP of %lld over its %d rank%s; the config says "
                                 "moe_ffn_hidden_size %lld",
                                 m->path, (long long)L, (long long)e, (long long)ffn, m->ranks, m->ranks > 1 ? "s" : "",
                                 (long long)c->moe_ffn_hidden_size);
    }
    return rc;
}

int ckpt_model__layer(ckpt_model *m, int64_t L, vlayer *out)
{
    const ckpt_model_config *c = &m->cfg;
    int64_t heads = 0, ffn = 0;
    int r, rc = 0, shared_kv = 1, is_moe = ckpt_model__layer_moe(m, L);

    memset(out, 0, sizeof *out);
    out->index = L;
    if (!(out->rank = calloc((size_t)m->ranks, sizeof *out->rank)))
        return ckpt_error_oom();
    out->n_ranks = m->ranks;
    for (r = 0; r < m->ranks && rc == 0; r++) {
        vrank *v = &out->rank[r];
        if ((rc = norms(m, r, L, v)) < 0 || (rc = attention(m, r, L, v)) < 0 ||
            (!is_moe && (rc = mlp(m, r, L, "mlp", &v->mlp)) < 0))
            break;
        heads += v->heads;
        ffn += v->mlp.ffn;
        shared_kv &= v->kv_heads == 1;
    }
    if (rc == 0 && c->kv_lora_rank > 0 && c->q_lora_rank > 0)
        rc = gather_down(m, L, out, "attn.q_down.weight", c->q_lora_rank, 1);
    if (rc == 0 && c->kv_lora_rank > 0)
        rc = gather_down(m, L, out, "attn.kv_down.weight", c->kv_lora_rank + c->qk_rope_head_dim, 0);
    if (rc == 0 && is_moe)
        rc = moe(m, L, out);
    /* a MoE layer's experts were checked against moe_ffn_hidden_size */
    if (rc == 0 && is_moe)
        ffn = c->ffn_hidden_size;
    if (rc == 0 && (heads != c->num_heads || ffn != c->ffn_hidden_size))
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                             "%s: layer %lld holds %lld query heads and an MLP of %lld over its %d rank%s; the config "
                             "says %lld and %lld",
                             m->path, (long long)L, (long long)heads, (long long)ffn, m->ranks, m->ranks > 1 ? "s" : "",
                             (long long)c->num_heads, (long long)c->ffn_hidden_size);
    if (rc == 0) {
        int64_t kv = 0;
        for (r = 0; r < m->ranks; r++)
            kv += out->rank[r].kv_heads;
        /* Fewer KV heads than ranks: each rank holds its group's one KV head. */
        if (kv != c->num_kv_heads && !(shared_kv && c->num_kv_heads < m->ranks))
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                 "%s: layer %lld holds %lld KV heads over its %d rank%s; the config says %lld", m->path,
                                 (long long)L, (long long)kv, m->ranks, m->ranks > 1 ? "s" : "",
                                 (long long)c->num_kv_heads);
    }
    if (rc == 0)
        rc = optional_vector(m, 0, L, "attn.o.bias", c->hidden_size, &out->bo);
    if (rc == 0 && !is_moe)
        rc = optional_vector(m, 0, L, "mlp.fc2.bias", c->hidden_size, &out->bfc2);
    if (rc < 0)
        ckpt_model__layer_dispose(out);
    return rc;
}

void ckpt_model__layer_dispose(vlayer *l)
{
    int r;

    for (r = 0; r < l->n_ranks; r++)
        free(l->rank[r].experts);
    free(l->rank);
    l->rank = NULL;
    l->n_ranks = 0;
}
