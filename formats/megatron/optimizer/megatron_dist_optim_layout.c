/* The distributed optimizer's grad buffer layout of a pipeline stage of the model at any
 * TP/PP/VPP/DP, and the dp_reshardable keys, for the torch_dist optimizer reader
 * (megatron_dist_optim.c) and writer (megatron_dist_optim_dp.c). The rules are
 * megatron_distopt.h's; here the model's entries become that module's parameters: those of
 * the stage in named_parameters() order, each at its TP part's size, in its virtual chunk, and
 * the last stage's copy of a tied embedding. */
#include "megatron_dist_optim.h"

#include <stdlib.h>
#include <string.h>

/* The pipeline stage and model chunk of an entry at split sp (args', at the sizes given). */
static void place_of(const mg_split *sp, const mg_entry *e, int *pp, int *vp)
{
    switch (e->layout.stage) {
    case CKPT_STAGE_LAYER:
        ckpt_megatron__split_chunk_of(sp, e->layout.layer, pp, vp);
        break;
    case CKPT_STAGE_LAST:
        *pp = sp->pp - 1;
        *vp = sp->vpp - 1;
        break;
    default:
        *pp = 0;
        *vp = 0;
        break;
    }
}

/* Elements of an entry's part on one TP rank (vocabulary tables at padded_vocab rows). */
static int64_t shard_numel(const mg_entry *e, int tp, int64_t padded_vocab)
{
    int64_t n = ckpt_node_numel(e->full), rows = ckpt_node_ndim(e->full) ? ckpt_node_shape(e->full)[0] : 1;

    if (e->layout.tp == CKPT_TP_REPLICATED)
        return n;
    if (e->layout.tp == CKPT_TP_VOCAB && padded_vocab > 0 && rows > 0)
        n = n / rows * padded_vocab;
    return n / tp;
}

void ckpt_megatron__dist_stage_free(mg_dist_stage *s)
{
    free(s->params);
    free(s->idx);
    ckpt_megatron__dopt_layout_free(&s->l);
    memset(s, 0, sizeof *s);
}

int ckpt_megatron__dist_stage(const ckpt_megatron *m, const ckpt_value *args, const mg_dist_sizes *z, int pp,
                              mg_dist_stage *s)
{
    const ckpt_value *untie = ckpt_megatron_arg(args, "untie_embeddings_and_output_weights");
    int tied = untie && untie->kind == CKPT_VAL_BOOL && !untie->u.boolean && z->pp > 1;
    const char *where = m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model";
    mg_dopt_config cfg;
    mg_split split;
    long emb = -1;
    size_t i;
    int rc;

    memset(s, 0, sizeof *s);
    if ((rc = ckpt_megatron__dopt_config(args, z->dp, pp, where, &cfg)) < 0 ||
        (rc = ckpt_megatron__split_of_args(args, m->info.num_layers, z->pp, z->vpp, where, &split)) < 0)
        return rc;
    s->params = calloc(m->n_entries + 2, sizeof *s->params);
    s->idx = calloc(m->n_entries + 2, sizeof *s->idx);
    if (!s->params || !s->idx)
        return ckpt_error_oom();
    for (i = 0; i < m->n_entries; i++) {
        const mg_entry *e = &m->entries[i];
        mg_dopt_param *p = &s->params[s->n];
        int epp, evp;
        if (!e->param || !e->full || (e->ep >= 0 && e->ep != z->ep))
            continue;
        place_of(&split, e, &epp, &evp);
        if (strcmp(e->name, "embedding.word_embeddings.weight") == 0)
            emb = (long)i;
        if (epp != pp)
            continue;
        p->chunk = evp;
        p->numel = shard_numel(e, z->tp, z->padded_vocab);
        p->dtype = ckpt_node_dtype(e->full);
        p->expert = e->layout.expert && m->info.ep > 1;
        p->shared_embedding = tied && (long)i == emb;
        s->idx[s->n++] = (long)i;
    }
    if (tied && pp == z->pp - 1 && emb >= 0) {
        mg_dopt_param *p = &s->params[s->n];
        p->chunk = z->vpp - 1;
        p->numel = shard_numel(&m->entries[emb], z->tp, z->padded_vocab);
        p->dtype = ckpt_node_dtype(m->entries[emb].full);
        p->shared_embedding = 1;
        s->idx[s->n++] = -1;
    }
    return ckpt_megatron__dopt_layout(s->params, s->n, &cfg, &s->l);
}

const char *ckpt_megatron__torch_dtype(ckpt_dtype d)
{
    switch (d) {
    case CKPT_DTYPE_F32:
        return "torch.float32";
    case CKPT_DTYPE_BF16:
        return "torch.bfloat16";
    case CKPT_DTYPE_F16:
        return "torch.float16";
    default:
        return NULL;
    }
}

int ckpt_megatron__dist_bucket_key(int64_t group, const mg_dopt_buffer *b, size_t bucket, const char *moment,
                                   ckpt_buf *out)
{
    const char *pd = ckpt_megatron__torch_dtype(b->param_dtype), *gd = ckpt_megatron__torch_dtype(b->grad_dtype);

    ckpt_buf_clear(out);
    if (!pd || !gd)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "distributed optimizer: a grad buffer of dtype %s is not bf16, fp16 or fp32",
                               ckpt_dtype_name(b->param_dtype));
    return ckpt_buf_printf(out,
                           CKPT_MEGATRON_DIST_PREFIX "dp_group_idx_%lld.gbuf_idx_%zu.dtype_(%s, %s).bucket_idx_%zu.%s",
                           (long long)group, b->gbuf, pd, gd, bucket, moment) < 0
               ? CKPT_ENOMEM
               : 0;
}
