/* Megatron-LM torch_dist checkpoints as a logical model.
 *
 * megatron-core's dist_checkpointing saves every tensor at its global shape (the torch_dcp
 * format stitches the chunks), with the layers of the decoder stacked on a leading axis
 * under one key ("decoder.layers.mlp.linear_fc1.weight" is [num_layers, 2 * ffn, hidden])
 * and the norms of the local layer spec under Transformer Engine's names
 * (TransformerLayer's sharded_state_dict_keys_map: input_layernorm. ->
 * self_attention.linear_qkv.layer_norm_). The model here is that of a legacy TP 1, PP 1
 * checkpoint: each stacked tensor cut into its layers (views, nothing read), renamed back
 * for local layers; args, iteration and checkpoint_version come from common.pt, or from the
 * common_state object where megatron-core 0.19 keeps them instead. A model whose layers differ
 * (moe_layer_freq a list: dense and MoE layers) has its layers keyed one by one instead,
 * "decoder.layers.<global>.<module key>", as do multi-token prediction layers
 * ("mtp.layers.<i>."); the local spec's MLA layers keep their norms' own names.
 *
 * Optimizer state is read into each parameter's moment[] by megatron_dist_optim.c. Facts:
 * megatron/core/transformer/{transformer_block.py, transformer_layer.py} sharded_state_dict,
 * megatron/core/dist_checkpointing/strategies/torch.py. */
#include "megatron_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define OPTIMIZER_PREFIX "optimizer."

static const struct {
    const char *dist, *local;
} norm_names[] = {
    { "self_attention.linear_qkv.layer_norm_weight", "input_layernorm.weight" },
    { "self_attention.linear_qkv.layer_norm_bias", "input_layernorm.bias" },
    { "mlp.linear_fc1.layer_norm_weight", "pre_mlp_layernorm.weight" },
    { "mlp.linear_fc1.layer_norm_bias", "pre_mlp_layernorm.bias" },
};

const char *ckpt_megatron__norm_key(const char *key, int to_dist)
{
    size_t i;

    for (i = 0; i < sizeof norm_names / sizeof norm_names[0]; i++)
        if (strcmp(key, to_dist ? norm_names[i].local : norm_names[i].dist) == 0)
            return to_dist ? norm_names[i].dist : norm_names[i].local;
    return key;
}

int ckpt_megatron__dist_per_layer(const ckpt_value *args)
{
    static const char *const freqs[] = { "moe_layer_freq", "linear_attention_freq" };
    size_t i;

    for (i = 0; i < sizeof freqs / sizeof freqs[0]; i++) {
        const ckpt_value *f = ckpt_megatron_arg(args, freqs[i]);
        if (f && (f->kind == CKPT_VAL_LIST || f->kind == CKPT_VAL_TUPLE ||
                  (f->kind == CKPT_VAL_INT && f->u.integer > 1)))
            return 1;
    }
    return 0;
}

int ckpt_megatron__dist_renames_norms(const ckpt_value *args)
{
    const ckpt_value *impl = ckpt_megatron_arg(args, "transformer_impl");
    const ckpt_value *mla = ckpt_megatron_arg(args, "multi_latent_attention");

    return impl && ckpt_value_is_str(impl, "local") && !(mla && mla->kind == CKPT_VAL_BOOL && mla->u.boolean);
}

/* A key within a decoder layer (or an MTP layer's transformer_layer) appended to out: an
 * expert's module key under SequentialMLP's item, a local norm under TE's name. */
static int layer_part(const mg_entry *e, const char *rest, int rename, ckpt_buf *out, int64_t *expert)
{
    static const char local[] = "mlp.experts.local_experts.";
    const char *p;

    if (e->expert >= 0 && strncmp(rest, local, sizeof local - 1) == 0 && (p = strchr(rest + sizeof local - 1, '.'))) {
        *expert = e->expert;
        return ckpt_buf_printf(out, CKPT_MEGATRON_DIST_EXPERTS "%s", p + 1) < 0 ? CKPT_ENOMEM : 0;
    }
    return ckpt_buf_puts(out, rename ? ckpt_megatron__norm_key(rest, 1) : rest) < 0 ? CKPT_ENOMEM : 0;
}

