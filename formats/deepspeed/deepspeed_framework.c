/* DeepSpeed as a framework, read only: a checkpoint directory (latest, a tag directory of
 * model-states and ZeRO optimizer-state files) opened as one model, each parameter at full
 * shape as zero_to_fp32 consolidates it from the data-parallel partitions. No writer: a ZeRO
 * checkpoint is written by DeepSpeed, and read back here. */
#include <ckpt/sys/common.h>
#include <ckpt/sys/framework.h>

#include <stdlib.h>
#include <string.h>

extern const ckpt_layout_vtable ckpt_layout_deepspeed;
extern const ckpt_model_source_vtable ckpt_model_source_deepspeed;

static void ds_free(void *state)
{
    ckpt_close(state);
}

static int ds_open(ckpt_fw_builder *b, void **state)
{
    const ckpt_fw_options *o = ckpt_fw_builder_options(b);
    const ckpt_set *set = ckpt_fw_builder_set(b);
    const ckpt_set_info *si = ckpt_set_info_of(set);
    ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *ck = NULL;
    ckpt_fw_info info;
    size_t i;
    int rc;

    oo.tag = o->tag;
    if ((rc = ckpt_open(&ck, ckpt_fw_builder_path(b), &oo)) < 0)
        return rc;
    *state = ck;
    for (i = 0; i < ckpt_tensor_count(ck) && rc == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(ck, i);
        const ckpt_node *node;
        if ((rc = ckpt_node_tensor(ckpt_fw_builder_graph(b), t, &node)) == 0)
            rc = ckpt_fw_builder_add(b, t->name, node, NULL);
    }
    if (rc < 0)
        return rc;
    memset(&info, 0, sizeof info);
    info.tp = si->tp;
    info.pp = si->pp;
    info.vpp = 1;
    info.ep = si->ep;
    info.dp = si->dp;
    info.iteration = si->iteration;
    for (i = 0; i < ckpt_set_member_count(set); i++)
        info.has_optimizer |= strcmp(ckpt_set_member_at(set, i)->role, "optimizer") == 0;
    return ckpt_fw_builder_info(b, &info);
}

const ckpt_fw_vtable ckpt_framework_deepspeed = {
    CKPT_FRAMEWORK_ABI_VERSION,
    "deepspeed",
    "DeepSpeed checkpoints (ZeRO stages 0-3, consolidated as zero_to_fp32 does); read only",
    &ckpt_layout_deepspeed,
    &ckpt_model_source_deepspeed,
    NULL, /* the layout's bid */
    ds_open,
    NULL,
    NULL,
    NULL,
    ds_free,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};
