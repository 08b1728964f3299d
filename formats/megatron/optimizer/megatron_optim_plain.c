/* The non-distributed optimizer's state in the per-parameter form (mg_entry.moment[]), both
 * ways: read from a plain source's model_optim_rng.pt files, and written for a target rank
 * from that form, whatever kind of optimizer the source used.
 *
 * The form Megatron's non-distributed optimizer saves (megatron-core 0.16.1
 * optimizer/optimizer.py): FP32Optimizer saves the torch optimizer's state dict
 * {state, param_groups}; Float16OptimizerWithFloat16Params (bf16, fp16) wraps it as
 * {optimizer, grad_scaler (when it has one), fp32_from_fp16_params (a list per param group of
 * the fp32 masters)}. Adam's state is per parameter {step (a float32 scalar tensor), exp_avg,
 * exp_avg_sq}, keyed by the parameter's position over the param groups; each group lists those
 * positions under 'params', its last key. The distributed optimizer (distrib_optimizer.py
 * state_dict) saves the same param groups without 'params' and with the common 'step' added
 * last, and no state: that is where a distributed source's step count comes from. An fp32
 * model's master copy is the weight itself. A mixture of experts at EP > 1 has two optimizers,
 * dense and expert parameters (ChainedOptimizer.state_dict(): the list of both states, each
 * numbering its own parameters; the expert one's param groups is_expert_parallel); at EP 1
 * one, the experts in the dense groups. */
#include "megatron_dist_optim.h"
#include "megatron_distopt.h"
#include "../megatron_private.h"

#include <stdlib.h>
#include <string.h>

static const char *const moment_keys[MG_N_MOMENTS] = { "fp32_from_fp16_params", "exp_avg", "exp_avg_sq" };

/* Moment k of entry e, merged over the source TP ranks (an expert's: its expert TP ranks), as
 * fp32. */
static int read_moment(mg_optim_views *views, ckpt_megatron *m, mg_entry *e, mg_moment k, const ckpt_node **out)
{
    int n = mg_read_ways(m, e->layout.expert), tp, rc = 0;
    const ckpt_node **shards = calloc((size_t)n, sizeof *shards);

    if (!shards)
        return ckpt_error_oom();
    for (tp = 0; tp < n && rc == 0; tp++) {
        const mg_optim_view *v;
        const ckpt_value *entry, *master, *leaf;
        if ((rc = ckpt_megatron__optim_state(views, e, tp, &v, &entry, &master)) < 0)
            break;
        leaf = k == MG_MASTER ? master : entry ? ckpt_value_dict_get(entry, moment_keys[k]) : NULL;
        if (entry && entry->kind != CKPT_VAL_DICT)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: the optimizer state of '%s' is not a dict",
                                 ckpt_path(v->ck), e->local);
        else if (k == MG_MASTER && !v->masters && e->shards)
            shards[tp] = e->shards[tp]; /* an fp32 model: the weight is the master */
        else if (!leaf || leaf->kind != CKPT_VAL_TENSOR || !ckpt_tensor_at(v->ck, leaf->u.tensor.index))
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: optimizer state '%s' of '%s' is missing",
                                 ckpt_path(v->ck), moment_keys[k], e->local);
        else
            rc = ckpt_node_tensor(m->g, ckpt_tensor_at(v->ck, leaf->u.tensor.index), &shards[tp]);
        if (rc == 0 && ckpt_node_dtype(shards[tp]) != CKPT_DTYPE_F32)
            rc = ckpt_node_cast(m->g, shards[tp], CKPT_DTYPE_F32, &shards[tp]);
    }
    if (rc == 0)
        rc = ckpt_parallel_merge(m->g, &e->layout, e->name, shards, (size_t)n, out);
    free(shards);
    return rc;
}

int ckpt_megatron__read_plain_moments(ckpt_megatron *m)
{
    mg_optim_views views;
    size_t i;
    int k, rc;

    if ((rc = ckpt_megatron__optim_views_init(&views, m)) < 0)
        return rc;
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        mg_entry *e = &m->entries[i];
        if (!e->param || !e->full)
            continue;
        for (k = 0; k < MG_N_MOMENTS && rc == 0; k++)
            rc = read_moment(&views, m, e, (mg_moment)k, &e->moment[k]);
    }
    ckpt_megatron__optim_views_dispose(&views);
    if (rc == 0)
        m->moments = 1;
    return rc;
}

