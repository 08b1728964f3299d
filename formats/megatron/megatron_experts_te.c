/* Transformer Engine's grouped GEMM experts, TEGroupedMLP (megatron-core 0.16.1
 * transformer/moe/experts.py; --moe-grouped-gemm with --transformer-impl transformer_engine),
 * read as the SequentialMLP experts it computes and written from them.
 *
 * What a legacy (torch) save holds, per MoE layer and EP rank, and where that is said:
 * - TEGroupedMLP.__init__ builds linear_fc1 (TEColumnParallelGroupedLinear) then linear_fc2
 *   (TERowParallelGroupedLinear), each a TEGroupedLinear (extensions/transformer_engine.py) of
 *   num_gemms = num_experts / EP GEMMs: its state dict is the module's, in registration order.
 * - Transformer Engine's GroupedLinear.__init__ (pytorch/module/grouped_linear.py) registers,
 *   for i in range(num_gemms), the parameter weight<i> [out, in] and, with bias, bias<i>
 *   right after it (weight0, bias0, weight1, bias1, ...); without bias, bias<i> is a plain
 *   attribute and no state-dict entry. TransformerEngineBaseModule.get_extra_state then gives
 *   the module ONE _extra_state, which torch's Module._save_to_state_dict puts after the
 *   parameters and persistent buffers (GroupedLinear registers none, and neither it nor
 *   Megatron's TEGroupedLinear changes how its state dict is saved):
 *     mlp.experts.linear_fc1.weight0 .. weight<n-1>, mlp.experts.linear_fc1._extra_state,
 *     mlp.experts.linear_fc2.weight0 .. weight<n-1>, mlp.experts.linear_fc2._extra_state
 *   (read from the sources of the three projects; no Transformer Engine save was seen).
 *   A TE activation module (--use-te-activation-func) between them is not read: no layout
 *   rule takes it, and the set is refused naming it.
 * - weight<i> is local expert i's weight as SequentialMLP's expert i holds it, cut over the
 *   expert TP ranks as those cut it (TEGroupedLinear divides output_size for "column" and
 *   input_size for "row" by the expert TP size; fc1 bias<i> is cut, fc2's is whole):
 *   TEGroupedMLP.sharded_state_dict gives weight<i> the key and global offset of
 *   SequentialMLP's expert, so that the two layouts are one torch_dist checkpoint.
 * - _extra_state: TEGroupedLinear._split_extra_state gives each GEMM the module's state when
 *   it holds no FP8 state (an empty uint8 tensor since TE 2.0, None for the local spec), and
 *   merge_extra_states keeps the first GEMM's when it loads them back: each expert gets a copy
 *   here, and a module is written with its first local expert's. FP8 state is one set of
 *   scaling factors for all the GEMMs of the module, not split or merged here: refused unless
 *   --extra-state empty or drop. */
#include "megatron_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPERTS ".mlp.experts."
#define LOCAL "local_experts."
#define EXTRA "_extra_state"

/* The digits at s: their count (0: none). */
static size_t digits(const char *s)
{
    return strspn(s, "0123456789");
}

/* A TEGroupedMLP key "<prefix>.mlp.experts.linear_fc<k>.<param>": *k, the offset of <param>
 * in key, and what it is: 1 weight<i> or bias<i> (*index i), 2 _extra_state; 0 none. */
static int te_parse(const char *key, int *k, size_t *param, int64_t *index)
{
    const char *p = strstr(key, EXPERTS "linear_fc"), *q;
    size_t n;

    if (!p)
        return 0;
    p += strlen(EXPERTS "linear_fc");
    if ((*p != '1' && *p != '2') || p[1] != '.')
        return 0;
    *k = *p - '0';
    q = p + 2;
    *param = (size_t)(q - key);
    if (strcmp(q, EXTRA) == 0)
        return 2;
    n = strncmp(q, "weight", 6) == 0 ? 6 : strncmp(q, "bias", 4) == 0 ? 4 : 0;
    if (n == 0 || digits(q + n) == 0 || digits(q + n) > 9 || q[n + digits(q + n)] != '\0')
        return 0;
    *index = strtoll(q + n, NULL, 10);
    return 1;
}

