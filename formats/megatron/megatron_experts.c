/* Mixture-of-experts models: their experts under their GLOBAL index, whatever the EP of the
 * files (megatron-core 0.16.1 transformer/moe/experts.py).
 *
 * A rank file of EP rank r holds num_experts / EP experts of each MoE layer as its local
 * experts 0 .. num_experts / EP - 1, which are global experts r * num_experts / EP + i:
 * SequentialMLP "mlp.experts.local_experts.<i>.<module>", TEGroupedMLP
 * "mlp.experts.linear_fc<k>.weight<i>" (and bias<i>). The model names each expert by its
 * global index, so that the same model comes out of every EP, and a target EP rank gets the
 * experts it owns renamed to its local indices. */
#include "megatron_private.h"

#include <stdlib.h>
#include <string.h>

#define SEQUENTIAL ".mlp.experts.local_experts."
/* Bounds on args' num_experts and on experts x layers (DeepSeek-V3: 256 x 61) */
#define MAX_EXPERTS (1 << 20)
#define MAX_COUNTS ((int64_t)1 << 28)
#define GROUPED ".mlp.experts.linear_fc"

/* The digits of the expert index in `name`: at[0] their offset, at[1] their length. */
static int find_index(const char *name, size_t at[2], int *grouped)
{
    const char *p = strstr(name, SEQUENTIAL), *d;

    if (p) {
        d = p + strlen(SEQUENTIAL);
        at[0] = (size_t)(d - name);
        at[1] = strspn(d, "0123456789");
        *grouped = 0;
        return at[1] > 0 && d[at[1]] == '.';
    }
    if (!(p = strstr(name, GROUPED)))
        return 0;
    /* TEGroupedLinear: "<weight|bias><i>" ends the name */
    d = name + strlen(name);
    while (d > p && d[-1] >= '0' && d[-1] <= '9')
        d--;
    at[0] = (size_t)(d - name);
    at[1] = strlen(d);
    *grouped = 1;
    return at[1] > 0 && at[0] >= 6 && (strncmp(d - 6, "weight", 6) == 0 || strncmp(d - 4, "bias", 4) == 0);
}

int ckpt_megatron__expert_index(const char *name, int64_t *index)
{
    size_t at[2];
    int grouped;

    if (!find_index(name, at, &grouped) || at[1] > 9)
        return 0;
    *index = strtoll(name + at[0], NULL, 10);
    return 1;
}

int ckpt_megatron__rename_expert(const char *name, int64_t index, ckpt_buf *out)
{
    size_t at[2];
    int grouped;

    if (!find_index(name, at, &grouped))
        return ckpt_buf_puts(out, name);
    return ckpt_buf_printf(out, "%.*s%lld%s", (int)at[0], name, (long long)index, name + at[0] + at[1]);
}

int64_t ckpt_megatron__experts_at(const ckpt_megatron *m, int ep_size)
{
    int64_t experts = ckpt_megatron__num_experts(m->args);
    return ep_size > 0 && experts > 0 ? experts / ep_size : 0;
}

int ckpt_megatron__on_ep(const ckpt_megatron *m, const mg_entry *e, int ep_size, int ep)
{
    int64_t per = ckpt_megatron__experts_at(m, ep_size);

    /* TEGroupedMLP: a linear's one _extra_state, its first local expert's */
    if (e->expert >= 0 && m->te_out && per > 0 && e->expert % per != 0 && ckpt_megatron__is_extra_state(e->name))
        return 0;
    if (e->expert >= 0)
        return per > 0 ? e->expert / per == ep : ep == 0;
    if (e->ep < 0)
        return 1;
    /* an expert module without an index (TEGroupedMLP's _extra_state): each EP rank its own at
     * the source's EP, else EP rank 0's on every rank */
    return ep_size == m->info.ep ? e->ep == ep : e->ep == 0;
}

int ckpt_megatron__local_expert_name(const ckpt_megatron *m, const mg_entry *e, int ep_size, const char *name,
                                     ckpt_buf *out)
{
    int64_t per = ckpt_megatron__experts_at(m, ep_size);

    if (e->expert < 0 || per < 1)
        return ckpt_buf_puts(out, name);
    if (m->te_out)
        return ckpt_megatron__te_local_name(name, e->expert % per, out);
    return ckpt_megatron__rename_expert(name, e->expert % per, out);
}

