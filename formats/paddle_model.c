/* The logical model of a PaddleNLP checkpoint directory: the model files of every TP rank
 * and PP stage merged, tensor by tensor, into full tensors, and the optimizer files merged
 * with them, lazily.
 *
 * Stage files hold global layer indices, so stages are simply concatenated. An optimizer
 * entry is found its parameter through the variable names of the rank's name table: its key
 * is "<var>_<suffix>", and the longest variable name that prefixes it wins (linear_1.w_0
 * must not claim linear_1.w_0_fp32_master_0's entries by accident: the suffix keeps that
 * part). */
#include "paddle_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ckpt_paddle__where(const ckpt_paddle_model *m)
{
    return m->set ? ckpt_set_info_of(m->set)->root : m->info.config ? m->info.config : "the model";
}

pd_rank *ckpt_paddle__rank(const ckpt_paddle_model *m, int tp, int pp)
{
    return &m->ranks[(size_t)pp * (size_t)m->info.tp + (size_t)tp];
}

const ckpt_value *ckpt_paddle__tensor_leaf(const ckpt_value *v, const char **pair_name)
{
    if (pair_name)
        *pair_name = NULL;
    if (v && v->kind == CKPT_VAL_TENSOR)
        return v;
    /* paddle.save of a state that nests tensors writes each as (tensor.name, ndarray) */
    if (v && v->kind == CKPT_VAL_TUPLE && v->u.seq.n == 2 && v->u.seq.items[0]->kind == CKPT_VAL_STR &&
        v->u.seq.items[1]->kind == CKPT_VAL_TENSOR) {
        if (pair_name)
            *pair_name = v->u.seq.items[0]->u.str.ptr;
        return v->u.seq.items[1];
    }
    return NULL;
}

/* config.json's integers and booleans as map parameters. */
static int config_params(const ckpt_paddle_model *m, ckpt_map_params *p)
{
    cJSON *json, *e;
    int rc = 0;

    if (!m->config_text)
        return 0;
    if (!(json = cJSON_ParseWithLength(m->config_text, m->config_len)) || !cJSON_IsObject(json)) {
        cJSON_Delete(json);
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: not a JSON object",
                               m->info.config ? m->info.config : "config.json");
    }
    cJSON_ArrayForEach(e, json) {
        if (rc == 0 && cJSON_IsBool(e))
            rc = ckpt_map_params_set(p, e->string, cJSON_IsTrue(e));
        else if (rc == 0 && cJSON_IsNumber(e) && e->valuedouble == (double)(int64_t)e->valuedouble)
            rc = ckpt_map_params_set(p, e->string, (int64_t)e->valuedouble);
    }
    cJSON_Delete(json);
    return rc;
}

int ckpt_paddle__layout_params(const ckpt_paddle_model *m, int tp, ckpt_map_params **out)
{
    int64_t heads = 0, kv = 0, vocab = 0;
    int rc;

    if ((rc = ckpt_map_params_new(out)) < 0 || (rc = config_params(m, *out)) < 0)
        return rc;
    ckpt_map_params_get(*out, "num_attention_heads", &heads);
    if (!ckpt_map_params_get(*out, "num_key_value_heads", &kv) || kv <= 0)
        kv = heads;
    ckpt_map_params_get(*out, "vocab_size", &vocab);
    if (tp > 1 && (kv <= 0 || vocab <= 0))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                               "%s: a layout of %d TP ranks depends on num_attention_heads, num_key_value_heads and "
                               "vocab_size (PaddleNLP keeps k/v and the vocabulary whole on every rank when TP does "
                               "not divide them), and %s",
                               ckpt_paddle__where(m), tp,
                               m->config_text ? "config.json lacks them" : "there is no config.json");
    if ((rc = ckpt_map_params_set(*out, "kv_split", tp <= 1 || kv % tp == 0)) < 0 ||
        (rc = ckpt_map_params_set(*out, "vocab_split", tp <= 1 || vocab % tp == 0)) < 0)
        return rc;
    return 0;
}

