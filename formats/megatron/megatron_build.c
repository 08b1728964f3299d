/* Megatron models built tensor by tensor (from another framework's checkpoint): the
 * template a rank file is written from, Megatron's order of the tensors, and the
 * `_extra_state` keys the target implementation's modules have. */
#include "megatron_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int root_entry(ckpt_arena *a, ckpt_value *root, const char *key, ckpt_value *v)
{
    ckpt_value *k = ckpt_value_new_str(a, key, strlen(key));
    return k && v ? ckpt_value_dict_set(a, root, k, v) : CKPT_ENOMEM;
}

/* What Megatron's converters write: args, checkpoint_version, iteration, model,
 * num_floating_point_operations_so_far. */
static int template_root(ckpt_megatron *m, int64_t iteration, ckpt_value **out)
{
    ckpt_arena *a = m->arena;
    ckpt_value *root = ckpt_value_new(a, CKPT_VAL_DICT), *model = ckpt_value_new(a, CKPT_VAL_DICT);
    int rc;

    if (!root || !model)
        return CKPT_ENOMEM;
    model->u.dict.cls = ckpt_value_new_global(a, "collections", "OrderedDict");
    if ((rc = root_entry(a, root, "args", (ckpt_value *)m->args)) < 0 ||
        (rc = root_entry(a, root, "checkpoint_version", ckpt_value_new_float(a, 3.0))) < 0 ||
        (rc = root_entry(a, root, "iteration", ckpt_value_new_int(a, iteration))) < 0 ||
        (rc = root_entry(a, root, "model", model)) < 0 ||
        (rc = root_entry(a, root, "num_floating_point_operations_so_far", ckpt_value_new_int(a, 0))) < 0)
        return rc;
    *out = root;
    return 0;
}

int ckpt_megatron__init_built(ckpt_megatron *m, const ckpt_value *args, int64_t iteration,
                              const ckpt_megatron_options *opts)
{
    ckpt_value *root;
    int rc;

    m->args = args;
    m->info.tp = m->info.pp = m->info.ep = m->info.vpp = 1;
    m->info.run_tp = m->info.run_pp = m->info.run_vpp = 1;
    m->info.iteration = iteration;
    m->info.checkpoint_version = 3.0;
    m->info.num_layers = ckpt_megatron__arg_int(args, "num_layers", 0);
    m->info.padded_vocab_size = ckpt_megatron__arg_int(args, "padded_vocab_size", 0);
    m->info.make_vocab_size_divisible_by = ckpt_megatron__arg_int(args, "make_vocab_size_divisible_by", 128);
    m->info.true_vocab_size = opts->true_vocab_size ? opts->true_vocab_size : ckpt_megatron__true_vocab(args);
    if (!(m->ranks = calloc(1, sizeof *m->ranks)))
        return ckpt_error_oom();
    if ((!m->arena && (rc = ckpt_arena_new(&m->arena)) < 0) || (!m->spec && (rc = ckpt_megatron__load_spec(m, opts)) < 0) ||
        (rc = ckpt_megatron__load_params(m)) < 0 || (rc = template_root(m, iteration, &root)) < 0)
        return rc;
    m->ranks[0].root = root;
    return 0;
}

