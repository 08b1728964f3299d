/* A family's Hugging Face tensors (hf_tensors): every tensor the config implies there with
 * the shape it implies and nothing else, the order transformers writes them in, what every
 * conversion leaves out, and the maps and map parameters between the frameworks. */
#include "family_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *list(const ckpt_family *f, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(f->hf_tensors, key);
}

static const char *item_str(const cJSON *t, int i)
{
    const cJSON *v = cJSON_GetArrayItem(t, i);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "model.layers.{L}." split at {L} */
static void layer_pattern(const ckpt_family *f, char *prefix, size_t cap, const char **suffix)
{
    const cJSON *l = list(f, "layer");
    const char *s = cJSON_IsString(l) ? l->valuestring : "", *hole = strstr(s, "{L}");

    snprintf(prefix, cap, "%.*s", hole ? (int)(hole - s) : (int)strlen(s), s);
    *suffix = hole ? hole + 3 : "";
}

/* The layer of name and where its rest starts; -1 for a name outside the layers (strict: or
 * whose layer number has leading zeros, which no writer makes). */
static long long layer_of(const ckpt_family *f, const char *name, int strict, const char **rest)
{
    char prefix[128], *end;
    const char *suffix, *d;
    size_t n;
    long long layer;

    layer_pattern(f, prefix, sizeof prefix, &suffix);
    n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || name[n] < '0' || name[n] > '9')
        return -1;
    d = name + n;
    layer = strtoll(d, &end, 10);
    if ((strict && d[0] == '0' && end != d + 1) || strncmp(end, suffix, strlen(suffix)) != 0)
        return -1;
    *rest = end + strlen(suffix);
    return layer;
}

static const cJSON *find(const cJSON *l, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, l)
        if (item_str(t, 0) && strcmp(item_str(t, 0), name) == 0)
            return t;
    return NULL;
}

/* An expert row ("block_sparse_moe.experts.{E}.w1.weight") matches rest with the expert's
 * number (no leading zeros, as no writer makes); -1 for a row without {E} or no match. */
static long long expert_of(const char *row, const char *rest)
{
    const char *hole = strstr(row, "{E}"), *d;
    char *end;
    long long e;

    if (!hole || strncmp(rest, row, (size_t)(hole - row)) != 0)
        return -1;
    d = rest + (hole - row);
    if (*d < '0' || *d > '9' || (d[0] == '0' && d[1] >= '0' && d[1] <= '9'))
        return -1;
    e = strtoll(d, &end, 10);
    return strcmp(end, hole + 3) == 0 ? e : -1;
}

/* The per_layer row of a layer tensor's rest, and its expert (-1: not an expert tensor). */
static const cJSON *find_layer(const cJSON *l, const char *rest, long long *expert)
{
    const cJSON *t;

    *expert = -1;
    cJSON_ArrayForEach(t, l) {
        if (!item_str(t, 0))
            continue;
        if (strcmp(item_str(t, 0), rest) == 0 || (*expert = expert_of(item_str(t, 0), rest)) >= 0)
            return t;
    }
    return NULL;
}

static int in_strings(const cJSON *l, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, l)
        if (cJSON_IsString(t) && strcmp(t->valuestring, name) == 0)
            return 1;
    return 0;
}

/* ---- the tensor check ---- */

typedef struct check_ctx {
    const ckpt_family *f;
    const ckpt_family_config *c;
    const char *config, *weights;
    const char *leave_out; /* how the caller's user leaves a tensor out, or NULL */
    const char **sorted;
    size_t n;
    ckpt_dtype dtype;
    const char *dtype_of;
    long long mtp_found; /* 1 + the last multi-token prediction layer with a tensor */
    char note[200];
} check_ctx;

/* A tensor row's flag ("optional", "own_dtype"), from its fifth item on. */
static int has_flag(const cJSON *t, const char *flag)
{
    int i, n = cJSON_GetArraySize(t);

    for (i = 4; i < n; i++)
        if (item_str(t, i) && strcmp(item_str(t, i), flag) == 0)
            return 1;
    return 0;
}

/* The condition field's value in a layer (-1: outside the layers): a field holding a list
 * (the $moe_layers list) has one value per layer. */
