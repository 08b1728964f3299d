/* PaddleNLP checkpoints against what they say of themselves (formats/paddle/paddle_check.c): the
 * layouts PaddleNLP's LLaMA and Qwen2 can run, config.json's sizes bounded, the rank files and
 * sharding ranks the config and model_meta.json call for, every layer and tensor at the
 * shape the config implies, each stage's layers where LlamaForCausalLMPipe puts them. The
 * directories are the PaddleNLP-written fixtures, copied and damaged here. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>

static const char LLAMA[] = "{\"hidden_size\": 16, \"intermediate_size\": 32, \"num_attention_heads\": 4, "
                            "\"num_key_value_heads\": 2, \"num_hidden_layers\": 4, \"vocab_size\": 128}";

#define ASSERT_REFUSED(expr, code, errclass, needle)                                                                \
    do {                                                                                                            \
        ASSERT_FAILS(code, expr);                                                                                   \
        ASSERT_EQ_INT(ckpt_error_last()->klass, errclass);                                                          \
        ASSERT_ERROR_MENTIONS(needle);                                                                              \
    } while (0)

CKPT_TEST(test_paddle_layout_check_paddlenlp_constraints)
{
    static const char FUSED[] = "{\"hidden_size\": 16, \"intermediate_size\": 32, \"num_attention_heads\": 4, "
                                "\"num_key_value_heads\": 2, \"fuse_attention_qkv\": true}";
    static const char KV3[] = "{\"hidden_size\": 48, \"intermediate_size\": 24, \"num_attention_heads\": 12, "
                              "\"num_key_value_heads\": 4}";
    static const char INTER[] = "{\"hidden_size\": 16, \"intermediate_size\": 30, \"num_attention_heads\": 4}";

    /* what PaddleNLP itself ran: TP 4 keeps 2 KV heads whole on every rank (fp32_tp4) */
    ASSERT_OK(ckpt_paddle_layout_check("c", LLAMA, 0, 1, 1));
    ASSERT_OK(ckpt_paddle_layout_check("c", LLAMA, 0, 2, 4));
    ASSERT_OK(ckpt_paddle_layout_check("c", LLAMA, 0, 4, 3));
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", LLAMA, 0, 8, 1), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "c: TP 8: 4 attention heads cannot be split over 8 tensor-parallel ranks");
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", LLAMA, 0, 3, 1), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "4 attention heads cannot be split over 3");
    /* 4 KV heads on 6 ranks: neither split nor shared evenly (assign_kv_heads) */
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", KV3, 0, 6, 1), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "4 key/value heads can neither be split over nor shared by 6");
    /* k/v kept whole: PaddleNLP refuses a fused qkv_proj then */
    ASSERT_OK(ckpt_paddle_layout_check("c", FUSED, 4, 2, 1));
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", FUSED, 4, 4, 1), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "fuse_attention_qkv");
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", INTER, 4, 4, 1), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "intermediate_size 30 cannot be split over 4");
    /* stages: num_hidden_layers, else the model's count */
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", LLAMA, 0, 1, 5), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "PP 5: 4 decoder layers cannot fill 5 pipeline stages");
    ASSERT_OK(ckpt_paddle_layout_check("c", NULL, 6, 8, 5));
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", NULL, 2, 1, 3), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "2 decoder layers");
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", NULL, 2, 0, 1), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "TP 0");
    /* every rule here is LLaMA's or Qwen2's: another family is refused, a config without model_type is
       LLaMA's; Qwen2's fused q/k/v (and biases) are held to LLaMA's fused layout rules */
    ASSERT_OK(ckpt_paddle_layout_check("c", "{\"model_type\": \"llama\"}", 4, 1, 1));
    ASSERT_OK(ckpt_paddle_layout_check("c", "{\"model_type\": \"qwen2\"}", 4, 1, 1));
    ASSERT_OK(ckpt_paddle_layout_check("c", "{\"model_type\": \"qwen2\", \"fuse_attention_qkv\": true}", 4, 1, 1));
    ASSERT_OK(ckpt_paddle_layout_check("c", "{\"model_type\": \"qwen2\", \"fuse_attention_qkv\": true, "
                                            "\"num_attention_heads\": 4, \"num_key_value_heads\": 2}", 2, 2, 1));
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", "{\"model_type\": \"qwen2\", \"fuse_attention_qkv\": true, "
                                                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 2}", 2, 4, 1),
                   CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "c: TP 4: 2 key/value heads are kept whole on every rank");
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", "{\"model_type\": \"mistral\"}", 4, 1, 1), CKPT_EUNSUPPORTED,
                   CKPT_ERRCLASS_MODEL,
                   "c: model_type mistral: ckptconv reads PaddleNLP's LLaMA, Qwen2 and Mixtral (model_type llama, "
                   "qwen2, mixtral) only");
    /* Mixtral: no pipeline model in PaddleNLP, and its experts' count is needed */
    ASSERT_OK(ckpt_paddle_layout_check("c", "{\"model_type\": \"mixtral\", \"num_local_experts\": 4}", 2, 2, 1));
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", "{\"model_type\": \"mixtral\", \"num_local_experts\": 4}", 2, 1, 2),
                   CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "c: PP 2: PaddleNLP has no pipeline model of Mixtral (MixtralForCausalLMPipe): one stage only");
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", "{\"model_type\": \"mixtral\"}", 2, 1, 1), CKPT_EINVALID,
                   CKPT_ERRCLASS_LAYOUT, "c: no num_local_experts");
    ASSERT_REFUSED(ckpt_paddle_layout_check("c", "{\"model_type\": [1]}", 4, 1, 1), CKPT_EFORMAT,
                   CKPT_ERRCLASS_FORMAT, "c: model_type is not a string");
}

