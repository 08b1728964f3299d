/* Shared by the model sources of `ckptconv verify` (verify_common.h). */
#include "verify_common.h"

#include <ckpt/hf.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void release_ckpt(void *p) { ckpt_close(p); }
static void release_set(void *p) { ckpt_set_close(p); }
static void release_map(void *p) { ckpt_map_free(p); }
static void release_params(void *p) { ckpt_map_params_free(p); }

int ckpt_vsrc__keep_ckpt(ckpt_model_builder *b, ckpt_ckpt *c) { return ckpt_model_builder_keep(b, c, release_ckpt); }
int ckpt_vsrc__keep_set(ckpt_model_builder *b, ckpt_set *s) { return ckpt_model_builder_keep(b, s, release_set); }
int ckpt_vsrc__keep_map(ckpt_model_builder *b, ckpt_map *m) { return ckpt_model_builder_keep(b, m, release_map); }
int ckpt_vsrc__keep_params(ckpt_model_builder *b, ckpt_map_params *p)
{
    return ckpt_model_builder_keep(b, p, release_params);
}

int ckpt_vsrc__map(ckpt_model_builder *b, const char *name, const ckpt_map **out)
{
    ckpt_map *m;
    int rc;

    if ((rc = ckpt_map_builtin(&m, name)) < 0 || (rc = ckpt_vsrc__keep_map(b, m)) < 0)
        return rc;
    *out = m;
    return 0;
}

int ckpt_vsrc__find_config(const char *dir, int up, char *path, size_t cap)
{
    char base[4096];
    struct stat st;
    int i;

    if (snprintf(base, sizeof base, "%s", dir) >= (int)sizeof base)
        return CKPT_ENOTFOUND;
    for (i = 0; i <= up; i++) {
        char *slash;
        if (snprintf(path, cap, "%s/config.json", base) < (int)cap && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            return 0;
        while ((slash = strrchr(base, '/')) && slash[1] == '\0' && slash != base)
            *slash = '\0';
        if (!(slash = strrchr(base, '/')))
            snprintf(base, sizeof base, "%s", i == 0 && strcmp(dir, ".") ? "." : "..");
        else if (slash == base)
            base[1] = '\0';
        else
            *slash = '\0';
    }
    return CKPT_ENOTFOUND;
}

/* ---- config.json ---- */

static const cJSON *item(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static void get_int(const cJSON *o, const char *name, int64_t *dst)
{
    const cJSON *v = item(o, name);
    if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble))
        *dst = (int64_t)v->valuedouble;
}

static void get_double(const cJSON *o, const char *name, double *dst)
{
    const cJSON *v = item(o, name);
    if (cJSON_IsNumber(v))
        *dst = v->valuedouble;
}

/* rope_scaling (transformers 4) or rope_parameters (transformers 5): Llama 3's is run,
 * "default" is none, everything else is refused. */
static int rope_scaling(const cJSON *s, const char *path, ckpt_model_config *c)
{
    const cJSON *type;

    if (!cJSON_IsObject(s))
        return 0;
    get_double(s, "rope_theta", &c->rope_theta);
    type = item(s, "rope_type");
    if (!type)
        type = item(s, "type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "default") == 0)
        return 0;
    if (strcmp(type->valuestring, "llama3") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: RoPE scaling of type '%s' is not run by verify",
                               path, type->valuestring);
    get_double(s, "factor", &c->rope_scaling_factor);
    get_double(s, "low_freq_factor", &c->rope_low_freq_factor);
    get_double(s, "high_freq_factor", &c->rope_high_freq_factor);
    get_int(s, "original_max_position_embeddings", &c->rope_original_max_positions);
    return 0;
}

/* layer_types (transformers >= 4.53): which layers use the window. */
static int layer_types(ckpt_model_builder *b, const cJSON *types, const char *path)
{
    int64_t n = cJSON_GetArraySize(types), i = 0;
    unsigned char *flags;
    const cJSON *t;
    int rc = 0;

    if (n < 1 || n > 1 << 20)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: layer_types has %lld entries", path,
                               (long long)n);
    if (!(flags = malloc((size_t)n)))
        return ckpt_error_oom();
    cJSON_ArrayForEach(t, types)
    {
        if (cJSON_IsString(t) && strcmp(t->valuestring, "sliding_attention") == 0)
            flags[i++] = 1;
        else if (cJSON_IsString(t) && strcmp(t->valuestring, "full_attention") == 0)
            flags[i++] = 0;
        else {
            rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                 "%s: layer_types[%lld] is %s: verify runs sliding_attention and full_attention layers",
                                 path, (long long)i, cJSON_IsString(t) ? t->valuestring : "not a string");
            break;
        }
    }
    if (rc == 0)
        rc = ckpt_model_builder_layer_window(b, flags, n);
    free(flags);
    return rc;
}

