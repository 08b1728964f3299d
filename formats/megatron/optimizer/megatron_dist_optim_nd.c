/* megatron-core 0.13's fully_sharded_model_space optimizer state (distrib_optimizer.py
 * sharded_param_state_fs_model_space; its default torch_dist form up to 0.14): items
 * `optimizer.state.{fp32_param,exp_avg,exp_avg_sq}.<model key>` stored in the "N-D
 * flattened" form of dist_checkpointing/strategies/torch.py (sharded_tensor_to_torch_sharded_tensor):
 * shape = the model tensor's fragment grid (one axis per dimension) + (elements of one
 * fragment,), the block [i0, ..., i(n-1), :] being fragment (i0, ...) flattened in C order.
 * The true shape is the parameter's, which the model gives (the file has it only in
 * .metadata's mcore_data); each fragment is cut out and the grid concatenated back. */
#include "../megatron_private.h"

#include <string.h>

/* The block of shape (l[first..d), S[d..n)) at fragment indices idx[0..d): fragments are
 * views of t (each a row along its last axis), the grid concatenated back. */
static int grid(ckpt_megatron *m, const ckpt_tensor *t, int n, const int64_t *f, const int64_t *l, int first, int d,
                int64_t *idx, const ckpt_node **out)
{
    const ckpt_node *parts[64];
    int64_t i, stride;
    int rc;

    if (d == n) {
        ckpt_tensor *v = ckpt_arena_alloc(m->arena, sizeof *v);
        if (!v)
            return CKPT_ENOMEM;
        *v = *t;
        v->ndim = n - first;
        for (i = 0; i < n; i++)
            v->offset += idx[i] * t->stride[i];
        for (i = n - 1, stride = t->stride[n]; i >= first; i--) {
            v->shape[i - first] = l[i];
            v->stride[i - first] = stride;
            stride *= l[i];
        }
        return ckpt_node_tensor(m->g, v, out);
    }
    if (f[d] > (int64_t)(sizeof parts / sizeof parts[0]))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT, "%lld fragments along one axis",
                               (long long)f[d]);
    for (i = 0; i < f[d]; i++) {
        idx[d] = i;
        if ((rc = grid(m, t, n, f, l, first, d + 1, idx, &parts[i])) < 0)
            return rc;
    }
    return f[d] == 1 ? (*out = parts[0], 0) : ckpt_node_concat(m->g, parts, (size_t)f[d], d - first, out);
}

int ckpt_megatron__nd_flattened(ckpt_megatron *m, const ckpt_tensor *t, int64_t layer, const ckpt_node *full,
                                const ckpt_node **out)
{
    int64_t shape[CKPT_MAX_DIMS], f[CKPT_MAX_DIMS], l[CKPT_MAX_DIMS], idx[CKPT_MAX_DIMS], numel = 1;
    int n = ckpt_node_ndim(full) + (layer >= 0), d, first = layer >= 0, rc;

    if (n >= CKPT_MAX_DIMS)
        goto bad;
    if (layer >= 0)
        shape[0] = m->info.num_layers;
    memcpy(shape + first, ckpt_node_shape(full), (size_t)ckpt_node_ndim(full) * sizeof *shape);
    if (t->ndim != n + 1)
        goto bad;
    for (d = 0; d < n; d++) {
        f[d] = t->shape[d];
        if (f[d] < 1 || shape[d] % f[d] != 0)
            goto bad;
        l[d] = shape[d] / f[d];
        numel *= l[d];
    }
    if (numel != t->shape[n] || (layer >= 0 && (l[0] != 1 || layer >= f[0])))
        goto bad;
    idx[0] = layer;
    if ((rc = grid(m, t, n, f, l, first, first, idx, out)) < 0)
        ckpt_error_prefix("%s: '%s'", m->dist, t->name);
    return rc;
bad:
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                           "%s: '%s' (fully_sharded_model_space) does not fit the parameter it is the state of: "
                           "not a fragment grid of its %d dimensions and one fragment's elements",
                           m->dist, t->name, n);
}