/* A tensor of q, k and v cut by KV group (Transformer Engine's layernorm_qkv) needs the KV
 * heads split over the ranks, not kept whole. */
CKPT_TEST(test_paddle_fused_kv_check)
{
    ASSERT_OK(ckpt_paddle_fused_kv_check("c", LLAMA, 1, "layernorm_qkv"));
    ASSERT_OK(ckpt_paddle_fused_kv_check("c", LLAMA, 2, "layernorm_qkv"));
    ASSERT_OK(ckpt_paddle_fused_kv_check("c", NULL, 4, "layernorm_qkv"));
    ASSERT_REFUSED(ckpt_paddle_fused_kv_check("c", LLAMA, 4, "layernorm_qkv"), CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                   "c: TP 4: 2 key/value heads do not divide over 4 tensor-parallel ranks, so PaddleNLP keeps them "
                   "whole on every rank, which layernorm_qkv (cut by KV group) cannot hold; choose a TP size that "
                   "divides num_key_value_heads");
    ASSERT_REFUSED(ckpt_paddle_fused_kv_check("c", "[1]", 4, "layernorm_qkv"), CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                   "not a JSON object");
}

CKPT_TEST(test_paddle_layout_check_config_sizes)
{
    static const struct {
        const char *json, *needle;
    } bad[] = {
        { "{\"num_attention_heads\": 0}", "num_attention_heads is 0, not a whole number from 1 to 16777216" },
        { "{\"hidden_size\": 1e12}", "hidden_size is 1000000000000, not a whole number" },
        { "{\"vocab_size\": 12.5}", "vocab_size is 12.5" },
        { "{\"intermediate_size\": \"32\"}", "intermediate_size is \"32\"" },
        { "{\"tensor_parallel_degree\": 5000}", "tensor_parallel_degree is 5000, not a whole number from 1 to 4096" },
        { "{\"hidden_size\": 18, \"num_attention_heads\": 4}",
          "hidden_size 18 is not a multiple of num_attention_heads 4" },
        { "{\"num_attention_heads\": 4, \"num_key_value_heads\": 3}",
          "num_attention_heads 4 is not a multiple of num_key_value_heads 3" },
    };
    size_t i;

    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        ASSERT_FAILS(CKPT_EFORMAT, ckpt_paddle_layout_check("c.json", bad[i].json, 4, 1, 1));
        ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_MODEL);
        ASSERT_ERROR_MENTIONS(bad[i].needle);
    }
    /* a malformed file */
    ASSERT_REFUSED(ckpt_paddle_layout_check("c.json", "[1, 2]", 4, 1, 1), CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                   "c.json: not a JSON object");
    ASSERT_REFUSED(ckpt_paddle_layout_check("c.json", "{", 4, 1, 1), CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                   "c.json: not a JSON object");
    /* null is as absent */
    ASSERT_OK(
        ckpt_paddle_layout_check("c.json", "{\"num_key_value_heads\": null, \"num_attention_heads\": 4}", 4, 4, 1));
}