/* Mistral's sliding window (MistralConfig's 4096 when absent, null for none); Qwen2 windows
 * some layers only, and only with flash attention, so its window is refused. */
static int window_fields(ckpt_model_builder *b, const cJSON *j, const char *path, ckpt_hf_family family)
{
    ckpt_model_config *c = ckpt_model_builder_config(b);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "sliding_window"), *types = item(j, "layer_types");

    if (family == CKPT_HF_QWEN2 && cJSON_IsTrue(item(j, "use_sliding_window")))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: use_sliding_window is true (Qwen2's window on some layers only) is not run by verify",
                               path);
    if (family != CKPT_HF_MISTRAL)
        return 0;
    c->window = 4096;
    if (cJSON_IsNull(w))
        c->window = 0;
    else if (w && (!cJSON_IsNumber(w) || w->valuedouble != floor(w->valuedouble) || w->valuedouble < 1 ||
                   w->valuedouble > 1e15))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: sliding_window is not a positive integer",
                               path);
    else if (w)
        c->window = (int64_t)w->valuedouble;
    return c->window > 0 && cJSON_IsArray(types) ? layer_types(b, types, path) : 0;
}

/* The map a PaddleNLP model of model_type is read with: its family's verify.maps.paddle (the
 * families with one listed when it has none); no model_type, as older PaddleNLP writes: LLaMA's. */
static int paddle_map(const char *path, const char *model_type, const char **map)
{
    const ckpt_family *f = NULL;
    ckpt_buf known = CKPT_BUF_INIT;
    size_t i;
    int rc;

    if (!model_type)
        model_type = "llama";
    if (ckpt_family_builtin(&f, model_type) == 0 && (*map = ckpt_family_string(f, "verify.maps.paddle")) != NULL)
        return 0;
    ckpt_error_clear();
    for (i = 0; i < ckpt_family_builtin_count(); i++) {
        const ckpt_family *k = ckpt_family_builtin_at(i);
        if (ckpt_family_string(k, "verify.maps.paddle"))
            ckpt_buf_printf(&known, "%s%s", known.len ? ", " : "", ckpt_family_name(k));
    }
    rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                         "%s: model_type %s: verify reads PaddleNLP checkpoints of %s only (the families whose verify.maps.paddle "
                         "names a map)",
                         path, model_type, known.data ? (const char *)known.data : "");
    ckpt_buf_dispose(&known);
    return rc;
}

/* paddle_map: a PaddleNLP config.json, whose family's map is set there (else a Hugging Face one). */
static int llama_fields(ckpt_model_builder *b, const cJSON *j, const char *path, const char **paddle_map_out)
{
    ckpt_model_config *c = ckpt_model_builder_config(b);
    const cJSON *act = item(j, "hidden_act"), *tied = item(j, "tie_word_embeddings"), *type, *t;
    ckpt_hf_family family;
    int rc;

    /* a model of another family would be run as LLaMA */
    t = type = item(j, "model_type");
    if (t && !cJSON_IsString(t))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: model_type is not a string", path);
    if (t && (rc = ckpt_hf_family_parse(path, t->valuestring, &family)) < 0)
        return rc;
    if (paddle_map_out && (rc = paddle_map(path, t ? t->valuestring : NULL, paddle_map_out)) < 0)
        return rc;

    get_int(j, "num_hidden_layers", &c->num_layers);
    get_int(j, "hidden_size", &c->hidden_size);
    get_int(j, "num_attention_heads", &c->num_heads);
    get_int(j, "num_key_value_heads", &c->num_kv_heads);
    get_int(j, "head_dim", &c->head_dim);
    get_int(j, "intermediate_size", &c->ffn_hidden_size);
    get_int(j, "vocab_size", &c->vocab_size);
    get_double(j, "rms_norm_eps", &c->norm_eps);
    get_double(j, "rope_theta", &c->rope_theta);
    get_double(j, "partial_rotary_factor", &c->rotary_percent);
    if ((rc = rope_scaling(item(j, "rope_scaling"), path, c)) < 0 ||
        (rc = rope_scaling(item(j, "rope_parameters"), path, c)) < 0)
        return rc;
    /* PaddleNLP's LlamaConfig */
    if ((t = item(j, "rope_scaling_type")) && cJSON_IsString(t))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: RoPE scaling of type '%s' is not run by verify", path, t->valuestring);
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: hidden_act %s: verify runs LLaMA-family models with SwiGLU ('silu') only", path,
                               cJSON_IsString(act) ? act->valuestring : "(not a string)");
    if (cJSON_IsBool(tied))
        c->tied_embeddings = cJSON_IsTrue(tied);
    if (type && (rc = window_fields(b, j, path, family)) < 0)
        return rc;
    c->norm = CKPT_NORM_RMS;
    c->act = CKPT_ACT_SWIGLU;
    c->position = CKPT_POSITION_ROPE;
    return 0;
}

