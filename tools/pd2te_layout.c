/* pd2te / te2pd with --tp/--pp: convert and reshard in one pass. The input's ranks are read
 * as one PaddleNLP model at full shapes (te2pd: each rank converted back first), cut into
 * the target layout, and each target rank's tensors go through the map on their way out. */
#include "pd2te.h"

#include <ckpt/sys/common.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensors of one source rank (all its model files: size shards may split a layer's q, k
 * and v) with the map applied: Paddle names, added to the model as that rank's shards. */
static int add_converted_rank(const pd_layout_job *j, ckpt_paddle_model *model, ckpt_set *set, ckpt_graph *g,
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
        rc = ckpt_map_apply(j->map, j->params, g, in, n, j->variants, keep);
    for (k = 0; rc == 0 && k < ckpt_map_result_count(*keep); k++) {
        const ckpt_map_output *o = ckpt_map_result_at(*keep, k);
        rc = ckpt_paddle_model_add_shard(model, tp, pp, o->name, o->node, NULL);
    }
    free(in);
    return rc;
}

/* te2pd: the TE ranks converted back to Paddle names, as one model. */
static int open_converted(const pd_layout_job *j, ckpt_set *set, ckpt_graph *g, ckpt_paddle_model **out,
                          ckpt_map_result ***results)
{
    const ckpt_set_info *si = ckpt_set_info_of(set);
    char *config = NULL;
    int tp, pp, rc;

    if ((j->config && (rc = cli_read_text(j->config, &config)) < 0) ||
        (rc = ckpt_paddle_model_new(out, g, si->tp, si->pp, config, NULL)) < 0)
        goto done;
    if (!(*results = calloc((size_t)si->tp * (size_t)si->pp, sizeof **results))) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (pp = 0; pp < si->pp && rc == 0; pp++)
        for (tp = 0; tp < si->tp && rc == 0; tp++)
            rc = add_converted_rank(j, *out, set, g, tp, pp, &(*results)[pp * si->tp + tp]);
    if (rc == 0)
        rc = ckpt_paddle_model_finish(*out);
done:
    free(config);
    return rc;
}

/* One target rank's model file: pd2te maps the Paddle tensors on the way out. */
static int plan_rank(const pd_layout_job *j, ckpt_paddle_model *model, const ckpt_paddle_target *t, ckpt_plan *plan,
                     int tp, int pp)
{
    const char **names = NULL;
    const ckpt_node **nodes = NULL;
    ckpt_map_input *in = NULL;
    ckpt_map_result *r = NULL;
    ckpt_buf rel = CKPT_BUF_INIT;
    size_t n = 0, i, f;
    int rc;

    if ((rc = ckpt_paddle_model_rank(model, t, tp, pp, &names, &nodes, &n)) < 0 ||
        (rc = ckpt_paddle_rank_file("model_state", ".pdparams", tp, pp, t->tp, t->pp, &rel)) < 0 ||
        (rc = ckpt_plan_add_file(plan, (const char *)rel.data, "pdparams", &f)) < 0)
        goto done;
    if (!j->to_te) {
        for (i = 0; i < n && rc == 0; i++)
            rc = ckpt_plan_add_tensor(plan, f, names[i], nodes[i], 0, NULL);
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
    rc = ckpt_map_apply(j->map, j->params, ckpt_plan_graph(plan), in, n, j->variants, &r);
    for (i = 0; rc == 0 && i < ckpt_map_result_count(r); i++) {
        const ckpt_map_output *o = ckpt_map_result_at(r, i);
        rc = ckpt_plan_add_tensor(plan, f, o->name, o->node, 0, NULL);
    }
done:
    if (rc < 0 && rel.data)
        ckpt_error_prefix("%s", (const char *)rel.data);
    ckpt_map_result_free(r);
    ckpt_buf_dispose(&rel);
    free(in);
    free((void *)names);
    free((void *)nodes);
    return rc;
}

static int print_json(const pd_layout_job *j, const ckpt_paddle_model_info *in, const ckpt_paddle_target *t,
                       const ckpt_plan *plan, const ckpt_plan_report *rep, double seconds)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *from = cJSON_AddObjectToObject(o, "from"), *to = cJSON_AddObjectToObject(o, "to");

    cJSON_AddStringToObject(o, "command", j->cmd);
    cJSON_AddStringToObject(o, "input", j->in);
    cJSON_AddStringToObject(o, "output", j->out);
    cJSON_AddStringToObject(o, "map", ckpt_map_name(j->map));
    cJSON_AddNumberToObject(from, "tp", in->tp);
    cJSON_AddNumberToObject(from, "pp", in->pp);
    cJSON_AddNumberToObject(to, "tp", t->tp);
    cJSON_AddNumberToObject(to, "pp", t->pp);
    return cli_plan_report(o, plan, rep, seconds);
}

