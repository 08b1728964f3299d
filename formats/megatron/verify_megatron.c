/* Megatron-LM legacy checkpoints as models `ckptconv verify` runs: the logical model of the
 * rank files (ckpt/megatron.h), each TP rank's parts as the rank holds them, mapped by
 * verify_megatron_gpt into the canonical scheme, and the config from the checkpoint's args. */
#include <ckpt/sys/registry.h>
#include "../verify_source.h"

#include <ckpt/megatron.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void release_megatron(void *p) { ckpt_megatron_close(p); }

/* A file is Megatron's when its model dict holds decoder layers (a look inside: the layout
 * can only guess from the name). */
static int megatron_file(const char *path)
{
    ckpt_ckpt *c;
    size_t i;
    int found = 0;

    if (ckpt_open(&c, path, NULL) < 0) {
        ckpt_error_clear();
        return 0;
    }
    for (i = 0; i < ckpt_tensor_count(c) && !found; i++) {
        const char *n = ckpt_tensor_at(c, i)->name;
        found = strncmp(n, "model/", 6) == 0 || (strncmp(n, "model", 5) == 0 && strchr(n, '/'));
        found = found && strstr(n, "/decoder.layers.") != NULL;
    }
    ckpt_close(c);
    return found;
}

static int megatron_bid(const char *path, int is_dir)
{
    const ckpt_layout_vtable *l = ckpt_layouts__find("megatron");
    int bid = l ? l->bid(path, is_dir) : -1;

    if (is_dir || bid < 0)
        return bid;
    return megatron_file(path) ? 40 : -1;
}

/* ---- args ---- */

static const ckpt_value *arg(const ckpt_value *args, const char *name)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);
    return v && v->kind != CKPT_VAL_NONE ? v : NULL;
}

static void arg_int(const ckpt_value *args, const char *name, int64_t *dst)
{
    const ckpt_value *v = arg(args, name);
    if (v && v->kind == CKPT_VAL_INT)
        *dst = v->u.integer;
}

static void arg_double(const ckpt_value *args, const char *name, double *dst)
{
    const ckpt_value *v = arg(args, name);
    if (v && v->kind == CKPT_VAL_FLOAT)
        *dst = v->u.real;
    else if (v && v->kind == CKPT_VAL_INT)
        *dst = (double)v->u.integer;
}

static int arg_bool(const ckpt_value *args, const char *name)
{
    const ckpt_value *v = arg(args, name);
    return v && ((v->kind == CKPT_VAL_BOOL && v->u.boolean) || (v->kind == CKPT_VAL_INT && v->u.integer));
}

static const char *arg_str(const ckpt_value *args, const char *name)
{
    const ckpt_value *v = arg(args, name);
    return v && v->kind == CKPT_VAL_STR ? v->u.str.ptr : NULL;
}

/* window_size (W - 1, 0): query t sees keys t - W < j <= t (Transformer Engine's causal window
 * of W - 1 keys before the token); window_attn_skip_freq N: every Nth layer (from 1) attends
 * fully, a list: 1 where a layer uses the window. */
static int window_from_args(ckpt_model_builder *b, const ckpt_value *a)
{
    ckpt_model_config *c = ckpt_model_builder_config(b);
    const ckpt_value *w = arg(a, "window_size"), *skip = arg(a, "window_attn_skip_freq");
    const char *path = ckpt_model_builder_path(b);
    unsigned char *flags;
    size_t i;
    int rc;

    c->window = 0;
    if (!w)
        return 0;
    if ((w->kind != CKPT_VAL_TUPLE && w->kind != CKPT_VAL_LIST) || w->u.seq.n != 2 ||
        w->u.seq.items[0]->kind != CKPT_VAL_INT || w->u.seq.items[1]->kind != CKPT_VAL_INT ||
        w->u.seq.items[0]->u.integer < 0 || w->u.seq.items[0]->u.integer >= INT64_MAX / 2 ||
        w->u.seq.items[1]->u.integer != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: args.window_size is not a causal window (W - 1, 0), the one verify runs", path);
    c->window = w->u.seq.items[0]->u.integer + 1;
    if (!skip)
        return 0;
    if (skip->kind == CKPT_VAL_INT && skip->u.integer >= 1) {
        c->window_full_every = skip->u.integer;
        return 0;
    }
    if ((skip->kind != CKPT_VAL_LIST && skip->kind != CKPT_VAL_TUPLE) || skip->u.seq.n < 1 ||
        skip->u.seq.n > (size_t)1 << 20)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: args.window_attn_skip_freq is neither a positive integer nor a list of 0/1", path);
    if (!(flags = malloc(skip->u.seq.n)))
        return ckpt_error_oom();
    for (i = 0; i < skip->u.seq.n; i++) {
        const ckpt_value *x = skip->u.seq.items[i];
        if (x->kind != CKPT_VAL_INT && x->kind != CKPT_VAL_BOOL) {
            free(flags);
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "%s: args.window_attn_skip_freq[%zu] is not 0 or 1", path, i);
        }
        flags[i] = x->kind == CKPT_VAL_INT ? x->u.integer != 0 : x->u.boolean != 0;
    }
    rc = ckpt_model_builder_layer_window(b, flags, (int64_t)skip->u.seq.n);
    free(flags);
    return rc;
}

