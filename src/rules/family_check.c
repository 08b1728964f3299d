/* A family's JSON checked once, when it is read: every key known, every row's type and
 * generator one the C has, every expression well-formed over the family's own fields, so
 * that a misspelt family fails loudly at load time and not halfway through a conversion. */
#include "family_private.h"

#include <stdio.h>
#include <string.h>

#define WHERE_MAX 256

static const char *const type_gens[] = { "$rope", "$token_ids", "$dtype", "$layer_types", "$moe_layers", NULL };
static const char *const megatron_gens[] = { "$true_vocab", "$megatron_llama3_rope", "$megatron_linear_rope",
                                             "$window_size", "$token_ids", "$window_attn_skip_freq",
                                             "$moe_layer_freq", NULL };
static const char *const out_gens[] = { "$dtype", "$rope_parameters", "$rope_scaling", "$full_attention_layers",
                                        "$rope_parameters_by_type", "$sliding_window_pattern", "$dense_layers", NULL };
static const char *const args_gens[] = { "$token_ids", "$padded_vocab", "$window_size", "$rope_scaling_factor",
                                         "$use_rope_scaling", "$dtype", "$bf16", "$fp16", "$impl", "$family",
                                         "$window_attn_skip_freq", "$softmax_scale", "$rope_linear_factor",
                                         "$moe_layer_freq", NULL };
/* the rope_type values the $rope generator reads and the forward passes run */
static const char *const rope_types[] = { "default", "llama3", "linear", NULL };
/* fields a generator sets besides its row's own */
static const char *const gen_fields[] = { "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
                                          "rope_original_max_positions", "bos_token_id", "eos_token_id",
                                          "pad_token_id", NULL };

static const char *row_f(const cJSON *row)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(row, "f");
    return cJSON_IsString(f) ? f->valuestring : "?";
}

static int in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return 1;
    return 0;
}

int ckpt_family__gen_known(const char *gen, int megatron)
{
    return in_list(megatron ? megatron_gens : type_gens, gen);
}

static int fail(const char *where, const char *fmt, const char *a)
{
    char why[WHERE_MAX];
    snprintf(why, sizeof why, fmt, a);
    return ckpt_error_set(CKPT_EFORMAT, "%s: %s", where, why);
}

static int is_check_row(const cJSON *row)
{
    return !cJSON_GetObjectItemCaseSensitive(row, "type");
}

int ckpt_family__has_field(const ckpt_family *f, const char *name, size_t len)
{
    const cJSON *row;
    size_t i;

    cJSON_ArrayForEach(row, f->config) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(row, "f");
        if (!is_check_row(row) && cJSON_IsString(n) && strlen(n->valuestring) == len &&
            strncmp(n->valuestring, name, len) == 0)
            return 1;
    }
    for (i = 0; gen_fields[i]; i++)
        if (strlen(gen_fields[i]) == len && strncmp(gen_fields[i], name, len) == 0)
            return 1;
    return 0;
}

static int expr_ok(const ckpt_family *f, const char *text, const char *where)
{
    return ckpt_family__expr(f, NULL, text, where, NULL, NULL, NULL);
}

static int keys(const cJSON *obj, const char *const *allowed, const char *where)
{
    const cJSON *c;

    if (!cJSON_IsObject(obj))
        return fail(where, "%s must be an object", "it");
    for (c = obj->child; c; c = c->next)
        if (strcmp(c->string, "comment") != 0 && !in_list(allowed, c->string))
            return fail(where, "unknown key \"%s\"", c->string);
    return 0;
}

static int string_in(const cJSON *obj, const char *key, const char *where, int required)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v && !required)
        return 0;
    return cJSON_IsString(v) ? 0 : fail(where, "\"%s\" must be a string", key);
}

