/* A Megatron model written as a --ckpt-format torch_dist checkpoint (megatron-core's
 * dist_checkpointing layout), which Megatron loads at any TP/PP:
 *
 *   <out>/latest_checkpointed_iteration.txt
 *   <out>/iter_NNNNNNN/.metadata, __R_0.distcp, __R_1.distcp, common.pt, metadata.json
 *
 * Tensors at global shapes, the decoder's layers stacked on a leading axis under one key (each
 * under its own, "decoder.layers.<global>.", where moe_layer_freq makes them differ; likewise
 * "mtp.layers.<i>." on the last stage), local-spec norms under TE's names
 * (TransformerLayer's sharded_state_dict_keys_map, which MLA's local spec has not); each
 * layer's part of a rank one chunk in the data file of global rank tp + TP * pp (SwiGLU's
 * gate and up halves separate chunks; replicated tensors written once, by TP rank 0).
 * `_extra_state` values are ShardedObjects: `<key>/shard_<layer>_<layers>`, each
 * torch.save([value]). common.pt holds args (rewritten for the layout), checkpoint_version,
 * iteration, num_floating_point_operations_so_far and content_metadata; the optimizer state
 * (optimizer.state.* chunked like its parameter, or dp_reshardable buckets) and common.pt's
 * optimizer entries come from megatron_dist_optim*.c. Not written: rng states (load with
 * --no-load-rng). Facts:
 * megatron/core/dist_checkpointing/strategies/torch.py (_mcore_to_torch_sharded_object),
 * megatron/core/transformer/utils.py (_get_extra_state_offsets). */
#include "optimizer/megatron_dist_optim.h"

#include <ckpt/dcp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPTModel.sharded_state_dict leaves the output layer's _extra_state out (megatron-core 0.16.1
 * gpt_model.py: older checkpoints have only its weight); a load expecting it fails strict. */
#define OUTPUT_EXTRA_STATE "output_layer._extra_state"

#define METADATA_JSON \
    "{\"sharded_backend\": \"torch_dist\", \"sharded_backend_version\": 1, \"common_backend\": \"torch\", " \
    "\"common_backend_version\": 1}"

typedef struct dist_ctx {
    ckpt_megatron *m;
    const ckpt_megatron_target *t;
    ckpt_plan *plan;
    ckpt_dcp_out *d;
    int rename;            /* local layer spec without MLA: norms renamed to TE's */
    int per_layer;         /* layers keyed one by one (ckpt_megatron__dist_per_layer) */
    int stacked;           /* the entry's item has the layer axis in front */
    int form;              /* the optimizer state's (mg_dist_form) */
    int64_t padded_vocab;
    mg_split split;        /* the target's layers per pipeline stage */
    int64_t expert;        /* the entry's global expert index (a MoE item [(layers,) experts, ...]); -1 */
    ckpt_buf key, bytes;
} dist_ctx;

/* The pipeline stage that holds an entry. */
static int stage_of(const dist_ctx *c, const mg_entry *e)
{
    switch (e->layout.stage) {
    case CKPT_STAGE_LAST:
        return c->t->pp - 1;
    case CKPT_STAGE_LAYER:
        return ckpt_megatron__split_stage_of(&c->split, e->layout.layer);
    default:
        return 0;
    }
}

/* One chunk: for a stacked layer, with the layer axis put in front (and an expert's, the
 * expert axis after it). */
