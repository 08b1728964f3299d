/* pd2te / te2pd at a target layout: convert and reshard in one pass. The input's ranks are
 * read as one PaddleNLP model at full shapes (te2pd: each rank converted back first) and cut
 * into the target layout; pd2te (the paddle framework's impl "te") maps each target rank's
 * tensors on their way out. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <stdlib.h>
#include <string.h>

/* The tensors of one source rank (all its model files: size shards may split a layer's q, k
 * and v) with the map applied: Paddle names, added to the model as that rank's shards. */
static int add_converted_rank(const ckpt_paddle_te_options *o, ckpt_paddle_model *model, ckpt_set *set, ckpt_graph *g,
                              int tp, int pp, ckpt_map_result **keep)
{
    size_t n = 0, i, k;
    ckpt_map_input *in = NULL;
    int rc = 0;

    for (i = 0; i < ckpt_set_member_count(set); i++) {
        const ckpt_member *mb = ckpt_set_member_at(set, i);
        const ckpt_ckpt *ck;
        if (strcmp(mb->role, "model") != 0 || (mb->at.tp < 0 ? 0 : mb->at.tp) != tp ||
            (mb->at.pp < 0 ? 0 : mb->at.pp) != pp)
            continue;
        if ((rc = ckpt_set_member_open(set, i, &ck)) < 0)
            break;
        ckpt_map_input *grown = realloc(in, (n + ckpt_tensor_count(ck) + 1) * sizeof *in);
        if (!grown) {
            rc = ckpt_error_oom();
            break;
        }
        in = grown;
        for (k = 0; k < ckpt_tensor_count(ck) && rc == 0; k++, n++) {
            in[n].name = ckpt_tensor_at(ck, k)->name;
            in[n].home = i;
            rc = ckpt_node_tensor(g, ckpt_tensor_at(ck, k), &in[n].node);
        }
    }
    if (rc == 0)
        rc = ckpt_map_apply(o->map, o->params, g, in, n, o->variants, keep);
    for (k = 0; rc == 0 && k < ckpt_map_result_count(*keep); k++) {
        const ckpt_map_output *out = ckpt_map_result_at(*keep, k);
        rc = ckpt_paddle_model_add_shard(model, tp, pp, out->name, out->node, NULL);
    }
    free(in);
    return rc;
}

int ckpt_paddle__open_te(ckpt_paddle_model **out, ckpt_map_result ***results, size_t *n_results, ckpt_set *set,
                         ckpt_graph *g, const char *dir, const ckpt_paddle_te_options *o)
{
    const ckpt_set_info *si = ckpt_set_info_of(set);
    char *beside = NULL, *config = NULL;
    int tp, pp, rc;

    if ((!o->config && (rc = ckpt_paddle__config_beside(dir, &beside)) < 0) ||
        ((o->config || beside) && (rc = ckpt_paddle__read_text(o->config ? o->config : beside, &config)) < 0) ||
        (rc = ckpt_paddle_model_new(out, g, si->tp, si->pp, config, NULL)) < 0)
        goto done;
    if (!(*results = calloc((size_t)si->tp * (size_t)si->pp, sizeof **results))) {
        rc = ckpt_error_oom();
        goto done;
    }
    *n_results = (size_t)si->tp * (size_t)si->pp;
    for (pp = 0; pp < si->pp && rc == 0; pp++)
        for (tp = 0; tp < si->tp && rc == 0; tp++)
            rc = add_converted_rank(o, *out, set, g, tp, pp, &(*results)[pp * si->tp + tp]);
    if (rc == 0)
        rc = ckpt_paddle_model_finish(*out);
done:
    free(beside);
    free(config);
    return rc;
}

typedef struct rank_job {
    const ckpt_map *map; /* NULL: the tensors as they are */
    const ckpt_map_params *params;
    const ckpt_paddle_target *t;
    ckpt_plan *plan;
} rank_job;

