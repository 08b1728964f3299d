/* The config.json a transformers user loads, written from a family's hf_config_out: keys
 * sorted and indented as save_pretrained writes them, floats as Python prints them, and the
 * few shapes a plain value cannot say (RoPE descriptions, per-layer lists) from generators. */
#include "family_private.h"

#include <ckpt/shard.h>

#include <stdlib.h>
#include <string.h>

/* The RoPE description: rope_parameters (with rope_theta) for transformers 5, rope_scaling
 * (null without scaling) for 4. */
/* YaRN (DeepSeek-V3): its numbers, and transformers 4's "type" beside "rope_type". */
static void put_yarn(ckpt_buf *b, const ckpt_family_config *c, int with_theta)
{
    static const char *const keys[] = { "beta_fast", "beta_slow", "factor", "mscale", "mscale_all_dim" };
    static const char *const fields[] = { "yarn_beta_fast", "yarn_beta_slow", "yarn_factor", "yarn_mscale",
                                          "yarn_mscale_all_dim" };
    const char *indent = "\n    ";
    size_t i;

    ckpt_buf_puts(b, "{");
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        ckpt_buf_printf(b, "%s\"%s\": ", indent, keys[i]);
        ckpt_shard_json_float(b, ckpt_family__real(c, fields[i], 0));
        ckpt_buf_puts(b, ",");
    }
    ckpt_buf_printf(b, "%s\"original_max_position_embeddings\": %lld,", indent,
                    (long long)ckpt_family__int(c, "yarn_original_max_positions", 0));
    if (with_theta) {
        ckpt_buf_printf(b, "%s\"rope_theta\": ", indent);
        ckpt_shard_json_float(b, ckpt_family__real(c, "rope_theta", 0));
        ckpt_buf_puts(b, ",");
    }
    ckpt_buf_printf(b, "%s\"rope_type\": \"yarn\"%s\n  }", indent, with_theta ? "" : ",\n    \"type\": \"yarn\"");
}

static void put_rope(ckpt_buf *b, const ckpt_family_config *c, int with_theta)
{
    const char *indent = "\n    ", *type = ckpt_family__str(c, "rope");
    int llama3 = type && strcmp(type, "llama3") == 0, linear = type && strcmp(type, "linear") == 0;

    if (type && strcmp(type, "yarn") == 0) {
        put_yarn(b, c, with_theta);
        return;
    }

    if (!llama3 && !linear && !with_theta) {
        ckpt_buf_puts(b, "null");
        return;
    }
    ckpt_buf_puts(b, "{");
    if (llama3 || linear) {
        ckpt_buf_printf(b, "%s\"factor\": ", indent);
        ckpt_shard_json_float(b, ckpt_family__real(c, "rope_factor", 0));
        ckpt_buf_puts(b, ",");
    }
    if (llama3) {
        ckpt_buf_printf(b, "%s\"high_freq_factor\": ", indent);
        ckpt_shard_json_float(b, ckpt_family__real(c, "rope_high_freq_factor", 0));
        ckpt_buf_printf(b, ",%s\"low_freq_factor\": ", indent);
        ckpt_shard_json_float(b, ckpt_family__real(c, "rope_low_freq_factor", 0));
        ckpt_buf_printf(b, ",%s\"original_max_position_embeddings\": %lld,", indent,
                        (long long)ckpt_family__int(c, "rope_original_max_positions", 0));
    }
    if (with_theta) {
        ckpt_buf_printf(b, "%s\"rope_theta\": ", indent);
        ckpt_shard_json_float(b, ckpt_family__real(c, "rope_theta", 0));
        ckpt_buf_puts(b, ",");
    }
    ckpt_buf_printf(b, "%s\"rope_type\": \"%s\"\n  }", indent, llama3 ? "llama3" : linear ? "linear" : "default");
}

/* transformers 5's Gemma 3: a RoPE description per attention kind, the sliding layers' base
 * their own (rope_local_theta) and never scaled, the full layers' linear scaling (Gemma 3
 * 4B, 12B, 27B) where the model has it. */