static int cond_value(const check_ctx *x, const char *field, long long layer)
{
    const ckpt_value *v = ckpt_family__get(x->c, field);

    if (v && v->kind == CKPT_VAL_LIST) {
        const ckpt_value *e = layer >= 0 && (size_t)layer < v->u.seq.n ? v->u.seq.items[layer] : NULL;
        return e && ((e->kind == CKPT_VAL_INT && e->u.integer != 0) || (e->kind == CKPT_VAL_BOOL && e->u.boolean));
    }
    return ckpt_family__int(x->c, field, 0) != 0;
}

static int wanted(const check_ctx *x, const cJSON *t, long long layer)
{
    const char *cond = item_str(t, 3);

    if (!cond)
        return 1;
    return cond[0] == '!' ? !cond_value(x, cond + 1, layer) : cond_value(x, cond, layer);
}

/* How the config says the condition's field is what it is (in a layer). */
static const char *says(const check_ctx *x, const cJSON *t, long long layer)
{
    const char *cond = item_str(t, 3), *field;
    const cJSON *row, *s;

    if (!cond)
        return "";
    field = cond + (cond[0] == '!');
    cJSON_ArrayForEach(row, x->f->config) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(row, "f");
        if (cJSON_IsString(fn) && strcmp(fn->valuestring, field) == 0 &&
            cJSON_IsString(s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(row, "says"),
                                                  cond_value(x, field, layer))))
            return s->valuestring;
    }
    return field;
}

static int extent(const check_ctx *x, const char *letter, int64_t *size, const char **words)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(x->f->extents, letter);

    *words = item_str(e, 1) ? item_str(e, 1) : letter;
    return ckpt_family__expr(x->f, x->c, item_str(e, 0) ? item_str(e, 0) : "0", x->config, size, NULL, NULL);
}

static int check_one(check_ctx *x, const char *name, const ckpt_node *node, const cJSON *t)
{
    const char *rows = item_str(t, 1), *cols = item_str(t, 2), *rw, *cw = "";
    const int64_t *shape = ckpt_node_shape(node);
    int64_t expected[2] = { 0, 0 };
    int ndim = ckpt_node_ndim(node), rc;
    ckpt_dtype dt = ckpt_node_dtype(node);
    char have[96], expect[64];

    if ((rc = extent(x, rows, &expected[0], &rw)) < 0 || (cols && (rc = extent(x, cols, &expected[1], &cw)) < 0))
        return rc;
    if (ndim != (cols ? 2 : 1) || shape[0] != expected[0] || (cols && shape[1] != expected[1])) {
        ckpt_shape_format(shape, ndim, have, sizeof have);
        ckpt_shape_format(expected, cols ? 2 : 1, expect, sizeof expect);
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s has shape %s, not the %s that %s says (%s%s%s)",
                               x->weights, name, have, expect, x->config, rw, cols ? ", " : "", cw);
    }
    if (!ckpt_dtype_is_float(dt))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is %s, not a floating-point weight",
                               x->weights, name, ckpt_dtype_name(dt));
    if (has_flag(t, "own_dtype"))
        return 0;
    if (!x->dtype_of) {
        x->dtype = dt;
        x->dtype_of = name;
    } else if (dt != x->dtype) {
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is %s but %s is %s", x->weights, name,
                               ckpt_dtype_name(dt), x->dtype_of, ckpt_dtype_name(x->dtype));
    }
    return 0;
}

/* The reason of the first {"suffix", "reason"} rule of hf.<list> whose suffix ends name */
static const char *suffix_rule(const ckpt_family *f, const char *list, const char *name)
{
    const cJSON *rule;
    size_t n = strlen(name);

    cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(f->hf, list)) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(rule, "suffix"), *why = cJSON_GetObjectItemCaseSensitive(rule, "reason");
        size_t m = cJSON_IsString(s) ? strlen(s->valuestring) : 0;
        if (m && n >= m && strcmp(name + n - m, s->valuestring) == 0 && cJSON_IsString(why))
            return why->valuestring;
    }
    return NULL;
}

/* hf.refuse_tensor: a tensor of a spelling the family knows and does not read, with why */
static const char *refused(const ckpt_family *f, const char *name)
{
    return suffix_rule(f, "refuse_tensor", name);
}