/* The global index of local expert *expert of EP rank ep (key: its name in the file), into
 * *expert and the entry's name. */
int ckpt_megatron__global_expert(const ckpt_megatron *m, int pp, int ep, const char *key, int64_t *expert, ckpt_buf *name)
{
    int64_t per = ckpt_megatron__experts_at(m, m->info.ep);
    ckpt_buf global = CKPT_BUF_INIT;
    int rc;

    if (per > 0 && *expert >= per)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s': local expert %lld, but args give %lld experts over expert_model_parallel_size "
                               "%d, %lld per EP rank",
                               ckpt_path(mg_rank_at(m, 0, pp, ep)->ck), key, (long long)*expert,
                               (long long)ckpt_megatron__num_experts(m->args), m->info.ep, (long long)per);
    *expert += (int64_t)ep * per;
    if ((rc = ckpt_megatron__rename_expert((const char *)name->data, *expert, &global)) == 0) {
        ckpt_buf_clear(name);
        rc = ckpt_buf_puts(name, (const char *)global.data);
    }
    ckpt_buf_dispose(&global);
    return rc;
}

static const ckpt_tensor *leaf(const mg_rank *r, const ckpt_value *v)
{
    return v && v->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(r->ck, v->u.tensor.index) : NULL;
}

/* A model key that is no expert's (a key the layout rules do not know is taken as dense). */
static int dense_key(const ckpt_megatron *m, const ckpt_value *k)
{
    ckpt_tensor_layout l;

    if (k->kind != CKPT_VAL_STR)
        return 0;
    if (ckpt_parallel_classify(m->spec, m->params, k->u.str.ptr, 2, &l) < 0) {
        ckpt_error_clear();
        return 1;
    }
    return !l.expert;
}

/* Each key of `from` that is not an expert's is in `to` as the same kind of value, tensors at
 * the same shape; else an error naming EP rank ep > 0's file r (r0: EP rank 0's) and the key.
 * from_ep0: `from` is EP rank 0's dict. */
static int dense_in(const ckpt_megatron *m, const ckpt_value *from, const ckpt_value *to, const mg_rank *r,
                    const mg_rank *r0, int from_ep0)
{
    size_t i;

    for (i = 0; i < from->u.dict.map.n; i++) {
        const ckpt_value *k = from->u.dict.map.keys[i], *v = from->u.dict.map.vals[i], *w;
        const ckpt_tensor *t, *u;
        if (!dense_key(m, k))
            continue;
        if (!(w = ckpt_value_dict_get(to, k->u.str.ptr)))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: %s model key %s, which EP rank 0 (%s) %s: EP ranks differ only in their experts",
                                   ckpt_path(r->ck), from_ep0 ? "no" : "a", k->u.str.ptr, ckpt_path(r0->ck),
                                   from_ep0 ? "has" : "lacks");
        t = leaf(from_ep0 ? r0 : r, v);
        u = leaf(from_ep0 ? r : r0, w);
        if (!t != !u || (t && (t->ndim != u->ndim || memcmp(t->shape, u->shape, (size_t)t->ndim * sizeof *t->shape))))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: '%s' is not the tensor of EP rank 0 (%s) at its shape: EP ranks differ only in "
                                   "their experts",
                                   ckpt_path(r->ck), k->u.str.ptr, ckpt_path(r0->ck));
    }
    return 0;
}

/* Tensors t and u (of the same dtype and shape) hold the same bytes; compared in slices of
 * bounded size. */
static int same_bytes(const ckpt_tensor *t, const ckpt_tensor *u, int *same)
{
    enum { SLICE = 16384 };
    int64_t n = ckpt_tensor_numel(t), at, k;
    size_t es = ckpt_dtype_size(t->dtype);
    unsigned char *a, *b;
    int rc = 0;

    *same = 1;
    if (t->dtype != u->dtype || es == 0 || n < 0) {
        *same = t->dtype == u->dtype && n == 0;
        return 0;
    }
    a = malloc(SLICE * es);
    b = malloc(SLICE * es);
    for (at = 0; a && b && at < n && *same && rc == 0; at += k) {
        k = n - at < SLICE ? n - at : SLICE;
        if ((rc = ckpt_tensor_read(t, at, k, t->dtype, a)) == 0 && (rc = ckpt_tensor_read(u, at, k, u->dtype, b)) == 0)
            *same = memcmp(a, b, (size_t)k * es) == 0;
    }
    if (!a || !b)
        rc = ckpt_error_oom();
    free(a);
    free(b);
    return rc;
}

