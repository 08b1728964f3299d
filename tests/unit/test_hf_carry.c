/* What config.json and generation_config.json say that Megatron's own args cannot, kept in
 * args as hf_* attributes and read back; the report's note on what config.json leaves to
 * defaults or to some transformers versions only. */
#include "test.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char config[] =
    "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 4, \"vocab_size\": 100, \"bos_token_id\": 1, \"eos_token_id\": [2, 7, 9], "
    "\"pad_token_id\": 0}";

CKPT_TEST(test_hf_carry_token_ids_round_trip)
{
    static const int64_t mix[] = { 0, 1, 1, 0 }; /* Gemma 3's layers: no every-Nth pattern */
    ckpt_arena *a;
    ckpt_value *args;
    ckpt_hf_llama_dims d;
    ckpt_buf json = CKPT_BUF_INIT, note = CKPT_BUF_INIT;
    const ckpt_value *v;

    ckpt_hf_llama_dims_init(&d);
    ASSERT_OK(ckpt_hf_llama_dims_parse("config.json", config, sizeof config - 1, &d));
    ASSERT_TRUE(d.bos_token_id == 1 && d.eos_token_id == -1 && d.pad_token_id == 0);
    ASSERT_EQ_INT(d.n_eos_token_list, 3);
    ASSERT_TRUE(d.eos_token_list[0] == 2 && d.eos_token_list[1] == 7 && d.eos_token_list[2] == 9);
    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_hf_llama_megatron_args(a, &d, "config.json", 1, "local", &args));
    v = ckpt_megatron_arg(args, "hf_eos_token_id");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_LIST && v->u.seq.n == 3 && v->u.seq.items[2]->u.integer == 9);
    v = ckpt_megatron_arg(args, "hf_pad_token_id");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_INT && v->u.integer == 0);
    ASSERT_OK(ckpt_hf_llama_config(args, 100, CKPT_DTYPE_F32, &json));
    ASSERT_TRUE(strstr((const char *)json.data, "\"bos_token_id\": 1,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"eos_token_id\": [\n    2,\n    7,\n    9\n  ],\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\"pad_token_id\": 0,\n") != NULL);
    ASSERT_OK(ckpt_hf_llama_config_note(args, &note));
    ASSERT_EQ_INT(note.len, 0);

    /* a token id the vocabulary does not hold is refused, naming the arg */
    ckpt_buf_clear(&json);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_hf_llama_config(args, 9, CKPT_DTYPE_F32, &json));
    ASSERT_ERROR_MENTIONS("args.hf_eos_token_id is not a token id below the vocabulary size 9");
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_bos_token_id", "1"));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_hf_llama_config(args, 100, CKPT_DTYPE_F32, &json));
    ASSERT_ERROR_MENTIONS("args.hf_bos_token_id is not a token id");

    /* args Megatron wrote: no token ids, and the note says what config.json leaves out */
    ASSERT_OK(ckpt_megatron_args_new(a, &args));
    ASSERT_OK(ckpt_hf_llama_config_note(args, &note));
    ASSERT_TRUE(strstr((const char *)note.data, "no token ids in the args") != NULL);

    /* Gemma 3: layer kinds that only a list says are lost on transformers 4.50-4.52; an
     * every-Nth pattern is not */
    ckpt_buf_clear(&note);
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_model_type", "gemma3_text"));
    ASSERT_OK(ckpt_megatron_args_set_int(a, args, "window_attn_skip_freq", 6));
    ASSERT_OK(ckpt_hf_llama_config_note(args, &note));
    ASSERT_EQ_INT(note.len, 0);
    ASSERT_OK(ckpt_megatron_args_set_int_list(a, args, "window_attn_skip_freq", mix, 4));
    ASSERT_OK(ckpt_hf_llama_config_note(args, &note));
    ASSERT_TRUE(strstr((const char *)note.data, "transformers 4.50-4.52, which read only that") != NULL);
    ckpt_buf_dispose(&note);
    ckpt_buf_dispose(&json);
    ckpt_arena_free(a);
}

CKPT_TEST(test_hf_carry_eos_list_bounded)
{
    static const char sizes[] = "{\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
                                "\"num_attention_heads\": 4, \"vocab_size\": 100, ";
    char text[1024];
    ckpt_hf_llama_dims d;
    size_t n;
    int i;

    n = (size_t)snprintf(text, sizeof text, "%s\"eos_token_id\": [", sizes);
    for (i = 0; i <= CKPT_HF_MAX_EOS_TOKENS; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%d", i ? "," : "", i);
    n += (size_t)snprintf(text + n, sizeof text - n, "]}");
    ckpt_hf_llama_dims_init(&d);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_hf_llama_dims_parse("c.json", text, n, &d));
    ASSERT_ERROR_MENTIONS("c.json: eos_token_id lists more than 64 tokens");
    snprintf(text, sizeof text, "%s\"eos_token_id\": [2, 100]}", sizes);
    ckpt_hf_llama_dims_init(&d);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_hf_llama_dims_parse("c.json", text, strlen(text), &d));
    ASSERT_ERROR_MENTIONS("c.json: eos_token_id is 100, not a token id below vocab_size 100");
    snprintf(text, sizeof text, "%s\"bos_token_id\": \"1\"}", sizes);
    ckpt_hf_llama_dims_init(&d);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_hf_llama_dims_parse("c.json", text, strlen(text), &d));
    ASSERT_ERROR_MENTIONS("c.json: bos_token_id is not a token id (an integer)");
}

CKPT_TEST(test_hf_carry_generation_config)
{
    static const char gen[] = "{\n  \"bos_token_id\": 1,\n  \"do_sample\": true\n}\n";
    ckpt_arena *a;
    ckpt_value *args;
    ckpt_buf back = CKPT_BUF_INIT;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_megatron_args_new(a, &args));
    mkdir("gen", 0755);
    /* none there: nothing kept, nothing written back */
    ASSERT_OK(ckpt_hf_generation_config_to_args(a, args, "gen"));
    ASSERT_TRUE(ckpt_megatron_arg(args, "hf_generation_config") == NULL);
    ASSERT_OK(ckpt_hf_generation_config_of(args, &back));
    ASSERT_EQ_INT(back.len, 0);
    ckpt_test_write_file("gen/generation_config.json", gen, sizeof gen - 1);
    ASSERT_OK(ckpt_hf_generation_config_to_args(a, args, "gen"));
    ASSERT_OK(ckpt_hf_generation_config_of(args, &back));
    ASSERT_EQ_STR((const char *)back.data, gen); /* byte for byte */
    ckpt_test_write_file("gen/generation_config.json", "[1, 2]", 6);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_hf_generation_config_to_args(a, args, "gen"));
    ASSERT_ERROR_MENTIONS("gen/generation_config.json: not a JSON object");
    ASSERT_OK(ckpt_megatron_args_set_str(a, args, "hf_generation_config", "{\"a\": "));
    ckpt_buf_clear(&back);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_hf_generation_config_of(args, &back));
    ASSERT_ERROR_MENTIONS("args.hf_generation_config is not the text of a JSON object");
    ckpt_buf_dispose(&back);
    ckpt_arena_free(a);
}