/* moe_layer_freq as a 0/1 list, one per layer (1: MoE; dense layers anywhere), its leading
 * zeros also the dense layers before the first MoE layer. */
static int moe_layer_list(ckpt_model_builder *b, const ckpt_value *freq)
{
    ckpt_model_config *c = ckpt_model_builder_config(b);
    const char *path = ckpt_model_builder_path(b);
    unsigned char *flags;
    size_t i;
    int rc;

    if (freq->u.seq.n < 1 || freq->u.seq.n > (size_t)1 << 20)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: args.moe_layer_freq is a list of %zu layers",
                               path, freq->u.seq.n);
    if (!(flags = malloc(freq->u.seq.n)))
        return ckpt_error_oom();
    for (i = 0; i < freq->u.seq.n; i++) {
        const ckpt_value *x = freq->u.seq.items[i];
        if (!(x->kind == CKPT_VAL_INT && (x->u.integer == 0 || x->u.integer == 1)) && x->kind != CKPT_VAL_BOOL) {
            free(flags);
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: args.moe_layer_freq[%zu] is not 0 or 1",
                                   path, i);
        }
        flags[i] = x->kind == CKPT_VAL_INT ? x->u.integer != 0 : x->u.boolean != 0;
    }
    while ((size_t)c->moe_first_dense < freq->u.seq.n && !flags[c->moe_first_dense])
        c->moe_first_dense++;
    rc = ckpt_model_builder_layer_moe(b, flags, (int64_t)freq->u.seq.n);
    free(flags);
    return rc;
}

/* Experts and their routing (megatron/core/transformer/moe/router.py, moe_utils.py
 * topk_routing_with_score_function); what verify does not compute is refused by its arg. */