static int check_row(const ckpt_family *f, const cJSON *row, const char *family)
{
    static const char *const allowed[] = { "f", "type", "hf", "paddle", "megatron", "megatron_default", "required",
                                           "default", "null_is", "divides", "says", "is", "refuse", "why",
                                           "refuse_set", "megatron_must", "megatron_refuse", "rope_types", "values",
                                           "pattern", "agree", "at_most", "dense_first", "required_if", NULL };
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(row, "type"),
                *dflt = cJSON_GetObjectItemCaseSensitive(row, "default"),
                *meg = cJSON_GetObjectItemCaseSensitive(row, "megatron"),
                *div = cJSON_GetObjectItemCaseSensitive(row, "divides"),
                *most = cJSON_GetObjectItemCaseSensitive(row, "at_most"),
                *values = cJSON_GetObjectItemCaseSensitive(row, "values"),
                *pattern = cJSON_GetObjectItemCaseSensitive(row, "pattern"), *dense,
                *req_if = cJSON_GetObjectItemCaseSensitive(row, "required_if"),
                *rtypes = cJSON_GetObjectItemCaseSensitive(row, "rope_types"), *rt;
    const char *t;
    char where[WHERE_MAX];
    int rc;

    snprintf(where, sizeof where, "%s: config row %s", family, row_f(row));
    if ((rc = keys(row, allowed, where)) < 0)
        return rc;
    if (!type) {
        if (!cJSON_GetObjectItemCaseSensitive(row, "is") && !cJSON_GetObjectItemCaseSensitive(row, "refuse_set"))
            return fail(where, "%s: a row without \"type\" is a check (\"is\" or \"refuse_set\")", "check");
        return 0;
    }
    if (!cJSON_IsString(type))
        return fail(where, "\"type\" must be a string%s", "");
    if (req_if && !(cJSON_GetArraySize(req_if) == 2 && cJSON_IsString(cJSON_GetArrayItem(req_if, 0)) &&
                    cJSON_IsString(cJSON_GetArrayItem(req_if, 1))))
        return fail(where, "\"required_if\" is [field, string]%s", "");
    t = type->valuestring;
    if (t[0] == '$' ? !in_list(type_gens, t)
                    : !(strcmp(t, "size") == 0 || strcmp(t, "count") == 0 || strcmp(t, "bool") == 0 ||
                        strcmp(t, "string") == 0 || strcmp(t, "any") == 0 || strncmp(t, "real ", 5) == 0))
        return fail(where, "unknown type %s", t);
    if (cJSON_GetObjectItemCaseSensitive(row, "agree") &&
        (strncmp(t, "real ", 5) != 0 || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(row, "hf"))))
        return fail(where, "\"agree\" needs a real row read from a list of keys%s", "");
    if (cJSON_IsString(meg) && meg->valuestring[0] == '$' && !in_list(megatron_gens, meg->valuestring))
        return fail(where, "unknown megatron generator %s", meg->valuestring);
    if (cJSON_IsString(dflt) && (strcmp(t, "size") == 0 || strcmp(t, "count") == 0 || strcmp(t, "bool") == 0) &&
        (rc = expr_ok(f, dflt->valuestring, where)) < 0)
        return rc;
    if (div && (!cJSON_IsString(div) || !ckpt_family__has_field(f, div->valuestring, strlen(div->valuestring))))
        return fail(where, "\"divides\" names no field%s", "");
    if (most && (!cJSON_IsString(most) || !ckpt_family__has_field(f, most->valuestring, strlen(most->valuestring))))
        return fail(where, "\"at_most\" names no field%s", "");
    if ((dense = cJSON_GetObjectItemCaseSensitive(row, "dense_first")) &&
        (strcmp(t, "$moe_layers") != 0 || !cJSON_IsString(dense) ||
         !ckpt_family__has_field(f, dense->valuestring, strlen(dense->valuestring))))
        return fail(where, "\"dense_first\" names the field of a $moe_layers row's dense layers before the first "
                           "MoE layer%s", "");
    if (pattern && (strcmp(t, "$layer_types") != 0 || !cJSON_IsString(pattern) ||
                    !ckpt_family__has_field(f, pattern->valuestring, strlen(pattern->valuestring))))
        return fail(where, "\"pattern\" names the field of a $layer_types row's every-Nth-layer pattern%s", "");
    if (rtypes && (strcmp(t, "$rope") != 0 || !cJSON_IsArray(rtypes) || !rtypes->child))
        return fail(where, "\"rope_types\" lists the rope_type values a $rope row accepts%s", "");
    cJSON_ArrayForEach(rt, rtypes)
        if (!cJSON_IsString(rt) || !in_list(rope_types, rt->valuestring))
            return fail(where, "\"rope_types\" has %s, not default, llama3 or linear",
                        cJSON_IsString(rt) ? rt->valuestring : "a value that is not a string");
    if (values && (!cJSON_IsObject(values) || !values->child || (strcmp(t, "bool") != 0 && strcmp(t, "string") != 0)))
        return fail(where, "\"values\" must be an object of the strings a bool or string field is read from%s", "");
    cJSON_ArrayForEach(rt, values)
        if (strcmp(t, "string") == 0 && !cJSON_IsString(rt))
            return fail(where, "\"values\" of a string field map strings to strings%s", "");
    return 0;
}

