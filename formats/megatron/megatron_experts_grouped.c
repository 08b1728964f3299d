/* The local spec's GroupedMLP (--moe-grouped-gemm with --transformer-impl local; megatron-core
 * 0.16.1 transformer/moe/experts.py GroupedMLP): per MoE layer two parameters,
 *   experts.weight1 [hidden, local experts x fc1 rows / TP]
 *   experts.weight2 [local experts x fc2 columns / TP, hidden]
 * which its forward views as weight1.view(local, hidden, -1) and weight2.view(local, -1,
 * hidden), expert i's fc1 and fc2 weights transposed (sharded_state_dict transposes them back
 * into SequentialMLP's). weight1 is therefore no column concatenation: its flat elements are
 * the transposed fc1 weights one after the other, so row R holds rows R * local .. R * local +
 * local - 1 of their stack side by side. Its state dict has no _extra_state. */
#include "megatron_private.h"

#include <stdlib.h>
#include <string.h>

int ckpt_megatron__grouped_out(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    return t->moe_grouped_gemm > 0 || (t->moe_grouped_gemm == 0 && (m->grouped || m->te_grouped));
}

int ckpt_megatron__grouped_check(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    const ckpt_value *impl = ckpt_megatron_arg(m->args, "transformer_impl");
    const char *src = m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model";

    /* the distributed optimizer's buffers hold weight1/weight2, not the experts' weights */
    if (m->grouped && m->info.has_optimizer && t->optimizer != CKPT_MEGATRON_OPTIM_DROP)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: the optimizer state of GroupedMLP's weight1/weight2 is not read yet; "
                               "--no-optimizer writes the model",
                               src);
    if (m->te_grouped && m->info.has_optimizer && t->optimizer != CKPT_MEGATRON_OPTIM_DROP)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: the optimizer state of TEGroupedMLP's linear_fc1/linear_fc2.weight<i> is not read "
                               "yet; --no-optimizer writes the model",
                               src);
    if (!ckpt_megatron__grouped_out(m, t))
        return 0;
    if (ckpt_megatron__num_experts(m->args) <= 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "%s: grouped GEMM: the model has no experts", src);
    if (!impl || !(ckpt_value_is_str(impl, "local") || ckpt_value_is_str(impl, "transformer_engine")))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: grouped GEMM: args.transformer_impl says neither the local spec's GroupedMLP "
                               "(local) nor Transformer Engine's TEGroupedMLP (transformer_engine)",
                               src);
    if (m->info.has_optimizer && t->optimizer != CKPT_MEGATRON_OPTIM_DROP)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: grouped GEMM: the optimizer state of the grouped weights is not written yet; "
                               "--no-optimizer writes the model",
                               src);
    return 0;
}

