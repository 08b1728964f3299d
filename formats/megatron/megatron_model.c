/* The logical model of a Megatron-LM legacy checkpoint: the rank files of a checkpoint set
 * merged, tensor by tensor, into full tensors under global names, lazily.
 *
 * Layers are numbered from 0 on every pipeline stage and virtual chunk; their global index is
 * the number of layers of the chunks before, in Megatron's order (for each virtual chunk, for
 * each stage). Counting rather than computing offsets from args also covers uneven splits
 * (--num-layers-in-first-pipeline-stage and the like). */
#include "optimizer/megatron_distopt.h"
#include "megatron_private.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXTRA_STATE_SUFFIX "._extra_state"

const ckpt_value *ckpt_megatron__chunk_dict(const ckpt_value *root, int vpp, int vp)
{
    char key[32];

    if (vpp <= 1)
        return ckpt_value_dict_get(root, "model");
    snprintf(key, sizeof key, "model%d", vp);
    return ckpt_value_dict_get(root, key);
}

/* args' integers and booleans as map parameters (the spec's "when": "swiglu"). */
int ckpt_megatron__load_params(ckpt_megatron *m)
{
    const ckpt_value *d = ckpt_megatron__namespace_dict(m->args), *impl;
    size_t i;
    int rc;

    if ((rc = ckpt_map_params_new(&m->params)) < 0)
        return rc;
    for (i = 0; d && i < d->u.dict.map.n; i++) {
        const ckpt_value *k = d->u.dict.map.keys[i], *v = d->u.dict.map.vals[i];
        if (k->kind != CKPT_VAL_STR)
            continue;
        if (v->kind == CKPT_VAL_INT)
            rc = ckpt_map_params_set(m->params, k->u.str.ptr, v->u.integer);
        else if (v->kind == CKPT_VAL_BOOL)
            rc = ckpt_map_params_set(m->params, k->u.str.ptr, v->u.boolean);
        if (rc < 0)
            return rc;
    }
    /* The local spec cuts multi-latent attention's down projections across TP ranks,
     * Transformer Engine's duplicates them (the spec's "local_spec" entries); Megatron's
     * default implementation is Transformer Engine. */
    impl = ckpt_megatron_arg(m->args, "transformer_impl");
    if ((rc = ckpt_map_params_set(m->params, "local_spec", ckpt_value_is_str(impl, "local"))) < 0)
        return rc;
    /* A gated linear unit without swiglu (Megatron-Bridge's Gemma 3, GeGLU) has SwiGLU's
     * [gate; up] fc1, which the spec's "swiglu" entries cut. */
    if (ckpt_megatron__arg_int(m->args, "gated_linear_unit", 0))
        return ckpt_map_params_set(m->params, "swiglu", 1);
    return 0;
}

static int open_ranks(ckpt_megatron *m)
{
    const ckpt_set_info *si = ckpt_set_info_of(m->set);
    int tp, pp, ep, rc;

    m->info.tp = si->tp;
    m->info.pp = si->pp;
    m->info.ep = si->ep;
    m->info.iteration = si->iteration;
    m->release = si->release;
    m->ranks = calloc((size_t)si->tp * (size_t)si->pp * (size_t)si->ep, sizeof *m->ranks);
    if (!m->ranks)
        return ckpt_error_oom();
    for (ep = 0; ep < si->ep; ep++)
        for (pp = 0; pp < si->pp; pp++)
            for (tp = 0; tp < si->tp; tp++) {
                ckpt_coords at = CKPT_COORDS_NONE;
                mg_rank *r = mg_rank_at(m, tp, pp, ep);
                long i;
                at.tp = tp;
                at.pp = pp;
                at.ep = ep;
                i = ckpt_set_find(m->set, &at, "model");
                /* an expert TP below the TP: its file's part of the set is in others
                   (stand_ins, after the args) */
                if (i < 0 && (tp > 0 || ep > 0)) {
                    r->stand_in = 1;
                    continue;
                }
                if (i < 0)
                    return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                           "%s: no rank file for TP %d, PP %d, EP %d", si->root, tp, pp, ep);
                if ((rc = ckpt_set_member_open(m->set, (size_t)i, &r->ck)) < 0)
                    return rc;
                r->root = ckpt_root(r->ck);
                if (!r->root || r->root->kind != CKPT_VAL_DICT)
                    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                           "%s: not a Megatron checkpoint (the top level is not a dict)",
                                           ckpt_path(r->ck));
                if (ckpt_set_find(m->set, &at, "distrib_optim") >= 0)
                    m->info.distributed_optimizer = 1;
            }
    return 0;
}

