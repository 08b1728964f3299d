/* pd2te / te2pd: the plan on stdout (--dry-run), and the JSON report (--json). */
#include "pd2te.h"

#include <stdlib.h>
#include <string.h>

uint64_t pd_node_bytes(const ckpt_node *x)
{
    return (uint64_t)ckpt_node_numel(x) * ckpt_dtype_size(ckpt_node_dtype(x));
}

/* Every output counted, as the index's total_size counts them. */
static uint64_t file_tensor_bytes(const ckpt_plan *plan, size_t f)
{
    const ckpt_node *node;
    uint64_t bytes = 0;
    size_t i;

    for (i = 0; ckpt_plan_tensor_at(plan, f, i, &node, NULL); i++)
        bytes += pd_node_bytes(node);
    return bytes;
}

static size_t tensors_in(const ckpt_paddle_te_job *j, size_t member)
{
    const ckpt_ckpt *ck;
    return ckpt_set_member_open(j->set, member, &ck) == 0 ? ckpt_tensor_count(ck) : 0;
}

/* The map's outputs of one tensor file, in the order they were added to it. */
typedef struct file_outputs {
    const ckpt_map_result *r;
    size_t member, next;
} file_outputs;

static const ckpt_map_output *next_output(file_outputs *it)
{
    while (it->next < ckpt_map_result_count(it->r)) {
        const ckpt_map_output *o = ckpt_map_result_at(it->r, it->next++);
        if (o->home == it->member)
            return o;
    }
    return NULL;
}

static file_outputs outputs_of(const ckpt_paddle_te_job *j, size_t f)
{
    file_outputs it;

    it.member = j->origin[f];
    it.r = j->results[j->group_of[it.member]];
    it.next = 0;
    return it;
}

void pd_print_plan(const ckpt_paddle_te_job *j)
{
    ckpt_buf how = CKPT_BUF_INIT;
    char shape[96], size[32];
    size_t f, i;

    for (f = 0; f < ckpt_plan_file_count(j->plan); f++) {
        const ckpt_plan_file *pf = ckpt_plan_file_at(j->plan, f);
        const ckpt_map_output *o;
        const ckpt_node *node;
        const char *name;
        file_outputs it;
        if (pf->kind != CKPT_PLAN_TENSORS)
            continue;
        it = outputs_of(j, f);
        printf("%s: %zu tensors in, %zu out, %s\n", pf->rel, tensors_in(j, it.member), pf->n_tensors,
               cli_human_size(file_tensor_bytes(j->plan, f), size, sizeof size));
        for (i = 0; (name = ckpt_plan_tensor_at(j->plan, f, i, &node, NULL)); i++) {
            const char *rule = (o = next_output(&it)) ? o->rule : NULL;
            /* a named rule says more than the sources; an unnamed one repeats them */
            int named = rule && !strchr(rule, '{');
            ckpt_buf_clear(&how);
            if (ckpt_node_describe(node, &how) < 0 || ckpt_buf_putc(&how, '\0') < 0)
                break;
            printf("  %s %s %s <- %s%s%s%s\n", name, ckpt_dtype_name(ckpt_node_dtype(node)),
                   ckpt_shape_format(ckpt_node_shape(node), ckpt_node_ndim(node), shape, sizeof shape), (const char *)how.data,
                   named ? "  [" : "", named ? rule : "", named ? "]" : "");
        }
    }
    for (f = 0; f < ckpt_plan_file_count(j->plan); f++)
        if (ckpt_plan_file_at(j->plan, f)->kind == CKPT_PLAN_BYTES)
            printf("%s: rewritten, %zu names\n", ckpt_plan_file_at(j->plan, f)->rel,
                   ckpt_map_result_count(j->results[j->origin[f]]));
    for (i = 0; i < ckpt_paddle_extra_count(j->dir); i++) {
        const ckpt_paddle_extra *x = ckpt_paddle_extra_at(j->dir, i);
        if (x->skip)
            printf("skip %s: %s\n", x->rel, x->skip);
        else
            printf("copy %s\n", x->rel);
    }
    ckpt_buf_dispose(&how);
}

cJSON *pd_report_new(const char *cmd, const char *in, const char *out, const char *map, const ckpt_paddle_te_job *j)
{
    cJSON *o = cJSON_CreateObject(), *copied = cJSON_CreateArray(), *skipped = cJSON_CreateArray();
    size_t i;

    cJSON_AddStringToObject(o, "command", cmd);
    cJSON_AddStringToObject(o, "input", in);
    cJSON_AddStringToObject(o, "output", out);
    cJSON_AddStringToObject(o, "map", map);
    for (i = 0; i < ckpt_paddle_extra_count(j->dir); i++) {
        const ckpt_paddle_extra *x = ckpt_paddle_extra_at(j->dir, i);
        if (x->skip) {
            cJSON *s = cJSON_CreateObject();
            cJSON_AddStringToObject(s, "file", x->rel);
            cJSON_AddStringToObject(s, "reason", x->skip);
            cJSON_AddItemToArray(skipped, s);
        } else {
            cJSON_AddItemToArray(copied, cJSON_CreateString(x->rel));
        }
    }
    cJSON_AddItemToObject(o, "copied", copied);
    cJSON_AddItemToObject(o, "skipped", skipped);
    return o;
}

/* One output tensor with its sources and its rule. */
static cJSON *report_tensor(const char *name, const ckpt_node *node, const char *rule, ckpt_buf *how)
{
    cJSON *t = cJSON_CreateObject(), *shape = cJSON_CreateArray();
    int dim;

    cJSON_AddStringToObject(t, "name", name);
    cJSON_AddStringToObject(t, "dtype", ckpt_dtype_name(ckpt_node_dtype(node)));
    for (dim = 0; dim < ckpt_node_ndim(node); dim++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)ckpt_node_shape(node)[dim]));
    cJSON_AddItemToObject(t, "shape", shape);
    ckpt_buf_clear(how);
    if (ckpt_node_describe(node, how) == 0 && ckpt_buf_putc(how, '\0') == 0)
        cJSON_AddStringToObject(t, "source", (const char *)how->data);
    if (rule)
        cJSON_AddStringToObject(t, "rule", rule);
    else
        cJSON_AddNullToObject(t, "rule");
    return t;
}

int pd_report_print(cJSON *report, const ckpt_paddle_te_job *j, const ckpt_plan_report *written, double seconds)
{
    cJSON *counts = cJSON_AddObjectToObject(report, "tensors_in"), *lists = NULL;
    ckpt_buf how = CKPT_BUF_INIT;
    size_t f;

    if (!written)
        lists = cJSON_AddObjectToObject(report, "tensor_lists");
    for (f = 0; f < ckpt_plan_file_count(j->plan); f++) {
        const ckpt_plan_file *pf = ckpt_plan_file_at(j->plan, f);
        const ckpt_map_output *out;
        const ckpt_node *node;
        const char *name;
        file_outputs it;
        cJSON *list;
        size_t i;
        if (pf->kind != CKPT_PLAN_TENSORS)
            continue;
        it = outputs_of(j, f);
        cJSON_AddNumberToObject(counts, pf->rel, (double)tensors_in(j, it.member));
        if (!lists)
            continue;
        list = cJSON_AddArrayToObject(lists, pf->rel);
        for (i = 0; (name = ckpt_plan_tensor_at(j->plan, f, i, &node, NULL)); i++) {
            out = next_output(&it);
            cJSON_AddItemToArray(list, report_tensor(name, node, out ? out->rule : NULL, &how));
        }
    }
    ckpt_buf_dispose(&how);
    return cli_plan_report(report, j->plan, written, seconds);
}
