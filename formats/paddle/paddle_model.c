/* The logical model of a PaddleNLP checkpoint directory: the model files of every TP rank
 * and PP stage (and of every sharding rank of a sharded save) merged, tensor by tensor, into
 * full tensors, lazily; the optimizer files are merged with them in paddle_optim.c. Stage
 * files hold global layer indices, so the stages are simply concatenated. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <cjson/cJSON.h>

#include <limits.h>
#include <stddef.h>
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
    int64_t heads = 0, kv = 0, vocab = 0, tied = 0;
    int rc;

    if ((rc = ckpt_map_params_new(out)) < 0 || (rc = config_params(m, *out)) < 0)
        return rc;
    /* LlamaConfig's default, which save_pretrained leaves out */
    if (!ckpt_map_params_get(*out, "tie_word_embeddings", &tied) &&
        (rc = ckpt_map_params_set(*out, "tie_word_embeddings", 0)) < 0)
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
        (rc = ckpt_map_params_set(*out, "vocab_split", tp <= 1 || vocab % tp == 0)) < 0 ||
        (rc = ckpt_map_params_set(*out, "tied_vocab_split", tied && (tp <= 1 || vocab % tp == 0))) < 0)
        return rc;
    return 0;
}

/* ---- the rank files ---- */

static int push_file(pd_file **v, size_t *n, const ckpt_ckpt *ck)
{
    pd_file *grown = realloc(*v, (*n + 1) * sizeof **v);
    const ckpt_value *table;

    if (!grown)
        return ckpt_error_oom();
    *v = grown;
    grown[*n].ck = ck;
    grown[*n].root = ckpt_root(ck);
    table = ckpt_value_dict_get(ckpt_root(ck), CKPT_PADDLE_NAME_TABLE);
    grown[(*n)++].names = table && table->kind == CKPT_VAL_DICT ? table : NULL;
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
    /* the file names give the extent: every rank it spans needs a file of its own */
    if ((size_t)si->tp * (size_t)si->pp > n)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                               "%s: the file names span %d TP ranks x %d PP stages, but the directory holds %zu files",
                               si->root, si->tp, si->pp, n);
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
        if (strcmp(mb->rel, "model_meta.json") == 0) {
            rc = ckpt_paddle__read_model_meta(m, mb);
            continue;
        }
        if (!model && !(optim && with_optimizer))
            continue;
        if (mb->at.ep >= 0)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                   "%s/%s: expert-parallel (moeNN) files are not supported yet", si->root, mb->rel);
        r = ckpt_paddle__rank(m, mb->at.tp < 0 ? 0 : mb->at.tp, mb->at.pp < 0 ? 0 : mb->at.pp);
        if ((rc = ckpt_set_member_open(m->set, i, &ck)) < 0)
            break;
        rc = model ? push_file(&r->models, &r->n_models, ck) : push_file(&r->optims, &r->n_optims, ck);
        m->info.name_table |= model && rc == 0 && r->models[r->n_models - 1].names;
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
    *out = &m->entries[m->n_entries];
    memset(*out, 0, sizeof **out);
    (*out)->seq = m->n_entries++;
    return 0;
}

const char *ckpt_paddle__var_of(const pd_rank *r, const char *name)
{
    const cJSON *j;
    size_t i;

    for (i = 0; i < r->n_models; i++) {
        const ckpt_value *v = r->models[i].names ? ckpt_value_dict_get(r->models[i].names, name) : NULL;
        if (v && v->kind == CKPT_VAL_STR)
            return v->u.str.ptr;
    }
    j = r->structure ? cJSON_GetObjectItemCaseSensitive(r->structure, name) : NULL;
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

int ckpt_paddle__tensor_node(ckpt_paddle_model *m, const ckpt_ckpt *ck, const ckpt_value *leaf, const ckpt_node **out)
{
    const ckpt_tensor *t = ckpt_tensor_at(ck, leaf->u.tensor.index);

    if (!t)
        return ckpt_error_set(CKPT_EFORMAT, "%s: tensor #%zu out of range", ckpt_path(ck), leaf->u.tensor.index);
    return ckpt_node_tensor(m->g, t, out);
}

long ckpt_paddle__find_entry(const ckpt_paddle_model *m, const char *name)
{
    size_t i;

    for (i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0)
            return (long)i;
    return -1;
}

int ckpt_paddle__new_entry(ckpt_paddle_model *m, const char *name, int pp, pd_entry **out)
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
    long seen = ckpt_paddle__find_entry(m, name);
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
        if ((rc = ckpt_paddle__new_entry(m, name, pp, &e)) < 0)
            return rc;
        e->tensor = 1;
        if (!(e->shards = calloc((size_t)m->info.tp, sizeof *e->shards)))
            return ckpt_error_oom();
    }
    if (e->shards[tp])
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "'%s' twice in TP rank %d, stage %d", name, tp, pp);
    e->shards[tp] = node;
    if (var && !e->var && !(e->var = strdup(var)))
        return ckpt_error_oom();
    return 0;
}