static int read_info(ckpt_megatron *m, const ckpt_megatron_options *o)
{
    const mg_rank *r0 = mg_rank_at(m, 0, 0, 0);
    const ckpt_value *v;
    int vp, rc;

    m->args = ckpt_value_dict_get(r0->root, "args");
    if (!ckpt_megatron__namespace_dict(m->args))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no args Namespace", ckpt_path(r0->ck));
    v = ckpt_value_dict_get(r0->root, "checkpoint_version");
    m->info.checkpoint_version = v && v->kind == CKPT_VAL_FLOAT ? v->u.real
                                 : v && v->kind == CKPT_VAL_INT ? (double)v->u.integer : 0;
    v = ckpt_value_dict_get(r0->root, "iteration");
    if (v && v->kind == CKPT_VAL_INT)
        m->info.iteration = v->u.integer;
    if (ckpt_value_dict_get(r0->root, "model")) {
        m->info.vpp = 1;
    } else {
        for (vp = 0; ckpt_megatron__chunk_dict(r0->root, 2, vp); vp++)
            ;
        if (vp == 0)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no 'model' (or 'model0') entry",
                                   ckpt_path(r0->ck));
        m->info.vpp = vp;
    }
    m->info.run_tp = m->info.tp;
    m->info.run_pp = m->info.pp;
    m->info.run_vpp = m->info.vpp;
    m->info.num_layers = ckpt_megatron__arg_int(m->args, "num_layers", 0);
    m->info.padded_vocab_size = ckpt_megatron__arg_int(m->args, "padded_vocab_size", 0);
    m->info.make_vocab_size_divisible_by = ckpt_megatron__arg_int(m->args, "make_vocab_size_divisible_by", 128);
    m->info.true_vocab_size = o->true_vocab_size ? o->true_vocab_size
                                                 : ckpt_megatron__true_vocab(m->args);
    v = ckpt_value_dict_get(r0->root, "optimizer");
    m->info.has_optimizer = v && v->kind != CKPT_VAL_NONE;
    if ((rc = ckpt_megatron__stand_ins(m)) < 0)
        return rc;
    if (m->info.ep > 1 && (ckpt_megatron__num_experts(m->args) <= 0 ||
                           ckpt_megatron__num_experts(m->args) % m->info.ep != 0))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: %d EP ranks of files, but args.num_experts %lld is not a multiple of them",
                               ckpt_path(r0->ck), m->info.ep, (long long)ckpt_megatron__num_experts(m->args));
    if (m->info.checkpoint_version > 0 && m->info.checkpoint_version < 2.0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: checkpoint_version %g predates Megatron's current QKV order (2.0); load and save "
                               "it once with Megatron first",
                               ckpt_path(r0->ck), m->info.checkpoint_version);
    return 0;
}

