/* ckptconv verify A B --optimizer: each parameter's fp32 master copy and Adam moments of two
 * Megatron-LM checkpoints, at full shape, compared by name (ckpt_megatron_optimizer_state
 * gives them whatever form each checkpoint holds; ckpt_diff compares them). */
#include "cli.h"
#include "verify_optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[3] = { "master", "exp_avg", "exp_avg_sq" };

typedef struct side {
    const char *path;
    ckpt_set *set;
    ckpt_graph *g;
    ckpt_megatron *m;
    ckpt_diff_input *in;
    size_t n, cap;
    const char *copy, *copy_of; /* a tied output layer copy and the tensor it copies */
} side;

struct verify_optim {
    side a, b;
    double rtol;
    ckpt_diff_report *r;
    size_t failed;
    const char *first_failure;
};

static void side_close(side *s)
{
    size_t i;

    for (i = 0; i < s->n; i++)
        free((char *)s->in[i].name);
    free(s->in);
    ckpt_megatron_close(s->m);
    ckpt_graph_free(s->g);
    ckpt_set_close(s->set);
}

/* The three states of `param` as "<name> <state>". */
static int add_states(side *s, const char *name, const ckpt_node *const *state)
{
    int k;

    if (s->n + 3 > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 96;
        ckpt_diff_input *grown = realloc(s->in, cap * sizeof *grown);
        if (!grown)
            return CKPT_ENOMEM;
        s->in = grown;
        s->cap = cap;
    }
    for (k = 0; k < 3; k++) {
        size_t len = strlen(name) + strlen(state_names[k]) + 2;
        char *full = malloc(len);
        if (!full)
            return CKPT_ENOMEM;
        snprintf(full, len, "%s %s", name, state_names[k]);
        s->in[s->n].name = full;
        s->in[s->n].node = state[k];
        s->in[s->n++].state = 0;
    }
    return 0;
}

static int side_open(side *s, const char *path, int64_t iteration)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    size_t i, n;
    int rc;

    s->path = path;
    so.layout = "megatron";
    so.iteration = iteration;
    if ((rc = ckpt_set_open(&s->set, path, &so)) < 0 || (rc = ckpt_graph_new(&s->g)) < 0 ||
        (rc = ckpt_megatron_open(&s->m, s->set, s->g, &mo)) < 0)
        return rc;
    n = ckpt_megatron_tensor_count(s->m);
    for (i = 0; i < n; i++) {
        const char *name = ckpt_megatron_tensor_at(s->m, i, NULL, NULL), *copy_of;
        const ckpt_node *state[3];
        if ((rc = ckpt_megatron_optimizer_state(s->m, i, state, &copy_of)) < 0)
            return rc;
        if (copy_of) {
            s->copy = name;
            s->copy_of = copy_of;
        }
        if (state[0] && (rc = add_states(s, name, state)) < 0)
            return rc;
    }
    return 0;
}

static long find_tensor(const ckpt_megatron *m, const char *name)
{
    size_t i, n = ckpt_megatron_tensor_count(m);

    for (i = 0; i < n; i++)
        if (strcmp(ckpt_megatron_tensor_at(m, i, NULL, NULL), name) == 0)
            return (long)i;
    return -1;
}

/* Tied embeddings over several stages on one side only: its output layer copy is compared
 * with the other side's embedding, whose state it must equal. */
static int pair_copy(const side *with, side *without)
{
    const ckpt_node *state[3];
    long i;
    int rc;

    if (!with->copy || find_tensor(without->m, with->copy) >= 0 || (i = find_tensor(without->m, with->copy_of)) < 0)
        return 0;
    if ((rc = ckpt_megatron_optimizer_state(without->m, (size_t)i, state, NULL)) < 0)
        return rc;
    return state[0] ? add_states(without, with->copy, state) : 0;
}