int ckpt_megatron__te_key(const char *key)
{
    size_t param;
    int64_t index;
    int k;

    return te_parse(key, &k, &param, &index);
}

int ckpt_megatron__te_read_name(const char *key, int64_t local, ckpt_buf *out)
{
    size_t param, at;
    int64_t index = local;
    int k, kind = te_parse(key, &k, &param, &index);
    const char *q = key + param;

    if (!kind)
        return ckpt_buf_puts(out, key);
    at = (size_t)(strstr(key, EXPERTS "linear_fc") - key) + strlen(EXPERTS);
    return ckpt_buf_printf(out, "%.*s" LOCAL "%lld.linear_fc%d.%.*s", (int)at, key, (long long)index, k,
                           kind == 2 ? (int)strlen(q) : (int)strcspn(q, "0123456789"), q);
}

static const ckpt_tensor *leaf(const mg_rank *r, const ckpt_value *v)
{
    return v && v->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(r->ck, v->u.tensor.index) : NULL;
}

static int same_shape(const ckpt_tensor *a, const ckpt_tensor *b)
{
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
}

static void shape_str(const ckpt_tensor *t, char *s, size_t cap)
{
    size_t n = 0;
    int d;

    n += (size_t)snprintf(s, cap, "[");
    for (d = 0; d < t->ndim && n < cap; d++)
        n += (size_t)snprintf(s + n, cap - n, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (n < cap)
        snprintf(s + n, cap - n, "]");
}

/* The tensor `key` with its GEMM index made i, in file r's dict d (NULL: none); its name
 * into *name. */
static const ckpt_tensor *gemm(const ckpt_value *d, const mg_rank *r, const char *key, size_t param, int64_t i,
                               ckpt_buf *name, int *rc)
{
    ckpt_buf_clear(name);
    *rc = ckpt_buf_printf(name, "%.*s%lld", (int)(param + strcspn(key + param, "0123456789")), key, (long long)i);
    return *rc < 0 ? NULL : leaf(r, ckpt_value_dict_get(d, (const char *)name->data));
}

/* A TEGroupedLinear key in file r's dict d: args give experts; a weight<i> or bias<i>'s
 * module holds all of weight0 .. weight<n-1> (n = num_experts / EP), each at the shape of
 * weight0 (bias<i> of bias0), checked from the one of GEMM 0, which the others need. */
int ckpt_megatron__te_check(const ckpt_megatron *m, const ckpt_value *d, const mg_rank *r, const char *key)
{
    int64_t per = ckpt_megatron__experts_at(m, m->info.ep), index = 0, i;
    size_t param;
    int k, rc = 0;
    ckpt_buf other = CKPT_BUF_INIT;
    const ckpt_tensor *t, *u;
    char a[96], b[96];

    if (!te_parse(key, &k, &param, &index))
        return 0;
    if (per < 1)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s' is TEGroupedMLP's, but args give no num_experts", ckpt_path(r->ck), key);
    if (strcmp(key + param, EXTRA) == 0)
        return 0;
    t = leaf(r, ckpt_value_dict_get(d, key));
    for (i = index == 0 ? 1 : 0; i < (index == 0 ? per : 1) && rc == 0; i++) {
        u = gemm(d, r, key, param, i, &other, &rc);
        if (rc < 0)
            break;
        if (!u)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                 "%s: no tensor '%s': TEGroupedMLP's linear_fc%d holds one per local expert, "
                                 "%lld here (num_experts / expert_model_parallel_size)",
                                 ckpt_path(r->ck), (const char *)other.data, k, (long long)per);
        else if (t && index == 0 && !same_shape(t, u)) {
            shape_str(u, a, sizeof a);
            shape_str(t, b, sizeof b);
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                 "%s: '%s' is %s, '%s' %s: TEGroupedMLP's local experts are of one shape",
                                 ckpt_path(r->ck), (const char *)other.data, a, key, b);
        }
    }
    ckpt_buf_dispose(&other);
    return rc;
}

