/* Where each parameter's optimizer state lies in a Megatron checkpoint's rank files, for a
 * listing (ckptconv inspect): the distributed optimizer's grad buffer layout
 * (megatron_distopt_layout.c), or the non-distributed optimizer's state-dict matching
 * (megatron_optim_view.c). */
#include "megatron_distopt.h"
#include "megatron_private.h"

#include <stdlib.h>
#include <string.h>

typedef struct ranges {
    ckpt_megatron_optim_range *v;
    size_t n, cap;
} ranges;

static int push(ranges *r, ckpt_megatron_optim_range **out)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        ckpt_megatron_optim_range *grown = realloc(r->v, cap * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        r->v = grown;
        r->cap = cap;
    }
    *out = &r->v[r->n++];
    memset(*out, 0, sizeof **out);
    return 0;
}

static int distributed_rank(const ckpt_megatron *m, int tp, int pp, ranges *r)
{
    const mg_entry **entries = NULL;
    const ckpt_node **shards = NULL;
    mg_dopt_layout l;
    size_t i, n = 0;
    int rc = ckpt_megatron__dopt_source_layout(m, tp, pp, &entries, &shards, &n, &l);

    for (i = 0; rc == 0 && i < n; i++) {
        const mg_dopt_range *g = &l.ranges[i];
        const mg_dopt_buffer *b = &l.buffers[g->buffer];
        ckpt_megatron_optim_range *o;
        if ((rc = push(r, &o)) < 0)
            break;
        o->name = entries[i]->name;
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
        ckpt_megatron_optim_range *o;
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

int ckpt_megatron_optimizer_ranges(const ckpt_megatron *m, ckpt_megatron_optim_range **out, size_t *n)
{
    ranges r = { NULL, 0, 0 };
    int tp, pp, rc = 0;

    *out = NULL;
    *n = 0;
    if (m->dist)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: the optimizer state of a torch_dist checkpoint is not listed yet", m->dist);
    if (!m->set || !m->info.has_optimizer)
        return 0;
    for (pp = 0; pp < m->info.pp && rc == 0; pp++)
        for (tp = 0; tp < m->info.tp && rc == 0; tp++)
            rc = m->info.distributed_optimizer ? distributed_rank(m, tp, pp, &r) : plain_rank(m, tp, pp, &r);
    if (rc < 0) {
        free(r.v);
        return rc;
    }
    *out = r.v;
    *n = r.n;
    return 0;
}
