/* Where each parameter's optimizer state lies in a Megatron checkpoint's rank files, for a
 * listing (ckptconv inspect): the distributed optimizer's grad buffer layout
 * (megatron_distopt_layout.c; for torch_dist's dp_reshardable form, the layout of each stage
 * at the layout args name), or the non-distributed optimizer's state-dict matching
 * (megatron_optim_view.c). */
#include "megatron_dist_optim.h"
#include "megatron_distopt.h"
#include "../megatron_private.h"

#include <stdlib.h>
#include <string.h>

typedef struct ranges {
    ckpt_megatron_optim_range *v;
    size_t n, cap;
} ranges;

static int push(ranges *r, ckpt_megatron_optim_range **out)
{
    ckpt_megatron_optim_range *grown = ckpt_array_grow(r->v, &r->cap, r->n, sizeof *grown);

    if (!grown)
        return CKPT_ENOMEM;
    r->v = grown;
    *out = &r->v[r->n++];
    memset(*out, 0, sizeof **out);
    return 0;
}

static void fill(ckpt_megatron_optim_range *o, const char *name, int tp, int pp, const mg_dopt_layout *l,
                 const mg_dopt_range *g)
{
    const mg_dopt_buffer *b = &l->buffers[g->buffer];

    o->name = name;
    o->tp = tp;
    o->pp = pp;
    o->distributed = 1;
    o->chunk = b->chunk;
    o->gbuf = b->gbuf;
    o->expert = b->expert;
    o->param_dtype = b->param_dtype;
    o->grad_dtype = b->grad_dtype;
    o->bucket = g->bucket;
    o->start = g->start;
    o->end = g->end;
    o->flat = g->flat;
    o->index = -1;
}

/* EP rank ep's directory repeats the dense parameters, listed at EP 0 only. */
static int distributed_rank(const ckpt_megatron *m, int tp, int pp, int ep, ranges *r)
{
    const mg_entry **entries = NULL;
    const ckpt_node **shards = NULL;
    mg_dopt_layout l;
    size_t i, n = 0;
    int rc = ckpt_megatron__dopt_source_layout(m, tp, pp, ep, &entries, &shards, &n, &l);

    for (i = 0; rc == 0 && i < n; i++) {
        ckpt_megatron_optim_range *o = NULL;
        if (ep > 0 && !l.buffers[l.ranges[i].buffer].expert)
            continue;
        if ((rc = push(r, &o)) < 0)
            break;
        fill(o, entries[i]->name, tp, pp, &l, &l.ranges[i]);
        o->ep = ep;
    }
    ckpt_megatron__dopt_layout_free(&l);
    free(entries);
    free(shards);
    return rc;
}

static int plain_rank(const ckpt_megatron *m, int tp, int pp, ranges *r)
{
    mg_optim_view v;
    size_t i, k;
    int rc = ckpt_megatron__optim_view_open(m, mg_rank_at(m, tp, pp, 0), &v);

    for (k = 0; rc == 0 && k < v.n; k++) {
        ckpt_megatron_optim_range *o = NULL;
        const mg_entry *e = NULL;
        for (i = 0; i < m->n_entries && !e; i++)
            if (m->entries[i].shards && m->entries[i].src_pp == pp && m->entries[i].src_vp == v.vp[k] &&
                m->entries[i].ep <= 0 && strcmp(m->entries[i].local, v.keys[k]) == 0)
                e = &m->entries[i];
        if (!e || (rc = push(r, &o)) < 0)
            continue;
        o->name = e->name;
        o->tp = tp;
        o->pp = pp;
        o->chunk = v.vp[k];
        o->index = v.index[k];
        o->group = v.group[k];
    }
    ckpt_megatron__optim_view_free(&v);
    return rc;
}

/* torch_dist's dp_reshardable form: every TP rank of a stage has the stage's layout. */
static int dp_reshardable(const ckpt_megatron *m, ranges *r)
{
    mg_dist_sizes z;
    mg_dist_stage s;
    size_t i;
    int tp, pp, rc = 0;

    memset(&z, 0, sizeof z);
    z.tp = (int)ckpt_megatron__arg_int(m->args, "tensor_model_parallel_size", 1);
    z.pp = (int)ckpt_megatron__arg_int(m->args, "pipeline_model_parallel_size", 1);
    z.vpp = (int)ckpt_megatron__arg_int(m->args, "virtual_pipeline_model_parallel_size", 1);
    if (z.vpp < 1)
        z.vpp = 1;
    /* a MoE model: EP rank 0 lists the dense parameters and its experts, the others their experts */
    for (z.ep = 0; z.ep < (m->info.ep > 1 ? m->info.ep : 1) && rc == 0; z.ep++)
        for (pp = 0; pp < z.pp && rc == 0; pp++) {
            if ((rc = ckpt_megatron__dist_stage(m, m->args, &z, pp, &s)) == 0)
                for (tp = 0; tp < z.tp && rc == 0; tp++)
                    for (i = 0; i < s.n && rc == 0; i++) {
                        ckpt_megatron_optim_range *o = NULL;
                        if (z.ep > 0 && !s.l.buffers[s.l.ranges[i].buffer].expert)
                            continue;
                        if ((rc = push(r, &o)) == 0) {
                            fill(o, s.idx[i] >= 0 ? m->entries[s.idx[i]].name : "output_layer.weight", tp, pp,
                                 &s.l, &s.l.ranges[i]);
                            o->ep = z.ep;
                        }
                    }
            ckpt_megatron__dist_stage_free(&s);
        }
    return rc;
}

int ckpt_megatron_optimizer_ranges(const ckpt_megatron *m, ckpt_megatron_optim_range **out, size_t *n)
{
    ranges r = { NULL, 0, 0 };
    int tp, pp, ep, rc = 0;

    *out = NULL;
    *n = 0;
    if ((rc = ckpt_megatron__dist_optim_unread(m)) < 0)
        return rc;
    if (m->dist && m->dist_form == MG_DIST_DP) {
        rc = dp_reshardable(m, &r);
    } else if (m->dist && m->dist_form != MG_DIST_NONE) {
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: per parameter under optimizer.state.<state>.<parameter key>, no ranges to list",
                               m->dist);
    } else if (!m->set || !m->info.has_optimizer) {
        return 0;
    }
    for (ep = 0; ep < m->info.ep && rc == 0 && !m->dist; ep++)
        for (pp = 0; pp < m->info.pp && rc == 0; pp++)
            for (tp = 0; tp < m->info.tp && rc == 0; tp++)
                rc = !m->info.distributed_optimizer ? (ep == 0 ? plain_rank(m, tp, pp, &r) : 0)
                                                    : distributed_rank(m, tp, pp, ep, &r);
    if (rc < 0) {
        free(r.v);
        return rc;
    }
    *out = r.v;
    *n = r.n;
    return 0;
}
