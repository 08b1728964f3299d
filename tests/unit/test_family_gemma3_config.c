/* Gemma 3's config through its family file (formats/families/gemma3.json) on the real fixture
 * (testdata/hf/transformers5/gemma3_tiny): layers of two kinds from layer_types or the
 * every-Nth-layer pattern, Megatron's window_attn_skip_freq written and read back (N, a 0/1
 * list, None), softmax_scale, the config.json transformers wrote given back, the forward
 * verify runs (window, layer kinds, both RoPE bases, Gemma's scales and norms), the
 * vision-language model_type and the local implementation refused with why. */
#include "family_fixture.h"

#define CONFIG "hf/transformers5/gemma3_tiny/config.json"

/* what ckptconv writes beside transformers 5's keys, for transformers 4.5x */
static const char *const keys_4x[] = { "rope_local_base_freq", "rope_scaling", "rope_theta", "sliding_window_pattern",
                                       "torch_dtype", NULL };

/* The fixture's config.json as a string (ckpt_test_read_file's bytes have no NUL), malloc'ed. */
static char *read_text(size_t *len)
{
    unsigned char *raw = ckpt_test_read_file(ckpt_test_data(CONFIG), len);
    char *text = raw ? malloc(*len + 1) : NULL;

    if (text) {
        memcpy(text, raw, *len);
        text[*len] = 0;
    }
    free(raw);
    return text;
}

/* The fixture's config.json with its "layer_types" list replaced by `types` (NULL: kept;
 * "" : removed), malloc'ed. */
static char *fixture_config(const char *types)
{
    size_t len;
    char *text = read_text(&len), *out, *a, *b;

    if (!text || !types)
        return text;
    a = strstr(text, "\"layer_types\"");
    b = a ? strchr(a, ']') : NULL;
    if (!b || !(out = malloc(len + strlen(types) + 32))) {
        free(text);
        return NULL;
    }
    *a = 0;
    snprintf(out, len + strlen(types) + 32, "%s%s%s%s", text, *types ? "\"layer_types\": " : "", types,
             *types ? b + 1 : b + 2);
    free(text);
    return out;
}

static int read_hf(const char *types, ckpt_family_config **c)
{
    const ckpt_family *f;
    char *text = fixture_config(types);
    int rc;

    if (!text)
        return CKPT_ENOMEM;
    rc = ckpt_family_builtin(&f, "gemma3");
    if (rc == 0)
        rc = ckpt_family_config_read(c, f, CKPT_FAMILY_HF, "gemma/config.json", text);
    free(text);
    return rc;
}

static const char *layer(const ckpt_family_config *c, size_t i)
{
    const ckpt_value *v;
    if (ckpt_family_config_get(c, "attention_layers", &v) < 0 || v->kind != CKPT_VAL_LIST || i >= v->u.seq.n)
        return "?";
    return v->u.seq.items[i]->u.str.ptr;
}

CKPT_TEST(test_family_gemma3_config_round_trip)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL, *back = NULL;
    ckpt_arena *a = NULL;
    ckpt_value *args = NULL;
    const ckpt_value *v;
    ckpt_buf json = CKPT_BUF_INIT;
    size_t len;
    char *want = read_text(&len), *tv;

    ASSERT_TRUE(want != NULL);
    ASSERT_OK(ckpt_family_builtin(&f, "gemma3"));
    ASSERT_OK(read_hf(NULL, &c));
    ASSERT_EQ_STR(layer(c, 0), "sliding_attention");
    ASSERT_EQ_STR(layer(c, 3), "full_attention");
    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 2, "transformer_engine", &args));
    v = ckpt_megatron_arg(args, "window_attn_skip_freq");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_INT && v->u.integer == 4);
    v = ckpt_megatron_arg(args, "window_size");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_TUPLE && v->u.seq.items[0]->u.integer == 3);
    v = ckpt_megatron_arg(args, "softmax_scale");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_FLOAT && fabs(v->u.real - 1.0 / sqrt(24.0)) < 1e-15);
    ASSERT_TRUE(ckpt_value_is_str(ckpt_megatron_arg(args, "hf_model_type"), "gemma3_text"));
    /* back from the args alone: the config.json transformers 5 wrote (but its version) and
     * the same model in transformers 4.5x's keys: its RoPE bases, no scaling, and the layers
     * as the every-Nth pattern 4.50-4.52 read (they have no layer_types) */
    ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, "args", args));
    ASSERT_OK(ckpt_family_config_json(f, back, CKPT_FAMILY_HF, CKPT_DTYPE_F32, &json));
    tv = strstr(want, "  \"transformers_version\"");
    ASSERT_TRUE(tv != NULL);
    memmove(tv, strchr(tv, '\n') + 1, strlen(strchr(tv, '\n') + 1) + 1);
    ASSERT_TRUE(strstr((const char *)json.data, "\n  \"rope_local_base_freq\": 10000.0,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\n  \"rope_scaling\": null,\n  \"rope_theta\": 1000000.0,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\n  \"sliding_window_pattern\": 4,\n") != NULL);
    ASSERT_TRUE(strstr((const char *)json.data, "\n  \"torch_dtype\": \"float32\",\n") != NULL);
    ASSERT_OK(fx_drop_keys((char *)json.data, keys_4x));
    ASSERT_EQ_STR((const char *)json.data, want);
    ckpt_buf_dispose(&json);
    ckpt_family_config_free(back);
    ckpt_family_config_free(c);
    ckpt_arena_free(a);
    free(want);
}