static int check_out(const ckpt_family *f, const cJSON *out, const char *family)
{
    const cJSON *c;
    char where[WHERE_MAX];
    int rc;

    cJSON_ArrayForEach(c, out) {
        snprintf(where, sizeof where, "%s: hf_config_out.%s", family, c->string);
        if (cJSON_IsString(c)) {
            const char *s = c->valuestring;
            if (s[0] == '=')
                continue;
            if (s[0] == '$' ? !in_list(out_gens, s) : !ckpt_family__has_field(f, s + (s[0] == '?'), strlen(s + (s[0] == '?'))))
                return fail(where, "%s is no field or generator", s);
        } else if (cJSON_IsObject(c)) {
            const cJSON *fl = cJSON_GetObjectItemCaseSensitive(c, "float"),
                        *fd = cJSON_GetObjectItemCaseSensitive(c, "field"),
                        *un = cJSON_GetObjectItemCaseSensitive(c, "unless");
            if (!cJSON_IsNumber(fl) && !(cJSON_IsString(fd) && cJSON_IsString(un)))
                return fail(where, "%s: an object is {\"float\": x} or {\"field\": F, \"unless\": E}", "value");
            if (fd && ((rc = expr_ok(f, fd->valuestring, where)) < 0 || (rc = expr_ok(f, un->valuestring, where)) < 0))
                return rc;
        } else if (cJSON_IsArray(c)) {
            const cJSON *first = cJSON_GetArrayItem(c, 0);
            if (cJSON_GetArraySize(c) != 1 || !cJSON_IsString(first) || strcmp(first->valuestring, "$class") != 0)
                return fail(where, "%s: a list is [\"$class\"]", "value");
        }
    }
    return 0;
}

static int check_megatron(const ckpt_family *f, const cJSON *m, const char *family)
{
    static const char *const allowed[] = { "require", "detect", "args_out", "from_hf", "to_hf", "spec", "refuse_impl",
                                           NULL };
    const cJSON *pair, *req;
    char where[WHERE_MAX];
    int rc;

    snprintf(where, sizeof where, "%s: megatron", family);
    if ((rc = keys(m, allowed, where)) < 0)
        return rc;
    cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(m, "require")) {
        const cJSON *gen = cJSON_GetObjectItemCaseSensitive(req, "gen");
        if (gen && !(cJSON_IsString(gen) && in_list(megatron_gens, gen->valuestring)))
            return fail(where, "%s: \"gen\" is a megatron generator", "require");
        if (!gen && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(req, "says")))
            return fail(where, "%s: every require entry has \"says\" (or \"gen\")", "require");
    }
    cJSON_ArrayForEach(pair, cJSON_GetObjectItemCaseSensitive(m, "args_out")) {
        const cJSON *name = cJSON_GetArrayItem(pair, 0), *src = cJSON_GetArrayItem(pair, 1);
        if (cJSON_GetArraySize(pair) != 2 || !cJSON_IsString(name))
            return fail(where, "%s: every args_out entry is [arg, source]", "args_out");
        snprintf(where, sizeof where, "%s: megatron.args_out %s", family, name->valuestring);
        if (cJSON_IsString(src) && src->valuestring[0] == '$' && !in_list(args_gens, src->valuestring))
            return fail(where, "unknown generator %s", src->valuestring);
        if (cJSON_IsString(src) && src->valuestring[0] != '$' && src->valuestring[0] != '=' &&
            (rc = expr_ok(f, src->valuestring, where)) < 0)
            return rc;
    }
    return 0;
}

