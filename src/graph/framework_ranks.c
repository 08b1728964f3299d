/* The one rank loop of every framework that writes ranked files: the target ranks in the
 * framework's order, and each entry's tensor-parallel parts, cut once on first use and shared
 * by every rank that holds them. */
#include <ckpt/sys/common.h>
#include <ckpt/sys/framework.h>

#include <stdint.h>
#include <stdlib.h>

struct ckpt_fw_ranks {
    size_t n_entries, n_slots;
    int n_tp;
    ckpt_fw_split_fn split;
    void *state;
    const ckpt_node **parts; /* [entry][slot][tp]; a row is cut when its first part is asked for */
};

int ckpt_fw_ranks_new(ckpt_fw_ranks **out, size_t n_entries, size_t n_slots, int n_tp, ckpt_fw_split_fn split,
                      void *state)
{
    ckpt_fw_ranks *r;
    size_t rows;

    *out = NULL;
    if (n_tp < 1 || n_slots < 1 || !split)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_fw_ranks_new: %d TP ranks, %zu slots", n_tp, n_slots);
    if (n_entries > SIZE_MAX / n_slots || n_entries * n_slots > (SIZE_MAX - 1) / (size_t)n_tp / sizeof *r->parts)
        return ckpt_error_oom();
    rows = n_entries * n_slots;
    if (!(r = calloc(1, sizeof *r)) || !(r->parts = calloc(rows * (size_t)n_tp + 1, sizeof *r->parts))) {
        free(r);
        return ckpt_error_oom();
    }
    r->n_entries = n_entries;
    r->n_slots = n_slots;
    r->n_tp = n_tp;
    r->split = split;
    r->state = state;
    *out = r;
    return 0;
}

int ckpt_fw_ranks_part(ckpt_fw_ranks *r, size_t entry, size_t slot, int tp, const ckpt_node **out)
{
    const ckpt_node **row;
    int rc;

    if (entry >= r->n_entries || slot >= r->n_slots || tp < 0 || tp >= r->n_tp)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_fw_ranks_part: entry %zu slot %zu TP rank %d out of range", entry,
                              slot, tp);
    row = &r->parts[(entry * r->n_slots + slot) * (size_t)r->n_tp];
    if (!row[0] && (rc = r->split(r->state, entry, slot, r->n_tp, row)) < 0)
        return rc;
    *out = row[tp];
    return 0;
}

int ckpt_fw_ranks_each(ckpt_fw_ranks *r, int order, int pp, int ep, ckpt_fw_stage_fn on_stage,
                       ckpt_fw_rank_fn on_rank, void *state)
{
    int e, p, t, rc = 0;

    if (order != CKPT_FW_RANKS_EP_PP_TP && order != CKPT_FW_RANKS_PP_TP)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_fw_ranks_each: order %d", order);
    if (order == CKPT_FW_RANKS_PP_TP || ep < 1)
        ep = 1;
    for (e = 0; e < ep && rc == 0; e++)
        for (p = 0; p < pp && rc == 0; p++) {
            if (on_stage && (rc = on_stage(state, p, r)) < 0)
                break;
            for (t = 0; t < r->n_tp && rc == 0; t++)
                rc = on_rank(state, t, p, order == CKPT_FW_RANKS_PP_TP ? 0 : e, r);
        }
    return rc;
}

void ckpt_fw_ranks_free(ckpt_fw_ranks *r)
{
    if (!r)
        return;
    free(r->parts);
    free(r);
}
