/* The table of format modules; the engine asks it, formats never do. */
#ifndef CKPT_FORMATS_REGISTRY_H
#define CKPT_FORMATS_REGISTRY_H

#include <ckpt/sys/format.h>

size_t ckpt_registry__count(void);
const ckpt_format_vtable *ckpt_registry__at(size_t i);
/* By canonical name; NULL if no such format. */
const ckpt_format_vtable *ckpt_registry__find(const char *name);
/* By canonical name, alias ("pytorch", "st") or extension with or without its dot
 * (".pdparams", "bin"); NULL if none names a format (ckpt_format_find's lookup). */
const ckpt_format_vtable *ckpt_registry__lookup(const char *name);

#endif