/* per_layer: whether a name may hold {E}, an expert's number (up to the field num_experts) */
static int check_tensor_list(const ckpt_family *f, const cJSON *list, int per_layer, const char *where)
{
    const cJSON *t;
    int i;

    cJSON_ArrayForEach(t, list) {
        int n = cJSON_GetArraySize(t);
        const cJSON *cond = cJSON_GetArrayItem(t, 3);
        const char *hole;
        if (!cJSON_IsArray(t) || n < 2 || n > 6 || !cJSON_IsString(cJSON_GetArrayItem(t, 0)))
            return fail(where, "%s: a tensor is [name, rows, cols, condition, flags...]", "tensor");
        for (i = 4; i < n; i++) {
            const cJSON *x = cJSON_GetArrayItem(t, i);
            if (!cJSON_IsString(x) ||
                (strcmp(x->valuestring, "optional") != 0 && strcmp(x->valuestring, "own_dtype") != 0))
                return fail(where, "tensor %s: a flag is \"optional\" or \"own_dtype\"",
                            cJSON_GetArrayItem(t, 0)->valuestring);
        }
        hole = strchr(cJSON_GetArrayItem(t, 0)->valuestring, '{');
        if (hole && (!per_layer || strncmp(hole, "{E}", 3) != 0 || strchr(hole + 3, '{') ||
                     !ckpt_family__has_field(f, "num_experts", strlen("num_experts"))))
            return fail(where, "tensor %s: the one capture a name may have is {E}, in per_layer, with a field num_experts",
                        cJSON_GetArrayItem(t, 0)->valuestring);
        for (i = 1; i < 3 && i < n; i++) {
            const cJSON *x = cJSON_GetArrayItem(t, i);
            if (!(i == 2 && cJSON_IsNull(x)) &&
                !(cJSON_IsString(x) && cJSON_GetObjectItemCaseSensitive(f->extents, x->valuestring)))
                return fail(where, "tensor %s: an extent is a letter of \"extents\"", cJSON_GetArrayItem(t, 0)->valuestring);
        }
        if (cond && !cJSON_IsNull(cond) &&
            !(cJSON_IsString(cond) &&
              ckpt_family__has_field(f, cond->valuestring + (cond->valuestring[0] == '!'),
                                     strlen(cond->valuestring + (cond->valuestring[0] == '!')))))
            return fail(where, "tensor %s: the condition is no field", cJSON_GetArrayItem(t, 0)->valuestring);
    }
    return 0;
}

static int check_tensors(const ckpt_family *f, const char *family)
{
    static const char *const allowed[] = { "before", "layer",        "per_layer", "after", "buffers",
                                           "layer_buffers", "mtp", "mtp_shared", NULL };
    const cJSON *e;
    char where[WHERE_MAX];
    int rc;

    snprintf(where, sizeof where, "%s: extents", family);
    cJSON_ArrayForEach(e, f->extents) {
        const cJSON *x = cJSON_GetArrayItem(e, 0), *w = cJSON_GetArrayItem(e, 1);
        if (!cJSON_IsString(x) || !cJSON_IsString(w))
            return fail(where, "%s: an extent is [expression, words]", e->string);
        if ((rc = expr_ok(f, x->valuestring, where)) < 0)
            return rc;
    }
    snprintf(where, sizeof where, "%s: map_params", family);
    cJSON_ArrayForEach(e, f->map_params) {
        if (!cJSON_IsString(e))
            return fail(where, "%s: a parameter is an expression", e->string);
        if ((rc = expr_ok(f, e->valuestring, where)) < 0)
            return rc;
    }
    snprintf(where, sizeof where, "%s: hf_tensors", family);
    if ((rc = keys(f->hf_tensors, allowed, where)) < 0 || (rc = string_in(f->hf_tensors, "layer", where, 1)) < 0 ||
        (rc = check_tensor_list(f, cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "before"), 0, where)) < 0 ||
        (rc = check_tensor_list(f, cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "per_layer"), 1, where)) < 0 ||
        (rc = check_tensor_list(f, cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "mtp"), 0, where)) < 0)
        return rc;
    /* multi-token prediction layers: counted by the field mtp_layers, their copies of main tensors by name */
    if ((cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "mtp") ||
         cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "mtp_shared")) &&
        !ckpt_family__has_field(f, "mtp_layers", strlen("mtp_layers")))
        return fail(where, "%s need a field mtp_layers (the count of multi-token prediction layers)", "mtp and mtp_shared");
    e = cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "mtp_shared");
    if (e && !cJSON_IsObject(e))
        return fail(where, "%s is an object {\"tensor in an MTP layer\": \"the main tensor it copies\"}", "mtp_shared");
    cJSON_ArrayForEach(e, e)
        if (!cJSON_IsString(e))
            return fail(where, "mtp_shared: %s: the main tensor it copies is a name", e->string);
    return check_tensor_list(f, cJSON_GetObjectItemCaseSensitive(f->hf_tensors, "after"), 0, where);
}

