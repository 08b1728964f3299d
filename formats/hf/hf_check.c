/* A Hugging Face LLaMA-family directory checked against itself: config.json read with every value
 * typed and bounded, and the tensors held against what that config implies, so that a
 * conversion never starts from a config that does not describe its weights. */
#include "hf_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE CKPT_HF_MAX_SIZE
/* config.json is a few kilobytes; a bound keeps a mistaken path from being read whole. */
#define MAX_CONFIG_BYTES (16u << 20)

void ckpt_hf_llama_dims_init(ckpt_hf_llama_dims *d)
{
    memset(d, 0, sizeof *d);
    d->max_positions = 2048;
    d->rms_norm_eps = 1e-6;
    d->rope_theta = 10000.0;
    d->initializer_range = 0.02;
    d->dtype = CKPT_DTYPE_BF16;
    d->bos_token_id = d->eos_token_id = d->pad_token_id = -1;
}

/* as ckpt_map_params_load_json reads it too */
const cJSON *ckpt_hf__field(const cJSON *cfg, const char *name)
{
    const cJSON *v = NULL, *c;

    for (c = cfg ? cfg->child : NULL; c; c = c->next)
        if (c->string && strcmp(c->string, name) == 0)
            v = c;
    return v && !cJSON_IsNull(v) ? v : NULL;
}

int ckpt_hf__get_int(const cJSON *cfg, const char *path, const char *name, int required, int64_t lo, int64_t *out)
{
    const cJSON *v = ckpt_hf__field(cfg, name);

    if (!v && !required)
        return 0;
    if (!v)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is missing", path, name);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not an integer", path, name);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)MAX_SIZE)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is %.15g, not an integer from %lld to %lld",
                               path, name, v->valuedouble, (long long)lo, MAX_SIZE);
    *out = (int64_t)v->valuedouble;
    return 0;
}

int ckpt_hf__get_real(const cJSON *cfg, const char *path, const char *name, double lo, int open_lo, double hi,
                    double *out)
{
    const cJSON *v = ckpt_hf__field(cfg, name);

    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || (open_lo && v->valuedouble == lo) ||
        v->valuedouble > hi)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not a number %s %g and <= %g", path, name,
                               open_lo ? ">" : ">=", lo, hi);
    *out = v->valuedouble;
    return 0;
}

int ckpt_hf__get_bool(const cJSON *cfg, const char *path, const char *name, int *out)
{
    const cJSON *v = ckpt_hf__field(cfg, name);

    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is not true or false", path, name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int token_id(const cJSON *v, const char *path, const char *name, int64_t vocab, int64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < -1 ||
        v->valuedouble >= (double)vocab)
        return cJSON_IsNumber(v) ? ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                                   "%s: %s is %.15g, not a token id below vocab_size %lld", path,
                                                   name, v->valuedouble, (long long)vocab)
                                 : ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                                   "%s: %s is not a token id (an integer)", path, name);
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* A token id is an integer below vocab_size; -1 and null are none. eos_token_id may be a
 * list (list, n: NULL for the others), which is kept as it is, for the way back. */
static int get_token(const cJSON *cfg, const char *path, const char *name, int64_t vocab, int64_t *out,
                     int64_t *list, int *n)
{
    const cJSON *v = ckpt_hf__field(cfg, name), *e;
    int rc;

    *out = -1;
    if (!v)
        return 0;
    if (!list || !cJSON_IsArray(v))
        return token_id(v, path, name, vocab, out);
    *n = 0;
    cJSON_ArrayForEach(e, v)
    {
        if (*n == CKPT_HF_MAX_EOS_TOKENS)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s lists more than %d tokens", path,
                                   name, CKPT_HF_MAX_EOS_TOKENS);
        if ((rc = token_id(e, path, name, vocab, &list[*n])) < 0)
            return rc;
        if (list[*n] >= 0)
            ++*n;
    }
    return 0;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* transformers 5 writes "dtype", 4 "torch_dtype"; an unknown name keeps the default. */