int ckpt_megatron__moments(ckpt_megatron *m)
{
    const char *root = m->set ? ckpt_set_info_of(m->set)->root : m->dist ? m->dist : "the model";
    int rc;

    if (m->moments)
        return 0;
    if ((rc = ckpt_megatron__dist_optim_unread(m)) < 0)
        return rc;
    if (!m->info.has_optimizer)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "%s: the checkpoint holds no optimizer state",
                               root);
    if (m->dist || m->left_out_params)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: %s; --no-optimizer writes a model-only checkpoint", root,
                               m->left_out_params ? "parameters were left out (--drop), and the optimizer state "
                                                    "follows the parameters in order"
                                                  : "its torch_dist optimizer state is in no form read here");
    if (m->info.distributed_optimizer)
        return ckpt_megatron__read_distopt(m);
    return ckpt_megatron__read_plain_moments(m);
}

int ckpt_megatron_optimizer_state(ckpt_megatron *m, size_t i, const ckpt_node **out, const char **copy_of)
{
    const ckpt_value *untie = ckpt_megatron_arg(m->args, "untie_embeddings_and_output_weights");
    size_t j;
    int k, rc;

    if ((rc = ckpt_megatron__moments(m)) < 0)
        return rc;
    for (j = 0; j < m->n_entries; j++) {
        const mg_entry *e = &m->entries[j];
        if (!e->full || i--)
            continue;
        for (k = 0; k < MG_N_MOMENTS; k++)
            out[k] = e->param ? e->moment[k] : NULL;
        if (copy_of)
            *copy_of = untie && untie->kind == CKPT_VAL_BOOL && !untie->u.boolean &&
                               strcmp(e->name, "output_layer.weight") == 0
                           ? "embedding.word_embeddings.weight"
                           : NULL;
        return 0;
    }
    return ckpt_error_set(CKPT_EINVALID, "tensor %zu of %zu", i, ckpt_megatron_tensor_count(m));
}

static int number_of(const ckpt_value *v, double *out)
{
    if (v && v->kind == CKPT_VAL_INT)
        *out = (double)v->u.integer;
    else if (v && v->kind == CKPT_VAL_FLOAT)
        *out = v->u.real;
    else
        return -1;
    return 0;
}

int ckpt_megatron__optim_step(const ckpt_megatron *m, double *step)
{
    const mg_rank *r = mg_rank_at(m, 0, 0, 0);
    const ckpt_value *opt = ckpt_value_dict_get(r->root, "optimizer"), *sd, *masters, *state, *v;
    const ckpt_node *node;

    /* a mixture of experts' chained optimizers share the step: the dense one's */
    if (opt && opt->kind == CKPT_VAL_LIST && opt->u.seq.n > 0)
        opt = opt->u.seq.items[0];
    if (ckpt_megatron__find_state_dict(r->ck, opt, &sd, &masters) == 0) {
        state = ckpt_value_dict_get(sd, "state");
        v = state && state->kind == CKPT_VAL_DICT && state->u.dict.map.n
                ? ckpt_value_dict_get(state->u.dict.map.vals[0], "step")
                : NULL;
        if (v && v->kind == CKPT_VAL_TENSOR && ckpt_tensor_at(r->ck, v->u.tensor.index) &&
            ckpt_node_tensor(m->g, ckpt_tensor_at(r->ck, v->u.tensor.index), &node) == 0 &&
            ckpt_node_numel(node) == 1)
            return ckpt_node_read(node, 0, 1, CKPT_DTYPE_F64, step);
    } else {
        ckpt_error_clear();
        sd = opt && opt->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(opt, "optimizer") : NULL;
        v = ckpt_value_dict_get(ckpt_megatron__seq_at(ckpt_value_dict_get(sd, "param_groups"), 0), "step");
    }
    if (number_of(v, step) == 0)
        return 0;
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                           "%s: optimizer: no step count (neither a parameter's 'step' nor a param group's)",
                           ckpt_path(r->ck));
}

