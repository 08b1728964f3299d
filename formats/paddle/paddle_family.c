/* The PaddleNLP model families ckptconv reads and writes, and what of PaddleNLP's code depends
 * on the family: the base model's prefix (qwen2.layers.N...), the classes config.json names,
 * the head's variable prefix, the built-in maps (layout spec, to and from Hugging Face), and
 * whether q/k/v carry biases (formats/families/<name>.json's "paddle" block says the same). */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <cjson/cJSON.h>

#include <string.h>

static const pd_family FAMILIES[] = {
    { "llama", "LLaMA", "llama", "LlamaForCausalLM", "LlamaForCausalLMPipe", "llama_lm_head", "llama_lm_head_pipe",
      "paddlenlp_llama", "paddle_llama_hf", "hf_llama_paddle", 0, 0, 0 },
    { "qwen2", "Qwen2", "qwen2", "Qwen2ForCausalLM", "Qwen2ForCausalLMPipe", "qwen2_lm_head", "qwen2_lm_head_pipe",
      "paddlenlp_qwen2", "paddle_qwen2_hf", "hf_qwen2_paddle", 1, 1, 0 },
    /* no pipeline class: PaddleNLP 3 builds Mixtral on one stage only */
    { "mixtral", "Mixtral", "mixtral", "MixtralForCausalLM", NULL, "mixtral_lm_head", NULL,
      "paddlenlp_mixtral", "paddle_mixtral_hf", "hf_mixtral_paddle", 0, 0, 1 },
};

const pd_family *ckpt_paddle__family(const char *model_type)
{
    size_t i;

    for (i = 0; model_type && i < sizeof FAMILIES / sizeof *FAMILIES; i++)
        if (strcmp(FAMILIES[i].model_type, model_type) == 0)
            return &FAMILIES[i];
    return NULL;
}

const pd_family *ckpt_paddle__llama(void)
{
    return &FAMILIES[0];
}

const pd_family *ckpt_paddle__family_of(const char *config_json)
{
    cJSON *json = config_json ? cJSON_Parse(config_json) : NULL;
    const cJSON *type = json ? cJSON_GetObjectItemCaseSensitive(json, "model_type") : NULL;
    const pd_family *f = cJSON_IsString(type) ? ckpt_paddle__family(type->valuestring) : NULL;

    cJSON_Delete(json);
    return f ? f : &FAMILIES[0];
}