static void get_dtype(const cJSON *cfg, ckpt_dtype *out)
{
    const cJSON *td = ckpt_hf__field(cfg, "dtype");
    ckpt_dtype t;

    if (!cJSON_IsString(td))
        td = ckpt_hf__field(cfg, "torch_dtype");
    if (cJSON_IsString(td) && (t = ckpt_dtype_from_name(td->valuestring)) != CKPT_DTYPE_INVALID &&
        ckpt_dtype_is_float(t))
        *out = t;
}

static int get_sizes(const cJSON *cfg, const char *path, ckpt_hf_llama_dims *d)
{
    int rc;

    d->head_dim = 0;
    d->num_kv_heads = 0;
    if ((rc = ckpt_hf__get_int(cfg, path, "hidden_size", 1, 1, &d->hidden_size)) < 0 ||
        (rc = ckpt_hf__get_int(cfg, path, "intermediate_size", 1, 1, &d->intermediate_size)) < 0 ||
        (rc = ckpt_hf__get_int(cfg, path, "num_hidden_layers", 1, 1, &d->num_layers)) < 0 ||
        (rc = ckpt_hf__get_int(cfg, path, "num_attention_heads", 1, 1, &d->num_heads)) < 0 ||
        (rc = ckpt_hf__get_int(cfg, path, "num_key_value_heads", 0, 1, &d->num_kv_heads)) < 0 ||
        (rc = ckpt_hf__get_int(cfg, path, "head_dim", 0, 1, &d->head_dim)) < 0 ||
        (rc = ckpt_hf__get_int(cfg, path, "vocab_size", 1, 1, &d->vocab_size)) < 0 ||
        (rc = ckpt_hf__get_int(cfg, path, "max_position_embeddings", 0, 1, &d->max_positions)) < 0)
        return rc;
    if (!d->num_kv_heads)
        d->num_kv_heads = d->num_heads;
    if (d->num_kv_heads > d->num_heads || d->num_heads % d->num_kv_heads)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", path,
                               (long long)d->num_heads, (long long)d->num_kv_heads);
    if (!d->head_dim && d->hidden_size % d->num_heads)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: hidden_size %lld is not a multiple of num_attention_heads %lld (and no head_dim)",
                               path, (long long)d->hidden_size, (long long)d->num_heads);
    if (!d->head_dim)
        d->head_dim = d->hidden_size / d->num_heads;
    return 0;
}

static int parse_fields(const cJSON *cfg, const char *path, ckpt_hf_llama_dims *d)
{
    const cJSON *rope = ckpt_hf__field(cfg, "rope_parameters");
    int rc;

    if (!cJSON_IsObject(cfg))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not a JSON object", path);
    if (rope && !cJSON_IsObject(rope))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: rope_parameters is not an object", path);
    /* transformers 5 keeps rope_theta in rope_parameters, 4 at the top level */
    if ((rc = ckpt_hf__family_fields(cfg, path, d)) < 0 || (rc = get_sizes(cfg, path, d)) < 0 ||
        (rc = ckpt_hf__get_real(cfg, path, "rms_norm_eps", 0, 1, 1, &d->rms_norm_eps)) < 0 ||
        (rc = ckpt_hf__get_real(cfg, path, "rope_theta", 0, 1, 1e300, &d->rope_theta)) < 0 ||
        (rope && (rc = ckpt_hf__get_real(rope, path, "rope_theta", 0, 1, 1e300, &d->rope_theta)) < 0) ||
        (rc = ckpt_hf__get_real(cfg, path, "initializer_range", 0, 0, 1e6, &d->initializer_range)) < 0 ||
        (rc = ckpt_hf__get_bool(cfg, path, "tie_word_embeddings", &d->tied)) < 0 ||
        (rc = get_token(cfg, path, "bos_token_id", d->vocab_size, &d->bos_token_id, NULL, NULL)) < 0 ||
        (rc = get_token(cfg, path, "eos_token_id", d->vocab_size, &d->eos_token_id, d->eos_token_list,
                        &d->n_eos_token_list)) < 0 ||
        (rc = get_token(cfg, path, "pad_token_id", d->vocab_size, &d->pad_token_id, NULL, NULL)) < 0)
        return rc;
    get_dtype(cfg, &d->dtype);
    return 0;
}

