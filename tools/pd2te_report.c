/* pd2te / te2pd: the plan on stdout (--dry-run), and the JSON report (--json). */
#include "pd2te.h"

#include <stdlib.h>
#include <string.h>

uint64_t pd_output_bytes(const ckpt_node *x)
{
    return (uint64_t)ckpt_node_numel(x) * ckpt_dtype_size(ckpt_node_dtype(x));
}

void pd_print_plan(const pd_dir *d, ckpt_map_result *const *results)
{
    ckpt_buf how = { 0 };
    char shape[96], size[32];
    size_t i, k;

    for (i = 0; i < d->n_models; i++) {
        const pd_model_file *f = &d->models[i];
        const ckpt_map_result *r = results[f->space];
        size_t n = 0;
        uint64_t bytes = 0;
        for (k = 0; k < ckpt_map_result_count(r); k++)
            if (ckpt_map_result_at(r, k)->home == i) {
                n++;
                bytes += pd_output_bytes(ckpt_map_result_at(r, k)->node);
            }
        printf("%s: %zu tensors in, %zu out, %s\n", f->name, ckpt_tensor_count(f->ck), n,
               cli_human_size(bytes, size, sizeof size));
        for (k = 0; k < ckpt_map_result_count(r); k++) {
            const ckpt_map_output *o = ckpt_map_result_at(r, k);
            int named;
            if (o->home != i)
                continue;
            ckpt_buf_clear(&how);
            if (ckpt_node_describe(o->node, &how) < 0 || ckpt_buf_putc(&how, '\0') < 0)
                break;
            /* a named rule says more than the sources; an unnamed one repeats them */
            named = o->rule && !strchr(o->rule, '{');
            printf("  %s %s %s <- %s%s%s%s\n", o->name, ckpt_dtype_name(ckpt_node_dtype(o->node)),
                   cli_shape(ckpt_node_shape(o->node), ckpt_node_ndim(o->node), shape, sizeof shape),
                   (const char *)how.data, named ? "  [" : "", named ? o->rule : "", named ? "]" : "");
        }
    }
    for (i = 0; i < d->n_spaces; i++)
        if (d->spaces[i].index_name)
            printf("%s: rewritten, %zu names\n", d->spaces[i].index_name, ckpt_map_result_count(results[i]));
    for (i = 0; i < d->n_others; i++) {
        if (d->others[i].why)
            printf("skip %s: %s\n", d->others[i].name, d->others[i].why);
        else
            printf("copy %s\n", d->others[i].name);
    }
    ckpt_buf_dispose(&how);
}

cJSON *pd_report_new(const char *cmd, const char *in, const char *out, const char *map, int dry_run,
                     const pd_dir *d)
{
    cJSON *o = cJSON_CreateObject(), *copied = cJSON_CreateArray(), *skipped = cJSON_CreateArray();
    size_t i;

    cJSON_AddStringToObject(o, "command", cmd);
    cJSON_AddStringToObject(o, "input", in);
    cJSON_AddStringToObject(o, "output", out);
    cJSON_AddStringToObject(o, "map", map);
    cJSON_AddBoolToObject(o, "dry_run", dry_run);
    cJSON_AddItemToObject(o, "files", cJSON_CreateArray());
    cJSON_AddItemToObject(o, "indexes", cJSON_CreateArray());
    for (i = 0; i < d->n_others; i++) {
        if (d->others[i].why) {
            cJSON *s = cJSON_CreateObject();
            cJSON_AddStringToObject(s, "file", d->others[i].name);
            cJSON_AddStringToObject(s, "reason", d->others[i].why);
            cJSON_AddItemToArray(skipped, s);
        } else {
            cJSON_AddItemToArray(copied, cJSON_CreateString(d->others[i].name));
        }
    }
    cJSON_AddItemToObject(o, "copied", copied);
    cJSON_AddItemToObject(o, "skipped", skipped);
    return o;
}

/* One converted file in the JSON report; with the tensors and their sources on a dry run. */
void pd_report_file(cJSON *report, const pd_model_file *f, size_t home, const ckpt_map_result *r,
                        const ckpt_convert_report *written, int with_tensors)
{
    cJSON *o = cJSON_CreateObject(), *tensors = with_tensors ? cJSON_CreateArray() : NULL;
    ckpt_buf how = { 0 };
    size_t k, n = 0;
    uint64_t bytes = 0;

    for (k = 0; k < ckpt_map_result_count(r); k++) {
        const ckpt_map_output *out = ckpt_map_result_at(r, k);
        cJSON *t, *shape;
        int dim;
        if (out->home != home)
            continue;
        n++;
        bytes += pd_output_bytes(out->node);
        if (!tensors)
            continue;
        t = cJSON_CreateObject();
        shape = cJSON_CreateArray();
        cJSON_AddStringToObject(t, "name", out->name);
        cJSON_AddStringToObject(t, "dtype", ckpt_dtype_name(ckpt_node_dtype(out->node)));
        for (dim = 0; dim < ckpt_node_ndim(out->node); dim++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)ckpt_node_shape(out->node)[dim]));
        cJSON_AddItemToObject(t, "shape", shape);
        ckpt_buf_clear(&how);
        if (ckpt_node_describe(out->node, &how) == 0 && ckpt_buf_putc(&how, '\0') == 0)
            cJSON_AddStringToObject(t, "source", (const char *)how.data);
        if (out->rule)
            cJSON_AddStringToObject(t, "rule", out->rule);
        else
            cJSON_AddNullToObject(t, "rule");
        cJSON_AddItemToArray(tensors, t);
    }
    ckpt_buf_dispose(&how);
    cJSON_AddStringToObject(o, "file", f->name);
    cJSON_AddNumberToObject(o, "tensors_in", (double)ckpt_tensor_count(f->ck));
    cJSON_AddNumberToObject(o, "tensors_out", (double)n);
    cJSON_AddNumberToObject(o, "tensor_bytes", (double)bytes);
    if (written)
        cJSON_AddNumberToObject(o, "bytes_written", (double)written->bytes_written);
    if (tensors)
        cJSON_AddItemToObject(o, "tensors", tensors);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(report, "files"), o);
}

void pd_report_print(cJSON *report, double seconds)
{
    char *text;

    cJSON_AddNumberToObject(report, "seconds", seconds);
    if ((text = cJSON_Print(report)))
        printf("%s\n", text);
    free(text);
}