typedef struct plain_out {
    ckpt_megatron *m;
    ckpt_plan *plan;
    size_t file;
    ckpt_arena *a;
    const ckpt_megatron_target *t;
    int64_t padded_vocab;
    int tp;
    double step;
    mg_optim_views *views; /* a plain source's, else NULL */
    const ckpt_value *wrap, *sd; /* the template's optimizer entry and its state dict, or NULL */
    int etp;                     /* the target rank's expert TP rank */
    /* the keys of the file's Adam states, one string each ("step", "exp_avg", "exp_avg_sq"), as
       torch.save writes Python's one interned string: the first taken from a source entry */
    ckpt_value *adam_keys[3], *sd_keys[5];
} plain_out;

static ckpt_value *new_str(ckpt_arena *a, const char *s)
{
    return ckpt_value_new_str(a, s, strlen(s));
}

/* The target rank's part of moment k of e, as a tensor of the plan file. */
static int moment_part(plain_out *o, const mg_entry *e, mg_moment k, const char *what, ckpt_value **out)
{
    const ckpt_node *part = NULL;
    ckpt_buf name = CKPT_BUF_INIT;
    size_t index;
    int rc = 0;

    *out = NULL;
    if (!e->moment[k])
        rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "%s: no optimizer state '%s' read for it",
                             e->name, what);
    if (rc == 0)
        rc = ckpt_megatron__part(o->m, o->t, o->padded_vocab, e, e->moment[k], o->tp, o->etp, &part);
    if (rc == 0)
        rc = ckpt_buf_printf(&name, "optimizer/%s/%s", e->name, what);
    if (rc == 0)
        rc = ckpt_plan_add_tensor(o->plan, o->file, (const char *)name.data, part, 0, &index);
    if (rc == 0 && !(*out = ckpt_value_new_tensor(o->a, index)))
        rc = CKPT_ENOMEM;
    ckpt_buf_dispose(&name);
    return rc;
}

/* Key `s` of `dict` when it has one (the output then shares that string with the rest of the
 * template it is built from, as the source file did), else a new string; the state dict's own
 * keys once per file (a chained optimizer's two state dicts share them, Python's interned
 * strings). */
static ckpt_value *key_of(plain_out *o, const ckpt_value *dict, const char *s)
{
    static const char *const shared[] = { "state", "param_groups", "optimizer", "grad_scaler",
                                          "fp32_from_fp16_params" };
    ckpt_value *k = NULL;
    size_t i, c;

    for (c = 0; c < sizeof shared / sizeof *shared && strcmp(shared[c], s) != 0; c++)
        ;
    if (c < sizeof shared / sizeof *shared && o->sd_keys[c])
        return o->sd_keys[c];
    for (i = 0; dict && dict->kind == CKPT_VAL_DICT && i < dict->u.dict.map.n && !k; i++)
        if (ckpt_value_is_str(dict->u.dict.map.keys[i], s))
            k = dict->u.dict.map.keys[i];
    if (!k)
        k = new_str(o->a, s);
    if (c < sizeof shared / sizeof *shared)
        o->sd_keys[c] = k;
    return k;
}

/* Adam's state key `which` (step, exp_avg, exp_avg_sq) of the file: a plain source's (of e's
 * entry), so that the file shares its strings the way the source's does; a new string for
 * any other source. */
static ckpt_value *state_key(plain_out *o, const mg_entry *e, int which)
{
    static const char *const names[3] = { "step", "exp_avg", "exp_avg_sq" };
    const mg_optim_view *v;
    const ckpt_value *entry = NULL, *master;

    if (o->adam_keys[which])
        return o->adam_keys[which];
    if (o->views && ckpt_megatron__optim_state(o->views, e, 0, &v, &entry, &master) < 0) {
        ckpt_error_clear();
        entry = NULL;
    }
    return o->adam_keys[which] = key_of(o, entry, names[which]);
}

