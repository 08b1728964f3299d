/* What the model sources of `ckptconv verify` share (verify_source.h), the config aside
 * (verify_family.c). */
#include "verify_source.h"

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