CKPT_TEST(test_family_gemma3_layer_kinds)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL, *back = NULL;
    ckpt_arena *a = NULL;
    ckpt_value *args = NULL;
    const ckpt_value *v;

    ASSERT_OK(ckpt_family_builtin(&f, "gemma3"));
    ASSERT_OK(ckpt_arena_new(&a));
    /* no every-Nth pattern says this mix: a list, 1 where the layer uses the window */
    ASSERT_OK(read_hf("[\"full_attention\", \"sliding_attention\", \"sliding_attention\", \"full_attention\"]", &c));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 1, "transformer_engine", &args));
    v = ckpt_megatron_arg(args, "window_attn_skip_freq");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_LIST && v->u.seq.n == 4 && v->u.seq.items[0]->u.integer == 0 &&
                v->u.seq.items[1]->u.integer == 1 && v->u.seq.items[3]->u.integer == 0);
    ASSERT_OK(ckpt_family_config_read(&back, f, CKPT_FAMILY_MEGATRON, "args", args));
    ASSERT_EQ_STR(layer(back, 0), "full_attention");
    ASSERT_EQ_STR(layer(back, 1), "sliding_attention");
    ASSERT_EQ_STR(layer(back, 3), "full_attention");
    ckpt_family_config_free(back);
    ckpt_family_config_free(c);
    /* every layer windowed: None */
    ASSERT_OK(read_hf("[\"sliding_attention\", \"sliding_attention\", \"sliding_attention\", \"sliding_attention\"]", &c));
    ASSERT_OK(ckpt_family_config_args(f, c, a, 1, "transformer_engine", &args));
    v = ckpt_megatron_arg(args, "window_attn_skip_freq");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_NONE);
    ckpt_family_config_free(c);
    /* without layer_types, the pattern (here the fixture's _sliding_window_pattern 6) */
    ASSERT_OK(read_hf("", &c));
    ASSERT_EQ_STR(layer(c, 3), "sliding_attention");
    ckpt_family_config_free(c);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, read_hf("[\"sliding_attention\", \"chunked_attention\", \"sliding_attention\", "
                                            "\"full_attention\"]", &c));
    ASSERT_ERROR_MENTIONS("gemma/config.json: layer_types[1] is chunked_attention, not sliding_attention or full_attention");
    ASSERT_FAILS(CKPT_EFORMAT, read_hf("[\"full_attention\"]", &c));
    ASSERT_ERROR_MENTIONS("layer_types is not a list of num_hidden_layers 4");
    ckpt_arena_free(a);
}

CKPT_TEST(test_family_gemma3_model_config)
{
    const ckpt_family *f;
    ckpt_family_config *c = NULL;
    ckpt_model_config mc;

    ASSERT_OK(ckpt_family_builtin(&f, "gemma3"));
    ASSERT_OK(read_hf(NULL, &c));
    ASSERT_OK(ckpt_family_model_config(f, c, &mc));
    ASSERT_TRUE(mc.act == CKPT_ACT_GEGLU_TANH && mc.norm == CKPT_NORM_RMS && mc.norm_weight_plus_one == 1);
    ASSERT_TRUE(mc.qk_norm == 1 && mc.sandwich_norms == 1 && mc.tied_embeddings == 1 && mc.head_dim == 16);
    ASSERT_TRUE(mc.window == 4 && mc.layer_window && mc.layer_window[0] == 1 && mc.layer_window[2] == 1 &&
                mc.layer_window[3] == 0);
    ASSERT_TRUE(mc.rope_theta == 1e6 && mc.rope_theta_local == 1e4);
    ASSERT_TRUE(fabs(mc.attn_scale - 1.0 / sqrt(24.0)) < 1e-15 && fabs(mc.embed_scale - sqrt(32.0)) < 1e-12);
    ckpt_family_config_free(c);
}

CKPT_TEST(test_family_gemma3_refusals)
{
    const ckpt_family *f;
    ckpt_map *m = NULL;

    ASSERT_FAILS(CKPT_EUNSUPPORTED,
                 ckpt_family_detect(&f, CKPT_FAMILY_HF, "vlm/config.json", "{\"model_type\": \"gemma3\"}"));
    ASSERT_ERROR_MENTIONS("vlm/config.json: model_type gemma3 is a Gemma 3 vision-language model");
    ASSERT_ERROR_MENTIONS("model_type gemma3_text (Gemma3ForCausalLM)");
    ASSERT_OK(ckpt_family_builtin(&f, "gemma3"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_family_map(f, CKPT_FAMILY_MEGATRON, "local", 0, &m));
    ASSERT_ERROR_MENTIONS("no post-attention and post-MLP norms");
    ASSERT_OK(ckpt_family_map(f, CKPT_FAMILY_MEGATRON, NULL, 0, &m));
    ckpt_map_free(m);
}