/* At expert TP below the TP, the files of one dense TP rank are written by its dense
 * data-parallel ranks, whose copies of its tensors are read from one of them (r0): every
 * other copy (r's) must be the same tensor, else the set is not one model. */
static int same_copies(const ckpt_megatron *m, const ckpt_value *d, const ckpt_value *d0, const mg_rank *r,
                       const mg_rank *r0)
{
    size_t i;
    int rc, same;

    for (i = 0; i < d0->u.dict.map.n; i++) {
        const ckpt_value *k = d0->u.dict.map.keys[i];
        const ckpt_tensor *t, *u;
        if (!dense_key(m, k))
            continue;
        t = leaf(r0, d0->u.dict.map.vals[i]);
        u = leaf(r, ckpt_value_dict_get(d, k->u.str.ptr));
        if (!t || !u)
            continue;
        if ((rc = same_bytes(t, u, &same)) < 0)
            return rc;
        if (!same)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: '%s' differs from its copy in %s: the files of one dense TP rank hold one "
                                   "model's tensors",
                                   ckpt_path(r->ck), k->u.str.ptr, ckpt_path(r0->ck));
    }
    return 0;
}

/* The tensors of a file that are not experts' are copies of those its dense TP rank's file
 * holds (r0: EP rank 0's at an expert TP equal to the TP): the same keys at the same shapes,
 * not read; at an expert TP below the TP also the same values. */
int ckpt_megatron__same_dense(const ckpt_megatron *m, int tp, int pp, int vp, int ep, const ckpt_value *d)
{
    const mg_rank *r = mg_rank_at(m, tp, pp, ep), *r0 = mg_rank_at(m, tp, pp, 0);
    const ckpt_value *d0 = ckpt_megatron__chunk_dict(r0->root, m->info.vpp, vp);
    int rc;

    if (!d0 || d0->kind != CKPT_VAL_DICT)
        return 0; /* refused when EP rank 0's chunk was read */
    if ((rc = dense_in(m, d, d0, r, r0, 0)) < 0 || (rc = dense_in(m, d0, d, r, r0, 1)) < 0)
        return rc;
    return mg_etp(m) < m->info.tp ? same_copies(m, d, d0, r, r0) : 0;
}

/* The expert TP size of the set, and the ranks without a file of their own: a legacy set's
 * experts are cut over the expert TP ranks, which divide the TP (megatron-core cannot save
 * more: two expert TP ranks would write one file); below the TP the files are those of
 * expert data-parallel rank 0 (mg_expert_tp): the file of its dense TP rank stands in for a
 * missing (tp, pp, ep), and its experts are read from the file mg_expert_tp names. */
int ckpt_megatron__stand_ins(ckpt_megatron *m)
{
    const char *first = ckpt_path(mg_rank_at(m, 0, 0, 0)->ck);
    int64_t etp = ckpt_megatron__num_experts(m->args) > 0
                      ? ckpt_megatron__arg_int(m->args, "expert_tensor_parallel_size", m->info.tp)
                      : m->info.tp;
    int tp, pp, ep;

    if (etp > m->info.tp)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: expert_tensor_parallel_size %lld is above the tensor-parallel size %d: "
                               "megatron-core's legacy save cannot hold that layout (the expert TP ranks of one dense "
                               "TP rank all write its mp_rank file, and one survives)",
                               first, (long long)etp, m->info.tp);
    if (etp < 1 || m->info.tp % etp)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: expert_tensor_parallel_size %lld does not divide the tensor-parallel size %d",
                               first, (long long)etp, m->info.tp);
    m->etp = (int)etp;
    for (ep = 0; ep < m->info.ep; ep++)
        for (pp = 0; pp < m->info.pp; pp++)
            for (tp = 0; tp < m->info.tp; tp++) {
                mg_rank *r = mg_rank_at(m, tp, pp, ep);
                const mg_rank *dense = mg_rank_at(m, tp, pp, mg_dense_ep(m, tp));
                const mg_rank *expert = mg_rank_at(m, mg_expert_tp(m, tp % mg_etp(m), ep), pp, ep);
                if (!r->stand_in && !expert->stand_in)
                    continue;
                if (etp == m->info.tp || dense->stand_in || expert->stand_in)
                    return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                           "%s: no rank file for TP %d, PP %d, EP %d (expert TP %lld)",
                                           ckpt_set_info_of(m->set)->root, tp, pp, ep, (long long)etp);
                r->ck = dense->ck;
                r->root = dense->root;
            }
    return 0;
}

