/* Model families from hostile JSON. The first byte picks what the rest is: even, a family
 * file (loaded over the built-ins it extends; one that loads reads a small config through
 * its rows and checks tensors and order without crashing); odd, a config.json read through
 * every built-in family, where an accepted one has every size within its bound. */
#include <ckpt.h>
#include <ckpt/family.h>

#include "fuzz.h"

#include <string.h>

static const char small_config[] =
    "{\"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 1, \"vocab_size\": 16}";

static const struct {
    const char *name;
    int64_t rows, cols;
} tensors[] = {
    { "model.embed_tokens.weight", 16, 8 },          { "model.layers.0.self_attn.q_proj.weight", 8, 8 },
    { "model.layers.0.self_attn.k_proj.weight", 4, 8 }, { "model.layers.0.self_attn.q_proj.bias", 8, 0 },
    { "model.layers.0.input_layernorm.weight", 8, 0 }, { "model.layers.3.input_layernorm.weight", 8, 0 },
    { "model.norm.weight", 8, 0 },                    { "lm_head.weight", 16, 8 },
};
#define N_TENSORS (sizeof tensors / sizeof tensors[0])

/* A config a family accepts becomes Megatron args that name the same family and read back
 * through its rows: what hf2mcore writes, mcore2hf reads. */
static void args_round_trip(const ckpt_family *f, const ckpt_family_config *c)
{
    const ckpt_family *back;
    ckpt_family_config *again = NULL;
    ckpt_value *args;
    ckpt_arena *a;

    FUZZ_ASSERT(ckpt_arena_new(&a) == 0);
    if (ckpt_family_config_args(f, c, a, 1, "local", &args) == 0) {
        FUZZ_ASSERT(ckpt_family_detect(&back, CKPT_FAMILY_MEGATRON, NULL, args) == 0);
        FUZZ_ASSERT(back == f);
        FUZZ_ASSERT(ckpt_family_config_read(&again, f, CKPT_FAMILY_MEGATRON, "args", args) == 0);
        ckpt_family_config_free(again);
    } else {
        FUZZ_ASSERT(strstr(ckpt_error_last()->message, "fuzz/config.json") != NULL);
    }
    ckpt_arena_free(a);
}

static void use(const ckpt_family *f, const char *config, int builtin)
{
    ckpt_family_config *c;
    ckpt_map_input in[N_TENSORS];
    const char *names[N_TENSORS];
    size_t perm[N_TENSORS], i;
    const ckpt_value *v;
    ckpt_graph *g;

    if (ckpt_family_config_read(&c, f, CKPT_FAMILY_HF, "fuzz/config.json", config) < 0) {
        FUZZ_ASSERT(ckpt_error_last()->message[0]);
        return;
    }
    if (ckpt_family_config_get(c, "hidden_size", &v) == 0 && v->kind == CKPT_VAL_INT)
        FUZZ_ASSERT(v->u.integer >= 1 && v->u.integer <= 2147483647);
    FUZZ_ASSERT(ckpt_graph_new(&g) == 0);
    for (i = 0; i < N_TENSORS; i++) {
        int64_t shape[2] = { tensors[i].rows, tensors[i].cols };
        in[i].name = names[i] = tensors[i].name;
        in[i].home = 0;
        FUZZ_ASSERT(ckpt_node_zeros(g, CKPT_DTYPE_BF16, tensors[i].cols ? 2 : 1, shape, &in[i].node) == 0);
    }
    for (i = 0; i <= N_TENSORS; i++)
        (void)ckpt_family_check_tensors(f, c, CKPT_FAMILY_HF, "fuzz/config.json", "fuzz/w", in, i);
    FUZZ_ASSERT(ckpt_family_order(f, CKPT_FAMILY_HF, names, N_TENSORS, perm) == 0);
    (void)ckpt_family_left_out(f, CKPT_FAMILY_HF, "model.rotary_emb.inv_freq");
    if (builtin)
        args_round_trip(f, c);
    ckpt_graph_free(g);
    ckpt_family_config_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], *text;
    ckpt_family *f = NULL;
    size_t i;
    int fd;

    if (size < 1 || size > (1u << 16))
        return 0;
    if (!(data[0] & 1)) {
        fd = fuzz_memfd(data + 1, size - 1, path, sizeof path);
        if (ckpt_family_load(&f, path) == 0) {
            use(f, small_config, 0);
            ckpt_family_free(f);
        }
        close(fd);
        return 0;
    }
    text = malloc(size);
    FUZZ_ASSERT(text);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    for (i = 0; i < ckpt_family_builtin_count(); i++)
        use(ckpt_family_builtin_at(i), text, 1);
    free(text);
    return 0;
}