/* ---- the rank files ---- */

static int push_file(pd_file **v, size_t *n, const ckpt_ckpt *ck)
{
    pd_file *grown = realloc(*v, (*n + 1) * sizeof **v);

    if (!grown)
        return ckpt_error_oom();
    *v = grown;
    grown[*n].ck = ck;
    grown[(*n)++].root = ckpt_root(ck);
    if (!ckpt_root(ck) || ckpt_root(ck)->kind != CKPT_VAL_DICT)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: the top level is not a dict", ckpt_path(ck));
    return 0;
}

static int read_config(ckpt_paddle_model *m, const ckpt_member *mb)
{
    ckpt_file *f = NULL;
    int rc;

    if ((rc = ckpt_file_open(&f, mb->path)) < 0)
        return rc;
    m->config_text = malloc(f->size + 1);
    if (m->config_text) {
        if (f->size)
            memcpy(m->config_text, f->data, f->size);
        m->config_text[f->size] = '\0';
        m->config_len = f->size;
    }
    ckpt_file_close(f);
    m->info.config = mb->path;
    m->info.config_json = m->config_text;
    return m->config_text ? 0 : ckpt_error_oom();
}

static int open_ranks(ckpt_paddle_model *m, int with_optimizer)
{
    const ckpt_set_info *si = ckpt_set_info_of(m->set);
    size_t i, n = ckpt_set_member_count(m->set), with_opt = 0;
    int tp, pp, rc = 0;

    m->info.tp = si->tp;
    m->info.pp = si->pp;
    if (!(m->ranks = calloc((size_t)si->tp * (size_t)si->pp, sizeof *m->ranks)))
        return ckpt_error_oom();
    for (i = 0; i < n && rc == 0; i++) {
        const ckpt_member *mb = ckpt_set_member_at(m->set, i);
        int model = strcmp(mb->role, "model") == 0, optim = strcmp(mb->role, "optimizer") == 0;
        const ckpt_ckpt *ck;
        pd_rank *r;
        if (strcmp(mb->rel, "config.json") == 0) {
            rc = read_config(m, mb);
            continue;
        }
        if (!model && !(optim && with_optimizer))
            continue;
        if (model && mb->at.dp >= 0)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                   "%s/%s: a sharded model file (save_sharded_model) holds only the parameters "
                                   "its sharding rank owns; merge it with PaddleNLP first",
                                   si->root, mb->rel);
        r = ckpt_paddle__rank(m, mb->at.tp < 0 ? 0 : mb->at.tp, mb->at.pp < 0 ? 0 : mb->at.pp);
        if ((rc = ckpt_set_member_open(m->set, i, &ck)) < 0)
            break;
        rc = model ? push_file(&r->models, &r->n_models, ck) : push_file(&r->optims, &r->n_optims, ck);
        if (model && rc == 0 && !r->names) {
            const ckpt_value *t = ckpt_value_dict_get(ckpt_root(ck), CKPT_PADDLE_NAME_TABLE);
            r->names = t && t->kind == CKPT_VAL_DICT ? t : NULL;
        }
    }
    for (pp = 0; pp < si->pp && rc == 0; pp++)
        for (tp = 0; tp < si->tp && rc == 0; tp++) {
            pd_rank *r = ckpt_paddle__rank(m, tp, pp);
            if (!r->n_models)
                rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                     "%s: no model file for TP rank %d, PP stage %d (of %d x %d)", si->root, tp, pp,
                                     si->tp, si->pp);
            with_opt += r->n_optims > 0;
        }
    if (rc == 0 && with_opt && with_opt != (size_t)si->tp * (size_t)si->pp)
        rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                             "%s: optimizer files for %zu of the %d ranks; give --no-optimizer to reshard the model "
                             "only",
                             si->root, with_opt, si->tp * si->pp);
    m->info.has_optimizer = with_opt > 0;
    m->reorder = rc == 0 && strcmp(ckpt_format_name(ckpt_paddle__rank(m, 0, 0)->models[0].ck), "pdparams") != 0;
    m->info.name_table = ckpt_paddle__rank(m, 0, 0)->names != NULL;
    return rc;
}