int ckpt_paddle_model_add_tensor(ckpt_paddle_model *m, const char *name, const ckpt_node *full)
{
    if (m->info.tp != 1 || m->info.pp != 1)
        return ckpt_error_set(CKPT_EINVALID, "%s: a full tensor given to a model of TP %d x PP %d", name, m->info.tp,
                              m->info.pp);
    return ckpt_paddle_model_add_shard(m, 0, 0, name, full, NULL);
}

/* Where an entry goes in PaddleNLP's state-dict order: first-stage tensors, then the layers
 * in order, each in the order of the spec's list, then last-stage tensors, then values that
 * are not tensors; otherwise as they came. */
static int stage_rank(const pd_entry *e)
{
    if (!e->tensor)
        return 3;
    return e->layout.stage == CKPT_STAGE_FIRST ? 0 : e->layout.stage == CKPT_STAGE_LAST ? 2 : 1;
}

static int compare_entries(const void *a, const void *b)
{
    const pd_entry *x = a, *y = b;
    int64_t lx = x->tensor ? x->layout.layer : 0, ly = y->tensor ? y->layout.layer : 0;
    int px = x->tensor && x->layout.place >= 0 ? x->layout.place : INT_MAX;
    int py = y->tensor && y->layout.place >= 0 ? y->layout.place : INT_MAX;

    if (stage_rank(x) != stage_rank(y))
        return stage_rank(x) < stage_rank(y) ? -1 : 1;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    if (px != py)
        return px < py ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every tensor merged from its shards, in the source layout. */
static void free_entry(pd_entry *e)
{
    size_t s;

    for (s = 0; e->states && s <= PD_MAX_KINDS; s++)
        free(e->states[s].shards);
    free(e->states);
    free(e->shards);
    free(e->var);
    free(e->name);
}

static int has_state(const pd_entry *e)
{
    size_t s;

    for (s = 0; e->states && s <= PD_MAX_KINDS; s++)
        if (e->states[s].shards)
            return 1;
    return 0;
}

/* The tensors the caller's hook leaves out leave the model before anything is checked. */
static int leave_out_entries(ckpt_paddle_model *m)
{
    size_t i, kept = 0;
    int rc = 0;

    for (i = 0; i < m->n_entries; i++) {
        pd_entry *e = &m->entries[i];
        int left = rc == 0 && e->tensor ? m->leave_out(m->leave_out_payload, e->name) : 0;
        if (left < 0)
            rc = left;
        if (left > 0) {
            m->left_out_with_state += has_state(e);
            free_entry(e);
        } else {
            m->entries[kept++] = *e;
        }
    }
    m->n_entries = kept;
    return rc;
}

/* Every tensor's layout, from the spec: with a hook to leave tensors out, one the spec does
 * not know is refused with the way to leave it out. */
static int classify(ckpt_paddle_model *m, const ckpt_map_params *params, pd_entry *e)
{
    char why[512];
    int rc = ckpt_parallel_classify(m->spec, params, e->name, ckpt_node_ndim(e->shards[0]), &e->layout);

    if (rc == 0 || !m->leave_out)
        return rc;
    snprintf(why, sizeof why, "%s", ckpt_error_last()->message);
    return ckpt_error_setc(rc, CKPT_ERRCLASS_LAYOUT, "%s; leave it out on purpose with --drop PATTERN", why);
}

static int merge_entries(ckpt_paddle_model *m)
{
    ckpt_map_params *params = NULL;
    size_t i;
    int tp, rc;

    if ((m->leave_out && (rc = leave_out_entries(m)) < 0) ||
        (rc = ckpt_paddle__layout_params(m, m->info.tp, &params)) < 0)
        goto done;
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        pd_entry *e = &m->entries[i];
        if (!e->tensor)
            continue;
        for (tp = 0; tp < m->info.tp && rc == 0; tp++)
            if (!e->shards[tp])
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                     "%s: TP rank %d of stage %d holds no tensor '%s' (TP rank %d does)",
                                     ckpt_paddle__where(m), tp, e->pp, e->name, tp ? 0 : 1);
        if (rc == 0 &&
            ((rc = classify(m, params, e)) < 0 ||
             (rc = ckpt_parallel_merge(m->g, &e->layout, e->name, e->shards, (size_t)m->info.tp, &e->full)) < 0) &&
            m->set)
            ckpt_error_prefix("%s", ckpt_set_info_of(m->set)->root);
        if (rc == 0 && e->layout.layer + 1 > m->info.num_layers)
            m->info.num_layers = e->layout.layer + 1;
    }
    if (rc == 0 && m->reorder)
        qsort(m->entries, m->n_entries, sizeof *m->entries, compare_entries);
    /* a model given tensor by tensor has a name table when its tensors were given names */
    for (i = 0; !m->set && i < m->n_entries; i++)
        m->info.name_table |= m->entries[i].var != NULL;
