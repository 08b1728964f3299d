/* Writing the logical model of a PaddleNLP checkpoint at another TP/PP layout: per rank a
 * model file and an optimizer file named as PaddleNLP's trainer names them, config.json
 * with the new tensor_parallel_degree, the directory's other files copied. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/framework.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* result[i] of Paddle's SegmentLayers.uniform(n, parts): the first item of part i, the
 * parts past parts - n % parts one item longer. */
static int64_t uniform_bound(int64_t n, int parts, int i)
{
    int64_t part = n / parts, longer_from = parts - n % parts;

    if (i >= parts)
        return n;
    return i * part + (i > longer_from ? i - longer_from : 0);
}

void ckpt_paddle_stage_layers(int64_t num_layers, int pp, int stage, int64_t *lo, int64_t *hi)
{
    int64_t a, b;

    if (pp <= 1) {
        *lo = 0;
        *hi = num_layers;
        return;
    }
    if (num_layers % pp == 0) {
        *lo = stage * (num_layers / pp);
        *hi = *lo + num_layers / pp;
        return;
    }
    /* items: the embedding, the layers (item l + 1), the norm and the head */
    a = uniform_bound(num_layers + 3, pp, stage) - 1;
    b = uniform_bound(num_layers + 3, pp, stage + 1) - 1;
    *lo = a < 0 ? 0 : a > num_layers ? num_layers : a;
    *hi = b < 0 ? 0 : b > num_layers ? num_layers : b;
}

int ckpt_paddle_rank_file(const char *base, const char *ext, int tp, int pp, int n_tp, int n_pp, ckpt_buf *out)
{
    int rc = ckpt_buf_puts(out, base);

    if (rc == 0 && (n_tp > 1 || n_pp > 1))
        rc = ckpt_buf_putc(out, '.');
    if (rc == 0 && n_tp > 1)
        rc = ckpt_buf_printf(out, "tp%02d", tp);
    if (rc == 0 && n_pp > 1)
        rc = ckpt_buf_printf(out, "%spp%02d", n_tp > 1 ? "_" : "", pp);
    return rc == 0 ? ckpt_buf_puts(out, ext) : rc;
}

typedef struct target_ctx {
    ckpt_paddle_model *m;
    ckpt_paddle_target t;
    ckpt_map_params *params;
    ckpt_tensor_layout *layouts;  /* [entry]: in the target layout */
    ckpt_fw_ranks *ranks;         /* the target ranks in PaddleNLP's order, and each entry's parts per
                                     slot (an accumulator, the master weight at PD_MAX_KINDS, the
                                     parameter itself at PARAM_SLOT), cut on first use */
    ckpt_plan *plan;
    ckpt_arena *arena;
    size_t file;
    const char *head;             /* the head's class at this layout */
    char **vars;                  /* [entry]: the variable name on the stage being written */
    size_t *sel;                  /* [entry]: scratch, the stage's entries */
} target_ctx;

#define PARAM_SLOT (PD_MAX_KINDS + 1)
#define SLOTS (PD_MAX_KINDS + 2)

static int split_entry(void *state, size_t entry, size_t slot, int n_tp, const ckpt_node **parts);

static int ctx_init(target_ctx *c, ckpt_paddle_model *m, const ckpt_paddle_target *t)
{
    size_t i;
    int rc;

    memset(c, 0, sizeof *c);
    c->m = m;
    if (t->version != CKPT_PADDLE_TARGET_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_paddle_target version %u, expected %u", t->version,
                              CKPT_PADDLE_TARGET_VERSION);
    if ((rc = ckpt_paddle__check_target(m, t->tp, t->pp)) < 0)
        return rc;
    c->t = *t;
    if ((rc = ckpt_paddle__layout_params(m, t->tp, &c->params)) < 0)
        return rc;
    c->head = ckpt_paddle__head_class(m, t->pp);
    if (!(c->layouts = calloc(m->n_entries ? m->n_entries : 1, sizeof *c->layouts)) ||
        !(c->vars = calloc(m->n_entries ? m->n_entries : 1, sizeof *c->vars)) ||
        !(c->sel = malloc((m->n_entries ? m->n_entries : 1) * sizeof *c->sel)))
        return ckpt_error_oom();
    for (i = 0; i < m->n_entries; i++) {
        const pd_entry *e = &m->entries[i];
        if (e->tensor &&
            (rc = ckpt_parallel_classify(m->spec, c->params, e->name, ckpt_node_ndim(e->full), &c->layouts[i])) < 0)
            return rc;
    }
    return ckpt_fw_ranks_new(&c->ranks, m->n_entries, SLOTS, t->tp, split_entry, c);
}