int ckpt_megatron__te_out(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    const ckpt_value *impl = ckpt_megatron_arg(m->args, "transformer_impl");
    return ckpt_megatron__grouped_out(m, t) && impl && ckpt_value_is_str(impl, "transformer_engine");
}

/* The offset of the expert index in an expert entry's SequentialMLP name and its length;
 * 0 when it is not one. */
static int seq_index(const char *name, size_t at[2])
{
    const char *p = strstr(name, EXPERTS LOCAL);

    if (!p)
        return 0;
    at[0] = (size_t)(p - name) + strlen(EXPERTS LOCAL);
    at[1] = digits(name + at[0]);
    return at[1] > 0 && name[at[0] + at[1]] == '.';
}

/* Expert entry e is one TEGroupedMLP holds: linear_fc1/2's weight, bias or _extra_state. */
static int te_fits(const mg_entry *e)
{
    size_t at[2];
    const char *rest;

    if (!seq_index(e->name, at))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: not a SequentialMLP expert's tensor, which TEGroupedMLP would hold", e->name);
    rest = e->name + at[0] + at[1] + 1;
    if (strcmp(rest, "linear_fc1.weight") && strcmp(rest, "linear_fc2.weight") && strcmp(rest, "linear_fc1.bias") &&
        strcmp(rest, "linear_fc2.bias") && strcmp(rest, "linear_fc1." EXTRA) && strcmp(rest, "linear_fc2." EXTRA))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: TEGroupedMLP holds the experts' linear_fc1/linear_fc2 weight, bias and "
                               "_extra_state only",
                               e->name);
    return 0;
}

/* Whether _extra_state entry e holds FP8 state: a non-empty tensor, or a value but None. */
static int fp8_state(const mg_entry *e)
{
    if (e->full) {
        const int64_t *s = ckpt_node_shape(e->full);
        int d, n = ckpt_node_ndim(e->full);
        int64_t numel = 1;
        for (d = 0; d < n; d++)
            numel *= s[d];
        return numel > 0;
    }
    return e->value && e->value->kind != CKPT_VAL_NONE;
}

/* An expert entry's SequentialMLP name without its expert index (*linear: cut after
 * "linear_fc<k>", the parameter left out). */
static int seq_module(const mg_entry *e, void *linear, ckpt_buf *out)
{
    size_t at[2], len;
    const char *rest;

    if (e->expert < 0 || !seq_index(e->name, at))
        return 0;
    rest = e->name + at[0] + at[1];
    len = *(const int *)linear ? strcspn(rest + 1, ".") + 1 : strlen(rest);
    return ckpt_buf_append(out, e->name, at[0]) < 0 || ckpt_buf_append(out, rest, len) < 0 ? CKPT_ENOMEM : 1;
}

/* For each expert entry, the index of the first entry of its layer with the same name but
 * for the expert index (linear: and the parameter, "linear_fc<k>"). */
static int first_of(const ckpt_megatron *m, int linear, size_t *first)
{
    return ckpt_megatron__first_of_module(m, seq_module, &linear, first);
}

typedef struct order_key {
    size_t anchor, linear;
    int extra;
    int64_t expert;
    size_t param, index;
} order_key;

static int by_order(const void *x, const void *y)
{
    const order_key *p = x, *q = y;

    if (p->anchor != q->anchor)
        return p->anchor < q->anchor ? -1 : 1;
    if (p->linear != q->linear)
        return p->linear < q->linear ? -1 : 1;
    if (p->extra != q->extra)
        return p->extra - q->extra;
    if (p->expert != q->expert)
        return p->expert < q->expert ? -1 : 1;
    if (p->param != q->param)
        return p->param < q->param ? -1 : 1;
    return p->index < q->index ? -1 : p->index > q->index;
}

/* Each layer's experts where its first one is, in TEGroupedMLP's state-dict order: per
 * linear, weight<i> (bias<i>) expert by expert, then its _extra_state. */
