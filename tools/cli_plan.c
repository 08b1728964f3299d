/* What the commands that write a plan share: their common options, --dry-run, running the
 * plan with a progress bar, and the one report (text or JSON) of what was or would be
 * written and what was left out. */
#include "cli.h"

#include <ckpt/sys/common.h>
#include <cjson/cJSON.h>

#include <stdint.h>
#include <string.h>

#include <stdlib.h>

int cli_plan_option(const char *cmd, int c, const char *arg, cli_plan_args *a)
{
    switch (c) {
    case CLI_O_DRY_RUN: a->dry_run = 1; return 0;
    case CLI_O_JSON: a->json = 1; return 0;
    case CLI_O_FORCE: a->force = 1; return 0;
    case 'q': a->quiet = 1; return 0;
    case CLI_O_MEMORY: return cli_option_memory(cmd, arg, &a->write.memory);
    case CLI_O_THREADS: return cli_option_threads(cmd, arg, &a->write.threads);
    case CLI_O_DROP:
        if (!*arg)
            return cli_usage_error(cmd, "--drop: expected a tensor name pattern such as 'model.*.inv_freq'");
        if (a->n_drop == sizeof a->drop / sizeof a->drop[0])
            return cli_usage_error(cmd, "--drop: at most %zu patterns", sizeof a->drop / sizeof a->drop[0]);
        a->drop[a->n_drop++] = arg;
        return 0;
    default: return -1;
    }
}

int cli_split_option(const char *cmd, int c, const char *arg, ckpt_megatron_target *t)
{
    long long v = 0;
    int rc;

    switch (c) {
    case CLI_O_FIRST_STAGE:
    case CLI_O_LAST_STAGE:
        rc = cli_option_int(cmd,
                            c == CLI_O_FIRST_STAGE ? "--decoder-first-pipeline-num-layers"
                                                   : "--decoder-last-pipeline-num-layers",
                            arg, 1, INT32_MAX, &v);
        *(c == CLI_O_FIRST_STAGE ? &t->first_stage_layers : &t->last_stage_layers) = v;
        return rc;
    case CLI_O_ACCOUNT_EMBEDDING: t->account_for_embedding = 1; return 0;
    case CLI_O_ACCOUNT_LOSS: t->account_for_loss = 1; return 0;
    default: return -1;
    }
}

/* The input tensors the plan leaves out, a line per reason: the first name and how many
 * more (--json lists every one). */
static void print_dropped(FILE *out, const ckpt_plan *plan)
{
    size_t n = ckpt_plan_dropped_count(plan), i, k;

    for (i = 0; i < n; i++) {
        const char *reason, *other, *name = ckpt_plan_dropped_at(plan, i, &reason);
        size_t more = 0, seen = 0;
        for (k = 0; k < n; k++) {
            ckpt_plan_dropped_at(plan, k, &other);
            if (strcmp(other, reason) == 0)
                *(k < i ? &seen : &more) += 1;
        }
        if (seen)
            continue;
        if (more > 1)
            fprintf(out, "dropped %s and %zu more (%s)\n", name, more - 1, reason);
        else
            fprintf(out, "dropped %s (%s)\n", name, reason);
    }
}

int cli_plan_dry_run(const ckpt_plan *plan, const char *summary)
{
    ckpt_buf b = CKPT_BUF_INIT;
    int rc = ckpt_plan_describe(plan, 1, &b);

    if (rc == 0) {
        printf("%s: %zu files, nothing written\n%s", summary, ckpt_plan_file_count(plan),
               b.data ? (const char *)b.data : "");
        print_dropped(stdout, plan);
    }
    ckpt_buf_dispose(&b);
    return rc;
}

int cli_plan_leave_out(void *plan, const char *name)
{
    return ckpt_plan_leave_out(plan, name, NULL);
}

int cli_plan_drop_option(ckpt_plan *plan, const cli_plan_args *a)
{
    size_t i;
    int rc;

    for (i = 0; i < a->n_drop; i++)
        if ((rc = ckpt_plan_drop_pattern(plan, a->drop[i])) < 0)
            return rc;
    return 0;
}

int cli_plan_execute(const char *cmd, const ckpt_plan *plan, const char *out, const cli_plan_args *a,
                     ckpt_plan_report *report)
{
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    int rc;

    po.force = a->force;
    po.convert = a->write;
    if (!a->quiet && !a->json) {
        po.convert.progress = cli_progress;
        po.convert.progress_payload = (void *)cmd;
    }
    rc = ckpt_plan_execute(plan, out, &po, report);
    cli_progress_done();
    if (!a->quiet && !a->json && report->notes.len) {
        const char *p = (const char *)report->notes.data, *nl;
        for (; *p; p = nl + 1) {
            if (!(nl = strchr(p, '\n')))
                nl = p + strlen(p);
            fprintf(stderr, "note: %.*s\n", (int)(nl - p), p);
            if (!*nl)
                break;
        }
    }
    return rc;
}

int cli_plan_report(cJSON *job, const ckpt_plan *plan, const ckpt_plan_report *written, double seconds)
{
    ckpt_buf b = CKPT_BUF_INIT;
    cJSON *common = NULL, *item;
    char *text = NULL;
    int rc = ckpt_plan_json(plan, written, &b);

    if (rc == 0 && !(common = cJSON_Parse((const char *)b.data)))
        rc = ckpt_error_oom();
    /* the job's own keys first, then the ones every job shares */
    while (rc == 0 && (item = cJSON_DetachItemViaPointer(common, common->child)) != NULL) {
        cJSON_DeleteItemFromObjectCaseSensitive(job, item->string);
        cJSON_AddItemToObject(job, item->string, item);
    }
    if (rc == 0 && written && !cJSON_AddNumberToObject(job, "seconds", seconds))
        rc = ckpt_error_oom();
    if (rc == 0 && !(text = cJSON_Print(job)))
        rc = ckpt_error_oom();
    if (rc == 0)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(common);
    cJSON_Delete(job);
    ckpt_buf_dispose(&b);
    return rc;
}

void cli_json_add_lines(cJSON *array, const char *text)
{
    while (text && *text) {
        size_t n = strcspn(text, "\n");
        char *line = n ? strndup(text, n) : NULL;
        if (line)
            cJSON_AddItemToArray(array, cJSON_CreateString(line));
        free(line);
        text += n + (text[n] == '\n');
    }
}

void cli_plan_print_dropped(const ckpt_plan *plan, const cli_plan_args *a)
{
    if (!a->quiet && !a->json)
        print_dropped(stderr, plan);
}