static int not_ours(const check_ctx *x, const char *name)
{
    const char *why = refused(x->f, name);

    if (why)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: tensor %s is %s", x->weights, name, why);
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                           "%s: tensor %s is not a weight of the %s model %s describes%s%s", x->weights, name,
                           x->f->title, x->config, x->leave_out ? "; " : "",
                           x->leave_out ? x->leave_out : "");
}

static int present(check_ctx *x, const char *name, const ckpt_node *node, const cJSON *t, long long layer)
{
    if (!wanted(x, t, layer) && !has_flag(t, "optional"))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is there but %s says %s", x->weights,
                               name, x->config, says(x, t, layer));
    return check_one(x, name, node, t);
}

/* ", nor in the 0 multi-token prediction layers after them (num_nextn_predict_layers)" */
static const char *mtp_none(check_ctx *x)
{
    snprintf(x->note, sizeof x->note, ", nor in the %lld multi-token prediction layers after them that %s says",
             (long long)ckpt_family__int(x->c, "mtp_layers", 0), ckpt_family__key(x->f, CKPT_FAMILY_HF, "mtp_layers"));
    return x->note;
}

/* A tensor of decoder layer `layer` by its name after the layer prefix (`rest`): a per_layer
 * row, an expert's within the config's count. */
static int check_layer_row(check_ctx *x, const char *name, const ckpt_node *node, const char *rest, int64_t layer)
{
    int64_t experts = ckpt_family__int(x->c, "num_experts", 0);
    long long expert;
    const cJSON *t;

    if (!(t = find_layer(list(x->f, "per_layer"), rest, &expert)))
        return not_ours(x, name);
    if (expert >= experts)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is not one of the %lld experts that %s in %s says",
                               x->weights, name, (long long)experts, ckpt_family__key(x->f, CKPT_FAMILY_HF, "num_experts"),
                               x->config);
    return present(x, name, node, t, layer);
}

/* A tensor of multi-token prediction layer m (hf_tensors.mtp, or a per_layer row as the
 * decoder's last layer has it: Megatron builds the MTP layer's decoder layer from the last
 * layer's spec); without an mtp list the family converts no MTP layer. */
static int check_mtp(check_ctx *x, const char *name, const ckpt_node *node, long long m, const char *rest)
{
    int64_t layers = ckpt_family__int(x->c, "num_layers", 0);
    const cJSON *t, *copy;

    if (!list(x->f, "mtp"))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: tensor %s is in multi-token prediction layer %lld (%s %lld in %s), which ckptconv "
                               "does not convert%s%s", x->weights, name, m,
                               ckpt_family__key(x->f, CKPT_FAMILY_HF, "mtp_layers"),
                               (long long)ckpt_family__int(x->c, "mtp_layers", 0), x->config, x->leave_out ? "; " : "",
                               x->leave_out ? x->leave_out : "");
    if (m + 1 > x->mtp_found)
        x->mtp_found = m + 1;
    if ((t = find(list(x->f, "mtp"), rest)))
        return present(x, name, node, t, layers - 1);
    /* a copy of a main tensor (mtp_shared): that tensor's shape */
    if (cJSON_IsString(copy = cJSON_GetObjectItemCaseSensitive(list(x->f, "mtp_shared"), rest)) &&
        ((t = find(list(x->f, "before"), copy->valuestring)) || (t = find(list(x->f, "after"), copy->valuestring))))
        return check_one(x, name, node, t);
    return check_layer_row(x, name, node, rest, layers - 1);
}

/* One tensor of the files: a weight the config implies, with its shape, or an error naming it. */
static int check_present(check_ctx *x, const char *name, const ckpt_node *node)
{
    const cJSON *t;
    const char *rest;
    long long layer;
    int64_t layers = ckpt_family__int(x->c, "num_layers", 0);

    if ((t = find(list(x->f, "before"), name)) || (t = find(list(x->f, "after"), name)))
        return present(x, name, node, t, -1);
    if (in_strings(list(x->f, "buffers"), name))
        return 0;
    if ((layer = layer_of(x->f, name, 1, &rest)) < 0)
        return not_ours(x, name);
    if (layer >= layers && layer - layers < ckpt_family__int(x->c, "mtp_layers", 0))
        return check_mtp(x, name, node, layer - layers, rest);
    if (layer >= layers)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is not in the %lld layers that %s in %s says%s",
                               x->weights, name, (long long)layers, ckpt_family__key(x->f, CKPT_FAMILY_HF, "num_layers"),
                               x->config, list(x->f, "mtp") ? mtp_none(x) : "");
    if (in_strings(list(x->f, "layer_buffers"), rest))
        return 0;
    return check_layer_row(x, name, node, rest, layer);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int has(const check_ctx *x, const char *name)
{
    return bsearch(&name, x->sorted, x->n, sizeof *x->sorted, by_name) != NULL;
}