static void free_vars(target_ctx *c)
{
    size_t i;

    for (i = 0; c->vars && i < c->m->n_entries; i++) {
        free(c->vars[i]);
        c->vars[i] = NULL;
    }
}

static void ctx_dispose(target_ctx *c)
{
    free_vars(c);
    free(c->vars);
    free(c->sel);
    ckpt_fw_ranks_free(c->ranks);
    free(c->layouts);
    ckpt_map_params_free(c->params);
}

/* Entry i's parameter (slot PARAM_SLOT), accumulator or master weight cut for the target's
 * TP ranks: the ranks' parts, made once (ckpt_fw_ranks) and shared by every rank. */
static int split_entry(void *state, size_t i, size_t slot, int n_tp, const ckpt_node **parts)
{
    const target_ctx *c = state;
    const pd_entry *e = &c->m->entries[i];
    const ckpt_node *full = slot == PARAM_SLOT ? e->full : e->states[slot].full;
    const ckpt_tensor_layout *l = &c->layouts[i];
    ckpt_tensor_layout whole;
    char name[512];

    if (slot != PARAM_SLOT && e->states[slot].replicated) {
        memset(&whole, 0, sizeof whole);
        l = &whole;
    }
    snprintf(name, sizeof name, "%s%s%s%s", e->name, slot == PARAM_SLOT ? "" : " (",
             slot == PARAM_SLOT ? "" : slot == PD_MAX_KINDS ? "master weight" : c->m->kinds[slot],
             slot == PARAM_SLOT ? "" : ")");
    return ckpt_parallel_split(c->m->g, l, name, full, (size_t)n_tp, parts);
}

/* Target rank tp's part of entry i's parameter, accumulator or master weight. */
static int part_of(target_ctx *c, size_t i, size_t slot, int tp, const ckpt_node **out)
{
    return ckpt_fw_ranks_part(c->ranks, i, slot, tp, out);
}

static int in_stage(const target_ctx *c, const pd_entry *e, const ckpt_tensor_layout *l, int pp)
{
    int64_t lo, hi;

    if (!e->tensor)
        return pp == (e->pp < c->t.pp ? e->pp : c->t.pp - 1);
    switch (l->stage) {
    case CKPT_STAGE_FIRST:
        return pp == 0;
    case CKPT_STAGE_LAST:
        return pp == c->t.pp - 1;
    case CKPT_STAGE_EVERY:
        return 1;
    default:
        ckpt_paddle_stage_layers(c->m->info.num_layers, c->t.pp, pp, &lo, &hi);
        return l->layer >= lo && l->layer < hi;
    }
}

/* c->vars: the variable names of stage pp's tensors, as a process of that stage names them. */
static int stage_names(void *state, int pp, ckpt_fw_ranks *r)
{
    target_ctx *c = state;
    const ckpt_paddle_model *m = c->m;
    size_t i, n = 0;
    int rc;

    (void)r;
    free_vars(c);
    for (i = 0; i < m->n_entries; i++)
        if (m->entries[i].tensor && in_stage(c, &m->entries[i], &c->layouts[i], pp))
            c->sel[n++] = i;
    /* named in place, then moved to their entries */
    rc = ckpt_paddle__stage_vars(m, c->head, pp, c->sel, n, c->vars);
    for (i = n; i-- > 0;) {
        char *v = c->vars[i];
        c->vars[i] = NULL;
        c->vars[c->sel[i]] = v;
    }
    /* optimizer state is keyed by the name: a tensor that has some needs one */
    for (i = 0; i < n && rc == 0; i++)
        if (!c->vars[c->sel[i]] && m->entries[c->sel[i]].states)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                 "%s: '%s' has optimizer state but no variable name to key it by (no name table "
                                 "names it); give --no-optimizer to reshard the model only",
                                 ckpt_paddle__where(m), m->entries[c->sel[i]].name);
    return rc;
}

/* Target rank (tp, pp)'s tensors in state-dict order into names[], nodes[] (room for every
 * entry). */
