/* A plan, and what executing it wrote, as one JSON object: the part of every job's --json
 * report that is the same for all of them (--dry-run --json included), so that a script reads
 * a reshard, an hf2mcore or a paddle2hf run with the same keys. */
#include "engine.h"

#include <ckpt/plan.h>
#include <ckpt/sys/common.h>

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

static const char *kind_name(int kind)
{
    return kind == CKPT_PLAN_TENSORS ? "tensors" : kind == CKPT_PLAN_BYTES ? "bytes" : "copy";
}

static int add_files(cJSON *o, const ckpt_plan *p, const ckpt_plan_report *written)
{
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    size_t i, tensors = 0;

    if (!files)
        return -1;
    for (i = 0; i < ckpt_plan_file_count(p); i++) {
        const ckpt_plan_file *f = ckpt_plan_file_at(p, i);
        cJSON *jf = cJSON_CreateObject();
        if (!jf || !cJSON_AddItemToArray(files, jf) || !cJSON_AddStringToObject(jf, "path", f->rel) ||
            !cJSON_AddStringToObject(jf, "kind", kind_name(f->kind)) ||
            (f->kind == CKPT_PLAN_TENSORS && !cJSON_AddStringToObject(jf, "format", f->format)) ||
            !cJSON_AddNumberToObject(jf, "tensors", (double)f->n_tensors) ||
            !cJSON_AddNumberToObject(jf, "bytes", (double)f->tensor_bytes) ||
            (written && written->file_bytes &&
             !cJSON_AddNumberToObject(jf, "bytes_written", (double)written->file_bytes[i])))
            return -1;
        tensors += f->n_tensors;
    }
    if (!cJSON_AddNumberToObject(o, "tensors", (double)tensors) ||
        !cJSON_AddNumberToObject(o, "bytes", (double)ckpt_plan_total_bytes(p)))
        return -1;
    return 0;
}

static int add_dropped(cJSON *o, const ckpt_plan *p)
{
    cJSON *list = cJSON_AddArrayToObject(o, "dropped");
    size_t i;

    if (!list)
        return -1;
    for (i = 0; i < ckpt_plan_dropped_count(p); i++) {
        const char *reason, *name = ckpt_plan_dropped_at(p, i, &reason);
        cJSON *d = cJSON_CreateObject();
        if (!d || !cJSON_AddItemToArray(list, d) || !cJSON_AddStringToObject(d, "name", name) ||
            !cJSON_AddStringToObject(d, "reason", reason))
            return -1;
    }
    return 0;
}

static int add_notes(cJSON *o, const ckpt_plan *p)
{
    const char *line = ckpt_plan_notes(p), *nl;
    cJSON *list;

    if (!*line)
        return 0;
    if (!(list = cJSON_AddArrayToObject(o, "notes")))
        return -1;
    for (; *line; line = nl + 1) {
        char *one;
        int ok;
        nl = strchr(line, '\n'); /* every note ends with one */
        if (!(one = malloc((size_t)(nl - line) + 1)))
            return -1;
        memcpy(one, line, (size_t)(nl - line));
        one[nl - line] = 0;
        ok = cJSON_AddItemToArray(list, cJSON_CreateString(one));
        free(one);
        if (!ok)
            return -1;
    }
    return 0;
}

int ckpt_plan_json(const ckpt_plan *p, const ckpt_plan_report *written, ckpt_buf *out)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL;
    int rc = 0;

    if (!o || !cJSON_AddBoolToObject(o, "dry_run", written == NULL) || add_files(o, p, written) < 0 ||
        add_dropped(o, p) < 0 || add_notes(o, p) < 0 ||
        (written && !cJSON_AddNumberToObject(o, "bytes_written", (double)written->bytes_written)) ||
        !(text = cJSON_PrintUnformatted(o)))
        rc = ckpt_error_oom();
    if (rc == 0)
        rc = ckpt_buf_puts(out, text);
    free(text);
    cJSON_Delete(o);
    return rc;
}