int ckpt_family__validate(ckpt_family *f, const char *where)
{
    static const char *const allowed[] = { "ckptconv_family", "name", "title", "hf", "config", "hf_config_out",
                                           "megatron", "paddle", "map_params", "extents", "hf_tensors", "verify",
                                           NULL };
    static const char *const hf_allowed[] = { "model_type", "arch_prefix", "class", "left_out", "refuse_model_type",
                                              "refuse_tensor", NULL };
    const cJSON *j = f->json, *v = cJSON_GetObjectItemCaseSensitive(j, "ckptconv_family"), *row, *r2;
    int rc;

    if ((rc = keys(j, allowed, where)) < 0)
        return rc;
    if (!cJSON_IsNumber(v) || v->valuedouble != 1)
        return fail(where, "\"ckptconv_family\" must be %s", "1");
    if ((rc = string_in(j, "name", where, 1)) < 0 || (rc = string_in(j, "title", where, 1)) < 0)
        return rc;
    f->name = cJSON_GetObjectItemCaseSensitive(j, "name")->valuestring;
    f->title = cJSON_GetObjectItemCaseSensitive(j, "title")->valuestring;
    f->hf = cJSON_GetObjectItemCaseSensitive(j, "hf");
    f->config = cJSON_GetObjectItemCaseSensitive(j, "config");
    f->hf_config_out = cJSON_GetObjectItemCaseSensitive(j, "hf_config_out");
    f->megatron = cJSON_GetObjectItemCaseSensitive(j, "megatron");
    f->paddle = cJSON_GetObjectItemCaseSensitive(j, "paddle");
    f->map_params = cJSON_GetObjectItemCaseSensitive(j, "map_params");
    f->extents = cJSON_GetObjectItemCaseSensitive(j, "extents");
    f->hf_tensors = cJSON_GetObjectItemCaseSensitive(j, "hf_tensors");
    f->verify = cJSON_GetObjectItemCaseSensitive(j, "verify");
    if (!cJSON_IsArray(f->config) || !cJSON_IsObject(f->hf_config_out) || !cJSON_IsObject(f->map_params) ||
        !cJSON_IsObject(f->extents) || !cJSON_IsObject(f->hf_tensors))
        return fail(where, "%s, hf_config_out, map_params, extents and hf_tensors are required", "config");
    if ((rc = keys(f->hf, hf_allowed, where)) < 0 || (rc = string_in(f->hf, "model_type", where, 1)) < 0 ||
        (rc = string_in(f->hf, "arch_prefix", where, 1)) < 0 || (rc = string_in(f->hf, "class", where, 1)) < 0)
        return rc;
    cJSON_ArrayForEach(row, f->config) {
        for (r2 = f->config->child; r2 != row; r2 = r2->next)
            if (strcmp(row_f(r2), row_f(row)) == 0)
                return fail(where, "config: two rows are called %s", row_f(row));
        if ((rc = check_row(f, row, where)) < 0)
            return rc;
    }
    if ((rc = check_out(f, f->hf_config_out, where)) < 0 ||
        (f->megatron && (rc = check_megatron(f, f->megatron, where)) < 0))
        return rc;
    return check_tensors(f, where);
}