/* ---- the model's tensors ---- */

static int push_entry(ckpt_paddle_model *m, pd_entry **out)
{
    if (m->n_entries == m->cap_entries) {
        size_t cap = m->cap_entries ? 2 * m->cap_entries : 64;
        pd_entry *e = realloc(m->entries, cap * sizeof *e);
        if (!e)
            return ckpt_error_oom();
        m->entries = e;
        m->cap_entries = cap;
    }
    *out = &m->entries[m->n_entries++];
    memset(*out, 0, sizeof **out);
    return 0;
}

static const char *var_of(const pd_rank *r, const char *name)
{
    const ckpt_value *v = r->names ? ckpt_value_dict_get(r->names, name) : NULL;
    return v && v->kind == CKPT_VAL_STR ? v->u.str.ptr : NULL;
}

static int tensor_node(ckpt_paddle_model *m, const ckpt_ckpt *ck, const ckpt_value *leaf, const ckpt_node **out)
{
    const ckpt_tensor *t = ckpt_tensor_at(ck, leaf->u.tensor.index);

    if (!t)
        return ckpt_error_set(CKPT_EFORMAT, "%s: tensor #%zu out of range", ckpt_path(ck), leaf->u.tensor.index);
    return ckpt_node_tensor(m->g, t, out);
}

static long find_entry(const ckpt_paddle_model *m, const char *name)
{
    size_t i;

    for (i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0)
            return (long)i;
    return -1;
}

static int new_entry(ckpt_paddle_model *m, const char *name, int pp, pd_entry **out)
{
    int rc = push_entry(m, out);

    if (rc < 0 || !*out)
        return rc < 0 ? rc : ckpt_error_oom();
    (*out)->pp = pp;
    return ((*out)->name = strdup(name)) ? 0 : ckpt_error_oom();
}

int ckpt_paddle_model_add_shard(ckpt_paddle_model *m, int tp, int pp, const char *name, const ckpt_node *node,
                                const char *var)
{
    long seen = find_entry(m, name);
    pd_entry *e = NULL;
    int rc;

    if (tp < 0 || tp >= m->info.tp || pp < 0 || pp >= m->info.pp || !node)
        return ckpt_error_set(CKPT_EINVALID, "%s: TP rank %d, stage %d outside TP %d x PP %d (or no tensor)", name, tp,
                              pp, m->info.tp, m->info.pp);
    if (seen >= 0 && (m->entries[seen].pp != pp || !m->entries[seen].tensor))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "'%s' is held by pipeline stages %d and %d (a weight shared across stages, such as "
                               "tied embeddings, is not supported)",
                               name, m->entries[seen].pp, pp);
    if (seen >= 0) {
        e = &m->entries[seen];
    } else {
        if ((rc = new_entry(m, name, pp, &e)) < 0)
            return rc;
        e->tensor = 1;
        if (!(e->shards = calloc((size_t)m->info.tp, sizeof *e->shards)))
            return ckpt_error_oom();
    }
    if (e->shards[tp])
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "'%s' twice in TP rank %d, stage %d", name, tp, pp);
    e->shards[tp] = node;
    if (var && !e->var)
        e->var = var;
    return 0;
}

int ckpt_paddle_model_add_tensor(ckpt_paddle_model *m, const char *name, const ckpt_node *full)
{
    if (m->info.tp != 1 || m->info.pp != 1)
        return ckpt_error_set(CKPT_EINVALID, "%s: a full tensor given to a model of TP %d x PP %d", name, m->info.tp,
                              m->info.pp);
    return ckpt_paddle_model_add_shard(m, 0, 0, name, full, NULL);
}

typedef struct order_key {
    int stage;        /* first stage, layers, last stage, values that are not tensors */
    int64_t layer;
    int place;
    size_t index;
} order_key;

