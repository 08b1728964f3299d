/* Tensor maps from hostile JSON: parsing must never crash, and a map it accepts must
 * survive what programs do with it: inversion (and inverting back), and application to a
 * small LLaMA-named namespace of zero tensors, whatever the outcome of each step. */
#include <ckpt.h>

#include "fuzz.h"

#include <string.h>

static const struct {
    const char *name;
    int64_t rows, cols;
} inputs[] = {
    { "llama.embed_tokens.weight", 16, 8 },
    { "llama.layers.0.self_attn.q_proj.weight", 8, 8 },
    { "llama.layers.0.self_attn.k_proj.weight", 8, 4 },
    { "llama.layers.0.self_attn.v_proj.weight", 8, 4 },
    { "llama.layers.0.self_attn.qkv_proj.weight", 8, 16 },
    { "llama.layers.0.mlp.gate_up_fused_proj.weight", 8, 32 },
    { "llama.layers.100.mlp.gate_proj.weight", 8, 16 },
    { "llama.layers.100.mlp.up_proj.weight", 8, 16 },
    { "llama.layers.100.input_layernorm.weight", 8, 0 },
    { "lm_head.weight", 8, 16 },
};
#define N_INPUTS (sizeof inputs / sizeof inputs[0])

static void apply(const ckpt_map *m, const ckpt_map_params *p)
{
    static const char *const variants[] = { "fused_qkv", "unfused_ffn", NULL };
    ckpt_map_input in[N_INPUTS];
    ckpt_map_result *r = NULL;
    ckpt_graph *g;
    size_t i;

    FUZZ_ASSERT(ckpt_graph_new(&g) == 0);
    for (i = 0; i < N_INPUTS; i++) {
        int64_t shape[2] = { inputs[i].rows, inputs[i].cols };
        in[i].name = inputs[i].name;
        in[i].home = i;
        FUZZ_ASSERT(ckpt_node_zeros(g, CKPT_DTYPE_BF16, inputs[i].cols ? 2 : 1, shape, &in[i].node) == 0);
    }
    if (ckpt_map_apply(m, p, g, in, N_INPUTS, ckpt_map_variant_count(m) ? variants : NULL, &r) == 0) {
        for (i = 0; i < ckpt_map_result_count(r); i++) {
            const ckpt_map_output *o = ckpt_map_result_at(r, i);
            FUZZ_ASSERT(o->name && o->node && o->home < N_INPUTS);
            FUZZ_ASSERT(ckpt_node_numel(o->node) >= 0);
        }
    }
    ckpt_map_result_free(r);
    ckpt_graph_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_map *m = NULL, *inv = NULL, *back = NULL;
    ckpt_map_params *p = NULL;
    const char *missing;

    if (ckpt_map_parse(&m, (const char *)data, size, "fuzz") < 0)
        return 0;
    FUZZ_ASSERT(ckpt_map_name(m) && ckpt_map_source_kind(m) && ckpt_map_target_kind(m));
    FUZZ_ASSERT(ckpt_map_params_new(&p) == 0);
    ckpt_map_params_set(p, "hidden_size", 8);
    ckpt_map_params_set(p, "num_attention_heads", 2);
    ckpt_map_params_set(p, "num_key_value_heads", 1);
    FUZZ_ASSERT(ckpt_map_params_complete(m, p, &missing) >= 0);
    apply(m, p);
    if (ckpt_map_invert(m, &inv) == 0) {
        apply(inv, p);
        FUZZ_ASSERT(ckpt_map_invert(inv, &back) == 0);
        FUZZ_ASSERT(strcmp(ckpt_map_name(back), ckpt_map_name(m)) == 0);
    }
    ckpt_map_free(back);
    ckpt_map_free(inv);
    ckpt_map_free(m);
    ckpt_map_params_free(p);
    return 0;
}
