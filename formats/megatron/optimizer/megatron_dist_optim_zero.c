/* megatron-core 0.13's torch_dist form `dp_zero_gather_scatter` (--no-ckpt-fully-parallel-save;
 * loadable up to 0.19): DP rank 0 of each model-parallel rank g = tp + TP * pp gathers its grad
 * buffers as for the legacy distrib_optim.pt and saves that dict as the ShardedObject
 * `optimizer.distributed.dp_group_idx_<g>.param_state`, a bytes item "<key>/shard_0_1" whose
 * bytes are the torch.save archive of [state] (distrib_optimizer.py sharded_param_state_dp_zero,
 * 0.13.1 l.1151; the list is the sharded-object wrapping, strategies/torch.py). The state is
 * that of the legacy file of the rank (get_parameter_state_dp_zero), so it is read as one,
 * in place in the data file (ckpt_open_item), against the stage's layout from args. The step
 * and param groups are `dp_group_idx_<g>.optimizer/shard_0_1`, as with dp_reshardable. */
#include "megatron_dist_optim.h"

#include <stdio.h>

int ckpt_megatron__dist_zero_flat(const ckpt_megatron *m, const ckpt_ckpt *ck, const ckpt_value *root, int64_t group,
                                  const mg_dopt_layout *l, const ckpt_tensor **flat)
{
    const ckpt_value *item, *state;
    const ckpt_ckpt *inner;
    char key[96];
    int rc;

    snprintf(key, sizeof key, CKPT_MEGATRON_DIST_PREFIX "dp_group_idx_%lld.param_state/shard_0_1", (long long)group);
    if (!(item = root ? ckpt_value_dict_get(root, key) : NULL))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: no '%s', where dp_zero_gather_scatter keeps the optimizer state of "
                               "model-parallel rank %lld",
                               m->dist, key, (long long)group);
    if (item->kind != CKPT_VAL_BYTES)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: '%s' is not a saved object (bytes item)",
                               m->dist, key);
    if ((rc = ckpt_open_item(&inner, ck, item, key, NULL)) < 0)
        return rc;
    state = ckpt_root(inner);
    if (!state || (state->kind != CKPT_VAL_LIST && state->kind != CKPT_VAL_TUPLE) || state->u.seq.n != 1)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: not a saved object ([distributed optimizer state])", ckpt_path(inner));
    return ckpt_megatron__dopt_flat(inner, state->u.seq.items[0], l, 0, flat);
}
