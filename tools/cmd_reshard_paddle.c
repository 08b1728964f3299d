/* ckptconv reshard on a PaddleNLP directory: model_state[.tpXX][_ppYY].pdparams and their
 * .pdopt files at another TP/PP layout, as one plan. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <ckpt/framework.h>
#include <stdlib.h>
#include <string.h>

static int print_json(const cli_reshard_job *j, const ckpt_paddle_model_info *in, const ckpt_plan *plan,
                       const ckpt_plan_report *rep, double seconds)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *from = cJSON_AddObjectToObject(o, "from"), *to = cJSON_AddObjectToObject(o, "to");

    cJSON_AddStringToObject(o, "command", "reshard");
    cJSON_AddStringToObject(o, "layout", "paddle");
    cJSON_AddStringToObject(o, "input", j->in);
    cJSON_AddStringToObject(o, "output", j->out);
    cJSON_AddNumberToObject(from, "tp", in->tp);
    cJSON_AddNumberToObject(from, "pp", in->pp);
    cJSON_AddNumberToObject(to, "tp", j->tp);
    cJSON_AddNumberToObject(to, "pp", j->pp);
    cJSON_AddNumberToObject(o, "num_layers", (double)in->num_layers);
    cJSON_AddBoolToObject(o, "optimizer", in->has_optimizer && !j->no_optimizer);
    cJSON_AddBoolToObject(o, "master_weights", in->master_weights && !j->no_optimizer);
    return cli_plan_report(o, plan, j->p->dry_run ? NULL : rep, seconds);
}

/* The job: the paddle framework at the same framework, the target's sizes those given (the
 * source's otherwise). */
static int plan_paddle(const cli_reshard_job *j, ckpt_plan *plan, ckpt_fw **src)
{
    ckpt_job_options jo = CKPT_JOB_OPTIONS_INIT;

    jo.from.framework = CKPT_FAMILY_PADDLE;
    jo.from.no_optimizer = j->no_optimizer;
    jo.target.tp = j->tp_set ? j->tp : 0;
    jo.target.pp = j->pp_set ? j->pp : 0;
    jo.target.paddle.drop_optimizer = j->no_optimizer;
    return ckpt_job_plan(plan, j->in, &jo, src);
}

int cli_reshard_paddle(const cli_reshard_job *j)
{
    const ckpt_paddle_model_info *info;
    ckpt_plan_report rep;
    ckpt_plan *plan = NULL;
    ckpt_fw *src = NULL;
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    double start = cli_now();
    int rc;

    memset(&rep, 0, sizeof rep);
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = cli_plan_drop_option(plan, j->p)) < 0 ||
        (rc = plan_paddle(j, plan, &src)) < 0)
        goto done;
    info = ckpt_paddle_model_info_of(ckpt_fw_native(src, CKPT_FAMILY_PADDLE));
    t.tp = j->tp_set ? j->tp : info->tp;
    t.pp = j->pp_set ? j->pp : info->pp;
    if (j->p->dry_run && j->p->json) {
        rc = print_json(j, info, plan, &rep, 0);
        goto done;
    }
    if (j->p->dry_run) {
        char summary[512];
        snprintf(summary, sizeof summary, "reshard %s (PaddleNLP, TP %d, PP %d) -> %s (TP %d, PP %d)", j->in,
                 info->tp, info->pp, j->out, t.tp, t.pp);
        rc = cli_plan_dry_run(plan, summary);
        goto done;
    }
    if ((rc = cli_plan_execute("reshard", plan, j->out, j->p, &rep)) < 0)
        goto done;
    if (j->p->json) {
        rc = print_json(j, info, plan, &rep, cli_now() - start);
    } else if (!j->p->quiet) {
        char size[32];
        cli_plan_print_dropped(plan, j->p);
        fprintf(stderr, "wrote %s: PaddleNLP TP %d, PP %d -> TP %d, PP %d, %zu files, %s%s in %.2f s\n", j->out,
                info->tp, info->pp, t.tp, t.pp, rep.files, cli_human_size(rep.bytes_written, size, sizeof size),
                info->has_optimizer && !j->no_optimizer
                    ? (info->master_weights ? ", optimizer state and master weights resharded"
                                            : ", optimizer state resharded")
                    : "",
                cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
    return rc < 0 ? cli_fail("reshard") : CLI_EXIT_OK;
}