static int missing(const check_ctx *x, const char *name, const char *fields)
{
    return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no tensor %s, which %s implies (%s)", x->weights,
                           name, x->config, fields);
}

static int complete_list(const check_ctx *x, const cJSON *l)
{
    const cJSON *t;
    const char *rw, *cw = NULL;
    char fields[160];
    int64_t ignored;
    int rc;

    cJSON_ArrayForEach(t, l) {
        if (!wanted(x, t, -1) || has(x, item_str(t, 0)))
            continue;
        if (item_str(t, 3)) {
            snprintf(fields, sizeof fields, "%s", says(x, t, -1));
        } else {
            if ((rc = extent(x, item_str(t, 1), &ignored, &rw)) < 0 ||
                (item_str(t, 2) && (rc = extent(x, item_str(t, 2), &ignored, &cw)) < 0))
                return rc;
            snprintf(fields, sizeof fields, "%s%s%s", rw, item_str(t, 2) ? ", " : "", item_str(t, 2) ? cw : "");
        }
        return missing(x, item_str(t, 0), fields);
    }
    return 0;
}

/* One layer row's tensor in layer `layer` (and expert `expert` for an {E} row), or an error
 * naming what implies it. */
static int complete_one(const check_ctx *x, const cJSON *t, int64_t layer, int64_t expert, int64_t cond_layer)
{
    int64_t layers = ckpt_family__int(x->c, "num_layers", 0);
    const char *row = item_str(t, 0), *hole = strstr(row, "{E}"), *suffix;
    char prefix[128], name[256], fields[200], experts[80] = "";

    layer_pattern(x->f, prefix, sizeof prefix, &suffix);
    if (hole)
        snprintf(name, sizeof name, "%s%lld%s%.*s%lld%s", prefix, (long long)layer, suffix, (int)(hole - row), row,
                 (long long)expert, hole + 3);
    else
        snprintf(name, sizeof name, "%s%lld%s%s", prefix, (long long)layer, suffix, row);
    if (has(x, name))
        return 0;
    if (hole)
        snprintf(experts, sizeof experts, ", %s %lld", ckpt_family__key(x->f, CKPT_FAMILY_HF, "num_experts"),
                 (long long)ckpt_family__int(x->c, "num_experts", 0));
    snprintf(fields, sizeof fields, "%s %lld%s%s%s",
             ckpt_family__key(x->f, CKPT_FAMILY_HF, layer >= layers ? "mtp_layers" : "num_layers"),
             (long long)(layer >= layers ? ckpt_family__int(x->c, "mtp_layers", 0) : layers), experts, item_str(t, 3) ? ", " : "", item_str(t, 3) ? says(x, t, cond_layer) : "");
    return missing(x, name, fields);
}

/* The tensors rows imply in layer `layer`, whose conditions are those of layer cond_layer. */
static int complete_layer(const check_ctx *x, const cJSON *rows, int64_t layer, int64_t cond_layer)
{
    int64_t experts = ckpt_family__int(x->c, "num_experts", 0), e;
    const cJSON *t;
    int rc;

    cJSON_ArrayForEach(t, rows) {
        if (!wanted(x, t, cond_layer))
            continue;
        for (e = 0; e < (strstr(item_str(t, 0), "{E}") ? experts : 1); e++)
            if ((rc = complete_one(x, t, layer, e, cond_layer)) < 0)
                return rc;
    }
    return 0;
}

/* The multi-token prediction layers: none (transformers 5 writes num_nextn_predict_layers 1
 * and builds no MTP layer; or the user left them out), or as many as the config says, each
 * whole. */