static order_key key_of(const pd_entry *e, size_t index)
{
    order_key k;

    k.stage = !e->tensor ? 3 : e->layout.stage == CKPT_STAGE_FIRST ? 0 : e->layout.stage == CKPT_STAGE_LAST ? 2 : 1;
    k.layer = e->tensor ? e->layout.layer : 0;
    k.place = e->tensor && e->layout.place >= 0 ? e->layout.place : 1 << 30;
    k.index = index;
    return k;
}

static int compare_keys(const void *a, const void *b)
{
    const order_key *x = a, *y = b;

    if (x->stage != y->stage)
        return x->stage < y->stage ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->place != y->place)
        return x->place < y->place ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The entries in the order of the spec's list, layer by layer: PaddleNLP's state-dict order. */
static int reorder(ckpt_paddle_model *m)
{
    order_key *keys = malloc((m->n_entries + 1) * sizeof *keys);
    pd_entry *sorted = malloc((m->n_entries + 1) * sizeof *sorted);
    size_t i;

    if (!keys || !sorted) {
        free(keys);
        free(sorted);
        return ckpt_error_oom();
    }
    for (i = 0; i < m->n_entries; i++)
        keys[i] = key_of(&m->entries[i], i);
    qsort(keys, m->n_entries, sizeof *keys, compare_keys);
    for (i = 0; i < m->n_entries; i++)
        sorted[i] = m->entries[keys[i].index];
    memcpy(m->entries, sorted, m->n_entries * sizeof *sorted);
    free(keys);
    free(sorted);
    return 0;
}

/* Every tensor merged from its shards, in the source layout. */
static int merge_entries(ckpt_paddle_model *m)
{
    ckpt_map_params *params = NULL;
    size_t i;
    int tp, rc;

    if ((rc = ckpt_paddle__layout_params(m, m->info.tp, &params)) < 0)
        goto done;
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        pd_entry *e = &m->entries[i];
        if (!e->tensor)
            continue;
        for (tp = 0; tp < m->info.tp && rc == 0; tp++)
            if (!e->shards[tp])
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                     "TP rank %d of stage %d holds no tensor '%s' (TP rank %d does)", tp, e->pp,
                                     e->name, tp ? 0 : 1);
        if (rc == 0)
            rc = ckpt_parallel_classify(m->spec, params, e->name, ckpt_node_ndim(e->shards[0]), &e->layout);
        if (rc == 0)
            rc = ckpt_parallel_merge(m->g, &e->layout, e->name, e->shards, (size_t)m->info.tp, &e->full);
        if (rc == 0 && e->layout.layer + 1 > m->info.num_layers)
            m->info.num_layers = e->layout.layer + 1;
    }
    if (rc == 0 && m->reorder)
        rc = reorder(m);
done:
    if (rc < 0 && m->set)
        ckpt_error_prefix("%s", ckpt_set_info_of(m->set)->root);
    ckpt_map_params_free(params);
    return rc;
}

int ckpt_paddle_model_finish(ckpt_paddle_model *m)
{
    return merge_entries(m);
}

