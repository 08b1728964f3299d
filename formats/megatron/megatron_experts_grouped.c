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

int ckpt_megatron__grouped_check(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    const ckpt_value *impl = ckpt_megatron_arg(m->args, "transformer_impl");
    const char *src = m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model";

    if (t->moe_grouped_gemm <= 0)
        return 0;
    if (ckpt_megatron__num_experts(m->args) <= 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "%s: grouped GEMM: the model has no experts", src);
    if (!impl || !ckpt_value_is_str(impl, "local"))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: grouped GEMM with Transformer Engine (TEGroupedMLP's linear_fc1.weight<i>) is not "
                               "written yet; the local spec's GroupedMLP is (args.transformer_impl local)",
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
