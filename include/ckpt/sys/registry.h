/* The tables of modules that formats/ defines (one line per module in formats/registry.c,
 * layout_registry.c and framework_registry.c) and the engine reads: the engine (src/) knows
 * the modules through these calls only and includes nothing from formats/. Private to the
 * library, not for users or out-of-tree modules. */
#ifndef CKPT_SYS_REGISTRY_H
#define CKPT_SYS_REGISTRY_H

#ifndef CKPT_BUILD
#error "ckpt/sys/registry.h is private to the ckpt library"
#endif

#include "format.h"
#include "framework.h"
#include "layout.h"

/* File formats (formats/registry.c), cheap bidders first. */
size_t ckpt_registry__count(void);
const ckpt_format_vtable *ckpt_registry__at(size_t i);
/* By canonical name; NULL if no such format. */
const ckpt_format_vtable *ckpt_registry__find(const char *name);
/* By canonical name, alias ("pytorch", "st") or extension with or without its dot
 * (".pdparams", "bin"); NULL if none names a format (ckpt_format_find's lookup). */
const ckpt_format_vtable *ckpt_registry__lookup(const char *name);

/* Directory layouts of checkpoint sets (formats/layout_registry.c). */
size_t ckpt_layouts__count(void);
const ckpt_layout_vtable *ckpt_layouts__at(size_t i);
/* By name; NULL if no such layout. */
const ckpt_layout_vtable *ckpt_layouts__find(const char *name);

/* Frameworks (formats/framework_registry.c), in bidding order. */
size_t ckpt_frameworks__count(void);
const ckpt_fw_vtable *ckpt_frameworks__at(size_t i);
/* By name; NULL if no such framework. */
const ckpt_fw_vtable *ckpt_frameworks__find(const char *name);

#endif
