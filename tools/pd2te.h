/* ckptconv pd2te / te2pd: what a run plans, and its reports. */
#ifndef CKPT_CLI_PD2TE_H
#define CKPT_CLI_PD2TE_H

#include "cli.h"

#include <ckpt/paddle.h>
#include <cjson/cJSON.h>

/* Bytes of a tensor the graph computes. */
uint64_t pd_node_bytes(const ckpt_node *x);
/* --dry-run: per model file, every output tensor with its sources and rule; then the
 * index files, and the files copied and skipped. */
void pd_print_plan(const ckpt_paddle_te_job *j);
/* The --json report: the command's keys (with the files copied and skipped) from
 * pd_report_new; pd_report_print adds each model file's input tensor count and, with
 * --dry-run (written NULL), its tensors with their sources and rules, then prints it as the
 * plan report every job gives (cli_plan_report, which frees it). */
cJSON *pd_report_new(const char *cmd, const char *in, const char *out, const char *map, const ckpt_paddle_te_job *j);
int pd_report_print(cJSON *report, const ckpt_paddle_te_job *j, const ckpt_plan_report *written, double seconds);

#endif
