/* Parallel layout specs, inside: the "parallel" section of a map, parsed into the map's
 * arena next to its rules, so that a spec lives exactly as long as the map it came from. */
#ifndef CKPT_PARALLEL_PRIVATE_H
#define CKPT_PARALLEL_PRIVATE_H

#include "rules_private.h"

#include <ckpt/parallel.h>

typedef struct parallel_entry {
    const char *label;  /* its "name", else the match pattern as written */
    map_pattern match;  /* the whole name */
    ckpt_tp_kind tp;
    int axis;           /* -1: the kind's own axis */
    const char *when;   /* a parameter that must be set and non-zero; NULL: always */
    size_t n_parts;     /* sections: their ratio, each a parameter name or a decimal integer */
    const char **parts;
} parallel_entry;

typedef struct parallel_prefixes {
    size_t n;
    map_pattern *v;
} parallel_prefixes;

struct ckpt_parallel_spec {
    const ckpt_map *map; /* the owner, whose name messages give */
    map_pattern layer;   /* a prefix with one capture: the layer index */
    parallel_prefixes expert, first, last, every;
    size_t n_entries;
    parallel_entry *entries;
    int has_default;
    ckpt_tp_kind dflt;
};

/* Parse root's "parallel" into m->parallel (left NULL when there is none). */
int ckpt_rules__parallel_parse(ckpt_map *m, const struct cJSON *root, const char *origin);

#endif