/* config.json as ckpt_vsrc__hf_config reads it; paddle: PaddleNLP's, out->verify_map its family's
 * verify.maps.paddle */
static int read_config(ckpt_model_builder *b, const char *path, int paddle, vsrc_hf_config *out)
{
    FILE *f = fopen(path, "rb");
    const cJSON *type;
    char *text = NULL;
    long len = 0;
    cJSON *j = NULL;
    int rc = 0;

    memset(out, 0, sizeof *out);
    out->verify_map = "verify_hf_llama";
    if (!f)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_OS, "%s: cannot open", path);
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || len > (1 << 24) || fseek(f, 0, SEEK_SET) != 0 ||
        !(text = malloc((size_t)len + 1)) || fread(text, 1, (size_t)len, f) != (size_t)len)
        rc = ckpt_error_setc(CKPT_EIO, CKPT_ERRCLASS_OS, "%s: cannot read", path);
    fclose(f);
    if (rc == 0) {
        text[len] = '\0';
        if (!(j = cJSON_Parse(text)) || !cJSON_IsObject(j))
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not a JSON object", path);
    }
    type = rc == 0 && !paddle ? item(j, "model_type") : NULL;
    if (rc == 0 && cJSON_IsString(type) && (out->family = ckpt_vsrc__data_family(type->valuestring))) {
        rc = ckpt_vsrc__family_config(b, out->family, CKPT_FAMILY_HF, path, text, &out->family_config);
        if (rc == 0 && ckpt_family_string(out->family, "verify.maps.huggingface"))
            out->verify_map = ckpt_family_string(out->family, "verify.maps.huggingface");
    } else if (rc == 0) {
        rc = llama_fields(b, j, path, paddle ? &out->verify_map : NULL);
    }
    if (rc == 0)
        rc = ckpt_model_builder_config_source(b, path);
    cJSON_Delete(j);
    free(text);
    return rc;
}

int ckpt_vsrc__paddle_config(ckpt_model_builder *b, const char *path, const char **verify_map)
{
    vsrc_hf_config c;
    int rc = read_config(b, path, 1, &c);

    *verify_map = c.verify_map;
    return rc;
}

int ckpt_vsrc__hf_config(ckpt_model_builder *b, const char *path, vsrc_hf_config *out)
{
    return read_config(b, path, 0, out);
}

int ckpt_vsrc__map_params(ckpt_model_builder *b, ckpt_map_params **out)
{
    const ckpt_model_config *c = ckpt_model_builder_config(b);
    ckpt_map_params *p;
    int64_t heads = c->num_heads, kv = c->num_kv_heads > 0 ? c->num_kv_heads : c->num_heads;
    int64_t d = c->head_dim > 0 ? c->head_dim : heads > 0 && c->hidden_size > 0 ? c->hidden_size / heads : -1;
    int rc;

    if ((rc = ckpt_map_params_new(&p)) < 0 || (rc = ckpt_vsrc__keep_params(b, p)) < 0)
        return rc;
    if (heads > 0 && kv > 0 && heads % kv == 0 &&
        ((rc = ckpt_map_params_set(p, "num_attention_heads", heads)) < 0 ||
         (rc = ckpt_map_params_set(p, "num_key_value_heads", kv)) < 0 ||
         (rc = ckpt_map_params_set(p, "group_size", heads / kv)) < 0))
        return rc;
    if (d > 0 && (rc = ckpt_map_params_set(p, "head_dim", d)) < 0)
        return rc;
    *out = p;
    return 0;
}

