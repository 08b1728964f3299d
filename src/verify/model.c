/* Models: opening (each framework's verify source bids on the path, the best one fills a
 * builder), the canonical tensors of each rank, and what a model says about itself. */
#include "model_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/framework.h>
#include <ckpt/sys/registry.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The canonical scheme (ckpt/sys/model.h). */
static const char *const model_names[] = {
    "embed.weight", "pos_embed.weight", "final_norm.weight", "final_norm.bias", "output.weight",
};
static const char *const layer_suffixes[] = {
    "attn_norm.weight", "attn_norm.bias", "attn.q.weight", "attn.q.bias", "attn.k.weight", "attn.k.bias",
    "attn.v.weight", "attn.v.bias", "attn.q_norm.weight", "attn.q_norm.bias", "attn.k_norm.weight",
    "attn.k_norm.bias", "attn.o.weight", "attn.o.bias", "mlp_norm.weight", "mlp_norm.bias", "mlp.fc1.weight",
    "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias", "attn_post_norm.weight", "attn_post_norm.bias",
    "mlp_post_norm.weight", "mlp_post_norm.bias", "moe.router.weight", "moe.shared.fc1.weight",
    "moe.shared.fc2.weight", "moe.router.expert_bias", "attn.q_down.weight", "attn.q_down_norm.weight",
    "attn.q_up.weight", "attn.kv_down.weight", "attn.kv_down_norm.weight", "attn.kv_up.weight",
};
/* after "moe.experts.{E}." */
static const char *const expert_suffixes[] = { "fc1.weight", "fc2.weight" };

static const char *parse_index(const char *p, int64_t *out)
{
    const char *start = p;
    int64_t v = 0;

    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10)
            return NULL;
        v = v * 10 + (*p - '0');
    }
    if (p == start || *p != '.')
        return NULL;
    *out = v;
    return p + 1;
}

int64_t ckpt_model__expert_of(const char *name)
{
    const char *p = strstr(name, ".moe.experts.");
    int64_t e;
    size_t i;

    if (!p || !(p = parse_index(p + 13, &e)))
        return -1;
    for (i = 0; i < sizeof expert_suffixes / sizeof expert_suffixes[0]; i++)
        if (strcmp(p, expert_suffixes[i]) == 0)
            return e;
    return -1;
}

/* The layer index of a canonical layer name (-1 for a model-level name); -2 when the name is
 * not in the scheme. */
int64_t ckpt_model__canonical_layer(const char *name)
{
    size_t i;
    int64_t layer;
    const char *p;

    for (i = 0; i < sizeof model_names / sizeof model_names[0]; i++)
        if (strcmp(name, model_names[i]) == 0)
            return -1;
    if (strncmp(name, "layers.", 7) != 0 || !(p = parse_index(name + 7, &layer)))
        return -2;
    for (i = 0; i < sizeof layer_suffixes / sizeof layer_suffixes[0]; i++)
        if (strcmp(p, layer_suffixes[i]) == 0)
            return layer;
    if (strncmp(p, "moe.experts.", 12) == 0 && ckpt_model__expert_of(name) >= 0)
        return layer;
    return -2;
}

void ckpt_model_config_unset(ckpt_model_config *c)
{
    memset(c, 0, sizeof *c);
    c->version = CKPT_MODEL_CONFIG_VERSION;
    c->num_layers = c->hidden_size = c->num_heads = c->num_kv_heads = c->head_dim = -1;
    c->ffn_hidden_size = c->vocab_size = c->rope_original_max_positions = -1;
    c->norm_eps = c->rope_theta = c->rotary_percent = c->rope_scaling_factor = NAN;
    c->rope_low_freq_factor = c->rope_high_freq_factor = NAN;
    c->rope_interleaved = c->norm = c->norm_weight_plus_one = c->act = c->position = -1;
    c->qk_norm = c->tied_embeddings = -1;
    c->window = c->window_full_every = -1;
    c->layer_window = NULL;
    c->rope_theta_local = c->rope_linear_factor = c->attn_scale = c->embed_scale = NAN;
    c->sandwich_norms = -1;
    c->num_experts = c->moe_top_k = c->moe_ffn_hidden_size = c->moe_layer_freq = -1;
    c->moe_score = -1;
    c->moe_topk_scale = NAN;
    c->moe_shared_ffn_hidden_size = -1;
    c->q_lora_rank = c->kv_lora_rank = c->qk_nope_head_dim = c->qk_rope_head_dim = c->v_head_dim = -1;
    c->mla_norm_eps = c->rope_yarn_factor = c->rope_yarn_beta_fast = c->rope_yarn_beta_slow = NAN;
    c->rope_yarn_mscale = c->rope_yarn_mscale_all_dim = c->rope_attention_factor = NAN;
    c->rope_yarn_truncate = -1;
    c->moe_first_dense = -1;
    c->moe_expert_bias = -1;
    c->moe_n_group = c->moe_topk_group = c->moe_group_top = -1;
    c->moe_topk_norm = -1;
    c->layer_moe = NULL;
}

