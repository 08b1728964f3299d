/* The input tensors a job leaves out. A job writes every input tensor one of its rules takes;
 * one that no rule takes is an error naming it, unless a rule the job documents drops it (a
 * buffer the target recomputes) or the user asked for the loss with a --drop pattern. Either
 * way the plan keeps the name and the reason, and the report lists them: nothing is lost
 * without a word. */
#include "engine.h"

#include <ckpt/plan.h>
#include <ckpt/rules.h>
#include <ckpt/sys/common.h>

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Untaken tensors named in one error; the rest are counted. */
#define NAMED_MAX 8

typedef struct drop_pattern {
    char *text;
    size_t matched;
} drop_pattern;

typedef struct dropped {
    char *name, *reason;
} dropped;

struct plan_drops {
    drop_pattern *patterns;
    size_t n_patterns;
    dropped *list;
    size_t n, cap;
};

void ckpt_plan__drops_free(plan_drops *d)
{
    size_t i;

    if (!d)
        return;
    for (i = 0; i < d->n_patterns; i++)
        free(d->patterns[i].text);
    for (i = 0; i < d->n; i++) {
        free(d->list[i].name);
        free(d->list[i].reason);
    }
    free(d->patterns);
    free(d->list);
    free(d);
}

static int drops_of(ckpt_plan *p, plan_drops **out)
{
    plan_drops **d = ckpt_plan__drops(p);

    if (!*d && !(*d = calloc(1, sizeof **d)))
        return ckpt_error_oom();
    *out = *d;
    return 0;
}

int ckpt_plan_drop_pattern(ckpt_plan *p, const char *pattern)
{
    plan_drops *d = NULL;
    drop_pattern *grown;
    int rc;

    if (!pattern || !*pattern)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "--drop: an empty pattern matches no tensor");
    if ((rc = drops_of(p, &d)) < 0)
        return rc;
    if (!(grown = realloc(d->patterns, (d->n_patterns + 1) * sizeof *grown)))
        return ckpt_error_oom();
    d->patterns = grown;
    if (!(grown[d->n_patterns].text = strdup(pattern)))
        return ckpt_error_oom();
    grown[d->n_patterns++].matched = 0;
    return 0;
}

static int record(plan_drops *d, const char *name, const char *reason)
{
    dropped *grown = ckpt_array_grow(d->list, &d->cap, d->n, sizeof *grown);

    if (!grown)
        return CKPT_ENOMEM;
    d->list = grown;
    d->list[d->n].name = strdup(name);
    d->list[d->n].reason = strdup(reason);
    if (!d->list[d->n].name || !d->list[d->n].reason) {
        free(d->list[d->n].name);
        free(d->list[d->n].reason);
        return ckpt_error_oom();
    }
    d->n++;
    return 0;
}

int ckpt_plan_leave_out(ckpt_plan *p, const char *name, const char *rule)
{
    plan_drops *d = *ckpt_plan__drops(p);
    char reason[512];
    size_t i;
    int rc;

    if (rule) {
        if ((rc = drops_of(p, &d)) < 0)
            return rc;
        return (rc = record(d, name, rule)) < 0 ? rc : 1;
    }
    for (i = 0; d && i < d->n_patterns; i++) {
        if (fnmatch(d->patterns[i].text, name, 0) != 0)
            continue;
        d->patterns[i].matched++;
        snprintf(reason, sizeof reason, "--drop %s", d->patterns[i].text);
        return (rc = record(d, name, reason)) < 0 ? rc : 1;
    }
    return 0;
}

int ckpt_plan_check_drop_patterns(const ckpt_plan *p)
{
    const plan_drops *d = *ckpt_plan__drops((ckpt_plan *)p);
    size_t i;

    for (i = 0; d && i < d->n_patterns; i++)
        if (!d->patterns[i].matched)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT,
                                   "--drop %s matches no input tensor (a glob over the whole tensor name, as in "
                                   "the shell)",
                                   d->patterns[i].text);
    return 0;
}

int ckpt_plan_refuse_untaken(const char *where, const char *job, const char *const *names, size_t n)
{
    ckpt_buf b = CKPT_BUF_INIT;
    size_t i;
    int rc;

    if (!n)
        return 0;
    for (i = 0; i < n && i < NAMED_MAX; i++)
        ckpt_buf_printf(&b, "%s'%s'", i ? ", " : "", names[i]);
    if (n > NAMED_MAX)
        ckpt_buf_printf(&b, " and %zu more", n - NAMED_MAX);
    rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                         "%s: no rule of %s takes tensor%s %s; leave %s out on purpose with --drop PATTERN", where,
                         job, n > 1 ? "s" : "", b.data ? (const char *)b.data : "", n > 1 ? "them" : "it");
    ckpt_buf_dispose(&b);
    return rc;
}

int ckpt_plan_check_taken(const char *where, const char *job, const ckpt_map_result *r)
{
    const char **names = calloc(ckpt_map_result_count(r) + 1, sizeof *names);
    size_t i, n = 0;
    int rc;

    if (!names)
        return ckpt_error_oom();
    for (i = 0; i < ckpt_map_result_count(r); i++)
        if (!ckpt_map_result_at(r, i)->rule)
            names[n++] = ckpt_map_result_at(r, i)->name;
    rc = ckpt_plan_refuse_untaken(where, job, names, n);
    free(names);
    return rc;
}

size_t ckpt_plan_dropped_count(const ckpt_plan *p)
{
    const plan_drops *d = *ckpt_plan__drops((ckpt_plan *)p);

    return d ? d->n : 0;
}

const char *ckpt_plan_dropped_at(const ckpt_plan *p, size_t i, const char **reason)
{
    const plan_drops *d = *ckpt_plan__drops((ckpt_plan *)p);

    if (!d || i >= d->n)
        return NULL;
    if (reason)
        *reason = d->list[i].reason;
    return d->list[i].name;
}