done:
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
                        if ((rc = ckpt_paddle__tensor_node(m, ck, leaf, &node)) == 0 &&
                            (rc = ckpt_paddle_model_add_shard(m, tp, pp, k->u.str.ptr, node,
                                                              ckpt_paddle__var_of(r, k->u.str.ptr))) < 0)
                            ckpt_error_prefix("%s", ckpt_path(ck));
                    } else if (tp == 0 && !m->reorder && (rc = ckpt_paddle__new_entry(m, k->u.str.ptr, pp, &e)) == 0) {
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

/* ---- the handle ---- */

static int load_spec(ckpt_paddle_model *m, const ckpt_map *spec_map)
{
    int rc;

    m->family = ckpt_paddle__family_of(m->config_text);
    if (!spec_map && (rc = ckpt_map_builtin(&m->own_map, m->family->spec)) < 0)
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
        if (user->version != 1 && user->version != CKPT_PADDLE_MODEL_OPTIONS_VERSION)
            return ckpt_error_set(CKPT_EINVALID, "ckpt_paddle_model_options version %u, expected 1 to %u",
                                  user->version, CKPT_PADDLE_MODEL_OPTIONS_VERSION);
        /* a version 1 caller's struct ends before leave_out */
        memcpy(&opts, user, user->version == 1 ? offsetof(ckpt_paddle_model_options, leave_out) : sizeof opts);
    }
    if (strcmp(ckpt_set_info_of(set)->layout, "paddle") != 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "%s: a %s checkpoint, not a PaddleNLP directory",
                               ckpt_set_info_of(set)->root, ckpt_set_info_of(set)->layout);
    if (!(m = calloc(1, sizeof *m)))
        return ckpt_error_oom();
    m->set = set;
    m->g = g;
    m->leave_out = opts.leave_out;
    m->leave_out_payload = opts.leave_out_payload;
    /* the spec is the family's config.json names */
    if ((rc = open_ranks(m, !opts.no_optimizer)) < 0 || (rc = load_spec(m, opts.spec_map)) < 0 ||
        (rc = ckpt_paddle__check_files(m)) < 0 ||
        (rc = ckpt_paddle__declare_from_meta(m)) < 0 || (rc = read_model_files(m)) < 0 ||
        (m->info.has_optimizer && (rc = ckpt_paddle__read_optimizer(m)) < 0) ||
        (rc = ckpt_paddle__recover_from_masters(m)) < 0 || (rc = merge_entries(m)) < 0 ||
        (rc = ckpt_paddle__check_tensors(m)) < 0 ||
        (m->info.has_optimizer && (rc = ckpt_paddle__merge_optimizer(m)) < 0))
        goto fail;
    *out = m;
    return 0;
fail:
    ckpt_paddle_model_close(m);
    return rc;
}

void ckpt_paddle_model_close(ckpt_paddle_model *m)
{
    size_t i;

    if (!m)
        return;
    for (i = 0; i < m->n_entries; i++)
        free_entry(&m->entries[i]);
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
    cJSON_Delete(m->meta);
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