void ckpt_model_options_init(ckpt_model_options *o)
{
    memset(o, 0, sizeof *o);
    o->version = CKPT_MODEL_OPTIONS_VERSION;
    ckpt_model_config_unset(&o->overrides);
    o->iteration = -1;
}

static int vnote(char ***notes, size_t *n, const char *fmt, va_list ap)
{
    char buf[1024], **grown, *copy;

    vsnprintf(buf, sizeof buf, fmt, ap);
    if (!(copy = strdup(buf)))
        return ckpt_error_oom();
    if (!(grown = realloc(*notes, (*n + 1) * sizeof *grown))) {
        free(copy);
        return ckpt_error_oom();
    }
    grown[(*n)++] = copy;
    *notes = grown;
    return 0;
}

int ckpt_model__note(ckpt_model *m, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vnote(&m->notes, &m->n_notes, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- the builder ---- */

ckpt_graph *ckpt_model_builder_graph(ckpt_model_builder *b)
{
    return b->m->g;
}

const char *ckpt_model_builder_path(const ckpt_model_builder *b)
{
    return b->m->path;
}

const ckpt_model_options *ckpt_model_builder_options(const ckpt_model_builder *b)
{
    return b->opts;
}

ckpt_model_config *ckpt_model_builder_config(ckpt_model_builder *b)
{
    return &b->m->cfg;
}

int ckpt_model_builder_config_source(ckpt_model_builder *b, const char *where)
{
    snprintf(b->m->config_source, sizeof b->m->config_source, "%s", where);
    return 0;
}

/* n per-layer flags copied into the model's arena. */
static int copy_flags(ckpt_model *m, const char *what, const unsigned char *flags, int64_t n, unsigned char **out)
{
    if (n < 1 || n > (int64_t)1 << 20)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: a %s flag for %lld layers", m->path, what,
                               (long long)n);
    if (!(*out = ckpt_arena_alloc(m->arena, (size_t)n)))
        return ckpt_error_oom();
    memcpy(*out, flags, (size_t)n);
    return 0;
}

int ckpt_model__set_layer_window(ckpt_model *m, const unsigned char *windowed, int64_t n)
{
    unsigned char *copy;
    int rc = copy_flags(m, "window", windowed, n, &copy);

    if (rc < 0)
        return rc;
    m->cfg.layer_window = copy;
    m->n_layer_window = n;
    return 0;
}

int ckpt_model__set_layer_moe(ckpt_model *m, const unsigned char *moe, int64_t n)
{
    unsigned char *copy;
    int rc = copy_flags(m, "MoE layer", moe, n, &copy);

    if (rc < 0)
        return rc;
    m->cfg.layer_moe = copy;
    m->n_layer_moe = n;
    return 0;
}

int ckpt_model_builder_layer_window(ckpt_model_builder *b, const unsigned char *windowed, int64_t n)
{
    return ckpt_model__set_layer_window(b->m, windowed, n);
}

int ckpt_model_builder_layer_moe(ckpt_model_builder *b, const unsigned char *moe, int64_t n)
{
    return ckpt_model__set_layer_moe(b->m, moe, n);
}

int ckpt_model_builder_kind(ckpt_model_builder *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(b->m->kind, sizeof b->m->kind, fmt, ap);
    va_end(ap);
    return 0;
}

int ckpt_model_builder_note(ckpt_model_builder *b, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vnote(&b->m->notes, &b->m->n_notes, fmt, ap);
    va_end(ap);
    return rc;
}

int ckpt_model_builder_keep(ckpt_model_builder *b, void *resource, void (*release)(void *))
{
    ckpt_model *m = b->m;
    mkeep *grown = ckpt_array_grow(m->keep, &m->cap_keep, m->n_keep, sizeof *m->keep);

    if (!grown) {
        release(resource);
        return CKPT_ENOMEM;
    }
    m->keep = grown;
    m->keep[m->n_keep].resource = resource;
    m->keep[m->n_keep++].release = release;
    return 0;
}

int ckpt_model_builder_set_ranks(ckpt_model_builder *b, int ranks)
{
    ckpt_model *m = b->m;

    if (m->rank || ranks < 1 || ranks > 4096)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: %d tensor-parallel ranks%s", m->path, ranks,
                               m->rank ? " set twice" : "");
    if (!(m->rank = calloc((size_t)ranks, sizeof *m->rank)))
        return ckpt_error_oom();
    m->ranks = ranks;
    return 0;
}

