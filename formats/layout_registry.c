/* One line per layout module: a new directory scheme is one file plus one line here. */
#include <ckpt/sys/registry.h>

#include <string.h>

extern const ckpt_layout_vtable ckpt_layout_megatron;
extern const ckpt_layout_vtable ckpt_layout_deepspeed;
extern const ckpt_layout_vtable ckpt_layout_paddle;

static const ckpt_layout_vtable *const layouts[] = {
    &ckpt_layout_megatron,
    &ckpt_layout_deepspeed,
    &ckpt_layout_paddle,
};

size_t ckpt_layouts__count(void)
{
    return sizeof layouts / sizeof layouts[0];
}

const ckpt_layout_vtable *ckpt_layouts__at(size_t i)
{
    return i < ckpt_layouts__count() ? layouts[i] : NULL;
}

const ckpt_layout_vtable *ckpt_layouts__find(const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_layouts__count(); i++)
        if (strcmp(layouts[i]->name, name) == 0)
            return layouts[i];
    return NULL;
}