int ckpt_megatron__push_entry(ckpt_megatron *m, mg_entry **out)
{
    if (m->n_entries == m->cap_entries) {
        size_t cap = m->cap_entries ? 2 * m->cap_entries : 64;
        mg_entry *e = realloc(m->entries, cap * sizeof *e);
        if (!e)
            return ckpt_error_oom();
        m->entries = e;
        m->cap_entries = cap;
    }
    *out = &m->entries[m->n_entries++];
    memset(*out, 0, sizeof **out);
    (*out)->expert = -1;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int ckpt_megatron__is_extra_state(const char *key)
{
    return ends_with(key, EXTRA_STATE_SUFFIX);
}

static const ckpt_tensor *leaf_tensor(const mg_rank *r, const ckpt_value *v)
{
    return v && v->kind == CKPT_VAL_TENSOR ? ckpt_tensor_at(r->ck, v->u.tensor.index) : NULL;
}

/* A chunk's model dicts per TP rank: the dense tensors' (rank files of (tp, pp, ep), or their
 * stand-ins) and the experts' (the files mg_expert_tp names), with their rank files. */
typedef struct mg_chunk {
    const ckpt_value **dicts, **xdicts;
    const mg_rank **ranks, **xranks;
} mg_chunk;

/* One key of one chunk, read under the name `as`: merged over the TP ranks of (pp, ep), an
 * expert's over its expert TP ranks. */
static int add_key_as(ckpt_megatron *m, const mg_chunk *c, int pp, int vp, int ep, const char *key, const char *as,
                      int64_t offset)
{
    const ckpt_value *v0 = ckpt_value_dict_get(ep > 0 ? c->xdicts[0] : c->dicts[0], key);
    const mg_rank *r0 = ep > 0 ? c->xranks[0] : c->ranks[0];
    const ckpt_tensor *t0 = leaf_tensor(r0, v0);
    const ckpt_value *const *dicts;
    const mg_rank *const *ranks;
    const ckpt_node **shards;
    ckpt_buf name = CKPT_BUF_INIT;
    mg_entry *e = NULL;
    ckpt_tensor_layout layout;
    int64_t expert = -1;
    int tp, rc;

    if (ckpt_megatron__grouped_key(key) && m->etp != m->info.tp)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s': GroupedMLP weights at expert TP %d under TP %d are not read yet",
                               ckpt_path(r0->ck), key, m->etp, m->info.tp);
    if (ckpt_megatron__grouped_key(key))
        return ckpt_megatron__grouped_add(m, c->dicts, pp, vp, ep, key, offset);
    if ((rc = ckpt_parallel_classify(m->spec, m->params, as, t0 ? t0->ndim : 0, &layout)) < 0) {
        /* a tensor no layout entry takes is an error, unless the caller leaves it out */
        int left = t0 && m->leave_out ? m->leave_out(m->leave_out_payload, key) : 0;
        if (left > 0) {
            ckpt_error_clear();
            m->left_out_params += !ckpt_megatron__is_extra_state(key);
            return 0;
        }
        if (left == 0 && m->leave_out) {
            char why[512];
            snprintf(why, sizeof why, "%s", ckpt_error_last()->message);
            return ckpt_error_setc(rc, CKPT_ERRCLASS_LAYOUT, "%s: %s; leave it out on purpose with --drop PATTERN",
                                   ckpt_path(r0->ck), why);
        }
        if (left == 0)
            ckpt_error_prefix("%s", ckpt_path(r0->ck));
        return left < 0 ? left : rc;
    }
    /* the last stage's copy of the embedding, which GPTModel keeps for the multi-token
     * prediction layers (mtp_process) in step with the first stage's */
    if (layout.stage == CKPT_STAGE_FIRST && (pp > 0 || vp > 0) && strcmp(key, "embedding.word_embeddings.weight") == 0 &&
        ckpt_megatron__arg_int(m->args, "mtp_num_layers", 0) > 0)
        return 0;
    dicts = layout.expert ? c->xdicts : c->dicts;
    ranks = layout.expert ? c->xranks : c->ranks;
    if (layout.layer >= 0) {
        layout.layer += offset;
        rc = ckpt_parallel_rename_layer(m->spec, as, layout.layer, &name);
    } else {
        rc = ckpt_buf_puts(&name, as);
    }
    if (rc == 0 && layout.expert && ckpt_megatron__expert_index(as, &expert))
        rc = ckpt_megatron__global_expert(m, pp, ep, key, &expert, &name);
    if (rc == 0 && t0 && m->leave_out && (rc = m->leave_out(m->leave_out_payload, (const char *)name.data)) > 0) {
        m->left_out_params += !ckpt_megatron__is_extra_state(key);
        ckpt_buf_dispose(&name);
        return 0;
    }
    if (rc < 0 || (rc = ckpt_megatron__push_entry(m, &e)) < 0) {
        ckpt_buf_dispose(&name);
        return rc;
    }
    e->src_pp = pp;
    e->src_vp = vp;
    e->layout = layout;
    e->ep = e->layout.expert && m->info.ep > 1 ? ep : -1;
    e->expert = expert;
    e->name = strdup((const char *)name.data);
    e->local = strdup(key);
    ckpt_buf_dispose(&name);
    if (!e->name || !e->local)
        return rc < 0 ? rc : ckpt_error_oom();
    if (!t0) {
        e->value = v0;
        e->src = r0->ck;
        return 0;
    }
    e->param = !ckpt_megatron__is_extra_state(key);
    /* one per TP rank: an expert's at expert TP < TP is its expert TP rank's part, repeated */
    shards = calloc((size_t)m->info.tp, sizeof *shards);
    if (!shards)
        return ckpt_error_oom();
    for (tp = 0, rc = 0; tp < m->info.tp && rc == 0; tp++) {
        const ckpt_tensor *t = leaf_tensor(ranks[tp], ckpt_value_dict_get(dicts[tp], key));
        if (!t)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: '%s' is missing or not a tensor here",
                                 ckpt_path(ranks[tp]->ck), key);
        else
            rc = ckpt_node_tensor(m->g, t, &shards[tp]);
    }
    if (rc == 0)
        rc = ckpt_parallel_merge(m->g, &e->layout, e->name, shards, (size_t)mg_read_ways(m, layout.expert), &e->full);
    if (rc < 0)
        ckpt_error_prefix("%s", ckpt_path(r0->ck));
    e->shards = shards;
    return rc;
}