/* Adam's state of one parameter: {step, exp_avg, exp_avg_sq}, as torch orders it. Each
 * parameter's step is a tensor of its own: torch's Adam adds to it in place. */
static int adam_state(plain_out *o, const mg_entry *e, ckpt_value **out)
{
    ckpt_value *dict = ckpt_value_new(o->a, CKPT_VAL_DICT), *v;
    ckpt_buf name = CKPT_BUF_INIT;
    const ckpt_node *step;
    size_t index;
    int rc = dict ? ckpt_buf_printf(&name, "optimizer/%s/step", e->name) : CKPT_ENOMEM;

    if (rc == 0)
        rc = ckpt_node_full(o->m->g, CKPT_DTYPE_F32, 0, NULL, o->step, &step);
    if (rc == 0)
        rc = ckpt_plan_add_tensor(o->plan, o->file, (const char *)name.data, step, 0, &index);
    ckpt_buf_dispose(&name);
    if (rc == 0)
        rc = ckpt_value_dict_set(o->a, dict, state_key(o, e, 0), ckpt_value_new_tensor(o->a, index));
    if (rc == 0 && (rc = moment_part(o, e, MG_EXP_AVG, "exp_avg", &v)) == 0)
        rc = ckpt_value_dict_set(o->a, dict, state_key(o, e, 1), v);
    if (rc == 0 && (rc = moment_part(o, e, MG_EXP_AVG_SQ, "exp_avg_sq", &v)) == 0)
        rc = ckpt_value_dict_set(o->a, dict, state_key(o, e, 2), v);
    *out = dict;
    return rc;
}

/* A param group of the template as the plain form saves it: copied whole (values shared
 * inside it stay shared), without 'params' and 'step', to which the target's 'params' is
 * added. */
static int plain_group(plain_out *o, const ckpt_ckpt *src, const ckpt_value *group, ckpt_value **out)
{
    ckpt_value *dict = ckpt_value_new(o->a, CKPT_VAL_DICT), *copy = NULL;
    size_t i;
    int rc = dict ? 0 : CKPT_ENOMEM;

    if (rc == 0 && (!group || group->kind != CKPT_VAL_DICT))
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: optimizer: a param group is not a dict",
                             ckpt_path(src));
    if (rc == 0)
        rc = ckpt_megatron__carry(o->plan, o->file, o->m->g, src, group, &copy);
    for (i = 0; rc == 0 && i < copy->u.dict.map.n; i++) {
        ckpt_value *k = copy->u.dict.map.keys[i];
        if (!ckpt_value_is_str(k, "params") && !ckpt_value_is_str(k, "step"))
            rc = ckpt_value_dict_set(o->a, dict, k, copy->u.dict.map.vals[i]);
    }
    *out = dict;
    return rc;
}

/* state, param_groups and (half-precision models) the masters per group, for the target
 * rank's parameters, dealt to the template's groups by Megatron's weight-decay split. */