static int chunk(dist_ctx *c, const mg_entry *e, const ckpt_node *part, int64_t axis_off, int axis, int rank)
{
    const int64_t *full = ckpt_node_shape(e->full), *ps = ckpt_node_shape(part);
    int64_t shape[CKPT_MAX_DIMS], offsets[CKPT_MAX_DIMS], pshape[CKPT_MAX_DIMS];
    int nd = ckpt_node_ndim(e->full), lead = c->stacked + (c->expert >= 0), a, rc;
    const ckpt_node *node = part;

    if (nd + lead > CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: too many dimensions", e->name);
    for (a = 0; a < nd; a++) {
        shape[a + lead] = full[a];
        offsets[a + lead] = a == axis ? axis_off : 0;
        pshape[a + lead] = ps[a];
    }
    if (e->layout.tp == CKPT_TP_VOCAB)
        shape[lead] = c->padded_vocab;
    if (lead) {
        if (c->stacked) {
            shape[0] = c->m->info.num_layers;
            offsets[0] = e->layout.layer;
            pshape[0] = 1;
        }
        if (c->expert >= 0) {
            shape[c->stacked] = ckpt_megatron__num_experts(c->m->args);
            offsets[c->stacked] = c->expert;
            pshape[c->stacked] = 1;
        }
        if ((rc = ckpt_node_reshape(c->m->g, part, nd + lead, pshape, &node)) < 0)
            return rc;
    }
    return ckpt_dcp_out_chunk(c->d, (const char *)c->key.data, nd + lead, shape, offsets, node, rank);
}

/* The chunks of `full` (the entry's tensor or a moment of it) under c->key. */
static int add_param(dist_ctx *c, const mg_entry *e, const ckpt_node *full)
{
    const ckpt_node **parts = calloc((size_t)c->t->tp, sizeof *parts);
    int stage = stage_of(c, e), tp, rc;

    if (!parts)
        return ckpt_error_oom();
    rc = ckpt_megatron__split(c->m, c->t, c->padded_vocab, e, full, parts);
    for (tp = 0; tp < c->t->tp && rc == 0; tp++) {
        int rank = tp + c->t->tp * stage, axis = e->layout.axis;
        const ckpt_node *part = parts[tp], *gate, *up;
        int64_t rows = ckpt_node_shape(part)[axis], half = rows / 2;

        switch (e->layout.tp) {
        case CKPT_TP_REPLICATED:
            if (tp == 0)
                rc = chunk(c, e, part, 0, -1, rank);
            break;
        case CKPT_TP_SWIGLU:
            /* [gate_r; up_r] on the rank; [gate; up] of the whole model in the checkpoint */
            if ((rc = ckpt_node_slice(c->m->g, part, axis, 0, half, &gate)) == 0 &&
                (rc = ckpt_node_slice(c->m->g, part, axis, half, half, &up)) == 0 &&
                (rc = chunk(c, e, gate, tp * half, axis, rank)) == 0)
                rc = chunk(c, e, up, ckpt_node_shape(e->full)[axis] / 2 + tp * half, axis, rank);
            break;
        default:
            rc = chunk(c, e, part, tp * rows, axis, rank);
            break;
        }
    }
    free(parts);
    if (rc < 0)
        ckpt_error_prefix("%s", e->name);
    return rc;
}

/* The optimizer state of a parameter: "optimizer.state.<moment>.<key>", chunked like it. */
static int add_moments(dist_ctx *c, const mg_entry *e)
{
    ckpt_buf key = CKPT_BUF_INIT, tmp;
    int k, rc = 0;

    for (k = 0; k < MG_N_MOMENTS && rc == 0 && (c->form == MG_DIST_PLAIN || c->form == MG_DIST_FULLY); k++) {
        const char *name = ckpt_megatron__dist_moment_name(c->form, e, k);
        if (!name)
            continue;
        ckpt_buf_clear(&key);
        if (ckpt_buf_printf(&key, "optimizer.state.%s.%.*s", name, (int)c->key.len, (const char *)c->key.data) < 0) {
            rc = CKPT_ENOMEM;
            break;
        }
        tmp = key;
        key = c->key;
        c->key = tmp;
        rc = add_param(c, e, e->moment[k]);
        tmp = key;
        key = c->key;
        c->key = tmp;
    }
    ckpt_buf_dispose(&key);
    return rc;
}

/* `_extra_state`: a ShardedObject per layer (or one), torch.save([value]): None for the local
 * spec's layers, a uint8 tensor for Transformer Engine >= 2.0's (empty without FP8 state),
 * saved in the object's archive as torch.save saves a tensor (storage "0"). */
static int add_extra_state(dist_ctx *c, const mg_entry *e)
{
    ckpt_arena *a = ckpt_plan_arena(c->plan);
    ckpt_value *list = ckpt_value_new(a, CKPT_VAL_LIST), *v;
    const ckpt_node *x = e->full;
    int64_t zero = 0;
    int rc;

    if (c->t->extra_state == CKPT_MEGATRON_EXTRA_EMPTY &&
        (rc = ckpt_node_zeros(c->m->g, CKPT_DTYPE_U8, 1, &zero, &x)) < 0)
        return rc;
    /* TEGroupedLinear.sharded_state_dict splits FP8 state per GEMM (_split_extra_state),
     * which the copies of the module's state its experts hold here are not */
    if (x && c->m->te_grouped && c->expert >= 0 && ckpt_node_numel(x) > 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: Transformer Engine FP8 state of a TEGroupedMLP linear is not split per expert "
                               "for torch_dist; --extra-state empty (no FP8 state) or drop writes the model",
                               e->name);
    v = x ? ckpt_value_new_tensor(a, 0) : e->value ? (ckpt_value *)e->value : ckpt_value_new(a, CKPT_VAL_NONE);
    if (!list || !v || ckpt_value_append(a, list, v) < 0)
        return CKPT_ENOMEM;
    ckpt_buf_clear(&c->bytes);
    if ((rc = ckpt_dcp_saved_value_tensors(list, x ? &x : NULL, x ? 1 : 0, &c->bytes)) < 0) {
        ckpt_error_prefix("%s: _extra_state", e->name);
        return rc;
    }
    if (c->expert >= 0 && c->stacked)
        rc = ckpt_buf_printf(&c->key, "/shard_%lld.%lld_%lld.%lld", (long long)e->layout.layer, (long long)c->expert,
                             (long long)c->m->info.num_layers, (long long)ckpt_megatron__num_experts(c->m->args));
    else if (c->expert >= 0)
        rc = ckpt_buf_printf(&c->key, "/shard_%lld_%lld", (long long)c->expert,
                             (long long)ckpt_megatron__num_experts(c->m->args));
    else if (c->stacked)
        rc = ckpt_buf_printf(&c->key, "/shard_%lld_%lld", (long long)e->layout.layer, (long long)c->m->info.num_layers);
    else
        rc = ckpt_buf_puts(&c->key, "/shard_0_1");
    if (rc < 0)
        return CKPT_ENOMEM;
    return ckpt_dcp_out_bytes(c->d, (const char *)c->key.data, c->bytes.data, c->bytes.len,
                              c->t->tp * stage_of(c, e));
}

static int check(const ckpt_megatron *m, const ckpt_megatron_target *t)
{
    const ckpt_value *untie = ckpt_megatron_arg(m->args, "untie_embeddings_and_output_weights");
    const char *src = m->set ? ckpt_set_info_of(m->set)->root : m->dist ? m->dist : "the model";
    int rc = ckpt_megatron__check_sizes(m, t);

    if (rc < 0)
        return rc;
    if (untie && untie->kind == CKPT_VAL_BOOL && !untie->u.boolean)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: tied embeddings (no --untie-embeddings-and-output-weights) are not written in "
                               "the torch_dist format yet",
                               src);
    return 0;
}