/* One key of one chunk; TEGroupedMLP's as SequentialMLP's experts, its linears' _extra_state
 * given to each of their experts (megatron_experts_te.c). */
static int add_key(ckpt_megatron *m, const mg_chunk *c, int pp, int vp, int ep, const char *key, int64_t offset)
{
    int kind = ckpt_megatron__te_key(key), rc;
    int64_t i;
    ckpt_buf as = CKPT_BUF_INIT;

    if (!kind)
        return add_key_as(m, c, pp, vp, ep, key, key, offset);
    m->te_grouped = 1;
    rc = ckpt_megatron__te_check(m, c->xdicts[0], c->xranks[0], key);
    for (i = 0; i < (kind == 2 ? ckpt_megatron__experts_at(m, m->info.ep) : 1) && rc == 0; i++) {
        ckpt_buf_clear(&as);
        if ((rc = ckpt_megatron__te_read_name(key, i, &as)) == 0)
            rc = add_key_as(m, c, pp, vp, ep, key, (const char *)as.data, offset);
    }
    ckpt_buf_dispose(&as);
    return rc;
}

/* Layers in a chunk: one more than the largest local index. */
static int chunk_layers(const ckpt_megatron *m, const ckpt_value *dict, int64_t *n)
{
    size_t i;

    *n = 0;
    for (i = 0; i < dict->u.dict.map.n; i++) {
        const ckpt_value *k = dict->u.dict.map.keys[i];
        ckpt_tensor_layout l;
        if (k->kind != CKPT_VAL_STR)
            continue;
        if (ckpt_parallel_classify(m->spec, m->params, k->u.str.ptr, 2, &l) < 0) {
            ckpt_error_clear();
            continue;
        }
        if (l.layer + 1 > *n)
            *n = l.layer + 1;
    }
    return 0;
}

/* A string key of `has` that `lacks` does not hold; NULL when there is none. */
static const char *key_not_in(const ckpt_value *has, const ckpt_value *lacks)
{
    size_t i;

    for (i = 0; i < has->u.dict.map.n; i++) {
        const ckpt_value *k = has->u.dict.map.keys[i];
        if (k->kind == CKPT_VAL_STR && !ckpt_value_dict_get(lacks, k->u.str.ptr))
            return k->u.str.ptr;
    }
    return NULL;
}

/* Two TP ranks of one stage with different model keys: name a key one holds and the other not. */
static int keys_differ(const ckpt_megatron *m, int tp, int pp, int ep, const ckpt_value *d0, const ckpt_value *d)
{
    const char *extra = key_not_in(d, d0), *missing = key_not_in(d0, d);

    if (extra)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: model key %s, which TP rank 0 (%s) lacks",
                               ckpt_path(mg_rank_at(m, tp, pp, ep)->ck), extra, ckpt_path(mg_rank_at(m, 0, pp, ep)->ck));
    if (missing)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no model key %s, which TP rank 0 (%s) has",
                               ckpt_path(mg_rank_at(m, tp, pp, ep)->ck), missing, ckpt_path(mg_rank_at(m, 0, pp, ep)->ck));
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: %zu model keys, TP rank 0 has %zu",
                           ckpt_path(mg_rank_at(m, tp, pp, ep)->ck), d->u.dict.map.n, d0->u.dict.map.n);
}