static void put_rope_by_type(ckpt_buf *b, const ckpt_family_config *c)
{
    const char *type = ckpt_family__str(c, "rope");
    int linear = type && strcmp(type, "linear") == 0;

    ckpt_buf_puts(b, "{\n    \"full_attention\": {\n      ");
    if (linear) {
        ckpt_buf_puts(b, "\"factor\": ");
        ckpt_shard_json_float(b, ckpt_family__real(c, "rope_factor", 0));
        ckpt_buf_puts(b, ",\n      ");
    }
    ckpt_buf_puts(b, "\"rope_theta\": ");
    ckpt_shard_json_float(b, ckpt_family__real(c, "rope_theta", 0));
    ckpt_buf_printf(b, ",\n      \"rope_type\": \"%s\"\n    },\n    \"sliding_attention\": {\n      \"rope_theta\": ",
                    linear ? "linear" : "default");
    ckpt_shard_json_float(b, ckpt_family__real(c, "rope_local_theta", 0));
    ckpt_buf_puts(b, ",\n      \"rope_type\": \"default\"\n    }\n  }");
}

/* transformers 4.50-4.52 have no layer_types: they take layer i for full attention where
 * (i + 1) % sliding_window_pattern == 0 (their default 6 otherwise). The N that says the
 * layers, past the last layer when none is full; 0 when no N says them. */
static int64_t window_pattern_4x(const ckpt_family_config *c)
{
    int64_t every = ckpt_family__layer_every(c), n = ckpt_family__int(c, "num_layers", 0),
            own = ckpt_family__int(c, "window_pattern", 0);

    if (every)
        return every > 0 ? every : 0;
    return own > n ? own : n + 1;
}

/* Qwen3-MoE's mlp_only_layers: the layers the field moe_layers says are dense, as Python's
 * json writes a list ("[]" when none). */
static void put_dense_layers(ckpt_buf *b, const ckpt_family_config *c)
{
    const ckpt_value *v = ckpt_family__get(c, "moe_layers");
    size_t i, n = 0;

    ckpt_buf_puts(b, "[");
    for (i = 0; v && v->kind == CKPT_VAL_LIST && i < v->u.seq.n; i++)
        if (v->u.seq.items[i]->kind == CKPT_VAL_INT && v->u.seq.items[i]->u.integer == 0)
            ckpt_buf_printf(b, "%s\n    %zu", n++ ? "," : "", i);
    ckpt_buf_puts(b, n ? "\n  ]" : "]");
}

static void put_value(ckpt_buf *b, const ckpt_value *v)
{
    size_t i;

    switch (v ? v->kind : CKPT_VAL_NONE) {
    case CKPT_VAL_INT: ckpt_buf_printf(b, "%lld", (long long)v->u.integer); break;
    case CKPT_VAL_FLOAT: ckpt_shard_json_float(b, v->u.real); break;
    case CKPT_VAL_BOOL: ckpt_buf_puts(b, v->u.boolean ? "true" : "false"); break;
    case CKPT_VAL_STR: ckpt_shard_json_string(b, v->u.str.ptr); break;
    case CKPT_VAL_LIST:
    case CKPT_VAL_TUPLE:
        ckpt_buf_puts(b, "[");
        for (i = 0; i < v->u.seq.n; i++) {
            ckpt_buf_puts(b, i ? ",\n    " : "\n    ");
            put_value(b, v->u.seq.items[i]);
        }
        ckpt_buf_puts(b, "\n  ]");
        break;
    default: ckpt_buf_puts(b, "null"); break;
    }
}

static int is_none(const ckpt_value *v)
{
    return !v || v->kind == CKPT_VAL_NONE;
}

/* A field read through its row's "values" is written as the string it was read from. */
static void put_field(ckpt_buf *b, const ckpt_family *f, const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v = ckpt_family__get(c, field);
    const cJSON *row, *m;

    cJSON_ArrayForEach(row, f->config) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(row, "f");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, field) != 0)
            continue;
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(row, "values"))
            if (v && v->kind == CKPT_VAL_BOOL && cJSON_IsBool(m) && cJSON_IsTrue(m) == (v->u.boolean != 0)) {
                ckpt_shard_json_string(b, m->string);
                return;
            }
    }
    put_value(b, v);
}

