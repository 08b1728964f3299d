/* One line per format. Cheap bidders first; a new format is one file plus one line here. */
#include "registry.h"

#include <string.h>

extern const ckpt_format_vtable ckpt_format_safetensors;
extern const ckpt_format_vtable ckpt_format_torch;
extern const ckpt_format_vtable ckpt_format_pdparams;
extern const ckpt_format_vtable ckpt_format_deepspeed_zero;

static const ckpt_format_vtable *const formats[] = {
    &ckpt_format_safetensors,
    &ckpt_format_torch,
    &ckpt_format_pdparams,
    &ckpt_format_deepspeed_zero,
};

size_t ckpt_registry__count(void)
{
    return sizeof formats / sizeof formats[0];
}

const ckpt_format_vtable *ckpt_registry__at(size_t i)
{
    return i < ckpt_registry__count() ? formats[i] : NULL;
}

const ckpt_format_vtable *ckpt_registry__find(const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_registry__count(); i++)
        if (strcmp(formats[i]->name, name) == 0)
            return formats[i];
    return NULL;
}