int ckpt_hf_llama_dims_parse(const char *path, const char *json, size_t len, ckpt_hf_llama_dims *d)
{
    cJSON *cfg;
    int rc;

    if (len > MAX_CONFIG_BYTES)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: larger than %u bytes; not a config.json", path,
                               MAX_CONFIG_BYTES);
    cfg = json ? cJSON_ParseWithLength(json, len) : NULL;
    if (!cfg)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not valid JSON", path);
    rc = parse_fields(cfg, path, d);
    cJSON_Delete(cfg);
    return rc;
}

int ckpt_hf_llama_dims_read(const char *path, ckpt_hf_llama_dims *d)
{
    ckpt_file *f = NULL;
    int rc;

    ckpt_hf_llama_dims_init(d);
    if ((rc = ckpt_file_open(&f, path)) < 0)
        return rc;
    rc = ckpt_hf_llama_dims_parse(path, (const char *)f->data, f->data ? (size_t)f->size : 0, d);
    ckpt_file_close(f);
    return rc;
}

int ckpt_hf_llama_map_params(const ckpt_hf_llama_dims *d, ckpt_map_params *p)
{
    int rc;

    if ((rc = ckpt_map_params_set(p, "hidden_size", d->hidden_size)) < 0 ||
        (rc = ckpt_map_params_set(p, "intermediate_size", d->intermediate_size)) < 0 ||
        (rc = ckpt_map_params_set(p, "num_hidden_layers", d->num_layers)) < 0 ||
        (rc = ckpt_map_params_set(p, "num_attention_heads", d->num_heads)) < 0 ||
        (rc = ckpt_map_params_set(p, "num_key_value_heads", d->num_kv_heads)) < 0 ||
        (rc = ckpt_map_params_set(p, "head_dim", d->head_dim)) < 0)
        return rc;
    return ckpt_map_params_set(p, "vocab_size", d->vocab_size);
}

/* ---- tensors against the config ------------------------------------------------------ */

typedef struct want {
    const char *suffix; /* after "model.layers.{L}." */
    int bias;           /* 1 q/k/v (attention_bias, Qwen2), 2 mlp_bias, 3 o_proj (attention_bias):
                           present only when the config says so */
    char rows, cols;    /* 'h' hidden, 'q' heads x head_dim, 'k' kv heads x head_dim,
                           'i' intermediate; cols 0: 1-D */
} want;

static const want layer_wants[] = {
    { "self_attn.q_proj.weight", 0, 'q', 'h' }, { "self_attn.k_proj.weight", 0, 'k', 'h' },
    { "self_attn.v_proj.weight", 0, 'k', 'h' }, { "self_attn.o_proj.weight", 0, 'h', 'q' },
    { "mlp.gate_proj.weight", 0, 'i', 'h' },    { "mlp.up_proj.weight", 0, 'i', 'h' },
    { "mlp.down_proj.weight", 0, 'h', 'i' },    { "input_layernorm.weight", 0, 'h', 0 },
    { "post_attention_layernorm.weight", 0, 'h', 0 },
    { "self_attn.q_proj.bias", 1, 'q', 0 },     { "self_attn.k_proj.bias", 1, 'k', 0 },
    { "self_attn.v_proj.bias", 1, 'k', 0 },     { "self_attn.o_proj.bias", 3, 'h', 0 },
    { "mlp.gate_proj.bias", 2, 'i', 0 },        { "mlp.up_proj.bias", 2, 'i', 0 },
    { "mlp.down_proj.bias", 2, 'h', 0 },
};
#define N_LAYER_WANTS (sizeof layer_wants / sizeof layer_wants[0])

typedef struct check_ctx {
    const ckpt_hf_llama_dims *d;
    const char *config, *weights;
    const char **sorted; /* tensor names, for lookups */
    size_t n;
    ckpt_dtype dtype;    /* of the first tensor checked */
    const char *dtype_of;
} check_ctx;

/* Whether a layer tensor of bias kind `bias` (layer_wants) is in the model. */
static int wanted(const ckpt_hf_llama_dims *d, int bias)
{
    switch (bias) {
    case 1: return d->attention_bias || d->qkv_bias;
    case 2: return d->mlp_bias;
    case 3: return d->attention_bias;
    default: return 1;
    }
}

