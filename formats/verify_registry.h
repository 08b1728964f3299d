/* The table of model sources for `ckptconv verify`; the engine asks it, sources never do. */
#ifndef CKPT_FORMATS_VERIFY_REGISTRY_H
#define CKPT_FORMATS_VERIFY_REGISTRY_H

#include <ckpt/sys/model.h>

size_t ckpt_model__source_count(void);
const ckpt_model_source_vtable *ckpt_model__source_at(size_t i);

#endif