int ckpt_megatron_new(ckpt_megatron **out, ckpt_graph *g, const ckpt_value *args, int64_t iteration,
                      const ckpt_megatron_options *user)
{
    ckpt_megatron_options opts = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_megatron *m;
    int rc;

    *out = NULL;
    if (user) /* a version 1 caller's struct ends before leave_out */
        memcpy(&opts, user, user->version == 1 ? offsetof(ckpt_megatron_options, leave_out) : sizeof opts);
    if (!ckpt_megatron__namespace_dict(args))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_megatron_new: args is not a Namespace");
    m = calloc(1, sizeof *m);
    if (!m)
        return ckpt_error_oom();
    m->g = g;
    if ((rc = ckpt_megatron__init_built(m, args, iteration, &opts)) < 0) {
        ckpt_megatron_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* An entry under its global name, which is also its key: a model built here has one rank. */
static int new_entry(ckpt_megatron *m, const char *name, int ndim, mg_entry **out)
{
    mg_entry *e = NULL;
    int rc;

    if ((rc = ckpt_megatron__push_entry(m, &e)) < 0)
        return rc;
    e->ep = -1;
    e->name = strdup(name);
    e->local = strdup(name);
    if (!e->name || !e->local)
        return ckpt_error_oom();
    *out = e;
    if ((rc = ckpt_parallel_classify(m->spec, m->params, name, ndim, &e->layout)) == 0 && e->layout.expert &&
        !ckpt_megatron__expert_index(name, &e->expert))
        e->expert = -1;
    return rc;
}

int ckpt_megatron_add_tensor(ckpt_megatron *m, const char *name, const ckpt_node *full)
{
    if (m->set || m->dist)
        return ckpt_error_set(CKPT_EINVALID, "%s: tensors are added only to a model made by ckpt_megatron_new", name);
    return ckpt_megatron__add_full(m, name, full);
}

int ckpt_megatron__add_full(ckpt_megatron *m, const char *name, const ckpt_node *full)
{
    mg_entry *e = NULL;
    int rc;

    if ((rc = new_entry(m, name, ckpt_node_ndim(full), &e)) < 0)
        return rc;
    e->param = !ckpt_megatron__is_extra_state(name);
    e->full = full;
    if (e->layout.layer + 1 > m->info.num_layers)
        m->info.num_layers = e->layout.layer + 1;
    if (e->layout.tp == CKPT_TP_VOCAB)
        m->info.padded_vocab_size = ckpt_node_shape(full)[0];
    return 0;
}

/* Megatron's module order within a layer (TE and local names), for models built from
 * another framework's order. A post_layernorm (Megatron-Bridge's Gemma 3) is a submodule of
 * its linear, so torch's state_dict puts it after that linear's own tensors. */
static const char *const layer_order[] = {
    "input_layernorm.weight", "input_layernorm.bias",
    "self_attention.core_attention._extra_state", "self_attention.core_attention.fused_attention._extra_state",
    "self_attention.linear_proj.weight", "self_attention.linear_proj.bias", "self_attention.linear_proj._extra_state",
    "self_attention.linear_proj.post_layernorm.weight",
    "self_attention.linear_qkv.layer_norm_weight", "self_attention.linear_qkv.layer_norm_bias",
    "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias", "self_attention.linear_qkv._extra_state",
    "self_attention.linear_q_proj.weight", "self_attention.linear_q_proj._extra_state",
    "self_attention.linear_q_down_proj.weight", "self_attention.linear_q_down_proj._extra_state",
    "self_attention.linear_q_up_proj.layer_norm_weight", "self_attention.linear_q_up_proj.weight",
    "self_attention.linear_q_up_proj._extra_state",
    "self_attention.linear_kv_down_proj.weight", "self_attention.linear_kv_down_proj._extra_state",
    "self_attention.linear_kv_up_proj.layer_norm_weight", "self_attention.linear_kv_up_proj.weight",
    "self_attention.linear_kv_up_proj._extra_state",
    "self_attention.q_layernorm.weight", "self_attention.q_layernorm.bias",
    "self_attention.k_layernorm.weight", "self_attention.k_layernorm.bias",
    "self_attention.kv_layernorm.weight",
    "pre_mlp_layernorm.weight", "pre_mlp_layernorm.bias",
    "mlp.linear_fc1.layer_norm_weight", "mlp.linear_fc1.layer_norm_bias",
    "mlp.router.weight", "mlp.router.expert_bias", "mlp.experts.local_experts.",
    "mlp.shared_experts.linear_fc1.weight", "mlp.shared_experts.linear_fc1._extra_state",
    "mlp.shared_experts.linear_fc2.weight", "mlp.shared_experts.linear_fc2._extra_state",
    "mlp.linear_fc1.weight", "mlp.linear_fc1.bias", "mlp.linear_fc1._extra_state",
    "mlp.linear_fc2.weight", "mlp.linear_fc2.bias", "mlp.linear_fc2._extra_state",
    "mlp.linear_fc2.post_layernorm.weight",
};

/* Megatron's order of the parameters outside the layers (GPTModel: embedding, decoder's final
 * norm, output layer): a torch_dist checkpoint's items come in whatever order its save
 * planner gave them (megatron-core 0.16.1 with several data-parallel ranks saving; 0.13 lists
 * output_layer before the final norm). */
static const char *const edge_order[] = {
    "embedding.word_embeddings.weight", "embedding.position_embeddings.weight",
    "decoder.final_layernorm.weight",   "decoder.final_layernorm.bias",
    "output_layer.weight",              "output_layer.bias",
};
#define MTP_BEFORE 4 /* output_layer.weight */

typedef struct sort_key {
    int stage; /* 0 first, 1 layers, 2 every, 3 last */
    int64_t layer;
    size_t within, index;
    size_t edge;     /* 2 x the place in edge_order; an MTP layer's tensors 2 x that of output_layer.weight - 1 */
    size_t mtp_part; /* an MTP layer's module (mtp_order), its decoder layer's modules by within */
    int64_t expert; /* a local expert's index, its modules in layer_order after it */
    size_t expert_within;
} sort_key;

/* Where the rest of a layer key goes in layer_order: the experts of a MoE layer (SequentialMLP's
 * local_experts.<i>.linear_fc1/2) at their marker, by index, then by their modules' order. */
static size_t order_of(const char *rest, int64_t *expert, size_t *expert_within)
{
    static const char experts[] = "mlp.experts.local_experts.";
    size_t i, n = sizeof layer_order / sizeof layer_order[0];
    char module[256], *end;
    int64_t none;
    size_t unused;

    *expert = -1;
    *expert_within = 0;
    if (strncmp(rest, experts, sizeof experts - 1) == 0) {
        *expert = strtoll(rest + sizeof experts - 1, &end, 10);
        if (*end == '.' && (size_t)snprintf(module, sizeof module, "mlp.%s", end + 1) < sizeof module)
            *expert_within = order_of(module, &none, &unused);
        rest = experts;
    }
    for (i = 0; i < n; i++)
        if (strcmp(rest, layer_order[i]) == 0)
            break;
    return i;
}

/* A multi-token prediction layer's modules in MultiTokenPredictionLayer's order (megatron-core
 * multi_token_prediction.py), its decoder layer (transformer_layer.) in layer_order. */
static const char *const mtp_order[] = { "enorm.",  "hnorm.", "eh_proj.weight", "eh_proj._extra_state",
                                         "transformer_layer.", "final_layernorm." };

int64_t ckpt_megatron__mtp_layer(const char *name, const char **rest)
{
    static const char prefix[] = "mtp.layers.";
    char *end;
    int64_t m;

    if (strncmp(name, prefix, sizeof prefix - 1) != 0 || name[sizeof prefix - 1] < '0' || name[sizeof prefix - 1] > '9')
        return -1;
    m = strtoll(name + sizeof prefix - 1, &end, 10);
    if (*end != '.')
        return -1;
    *rest = end + 1;
    return m;
}

int64_t ckpt_megatron__mtp_layers(const ckpt_megatron *m)
{
    int64_t n = 0, l;
    const char *rest;
    size_t i;

    for (i = 0; i < m->n_entries; i++)
        if ((l = ckpt_megatron__mtp_layer(m->entries[i].name, &rest)) >= n)
            n = l + 1;
    return n;
}

/* An MTP layer's tensors sort after the decoder's final norm, before the output layer (GPTModel
 * registers decoder, mtp, output_layer in this order). */
static void mtp_key(const char *rest, sort_key *k)
{
    size_t i, n = sizeof mtp_order / sizeof mtp_order[0];

    for (i = 0; i < n && strncmp(rest, mtp_order[i], strlen(mtp_order[i])) != 0; i++)
        ;
    k->mtp_part = i;
    if (i < n && strcmp(mtp_order[i], "transformer_layer.") == 0)
        k->within = order_of(rest + strlen(mtp_order[i]), &k->expert, &k->expert_within);
}

static sort_key entry_key(const ckpt_megatron *m, const mg_entry *e, size_t index)
{
    sort_key k = { .stage = 1, .layer = e->layout.layer, .index = index, .expert = -1 };
    static const char prefix[] = "decoder.layers.";
    const char *dot;
    size_t i;

    switch (e->layout.stage) {
    case CKPT_STAGE_FIRST: k.stage = 0; break;
    case CKPT_STAGE_LAST: k.stage = 3; break;
    case CKPT_STAGE_EVERY: k.stage = 2; break;
    default: break;
    }
    (void)m;
    if ((k.layer = ckpt_megatron__mtp_layer(e->name, &dot)) >= 0) {
        k.stage = 3;
        k.edge = 2 * MTP_BEFORE - 1;
        mtp_key(dot, &k);
        return k;
    }
    k.layer = e->layout.layer;
    if (e->layout.layer >= 0 && strncmp(e->name, prefix, sizeof prefix - 1) == 0 &&
        (dot = strchr(e->name + sizeof prefix - 1, '.')) != NULL) {
        k.within = order_of(dot + 1, &k.expert, &k.expert_within);
    } else if (e->layout.layer < 0) {
        for (i = 0; i < sizeof edge_order / sizeof edge_order[0]; i++)
            if (strcmp(e->name, edge_order[i]) == 0)
                break;
        k.within = i;
        k.edge = 2 * i;
    }
    return k;
}

static int by_key(const void *a, const void *b)
{
    const sort_key *x = a, *y = b;
    if (x->stage != y->stage)
        return x->stage - y->stage;
    if (x->edge != y->edge)
        return x->edge < y->edge ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->mtp_part != y->mtp_part)
        return x->mtp_part < y->mtp_part ? -1 : 1;
    if (x->within != y->within)
        return x->within < y->within ? -1 : 1;
    if (x->expert != y->expert)
        return x->expert < y->expert ? -1 : 1;
    if (x->expert_within != y->expert_within)
        return x->expert_within < y->expert_within ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

int ckpt_megatron__sort(ckpt_megatron *m)
{
    sort_key *keys = calloc(m->n_entries + 1, sizeof *keys);
    mg_entry *sorted = calloc(m->n_entries + 1, sizeof *sorted);
    size_t i;

    if (!keys || !sorted) {
        free(keys);
        free(sorted);
        return ckpt_error_oom();
    }
    for (i = 0; i < m->n_entries; i++)
        keys[i] = entry_key(m, &m->entries[i], i);
    qsort(keys, m->n_entries, sizeof *keys, by_key);
    for (i = 0; i < m->n_entries; i++)
        sorted[i] = m->entries[keys[i].index];
    memcpy(m->entries, sorted, m->n_entries * sizeof *sorted);
    free(keys);
    free(sorted);
    return 0;
}

/* Transformer Engine modules keep an empty uint8 tensor when they hold no FP8 state; local
 * (Megatron) linears keep None. */
static const char *const te_extra[] = { "self_attention.core_attention._extra_state",
                                        "self_attention.linear_proj._extra_state",
                                        "self_attention.linear_qkv._extra_state", "mlp.linear_fc1._extra_state",
                                        "mlp.linear_fc2._extra_state" };
static const char *const local_extra[] = { "self_attention.linear_proj._extra_state",
                                           "self_attention.linear_qkv._extra_state", "mlp.linear_fc1._extra_state",
                                           "mlp.linear_fc2._extra_state" };

int ckpt_megatron__add_extra(ckpt_megatron *m, const char *name, int te, int ep)
{
    mg_entry *e = NULL;
    int64_t zero = 0;
    int rc;

    if ((rc = new_entry(m, name, te ? 1 : 0, &e)) < 0)
        return rc;
    e->ep = ep;
    if (te)
        return ckpt_node_zeros(m->g, CKPT_DTYPE_U8, 1, &zero, &e->full);
    e->value = ckpt_value_new(m->arena, CKPT_VAL_NONE);
    return e->value ? 0 : CKPT_ENOMEM;
}

/* Linears named by their weight keep an _extra_state each: SequentialMLP's experts and the
 * shared experts (a MoE layer has no dense MLP linears), and multi-latent attention's
 * projections (an MLA layer has no linear_qkv). */
static int linear_with_extra(const char *w)
{
    static const char *const mla[] = { ".self_attention.linear_q_proj.weight",
                                       ".self_attention.linear_q_down_proj.weight",
                                       ".self_attention.linear_q_up_proj.weight",
                                       ".self_attention.linear_kv_down_proj.weight",
                                       ".self_attention.linear_kv_up_proj.weight" };
    size_t i, len = strlen(w);

    if (strstr(w, ".mlp.experts.local_experts.") || strstr(w, ".mlp.shared_experts.linear_fc"))
        return len >= 7 && strcmp(w + len - 7, ".weight") == 0;
    for (i = 0; i < sizeof mla / sizeof mla[0]; i++)
        if (len >= strlen(mla[i]) && strcmp(w + len - strlen(mla[i]), mla[i]) == 0)
            return 1;
    return 0;
}

static int add_expert_extras(ckpt_megatron *m, int transformer_engine)
{
    size_t i, n = m->n_entries;
    int rc = 0;

    for (i = 0; i < n && rc == 0; i++) {
        const char *w = m->entries[i].name;
        size_t len = strlen(w);
        char name[320];
        if (!linear_with_extra(w) || len - 7 + sizeof "._extra_state" > sizeof name)
            continue;
        snprintf(name, sizeof name, "%.*s._extra_state", (int)(len - 7), w);
        rc = ckpt_megatron__add_extra(m, name, transformer_engine, m->entries[i].ep);
    }
    return rc;
}

/* An MTP layer's decoder layer keeps the extra states a decoder layer of its kind does, and
 * its eh_proj (a column-parallel linear) one. */
static int add_mtp_extras(ckpt_megatron *m, const char *const *keys, size_t n, int transformer_engine)
{
    int64_t count = ckpt_megatron__mtp_layers(m), l;
    char name[256];
    const char *rest;
    size_t i;
    int rc = 0;

    for (l = 0; l < count && rc == 0; l++) {
        int kind = 0;
        for (i = 0; i < m->n_entries; i++)
            if (ckpt_megatron__mtp_layer(m->entries[i].name, &rest) == l) {
                kind |= strncmp(rest, "transformer_layer.mlp.experts.", 30) == 0 ? 1 : 0;
                kind |= strstr(rest, ".self_attention.linear_kv_down_proj.") ? 2 : 0;
            }
        snprintf(name, sizeof name, "mtp.layers.%lld.eh_proj._extra_state", (long long)l);
        rc = ckpt_megatron__add_extra(m, name, transformer_engine, -1);
        for (i = 0; i < n && rc == 0; i++) {
            if (((kind & 1) && strncmp(keys[i], "mlp.linear_fc", 13) == 0) ||
                ((kind & 2) && strcmp(keys[i], "self_attention.linear_qkv._extra_state") == 0))
                continue;
            snprintf(name, sizeof name, "mtp.layers.%lld.transformer_layer.%s", (long long)l, keys[i]);
            rc = ckpt_megatron__add_extra(m, name, transformer_engine, -1);
        }
    }
    return rc;
}

int ckpt_megatron_add_extra_states(ckpt_megatron *m, int transformer_engine)
{
    const char *const *keys = transformer_engine ? te_extra : local_extra;
    size_t n = transformer_engine ? sizeof te_extra / sizeof *te_extra : sizeof local_extra / sizeof *local_extra;
    char *moe = calloc((size_t)m->info.num_layers + 1, 1);
    char name[256];
    int64_t layer;
    size_t i;
    int rc = moe ? 0 : ckpt_error_oom();

    if (m->set) {
        free(moe);
        return ckpt_error_set(CKPT_EINVALID, "_extra_state keys are added only to a model made by ckpt_megatron_new");
    }
    /* per layer: 1 a MoE layer, 2 multi-latent attention (no linear_qkv) */
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        int64_t l = m->entries[i].layout.layer;
        if (l < 0 || l >= m->info.num_layers)
            continue;
        if (m->entries[i].layout.expert)
            moe[l] |= 1;
        if (strstr(m->entries[i].name, ".self_attention.linear_kv_down_proj."))
            moe[l] |= 2;
    }
    for (layer = 0; layer < m->info.num_layers && rc == 0; layer++)
        for (i = 0; i < n && rc == 0; i++) {
            if (((moe[layer] & 1) && strncmp(keys[i], "mlp.linear_fc", 13) == 0) ||
                ((moe[layer] & 2) && strcmp(keys[i], "self_attention.linear_qkv._extra_state") == 0))
                continue;
            snprintf(name, sizeof name, "decoder.layers.%lld.%s", (long long)layer, keys[i]);
            rc = ckpt_megatron__add_extra(m, name, transformer_engine, -1);
        }
    free(moe);
    if (rc == 0)
        rc = add_mtp_extras(m, keys, n, transformer_engine);
    if (rc == 0)
        rc = add_expert_extras(m, transformer_engine);
    if (rc == 0 && !transformer_engine)
        rc = ckpt_megatron__add_extra(m, "output_layer._extra_state", 0, -1);
    return rc < 0 ? rc : ckpt_megatron__sort(m);
}