/* The model files, stage by stage, TP rank 0 first: the order of their keys is the model's. */
static int read_model_files(ckpt_paddle_model *m)
{
    int tp, pp, rc = 0;
    size_t f, i;

    for (pp = 0; pp < m->info.pp && rc == 0; pp++)
        for (tp = 0; tp < m->info.tp && rc == 0; tp++) {
            const pd_rank *r = ckpt_paddle__rank(m, tp, pp);
            for (f = 0; f < r->n_models && rc == 0; f++) {
                const ckpt_value *d = r->models[f].root;
                const ckpt_ckpt *ck = r->models[f].ck;
                for (i = 0; i < d->u.dict.map.n && rc == 0; i++) {
                    const ckpt_value *k = d->u.dict.map.keys[i], *v = d->u.dict.map.vals[i];
                    const ckpt_value *leaf = ckpt_paddle__tensor_leaf(v, NULL);
                    const ckpt_node *node;
                    pd_entry *e = NULL;
                    if (k->kind != CKPT_VAL_STR) {
                        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: a key is not a string",
                                             ckpt_path(ck));
                    } else if (strcmp(k->u.str.ptr, CKPT_PADDLE_NAME_TABLE) == 0) {
                        continue;
                    } else if (leaf) {
                        if ((rc = tensor_node(m, ck, leaf, &node)) == 0 &&
                            (rc = ckpt_paddle_model_add_shard(m, tp, pp, k->u.str.ptr, node,
                                                              var_of(r, k->u.str.ptr))) < 0)
                            ckpt_error_prefix("%s", ckpt_path(ck));
                    } else if (tp == 0 && !m->reorder && (rc = new_entry(m, k->u.str.ptr, pp, &e)) == 0) {
                        /* a value beside the tensors, carried from .pdparams only (a safetensors
                           header's __metadata__ is that format's own) */
                        e->value = v;
                        e->src = ck;
                    }
                }
            }
        }
    return rc;
}

/* ---- the optimizer files ---- */

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
        const char *var = m->entries[i].tensor && m->entries[i].pp == pp ? var_of(r, m->entries[i].name) : NULL;
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

static int kind_of(ckpt_paddle_model *m, const char *suffix, size_t *k)
{
    for (*k = 0; *k < m->n_kinds; (*k)++)
        if (strcmp(m->kinds[*k], suffix) == 0)
            return 0;
    if (m->n_kinds == PD_MAX_KINDS)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "more than %d kinds of optimizer entries per parameter ('%s')", PD_MAX_KINDS, suffix);
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
    return tensor_node(m, ck, leaf, &s->shards[tp]);
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
        if ((rc = kind_of(m, suffix, &kind)) == 0)
            rc = put_state(m, f->ck, ref->entry, kind, tp, leaf, suffix);
    }
    return rc;
}

