/* The optimizer files of a PaddleNLP directory, merged with the parameters they belong to.
 *
 * An entry's key is "<var>_<suffix>" ("linear_3.w_0_moment1_0", with AMP O2
 * "linear_3.w_0_fp32_master_0_moment1_0"), <var> the parameter's variable name in the rank's
 * name table: the longest such name followed by '_' wins, so that linear_1.w_0 never claims
 * linear_10.w_0's entries. master_weights is keyed by the parameter's variable name. Every
 * accumulator is merged like its parameter, but [1]-shaped ones (beta powers), which every
 * rank holds whole. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct var_ref {
    const char *var;
    size_t entry;
} var_ref;

static int compare_refs(const void *a, const void *b)
{
    return strcmp(((const var_ref *)a)->var, ((const var_ref *)b)->var);
}

/* The variables of stage pp's parameters as rank r names them, sorted. */
static int rank_vars(const ckpt_paddle_model *m, const pd_rank *r, int pp, var_ref **out, size_t *n)
{
    size_t i;

    *n = 0;
    if (!(*out = malloc((m->n_entries ? m->n_entries : 1) * sizeof **out)))
        return ckpt_error_oom();
    for (i = 0; i < m->n_entries; i++) {
        const char *var = m->entries[i].tensor && m->entries[i].pp == pp ? ckpt_paddle__var_of(r, m->entries[i].name) : NULL;
        if (var) {
            (*out)[*n].var = var;
            (*out)[(*n)++].entry = i;
        }
    }
    qsort(*out, *n, sizeof **out, compare_refs);
    return 0;
}

/* The entry named key[0..len), by exact match. */
static const var_ref *find_var(const var_ref *refs, size_t n, const char *key, size_t len)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strncmp(refs[mid].var, key, len);
        if (c == 0 && refs[mid].var[len])
            c = 1;
        if (c == 0)
            return &refs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int kind_of(ckpt_paddle_model *m, const ckpt_ckpt *ck, const char *suffix, size_t *k)
{
    for (*k = 0; *k < m->n_kinds; (*k)++)
        if (strcmp(m->kinds[*k], suffix) == 0)
            return 0;
    if (m->n_kinds == PD_MAX_KINDS)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: more than %d kinds of optimizer entries per parameter ('%s')", ckpt_path(ck),
                               PD_MAX_KINDS, suffix);
    if (!(m->kinds[m->n_kinds] = strdup(suffix)))
        return ckpt_error_oom();
    *k = m->n_kinds++;
    return 0;
}

static int put_state(ckpt_paddle_model *m, const ckpt_ckpt *ck, size_t entry, size_t slot, int tp,
                     const ckpt_value *leaf, const char *what)
{
    pd_entry *e = &m->entries[entry];
    pd_state *s;

    if (!e->states && !(e->states = calloc(PD_MAX_KINDS + 1, sizeof *e->states)))
        return ckpt_error_oom();
    s = &e->states[slot];
    if (!s->shards && !(s->shards = calloc((size_t)m->info.tp, sizeof *s->shards)))
        return ckpt_error_oom();
    if (s->shards[tp])
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: a second %s of '%s' for TP rank %d",
                               ckpt_path(ck), what, e->name, tp);
    return ckpt_paddle__tensor_node(m, ck, leaf, &s->shards[tp]);
}

static int read_master_weights(ckpt_paddle_model *m, const ckpt_ckpt *ck, const ckpt_value *d, const var_ref *refs,
                               size_t n_refs, int tp)
{
    size_t i;
    int rc = 0;

    if (d->kind != CKPT_VAL_DICT)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: master_weights is not a dict", ckpt_path(ck));
    for (i = 0; i < d->u.dict.map.n && rc == 0; i++) {
        const ckpt_value *k = d->u.dict.map.keys[i];
        const char *pair = NULL;
        const ckpt_value *leaf = ckpt_paddle__tensor_leaf(d->u.dict.map.vals[i], &pair);
        const var_ref *ref = k->kind == CKPT_VAL_STR ? find_var(refs, n_refs, k->u.str.ptr, k->u.str.len) : NULL;
        if (!ref || !leaf)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: master_weights entry %s is %s", ckpt_path(ck),
                                   k->kind == CKPT_VAL_STR ? k->u.str.ptr : "(not a string)",
                                   leaf ? "no parameter of the model files' name table" : "not a tensor");
        m->info.master_weights = 1;
        if (pair && ref->var && !m->entries[ref->entry].master_name)
            m->entries[ref->entry].master_name = pair;
        rc = put_state(m, ck, ref->entry, PD_MAX_KINDS, tp, leaf, "master weight");
    }
    return rc;
}

/* key = "<var>_<suffix>" with the longest variable name of refs. */
static const var_ref *split_key(const var_ref *refs, size_t n, const char *key, const char **suffix)
{
    size_t len = strlen(key);

    while (len > 0) {
        const var_ref *hit;
        len--;
        if (key[len] != '_')
            continue;
        if ((hit = find_var(refs, n, key, len))) {
            *suffix = key + len + 1;
            return hit;
        }
    }
    return NULL;
}