static int rank_tensors(target_ctx *c, int tp, int pp, const char **names, const ckpt_node **nodes, size_t *n)
{
    const ckpt_paddle_model *m = c->m;
    size_t i;
    int rc = 0;

    *n = 0;
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        if (!m->entries[i].tensor || !in_stage(c, &m->entries[i], &c->layouts[i], pp))
            continue;
        if ((rc = part_of(c, i, PARAM_SLOT, tp, &nodes[*n])) == 0)
            names[(*n)++] = m->entries[i].name;
    }
    return rc;
}

int ckpt_paddle_model_rank(ckpt_paddle_model *m, const ckpt_paddle_target *t, int tp, int pp, const char ***names,
                           const ckpt_node ***nodes, size_t *n)
{
    target_ctx c;
    int rc;

    *names = NULL;
    *nodes = NULL;
    *n = 0;
    if ((rc = ctx_init(&c, m, t)) == 0 && (tp < 0 || tp >= t->tp || pp < 0 || pp >= t->pp))
        rc = ckpt_error_set(CKPT_EINVALID, "rank TP %d, PP %d is outside TP %d x PP %d", tp, pp, t->tp, t->pp);
    if (rc == 0 && (!(*names = malloc((m->n_entries + 1) * sizeof **names)) ||
                    !(*nodes = malloc((m->n_entries + 1) * sizeof **nodes))))
        rc = ckpt_error_oom();
    if (rc == 0)
        rc = rank_tensors(&c, tp, pp, *names, *nodes, n);
    ctx_dispose(&c);
    if (rc < 0) {
        free((void *)*names);
        free((void *)*nodes);
        *names = NULL;
        *nodes = NULL;
        *n = 0;
    }
    return rc;
}

typedef struct each_ctx {
    target_ctx c;
    ckpt_paddle__rank_fn fn;
    void *payload;
    const char **names;
    const ckpt_node **nodes;
} each_ctx;

static int each_rank(void *state, int tp, int pp, int ep, ckpt_fw_ranks *r)
{
    each_ctx *x = state;
    size_t n;
    int rc;

    (void)ep;
    (void)r;
    if ((rc = rank_tensors(&x->c, tp, pp, x->names, x->nodes, &n)) < 0)
        return rc;
    return x->fn(x->payload, tp, pp, x->names, x->nodes, n);
}

int ckpt_paddle__each_rank(ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_paddle__rank_fn fn, void *payload)
{
    each_ctx x;
    int rc;

    memset(&x, 0, sizeof x);
    x.fn = fn;
    x.payload = payload;
    if ((rc = ctx_init(&x.c, m, t)) == 0 && (!(x.names = malloc((m->n_entries + 1) * sizeof *x.names)) ||
                                             !(x.nodes = malloc((m->n_entries + 1) * sizeof *x.nodes))))
        rc = ckpt_error_oom();
    /* ctx_init gave the split callback &x.c, which lives as long as x */
    if (rc == 0)
        rc = ckpt_fw_ranks_each(x.c.ranks, CKPT_FW_RANKS_PP_TP, t->pp, 1, NULL, each_rank, &x);
    ctx_dispose(&x.c);
    free((void *)x.names);
    free((void *)x.nodes);
    return rc;
}

/* ---- value trees ---- */

static ckpt_value *new_str(ckpt_arena *a, const char *s)
{
    return ckpt_value_new_str(a, s, strlen(s));
}

static int set_item(ckpt_arena *a, ckpt_value *dict, const char *key, ckpt_value *v)
{
    ckpt_value *k = new_str(a, key);
    return k && v ? ckpt_value_dict_set(a, dict, k, v) : ckpt_error_oom();
}

typedef struct carry_ctx {
    target_ctx *c;
    const ckpt_ckpt *src;
} carry_ctx;

/* Tensors nested in a carried value become tensors of the output file. */
static int carry_tensor(const ckpt_value *leaf, size_t *index, void *payload)
{
    const carry_ctx *cc = payload;
    const ckpt_tensor *t = ckpt_tensor_at(cc->src, leaf->u.tensor.index);
    const ckpt_node *node;
    int rc;

    if (!t)
        return ckpt_error_set(CKPT_EFORMAT, "%s: tensor #%zu out of range", ckpt_path(cc->src), leaf->u.tensor.index);
    if ((rc = ckpt_node_tensor(cc->c->m->g, t, &node)) < 0)
        return rc;
    return ckpt_plan_add_tensor(cc->c->plan, cc->c->file, t->name, node, t->flags, index);
}