int ckpt_megatron__dist_key(const mg_entry *e, int rename, int per_layer, ckpt_buf *out, int64_t *expert, int *stacked)
{
    static const char inner[] = "transformer_layer.";
    size_t skip = strlen(CKPT_MEGATRON_LAYERS);
    const char *rest;
    int64_t mtp;

    ckpt_buf_clear(out);
    *expert = -1;
    *stacked = 0;
    /* MultiTokenPredictionBlock.sharded_state_dict keys each layer by its index, no layer axis */
    if ((mtp = ckpt_megatron__mtp_layer(e->name, &rest)) >= 0 && strncmp(rest, inner, sizeof inner - 1) == 0)
        return ckpt_buf_printf(out, "mtp.layers.%lld.%s", (long long)mtp, inner) < 0
                   ? CKPT_ENOMEM
                   : layer_part(e, rest + sizeof inner - 1, rename, out, expert);
    if (mtp >= 0 || e->layout.layer < 0)
        return ckpt_buf_puts(out, e->name) < 0 ? CKPT_ENOMEM : 0;
    if (strncmp(e->name, CKPT_MEGATRON_LAYERS, skip) != 0 || !(rest = strchr(e->name + skip, '.')))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: layer tensors outside decoder.layers are not written as torch_dist yet", e->name);
    *stacked = !per_layer;
    if ((per_layer ? ckpt_buf_printf(out, CKPT_MEGATRON_LAYERS "%lld.", (long long)e->layout.layer)
                   : ckpt_buf_puts(out, CKPT_MEGATRON_LAYERS)) < 0)
        return CKPT_ENOMEM;
    return layer_part(e, rest + 1, rename, out, expert);
}

/* A tensor under its legacy name: kept, or left out where the caller says so (the options'
 * leave_out), which is also the way past a name no layout entry takes. */
int ckpt_megatron__dist_add_named(ckpt_megatron *m, const char *name, const ckpt_node *full)
{
    ckpt_tensor_layout layout;
    int left = m->leave_out ? m->leave_out(m->leave_out_payload, name) : 0;
    int rc;

    if (left != 0) {
        m->left_out_params += left > 0 && !ckpt_megatron__is_extra_state(name);
        return left < 0 ? left : 0;
    }
    if ((rc = ckpt_parallel_classify(m->spec, m->params, name, ckpt_node_ndim(full), &layout)) < 0) {
        char why[512];

        if (!m->leave_out) {
            ckpt_error_prefix("%s", m->dist);
            return rc;
        }
        snprintf(why, sizeof why, "%s", ckpt_error_last()->message);
        return ckpt_error_setc(rc, CKPT_ERRCLASS_LAYOUT, "%s: %s; leave it out on purpose with --drop PATTERN",
                               m->dist, why);
    }
    return ckpt_megatron__add_full(m, name, full);
}

int ckpt_megatron__stacked_view(ckpt_megatron *m, const ckpt_tensor *t, int n, const int64_t *index, const char *name,
                                const ckpt_tensor **out)
{
    ckpt_tensor *v = ckpt_arena_alloc(m->arena, sizeof *v);
    int d;

    if (!v)
        return CKPT_ENOMEM;
    *v = *t;
    v->name = ckpt_arena_strndup(m->arena, name, strlen(name));
    v->ndim = t->ndim - n;
    for (d = 0; d < v->ndim; d++) {
        v->shape[d] = t->shape[d + n];
        v->stride[d] = t->stride[d + n];
    }
    for (d = 0; d < n; d++)
        v->offset += index[d] * t->stride[d];
    *out = v;
    return v->name ? 0 : CKPT_ENOMEM;
}

int ckpt_megatron__layer_of(ckpt_megatron *m, const ckpt_tensor *t, int64_t l, const char *name,
                            const ckpt_node **out)
{
    const ckpt_tensor *v;
    int rc = ckpt_megatron__stacked_view(m, t, 1, &l, name, &v);

    return rc < 0 ? rc : ckpt_node_tensor(m->g, v, out);
}

/* Each layer is a view of the stacked tensor, named as the legacy checkpoint names it. */
static int add_layers(ckpt_megatron *m, const ckpt_tensor *t, const char *rest, int rename)
{
    const ckpt_node *layer;
    ckpt_buf name = CKPT_BUF_INIT;
    int64_t l;
    int rc = 0;

    if (t->ndim < 1 || t->shape[0] != m->info.num_layers)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s' has %lld layers on its first axis, args.num_layers is %lld", m->dist, t->name,
                               t->ndim ? (long long)t->shape[0] : 0ll, (long long)m->info.num_layers);
    for (l = 0; l < t->shape[0] && rc == 0; l++) {
        ckpt_buf_clear(&name);
        if ((rc = ckpt_buf_printf(&name, CKPT_MEGATRON_LAYERS "%lld.%s", (long long)l,
                                  rename ? ckpt_megatron__norm_key(rest, 0) : rest)) < 0 ||
            (rc = ckpt_megatron__layer_of(m, t, l, (const char *)name.data, &layer)) < 0)
            break;
        rc = ckpt_megatron__dist_add_named(m, (const char *)name.data, layer);
    }
    ckpt_buf_dispose(&name);
    return rc;
}