/* Each EP rank file holds num_experts / EP experts of every MoE layer, each with the same
 * modules: counted per (layer, EP rank, local expert). */
int ckpt_megatron__check_experts(const ckpt_megatron *m)
{
    int64_t per = ckpt_megatron__experts_at(m, m->info.ep), layers = m->info.num_layers, l, i;
    size_t *count, k;
    int *pp_of, ep, rc = 0;

    if (per < 1 || layers < 1)
        return 0;
    /* one count per (layer, expert): bounded before it is allocated */
    if (per > MAX_EXPERTS / m->info.ep || layers > MAX_COUNTS / (per * m->info.ep))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: args: %lld experts in each of %lld layers: more than are read (%d experts, "
                               "%lld in all)",
                               ckpt_path(mg_rank_at(m, 0, 0, 0)->ck), (long long)(per * m->info.ep),
                               (long long)layers, MAX_EXPERTS, (long long)MAX_COUNTS);
    count = calloc((size_t)(layers * m->info.ep * per), sizeof *count);
    pp_of = calloc((size_t)layers, sizeof *pp_of);
    if (!count || !pp_of) {
        free(count);
        free(pp_of);
        return ckpt_error_oom();
    }
    for (k = 0; k < m->n_entries; k++) {
        const mg_entry *e = &m->entries[k];
        if (e->expert < 0 || e->layout.layer < 0 || e->layout.layer >= layers)
            continue;
        count[e->layout.layer * m->info.ep * per + e->expert]++;
        pp_of[e->layout.layer] = e->src_pp;
    }
    for (l = 0; l < layers && rc == 0; l++) {
        const size_t *c = count + l * m->info.ep * per;
        for (ep = 0; ep < m->info.ep && rc == 0; ep++)
            for (i = 0; i < per && rc == 0; i++)
                if (c[ep * per + i] != c[0])
                    rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                         "%s: layer %lld: local expert %lld has %zu tensors, local expert 0 of EP rank "
                                         "0 has %zu; every EP rank holds num_experts / EP = %lld experts of each MoE "
                                         "layer, each with the same modules",
                                         ckpt_path(mg_rank_at(m, 0, pp_of[l], ep)->ck), (long long)l, (long long)i,
                                         c[ep * per + i], c[0], (long long)per);
    }
    free(count);
    free(pp_of);
    return rc;
}

/* Where an entry goes: non-experts stay where they are; a layer's experts gather where its
 * first one (of EP rank 0) is, SequentialMLP's by expert then module (its state dict holds
 * each local expert's modules together), TEGroupedMLP's by module then expert (each linear
 * holds its weight<i> one after the other). `module` is the position of the first entry of
 * the same module (the name with its expert index taken out). */
typedef struct order_key {
    size_t anchor;
    int64_t a, b;
    size_t index;
} order_key;

static int by_order(const void *x, const void *y)
{
    const order_key *p = x, *q = y;

    if (p->anchor != q->anchor)
        return p->anchor < q->anchor ? -1 : 1;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return p->index < q->index ? -1 : p->index > q->index;
}

int ckpt_megatron__by_module(const void *x, const void *y)
{
    const mg_module_key *p = x, *q = y;
    int c;

    if (p->layer != q->layer)
        return p->layer < q->layer ? -1 : 1;
    if ((c = strcmp(p->module, q->module)) != 0)
        return c;
    return p->index < q->index ? -1 : p->index > q->index;
}

int64_t ckpt_megatron__expert_layer(const ckpt_megatron *m, const mg_entry *e)
{
    const char *rest;
    int64_t l;

    if (e->layout.layer >= 0)
        return e->layout.layer;
    l = ckpt_megatron__mtp_layer(e->name, &rest);
    return l >= 0 && l < CKPT_MEGATRON_MAX_MTP ? m->info.num_layers + l : -1;
}