/* The config's word for a bias being there (`on`) or not. */
static const char *bias_fields(const ckpt_hf_llama_dims *d, int bias, int on)
{
    if (bias == 0)
        return "";
    if (d->family == CKPT_HF_QWEN2)
        return bias == 1 ? "model_type qwen2" : bias == 3 ? "model_type qwen2 (no o_proj bias)"
                                                          : "model_type qwen2 (no MLP biases)";
    if (d->family == CKPT_HF_MISTRAL)
        return bias == 1 ? "model_type mistral (no q/k/v biases)" : bias == 3 ? "model_type mistral (no o_proj bias)"
                                                                              : "model_type mistral (no MLP biases)";
    if (bias == 2)
        return on ? "mlp_bias true" : "mlp_bias false";
    return on ? "attention_bias true" : "attention_bias false";
}

static int64_t extent(const ckpt_hf_llama_dims *d, char what)
{
    switch (what) {
    case 'h': return d->hidden_size;
    case 'q': return d->num_heads * d->head_dim;
    case 'k': return d->num_kv_heads * d->head_dim;
    case 'i': return d->intermediate_size;
    default: return d->vocab_size; /* 'v' */
    }
}

static const char *fields_of(char what)
{
    switch (what) {
    case 'h': return "hidden_size";
    case 'q': return "num_attention_heads x head_dim";
    case 'k': return "num_key_value_heads x head_dim";
    case 'i': return "intermediate_size";
    default: return "vocab_size"; /* 'v' */
    }
}

const char *ckpt_hf_left_out_rule(const char *name)
{
    static const char suffix[] = "rotary_emb.inv_freq";
    size_t n = strlen(name);

    return n >= sizeof suffix - 1 && strcmp(name + n - (sizeof suffix - 1), suffix) == 0
               ? "a rotary inv_freq buffer, which RoPE recomputes"
               : NULL;
}

static int check_one(check_ctx *c, const char *name, const ckpt_node *node, char rows, char cols)
{
    const int64_t *shape = ckpt_node_shape(node);
    int64_t expected[2] = { extent(c->d, rows), cols ? extent(c->d, cols) : 0 };
    int ndim = ckpt_node_ndim(node);
    ckpt_dtype t = ckpt_node_dtype(node);
    char have[96], expect[64];

    if (ndim != (cols ? 2 : 1) || shape[0] != expected[0] || (cols && shape[1] != expected[1])) {
        ckpt_shape_format(shape, ndim, have, sizeof have);
        ckpt_shape_format(expected, cols ? 2 : 1, expect, sizeof expect);
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: tensor %s has shape %s, not the %s that %s says (%s%s%s)", c->weights, name, have,
                               expect, c->config, fields_of(rows), cols ? ", " : "", cols ? fields_of(cols) : "");
    }
    if (!ckpt_dtype_is_float(t))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is %s, not a floating-point weight",
                               c->weights, name, ckpt_dtype_name(t));
    if (!c->dtype_of) {
        c->dtype = t;
        c->dtype_of = name;
    } else if (t != c->dtype) {
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is %s but %s is %s", c->weights, name,
                               ckpt_dtype_name(t), c->dtype_of, ckpt_dtype_name(c->dtype));
    }
    return 0;
}

static int not_llama(const check_ctx *c, const char *name)
{
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                           "%s: tensor %s is not a weight of the %s model %s describes; leave it out on purpose with "
                           "--drop PATTERN",
                           c->weights, name, ckpt_hf_family_title(c->d->family), c->config);
}