static int plain_groups(plain_out *o, const ckpt_ckpt *src, const ckpt_value *groups, const mg_param_out *params,
                        size_t n_params, ckpt_value *state, ckpt_value *groups_out, ckpt_value *masters_out)
{
    size_t g, i, n_groups = ckpt_megatron__seq_len(groups);
    int *flags = calloc(n_groups + 1, sizeof *flags);
    int64_t next = 0;
    int rc = flags ? 0 : ckpt_error_oom();

    if (rc == 0)
        ckpt_megatron__group_flags(groups, flags);
    for (g = 0; rc == 0 && g < n_groups; g++) {
        ckpt_value *group, *ids = ckpt_value_new(o->a, CKPT_VAL_LIST);
        ckpt_value *masters = masters_out ? ckpt_value_new(o->a, CKPT_VAL_LIST) : NULL;
        if (!ids || (masters_out && !masters) || (rc = plain_group(o, src, ckpt_megatron__seq_at(groups, g), &group)) < 0) {
            rc = rc < 0 ? rc : CKPT_ENOMEM;
            break;
        }
        for (i = 0; rc == 0 && i < n_params; i++) {
            const mg_entry *e = params[i].entry;
            int want = ckpt_megatron__no_weight_decay(e->name, ckpt_node_ndim(params[i].shard));
            ckpt_value *entry, *master;
            if (flags[g] != 2 && flags[g] != want)
                continue;
            if ((rc = ckpt_value_append(o->a, ids, ckpt_value_new_int(o->a, next))) < 0 ||
                (rc = adam_state(o, e, &entry)) < 0 ||
                (rc = ckpt_value_dict_set(o->a, state, ckpt_value_new_int(o->a, next), entry)) < 0)
                break;
            next++;
            if (masters && (rc = moment_part(o, e, MG_MASTER, "fp32_from_fp16_params", &master)) == 0)
                rc = ckpt_value_append(o->a, masters, master);
        }
        if (rc == 0)
            rc = ckpt_value_dict_set(o->a, group, new_str(o->a, "params"), ids);
        if (rc == 0)
            rc = ckpt_value_append(o->a, groups_out, group);
        if (rc == 0 && masters)
            rc = ckpt_value_append(o->a, masters_out, masters);
    }
    if (rc == 0 && (size_t)next != n_params)
        rc = ckpt_megatron__optim_unsupported(src, "the target's parameters do not all fall into the source's "
                                                   "param groups");
    free(flags);
    return rc;
}

/* The plain form for the target rank from the source's param groups (of src: a state dict's,
 * or the distributed optimizer's), its grad scaler (carried into the plan; NULL: none) and
 * its step. */
static int plain_form(plain_out *o, const ckpt_ckpt *src, const ckpt_value *groups, ckpt_value *scaler, double step,
                      const mg_param_out *params, size_t n_params, ckpt_value **out)
{
    ckpt_arena *a = o->a;
    int half = ckpt_megatron__arg_int(o->m->args, "bf16", 0) || ckpt_megatron__arg_int(o->m->args, "fp16", 0);
    ckpt_value *state = ckpt_value_new(a, CKPT_VAL_DICT), *groups_out = ckpt_value_new(a, CKPT_VAL_LIST);
    ckpt_value *masters = half ? ckpt_value_new(a, CKPT_VAL_LIST) : NULL, *sd = ckpt_value_new(a, CKPT_VAL_DICT);
    ckpt_value *wrap = ckpt_value_new(a, CKPT_VAL_DICT);
    int rc = state && groups_out && sd && wrap && (!half || masters) ? 0 : CKPT_ENOMEM;

    *out = NULL;
    o->step = step;
    if (rc == 0)
        rc = plain_groups(o, src, groups, params, n_params, state, groups_out, masters);
    if (rc == 0 && (rc = ckpt_value_dict_set(a, sd, key_of(o, o->sd, "state"), state)) == 0)
        rc = ckpt_value_dict_set(a, sd, key_of(o, o->sd, "param_groups"), groups_out);
    if (rc < 0 || !half) {
        *out = rc == 0 ? sd : NULL;
        return rc;
    }
    if ((rc = ckpt_value_dict_set(a, wrap, key_of(o, o->wrap, "optimizer"), sd)) < 0)
        return rc;
    if (scaler && (rc = ckpt_value_dict_set(a, wrap, key_of(o, o->wrap, "grad_scaler"), scaler)) < 0)
        return rc;
    if ((rc = ckpt_value_dict_set(a, wrap, key_of(o, o->wrap, "fp32_from_fp16_params"), masters)) < 0)
        return rc;
    *out = wrap;
    return 0;
}

/* Inner optimizer i of the template's `optimizer` value (a chained optimizer's list: its
 * entry i): its state dict (or the distributed optimizer's {'param_groups'}) into *sd, the fp16
 * wrapper around it into *wrap (NULL when bare); 0 when there is none. */
static int template_inner(const ckpt_value *opt, size_t i, const ckpt_value **sd, const ckpt_value **wrap)
{
    if (opt && opt->kind == CKPT_VAL_LIST)
        opt = i < opt->u.seq.n ? opt->u.seq.items[i] : NULL;
    else if (i > 0)
        opt = NULL;
    *sd = opt;
    *wrap = NULL;
    if (opt && opt->kind == CKPT_VAL_DICT && !ckpt_value_dict_get(opt, "param_groups")) {
        *sd = ckpt_value_dict_get(opt, "optimizer");
        *wrap = opt;
    }
    return *sd && (*sd)->kind == CKPT_VAL_DICT && ckpt_value_dict_get(*sd, "param_groups");
}

