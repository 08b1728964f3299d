/* One line per model source: a framework's checkpoints become runnable by `ckptconv verify`
 * with one file plus one line here. */
#include <ckpt/sys/registry.h>

extern const ckpt_model_source_vtable ckpt_model_source_megatron;
extern const ckpt_model_source_vtable ckpt_model_source_deepspeed;
extern const ckpt_model_source_vtable ckpt_model_source_paddle;
extern const ckpt_model_source_vtable ckpt_model_source_hf;

static const ckpt_model_source_vtable *const sources[] = {
    &ckpt_model_source_megatron,
    &ckpt_model_source_deepspeed,
    &ckpt_model_source_paddle,
    &ckpt_model_source_hf,
};

size_t ckpt_model__source_count(void)
{
    return sizeof sources / sizeof sources[0];
}

const ckpt_model_source_vtable *ckpt_model__source_at(size_t i)
{
    return i < ckpt_model__source_count() ? sources[i] : NULL;
}