/* A tensor of one layer: "decoder.layers.<global>.<key>" (megatron-core keys the layers of a
 * model whose layers differ, dense and MoE, each on its own: transformer_block.py
 * sharded_state_dict, non_homogeneous_layers) or "mtp.layers.<i>.transformer_layer.<key>";
 * its experts one item [num_experts, ...]. 1: added; 0: not such a tensor. */
static int add_unstacked(ckpt_megatron *m, const ckpt_tensor *t, int rename)
{
    static const char inner[] = "transformer_layer.";
    size_t skip = strlen(CKPT_MEGATRON_LAYERS), dlen = strlen(CKPT_MEGATRON_DIST_EXPERTS);
    const char *rest = NULL;
    ckpt_buf owner = CKPT_BUF_INIT, name = CKPT_BUF_INIT;
    const ckpt_node *full;
    char *end;
    int rc;

    if (strncmp(t->name, CKPT_MEGATRON_LAYERS, skip) == 0 && t->name[skip] >= '0' && t->name[skip] <= '9') {
        (void)strtoll(t->name + skip, &end, 10);
        rest = *end == '.' ? end + 1 : NULL;
    } else if (ckpt_megatron__mtp_layer(t->name, &rest) >= 0)
        rest = strncmp(rest, inner, sizeof inner - 1) == 0 ? rest + sizeof inner - 1 : NULL;
    if (!rest)
        return 0;
    if (ckpt_buf_printf(&owner, "%.*s", (int)(rest - t->name), t->name) < 0)
        rc = CKPT_ENOMEM;
    else if (strncmp(rest, CKPT_MEGATRON_DIST_EXPERTS, dlen) == 0)
        rc = ckpt_megatron__dist_add_experts(m, t, (const char *)owner.data, rest + dlen);
    else if (ckpt_buf_printf(&name, "%s%s", (const char *)owner.data,
                             rename ? ckpt_megatron__norm_key(rest, 0) : rest) < 0)
        rc = CKPT_ENOMEM;
    else if ((rc = ckpt_node_tensor(m->g, t, &full)) == 0)
        rc = ckpt_megatron__dist_add_named(m, (const char *)name.data, full);
    ckpt_buf_dispose(&owner);
    ckpt_buf_dispose(&name);
    return rc < 0 ? rc : 1;
}

static int add_tensors(ckpt_megatron *m, const ckpt_ckpt *ck, int rename)
{
    size_t i;
    int rc = 0;

    for (i = 0; i < ckpt_tensor_count(ck) && rc == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(ck, i);
        size_t skip = strlen(CKPT_MEGATRON_LAYERS);
        const ckpt_node *full;

        if (strchr(t->name, '/'))
            continue; /* common.pt's own tensors (optimizer/state/common_step) */
        /* a MoE model's chained optimizer prefixes its items with "chained_<i>." */
        if (strncmp(t->name, OPTIMIZER_PREFIX, strlen(OPTIMIZER_PREFIX)) == 0 ||
            (strncmp(t->name, "chained_", 8) == 0 && strstr(t->name, "." OPTIMIZER_PREFIX))) {
            m->info.has_optimizer = 1;
            continue;
        }
        if (ckpt_megatron__dist_is_expert(t->name)) {
            rc = ckpt_megatron__dist_add_experts(m, t, NULL,
                                                 t->name + strlen(CKPT_MEGATRON_LAYERS CKPT_MEGATRON_DIST_EXPERTS));
            continue;
        }
        if ((rc = add_unstacked(m, t, rename)) != 0) {
            rc = rc > 0 ? 0 : rc;
            continue;
        }
        if (strstr(t->name, ".experts."))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                   "%s: '%s': mixture-of-experts tensors other than SequentialMLP's (the local "
                                   "spec's experts) are not read from torch_dist checkpoints yet",
                                   m->dist, t->name);
        if (strncmp(t->name, CKPT_MEGATRON_LAYERS, skip) == 0) {
            rc = add_layers(m, t, t->name + skip, rename);
            continue;
        }
        if ((rc = ckpt_node_tensor(m->g, t, &full)) == 0)
            rc = ckpt_megatron__dist_add_named(m, t->name, full);
    }
    return rc;
}