static int moe_from_args(ckpt_model_builder *b, const ckpt_value *a)
{
    static const char *const refused[][2] = {
        { "moe_expert_capacity_factor", "token dropping by expert capacity" },
        { "moe_shared_expert_gate", "the shared expert's gate" },
        { "moe_input_jitter_eps", "router input jitter" },
        { "moe_apply_probs_on_input", "router weights applied to the experts' input" },
        { "moe_router_force_load_balancing", "random routing" },
        { "moe_latent_size", "latent MoE" },
    };
    ckpt_model_config *c = ckpt_model_builder_config(b);
    const char *path = ckpt_model_builder_path(b), *score = arg_str(a, "moe_router_score_function");
    const char *balance = arg_str(a, "moe_router_load_balancing_type");
    const ckpt_value *freq = arg(a, "moe_layer_freq");
    size_t i;

    c->num_experts = 0;
    arg_int(a, "num_experts", &c->num_experts);
    for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const ckpt_value *v = arg(a, refused[i][0]);
        if (v && (v->kind != CKPT_VAL_BOOL || v->u.boolean))
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: args.%s: %s is not run by verify", path,
                                   refused[i][0], refused[i][1]);
    }
    if (c->num_experts <= 0)
        return 0;
    arg_int(a, "moe_router_topk", &c->moe_top_k);
    arg_int(a, "moe_ffn_hidden_size", &c->moe_ffn_hidden_size);
    arg_double(a, "moe_router_topk_scaling_factor", &c->moe_topk_scale);
    c->moe_shared_ffn_hidden_size = 0;
    arg_int(a, "moe_shared_expert_intermediate_size", &c->moe_shared_ffn_hidden_size);
    /* aux-loss-free routing's bias and group-limited top-k (moe_utils group_limited_topk: a
     * group scores by its best moe_router_topk / moe_router_group_topk) */
    c->moe_expert_bias = arg_bool(a, "moe_router_enable_expert_bias");
    c->moe_n_group = c->moe_topk_group = 1;
    arg_int(a, "moe_router_num_groups", &c->moe_n_group);
    arg_int(a, "moe_router_group_topk", &c->moe_topk_group);
    if (c->moe_topk_group > 0 && c->moe_topk_group < c->moe_n_group)
        c->moe_group_top = c->moe_top_k / c->moe_topk_group;
    c->moe_topk_norm = 1;
    if (balance && strcmp(balance, "sinkhorn") == 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: args.moe_router_load_balancing_type: sinkhorn routing is not run by verify", path);
    if (score && strcmp(score, "softmax") != 0 && strcmp(score, "sigmoid") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: args.moe_router_score_function '%s' is not run by verify", path, score);
    c->moe_score = score && strcmp(score, "sigmoid") == 0 ? CKPT_MOE_SIGMOID
                   : arg_bool(a, "moe_router_pre_softmax") ? CKPT_MOE_SOFTMAX_ALL
                                                           : CKPT_MOE_SOFTMAX_TOPK;
    if (c->moe_score == CKPT_MOE_SIGMOID && arg_bool(a, "moe_router_pre_softmax"))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: args.moe_router_pre_softmax with the sigmoid score is not run by verify", path);
    c->moe_layer_freq = 1;
    c->moe_first_dense = 0;
    if (freq && freq->kind == CKPT_VAL_INT && freq->u.integer >= 1)
        c->moe_layer_freq = freq->u.integer;
    else if (freq && (freq->kind == CKPT_VAL_LIST || freq->kind == CKPT_VAL_TUPLE))
        return moe_layer_list(b, freq);
    else if (freq)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: args.moe_layer_freq is neither a positive integer nor a list", path);
    return 0;
}

/* Multi-latent attention (megatron/core/transformer/multi_latent_attention.py): its sizes, the
 * q and kv norms its qk_layernorm means (not per-head q/k norms), RoPE on the qk_pos_emb part
 * with the even and odd values paired whatever rotary_interleaved says (rope_utils with
 * multi_latent_attention), and YaRN from rope_type. */
static int mla_from_args(ckpt_model_builder *b, const ckpt_value *a)
{
    ckpt_model_config *c = ckpt_model_builder_config(b);
    const char *rope = arg_str(a, "rope_type");
    const ckpt_value *q = arg(a, "q_lora_rank");

    if (!arg_bool(a, "multi_latent_attention"))
        return 0;
    c->q_lora_rank = 0;
    if (q && q->kind == CKPT_VAL_INT)
        c->q_lora_rank = q->u.integer;
    arg_int(a, "kv_lora_rank", &c->kv_lora_rank);
    arg_int(a, "qk_head_dim", &c->qk_nope_head_dim);
    arg_int(a, "qk_pos_emb_head_dim", &c->qk_rope_head_dim);
    arg_int(a, "v_head_dim", &c->v_head_dim);
    if (c->qk_nope_head_dim >= 0 && c->qk_rope_head_dim >= 0)
        c->head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
    c->qk_norm = 0;
    c->rope_interleaved = 1;
    /* the q and kv norms are built with layernorm_epsilon (transformers' take their own 1e-6) */
    c->mla_norm_eps = c->norm_eps;
    if (!arg_bool(a, "qk_layernorm"))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: args.qk_layernorm is not set: MLA without its q and kv norms is not run by verify",
                               ckpt_model_builder_path(b));
    if (rope && strcmp(rope, "rope") != 0 && strcmp(rope, "yarn") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: args.rope_type '%s' is not run by verify",
                               ckpt_model_builder_path(b), rope);
    if (!rope || strcmp(rope, "yarn") != 0)
        return 0;
    arg_double(a, "rotary_scaling_factor", &c->rope_yarn_factor);
    arg_int(a, "original_max_position_embeddings", &c->rope_original_max_positions);
    arg_double(a, "beta_fast", &c->rope_yarn_beta_fast);
    arg_double(a, "beta_slow", &c->rope_yarn_beta_slow);
    arg_double(a, "mscale", &c->rope_yarn_mscale);
    arg_double(a, "mscale_all_dim", &c->rope_yarn_mscale_all_dim);
    return 0;
}

