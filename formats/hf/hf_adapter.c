/* See hf_adapter.h. */
#include "hf_adapter.h"

#include <ckpt/hf.h>
#include <ckpt/sys/common.h>

#include <stdlib.h>

int ckpt_hf__adapter_args(const char *hf_dir, ckpt_arena *a, int tp, const char *impl, ckpt_value **args)
{
    ckpt_hf_llama_dims d;
    ckpt_buf config = CKPT_BUF_INIT;
    int rc;

    if ((rc = ckpt_buf_printf(&config, "%s/config.json", hf_dir)) < 0)
        return rc;
    if ((rc = ckpt_hf_llama_dims_read((const char *)config.data, &d)) == 0 &&
        (rc = ckpt_hf_llama_megatron_args(a, &d, (const char *)config.data, tp, impl, args)) == 0)
        rc = ckpt_hf_generation_config_to_args(a, *args, hf_dir);
    ckpt_buf_dispose(&config);
    return rc;
}

int ckpt_hf__adapter_config_json(ckpt_fw *from, ckpt_dtype dtype, ckpt_buf *out)
{
    ckpt_megatron *m = from ? ckpt_fw_native(from, CKPT_FAMILY_MEGATRON) : NULL;

    if (!m)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT,
                               "huggingface: a config.json is made from a Megatron model's args only");
    return ckpt_hf_llama_config(ckpt_megatron_args(m), ckpt_megatron_info_of(m)->true_vocab_size, dtype, out);
}
