/* ZeRO-0 checkpoints: no optimizer partitions, the model-states file holds the whole
 * module state dict and the optimizer's own state. When the model trained in fp32 the
 * module's parameters are the fp32 master weights themselves, so the consolidated state
 * dict is the module's: buffers first (as zero_to_fp32 orders them), then parameters in
 * module order; tied names keep sharing one tensor. With fp16/bf16 weights the fp32
 * masters sit in the optimizer state, listed by position, not by name: that is refused
 * rather than guessed. DeepSpeed's zero_to_fp32 refuses every ZeRO-0 checkpoint. */
#include "deepspeed_zero_private.h"

#include <stdlib.h>
#include <string.h>

static int is_buffer(const ckpt_value *names, const ckpt_value *key)
{
    size_t j;

    for (j = 0; j < names->u.seq.n; j++)
        if (ckpt_value_is_str(names->u.seq.items[j], key->u.str.ptr))
            return 1;
    return 0;
}

static int same_view(const ckpt_tensor *a, const ckpt_tensor *b)
{
    return a->storage == b->storage && a->dtype == b->dtype && a->ndim == b->ndim && a->offset == b->offset &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0 &&
           memcmp(a->stride, b->stride, (size_t)a->ndim * sizeof *a->stride) == 0;
}

/* Parameters the optimizer holds (the lengths of its param_groups' params lists), or -1. */
static int64_t optimizer_params(const ckpt_value *opt)
{
    const ckpt_value *groups = ckpt_zero__get(opt, "param_groups");
    int64_t n = 0;
    size_t g;

    if (!groups || (groups->kind != CKPT_VAL_LIST && groups->kind != CKPT_VAL_TUPLE))
        return -1;
    for (g = 0; g < groups->u.seq.n; g++) {
        const ckpt_value *p = ckpt_zero__get(groups->u.seq.items[g], "params");
        if (!p || (p->kind != CKPT_VAL_LIST && p->kind != CKPT_VAL_TUPLE))
            return -1;
        n += (int64_t)p->u.seq.n;
    }
    return n;
}

/* Refuse what cannot be consolidated exactly: half-precision weights, optimizer states
 * (keyed by position), several model-states files. */
static int stage0_check(ckpt_zero_build *b, const ckpt_zero_file *f, const ckpt_value *module,
                        const ckpt_value *names)
{
    const ckpt_value *shapes = ckpt_zero__get(f->root, "param_shapes");
    size_t i;

    if (shapes && shapes->kind != CKPT_VAL_NONE)
        return ckpt_error_set(CKPT_ENOTFOUND, "%s: no *_optim_states.pt files, but %s has param_shapes (ZeRO 1-3 "
                              "keep the fp32 weights in those files): are they missing?", b->dir,
                              ckpt_zero__base(f->path));
    if (b->st->n_model != 1)
        return ckpt_error_set(CKPT_EFORMAT, "%s: no *_optim_states.pt files but %zu model-states files (a ZeRO-0 "
                              "checkpoint has one per model-parallel rank)", b->dir, b->st->n_model);
    if (!module || module->kind != CKPT_VAL_DICT)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: ZeRO-0 checkpoint without a module state dict (pipeline "
                              "checkpoints keep it in layer files, which are not supported)", f->path);
    if (names->kind != CKPT_VAL_LIST && names->kind != CKPT_VAL_TUPLE)
        return ckpt_error_set(CKPT_EFORMAT, "%s: buffer_names is not a list", f->path);
    for (i = 0; i < module->u.dict.map.n; i++) {
        const ckpt_value *k = module->u.dict.map.keys[i];
        const ckpt_tensor *t = ckpt_zero__tensor(f, module->u.dict.map.vals[i]);
        if (k->kind != CKPT_VAL_STR || !t)
            return ckpt_error_set(CKPT_EFORMAT, "%s: module entry %zu is not name -> tensor", f->path, i);
        if (!is_buffer(names, k) && ckpt_dtype_is_float(t->dtype) && t->dtype != CKPT_DTYPE_F32)
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: ZeRO-0 checkpoint of a %s model (module/%s): its fp32 "
                                  "master weights are in the optimizer state, listed by position, not by name, so "
                                  "they cannot be consolidated; the model-states file holds the %s weights",
                                  f->path, ckpt_dtype_name(t->dtype), k->u.str.ptr, ckpt_dtype_name(t->dtype));
    }
    if (ckpt_reader_options(b->r)->optimizer_states)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: ZeRO-0 checkpoint: its optimizer states are keyed by "
                              "parameter position, not by name, so they cannot be consolidated", f->path);
    return 0;
}

int ckpt_zero__stage0(ckpt_zero_build *b)
{
    const ckpt_zero_file *f = &b->st->model[0];
    const ckpt_value *module = ckpt_zero__get(f->root, "module");
    const ckpt_value *names = ckpt_zero__get(f->root, "buffer_names");
    const ckpt_tensor **src = NULL;
    size_t *emitted = NULL;
    size_t i, j, n_src = 0, n_params = 0;
    int64_t n_opt;
    int pass, rc;

    if ((rc = stage0_check(b, f, module, names)) < 0)
        return rc;
    b->stage = 0;
    b->root = ckpt_value_new(ckpt_reader_arena(b->r), CKPT_VAL_DICT);
    src = calloc(module->u.dict.map.n + 1, sizeof *src);
    emitted = calloc(module->u.dict.map.n + 1, sizeof *emitted);
    if (!b->root || !src || !emitted) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (pass = 0; pass < 2 && rc >= 0; pass++) {
        for (i = 0; i < module->u.dict.map.n && rc >= 0; i++) {
            const ckpt_value *k = module->u.dict.map.keys[i];
            const ckpt_tensor *t = ckpt_zero__tensor(f, module->u.dict.map.vals[i]);
            if (is_buffer(names, k) != (pass == 0))
                continue;
            for (j = 0; j < n_src && !same_view(src[j], t); j++)
                ;
            if (j < n_src) { /* a tied name: the same tensor under a second name */
                rc = ckpt_zero__alias(b, emitted[j], k->u.str.ptr);
                continue;
            }
            if ((rc = ckpt_zero__emit_saved(b, f, t, k->u.str.ptr, 0)) < 0)
                break;
            src[n_src] = t;
            emitted[n_src++] = ckpt_reader_tensor_count(b->r) - 1;
            n_params += pass == 1;
        }
    }
    if (rc < 0)
        goto done;
    ckpt_reader_note(b->r, "ZeRO-0 checkpoint: the consolidated weights are the fp32 module state dict of %s",
                     ckpt_zero__base(f->path));
    n_opt = optimizer_params(ckpt_zero__get(f->root, "optimizer"));
    if (n_opt >= 0 && (size_t)n_opt < n_params)
        ckpt_reader_note(b->r, "%zu of its %zu parameters have no optimizer state (frozen); ZeRO-0 checkpoints do "
                         "not say which, so all are kept", n_params - (size_t)n_opt, n_params);
done:
    free(src);
    free(emitted);
    return rc < 0 ? rc : 0;
}