typedef struct opened {
    ckpt_set *set;
    ckpt_plan *plan;
    ckpt_paddle_model *m;
} opened;

static int open_dir(opened *o, const char *dir)
{
    memset(o, 0, sizeof *o);
    if (ckpt_set_open(&o->set, dir, NULL) < 0 || ckpt_plan_new(&o->plan) < 0)
        return ckpt_error_last()->code;
    return ckpt_paddle_model_open(&o->m, o->set, ckpt_plan_graph(o->plan), NULL);
}

static void close_dir(opened *o)
{
    ckpt_paddle_model_close(o->m);
    ckpt_plan_free(o->plan);
    ckpt_set_close(o->set);
    memset(o, 0, sizeof *o);
}

/* Replace the first `from` in dir/file by `to`. */
static int edit(const char *dir, const char *file, const char *from, const char *to)
{
    char path[256], *text, *at, *out;
    size_t len, n;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!(text = (char *)ckpt_test_read_file(path, &len)))
        return -1;
    text = realloc(text, len + 1);
    text[len] = '\0';
    if (!(at = strstr(text, from)) || !(out = malloc(len + strlen(to) + 1))) {
        free(text);
        return -1;
    }
    n = (size_t)(at - text);
    memcpy(out, text, n);
    strcpy(out + n, to);
    strcat(out + n, at + strlen(from));
    ckpt_test_write_file(path, out, strlen(out));
    free(out);
    free(text);
    return 0;
}