/* One target rank's model file, the map applied on the way out. */
static int plan_rank(void *payload, int tp, int pp, const char *const *names, const ckpt_node *const *nodes, size_t n)
{
    const rank_job *j = payload;
    ckpt_map_input *in = NULL;
    ckpt_map_result *r = NULL;
    ckpt_buf rel = CKPT_BUF_INIT;
    size_t i, f;
    int rc;

    if ((rc = ckpt_paddle_rank_file("model_state", ".pdparams", tp, pp, j->t->tp, j->t->pp, &rel)) < 0 ||
        (rc = ckpt_plan_add_file(j->plan, (const char *)rel.data, "pdparams", &f)) < 0)
        goto done;
    if (!j->map) {
        for (i = 0; i < n && rc == 0; i++)
            rc = ckpt_plan_add_tensor(j->plan, f, names[i], nodes[i], 0, NULL);
        goto done;
    }
    if (!(in = malloc((n + 1) * sizeof *in))) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < n; i++) {
        in[i].name = names[i];
        in[i].node = nodes[i];
        in[i].home = 0;
    }
    rc = ckpt_map_apply(j->map, j->params, ckpt_plan_graph(j->plan), in, n, NULL, &r);
    for (i = 0; rc == 0 && i < ckpt_map_result_count(r); i++) {
        const ckpt_map_output *out = ckpt_map_result_at(r, i);
        rc = ckpt_plan_add_tensor(j->plan, f, out->name, out->node, 0, NULL);
    }
done:
    if (rc < 0 && rel.data)
        ckpt_error_prefix("%s", (const char *)rel.data);
    ckpt_map_result_free(r);
    ckpt_buf_dispose(&rel);
    free(in);
    return rc;
}

/* A model file per rank of t, then config.json and the directory's other files. */
static int plan_ranks(ckpt_paddle_model *m, const ckpt_paddle_target *t, const ckpt_map *map,
                      const ckpt_map_params *params, ckpt_plan *plan)
{
    rank_job rj;
    int rc;

    rj.map = map;
    rj.params = params;
    rj.t = t;
    rj.plan = plan;
    if ((rc = ckpt_paddle__each_rank(m, t, plan_rank, &rj)) < 0)
        return rc;
    return ckpt_paddle_plan_other_files(m, t, plan);
}

int ckpt_paddle__plan_te(ckpt_paddle_model *m, const ckpt_paddle_target *t, const char *dir, const ckpt_family *f,
                         ckpt_plan *plan)
{
    const ckpt_paddle_model_info *info = ckpt_paddle_model_info_of(m);
    const char *where = info->config ? info->config : dir, *te_map = f ? ckpt_family_string(f, "paddle.te_map") : NULL;
    ckpt_map *own_map = NULL;
    ckpt_map_params *own_params = NULL;
    int rc;

    /* the layout PaddleNLP can run first, then what the TE tensors can hold of it */
    if ((rc = ckpt_paddle__te_llama_only(where, m->family)) < 0 ||
        (rc = ckpt_paddle_layout_check(where, info->config_json, info->num_layers, t->tp, t->pp)) < 0 ||
        (rc = ckpt_paddle_fused_kv_check(where, info->config_json, t->tp,
                                         "Transformer Engine's fused layernorm_qkv")) < 0)
        return rc;
    if (!t->te_map && !te_map)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: no Transformer Engine map (te_map) for it",
                               where);
    if ((!t->te_map && (rc = ckpt_map_builtin(&own_map, te_map)) < 0) ||
        (!t->te_params && (rc = ckpt_paddle_te_params(&own_params, 1, dir, NULL, 0, 0)) < 0))
        goto done;
    rc = plan_ranks(m, t, t->te_map ? t->te_map : own_map, t->te_params ? t->te_params : own_params, plan);
done:
    ckpt_map_params_free(own_params);
    ckpt_map_free(own_map);
    return rc;
}

int ckpt_paddle__plan_from_te(ckpt_paddle_model *m, const ckpt_paddle_target *t, ckpt_set *set, ckpt_plan *plan)
{
    size_t i;
    int rc = plan_ranks(m, t, NULL, NULL, plan);

    /* a model built from converted ranks knows no directory: its other files are copied here */
    for (i = 0; rc == 0 && i < ckpt_set_member_count(set); i++) {
        const ckpt_member *mb = ckpt_set_member_at(set, i);
        if (strcmp(mb->role, "other") == 0 && strcmp(mb->rel, "config.json") != 0)
            rc = ckpt_plan_add_copy(plan, mb->rel, mb->path);
    }
    return rc;
}