int pd_run_layout(const pd_layout_job *j)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_paddle_model_options mo = CKPT_PADDLE_MODEL_OPTIONS_INIT;
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    ckpt_map_result **results = NULL;
    ckpt_paddle_model *model = NULL;
    ckpt_plan_report rep;
    ckpt_plan *plan = NULL;
    ckpt_set *set = NULL;
    const ckpt_paddle_model_info *info;
    size_t i, n_results = 0;
    double start = cli_now();
    int tp, pp, rc;

    memset(&rep, 0, sizeof rep);
    so.layout = "paddle";
    mo.no_optimizer = 1;
    if ((rc = ckpt_outdir_check_apart(j->out, j->in)) < 0 || (rc = ckpt_set_open(&set, j->in, &so)) < 0 ||
        (rc = ckpt_plan_new(&plan)) < 0)
        goto done;
    n_results = (size_t)ckpt_set_info_of(set)->tp * (size_t)ckpt_set_info_of(set)->pp;
    rc = j->to_te ? ckpt_paddle_model_open(&model, set, ckpt_plan_graph(plan), &mo)
                  : open_converted(j, set, ckpt_plan_graph(plan), &model, &results);
    if (rc < 0)
        goto done;
    info = ckpt_paddle_model_info_of(model);
    t.tp = j->tp ? j->tp : info->tp;
    t.pp = j->pp ? j->pp : info->pp;
    /* the layout PaddleNLP can run first, then what the TE tensors can hold of it */
    if (j->to_te && ((rc = ckpt_paddle_layout_check(info->config ? info->config : j->in, info->config_json,
                                                    info->num_layers, t.tp, t.pp)) < 0 ||
                     (rc = ckpt_paddle_fused_kv_check(info->config ? info->config : j->in, info->config_json, t.tp,
                                                      "Transformer Engine's fused layernorm_qkv")) < 0))
        goto done;
    for (pp = 0; pp < t.pp && rc == 0; pp++)
        for (tp = 0; tp < t.tp && rc == 0; tp++)
            rc = plan_rank(j, model, &t, plan, tp, pp);
    if (rc == 0)
        rc = ckpt_paddle_plan_other_files(model, &t, plan);
    /* a model built from converted ranks knows no directory: its other files are copied here */
    for (i = 0; !j->to_te && rc == 0 && i < ckpt_set_member_count(set); i++) {
        const ckpt_member *mb = ckpt_set_member_at(set, i);
        if (strcmp(mb->role, "other") == 0 && strcmp(mb->rel, "config.json") != 0)
            rc = ckpt_plan_add_copy(plan, mb->rel, mb->path);
    }
    if (rc < 0)
        goto done;
    if (j->run->json && j->run->dry_run) {
        rc = print_json(j, info, &t, plan, NULL, 0);
        goto done;
    }
    if (j->run->dry_run) {
        char summary[512];
        snprintf(summary, sizeof summary, "%s %s (TP %d, PP %d) -> %s (TP %d, PP %d)", j->cmd, j->in, info->tp,
                 info->pp, j->out, t.tp, t.pp);
        rc = cli_plan_dry_run(plan, summary);
        goto done;
    }
    if ((rc = cli_plan_execute(j->cmd, plan, j->out, j->run, &rep)) < 0)
        goto done;
    if (j->run->json) {
        rc = print_json(j, info, &t, plan, &rep, cli_now() - start);
    } else if (!j->run->quiet) {
        char size[32];
        fprintf(stderr, "wrote %s: %zu files at TP %d, PP %d (from TP %d, PP %d), %s in %.2f s\n", j->out, rep.files,
                t.tp, t.pp, info->tp, info->pp, cli_human_size(rep.bytes_written, size, sizeof size),
                cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    for (i = 0; results && i < n_results; i++)
        ckpt_map_result_free(results[i]);
    free(results);
    ckpt_paddle_model_close(model);
    ckpt_plan_free(plan);
    ckpt_set_close(set);
    return rc;
}
