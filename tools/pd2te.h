/* ckptconv pd2te / te2pd: what a run plans, and its reports. */
#ifndef CKPT_CLI_PD2TE_H
#define CKPT_CLI_PD2TE_H

#include "cli.h"

#include <ckpt/paddle.h>
#include <cjson/cJSON.h>

/* A conversion, planned: per group of the input directory the map's results (each output's
 * home is the member of the model file it goes to), and the plan: one tensor file per
 * model file in member order, the groups' rewritten indexes, the files copied. */
typedef struct pd_job {
    ckpt_set *set;
    ckpt_paddle *dir;
    ckpt_map_result **results; /* per group */
    size_t *group_of;          /* per member: the group of a model file */
    ckpt_plan *plan;
    size_t *origin;            /* per plan file: the member of a tensor file, the group of an index */
} pd_job;

/* Bytes of a tensor the graph computes. */
uint64_t pd_node_bytes(const ckpt_node *x);
/* --dry-run: per model file, every output tensor with its sources and rule; then the
 * index files, and the files copied and skipped. */
void pd_print_plan(const pd_job *j);
/* The --json report: the command's keys (with the files copied and skipped) from
 * pd_report_new; pd_report_print adds each model file's input tensor count and, with
 * --dry-run (written NULL), its tensors with their sources and rules, then prints it as the
 * plan report every job gives (cli_plan_report, which frees it). */
cJSON *pd_report_new(const char *cmd, const char *in, const char *out, const char *map, const pd_job *j);
int pd_report_print(cJSON *report, const pd_job *j, const ckpt_plan_report *written, double seconds);

/* --tp/--pp (pd2te_layout.c): convert and reshard in one pass. */
typedef struct pd_layout_job {
    const char *cmd, *in, *out;
    int to_te;
    int tp, pp;                 /* 0: the input's */
    const ckpt_map *map;
    const ckpt_map_params *params;
    const char *const *variants; /* NULL: none */
    const char *config;         /* config.json's path, NULL: none */
    const cli_plan_args *run;
} pd_layout_job;

int pd_run_layout(const pd_layout_job *j);

#endif
