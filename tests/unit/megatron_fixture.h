/* Helpers for the Megatron unit tests: a checkpoint of testdata/megatron opened as one
 * logical model in a plan's graph, and (with the private header) an entry by name. */
#ifndef CKPT_TEST_MEGATRON_FIXTURE_H
#define CKPT_TEST_MEGATRON_FIXTURE_H

#include "test.h"

#include <stdio.h>
#include <string.h>

typedef struct opened {
    ckpt_set *set;
    ckpt_plan *plan;
    ckpt_megatron *m;
} opened;

/* A checkpoint at `path` (one a test wrote); close_fixture after a failure too. */
static inline int open_path(opened *o, const char *path)
{
    int rc;

    memset(o, 0, sizeof *o);
    if ((rc = ckpt_set_open(&o->set, path, NULL)) < 0 || (rc = ckpt_plan_new(&o->plan)) < 0)
        return rc;
    return ckpt_megatron_open(&o->m, o->set, ckpt_plan_graph(o->plan), NULL);
}

/* testdata/megatron/<name> */
static inline int open_fixture(opened *o, const char *name)
{
    char path[256];

    snprintf(path, sizeof path, "megatron/%s", name);
    return open_path(o, ckpt_test_data(path));
}

static inline void close_fixture(opened *o)
{
    ckpt_megatron_close(o->m);
    ckpt_plan_free(o->plan);
    ckpt_set_close(o->set);
}

#ifdef CKPT_FORMATS_MEGATRON_PRIVATE_H
static inline const mg_entry *entry_named(const ckpt_megatron *m, const char *name)
{
    size_t i;

    for (i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0)
            return &m->entries[i];
    return NULL;
}
#endif

#endif