static int te_order(ckpt_megatron *m)
{
    int64_t layers = m->info.num_layers + CKPT_MEGATRON_MAX_MTP, l;
    order_key *keys = calloc(m->n_entries + 1, sizeof *keys);
    size_t *lin = calloc(m->n_entries + 1, sizeof *lin), *par = calloc(m->n_entries + 1, sizeof *par);
    size_t *anchor = calloc((size_t)layers + 1, sizeof *anchor), i;
    mg_entry *sorted = calloc(m->n_entries + 1, sizeof *sorted);
    int rc = keys && lin && par && anchor && sorted ? first_of(m, 1, lin) : ckpt_error_oom();

    if (rc == 0)
        rc = first_of(m, 0, par);
    for (i = m->n_entries; i-- > 0 && rc == 0;)
        if (m->entries[i].expert >= 0 && (l = ckpt_megatron__expert_layer(m, &m->entries[i])) >= 0 && l < layers)
            anchor[l] = i;
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        const mg_entry *e = &m->entries[i];
        keys[i].index = keys[i].anchor = i;
        if (e->expert < 0 || (l = ckpt_megatron__expert_layer(m, e)) < 0 || l >= layers)
            continue;
        keys[i].anchor = anchor[l];
        keys[i].linear = lin[i];
        keys[i].extra = ckpt_megatron__is_extra_state(e->name);
        keys[i].expert = e->expert;
        keys[i].param = par[i];
    }
    if (rc == 0) {
        qsort(keys, m->n_entries, sizeof *keys, by_order);
        for (i = 0; i < m->n_entries; i++)
            sorted[i] = m->entries[keys[i].index];
        memcpy(m->entries, sorted, m->n_entries * sizeof *sorted);
    }
    free(keys);
    free(lin);
    free(par);
    free(anchor);
    free(sorted);
    return rc;
}

/* The file entry e was read from: its expert TP rank 0's of its stage and EP rank. */
static const char *source_of(const ckpt_megatron *m, const mg_entry *e)
{
    int ep = e->ep > 0 ? e->ep : 0;

    if (m->dist || !m->set)
        return m->dist ? m->dist : "the model";
    return ckpt_path(mg_rank_at(m, mg_expert_tp(m, 0, ep), e->src_pp, ep)->ck);
}

int ckpt_megatron__te_prepare(ckpt_megatron *m, const ckpt_megatron_target *t)
{
    size_t i;
    int rc, out = ckpt_megatron__te_out(m, t);

    for (i = 0; i < m->n_entries && (m->te_grouped || out) && t->extra_state == CKPT_MEGATRON_EXTRA_COPY; i++) {
        const mg_entry *e = &m->entries[i];
        if (e->expert < 0 || !ckpt_megatron__is_extra_state(e->name) || !fp8_state(e))
            continue;
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s' (%s): Transformer Engine FP8 state, which a TEGroupedMLP linear holds for "
                               "all its experts together, is not split or merged per expert; --extra-state empty (no "
                               "FP8 state) or drop writes the model",
                               source_of(m, e), e->local, e->name);
    }
    /* a plan of this model before put its entries into TEGroupedMLP's order (a model made
     * without a set is sorted by each plan) */
    if (!out) {
        rc = m->te_out && m->set ? ckpt_megatron__order_experts(m) : 0;
        m->te_out = 0;
        return rc;
    }
    for (i = 0; i < m->n_entries; i++)
        if (m->entries[i].expert >= 0 && (rc = te_fits(&m->entries[i])) < 0)
            return rc;
    m->te_out = 0;
    if ((rc = te_order(m)) == 0)
        m->te_out = 1;
    return rc;
}

int ckpt_megatron__te_local_name(const char *name, int64_t local, ckpt_buf *out)
{
    size_t at[2];
    const char *rest;

    if (!seq_index(name, at))
        return ckpt_buf_puts(out, name);
    rest = name + at[0] + at[1] + 1;
    if (ckpt_megatron__is_extra_state(rest))
        return ckpt_buf_printf(out, "%.*s%s", (int)(at[0] - strlen(LOCAL)), name, rest);
    return ckpt_buf_printf(out, "%.*s%s%lld", (int)(at[0] - strlen(LOCAL)), name, rest, (long long)local);
}