int ckpt_model_builder_add(ckpt_model_builder *b, int rank, const char *name, const ckpt_node *node)
{
    ckpt_model *m = b->m;
    mtensor *grown;
    mrank *r;

    if (!m->rank && ckpt_model_builder_set_ranks(b, 1) < 0)
        return CKPT_ENOMEM;
    if (rank < 0 || rank >= m->ranks)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: tensor %s for rank %d of %d", m->path, name,
                               rank, m->ranks);
    if (ckpt_model__canonical_layer(name) == -2)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: tensor %s is not part of a decoder model verify can run", m->path, name);
    r = &m->rank[rank];
    if (!(grown = ckpt_array_grow(r->t, &r->cap, r->n, sizeof *r->t)))
        return CKPT_ENOMEM;
    r->t = grown;
    if (!(r->t[r->n].name = ckpt_arena_strndup(m->arena, name, strlen(name))))
        return ckpt_error_oom();
    r->t[r->n++].node = node;
    return 0;
}

int ckpt_model_builder_add_mapped(ckpt_model_builder *b, int rank, const ckpt_map *map, const ckpt_map_params *params,
                                  const ckpt_map_input *inputs, size_t n)
{
    ckpt_map_result *res = NULL;
    size_t i;
    int rc;

    if ((rc = ckpt_map_apply(map, params, b->m->g, inputs, n, NULL, &res)) < 0)
        return rc;
    for (i = 0; i < ckpt_map_result_count(res) && rc == 0; i++) {
        const ckpt_map_output *o = ckpt_map_result_at(res, i);
        if (ckpt_model__canonical_layer(o->name) == -2)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                 "%s: tensor %s is left unread by map %s (not a part of the decoder it knows)",
                                 b->m->path, o->name, ckpt_map_name(map));
        else
            rc = ckpt_model_builder_add(b, rank, o->name, o->node);
    }
    ckpt_map_result_free(res);
    return rc;
}

/* ---- the model ---- */

static int by_name(const void *a, const void *b)
{
    return strcmp(((const mtensor *)a)->name, ((const mtensor *)b)->name);
}

const ckpt_node *ckpt_model__find(const ckpt_model *m, int r, const char *name)
{
    mtensor key, *hit;

    if (r < 0 || r >= m->ranks)
        return NULL;
    key.name = name;
    hit = bsearch(&key, m->rank[r].t, m->rank[r].n, sizeof key, by_name);
    return hit ? hit->node : NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sort each rank's tensors, refuse duplicates, and list the layers rank 0 holds. */
static int index_tensors(ckpt_model *m)
{
    size_t i, n;
    int r;

    if (!m->rank)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: no tensors of a decoder model", m->path);
    for (r = 0; r < m->ranks; r++) {
        mrank *k = &m->rank[r];
        qsort(k->t, k->n, sizeof *k->t, by_name);
        for (i = 1; i < k->n; i++)
            if (strcmp(k->t[i - 1].name, k->t[i].name) == 0)
                return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: two tensors become %s (rank %d)",
                                       m->path, k->t[i].name, r);
    }
    if (!(m->layers = malloc((m->rank[0].n + 1) * sizeof *m->layers)))
        return ckpt_error_oom();
    for (i = 0, n = 0; i < m->rank[0].n; i++) {
        int64_t l = ckpt_model__canonical_layer(m->rank[0].t[i].name);
        if (l >= 0)
            m->layers[n++] = l;
    }
    qsort(m->layers, n, sizeof *m->layers, cmp_i64);
    for (i = 0, m->n_layers = 0; i < n; i++)
        if (m->n_layers == 0 || m->layers[m->n_layers - 1] != m->layers[i])
            m->layers[m->n_layers++] = m->layers[i];
    return 0;
}

static int open_with(ckpt_model *m, const ckpt_model_source_vtable *src, const ckpt_model_options *opts)
{
    ckpt_model_builder b = { m, opts };
    int rc;

    m->source = src->name;
    if ((rc = src->open(&b)) < 0)
        return rc;
    if ((rc = index_tensors(m)) < 0 || (rc = ckpt_model__model_parts(m)) < 0 ||
        (rc = ckpt_model__finish_config(m, &opts->overrides)) < 0 || (rc = ckpt_model__check_unused(m)) < 0)
        return rc;
    return opts->merge_tp ? ckpt_model__merge_ranks(m) : 0;
}