static int carry(target_ctx *c, const ckpt_ckpt *src, const ckpt_value *v, ckpt_value **out)
{
    carry_ctx cc = { c, src };
    return ckpt_value_clone(c->arena, v, carry_tensor, &cc, out);
}

/* A tensor leaf, or the (name, array) pair paddle.save writes for nested states. */
static int tensor_value(target_ctx *c, const char *key, const ckpt_node *node, const char *pair_name,
                        ckpt_value **out)
{
    ckpt_value *leaf;
    size_t index;
    int rc;

    if ((rc = ckpt_plan_add_tensor(c->plan, c->file, key, node, 0, &index)) < 0)
        return rc;
    if (!(leaf = ckpt_value_new_tensor(c->arena, index)))
        return ckpt_error_oom();
    if (!pair_name) {
        *out = leaf;
        return 0;
    }
    if (!(*out = ckpt_value_new(c->arena, CKPT_VAL_TUPLE)))
        return ckpt_error_oom();
    if ((rc = ckpt_value_append(c->arena, *out, new_str(c->arena, pair_name))) < 0)
        return rc;
    return ckpt_value_append(c->arena, *out, leaf);
}

/* ---- the files of one rank ---- */

/* A new tensor file of the plan, named for rank (tp, pp) of the target as PaddleNLP names
 * it, and its value tree: a dict, and a name table when `with_table`. */
static int begin_file(target_ctx *c, const char *base, const char *ext, int tp, int pp, int with_table,
                      ckpt_value **root, ckpt_value **table)
{
    ckpt_buf rel = CKPT_BUF_INIT;
    int rc;

    *root = ckpt_value_new(c->arena, CKPT_VAL_DICT);
    *table = with_table ? ckpt_value_new(c->arena, CKPT_VAL_DICT) : NULL;
    if (!*root || (with_table && !*table))
        return ckpt_error_oom();
    if ((rc = ckpt_paddle_rank_file(base, ext, tp, pp, c->t.tp, c->t.pp, &rel)) == 0)
        rc = ckpt_plan_add_file(c->plan, (const char *)rel.data, "pdparams", &c->file);
    ckpt_buf_dispose(&rel);
    return rc;
}

/* The file's tree, the name table (if any) last, as paddle.save appends it. */
static int end_file(target_ctx *c, ckpt_value *root, ckpt_value *table)
{
    int rc = table ? set_item(c->arena, root, CKPT_PADDLE_NAME_TABLE, table) : 0;

    return rc == 0 ? ckpt_plan_set_root(c->plan, c->file, root) : rc;
}

static int build_model(target_ctx *c, int tp, int pp)
{
    ckpt_paddle_model *m = c->m;
    ckpt_value *root, *table;
    size_t i;
    int rc;

    if ((rc = begin_file(c, "model_state", ".pdparams", tp, pp, m->info.name_table, &root, &table)) < 0)
        return rc;
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        const pd_entry *e = &m->entries[i];
        const ckpt_node *part;
        ckpt_value *v = NULL;
        if (!in_stage(c, e, &c->layouts[i], pp))
            continue;
        if (!e->tensor)
            rc = carry(c, e->src, e->value, &v);
        else if ((rc = part_of(c, i, PARAM_SLOT, tp, &part)) == 0)
            rc = tensor_value(c, e->name, part, NULL, &v);
        if (rc == 0)
            rc = set_item(c->arena, root, e->name, v);
        if (rc == 0 && table && e->tensor && c->vars[i])
            rc = set_item(c->arena, table, e->name, new_str(c->arena, c->vars[i]));
    }
    return rc == 0 ? end_file(c, root, table) : rc;
}