CKPT_TEST(test_paddle_model_checked_against_its_config)
{
    opened o;

    /* every fixture opens as it is */
    static const char *const fixtures[] = { "fp32_tp1", "fp32_tp2", "fp32_tp4", "fp32_pp2", "fp32_pp4", "fp32_tp2pp2",
                                            "fp32_tp2_shard2", "bf16_tp2_shard2", "unified_fp32",
                                            "qwen2_tp2", "qwen2_tp2_fused" };
    size_t i;
    char path[128];

    for (i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        snprintf(path, sizeof path, "paddlenlp/%s", fixtures[i]);
        ASSERT_OK(open_dir(&o, ckpt_test_data(path)));
        close_dir(&o);
    }

    /* the TP rank config.json names but the directory lacks */
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_tp2", "half") == 0);
    ASSERT_TRUE(remove("half/model_state.tp01.pdparams") == 0 && remove("half/optimizer.tp01.pdopt") == 0);
    ASSERT_REFUSED(open_dir(&o, "half"), CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                   "half: no model_state.tp01.pdparams: config.json says tensor_parallel_degree 2, the directory has "
                   "model files of 1 TP rank");
    close_dir(&o);
    /* ... and without the field, the shapes give it away */
    ASSERT_TRUE(edit("half", "config.json", "\"tensor_parallel_degree\": 2,", "") == 0);
    ASSERT_REFUSED(open_dir(&o, "half"), CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                   "half: llama.embed_tokens.weight is [64, 16] merged over 1 TP rank, but half/config.json implies "
                   "[128, 16]");
    close_dir(&o);

    /* a pipeline_parallel_degree the files do not have */
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_pp2", "pp") == 0);
    ASSERT_TRUE(edit("pp", "config.json", "\"tensor_parallel_degree\": 1,",
                     "\"tensor_parallel_degree\": 1, \"pipeline_parallel_degree\": 4,") == 0);
    ASSERT_REFUSED(open_dir(&o, "pp"), CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT, "no model_state.pp02.pdparams");
    close_dir(&o);

    /* model_meta.json's mp_degree against the files */
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_tp2_shard2", "meta") == 0);
    ASSERT_TRUE(edit("meta", "model_meta.json", "\"mp_degree\": 2", "\"mp_degree\": 1") == 0);
    ASSERT_REFUSED(open_dir(&o, "meta"), CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                   "TP rank 1, but model_meta.json says parallel_config.mp_degree 1");
    close_dir(&o);
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_tp2_shard2", "meta2") == 0);
    ASSERT_TRUE(edit("meta2", "model_meta.json", "\"sharding_degree\": 2", "\"sharding_degree\": 1") == 0);
    ASSERT_REFUSED(open_dir(&o, "meta2"), CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                   "shard01.pdparams: sharding rank 1, but model_meta.json's sharding_degree is 1");
    close_dir(&o);
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_tp2_shard2", "meta3") == 0);
    ckpt_test_write_file("meta3/model_meta.json", "{", 1);
    ASSERT_REFUSED(open_dir(&o, "meta3"), CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                   "meta3/model_meta.json: not a JSON object");
    close_dir(&o);
    /* a sharded optimizer without one sharding rank's file */
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_tp2_shard2", "opt") == 0);
    ASSERT_TRUE(remove("opt/optimizer.tp00_shard01.pdopt") == 0);
    ASSERT_REFUSED(open_dir(&o, "opt"), CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT, "no optimizer.tp00_shard01.pdopt");
    close_dir(&o);

    /* stage files out of PaddleNLP's order */
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_pp2", "swap") == 0);
    ASSERT_TRUE(rename("swap/model_state.pp00.pdparams", "swap/x") == 0 &&
                rename("swap/model_state.pp01.pdparams", "swap/model_state.pp00.pdparams") == 0 &&
                rename("swap/x", "swap/model_state.pp01.pdparams") == 0 &&
                rename("swap/optimizer.pp00.pdopt", "swap/x") == 0 &&
                rename("swap/optimizer.pp01.pdopt", "swap/optimizer.pp00.pdopt") == 0 &&
                rename("swap/x", "swap/optimizer.pp01.pdopt") == 0);
    ASSERT_FAILS(CKPT_EFORMAT, open_dir(&o, "swap"));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_LAYOUT);
    ASSERT_ERROR_MENTIONS("swap/model_state.pp00.pdparams: holds llama.layers.2.");
    ASSERT_ERROR_MENTIONS("puts on stage 1 of 2");
    close_dir(&o);

    /* the layer count config.json gives */
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_tp1", "deep") == 0);
    ASSERT_TRUE(edit("deep", "config.json", "\"num_hidden_layers\": 4", "\"num_hidden_layers\": 5") == 0);
    ASSERT_REFUSED(open_dir(&o, "deep"), CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                   "deep: no tensor of decoder layer 4, but deep/config.json says num_hidden_layers 5");
    close_dir(&o);
    ASSERT_TRUE(edit("deep", "config.json", "\"num_hidden_layers\": 5", "\"num_hidden_layers\": 2") == 0);
    ASSERT_REFUSED(open_dir(&o, "deep"), CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                   "holds llama.layers.2.self_attn.q_proj.weight, but deep/config.json says num_hidden_layers 2");
    close_dir(&o);

    /* sizes that do not fit the tensors */
    ASSERT_TRUE(ckpt_test_copy_data_dir("paddlenlp/fp32_tp1", "wide") == 0);
    ASSERT_TRUE(edit("wide", "config.json", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4") == 0);
    ASSERT_REFUSED(open_dir(&o, "wide"), CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                   "llama.layers.0.self_attn.k_proj.weight is [16, 8] merged over 1 TP rank, but wide/config.json "
                   "implies [16, 16]");
    close_dir(&o);
    ASSERT_TRUE(edit("wide", "config.json", "\"num_key_value_heads\": 4", "\"num_key_value_heads\": -4") == 0);
    ASSERT_REFUSED(open_dir(&o, "wide"), CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                   "wide/config.json: num_key_value_heads is -4, not a whole number");
    close_dir(&o);
}