/* The plain form of one optimizer of the target rank: for its parameters of kind `expert`
 * (-1: all), in the param groups of the template's inner optimizer `inner` (`groups` instead
 * when not NULL). */
static int plain_inner(plain_out *o, const mg_rank *tmpl, size_t inner, const ckpt_value *groups, double step,
                       const mg_param_out *params, size_t n_params, int expert, ckpt_value **out)
{
    const ckpt_value *opt = ckpt_value_dict_get(tmpl->root, "optimizer"), *sd, *scaler = NULL;
    mg_param_out *mine = calloc(n_params + 1, sizeof *mine);
    ckpt_value *copy = NULL;
    size_t i, n = 0;
    int rc = mine ? 0 : ckpt_error_oom();

    if (rc == 0 && !template_inner(opt, inner, &sd, &o->wrap) && !template_inner(opt, 0, &sd, &o->wrap))
        rc = ckpt_megatron__optim_unsupported(tmpl->ck, "no param groups, bare or in Megatron's wrapper");
    if (rc == 0) {
        o->sd = sd;
        scaler = o->wrap ? ckpt_value_dict_get(o->wrap, "grad_scaler") : NULL;
        if (scaler)
            rc = ckpt_megatron__carry(o->plan, o->file, o->m->g, tmpl->ck, scaler, &copy);
    }
    for (i = 0; rc == 0 && i < n_params; i++)
        if (expert < 0 || !params[i].entry->layout.expert == !expert)
            mine[n++] = params[i];
    if (rc == 0)
        rc = plain_form(o, tmpl->ck, groups ? groups : ckpt_value_dict_get(sd, "param_groups"), copy, step, mine, n,
                        out);
    free(mine);
    return rc;
}

int ckpt_megatron__optimizer_plain(ckpt_megatron *m, ckpt_plan *plan, size_t file, ckpt_arena *arena,
                                   const mg_rank *tmpl, const mg_param_out *params, size_t n_params, int tp, int etp,
                                   const ckpt_megatron_target *t, int64_t padded_vocab, ckpt_value **out)
{
    mg_optim_views views;
    plain_out o = { m, plan, file, arena, t, padded_vocab, tp, 0, NULL, NULL, NULL, etp, { NULL, NULL, NULL }, { NULL, NULL, NULL, NULL, NULL } };
    const ckpt_value *opt = ckpt_value_dict_get(tmpl->root, "optimizer");
    ckpt_value *list = NULL, *sd = NULL, *experts = NULL;
    double step;
    int rc, chained = ckpt_megatron__num_experts(m->args) > 0 && ckpt_megatron__target_ep(m, t) > 1;

    *out = NULL;
    if ((rc = ckpt_megatron__optim_step(m, &step)) < 0)
        return rc;
    if (!m->info.distributed_optimizer && !m->dist) {
        if ((rc = ckpt_megatron__optim_views_init(&views, m)) < 0)
            return rc;
        o.views = &views;
    }
    /* a mixture of experts at EP > 1: ChainedOptimizer([dense, expert]).state_dict(), the list
     * of both; the expert one's groups from a source without one are the dense group of the
     * experts' weights (ckpt_megatron__expert_groups); at EP 1 the experts join the dense
     * optimizer's groups */
    if (!chained) {
        rc = plain_inner(&o, tmpl, 0, NULL, step, params, n_params, -1, out);
    } else if (!(list = ckpt_value_new(arena, CKPT_VAL_LIST))) {
        rc = CKPT_ENOMEM;
    } else if ((opt && opt->kind == CKPT_VAL_LIST) ||
               (rc = ckpt_megatron__expert_groups(arena, ckpt_megatron__param_groups(opt, 0), &experts)) == 0) {
        if ((rc = plain_inner(&o, tmpl, 0, NULL, step, params, n_params, 0, &sd)) == 0 &&
            (rc = ckpt_value_append(arena, list, sd)) == 0 &&
            (rc = plain_inner(&o, tmpl, 1, experts, step, params, n_params, 1, &sd)) == 0 &&
            (rc = ckpt_value_append(arena, list, sd)) == 0)
            *out = list;
    }
    if (o.views)
        ckpt_megatron__optim_views_dispose(o.views);
    return rc;
}

