/* Tensor-parallel ranks merged into one, in the canonical scheme (ckpt/sys/model.h): column
 * parts joined along their rows, gated fc1 parts regrouped from [gate_r; up_r] into
 * [gate; up], row parts joined along their columns, replicated tensors taken from rank 0.
 * A KV projection every rank holds whole (fewer KV heads than ranks) is taken once per
 * group of ranks that share it; MLA's down projections are rank 0's where every rank holds
 * them whole, joined where their rows are cut. */
#include "model_private.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum merge_kind { M_REPLICATED, M_ROWS, M_COLUMNS, M_GATED, M_KV, M_DOWN } merge_kind;

static merge_kind kind_of(const ckpt_model *m, const char *suffix)
{
    if (!strcmp(suffix, "attn.q.weight") || !strcmp(suffix, "attn.q.bias") || !strcmp(suffix, "attn.q_up.weight") ||
        !strcmp(suffix, "attn.kv_up.weight"))
        return M_ROWS;
    if (!strcmp(suffix, "attn.q_down.weight") || !strcmp(suffix, "attn.kv_down.weight"))
        return M_DOWN;
    if (!strncmp(suffix, "attn.k.", 7) || !strncmp(suffix, "attn.v.", 7))
        return M_KV;
    if (!strcmp(suffix, "mlp.fc1.weight") || !strcmp(suffix, "mlp.fc1.bias"))
        return m->cfg.act == CKPT_ACT_SWIGLU || m->cfg.act == CKPT_ACT_GEGLU_TANH ? M_GATED : M_ROWS;
    if (!strcmp(suffix, "attn.o.weight") || !strcmp(suffix, "mlp.fc2.weight"))
        return M_COLUMNS;
    return M_REPLICATED;
}

static int gated(ckpt_graph *g, const ckpt_node *const *parts, int n, const ckpt_node **out)
{
    const ckpt_node **halves = calloc(2 * (size_t)(n > 0 ? n : 1), sizeof *halves), *both[2];
    int i, rc = 0;

    if (!halves)
        return ckpt_error_oom();
    for (i = 0; i < n && rc == 0; i++) {
        int64_t rows = ckpt_node_shape(parts[i])[0];
        if (rows % 2)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "rank %d's gated fc1 has an odd %lld rows", i,
                                 (long long)rows);
        else if ((rc = ckpt_node_slice(g, parts[i], 0, 0, rows / 2, &halves[i])) == 0)
            rc = ckpt_node_slice(g, parts[i], 0, rows / 2, rows / 2, &halves[n + i]);
    }
    if (rc == 0 && (rc = ckpt_node_concat(g, halves, (size_t)n, 0, &both[0])) == 0 &&
        (rc = ckpt_node_concat(g, halves + n, (size_t)n, 0, &both[1])) == 0)
        rc = ckpt_node_concat(g, both, 2, 0, out);
    free(halves);
    return rc;
}

/* The KV parts: joined when each rank holds its own heads, one per run of ranks when every
 * rank holds the same whole projection of its group. */
static int kv(const ckpt_model *m, const ckpt_node *const *parts, int n, const ckpt_node **out)
{
    int64_t rows = ckpt_node_shape(parts[0])[0], kv_rows = m->cfg.num_kv_heads * m->cfg.head_dim;
    const ckpt_node **pick;
    int i, share, rc;

    if (rows * n == kv_rows || kv_rows % rows || n % (int)(kv_rows / rows))
        return ckpt_node_concat(m->g, parts, (size_t)n, 0, out);
    share = n / (int)(kv_rows / rows);
    if (!(pick = calloc((size_t)n, sizeof *pick)))
        return ckpt_error_oom();
    for (i = 0; i < n / share; i++)
        pick[i] = parts[i * share];
    rc = ckpt_node_concat(m->g, pick, (size_t)(n / share), 0, out);
    free(pick);
    return rc;
}

/* MLA's down projections: whole on every rank (rank 0's), or their rows cut over the ranks. */
static int down(const ckpt_model *m, const char *suffix, const ckpt_node *const *parts, int n, const ckpt_node **out)
{
    const ckpt_model_config *c = &m->cfg;
    int64_t rows = !strcmp(suffix, "attn.q_down.weight") ? c->q_lora_rank : c->kv_lora_rank + c->qk_rope_head_dim;

    if (ckpt_node_shape(parts[0])[0] == rows) {
        *out = parts[0];
        return 0;
    }
    return ckpt_node_concat(m->g, parts, (size_t)n, 0, out);
}

static int merge_one(ckpt_model *m, const char *name, const ckpt_node **out)
{
    const char *suffix = strchr(name + 7, '.') + 1;
    const ckpt_node **parts = calloc((size_t)m->ranks, sizeof *parts);
    merge_kind kind = kind_of(m, suffix);
    int r, rc = 0;

    if (!parts)
        return ckpt_error_oom();
    for (r = 0; r < m->ranks && rc == 0; r++)
        if (!(parts[r] = ckpt_model__find(m, r, name)))
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is missing on rank %d", m->path, name, r);
    if (rc == 0) {
        switch (kind) {
        case M_REPLICATED: *out = parts[0]; break;
        case M_ROWS: rc = ckpt_node_concat(m->g, parts, (size_t)m->ranks, 0, out); break;
        case M_COLUMNS: rc = ckpt_node_concat(m->g, parts, (size_t)m->ranks, 1, out); break;
        case M_GATED: rc = gated(m->g, parts, m->ranks, out); break;
        case M_KV: rc = kv(m, parts, m->ranks, out); break;
        case M_DOWN: rc = down(m, suffix, parts, m->ranks, out); break;
        }
    }
    if (rc < 0)
        ckpt_error_prefix("%s: merging %s over %d ranks", m->path, name, m->ranks);
    free(parts);
    return rc;
}

int ckpt_model__merge_ranks(ckpt_model *m)
{
    mrank merged = { NULL, 0, 0 }, *src = &m->rank[0];
    size_t i;
    int r, rc = 0;

    if (m->ranks == 1)
        return 0;
    if (!(merged.t = calloc(src->n ? src->n : 1, sizeof *merged.t)))
        return ckpt_error_oom();
    for (i = 0; i < src->n && rc == 0; i++) {
        merged.t[i].name = src->t[i].name;
        if (strncmp(src->t[i].name, "layers.", 7) != 0)
            merged.t[i].node = src->t[i].node;
        else
            rc = merge_one(m, src->t[i].name, &merged.t[i].node);
    }
    if (rc < 0) {
        free(merged.t);
        return rc;
    }
    merged.n = merged.cap = src->n;
    for (r = 0; r < m->ranks; r++)
        free(m->rank[r].t);
    m->rank[0] = merged;
    m->ranks = 1;
    return ckpt_model__note(m, "tensor-parallel ranks merged");
}