static int add_common(dist_ctx *c, const char *dir)
{
    ckpt_arena *a = ckpt_plan_arena(c->plan);
    ckpt_value *root = ckpt_value_new(a, CKPT_VAL_DICT), *args = NULL;
    const ckpt_value *flops, *src_root;
    const ckpt_ckpt *src;
    ckpt_buf rel = CKPT_BUF_INIT;
    size_t file;
    int rc;

    if (!root || ckpt_buf_printf(&rel, "%s/common.pt", dir) < 0) {
        ckpt_buf_dispose(&rel);
        return CKPT_ENOMEM;
    }
    rc = ckpt_plan_add_file(c->plan, (const char *)rel.data, "torch", &file);
    ckpt_buf_dispose(&rel);
    if (rc < 0 || (rc = ckpt_megatron__target_args(c->m, c->t, c->plan, file, &args)) < 0)
        return rc;
    if (ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "args", 4), args) < 0 ||
        ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "checkpoint_version", 18), ckpt_value_new_float(a, 3.0)) < 0 ||
        ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "iteration", 9),
                            ckpt_value_new_int(a, c->m->info.iteration)) < 0)
        return CKPT_ENOMEM;
    if ((rc = ckpt_megatron__dist_optim_common(c->m, c->form, ckpt_megatron__target_ep(c->m, c->t), c->plan, file,
                                                root)) < 0)
        return rc;
    ckpt_megatron__dist_source(c->m, &src, &src_root);
    flops = src_root ? ckpt_value_dict_get(src_root, "num_floating_point_operations_so_far") : NULL;
    if (ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "num_floating_point_operations_so_far", 36),
                            flops && flops->kind == CKPT_VAL_FLOAT ? ckpt_value_new_float(a, flops->u.real)
                                                                   : ckpt_value_new_int(a, 0)) < 0)
        return CKPT_ENOMEM;
    if ((rc = ckpt_megatron__dist_content_metadata(c->plan, c->form, root)) < 0)
        return rc;
    return ckpt_plan_set_root(c->plan, file, root);
}

