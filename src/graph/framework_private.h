/* Between the framework core and the job path. */
#ifndef CKPT_GRAPH_FRAMEWORK_PRIVATE_H
#define CKPT_GRAPH_FRAMEWORK_PRIVATE_H

#include <ckpt/sys/framework.h>
#include <ckpt/sys/registry.h>

/* m's framework. */
const ckpt_fw_vtable *ckpt_fw__vtable(const ckpt_fw *m);
/* m's framework state, for its vtable's hooks. */
void *ckpt_fw__state(ckpt_fw *m);
/* m closes `other` (a conversion's target, whose model the plan reads) when it is closed. */
void ckpt_fw__keep(ckpt_fw *m, ckpt_fw *other);

#endif