/* One tensor of the files: a weight the config implies, with its shape, or an error naming it. */
static int check_present(check_ctx *c, const char *name, const ckpt_node *node)
{
    const ckpt_hf_llama_dims *d = c->d;
    const char *rest;
    char *end;
    long long layer;
    size_t i;

    if (strcmp(name, "model.embed_tokens.weight") == 0)
        return check_one(c, name, node, 'v', 'h');
    if (strcmp(name, "model.norm.weight") == 0)
        return check_one(c, name, node, 'h', 0);
    /* a tied model's lm_head is the embedding; torch.save files of one keep it too */
    if (strcmp(name, "lm_head.weight") == 0)
        return check_one(c, name, node, 'v', 'h');
    /* RoPE's buffer, which old transformers saved and every reader recomputes */
    if (strcmp(name, "model.rotary_emb.inv_freq") == 0)
        return 0;
    if (!starts_with(name, "model.layers.") || name[13] < '0' || name[13] > '9')
        return not_llama(c, name);
    layer = strtoll(name + 13, &end, 10);
    if (*end != '.' || (name[13] == '0' && end != name + 14))
        return not_llama(c, name);
    if (layer >= d->num_layers)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: tensor %s is not in the %lld layers that num_hidden_layers in %s says", c->weights,
                               name, (long long)d->num_layers, c->config);
    rest = end + 1;
    if (strcmp(rest, "self_attn.rotary_emb.inv_freq") == 0)
        return 0;
    for (i = 0; i < N_LAYER_WANTS; i++)
        if (strcmp(rest, layer_wants[i].suffix) == 0)
            break;
    if (i == N_LAYER_WANTS)
        return not_llama(c, name);
    if (!wanted(d, layer_wants[i].bias))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is there but %s says %s", c->weights,
                               name, c->config, bias_fields(d, layer_wants[i].bias, 0));
    return check_one(c, name, node, layer_wants[i].rows, layer_wants[i].cols);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int has(const check_ctx *c, const char *name)
{
    return bsearch(&name, c->sorted, c->n, sizeof *c->sorted, by_name) != NULL;
}

static int missing(const check_ctx *c, const char *name, const char *fields)
{
    return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no tensor %s, which %s implies (%s)", c->weights,
                           name, c->config, fields);
}

/* Every tensor the config implies. The files hold c->n tensors and a layer needs several, so
 * a num_hidden_layers larger than the files meets a missing tensor within n / 9 + 1 layers. */
static int check_complete(const check_ctx *c)
{
    const ckpt_hf_llama_dims *d = c->d;
    char name[128];
    int64_t layer;
    size_t i;

    if (!has(c, "model.embed_tokens.weight"))
        return missing(c, "model.embed_tokens.weight", "vocab_size, hidden_size");
    for (layer = 0; layer < d->num_layers; layer++)
        for (i = 0; i < N_LAYER_WANTS; i++) {
            if (!wanted(d, layer_wants[i].bias))
                continue;
            snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)layer, layer_wants[i].suffix);
            if (!has(c, name)) {
                char fields[96];
                snprintf(fields, sizeof fields, "num_hidden_layers %lld%s%s", (long long)d->num_layers,
                         layer_wants[i].bias ? ", " : "", bias_fields(d, layer_wants[i].bias, 1));
                return missing(c, name, fields);
            }
        }
    if (!has(c, "model.norm.weight"))
        return missing(c, "model.norm.weight", "hidden_size");
    if (!d->tied && !has(c, "lm_head.weight"))
        return missing(c, "lm_head.weight", "tie_word_embeddings false");
    return 0;
}

int ckpt_hf_llama_check_tensors(const ckpt_hf_llama_dims *d, const char *config, const char *weights,
                                const ckpt_map_input *in, size_t n)
{
    check_ctx c;
    size_t i;
    int rc = 0;

    memset(&c, 0, sizeof c);
    c.d = d;
    c.config = config;
    c.weights = weights;
    c.n = n;
    c.sorted = calloc(n ? n : 1, sizeof *c.sorted);
    if (!c.sorted)
        return ckpt_error_oom();
    for (i = 0; i < n && rc == 0; i++) {
        c.sorted[i] = in[i].name;
        rc = check_present(&c, in[i].name, in[i].node);
    }
    if (rc == 0) {
        qsort(c.sorted, n, sizeof *c.sorted, by_name);
        for (i = 1; i < n && rc == 0; i++)
            if (strcmp(c.sorted[i - 1], c.sorted[i]) == 0)
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is there twice", weights,
                                     c.sorted[i]);
        if (rc == 0)
            rc = check_complete(&c);
    }
    free(c.sorted);
    return rc;
}