static int read_optimizer_file(ckpt_paddle_model *m, const pd_file *f, const var_ref *refs, size_t n_refs, int tp)
{
    const ckpt_value *d = f->root;
    size_t i, kind;
    int rc = 0;

    if (ckpt_value_dict_get(d, CKPT_PADDLE_NAME_TABLE))
        m->opt_name_table = 1;
    for (i = 0; i < d->u.dict.map.n && rc == 0; i++) {
        const ckpt_value *k = d->u.dict.map.keys[i], *v = d->u.dict.map.vals[i];
        const char *key = k->kind == CKPT_VAL_STR ? k->u.str.ptr : "", *suffix = NULL, *pair = NULL;
        const ckpt_value *leaf = ckpt_paddle__tensor_leaf(v, &pair);
        const var_ref *ref;
        if (strcmp(key, CKPT_PADDLE_MASTER_WEIGHTS) == 0) {
            rc = read_master_weights(m, f->ck, v, refs, n_refs, tp);
            continue;
        }
        if (!leaf)
            continue;
        if (pair)
            m->opt_pairs = 1;
        if (!(ref = split_key(refs, n_refs, key, &suffix)))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: optimizer entry '%s' belongs to no parameter of this rank's model files (by "
                                   "their name table%s); give --no-optimizer to reshard the model only",
                                   ckpt_path(f->ck), key, n_refs ? "" : ", which they do not have");
        if ((rc = kind_of(m, f->ck, suffix, &kind)) == 0)
            rc = put_state(m, f->ck, ref->entry, kind, tp, leaf, suffix);
    }
    return rc;
}

static const char *shape_text(const ckpt_node *x, char *buf, size_t cap)
{
    return ckpt_shape_format(ckpt_node_shape(x), ckpt_node_ndim(x), buf, cap);
}

static int merge_state(ckpt_paddle_model *m, pd_entry *e, size_t slot)
{
    pd_state *s = &e->states[slot];
    const char *what = slot == PD_MAX_KINDS ? "master weight" : m->kinds[slot];
    char name[512];
    int tp, rc;

    for (tp = 0; tp < m->info.tp; tp++)
        if (!s->shards[tp])
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: the optimizer file of TP rank %d, stage %d has no %s for '%s'; rank 0's has",
                                   ckpt_paddle__where(m), tp, e->pp, what, e->name);
    snprintf(name, sizeof name, "%s (%s)", e->name, what);
    if (ckpt_node_numel(s->shards[0]) == 1 && ckpt_node_numel(e->shards[0]) != 1 && slot != PD_MAX_KINDS) {
        s->replicated = 1;
        s->full = s->shards[0];
        return 0;
    }
    if (ckpt_node_ndim(s->shards[0]) != ckpt_node_ndim(e->shards[0]) ||
        memcmp(ckpt_node_shape(s->shards[0]), ckpt_node_shape(e->shards[0]),
               (size_t)ckpt_node_ndim(e->shards[0]) * sizeof(int64_t)) != 0) {
        char got[96], want[96];
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: the optimizer's %s of '%s' is %s, its parameter %s (in TP rank 0 of stage %d): "
                               "the optimizer state of another model? give --no-optimizer to reshard the model only",
                               ckpt_paddle__where(m), what, e->name, shape_text(s->shards[0], got, sizeof got),
                               shape_text(e->shards[0], want, sizeof want), e->pp);
    }
    if ((rc = ckpt_parallel_merge(m->g, &e->layout, name, s->shards, (size_t)m->info.tp, &s->full)) < 0)
        ckpt_error_prefix("%s", ckpt_paddle__where(m));
    return rc;
}

int ckpt_paddle__read_optimizer(ckpt_paddle_model *m)
{
    var_ref *refs = NULL;
    size_t n_refs = 0, f;
    int tp, pp, rc = 0;

    if (!(m->kinds = calloc(PD_MAX_KINDS, sizeof *m->kinds)))
        return ckpt_error_oom();
    for (pp = 0; pp < m->info.pp && rc == 0; pp++)
        for (tp = 0; tp < m->info.tp && rc == 0; tp++) {
            const pd_rank *r = ckpt_paddle__rank(m, tp, pp);
            if ((rc = rank_vars(m, r, pp, &refs, &n_refs)) < 0)
                break;
            for (f = 0; f < r->n_optims && rc == 0; f++)
                rc = read_optimizer_file(m, &r->optims[f], refs, n_refs, tp);
            free(refs);
            refs = NULL;
        }
    return rc;
}

int ckpt_paddle__merge_optimizer(ckpt_paddle_model *m)
{
    size_t i, slot;
    int rc = 0;

    for (i = 0; i < m->n_entries && rc == 0; i++)
        for (slot = 0; slot <= PD_MAX_KINDS && rc == 0 && m->entries[i].states; slot++)
            if (m->entries[i].states[slot].shards)
                rc = merge_state(m, &m->entries[i], slot);
    return rc;
}

