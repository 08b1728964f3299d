/* PaddleNLP checkpoints as models `ckptconv verify` runs: a checkpoint directory (every
 * model_state*.pdparams of it: tensor-parallel files as ranks, pipeline and size-sharded files
 * joined) or one .pdparams file, PaddleNLP or Transformer Engine layers, with config.json
 * beside them, mapped by their family's verify map (LLaMA's: the first family's without a
 * config.json). */
#include <ckpt/sys/registry.h>
#include "../verify_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rank_inputs {
    ckpt_map_input *in;
    size_t n, cap;
} rank_inputs;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int paddle_bid(const char *path, int is_dir)
{
    const ckpt_layout_vtable *l = ckpt_layouts__find("paddle");

    if (!is_dir)
        return ends_with(path, ".pdparams") ? 60 : -1;
    return l ? l->bid(path, is_dir) : -1;
}

static int map_ranks(ckpt_model_builder *b, const char *verify_map, rank_inputs *ranks, int n)
{
    const ckpt_map *map;
    ckpt_map_params *p;
    vsrc_parts *parts = calloc((size_t)n, sizeof *parts);
    int r, rc;

    if (!parts)
        return ckpt_error_oom();
    rc = ckpt_vsrc__map(b, verify_map, &map);
    if (rc == 0)
        rc = ckpt_vsrc__map_params(b, &p);
    if (rc == 0)
        rc = ckpt_model_builder_set_ranks(b, n);
    for (r = 0; r < n && rc == 0; r++)
        rc = ckpt_vsrc__map_rank(b, r, map, p, ranks[r].in, ranks[r].n, &parts[r]);
    if (rc == 0)
        rc = ckpt_vsrc__add_parts(b, parts, n);
    free(parts);
    return rc;
}

/* A tied head is the embedding (PaddleNLP 3 saves it again under lm_head.weight): the
 * decoder uses the embedding, so the copy is left out. */
static void drop_tied_head(ckpt_model_builder *b, rank_inputs *ranks, int n)
{
    size_t i, kept;
    int r;

    if (ckpt_model_builder_config(b)->tied_embeddings != 1)
        return;
    for (r = 0; r < n; r++) {
        for (i = kept = 0; i < ranks[r].n; i++)
            if (strcmp(ranks[r].in[i].name, "lm_head.weight") != 0)
                ranks[r].in[kept++] = ranks[r].in[i];
        ranks[r].n = kept;
    }
}

/* Transformer Engine layers (pd2te's output) or PaddleNLP's own. */
static int has_te_layers(const rank_inputs *r)
{
    size_t i;
    for (i = 0; i < r->n; i++)
        if (strstr(r->in[i].name, ".transformer."))
            return 1;
    return 0;
}

static int open_members(ckpt_model_builder *b, ckpt_set *set, rank_inputs **out, int *n_ranks)
{
    size_t i;
    int ranks = 1, rc = 0;

    for (i = 0; i < ckpt_set_member_count(set); i++) {
        const ckpt_member *m = ckpt_set_member_at(set, i);
        if (strcmp(m->role, "model") == 0 && m->at.tp + 1 > ranks)
            ranks = m->at.tp + 1;
    }
    if (!(*out = calloc((size_t)ranks, sizeof **out)))
        return ckpt_error_oom();
    *n_ranks = ranks;
    for (i = 0; i < ckpt_set_member_count(set) && rc == 0; i++) {
        const ckpt_member *m = ckpt_set_member_at(set, i);
        const ckpt_ckpt *c;
        rank_inputs *r = &(*out)[m->at.tp > 0 ? m->at.tp : 0];
        if (strcmp(m->role, "model") != 0)
            continue;
        if ((rc = ckpt_set_member_open(set, i, &c)) == 0)
            rc = ckpt_vsrc__inputs(b, c, NULL, &r->in, &r->n, &r->cap);
    }
    return rc;
}

static int paddle_open(ckpt_model_builder *b)
{
    const char *path = ckpt_model_builder_path(b);
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    rank_inputs *ranks = NULL;
    char config[4096], dir[4096];
    const char *slash = strrchr(path, '/');
    ckpt_set *set;
    ckpt_ckpt *c;
    vsrc_config vc = { NULL, NULL, ckpt_family_string(ckpt_family_builtin_at(0), "verify.maps.paddle") };
    int n = 0, r, rc, te;

    so.layout = "paddle";
    if (ends_with(path, ".pdparams")) {
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        if ((rc = ckpt_open(&c, path, NULL)) < 0 || (rc = ckpt_vsrc__keep_ckpt(b, c)) < 0)
            return rc;
        if (!(ranks = calloc(1, sizeof *ranks)))
            return ckpt_error_oom();
        n = 1;
        rc = ckpt_vsrc__inputs(b, c, NULL, &ranks[0].in, &ranks[0].n, &ranks[0].cap);
    } else {
        snprintf(dir, sizeof dir, "%s", path);
        if ((rc = ckpt_set_open(&set, path, &so)) < 0 || (rc = ckpt_vsrc__keep_set(b, set)) < 0)
            return rc;
        rc = open_members(b, set, &ranks, &n);
    }
    if (rc == 0 && ckpt_vsrc__find_config(dir, 0, config, sizeof config) == 0)
        rc = ckpt_vsrc__config_json(b, config, CKPT_FAMILY_PADDLE, NULL, NULL, &vc);
    else if (rc == 0)
        ckpt_model_builder_config_source(b, "config.json (there is none beside the weights)");
    te = n > 0 && has_te_layers(&ranks[0]);
    ckpt_model_builder_kind(b, "PaddleNLP %s, %s layers%s",
                            ckpt_family_title(vc.family ? vc.family : ckpt_family_builtin_at(0)),
                            te ? "Transformer Engine" : "PaddleNLP", n > 1 ? ", tensor-parallel files run as ranks" : "");
    if (rc == 0) {
        drop_tied_head(b, ranks, n);
        rc = map_ranks(b, vc.verify_map, ranks, n);
    }
    for (r = 0; r < n; r++)
        free(ranks[r].in);
    free(ranks);
    return rc;
}

const ckpt_model_source_vtable ckpt_model_source_paddle = {
    .abi_version = CKPT_MODEL_SOURCE_ABI_VERSION,
    .name = "paddle",
    .bid = paddle_bid,
    .open = paddle_open,
};
