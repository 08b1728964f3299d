/* Hugging Face LLaMA-family config.json from hostile JSON: a config accepted has every size
 * within its bound and head counts that divide, holding a small LLaMA's tensors against it
 * (or the tensors its own sizes imply) never crashes or allocates by the config's sizes, and
 * its family comes back from the Megatron args made for it. */
#include <ckpt.h>

#include "fuzz.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int64_t rows, cols;
} tensors[] = {
    { "model.embed_tokens.weight", 16, 8 },
    { "model.layers.0.self_attn.q_proj.weight", 8, 8 },
    { "model.layers.0.self_attn.k_proj.weight", 4, 8 },
    { "model.layers.0.self_attn.v_proj.weight", 4, 8 },
    { "model.layers.0.self_attn.o_proj.weight", 8, 8 },
    { "model.layers.0.self_attn.q_proj.bias", 8, 0 },
    { "model.layers.0.mlp.gate_proj.weight", 12, 8 },
    { "model.layers.0.mlp.up_proj.weight", 12, 8 },
    { "model.layers.0.mlp.down_proj.weight", 8, 12 },
    { "model.layers.0.input_layernorm.weight", 8, 0 },
    { "model.layers.0.post_attention_layernorm.weight", 8, 0 },
    { "model.layers.0.self_attn.rotary_emb.inv_freq", 2, 0 },
    { "model.layers.7.input_layernorm.weight", 8, 0 },
    { "model.norm.weight", 8, 0 },
    { "lm_head.weight", 16, 8 },
};
#define N_TENSORS (sizeof tensors / sizeof tensors[0])

/* An accepted config that Megatron's args can say comes back from them as the same family,
 * with its biases, window and RoPE scaling; a family past those ckpt_hf_family numbers
 * (Qwen3's q/k norms, Gemma 3, GPT-2) is one ckpt_hf_llama_config refuses by name, and
 * family_fuzzer checks its round trip through the family API. */
static void family_round_trip(const ckpt_hf_llama_dims *d)
{
    ckpt_hf_llama_dims back;
    ckpt_arena *a;
    ckpt_value *args;
    ckpt_buf json = CKPT_BUF_INIT;

    FUZZ_ASSERT(ckpt_arena_new(&a) == 0);
    if (ckpt_hf_llama_megatron_args(a, d, "fuzz/config.json", 1, "local", &args) == 0) {
        if (d->family > CKPT_HF_QWEN2) {
            FUZZ_ASSERT(ckpt_hf_llama_config(args, d->vocab_size, d->dtype, &json) == CKPT_EUNSUPPORTED);
            FUZZ_ASSERT(ckpt_error_last()->klass == CKPT_ERRCLASS_MODEL);
            goto done;
        }
        FUZZ_ASSERT(ckpt_hf_llama_config(args, d->vocab_size, d->dtype, &json) == 0);
        ckpt_hf_llama_dims_init(&back);
        FUZZ_ASSERT(ckpt_hf_llama_dims_parse("back", (const char *)json.data, json.len, &back) == 0);
        FUZZ_ASSERT(back.family == d->family && back.qkv_bias == d->qkv_bias &&
                    back.sliding_window == d->sliding_window && (back.rope_factor != 0) == (d->rope_factor != 0));
    } else {
        FUZZ_ASSERT(strstr(ckpt_error_last()->message, "fuzz/config.json") != NULL);
    }
done:
    ckpt_buf_dispose(&json);
    ckpt_arena_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_hf_llama_dims d;
    ckpt_map_input in[N_TENSORS];
    ckpt_graph *g;
    size_t i;

    ckpt_hf_llama_dims_init(&d);
    if (ckpt_hf_llama_dims_parse("fuzz/config.json", (const char *)data, size, &d) < 0) {
        FUZZ_ASSERT(strstr(ckpt_error_last()->message, "fuzz/config.json") != NULL);
        return 0;
    }
    FUZZ_ASSERT(d.hidden_size >= 1 && d.hidden_size <= 2147483647 && d.intermediate_size >= 1 &&
                d.intermediate_size <= 2147483647 && d.vocab_size >= 1 && d.vocab_size <= 2147483647);
    FUZZ_ASSERT(d.num_layers >= 1 && d.num_layers <= 2147483647 && d.head_dim >= 1 && d.head_dim <= 2147483647);
    FUZZ_ASSERT(d.num_kv_heads >= 1 && d.num_heads % d.num_kv_heads == 0);
    FUZZ_ASSERT(d.bos_token_id >= -1 && d.bos_token_id < d.vocab_size);
    FUZZ_ASSERT(ckpt_graph_new(&g) == 0);
    for (i = 0; i < N_TENSORS; i++) {
        int64_t shape[2] = { tensors[i].rows, tensors[i].cols };
        in[i].name = tensors[i].name;
        in[i].home = 0;
        FUZZ_ASSERT(ckpt_node_zeros(g, CKPT_DTYPE_BF16, tensors[i].cols ? 2 : 1, shape, &in[i].node) == 0);
    }
    for (i = 0; i <= N_TENSORS; i++)
        if (ckpt_hf_llama_check_tensors(&d, "fuzz/config.json", "fuzz/model.safetensors", in, i) < 0)
            FUZZ_ASSERT(strstr(ckpt_error_last()->message, "fuzz/") != NULL);
    ckpt_graph_free(g);
    if (d.num_layers <= 64)
        family_round_trip(&d);
    return 0;
}