/* ---- tensors ---- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int ckpt_vsrc__inputs(ckpt_model_builder *b, const ckpt_ckpt *c, const char *strip, ckpt_map_input **in, size_t *n,
                      size_t *cap)
{
    size_t i, k = strip ? strlen(strip) : 0;
    int rc;

    for (i = 0; i < ckpt_tensor_count(c); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c, i);
        const char *name = k && strncmp(t->name, strip, k) == 0 ? t->name + k : t->name;
        if (ends_with(name, ".inv_freq") || ends_with(name, "._extra_state") ||
            (t->flags & CKPT_TENSOR_OPTIMIZER_STATE))
            continue;
        ckpt_map_input *grown = ckpt_array_grow(*in, cap, *n, sizeof **in);
        if (!grown)
            return CKPT_ENOMEM;
        *in = grown;
        (*in)[*n].name = name;
        (*in)[*n].home = 0;
        if ((rc = ckpt_node_tensor(ckpt_model_builder_graph(b), t, &(*in)[*n].node)) < 0)
            return rc;
        (*n)++;
    }
    return 0;
}

int ckpt_vsrc__map_rank(ckpt_model_builder *b, int rank, const ckpt_map *map, const ckpt_map_params *params,
                        const ckpt_map_input *in, size_t n, vsrc_parts *parts)
{
    ckpt_map_result *res = NULL;
    size_t i;
    int rc;

    if ((rc = ckpt_map_apply(map, params, ckpt_model_builder_graph(b), in, n, NULL, &res)) < 0) {
        ckpt_error_prefix("%s", ckpt_model_builder_path(b));
        return rc;
    }
    for (i = 0; i < ckpt_map_result_count(res) && rc == 0; i++) {
        const ckpt_map_output *o = ckpt_map_result_at(res, i);
        const ckpt_node **slot = !strcmp(o->name, "embed.weight")        ? &parts->embed
                                 : !strcmp(o->name, "pos_embed.weight")  ? &parts->pos
                                 : !strcmp(o->name, "final_norm.weight") ? &parts->final_w
                                 : !strcmp(o->name, "final_norm.bias")   ? &parts->final_b
                                 : !strcmp(o->name, "output.weight")     ? &parts->output
                                                                         : NULL;
        if (slot)
            *slot = o->node;
        else
            rc = ckpt_model_builder_add(b, rank, o->name, o->node);
    }
    ckpt_map_result_free(res);
    return rc;
}

/* A vocabulary table from the ranks' parts: whole on every rank, or split by rows. */
static int join_table(ckpt_model_builder *b, const vsrc_parts *parts, int ranks, size_t field, const char *name)
{
    const ckpt_model_config *c = ckpt_model_builder_config(b);
    const ckpt_node **nodes = calloc((size_t)ranks, sizeof *nodes), *joined = NULL;
    int r, present = 0, rc = 0;

    if (!nodes)
        return ckpt_error_oom();
    for (r = 0; r < ranks; r++) {
        nodes[r] = *(const ckpt_node *const *)((const char *)&parts[r] + field);
        present += nodes[r] != NULL;
    }
    if (present == 0)
        goto done;
    if (present != ranks) {
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is on %d of %d tensor-parallel ranks",
                             ckpt_model_builder_path(b), name, present, ranks);
        goto done;
    }
    if (ranks == 1 || (c->vocab_size > 0 && ckpt_node_shape(nodes[0])[0] >= c->vocab_size))
        joined = nodes[0];
    else
        rc = ckpt_node_concat(ckpt_model_builder_graph(b), nodes, (size_t)ranks, 0, &joined);
    if (rc == 0)
        rc = ckpt_model_builder_add(b, 0, name, joined);
done:
    free(nodes);
    return rc;
}

int ckpt_vsrc__add_parts(ckpt_model_builder *b, const vsrc_parts *parts, int ranks)
{
    int rc;

    if ((rc = join_table(b, parts, ranks, offsetof(vsrc_parts, embed), "embed.weight")) < 0 ||
        (rc = join_table(b, parts, ranks, offsetof(vsrc_parts, output), "output.weight")) < 0)
        return rc;
    if (parts[0].pos && (rc = ckpt_model_builder_add(b, 0, "pos_embed.weight", parts[0].pos)) < 0)
        return rc;
    if (parts[0].final_w && (rc = ckpt_model_builder_add(b, 0, "final_norm.weight", parts[0].final_w)) < 0)
        return rc;
    if (parts[0].final_b && (rc = ckpt_model_builder_add(b, 0, "final_norm.bias", parts[0].final_b)) < 0)
        return rc;
    return 0;
}
