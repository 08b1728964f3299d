/* The table of format modules; the engine asks it, formats never do. */
#ifndef CKPT_FORMATS_REGISTRY_H
#define CKPT_FORMATS_REGISTRY_H

#include <ckpt/sys/format.h>

size_t ckpt_registry__count(void);
const ckpt_format_vtable *ckpt_registry__at(size_t i);
/* By name; NULL if no such format. */
const ckpt_format_vtable *ckpt_registry__find(const char *name);

#endif
