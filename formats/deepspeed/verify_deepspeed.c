/* DeepSpeed checkpoint directories of Hugging Face LLaMA-family models as models `ckptconv
 * verify` runs: the fp32 master weights consolidated from every rank's partitions (what
 * zero_to_fp32 writes), or, with zero_module, the module weights the engine ran with (the
 * model_states file of ZeRO stages 0-2). config.json is looked for beside `latest` and
 * above. */
#include <ckpt/sys/registry.h>
#include "../verify_source.h"

#include <stdio.h>
#include <string.h>

static int deepspeed_bid(const char *path, int is_dir)
{
    const ckpt_layout_vtable *l = ckpt_layouts__find("deepspeed");
    return l ? l->bid(path, is_dir) : -1;
}

/* The model_states file every data-parallel rank shares (ZeRO 0-2). */
static int module_file(ckpt_model_builder *b, ckpt_set *set, const char **out)
{
    const ckpt_set_info *info = ckpt_set_info_of(set);
    ckpt_coords at = CKPT_COORDS_NONE;
    long i;

    if (info->tp > 1)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: the module weights of %d model-parallel ranks are not run by verify",
                               ckpt_model_builder_path(b), info->tp);
    at.tp = 0;
    if ((i = ckpt_set_find(set, &at, "model")) < 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: ZeRO stage 3 keeps no module weights (each rank's model_states holds empty "
                               "placeholders): compare the consolidated model with another checkpoint instead",
                               ckpt_model_builder_path(b));
    *out = ckpt_set_member_at(set, (size_t)i)->path;
    return 0;
}

static int deepspeed_open(ckpt_model_builder *b)
{
    const ckpt_model_options *o = ckpt_model_builder_options(b);
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_open_options open = CKPT_OPEN_OPTIONS_INIT;
    char config[4096];
    const char *module = NULL, *found;
    ckpt_set *set;
    int rc;

    so.layout = "deepspeed";
    so.open.tag = o->tag;
    if ((rc = ckpt_set_open(&set, ckpt_model_builder_path(b), &so)) < 0 || (rc = ckpt_vsrc__keep_set(b, set)) < 0)
        return rc;
    found = ckpt_vsrc__find_config(ckpt_set_info_of(set)->root, 1, config, sizeof config) == 0 ? config : NULL;
    if (o->zero_module) {
        if ((rc = module_file(b, set, &module)) < 0)
            return rc;
        ckpt_model_builder_kind(b, "DeepSpeed checkpoint, the module weights of %s/%s", ckpt_set_info_of(set)->dir,
                                strrchr(module, '/') ? strrchr(module, '/') + 1 : module);
        return ckpt_vsrc__hf_weights(b, module, found, NULL);
    }
    open.tag = o->tag;
    ckpt_model_builder_kind(b, "DeepSpeed ZeRO checkpoint %s, fp32 master weights consolidated from %d rank%s",
                            ckpt_set_info_of(set)->dir, ckpt_set_info_of(set)->dp,
                            ckpt_set_info_of(set)->dp == 1 ? "" : "s");
    return ckpt_vsrc__hf_weights(b, ckpt_model_builder_path(b), found, &open);
}

const ckpt_model_source_vtable ckpt_model_source_deepspeed = {
    .abi_version = CKPT_MODEL_SOURCE_ABI_VERSION,
    .name = "deepspeed",
    .bid = deepspeed_bid,
    .open = deepspeed_open,
};