int ckpt_megatron__first_of_module(const ckpt_megatron *m, ckpt_megatron_module_fn module_of, void *arg, size_t *first)
{
    mg_module_key *keys = calloc(m->n_entries + 1, sizeof *keys);
    ckpt_buf module = CKPT_BUF_INIT;
    size_t i, n = 0;
    int rc = keys ? 0 : ckpt_error_oom(), in_module;

    for (i = 0; i < m->n_entries && rc == 0; i++) {
        const mg_entry *e = &m->entries[i];
        first[i] = i;
        ckpt_buf_clear(&module);
        if (ckpt_megatron__expert_layer(m, e) < 0 || (in_module = module_of(e, arg, &module)) == 0)
            continue;
        if (in_module < 0) {
            rc = in_module;
            break;
        }
        keys[n].layer = ckpt_megatron__expert_layer(m, e);
        keys[n].index = i;
        if (!(keys[n].module = strdup((const char *)module.data))) {
            rc = ckpt_error_oom();
            break;
        }
        n++;
    }
    if (rc == 0)
        qsort(keys, n, sizeof *keys, ckpt_megatron__by_module);
    for (i = 0; i < n && rc == 0; i++)
        first[keys[i].index] = i > 0 && keys[i].layer == keys[i - 1].layer &&
                                       strcmp(keys[i].module, keys[i - 1].module) == 0
                                   ? first[keys[i - 1].index]
                                   : keys[i].index;
    for (i = 0; i < n; i++)
        free(keys[i].module);
    free(keys);
    ckpt_buf_dispose(&module);
    return rc;
}

/* An expert entry's module: its name without the expert index (SequentialMLP's
 * local_experts.<i>, TEGroupedLinear's trailing <i>), or the whole name. */
static int module_without_index(const mg_entry *e, void *arg, ckpt_buf *out)
{
    size_t at[2] = { 0, 0 };
    int grouped;

    (void)arg;
    if (!e->layout.expert)
        return 0;
    if (!find_index(e->name, at, &grouped)) {
        at[0] = strlen(e->name);
        at[1] = 0;
    }
    return ckpt_buf_append(out, e->name, at[0]) < 0 || ckpt_buf_puts(out, e->name + at[0] + at[1]) < 0 ? CKPT_ENOMEM
                                                                                                      : 1;
}

int ckpt_megatron__order_experts(ckpt_megatron *m)
{
    order_key *keys = calloc(m->n_entries + 1, sizeof *keys);
    size_t *first = calloc(m->n_entries + 1, sizeof *first);
    int64_t layers = m->info.num_layers + CKPT_MEGATRON_MAX_MTP;
    size_t *anchor = calloc((size_t)layers + 1, sizeof *anchor);
    mg_entry *sorted = calloc(m->n_entries + 1, sizeof *sorted);
    size_t i;
    int rc = keys && first && anchor && sorted ? ckpt_megatron__first_of_module(m, module_without_index, NULL, first)
                                                : ckpt_error_oom();

    /* a layer's experts gather where its first one is: EP rank 0's come before any other's */
    for (i = m->n_entries; i-- > 0 && rc == 0;) {
        const mg_entry *e = &m->entries[i];
        int64_t l = ckpt_megatron__expert_layer(m, e);
        if (e->layout.expert && l >= 0 && l < layers)
            anchor[l] = i;
    }
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        const mg_entry *e = &m->entries[i];
        size_t at[2];
        int grouped = 0;
        int64_t l = ckpt_megatron__expert_layer(m, e);
        keys[i].index = i;
        keys[i].anchor = i;
        if (!e->layout.expert || l < 0 || l >= layers)
            continue;
        if (find_index(e->name, at, &grouped) == 0)
            grouped = 1;
        keys[i].anchor = anchor[l];
        keys[i].a = grouped ? (int64_t)first[i] : e->expert;
        keys[i].b = grouped ? e->expert : (int64_t)first[i];
    }
    if (rc == 0) {
        qsort(keys, m->n_entries, sizeof *keys, by_order);
        for (i = 0; i < m->n_entries; i++)
            sorted[i] = m->entries[keys[i].index];
        memcpy(m->entries, sorted, m->n_entries * sizeof *sorted);
    }
    free(keys);
    free(first);
    free(anchor);
    free(sorted);
    return rc;
}