static int config_from_args(ckpt_model_builder *b, const ckpt_megatron *mg)
{
    const ckpt_value *a = ckpt_megatron_args(mg);
    ckpt_model_config *c = ckpt_model_builder_config(b);
    const char *norm, *pos;
    int64_t vocab = ckpt_megatron_info_of(mg)->true_vocab_size;
    int rc;

    if (!a)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: the rank files hold no args",
                               ckpt_model_builder_path(b));
    arg_int(a, "num_layers", &c->num_layers);
    arg_int(a, "hidden_size", &c->hidden_size);
    arg_int(a, "num_attention_heads", &c->num_heads);
    arg_int(a, "kv_channels", &c->head_dim);
    arg_int(a, "ffn_hidden_size", &c->ffn_hidden_size);
    c->num_kv_heads = c->num_heads;
    if (arg_bool(a, "group_query_attention"))
        arg_int(a, "num_query_groups", &c->num_kv_heads);
    if (vocab > 0)
        c->vocab_size = vocab;
    /* megatron-core 0.16 names it layernorm_epsilon, earlier releases norm_epsilon */
    arg_double(a, "norm_epsilon", &c->norm_eps);
    arg_double(a, "layernorm_epsilon", &c->norm_eps);
    norm = arg_str(a, "normalization");
    if (norm && strcmp(norm, "RMSNorm") != 0 && strcmp(norm, "LayerNorm") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: normalization '%s' is not run by verify",
                               ckpt_model_builder_path(b), norm);
    c->norm = norm && strcmp(norm, "RMSNorm") == 0 ? CKPT_NORM_RMS : CKPT_NORM_LAYER;
    c->norm_weight_plus_one = arg_bool(a, "apply_layernorm_1p");
    if (arg_bool(a, "squared_relu") || arg_bool(a, "attention_output_gate"))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: squared ReLU and gated attention output are not run by verify",
                               ckpt_model_builder_path(b));
    if ((rc = moe_from_args(b, a)) < 0)
        return rc;
    c->act = arg_bool(a, "swiglu") ? CKPT_ACT_SWIGLU : arg_bool(a, "openai_gelu") ? CKPT_ACT_GELU_TANH : CKPT_ACT_GELU;
    /* a gated MLP without swiglu gates its gelu (Gemma's GeGLU with the tanh gelu) */
    if (c->act != CKPT_ACT_SWIGLU && arg_bool(a, "gated_linear_unit")) {
        if (c->act != CKPT_ACT_GELU_TANH)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                                   "%s: gated_linear_unit with the erf gelu is not run by verify (openai_gelu: the "
                                   "tanh one is)",
                                   ckpt_model_builder_path(b));
        c->act = CKPT_ACT_GEGLU_TANH;
    }
    pos = arg_str(a, "position_embedding_type");
    if (!pos || strcmp(pos, "learned_absolute") == 0)
        c->position = CKPT_POSITION_LEARNED;
    else if (strcmp(pos, "rope") == 0)
        c->position = CKPT_POSITION_ROPE;
    else if (strcmp(pos, "none") == 0)
        c->position = CKPT_POSITION_NONE;
    else
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: position_embedding_type '%s' is not run by verify", ckpt_model_builder_path(b), pos);
    c->rope_theta = 10000.0;
    arg_double(a, "rotary_base", &c->rope_theta);
    arg_double(a, "rotary_percent", &c->rotary_percent);
    c->rope_interleaved = arg_bool(a, "rotary_interleaved");
    if (arg_bool(a, "use_rope_scaling")) {
        /* megatron.core.models.common.embeddings.rope_utils: Llama 3.1's constants */
        c->rope_scaling_factor = 8.0;
        arg_double(a, "rope_scaling_factor", &c->rope_scaling_factor);
        c->rope_low_freq_factor = 1.0;
        c->rope_high_freq_factor = 4.0;
        c->rope_original_max_positions = 8192;
    }
    c->qk_norm = arg_bool(a, "qk_layernorm");
    if ((rc = mla_from_args(b, a)) < 0)
        return rc;
    c->tied_embeddings = !arg_bool(a, "untie_embeddings_and_output_weights");
    arg_double(a, "softmax_scale", &c->attn_scale);
    if ((rc = window_from_args(b, a)) < 0)
        return rc;
    /* a model converted from Hugging Face is its family's, which adds what args cannot say
     * (Gemma 3's embedding scale) */
    return ckpt_vsrc__family_args(b, ckpt_model_builder_path(b), a, arg_str(a, "hf_model_type"));
}