/* The entry named `name`, or -1. */
static long find(const ckpt_megatron *m, const char *name)
{
    size_t i;

    for (i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0)
            return (long)i;
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* weight1 from the transposed fc1 parts t[0..n) ([hidden, rows] each): their stack
 * [n * hidden, rows] regrouped, row j of every n into column block j. */
static int weight1(ckpt_graph *g, const ckpt_node *const *t, size_t n, const ckpt_node **out)
{
    const ckpt_node *stack, **rows = calloc(n, sizeof *rows);
    int64_t *ones = calloc(n, sizeof *ones);
    size_t j;
    int rc;

    if (!rows || !ones) {
        free(rows);
        free(ones);
        return ckpt_error_oom();
    }
    for (j = 0; j < n; j++)
        ones[j] = 1;
    if ((rc = ckpt_node_concat(g, t, n, 0, &stack)) == 0 &&
        (rc = ckpt_node_deinterleave(g, stack, 0, n, ones, rows)) == 0)
        rc = ckpt_node_concat(g, rows, n, 1, out);
    free(rows);
    free(ones);
    return rc;
}

int ckpt_megatron__grouped_part(const ckpt_megatron *m, size_t i, int ep_size,
                                int (*part)(void *ctx, size_t i, const ckpt_node **out), void *ctx,
                                const char **which, const ckpt_node **out)
{
    const mg_entry *e = &m->entries[i];
    int64_t per = ckpt_megatron__experts_at(m, ep_size), k;
    int fc1 = ends_with(e->name, ".linear_fc1.weight"), rc = 0;
    const ckpt_node **t;
    ckpt_buf name = CKPT_BUF_INIT;

    if (ckpt_megatron__is_extra_state(e->name))
        return 0;
    if (!fc1 && !ends_with(e->name, ".linear_fc2.weight"))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: GroupedMLP holds the experts' fc1 and fc2 weights only (no bias)", e->name);
    if (per < 1 || e->expert % per != 0)
        return 0;
    if (!(t = calloc((size_t)per, sizeof *t)))
        return ckpt_error_oom();
    for (k = 0; k < per && rc == 0; k++) {
        const ckpt_node *p;
        long j;
        ckpt_buf_clear(&name);
        if ((rc = ckpt_megatron__rename_expert(e->name, e->expert + k, &name)) < 0)
            break;
        if ((j = find(m, (const char *)name.data)) < 0)
            rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT, "%s: no such expert tensor for GroupedMLP",
                                 (const char *)name.data);
        else if ((rc = part(ctx, (size_t)j, &p)) == 0)
            rc = ckpt_node_transpose(m->g, p, 0, 1, &t[k]);
    }
    if (rc == 0)
        rc = fc1 ? weight1(m->g, t, (size_t)per, out) : ckpt_node_concat(m->g, t, (size_t)per, 0, out);
    *which = fc1 ? "weight1" : "weight2";
    free(t);
    ckpt_buf_dispose(&name);
    return rc < 0 ? rc : 1;
}

#define WEIGHT1 ".mlp.experts.weight1"
#define WEIGHT2 ".mlp.experts.weight2"

int ckpt_megatron__grouped_key(const char *key)
{
    return ends_with(key, WEIGHT1) || ends_with(key, WEIGHT2);
}

/* Local expert i's part of GroupedMLP weight t (at one TP rank): fc1's [rows, hidden] or
 * fc2's [hidden, columns], t's view(local, ...)[i] transposed. */
static int expert_part(const ckpt_megatron *m, const ckpt_tensor *t, int fc1, int64_t local, int64_t i,
                       const ckpt_node **out)
{
    const ckpt_node *x;
    int64_t c = fc1 ? t->shape[1] / local : t->shape[0] / local;
    int64_t three[3] = { local, t->shape[0], c }, two[2] = { t->shape[0], c };
    int rc = ckpt_node_tensor(m->g, t, &x);

    if (rc == 0 && fc1 && (rc = ckpt_node_reshape(m->g, x, 3, three, &x)) == 0 &&
        (rc = ckpt_node_slice(m->g, x, 0, i, 1, &x)) == 0)
        rc = ckpt_node_reshape(m->g, x, 2, two, &x);
    if (rc == 0 && !fc1)
        rc = ckpt_node_slice(m->g, x, 0, i * c, c, &x);
    return rc < 0 ? rc : ckpt_node_transpose(m->g, x, 0, 1, out);
}

/* SequentialMLP's local linears keep None as their _extra_state, which GroupedMLP's state
 * dict does not hold: given back to each expert read from it. */
static const ckpt_value none = { CKPT_VAL_NONE, 0, { 0 } };

static int add_none(ckpt_megatron *m, const mg_entry *w)
{
    size_t n = strlen(w->name) - strlen(".weight");
    mg_entry *e = NULL;
    int rc = ckpt_megatron__push_entry(m, &e);

    if (rc < 0)
        return rc;
    w = &m->entries[m->n_entries - 2]; /* the push may have moved it */
    e->src_pp = w->src_pp;
    e->src_vp = w->src_vp;
    e->layout = w->layout;
    e->ep = w->ep;
    e->expert = w->expert;
    e->value = &none;
    e->src = mg_rank_at(m, 0, w->src_pp, w->ep > 0 ? w->ep : 0)->ck;
    e->name = malloc(n + sizeof "._extra_state");
    e->local = strdup(w->local);
    if (!e->name || !e->local)
        return ckpt_error_oom();
    memcpy(e->name, w->name, n);
    strcpy(e->name + n, "._extra_state");
    return 0;
}