static int complete_mtp(const check_ctx *x)
{
    int64_t layers = ckpt_family__int(x->c, "num_layers", 0), want = ckpt_family__int(x->c, "mtp_layers", 0), m;
    int rc;

    if (x->mtp_found == 0)
        return 0;
    if (x->mtp_found != want)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: the tensors make %lld multi-token prediction layer%s after the %lld decoder layers "
                               "(the last is layer %lld), but %s in %s is %lld", x->weights, x->mtp_found,
                               x->mtp_found == 1 ? "" : "s", (long long)layers, (long long)(layers + x->mtp_found - 1),
                               ckpt_family__key(x->f, CKPT_FAMILY_HF, "mtp_layers"), x->config, (long long)want);
    for (m = 0; m < want; m++)
        if ((rc = complete_layer(x, list(x->f, "per_layer"), layers + m, layers - 1)) < 0 ||
            (rc = complete_layer(x, list(x->f, "mtp"), layers + m, layers - 1)) < 0)
            return rc;
    return 0;
}

/* Every tensor the config implies. The files hold x->n tensors and a layer needs several, so
 * a layer (or expert) count larger than the files meets a missing tensor within a few. */
static int check_complete(const check_ctx *x)
{
    int64_t layers = ckpt_family__int(x->c, "num_layers", 0), layer;
    int rc;

    if ((rc = complete_list(x, list(x->f, "before"))) < 0)
        return rc;
    for (layer = 0; layer < layers; layer++)
        if ((rc = complete_layer(x, list(x->f, "per_layer"), layer, layer)) < 0)
            return rc;
    if ((rc = complete_mtp(x)) < 0)
        return rc;
    return complete_list(x, list(x->f, "after"));
}

int ckpt_family_check_tensors(const ckpt_family *f, const ckpt_family_config *c, const char *framework,
                              const char *config_where, const char *weights_where, const ckpt_map_input *in, size_t n)
{
    return ckpt_family_check_tensors_as(f, c, framework, config_where, weights_where, in, n,
                                        "leave it out on purpose with --drop PATTERN");
}

int ckpt_family_check_tensors_as(const ckpt_family *f, const ckpt_family_config *c, const char *framework,
                                 const char *config_where, const char *weights_where, const ckpt_map_input *in,
                                 size_t n, const char *leave_out)
{
    check_ctx x;
    size_t i;
    int rc = 0;

    if (!f || !c || !framework || (n && !in))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_check_tensors: NULL argument");
    if (strcmp(framework, CKPT_FAMILY_HF) != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "family %s: tensors are checked by their %s names",
                               f->name, CKPT_FAMILY_HF);
    memset(&x, 0, sizeof x);
    x.f = f;
    x.c = c;
    x.config = config_where ? config_where : "config.json";
    x.weights = weights_where ? weights_where : "weights";
    x.leave_out = leave_out;
    x.n = n;
    if (!(x.sorted = calloc(n ? n : 1, sizeof *x.sorted)))
        return ckpt_error_oom();
    for (i = 0; i < n && rc == 0; i++) {
        x.sorted[i] = in[i].name;
        rc = check_present(&x, in[i].name, in[i].node);
    }
    if (rc == 0) {
        qsort(x.sorted, n, sizeof *x.sorted, by_name);
        for (i = 1; i < n && rc == 0; i++)
            if (strcmp(x.sorted[i - 1], x.sorted[i]) == 0)
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: tensor %s is there twice", x.weights,
                                     x.sorted[i]);
        if (rc == 0)
            rc = check_complete(&x);
    }
    free(x.sorted);
    return rc;
}

/* ---- order, left out ---- */

typedef struct order_key {
    int group;     /* 0 before, 1 layers, 2.. after, then anything else */
    long long layer;
    size_t within;    /* place in its list; an expert's tensors: the place of the first {E} row */
    long long expert; /* then by expert, */
    size_t row;       /* then by row (transformers writes expert 0's tensors, then expert 1's) */
    size_t index;     /* input position, for a stable order */
} order_key;

static size_t index_in(const cJSON *l, const char *name)
{
    const cJSON *t;
    size_t i = 0;

    cJSON_ArrayForEach(t, l) {
        if (item_str(t, 0) && strcmp(item_str(t, 0), name) == 0)
            return i;
        i++;
    }
    return i;
}

