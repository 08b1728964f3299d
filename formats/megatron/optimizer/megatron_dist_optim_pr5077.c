/* Whether a fully_reshardable torch_dist optimizer state has the save defect of megatron-core
 * before Megatron-LM PR #5077 (every tag up to core_v0.19.0; commit 32a03b77c5 on main).
 *
 * sharded_param_state_fully_reshardable (0.16.1 distrib_optimizer.py l.1501, 0.19.0 l.1790)
 * slices get_parameter_state_dp_zero's buffer, whose buckets' end padding is cut out, at each
 * parameter's PADDED offset (buffer.param_index_map): in a buffer whose bucket k > 0 follows
 * buckets with end padding, every parameter of bucket k is saved from another parameter's
 * elements. The fix subtracts the padding before; the file format is the same and no version
 * is recorded, so the layout (from args) says only which parameters a defective save would
 * have shifted. The content decides: after an optimizer step megatron-core copies each master
 * into its parameter, so the model weight saved beside it is the master itself (fp32) or the
 * master rounded to the parameter's dtype (bf16/fp16, round to nearest even). A shifted
 * parameter whose saved master is not its weight is another parameter's state: the file is
 * refused. A file that passes (megatron-core with the fix, or ckptconv) is read as it is.
 *
 * The loader is not affected (0.16.1 l.2070 load_parameter_state_from_fully_reshardable,
 * 0.19.0 l.2359): the sharded state dict built for loading only gives each item's key and
 * shape, and each loaded tensor is cut at the rank's range inside its own parameter
 * (param_range_map["param"], relative to the parameter: l.162 / l.188), never at a buffer
 * offset. */
#include "megatron_dist_optim.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK ((int64_t)1 << 18)

/* The first element at which master (rounded to the weight's dtype) and weight differ, or -1
 * (also on error, which is in *rc). */
static int64_t first_difference(const ckpt_node *master, const ckpt_node *weight, int *rc)
{
    ckpt_dtype d = ckpt_node_dtype(weight);
    int64_t n = ckpt_node_numel(weight), at, i;
    size_t es = ckpt_dtype_size(d);
    unsigned char *a, *b;

    *rc = 0;
    if (ckpt_node_numel(master) != n)
        return 0;
    if (!(a = malloc((size_t)CHUNK * es)) || !(b = malloc((size_t)CHUNK * es))) {
        free(a);
        *rc = ckpt_error_oom();
        return -1;
    }
    for (at = 0; at < n; at += CHUNK) {
        int64_t k = n - at < CHUNK ? n - at : CHUNK;
        if ((*rc = ckpt_node_read(master, at, k, d, a)) < 0 || (*rc = ckpt_node_read(weight, at, k, d, b)) < 0)
            break;
        if (memcmp(a, b, (size_t)k * es) == 0)
            continue;
        for (i = 0; i < k && memcmp(a + (size_t)i * es, b + (size_t)i * es, es) == 0; i++)
            ;
        free(a);
        free(b);
        return at + i;
    }
    free(a);
    free(b);
    return -1;
}

static int refuse(const ckpt_megatron *m, const mg_dopt_buffer *b, int pp, const mg_entry *e,
                  const mg_dopt_range *r, int64_t at)
{
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                           "%s: fully_reshardable optimizer state of a grad buffer of %zu buckets (pipeline stage "
                           "%d, its args' DP %lld, bucket size and overlap_grad_reduce): the saved master of '%s' "
                           "differs from its weight (element %lld): megatron-core before Megatron-LM PR #5077 "
                           "(every tag up to core_v0.19.0) saved it from offset %lld of the buckets' unpadded "
                           "concatenation where it lies at %lld, so its state in the file is another parameter's; "
                           "save it again as dp_reshardable (--dist-ckpt-optim-fully-reshardable off) or in the "
                           "legacy format, and convert that",
                           m->dist, b->n_buckets, pp, (long long)ckpt_megatron__arg_int(m->args, "data_parallel_size", 1),
                           e->name, (long long)at, (long long)r->start, (long long)r->flat);
}

int ckpt_megatron__dist_check_pr5077(const ckpt_megatron *m, const mg_dist_sizes *z)
{
    mg_dist_stage s;
    size_t i;
    int pp, rc = 0;

    for (pp = 0; pp < z->pp && rc == 0; pp++) {
        if ((rc = ckpt_megatron__dist_stage(m, m->args, z, pp, &s)) < 0)
            break;
        for (i = 0; i < s.n && rc == 0; i++) {
            const mg_dopt_range *r = &s.l.ranges[i];
            const mg_entry *e = s.idx[i] >= 0 ? &m->entries[s.idx[i]] : NULL;
            int64_t at;
            /* a tied embedding's copy has the embedding's state, checked with the embedding */
            if (r->start == r->flat || !e || !e->moment[MG_MASTER])
                continue;
            if ((at = first_difference(e->moment[MG_MASTER], e->full, &rc)) >= 0 && rc == 0)
                rc = refuse(m, &s.l.buffers[r->buffer], pp, e, r, at);
        }
        ckpt_megatron__dist_stage_free(&s);
    }
    return rc;
}