/* One key's value; 0 when the key is left out. */
static int put_out(ckpt_buf *b, const ckpt_family *f, const ckpt_family_config *c, const cJSON *o, ckpt_dtype dtype)
{
    int64_t i, n;

    if (cJSON_IsArray(o)) { /* ["$class"] */
        ckpt_buf_puts(b, "[\n    ");
        ckpt_shard_json_string(b, ckpt_family_string(f, "hf.class"));
        ckpt_buf_puts(b, "\n  ]");
    } else if (cJSON_IsObject(o) && cJSON_GetObjectItemCaseSensitive(o, "float")) {
        ckpt_shard_json_float(b, cJSON_GetObjectItemCaseSensitive(o, "float")->valuedouble);
    } else if (cJSON_IsObject(o)) {
        const cJSON *field = cJSON_GetObjectItemCaseSensitive(o, "field"), *unless = cJSON_GetObjectItemCaseSensitive(o, "unless");
        int64_t skip = 0;
        if (ckpt_family__expr(f, c, unless->valuestring, ckpt_family__where(f, c), &skip, NULL, NULL) < 0 || skip)
            return 0;
        put_value(b, ckpt_family__get(c, field->valuestring));
    } else if (cJSON_IsBool(o)) {
        ckpt_buf_puts(b, cJSON_IsTrue(o) ? "true" : "false");
    } else if (cJSON_IsNumber(o)) {
        ckpt_buf_printf(b, "%lld", (long long)o->valuedouble);
    } else if (!cJSON_IsString(o)) {
        ckpt_buf_puts(b, "null");
    } else if (o->valuestring[0] == '=') {
        ckpt_shard_json_string(b, o->valuestring + 1);
    } else if (strcmp(o->valuestring, "$dtype") == 0) {
        ckpt_shard_json_string(b, ckpt_dtype_name(dtype));
    } else if (strcmp(o->valuestring, "$rope_parameters") == 0 || strcmp(o->valuestring, "$rope_scaling") == 0) {
        put_rope(b, c, o->valuestring[6] == 'p');
    } else if (strcmp(o->valuestring, "$rope_parameters_by_type") == 0) {
        put_rope_by_type(b, c);
    } else if (strcmp(o->valuestring, "$sliding_window_pattern") == 0) {
        if (!(n = window_pattern_4x(c)))
            return 0;
        ckpt_buf_printf(b, "%lld", (long long)n);
    } else if (strcmp(o->valuestring, "$dense_layers") == 0) {
        put_dense_layers(b, c);
    } else if (strcmp(o->valuestring, "$full_attention_layers") == 0) {
        n = ckpt_family__int(c, "num_layers", 0);
        ckpt_buf_puts(b, "[");
        for (i = 0; i < n; i++)
            ckpt_buf_printf(b, "%s\n    \"full_attention\"", i ? "," : "");
        ckpt_buf_puts(b, "\n  ]");
    } else if (o->valuestring[0] == '?') {
        if (is_none(ckpt_family__get(c, o->valuestring + 1)))
            return 0;
        put_value(b, ckpt_family__get(c, o->valuestring + 1));
    } else {
        put_field(b, f, c, o->valuestring);
    }
    return 1;
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

int ckpt_family_config_json(const ckpt_family *f, const ckpt_family_config *c, const char *framework, ckpt_dtype dtype,
                            ckpt_buf *out)
{
    const cJSON **keys, *o;
    size_t n = 0, i, mark;
    int64_t layers;
    int first = 1;

    if (!f || !c || !framework || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_config_json: NULL argument");
    if (strcmp(framework, CKPT_FAMILY_HF) != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "family %s: no config.json for %s", f->name,
                               framework);
    if (ckpt_family__int(c, "num_heads", 0) < 1 || ckpt_family__int(c, "hidden_size", 0) < 1 ||
        ckpt_family__int(c, "vocab_size", 0) < 1)
        return ckpt_error_set(CKPT_EINVALID, "a %s config needs a family, hidden_size, num_attention_heads and "
                                             "vocab_size", f->title);
    /* lists with a line per layer: a count from args is bounded before it is written */
    layers = ckpt_family__int(c, "num_layers", 0);
    if (layers < 0 || layers > FAMILY_MAX_LAYERS)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "num_hidden_layers %lld is not from 0 to %d",
                               (long long)layers, FAMILY_MAX_LAYERS);
    if (!(keys = calloc((size_t)cJSON_GetArraySize(f->hf_config_out) + 1, sizeof *keys)))
        return ckpt_error_oom();
    cJSON_ArrayForEach(o, f->hf_config_out)
        keys[n++] = o;
    qsort(keys, n, sizeof *keys, by_key);
    ckpt_buf_puts(out, "{\n");
    for (i = 0; i < n; i++) {
        mark = out->len;
        ckpt_buf_puts(out, first ? "  " : ",\n  ");
        ckpt_shard_json_string(out, keys[i]->string);
        ckpt_buf_puts(out, ": ");
        if (put_out(out, f, c, keys[i], dtype))
            first = 0;
        else if (out->data) {
            out->len = mark;
            out->data[mark] = 0;
        }
    }
    ckpt_buf_puts(out, "\n}\n");
    free(keys);
    return out->data ? 0 : ckpt_error_oom();
}