static int add_chunk(ckpt_megatron *m, int pp, int vp, int ep, int64_t offset)
{
    mg_chunk c;
    const ckpt_value *keys;
    size_t i, n = (size_t)m->info.tp;
    int tp, rc = 0;

    c.dicts = calloc(2 * n, sizeof *c.dicts);
    c.ranks = calloc(2 * n, sizeof *c.ranks);
    if (!c.dicts || !c.ranks) {
        free(c.dicts);
        free(c.ranks);
        return ckpt_error_oom();
    }
    c.xdicts = c.dicts + n;
    c.xranks = c.ranks + n;
    for (tp = 0; tp < m->info.tp && rc == 0; tp++) {
        const mg_rank *r = mg_rank_at(m, tp, pp, ep);
        c.ranks[tp] = r;
        c.xranks[tp] = mg_rank_at(m, mg_expert_tp(m, tp % mg_etp(m), ep), pp, ep);
        c.dicts[tp] = ckpt_megatron__chunk_dict(r->root, m->info.vpp, vp);
        c.xdicts[tp] = ckpt_megatron__chunk_dict(c.xranks[tp]->root, m->info.vpp, vp);
        if (!c.dicts[tp] || c.dicts[tp]->kind != CKPT_VAL_DICT)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no model dict for virtual chunk %d",
                                 ckpt_path(r->ck), vp);
        else if (tp > 0 && !r->stand_in && c.dicts[tp]->u.dict.map.n != c.dicts[0]->u.dict.map.n)
            rc = keys_differ(m, tp, pp, ep, c.dicts[0], c.dicts[tp]);
    }
    for (tp = 0; tp < m->info.tp && rc == 0; tp++)
        if (!c.xdicts[tp] || c.xdicts[tp]->kind != CKPT_VAL_DICT)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no model dict for virtual chunk %d",
                                 ckpt_path(c.xranks[tp]->ck), vp);
    keys = rc == 0 ? (ep > 0 ? c.xdicts[0] : c.dicts[0]) : NULL;
    for (i = 0; rc == 0 && i < keys->u.dict.map.n; i++) {
        const ckpt_value *k = keys->u.dict.map.keys[i];
        ckpt_tensor_layout l;
        if (k->kind != CKPT_VAL_STR) {
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: a model key is not a string",
                                 ckpt_path((ep > 0 ? c.xranks : c.ranks)[0]->ck));
            break;
        }
        /* experts of EP ranks > 0: only their expert tensors are their own, the others copies
         * of EP rank 0's */
        if (ep > 0 && (ckpt_parallel_classify(m->spec, m->params, k->u.str.ptr, 2, &l) < 0 || !l.expert)) {
            ckpt_error_clear();
            continue;
        }
        rc = add_key(m, &c, pp, vp, ep, k->u.str.ptr, offset);
    }
    /* the files that are not their dense TP rank's optimizer owner hold copies of its tensors */
    for (tp = 0; tp < m->info.tp && rc == 0; tp++)
        if (!c.ranks[tp]->stand_in && ep != mg_dense_ep(m, tp))
            rc = ckpt_megatron__same_dense(m, tp, pp, vp, ep, c.dicts[tp]);
    free(c.dicts);
    free(c.ranks);
    return rc;
}

static int build_entries(ckpt_megatron *m)
{
    int64_t offset = 0, n;
    int vp, pp, ep, rc;

    for (vp = 0; vp < m->info.vpp; vp++)
        for (pp = 0; pp < m->info.pp; pp++) {
            const ckpt_value *d0 = ckpt_megatron__chunk_dict(mg_rank_at(m, 0, pp, 0)->root, m->info.vpp, vp);
            if (!d0 || d0->kind != CKPT_VAL_DICT)
                return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no model dict for virtual chunk %d",
                                       ckpt_path(mg_rank_at(m, 0, pp, 0)->ck), vp);
            chunk_layers(m, d0, &n);
            if ((rc = ckpt_megatron__check_stage(m, pp, vp, n)) < 0)
                return rc;
            for (ep = 0; ep < m->info.ep; ep++)
                if ((rc = add_chunk(m, pp, vp, ep, offset)) < 0)
                    return rc;
            offset += n;
        }
    if (m->info.num_layers && offset != m->info.num_layers)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: the rank files hold %lld layers, args.num_layers is %lld",
                               ckpt_set_info_of(m->set)->root, (long long)offset, (long long)m->info.num_layers);
    m->info.num_layers = offset;
    return 0;
}