int ckpt_model_open(ckpt_model **out, const char *path, const ckpt_model_options *user)
{
    ckpt_model_options defaults;
    const ckpt_model_options *opts = user;
    const ckpt_model_source_vtable *best = NULL;
    struct stat st;
    int best_bid = -1;
    size_t i;

    *out = NULL;
    if (!opts) {
        ckpt_model_options_init(&defaults);
        opts = &defaults;
    }
    /* the config the options hold grew with versions 2, 3 and 4, so an older caller's fields are elsewhere */
    if (opts->version != CKPT_MODEL_OPTIONS_VERSION)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                               "model options version %u is not this library's %u (rebuild against its headers)",
                               opts->version, (unsigned)CKPT_MODEL_OPTIONS_VERSION);
    if (stat(path, &st) != 0)
        return ckpt_error_setc(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_OS, "%s: %s", path,
                               strerror(errno));
    for (i = 0; i < ckpt_frameworks__count(); i++) {
        const ckpt_model_source_vtable *s = ckpt_frameworks__at(i)->verify;
        int bid = s ? s->bid(path, S_ISDIR(st.st_mode)) : -1;
        if (bid > best_bid) {
            best_bid = bid;
            best = s;
        }
    }
    if (!best)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: not a model verify can run (a Megatron-LM, Hugging Face, PaddleNLP or DeepSpeed "
                               "checkpoint of a decoder-only transformer)",
                               path);
    return ckpt_model__open_source(out, path, best, opts);
}

int ckpt_model__open_source(ckpt_model **out, const char *path, const ckpt_model_source_vtable *src,
                            const ckpt_model_options *opts)
{
    ckpt_model *m;
    int rc;

    *out = NULL;
    if (!(m = calloc(1, sizeof *m)) || !(m->path = strdup(path))) {
        free(m);
        return ckpt_error_oom();
    }
    ckpt_model_config_unset(&m->cfg);
    if ((rc = ckpt_graph_new(&m->g)) < 0 || (rc = ckpt_arena_new(&m->arena)) < 0 ||
        (rc = open_with(m, src, opts)) < 0) {
        ckpt_model_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

void ckpt_model_close(ckpt_model *m)
{
    size_t i;
    int r;

    if (!m)
        return;
    for (r = 0; r < m->ranks; r++)
        free(m->rank[r].t);
    free(m->rank);
    ckpt_graph_free(m->g);
    for (i = m->n_keep; i-- > 0;)
        m->keep[i].release(m->keep[i].resource);
    free(m->keep);
    for (i = 0; i < m->n_notes; i++)
        free(m->notes[i]);
    free(m->notes);
    free(m->layers);
    ckpt_arena_free(m->arena);
    free(m->path);
    free(m);
}

int ckpt_model_open_counterpart(ckpt_model **out, const ckpt_model *m, const ckpt_model_options *user)
{
    ckpt_model_options o;

    *out = NULL;
    if (user)
        o = *user;
    else
        ckpt_model_options_init(&o);
    if (strcmp(m->source, "deepspeed") == 0 && !o.zero_module)
        o.zero_module = 1;
    else if (m->ranks > 1)
        o.merge_tp = 1;
    else
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s is neither tensor-parallel nor a DeepSpeed ZeRO checkpoint, so it has no second "
                               "form to be checked against: give another checkpoint to compare it with",
                               m->path);
    return ckpt_model_open(out, m->path, &o);
}

const char *ckpt_model_source(const ckpt_model *m)
{
    return m->source;
}

const ckpt_model_config *ckpt_model_config_of(const ckpt_model *m)
{
    return &m->cfg;
}

const char *ckpt_model_kind(const ckpt_model *m)
{
    return m->kind;
}

ckpt_dtype ckpt_model_dtype(const ckpt_model *m)
{
    return m->dtype;
}

int ckpt_model_tp(const ckpt_model *m)
{
    return m->ranks;
}

size_t ckpt_model_layer_count(const ckpt_model *m)
{
    return m->n_layers;
}

int64_t ckpt_model_layer_index(const ckpt_model *m, size_t i)
{
    return i < m->n_layers ? m->layers[i] : -1;
}

int ckpt_model_has_embedding(const ckpt_model *m)
{
    return m->embed != NULL;
}

int ckpt_model_has_final_norm(const ckpt_model *m)
{
    return m->final_w != NULL;
}

int ckpt_model_has_output(const ckpt_model *m)
{
    return m->output != NULL;
}

size_t ckpt_model_note_count(const ckpt_model *m)
{
    return m->n_notes;
}

const char *ckpt_model_note_at(const ckpt_model *m, size_t i)
{
    return i < m->n_notes ? m->notes[i] : NULL;
}