/* ---- tensors ---- */

typedef struct mg_inputs {
    ckpt_map_input *in;
    size_t n, cap;
} mg_inputs;

static int push(mg_inputs *l, const char *name, const ckpt_node *node)
{
    ckpt_map_input *grown = ckpt_array_grow(l->in, &l->cap, l->n, sizeof *l->in);

    if (!grown)
        return CKPT_ENOMEM;
    l->in = grown;
    l->in[l->n].name = name;
    l->in[l->n].node = node;
    l->in[l->n++].home = 0;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Fewer query groups than ranks: the `share` ranks of a group hold consecutive rows of its
 * [q | k | v] block; megatron-core gathers them, and each rank runs its share of the query
 * heads with the group's one KV head. Rank r gets the whole block here; its query rows are
 * picked after mapping (pick_q_rows). */
static int group_block(ckpt_graph *g, const ckpt_node *const *shards, int r, int share, const ckpt_node **out)
{
    return ckpt_node_concat(g, shards + (r / share) * share, (size_t)share, 0, out);
}

static int pick_q_rows(ckpt_model_builder *b, const ckpt_model_config *c, int tp, int r, const ckpt_map_output *o,
                       const ckpt_node **out)
{
    int64_t per_rank = c->num_heads / tp * c->head_dim, share = tp / c->num_kv_heads;

    return ckpt_node_slice(ckpt_model_builder_graph(b), o->node, 0, (r % share) * per_rank, per_rank, out);
}

static int map_rank(ckpt_model_builder *b, const ckpt_map *map, const ckpt_map_params *p, int tp, int r,
                    int gathered, const mg_inputs *l)
{
    const ckpt_model_config *c = ckpt_model_builder_config(b);
    ckpt_map_result *res = NULL;
    size_t i;
    int rc;

    if ((rc = ckpt_map_apply(map, p, ckpt_model_builder_graph(b), l->in, l->n, NULL, &res)) < 0) {
        ckpt_error_prefix("%s", ckpt_model_builder_path(b));
        return rc;
    }
    for (i = 0; i < ckpt_map_result_count(res) && rc == 0; i++) {
        const ckpt_map_output *o = ckpt_map_result_at(res, i);
        const ckpt_node *node = o->node;
        if (gathered && (ends_with(o->name, ".attn.q.weight") || ends_with(o->name, ".attn.q.bias")))
            rc = pick_q_rows(b, c, tp, r, o, &node);
        if (rc == 0)
            rc = ckpt_model_builder_add(b, r, o->name, node);
    }
    ckpt_map_result_free(res);
    return rc;
}

static int add_tensors(ckpt_model_builder *b, ckpt_megatron *mg, int ranks)
{
    const ckpt_model_config *c = ckpt_model_builder_config(b);
    const ckpt_map *map;
    ckpt_map_params *p;
    mg_inputs *lists = calloc((size_t)ranks + 1, sizeof *lists), *model = NULL;
    int gathered = ranks > 1 && c->num_kv_heads > 0 && c->num_kv_heads % ranks != 0, r, rc;
    size_t i;

    if (!lists)
        return ckpt_error_oom();
    model = &lists[ranks];
    if ((rc = ckpt_vsrc__map(b, "verify_megatron_gpt", &map)) < 0 || (rc = ckpt_vsrc__map_params(b, &p)) < 0)
        goto done;
    if (gathered && (ranks % c->num_kv_heads || c->num_heads % ranks)) {
        rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                             "%s: %lld query groups and %lld heads over %d ranks do not split evenly",
                             ckpt_model_builder_path(b), (long long)c->num_kv_heads, (long long)c->num_heads, ranks);
        goto done;
    }
    for (i = 0; i < ckpt_megatron_tensor_count(mg) && rc == 0; i++) {
        ckpt_tensor_layout lay;
        const ckpt_node *full;
        const ckpt_node *const *shards = ckpt_megatron_tensor_shards(mg, i);
        const char *name = ckpt_megatron_tensor_at(mg, i, &full, &lay);
        if (ends_with(name, "._extra_state"))
            continue;
        if (strncmp(name, "decoder.layers.", 15) != 0 || ranks == 1) {
            rc = push(strncmp(name, "decoder.layers.", 15) ? model : &lists[0], name, full);
            continue;
        }
        for (r = 0; r < ranks && rc == 0; r++) {
            const ckpt_node *node = shards[r];
            if (gathered && strstr(name, ".linear_qkv.") && !strstr(name, "layer_norm"))
                rc = group_block(ckpt_model_builder_graph(b), shards, r, ranks / (int)c->num_kv_heads, &node);
            if (rc == 0)
                rc = push(&lists[r], name, node);
        }
    }
    for (r = 0; r < ranks && rc == 0; r++)
        rc = map_rank(b, map, p, ranks, r, gathered, &lists[r]);
    if (rc == 0 && model->n) {
        vsrc_parts parts;
        memset(&parts, 0, sizeof parts);
        if ((rc = ckpt_vsrc__map_rank(b, 0, map, p, model->in, model->n, &parts)) == 0)
            rc = ckpt_vsrc__add_parts(b, &parts, 1);
    }
done:
    for (r = 0; r <= ranks; r++)
        free(lists[r].in);
    free(lists);
    return rc;
}