static int add_accumulators(target_ctx *c, int tp, int pp, ckpt_value *root, ckpt_value *table)
{
    ckpt_paddle_model *m = c->m;
    ckpt_buf key = CKPT_BUF_INIT;
    size_t k, i;
    int rc = 0;

    for (k = 0; k < m->n_kinds && rc == 0; k++)
        for (i = 0; i < m->n_entries && rc == 0; i++) {
            const pd_entry *e = &m->entries[i];
            const ckpt_node *part;
            ckpt_value *v;
            if (!e->states || !e->states[k].full || !in_stage(c, e, &c->layouts[i], pp))
                continue;
            ckpt_buf_clear(&key);
            if ((rc = ckpt_buf_printf(&key, "%s_%s", c->vars[i], m->kinds[k])) < 0 ||
                (rc = part_of(c, i, k, tp, &part)) < 0 ||
                (rc = tensor_value(c, (const char *)key.data, part, m->opt_pairs ? (const char *)key.data : NULL,
                                   &v)) < 0 ||
                (rc = set_item(c->arena, root, (const char *)key.data, v)) < 0)
                break;
            if (table)
                rc = set_item(c->arena, table, (const char *)key.data, new_str(c->arena, (const char *)key.data));
        }
    ckpt_buf_dispose(&key);
    return rc;
}

/* The master weight's own name, "<var>_fp32_master_0", for the parameter's name here. */
static int master_name(const pd_entry *e, const char *var, ckpt_buf *out)
{
    size_t len = e->var ? strlen(e->var) : 0;

    if (!e->master_name)
        return 0;
    if (len && strncmp(e->master_name, e->var, len) == 0)
        return ckpt_buf_printf(out, "%s%s", var, e->master_name + len);
    return ckpt_buf_puts(out, e->master_name);
}

static int add_master_weights(target_ctx *c, int tp, int pp, ckpt_value *root)
{
    ckpt_paddle_model *m = c->m;
    ckpt_value *dict = NULL;
    ckpt_buf key = CKPT_BUF_INIT, own = CKPT_BUF_INIT;
    size_t i;
    int rc = 0;

    for (i = 0; i < m->n_entries && rc == 0; i++) {
        const pd_entry *e = &m->entries[i];
        const ckpt_node *part;
        ckpt_value *v;
        if (!e->states || !e->states[PD_MAX_KINDS].full || !in_stage(c, e, &c->layouts[i], pp))
            continue;
        if (!dict && (!(dict = ckpt_value_new(c->arena, CKPT_VAL_DICT)) ||
                      (rc = set_item(c->arena, root, CKPT_PADDLE_MASTER_WEIGHTS, dict)) < 0))
            return rc < 0 ? rc : ckpt_error_oom();
        ckpt_buf_clear(&key);
        ckpt_buf_clear(&own);
        if ((rc = ckpt_buf_printf(&key, "%s/%s", CKPT_PADDLE_MASTER_WEIGHTS, c->vars[i])) == 0 &&
            (rc = master_name(e, c->vars[i], &own)) == 0 && (rc = part_of(c, i, PD_MAX_KINDS, tp, &part)) == 0 &&
            (rc = tensor_value(c, (const char *)key.data, part, e->master_name ? (const char *)own.data : NULL,
                               &v)) == 0)
            rc = set_item(c->arena, dict, c->vars[i], v);
    }
    ckpt_buf_dispose(&key);
    ckpt_buf_dispose(&own);
    return rc;
}

static int build_optimizer(target_ctx *c, int tp, int pp)
{
    ckpt_paddle_model *m = c->m;
    const pd_rank *tmpl = ckpt_paddle__rank(m, tp < m->info.tp ? tp : 0, pp < m->info.pp ? pp : m->info.pp - 1);
    ckpt_value *root, *table;
    size_t f, i;
    int rc;

    if ((rc = begin_file(c, "optimizer", ".pdopt", tp, pp, m->opt_name_table, &root, &table)) < 0 ||
        (rc = add_accumulators(c, tp, pp, root, table)) < 0 || (rc = add_master_weights(c, tp, pp, root)) < 0)
        return rc;
    /* what the optimizer keeps besides its tensors (LR_Scheduler) is the same on every rank */
    for (f = 0; f < tmpl->n_optims && rc == 0; f++) {
        const ckpt_value *d = tmpl->optims[f].root;
        for (i = 0; i < d->u.dict.map.n && rc == 0; i++) {
            const ckpt_value *k = d->u.dict.map.keys[i], *v = d->u.dict.map.vals[i];
            ckpt_value *copy;
            if (k->kind != CKPT_VAL_STR || ckpt_paddle__tensor_leaf(v, NULL) ||
                strcmp(k->u.str.ptr, CKPT_PADDLE_MASTER_WEIGHTS) == 0 ||
                strcmp(k->u.str.ptr, CKPT_PADDLE_NAME_TABLE) == 0 || ckpt_value_dict_get(root, k->u.str.ptr))
                continue;
            if ((rc = carry(c, tmpl->optims[f].ck, v, &copy)) == 0)
                rc = set_item(c->arena, root, k->u.str.ptr, copy);
        }
    }
    return rc == 0 ? end_file(c, root, table) : rc;
}