static int has_common(const char *dir)
{
    char path[4096];
    struct stat st;

    return (size_t)snprintf(path, sizeof path, "%s/common.pt", dir) < sizeof path && stat(path, &st) == 0 &&
           S_ISREG(st.st_mode);
}

/* The files hold global shapes (info TP/PP/VPP 1); the run's layout is in its args. */
static int run_layout(ckpt_megatron *m)
{
    static const char *const names[3] = { "tensor_model_parallel_size", "pipeline_model_parallel_size",
                                          "virtual_pipeline_model_parallel_size" };
    int *to[3] = { &m->info.run_tp, &m->info.run_pp, &m->info.run_vpp };
    int i;

    for (i = 0; i < 3; i++) {
        int64_t v = ckpt_megatron__arg_int(m->args, names[i], 1); /* VPP: None without virtual stages */
        if (v < 1 || v > 4096)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: args.%s %lld is not a parallel size",
                                   m->dist, names[i], (long long)v);
        *to[i] = (int)v;
    }
    return 0;
}

int ckpt_megatron__open_dist(ckpt_megatron *m, ckpt_set *set, const ckpt_megatron_options *opts)
{
    const ckpt_ckpt *ck;
    const ckpt_value *root, *args, *v, *impl;
    int64_t iteration = -1;
    int rc;

    if ((rc = ckpt_set_member_open(set, 0, &ck)) < 0)
        return rc;
    m->dist = ckpt_path(ck);
    m->set = NULL; /* a model of global tensors, as if built tensor by tensor */
    /* the model's arena, made early: the common state is unpickled into it */
    if ((rc = ckpt_arena_new(&m->arena)) < 0 || (rc = ckpt_megatron__dist_common(m->dist, m->arena, ckpt_root(ck), &root)) < 0)
        return rc;
    m->dist_root = root;
    args = root ? ckpt_value_dict_get(root, "args") : NULL;
    if (!args && !has_common(m->dist) && !(root && ckpt_value_dict_get(root, CKPT_MEGATRON_COMMON_STATE)))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                               "%s: no common.pt and no '" CKPT_MEGATRON_COMMON_STATE "' item, where megatron-core "
                               "keeps args (incomplete checkpoint?)",
                               m->dist);
    if (!ckpt_megatron__namespace_dict(args))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: no args Namespace in %s (not written by "
                               "Megatron-LM?)", m->dist, has_common(m->dist) ? "common.pt" : "'" CKPT_MEGATRON_COMMON_STATE "'");
    if ((v = ckpt_value_dict_get(root, "iteration")) && v->kind == CKPT_VAL_INT)
        iteration = v->u.integer;
    if ((rc = ckpt_megatron__init_built(m, args, iteration, opts)) < 0 || (rc = ckpt_megatron__dist_moe_setup(m)) < 0 ||
        (rc = run_layout(m)) < 0)
        return rc;
    /* carried to a legacy target like the iteration (the template says 0) */
    if ((v = ckpt_value_dict_get(root, "num_floating_point_operations_so_far")) && v->kind == CKPT_VAL_FLOAT &&
        ckpt_value_dict_set(m->arena, (ckpt_value *)m->ranks[0].root,
                            ckpt_value_new_str(m->arena, "num_floating_point_operations_so_far", 36),
                            (ckpt_value *)v) < 0)
        return CKPT_ENOMEM;
    m->release = ckpt_set_info_of(set)->release;
    if ((v = ckpt_value_dict_get(root, "checkpoint_version")) && v->kind == CKPT_VAL_FLOAT)
        m->info.checkpoint_version = v->u.real;
    impl = ckpt_megatron_arg(args, "transformer_impl");
    if ((rc = add_tensors(m, ck, ckpt_megatron__dist_renames_norms(args))) < 0 ||
        (rc = ckpt_megatron__check_shapes(m)) < 0 || (rc = ckpt_megatron__dist_extra_states(m, root)) < 0)
        return rc;
    /* a form not read, or state that does not fit, fails only what needs it: a model-only
       target reads none of it */
    if ((rc = ckpt_megatron__read_dist_optim(m, ck, root, ckpt_megatron__dist_renames_norms(args))) < 0 &&
        (rc = ckpt_megatron__dist_optim_failed(m, rc)) < 0)
        return rc;
    return ckpt_megatron_add_extra_states(m, !(impl && ckpt_value_is_str(impl, "local")));
}