int ckpt_megatron__load_spec(ckpt_megatron *m, const ckpt_megatron_options *opts)
{
    int rc;

    if (!opts->spec_map && (rc = ckpt_map_builtin(&m->own_map, "megatron_gpt")) < 0)
        return rc;
    m->spec = ckpt_map_parallel(opts->spec_map ? opts->spec_map : m->own_map);
    if (!m->spec)
        return ckpt_error_set(CKPT_EINVALID, "map %s has no parallel section",
                              ckpt_map_name(opts->spec_map ? opts->spec_map : m->own_map));
    return 0;
}

int ckpt_megatron_open(ckpt_megatron **out, ckpt_set *set, ckpt_graph *g, const ckpt_megatron_options *user)
{
    ckpt_megatron_options opts = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_megatron *m;
    int rc;

    *out = NULL;
    if (user) {
        if (user->version != 1 && user->version != CKPT_MEGATRON_OPTIONS_VERSION)
            return ckpt_error_set(CKPT_EINVALID, "ckpt_megatron_options version %u, expected 1 to %u", user->version,
                                  CKPT_MEGATRON_OPTIONS_VERSION);
        if (user->version == 1)
            memcpy(&opts, user, offsetof(ckpt_megatron_options, leave_out));
        else
            opts = *user;
        opts.version = CKPT_MEGATRON_OPTIONS_VERSION;
    }
    m = calloc(1, sizeof *m);
    if (!m)
        return ckpt_error_oom();
    m->set = set;
    m->g = g;
    m->leave_out = opts.leave_out;
    m->leave_out_payload = opts.leave_out_payload;
    if ((rc = ckpt_megatron__load_spec(m, &opts)) < 0)
        goto fail;
    if (ckpt_set_member_count(set) == 1 && strcmp(ckpt_set_member_at(set, 0)->role, "dist") == 0)
        rc = ckpt_megatron__open_dist(m, set, &opts);
    else if ((rc = open_ranks(m)) == 0 && (rc = read_info(m, &opts)) == 0 && (rc = ckpt_megatron__check_ranks(m)) == 0 &&
             (rc = ckpt_megatron__load_params(m)) == 0 && (rc = build_entries(m)) == 0 &&
             (rc = ckpt_megatron__check_experts(m)) == 0 &&
             ((m->info.ep == 1 && !m->grouped && !m->te_grouped) || (rc = ckpt_megatron__order_experts(m)) == 0))
        rc = ckpt_megatron__check_shapes(m);
    if (rc < 0)
        goto fail;
    /* a model-only plan needs none of it: a plan that keeps the optimizer reads it again and
     * fails with the reason (ckpt_megatron_plan) */
    if (m->info.distributed_optimizer && !m->dist && ckpt_megatron__read_distopt(m) < 0)
        ckpt_error_clear();
    *out = m;
    return 0;
fail:
    ckpt_megatron_close(m);
    return rc;
}

void ckpt_megatron_close(ckpt_megatron *m)
{
    size_t i;

    if (!m)
        return;
    for (i = 0; i < m->n_entries; i++) {
        free(m->entries[i].name);
        free(m->entries[i].local);
        free(m->entries[i].shards);
    }
    free(m->entries);
    free(m->ranks);
    ckpt_arena_free(m->arena);
    ckpt_map_params_free(m->params);
    ckpt_map_free(m->own_map);
    free(m);
}

const ckpt_megatron_info *ckpt_megatron_info_of(const ckpt_megatron *m)
{
    return &m->info;
}

size_t ckpt_megatron_tensor_count(const ckpt_megatron *m)
{
    size_t i, n = 0;

    for (i = 0; i < m->n_entries; i++)
        n += m->entries[i].full != NULL;
    return n;
}

const char *ckpt_megatron_tensor_at(const ckpt_megatron *m, size_t i, const ckpt_node **full,
                                    ckpt_tensor_layout *layout)
{
    size_t j;

    for (j = 0; j < m->n_entries; j++) {
        if (!m->entries[j].full || i--)
            continue;
        if (full)
            *full = m->entries[j].full;
        if (layout)
            *layout = m->entries[j].layout;
        return m->entries[j].name;
    }
    return NULL;
}

const ckpt_node *const *ckpt_megatron_tensor_shards(const ckpt_megatron *m, size_t i)
{
    size_t j;

    for (j = 0; j < m->n_entries; j++)
        if (m->entries[j].full && !i--)
            return m->entries[j].shards;
    return NULL;
}

const ckpt_value *ckpt_megatron_args(const ckpt_megatron *m)
{
    return m->args;
}