/* ---- the other files ---- */

static int add_config(target_ctx *c, const char *rel)
{
    ckpt_buf cfg = CKPT_BUF_INIT;
    int rc = ckpt_paddle__config_for(c->m, &c->t, &cfg);

    if (rc == 0)
        rc = ckpt_plan_add_bytes(c->plan, rel, cfg.data, cfg.len);
    ckpt_buf_dispose(&cfg);
    return rc;
}

/* The source directory's other files; for a model given tensor by tensor, its config. */
static int add_other_files(target_ctx *c)
{
    ckpt_set *set = c->m->set;
    size_t i, n = set ? ckpt_set_member_count(set) : 0;
    int rc = 0;

    if (!set && c->m->config_text)
        return add_config(c, "config.json");
    for (i = 0; i < n && rc == 0; i++) {
        const ckpt_member *mb = ckpt_set_member_at(set, i);
        /* model_meta.json and shard_meta*.json describe the source's sharding ranks */
        if (strcmp(mb->role, "other") != 0 || strcmp(mb->rel, "model_meta.json") == 0 ||
            strncmp(mb->rel, "shard_meta", 10) == 0)
            continue;
        if (strcmp(mb->rel, "config.json") == 0)
            rc = add_config(c, mb->rel);
        else
            rc = ckpt_plan_add_copy(c->plan, mb->rel, mb->path);
    }
    return rc;
}

/* Rank (tp, pp)'s model file and, unless dropped, its optimizer file. */
static int plan_rank(void *state, int tp, int pp, int ep, ckpt_fw_ranks *r)
{
    target_ctx *c = state;
    int rc;

    (void)ep;
    (void)r;
    if ((rc = build_model(c, tp, pp)) == 0 && c->m->info.has_optimizer && !c->t.drop_optimizer)
        rc = build_optimizer(c, tp, pp);
    return rc;
}

int ckpt_paddle_plan(ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_plan *plan)
{
    target_ctx c;
    int rc;

    if (m->left_out_with_state && m->info.has_optimizer && !t->drop_optimizer)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s: %zu parameter%s with optimizer state left out (--drop), and the optimizer files "
                               "would keep no state for it: --no-optimizer writes a model-only checkpoint",
                               ckpt_paddle__where(m), m->left_out_with_state, m->left_out_with_state == 1 ? "" : "s");
    /* MixtralMLP builds w1, w3, w2 at TP > 1 but w1, w2, w3 at TP 1: the linears' numbers, which
     * name the optimizer state, differ between the two */
    if (m->family->moe && m->info.has_optimizer && !t->drop_optimizer && (m->info.tp > 1) != (t->tp > 1))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: TP %d to TP %d: PaddleNLP's %s numbers its experts' linears in another order "
                               "at TP 1 than above it, so the optimizer state would name other parameters: "
                               "--no-optimizer writes a model-only checkpoint",
                               ckpt_paddle__where(m), m->info.tp, t->tp, m->family->title);
    if ((rc = ctx_init(&c, m, t)) < 0)
        goto done;
    c.plan = plan;
    c.arena = ckpt_plan_arena(plan);
    /* every stage's variable names before its TP ranks: they name the optimizer state */
    rc = ckpt_fw_ranks_each(c.ranks, CKPT_FW_RANKS_PP_TP, t->pp, 1, stage_names, plan_rank, &c);
    if (rc == 0)
        rc = add_other_files(&c);
done:
    ctx_dispose(&c);
    return rc;
}

int ckpt_paddle_plan_other_files(ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_plan *plan)
{
    target_ctx c;
    int rc;

    if ((rc = ctx_init(&c, m, t)) == 0) {
        c.plan = plan;
        c.arena = ckpt_plan_arena(plan);
        rc = add_other_files(&c);
    }
    ctx_dispose(&c);
    return rc;
}
