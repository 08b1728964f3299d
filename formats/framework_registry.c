/* One line per framework: a new framework is one file (formats/<name>/<name>_framework.c)
 * plus one line here. Bids are asked in this order; a tie goes to the first. */
#include <ckpt/sys/registry.h>

#include <string.h>

extern const ckpt_fw_vtable ckpt_framework_megatron;
extern const ckpt_fw_vtable ckpt_framework_paddle;
extern const ckpt_fw_vtable ckpt_framework_huggingface;
extern const ckpt_fw_vtable ckpt_framework_deepspeed;

static const ckpt_fw_vtable *const frameworks[] = {
    &ckpt_framework_megatron,
    &ckpt_framework_paddle,
    &ckpt_framework_huggingface,
    &ckpt_framework_deepspeed,
};

size_t ckpt_frameworks__count(void)
{
    return sizeof frameworks / sizeof frameworks[0];
}

const ckpt_fw_vtable *ckpt_frameworks__at(size_t i)
{
    return i < ckpt_frameworks__count() ? frameworks[i] : NULL;
}

const ckpt_fw_vtable *ckpt_frameworks__find(const char *name)
{
    size_t i;
    for (i = 0; i < ckpt_frameworks__count(); i++)
        if (strcmp(frameworks[i]->name, name) == 0)
            return frameworks[i];
    return NULL;
}