/* An expert tensor sorts with its expert's tensors, at the place of the first {E} row. */
static void layer_expert_key(const cJSON *per_layer, const char *rest, order_key *k)
{
    const cJSON *t, *row = find_layer(per_layer, rest, &k->expert);
    size_t i = 0, first = (size_t)-1;

    if (k->expert < 0)
        return;
    cJSON_ArrayForEach(t, per_layer) {
        if (item_str(t, 0) && strstr(item_str(t, 0), "{E}") && first == (size_t)-1)
            first = i;
        if (t == row)
            k->row = i;
        i++;
    }
    k->within = first;
}

static order_key key_of(const ckpt_family *f, const char *name, size_t index)
{
    const cJSON *before = list(f, "before"), *after = list(f, "after");
    size_t n_before = (size_t)cJSON_GetArraySize(before), n_after = (size_t)cJSON_GetArraySize(after), i;
    order_key k = { 2 + (int)n_after, 0, 0, -1, 0, index };
    const char *rest;

    if ((i = index_in(before, name)) < n_before) {
        k.group = 0;
        k.within = i;
    } else if ((i = index_in(after, name)) < n_after) {
        k.group = 2 + (int)i;
    } else if ((k.layer = layer_of(f, name, 0, &rest)) >= 0) {
        k.group = 1;
        k.within = index_in(list(f, "per_layer"), rest);
        layer_expert_key(list(f, "per_layer"), rest, &k);
    } else {
        k.layer = 0;
    }
    return k;
}

static int by_key(const void *a, const void *b)
{
    const order_key *x = a, *y = b;
    if (x->group != y->group)
        return x->group - y->group;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->within != y->within)
        return x->within < y->within ? -1 : 1;
    if (x->expert != y->expert)
        return x->expert < y->expert ? -1 : 1;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

int ckpt_family_order(const ckpt_family *f, const char *framework, const char *const *names, size_t n, size_t *perm)
{
    order_key *keys;
    size_t i;

    if (!f || !framework || (n && (!names || !perm)))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_order: NULL argument");
    if (strcmp(framework, CKPT_FAMILY_HF) != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "family %s: no tensor order for %s", f->name,
                               framework);
    if (!(keys = calloc(n ? n : 1, sizeof *keys)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++)
        keys[i] = key_of(f, names[i], i);
    qsort(keys, n, sizeof *keys, by_key);
    for (i = 0; i < n; i++)
        perm[i] = keys[i].index;
    free(keys);
    return 0;
}

const char *ckpt_family_left_out(const ckpt_family *f, const char *framework, const char *name)
{
    (void)framework;
    return f && name ? suffix_rule(f, "left_out", name) : NULL;
}

/* ---- maps ---- */

int ckpt_family_map_params(const ckpt_family *f, const ckpt_family_config *c, ckpt_map_params *p)
{
    const cJSON *e;
    int64_t v;
    int rc;

    if (!f || !c || !p)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_map_params: NULL argument");
    cJSON_ArrayForEach(e, f->map_params)
        if ((rc = ckpt_family__expr(f, c, e->valuestring, ckpt_family__where(f, c), &v, NULL, NULL)) < 0 ||
            (rc = ckpt_map_params_set(p, e->string, v)) < 0)
            return rc;
    return 0;
}

int ckpt_family_map(const ckpt_family *f, const char *framework, const char *impl, int to_hf, ckpt_map **out)
{
    const cJSON *block, *table, *name, *why;

    if (!f || !framework || !out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_family_map: NULL argument");
    *out = NULL;
    block = strcmp(framework, CKPT_FAMILY_MEGATRON) == 0 ? f->megatron
            : strcmp(framework, CKPT_FAMILY_PADDLE) == 0 ? f->paddle
                                                         : NULL;
    why = impl ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(block, "refuse_impl"), impl) : NULL;
    if (cJSON_IsString(why))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: no %s map for transformer implementation %s, because %s",
                               f->title, framework, impl, why->valuestring);
    table = cJSON_GetObjectItemCaseSensitive(block, to_hf ? "to_hf" : "from_hf");
    name = impl ? cJSON_GetObjectItemCaseSensitive(table, impl) : cJSON_IsObject(table) ? table->child : NULL;
    if (!cJSON_IsString(name))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "family %s has no map %s %s%s%s", f->name,
                               to_hf ? "from" : "to", framework, impl ? " with implementation " : "", impl ? impl : "");
    return ckpt_map_builtin(out, name->valuestring);
}
