/* ckptconv verify --optimizer: the fp32 master copies and Adam moments of two Megatron-LM
 * checkpoints compared by parameter name, whatever layout, format (legacy or torch_dist) and
 * kind of optimizer (plain or distributed) each was saved with. */
#ifndef CKPT_TOOLS_VERIFY_OPTIM_H
#define CKPT_TOOLS_VERIFY_OPTIM_H

#include <ckpt.h>
#include <cjson/cJSON.h>

typedef struct verify_optim verify_optim;

/* Open both checkpoints (iteration -1: the tracker's) and compare their state: exact when
 * rtol is 0, else |a - b| <= rtol * |b| per element. */
int verify_optim_run(const char *a, const char *b, int64_t iteration, double rtol, verify_optim **out);
int verify_optim_pass(const verify_optim *v);
/* The name of the first state that differs ("<parameter> <state>"), or NULL. */
const char *verify_optim_first_failure(const verify_optim *v);
void verify_optim_print(const verify_optim *v);
void verify_optim_json(const verify_optim *v, cJSON *o);
void verify_optim_free(verify_optim *v);

#endif