int ckpt_megatron_plan_dist(ckpt_megatron *m, const ckpt_megatron_target *t, ckpt_plan *plan)
{
    char dir[32], tracker[32], json_rel[64];
    dist_ctx c;
    size_t i;
    int rc, form;

    if (!t || t->version != CKPT_MEGATRON_TARGET_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_megatron_target version %u, expected %u", t ? t->version : 0,
                              CKPT_MEGATRON_TARGET_VERSION);
    /* the model's items do not depend on the EP (each expert one chunk at its global index,
     * megatron-core 0.16.1 SequentialMLP.sharded_state_dict); the optimizer's do (the expert
     * buffers of the EP ranks, a chained optimizer or none at EP 1) */
    if (t->etp > 0 && t->etp != t->tp)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: torch_dist with an expert TP (%d) other than the TP (%d) is not written yet",
                               m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model", t->etp,
                               t->tp);
    if ((rc = check(m, t)) < 0 || (rc = ckpt_megatron__dist_extra_refused(m, t)) < 0 ||
        (!m->set && (rc = ckpt_megatron__sort(m)) < 0) ||
        (rc = ckpt_megatron__dist_target_form(m, t, &form)) < 0)
        return rc;
    /* fully_reshardable keeps each parameter's state whole, in items that do not depend on the
     * EP either (common.pt's optimizer follows it: megatron_dist_optim_write.c) */
    if (ckpt_megatron__num_experts(m->args) > 0 && ckpt_megatron__target_ep(m, t) != m->info.ep &&
        form != MG_DIST_NONE && form != MG_DIST_FULLY)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: torch_dist %s optimizer state at EP %d (the source's is %d) is not written yet; "
                               "--optim-format fully_reshardable writes it, --no-optimizer the model, the legacy "
                               "layout (--to torch) both",
                               m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model",
                               form == MG_DIST_DP ? "dp_reshardable" : "non-distributed",
                               ckpt_megatron__target_ep(m, t), m->info.ep);
    if (form != MG_DIST_NONE && (ckpt_megatron__dist_per_layer(m->args) || ckpt_megatron__mtp_layers(m) > 0))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                               "%s: torch_dist optimizer state of a model with %s is not written yet; "
                               "--no-optimizer writes the model, the legacy layout (--to torch) both",
                               m->dist ? m->dist : m->set ? ckpt_set_info_of(m->set)->root : "the model",
                               ckpt_megatron__mtp_layers(m) > 0
                                   ? "multi-token prediction layers"
                                   : "layers keyed one by one (dense and MoE layers, moe_layer_freq)");
    memset(&c, 0, sizeof c);
    c.m = m;
    c.t = t;
    c.plan = plan;
    c.rename = ckpt_megatron__dist_renames_norms(m->args);
    c.per_layer = ckpt_megatron__dist_per_layer(m->args);
    c.form = form;
    c.padded_vocab = ckpt_megatron__target_vocab(m, t);
    if ((rc = ckpt_megatron__split_of_target(m->args, m->info.num_layers, t, &c.split)) < 0)
        return rc;
    if (m->release) {
        snprintf(dir, sizeof dir, "release");
        snprintf(tracker, sizeof tracker, "release");
    } else {
        snprintf(dir, sizeof dir, "iter_%07lld", (long long)m->info.iteration);
        snprintf(tracker, sizeof tracker, "%lld", (long long)m->info.iteration);
    }
    if ((rc = ckpt_dcp_out_new(&c.d, plan, dir)) < 0)
        return rc;
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        const mg_entry *e = &m->entries[i];
        if ((rc = ckpt_megatron__dist_key(e, c.rename, c.per_layer, &c.key, &c.expert, &c.stacked)) < 0)
            break;
        if (e->full && e->param)
            rc = add_param(&c, e, e->full);
        if (e->full && e->param && rc == 0)
            rc = add_moments(&c, e);
        else if (ckpt_megatron__is_extra_state(e->name) && t->extra_state != CKPT_MEGATRON_EXTRA_DROP &&
                 strcmp(e->name, OUTPUT_EXTRA_STATE) != 0)
            rc = add_extra_state(&c, e);
    }
    /* no plan file takes tensors of the param groups: common.pt is not added yet */
    if (rc == 0 && c.form == MG_DIST_DP)
        rc = ckpt_megatron__dist_write_dp(m, t, c.padded_vocab, plan, (size_t)-1, c.d);
    snprintf(json_rel, sizeof json_rel, "%s/metadata.json", dir);
    if (rc == 0 && (rc = ckpt_dcp_out_finish(c.d)) == 0 && (rc = add_common(&c, dir)) == 0 &&
        (rc = ckpt_plan_add_bytes(plan, json_rel, METADATA_JSON, strlen(METADATA_JSON))) == 0)
        rc = ckpt_plan_add_bytes(plan, "latest_checkpointed_iteration.txt", tracker, strlen(tracker));
    ckpt_dcp_out_free(c.d);
    ckpt_buf_dispose(&c.key);
    ckpt_buf_dispose(&c.bytes);
    return rc;
}
