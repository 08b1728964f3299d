/* What the commands that write a plan (reshard, hf2mcore, mcore2hf) share: their common
 * options, --dry-run, and running the plan with a progress bar. */
#include "cli.h"

#include <cjson/cJSON.h>

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
    default: return -1;
    }
}

int cli_plan_dry_run(const ckpt_plan *plan, const char *summary)
{
    ckpt_buf b = CKPT_BUF_INIT;
    int rc = ckpt_plan_describe(plan, 1, &b);

    if (rc == 0)
        printf("%s: %zu files, nothing written\n%s", summary, ckpt_plan_file_count(plan),
               b.data ? (const char *)b.data : "");
    ckpt_buf_dispose(&b);
    return rc;
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

void cli_plan_json_print(struct cJSON *report, const ckpt_plan *plan, const ckpt_plan_report *written,
                         double seconds)
{
    cJSON *files = cJSON_AddArrayToObject(report, "files");
    size_t i;
    char *text;

    for (i = 0; i < ckpt_plan_file_count(plan); i++) {
        const ckpt_plan_file *f = ckpt_plan_file_at(plan, i);
        cJSON *jf = cJSON_CreateObject();
        cJSON_AddStringToObject(jf, "path", f->rel);
        cJSON_AddNumberToObject(jf, "tensors", (double)f->n_tensors);
        cJSON_AddNumberToObject(jf, "bytes", (double)f->tensor_bytes);
        cJSON_AddItemToArray(files, jf);
    }
    if (written) {
        cJSON_AddNumberToObject(report, "bytes_written", (double)written->bytes_written);
        cJSON_AddNumberToObject(report, "seconds", seconds);
    }
    text = cJSON_Print(report);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(report);
}