/* Local expert i of the weight `key` as an entry under its global name. */
static int add_expert(ckpt_megatron *m, const ckpt_tensor *const *ts, int pp, int vp, int ep, const char *key,
                      int64_t offset, int64_t local, int64_t i)
{
    int fc1 = ends_with(key, WEIGHT1), tp, rc;
    ckpt_buf name = CKPT_BUF_INIT, layer = CKPT_BUF_INIT;
    ckpt_tensor_layout l;
    const ckpt_node **shards = calloc((size_t)m->info.tp, sizeof *shards);
    mg_entry *e = NULL;
    int64_t expert = (int64_t)ep * local + i;

    if (!shards)
        return ckpt_error_oom();
    rc = ckpt_buf_printf(&name, "%.*s.mlp.experts.local_experts.%lld.linear_fc%d.weight",
                         (int)(strlen(key) - strlen(WEIGHT1)), key, (long long)i, fc1 ? 1 : 2);
    if (rc == 0 && (rc = ckpt_parallel_classify(m->spec, m->params, (const char *)name.data, 2, &l)) == 0) {
        l.layer += offset;
        rc = ckpt_parallel_rename_layer(m->spec, (const char *)name.data, l.layer, &layer);
    }
    ckpt_buf_clear(&name);
    if (rc == 0)
        rc = ckpt_megatron__rename_expert((const char *)layer.data, expert, &name);
    for (tp = 0; tp < m->info.tp && rc == 0; tp++)
        rc = expert_part(m, ts[tp], fc1, local, i, &shards[tp]);
    if (rc == 0 && (rc = ckpt_megatron__push_entry(m, &e)) == 0) {
        e->src_pp = pp;
        e->src_vp = vp;
        e->layout = l;
        e->ep = m->info.ep > 1 ? ep : -1;
        e->expert = expert;
        e->param = 1;
        e->shards = shards;
        shards = NULL;
        e->name = strdup((const char *)name.data);
        e->local = strdup(key);
        rc = e->name && e->local ? ckpt_parallel_merge(m->g, &e->layout, e->name, e->shards, (size_t)m->info.tp,
                                                       &e->full)
                                 : ckpt_error_oom();
    }
    if (rc == 0)
        rc = add_none(m, &m->entries[m->n_entries - 1]);
    free(shards);
    ckpt_buf_dispose(&name);
    ckpt_buf_dispose(&layer);
    return rc;
}

int ckpt_megatron__grouped_add(ckpt_megatron *m, const ckpt_value *const *dicts, int pp, int vp, int ep,
                               const char *key, int64_t offset)
{
    int64_t local = ckpt_megatron__experts_at(m, m->info.ep), i;
    const ckpt_tensor **ts = calloc((size_t)m->info.tp, sizeof *ts);
    int fc1 = ends_with(key, WEIGHT1), tp, rc = 0;

    if (!ts)
        return ckpt_error_oom();
    for (tp = 0; tp < m->info.tp && rc == 0; tp++) {
        const mg_rank *r = mg_rank_at(m, tp, pp, ep);
        const ckpt_value *v = ckpt_value_dict_get(dicts[tp], key);
        const ckpt_tensor *t = v && v->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(r->ck, v->u.tensor.index) : NULL;
        if (!t || t->ndim != 2 || local < 1 || t->shape[fc1 ? 1 : 0] % local != 0)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                 "%s: '%s' is not GroupedMLP's %s of %lld local experts (num_experts / EP)",
                                 ckpt_path(r->ck), key, fc1 ? "[hidden, experts x rows]" : "[experts x columns, hidden]",
                                 (long long)local);
        ts[tp] = t;
    }
    for (i = 0; i < local && rc == 0; i++)
        rc = add_expert(m, ts, pp, vp, ep, key, offset, local, i);
    m->grouped = 1;
    free(ts);
    return rc;
}