static const char *shape_text(const ckpt_node *x, char *buf, size_t cap)
{
    size_t len = 0;
    int d;

    len += (size_t)snprintf(buf, cap, "[");
    for (d = 0; d < ckpt_node_ndim(x) && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "", (long long)ckpt_node_shape(x)[d]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

static int merge_state(ckpt_paddle_model *m, pd_entry *e, size_t slot)
{
    pd_state *s = &e->states[slot];
    const char *what = slot == PD_MAX_KINDS ? "master weight" : m->kinds[slot];
    char name[512];
    int tp;

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
    return ckpt_parallel_merge(m->g, &e->layout, name, s->shards, (size_t)m->info.tp, &s->full);
}

static int read_optimizer(ckpt_paddle_model *m)
{
    var_ref *refs = NULL;
    size_t n_refs = 0, i, f, slot;
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
    for (i = 0; i < m->n_entries && rc == 0; i++)
        for (slot = 0; slot <= PD_MAX_KINDS && rc == 0 && m->entries[i].states; slot++)
            if (m->entries[i].states[slot].shards)
                rc = merge_state(m, &m->entries[i], slot);
    return rc;
}

/* ---- the handle ---- */

static int load_spec(ckpt_paddle_model *m, const ckpt_map *spec_map)
{
    int rc;

    if (!spec_map && (rc = ckpt_map_builtin(&m->own_map, "paddlenlp_llama")) < 0)
        return rc;
    m->spec = ckpt_map_parallel(spec_map ? spec_map : m->own_map);
    if (!m->spec)
        return ckpt_error_set(CKPT_EINVALID, "map %s has no parallel section",
                              ckpt_map_name(spec_map ? spec_map : m->own_map));
    return 0;
}

int ckpt_paddle_model_new(ckpt_paddle_model **out, ckpt_graph *g, int tp, int pp, const char *config_json,
                          const ckpt_map *spec_map)
{
    ckpt_paddle_model *m;
    int rc;

    *out = NULL;
    if (tp < 1 || pp < 1)
        return ckpt_error_set(CKPT_EINVALID, "TP %d, PP %d: sizes must be at least 1", tp, pp);
    if (!(m = calloc(1, sizeof *m)))
        return ckpt_error_oom();
    m->g = g;
    m->info.tp = tp;
    m->info.pp = pp;
    if (config_json && !(m->config_text = strdup(config_json)))
        rc = ckpt_error_oom();
    else
        rc = load_spec(m, spec_map);
    if (rc < 0) {
        ckpt_paddle_model_close(m);
        return rc;
    }
    m->config_len = config_json ? strlen(config_json) : 0;
    m->info.config_json = m->config_text;
    m->reorder = 1;
    *out = m;
    return 0;
}

int ckpt_paddle_model_open(ckpt_paddle_model **out, ckpt_set *set, ckpt_graph *g,
                           const ckpt_paddle_model_options *user)
{
    ckpt_paddle_model_options opts = CKPT_PADDLE_MODEL_OPTIONS_INIT;
    ckpt_paddle_model *m;
    int rc;

    *out = NULL;
    if (user) {
        if (user->version != CKPT_PADDLE_MODEL_OPTIONS_VERSION)
            return ckpt_error_set(CKPT_EINVALID, "ckpt_paddle_model_options version %u, expected %u", user->version,
                                  CKPT_PADDLE_MODEL_OPTIONS_VERSION);
        opts = *user;
    }
    if (strcmp(ckpt_set_info_of(set)->layout, "paddle") != 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "%s: a %s checkpoint, not a PaddleNLP directory",
                               ckpt_set_info_of(set)->root, ckpt_set_info_of(set)->layout);
    if (!(m = calloc(1, sizeof *m)))
        return ckpt_error_oom();
    m->set = set;
    m->g = g;
    if ((rc = load_spec(m, opts.spec_map)) < 0)
        goto fail;
    if ((rc = open_ranks(m, !opts.no_optimizer)) < 0 || (rc = read_model_files(m)) < 0 ||
        (rc = merge_entries(m)) < 0 ||
        (m->info.has_optimizer && (rc = read_optimizer(m)) < 0))
        goto fail;
    *out = m;
    return 0;
fail:
    ckpt_paddle_model_close(m);
    return rc;
}

void ckpt_paddle_model_close(ckpt_paddle_model *m)
{
    size_t i, s;

    if (!m)
        return;
    for (i = 0; i < m->n_entries; i++) {
        pd_entry *e = &m->entries[i];
        for (s = 0; e->states && s <= PD_MAX_KINDS; s++)
            free(e->states[s].shards);
        free(e->states);
        free(e->shards);
        free(e->name);
    }
    for (i = 0; i < m->n_kinds; i++)
        free(m->kinds[i]);
    free(m->kinds);
    for (i = 0; m->ranks && i < (size_t)m->info.tp * (size_t)m->info.pp; i++) {
        free(m->ranks[i].models);
        free(m->ranks[i].optims);
    }
    free(m->ranks);
    free(m->entries);
    free(m->config_text);
    ckpt_map_free(m->own_map);
    free(m);
}

const ckpt_paddle_model_info *ckpt_paddle_model_info_of(const ckpt_paddle_model *m)
{
    return &m->info;
}

size_t ckpt_paddle_model_tensor_count(const ckpt_paddle_model *m)
{
    size_t i, n = 0;

    for (i = 0; i < m->n_entries; i++)
        n += m->entries[i].tensor;
    return n;
}

const char *ckpt_paddle_model_tensor_at(const ckpt_paddle_model *m, size_t i, const ckpt_node **full,
                                        ckpt_tensor_layout *layout)
{
    size_t j;

    for (j = 0; j < m->n_entries; j++) {
        if (!m->entries[j].tensor || i--)
            continue;
        if (full)
            *full = m->entries[j].full;
        if (layout)
            *layout = m->entries[j].layout;
        return m->entries[j].name;
    }
    return NULL;
}