int ckpt_megatron__optimizer_from_dist(ckpt_megatron *m, ckpt_plan *plan, size_t file, const mg_param_out *params,
                                       size_t n_params, int tp, const ckpt_megatron_target *t, int64_t padded_vocab,
                                       ckpt_value *root)
{
    ckpt_arena *a = ckpt_plan_arena(plan);
    plain_out o = { m, plan, file, a, t, padded_vocab, tp, 0, NULL, NULL, NULL, tp, { NULL, NULL, NULL }, { NULL, NULL, NULL, NULL, NULL } };
    const ckpt_value *scaler, *common, *sched;
    const ckpt_ckpt *ck;
    ckpt_value *sd, *opt = NULL, *copy = NULL, *scaler_copy = NULL;
    double step;
    int rc;

    ckpt_megatron__dist_source(m, &ck, &common);
    if ((rc = ckpt_megatron__dist_optim_sd(m, plan, file, &sd, &scaler)) < 0 ||
        (scaler && (rc = ckpt_megatron__scaler_carry(m, plan, file, scaler, &scaler_copy)) < 0))
        return rc;
    if (m->dist_chained) {
        /* ChainedOptimizer.state_dict(): [{'optimizer': dense}, {'optimizer': expert}] */
        if (t->optimizer == CKPT_MEGATRON_OPTIM_PLAIN)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                   "%s: a mixture-of-experts model's chained optimizer is not written as the "
                                   "non-distributed optimizer yet",
                                   m->dist);
        if (!(opt = ckpt_value_new(a, CKPT_VAL_LIST)))
            return CKPT_ENOMEM;
        for (size_t i = 0; i < ckpt_megatron__seq_len(sd) && rc == 0; i++) {
            ckpt_value *inner = ckpt_value_new(a, CKPT_VAL_DICT);
            if (!inner || ckpt_value_dict_set(a, inner, new_str(a, "optimizer"),
                                              (ckpt_value *)ckpt_megatron__seq_at(sd, i)) < 0 ||
                ckpt_value_append(a, opt, inner) < 0)
                rc = CKPT_ENOMEM;
        }
    } else if (number_of(ckpt_value_dict_get(ckpt_megatron__seq_at(ckpt_value_dict_get(sd, "param_groups"), 0), "step"),
                  &step) < 0)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: optimizer: no step count in its param groups",
                               m->dist);
    else if (t->optimizer == CKPT_MEGATRON_OPTIM_PLAIN) {
        rc = plain_form(&o, ck, ckpt_value_dict_get(sd, "param_groups"), scaler_copy, step, params, n_params, &opt);
    } else if (!(opt = ckpt_value_new(a, CKPT_VAL_DICT))) {
        rc = CKPT_ENOMEM;
    } else if ((rc = ckpt_value_dict_set(a, opt, new_str(a, "optimizer"), sd)) == 0 && scaler_copy) {
        rc = ckpt_value_dict_set(a, opt, new_str(a, "grad_scaler"), scaler_copy);
    }
    if (rc == 0)
        rc = ckpt_value_dict_set(a, root, new_str(a, "optimizer"),
                                 (ckpt_value *)ckpt_megatron__ep_optimizer_value(m, ckpt_megatron__target_ep(m, t), opt));
    sched = common ? ckpt_value_dict_get(common, "opt_param_scheduler") : NULL;
    if (rc == 0 && sched && (rc = ckpt_megatron__carry(plan, file, m->g, ck, sched, &copy)) == 0)
        rc = ckpt_value_dict_set(a, root, new_str(a, "opt_param_scheduler"), copy);
    return rc;
}