int verify_optim_run(const char *a, const char *b, int64_t iteration, double rtol, verify_optim **out)
{
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    verify_optim *v = calloc(1, sizeof *v);
    size_t i;
    int rc;

    *out = v;
    if (!v)
        return CKPT_ENOMEM;
    v->rtol = o.rtol = rtol;
    if ((rc = side_open(&v->a, a, iteration)) < 0 || (rc = side_open(&v->b, b, iteration)) < 0 ||
        (rc = pair_copy(&v->a, &v->b)) < 0 || (rc = pair_copy(&v->b, &v->a)) < 0 ||
        (rc = ckpt_diff(v->a.in, v->a.n, v->b.in, v->b.n, &o, &v->r)) < 0)
        return rc;
    for (i = 0; i < v->r->n; i++) {
        const ckpt_diff_entry *e = &v->r->entries[i];
        if (e->status == CKPT_DIFF_EQUAL || e->status == CKPT_DIFF_CLOSE)
            continue;
        if (!v->failed++)
            v->first_failure = e->name;
    }
    return 0;
}

int verify_optim_pass(const verify_optim *v)
{
    return v && v->r && v->failed == 0;
}

const char *verify_optim_first_failure(const verify_optim *v)
{
    return v ? v->first_failure : NULL;
}

static const char *status_word(const ckpt_diff_entry *e)
{
    switch (e->status) {
    case CKPT_DIFF_EQUAL: return "ok (equal)";
    case CKPT_DIFF_CLOSE: return "ok";
    case CKPT_DIFF_ONLY_A: return "FAIL: only in A";
    case CKPT_DIFF_ONLY_B: return "FAIL: only in B";
    case CKPT_DIFF_SHAPE: return "FAIL: shapes differ";
    default: return "FAIL";
    }
}

void verify_optim_print(const verify_optim *v)
{
    size_t i, width = 10;

    for (i = 0; i < v->r->n; i++)
        if (strlen(v->r->entries[i].name) > width)
            width = strlen(v->r->entries[i].name);
    printf("\noptimizer state (fp32 masters and Adam moments by parameter), tolerance: %s\n",
           v->rtol > 0 ? "relative" : "none (values must be equal)");
    if (v->rtol > 0)
        printf("  |A - B| <= %g |B| per element\n", v->rtol);
    printf("%-*s %12s %12s %12s  %s\n", (int)width, "", "max abs", "max rel", "mismatched", "");
    for (i = 0; i < v->r->n; i++) {
        const ckpt_diff_entry *e = &v->r->entries[i];
        int values = e->status == CKPT_DIFF_EQUAL || e->status == CKPT_DIFF_CLOSE || e->status == CKPT_DIFF_DIFFERENT;
        if (values)
            printf("%-*s %12.3e %12.3e %12llu  %s\n", (int)width, e->name, e->max_abs, e->max_rel,
                   (unsigned long long)e->mismatched, status_word(e));
        else
            printf("%-*s %12s %12s %12s  %s\n", (int)width, e->name, "-", "-", "-", status_word(e));
    }
    if (v->failed)
        printf("FAIL: optimizer state: %s is the first that differs (%zu of %zu fail)\n", v->first_failure, v->failed,
               v->r->n);
    else
        printf("PASS: optimizer state: all %zu compared\n", v->r->n);
}

static cJSON *number_or_null(double x)
{
    return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull();
}

void verify_optim_json(const verify_optim *v, cJSON *o)
{
    cJSON *opt = cJSON_AddObjectToObject(o, "optimizer"), *list;
    size_t i;

    cJSON_AddBoolToObject(opt, "pass", verify_optim_pass(v));
    cJSON_AddNumberToObject(opt, "rtol", v->rtol);
    if (v->first_failure)
        cJSON_AddStringToObject(opt, "first_failure", v->first_failure);
    list = cJSON_AddArrayToObject(opt, "states");
    for (i = 0; i < v->r->n; i++) {
        const ckpt_diff_entry *e = &v->r->entries[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", e->name);
        cJSON_AddStringToObject(j, "status", ckpt_diff_status_name(e->status));
        cJSON_AddItemToObject(j, "max_abs", number_or_null(e->max_abs));
        cJSON_AddItemToObject(j, "max_rel", number_or_null(e->max_rel));
        cJSON_AddNumberToObject(j, "mismatched", (double)e->mismatched);
        cJSON_AddItemToArray(list, j);
    }
}

void verify_optim_free(verify_optim *v)
{
    if (!v)
        return;
    ckpt_diff_report_free(v->r);
    side_close(&v->b);
    side_close(&v->a);
    free(v);
}