static int int_arg(const ckpt_megatron *mg, const char *name, int64_t *out)
{
    const ckpt_value *v = ckpt_megatron_arg(ckpt_megatron_args(mg), name);

    if (!v || v->kind != CKPT_VAL_INT)
        return 0;
    *out = v->u.integer;
    return 1;
}

/* A mixture of experts whose experts are cut over fewer ranks (expert TP) than its TP. */
static int expert_tp_below(const ckpt_megatron *mg, int tp)
{
    int64_t experts = 0, etp = tp;

    return int_arg(mg, "num_experts", &experts) && experts > 0 && int_arg(mg, "expert_tensor_parallel_size", &etp) &&
           etp < tp;
}

static int megatron_open(ckpt_model_builder *b)
{
    const ckpt_model_options *o = ckpt_model_builder_options(b);
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    const ckpt_megatron_info *info;
    ckpt_megatron *mg;
    ckpt_set *set;
    char where[600];
    int ranks, rc;

    so.layout = "megatron";
    so.iteration = o->iteration;
    if ((rc = ckpt_set_open(&set, ckpt_model_builder_path(b), &so)) < 0 || (rc = ckpt_vsrc__keep_set(b, set)) < 0)
        return rc;
    if ((rc = ckpt_megatron_open(&mg, set, ckpt_model_builder_graph(b), NULL)) < 0 ||
        (rc = ckpt_model_builder_keep(b, mg, release_megatron)) < 0)
        return rc;
    info = ckpt_megatron_info_of(mg);
    snprintf(where, sizeof where, "the args of %s", ckpt_set_member_at(set, 0)->path);
    if ((rc = ckpt_model_builder_config_source(b, where)) < 0 || (rc = config_from_args(b, mg)) < 0)
        return rc;
    /* experts cut over fewer ranks than the TP (expert TP) run merged, as their TP ranks do not
     * hold a part each */
    ranks = o->merge_tp || expert_tp_below(mg, info->tp) ? 1 : info->tp;
    where[0] = 0;
    if (info->vpp > 1)
        snprintf(where, sizeof where, " VPP %d", info->vpp);
    if (info->ep > 1)
        snprintf(where + strlen(where), sizeof where - strlen(where), " EP %d", info->ep);
    ckpt_model_builder_kind(b, "Megatron-LM mcore GPT, TP %d PP %d%s (run as %s)", info->tp, info->pp, where,
                            ranks > 1 ? "tensor-parallel ranks" : info->tp > 1 ? "the merged tensors" : "one rank");
    if ((rc = ckpt_model_builder_set_ranks(b, ranks)) < 0)
        return rc;
    return add_tensors(b, mg, ranks);
}

const ckpt_model_source_vtable ckpt_model_source_megatron = {
    .abi_version = CKPT_MODEL_SOURCE_ABI_VERSION,
    .name = "megatron",
    .bid = megatron_bid,
    .open = megatron_open,
};
