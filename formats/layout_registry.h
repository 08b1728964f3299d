/* The table of layout modules; the engine asks it, layouts never do. */
#ifndef CKPT_FORMATS_LAYOUT_REGISTRY_H
#define CKPT_FORMATS_LAYOUT_REGISTRY_H

#include <ckpt/sys/layout.h>

size_t ckpt_layouts__count(void);
const ckpt_layout_vtable *ckpt_layouts__at(size_t i);
/* By name; NULL if no such layout. */
const ckpt_layout_vtable *ckpt_layouts__find(const char *name);

#endif
