/* A Megatron checkpoint set checked against what it says of itself: every rank file's args
 * agree with the first one's; the rank directories are the TP x PP x EP of those args, and
 * each holds the virtual chunks they name; each pipeline stage the layers an even split
 * gives it; and every tensor the args imply is there at the shape they imply. A set with a
 * rank directory gone otherwise reads as a smaller, well-formed model (TP 2 without
 * mp_rank_01 is a TP 1 model of half-width layers), and is written as one. */
#include "megatron_private.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What every rank of one training run records alike. */
static const char *const agreed_args[] = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "expert_model_parallel_size", "num_layers", "hidden_size", "num_attention_heads", "num_query_groups",
    "ffn_hidden_size", "padded_vocab_size",
};

static const char *value_text(const ckpt_value *v, char *buf, size_t cap)
{
    if (!v)
        return "absent";
    if (v->kind == CKPT_VAL_NONE)
        return "None";
    if (v->kind == CKPT_VAL_INT)
        snprintf(buf, cap, "%lld", (long long)v->u.integer);
    else if (v->kind == CKPT_VAL_BOOL)
        snprintf(buf, cap, "%s", v->u.boolean ? "True" : "False");
    else
        snprintf(buf, cap, "not a number");
    return buf;
}

static int same_value(const ckpt_value *a, const ckpt_value *b)
{
    if (!a || !b)
        return a == b;
    if (a->kind != b->kind)
        return 0;
    if (a->kind == CKPT_VAL_INT)
        return a->u.integer == b->u.integer;
    if (a->kind == CKPT_VAL_BOOL)
        return a->u.boolean == b->u.boolean;
    return 1;
}

static int check_rank_args(const ckpt_megatron *m, const mg_rank *r)
{
    const mg_rank *r0 = mg_rank_at(m, 0, 0, 0);
    const ckpt_value *args = ckpt_value_dict_get(r->root, "args");
    char mine[32], first[32];
    size_t i;

    if (!ckpt_megatron__namespace_dict(args))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: args is not a Namespace", ckpt_path(r->ck));
    for (i = 0; i < sizeof agreed_args / sizeof agreed_args[0]; i++) {
        const ckpt_value *v = ckpt_megatron_arg(args, agreed_args[i]), *v0 = ckpt_megatron_arg(m->args, agreed_args[i]);
        if (!same_value(v, v0))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: args.%s is %s, %s has %s",
                                   ckpt_path(r->ck), agreed_args[i], value_text(v, mine, sizeof mine),
                                   ckpt_path(r0->ck), value_text(v0, first, sizeof first));
    }
    return 0;
}

/* The directory of rank (tp, pp, ep), as Megatron names it for the sizes args give. */
static void rank_name(char *buf, size_t cap, long long tp, long long pp, long long ep, int pp_suffix, int ep_suffix)
{
    int n = snprintf(buf, cap, "mp_rank_%02lld", tp);

    if (pp_suffix && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, "_%03lld", pp);
    if (ep_suffix && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "_%03lld", ep);
}

/* args' size of one axis against the ranks found: the first rank directory that is missing
 * (args say more) or extra (args say fewer); not checked where args do not say. */
static int check_axis(const ckpt_megatron *m, const char *field, const char *axis, int have, int which)
{
    const ckpt_megatron_info *in = &m->info;
    long long said = ckpt_megatron__arg_int(m->args, field, 0);
    long long pp = ckpt_megatron__arg_int(m->args, "pipeline_model_parallel_size", in->pp);
    long long ep = ckpt_megatron__arg_int(m->args, "expert_model_parallel_size", in->ep);
    long long at[3] = { 0, 0, 0 };
    char name[96];

    if (said <= 0 || said == have)
        return 0;
    at[which] = said > have ? have : said;
    rank_name(name, sizeof name, at[0], at[1], at[2], pp > 1 || in->pp > 1, ep > 1 || in->ep > 1);
    return ckpt_error_setc(said > have ? CKPT_ENOTFOUND : CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                           "%s: args.%s is %lld, but the checkpoint holds %d %s%s: %s is %s",
                           ckpt_path(mg_rank_at(m, 0, 0, 0)->ck), field, said, have, axis, have == 1 ? "" : "s", name,
                           said > have ? "missing" : "extra");
}

int ckpt_megatron__check_ranks(const ckpt_megatron *m)
{
    const ckpt_value *vpp = ckpt_megatron_arg(m->args, "virtual_pipeline_model_parallel_size");
    const char *first = ckpt_path(mg_rank_at(m, 0, 0, 0)->ck);
    size_t i, n = (size_t)m->info.tp * (size_t)m->info.pp * (size_t)m->info.ep;
    int rc;

    if ((rc = check_axis(m, "tensor_model_parallel_size", "TP rank", m->info.tp, 0)) < 0 ||
        (rc = check_axis(m, "pipeline_model_parallel_size", "pipeline stage", m->info.pp, 1)) < 0 ||
        (rc = check_axis(m, "expert_model_parallel_size", "expert-parallel rank", m->info.ep, 2)) < 0)
        return rc;
    if (vpp && vpp->kind == CKPT_VAL_INT && vpp->u.integer != m->info.vpp)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: args.virtual_pipeline_model_parallel_size is %lld, but the file holds %d model "
                               "chunk%s",
                               first, (long long)vpp->u.integer, m->info.vpp, m->info.vpp == 1 ? "" : "s");
    if ((!vpp || vpp->kind == CKPT_VAL_NONE) && m->info.vpp > 1)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: holds %d model chunks (model0..), but args.virtual_pipeline_model_parallel_size "
                               "is %s",
                               first, m->info.vpp, vpp ? "None" : "absent");
    for (i = 1; i < n; i++)
        if ((rc = check_rank_args(m, &m->ranks[i])) < 0)
            return rc;
    return 0;
}

/* The layers megatron-core builds in each chunk are those args' split gives it (a legacy file
 * numbers them from 0, so one missing or extra would shift the global index of every later
 * layer). */
int ckpt_megatron__check_stage(const ckpt_megatron *m, int pp, int vp, int64_t layers)
{
    const char *file = ckpt_path(mg_rank_at(m, 0, pp, 0)->ck);
    int64_t L = ckpt_megatron__arg_int(m->args, "num_layers", 0), want;
    mg_split s;
    int rc;

    if (L <= 0)
        return 0;
    if ((rc = ckpt_megatron__split_of_args(m->args, L, m->info.pp, m->info.vpp, file, &s)) < 0)
        return rc;
    want = ckpt_megatron__split_layers(&s, pp, vp);
    if (layers == want)
        return 0;
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                           "%s: model chunk %d of pipeline stage %d holds %lld layers, args give it %lld "
                           "(num_layers %lld over PP %d x VPP %d%s)",
                           file, vp, pp, (long long)layers, (long long)want, (long long)L, m->info.pp, m->info.vpp,
                           ckpt_megatron__split_even(&s) ? "" : ", split unevenly");
}

/* The full shape args imply for a tensor of the built-in megatron_gpt names. */
enum { D_NONE, D_HIDDEN, D_QKV, D_ATTN, D_FC1, D_FFN, D_VOCAB, D_HEAD };

typedef struct implied {
    const char *key; /* the name, or the key after "decoder.layers.<i>." */
    int layer;
    int dims[2];
} implied;

static const implied implied_shapes[] = {
    { "embedding.word_embeddings.weight", 0, { D_VOCAB, D_HIDDEN } },
    { "output_layer.weight", 0, { D_VOCAB, D_HIDDEN } },
    { "decoder.final_layernorm.weight", 0, { D_HIDDEN, D_NONE } },
    { "decoder.final_layernorm.bias", 0, { D_HIDDEN, D_NONE } },
    { "self_attention.linear_qkv.weight", 1, { D_QKV, D_HIDDEN } },
    { "self_attention.linear_qkv.bias", 1, { D_QKV, D_NONE } },
    { "self_attention.linear_qkv.layer_norm_weight", 1, { D_HIDDEN, D_NONE } },
    { "self_attention.linear_qkv.layer_norm_bias", 1, { D_HIDDEN, D_NONE } },
    { "self_attention.linear_proj.weight", 1, { D_HIDDEN, D_ATTN } },
    { "self_attention.linear_proj.bias", 1, { D_HIDDEN, D_NONE } },
    { "self_attention.q_layernorm.weight", 1, { D_HEAD, D_NONE } },
    { "self_attention.k_layernorm.weight", 1, { D_HEAD, D_NONE } },
    { "input_layernorm.weight", 1, { D_HIDDEN, D_NONE } },
    { "input_layernorm.bias", 1, { D_HIDDEN, D_NONE } },
    { "pre_mlp_layernorm.weight", 1, { D_HIDDEN, D_NONE } },
    { "pre_mlp_layernorm.bias", 1, { D_HIDDEN, D_NONE } },
    { "mlp.linear_fc1.weight", 1, { D_FC1, D_HIDDEN } },
    { "mlp.linear_fc1.bias", 1, { D_FC1, D_NONE } },
    { "mlp.linear_fc1.layer_norm_weight", 1, { D_HIDDEN, D_NONE } },
    { "mlp.linear_fc1.layer_norm_bias", 1, { D_HIDDEN, D_NONE } },
    { "mlp.linear_fc2.weight", 1, { D_HIDDEN, D_FFN } },
    { "mlp.linear_fc2.bias", 1, { D_HIDDEN, D_NONE } },
};

/* Tensors every layer has: attention where any layer has it, a dense MLP unless the model
 * has experts (whose layers hold them instead, some or all). */
static const char *const layer_tensors[] = {
    "self_attention.linear_qkv.weight", "self_attention.linear_proj.weight", "mlp.linear_fc1.weight",
    "mlp.linear_fc2.weight",
};
#define N_LAYER_TENSORS (sizeof layer_tensors / sizeof layer_tensors[0])

typedef struct sizes {
    int64_t hidden, heads, groups, head_dim, ffn, vocab;
    int64_t q_lora; /* multi-latent attention's q_lora_rank, whose norm q_layernorm is; 0: not MLA */
    int swiglu;
} sizes;

/* a x b for sizes from args: 0 (not known) when either is not positive or it overflows */
static int64_t size_mul(int64_t a, int64_t b)
{
    int64_t r;

    return a > 0 && b > 0 && !CKPT_MUL_OVERFLOWS(a, b, &r) ? r : 0;
}

static void sizes_of(const ckpt_value *args, sizes *s)
{
    s->hidden = ckpt_megatron__arg_int(args, "hidden_size", 0);
    s->heads = ckpt_megatron__arg_int(args, "num_attention_heads", 0);
    s->groups = ckpt_megatron__arg_int(args, "group_query_attention", 0)
                    ? ckpt_megatron__arg_int(args, "num_query_groups", 0)
                    : s->heads;
    s->head_dim = ckpt_megatron__arg_int(args, "kv_channels", s->heads > 0 ? s->hidden / s->heads : 0);
    s->ffn = ckpt_megatron__arg_int(args, "ffn_hidden_size", size_mul(4, s->hidden));
    s->vocab = ckpt_megatron__arg_int(args, "padded_vocab_size", 0);
    s->swiglu = ckpt_megatron__arg_int(args, "swiglu", 0) != 0 || ckpt_megatron__arg_int(args, "gated_linear_unit", 0) != 0;
    s->q_lora = ckpt_megatron__arg_int(args, "multi_latent_attention", 0) ? ckpt_megatron__arg_int(args, "q_lora_rank", 0)
                                                                          : 0;
}

/* The size args imply, 0 when they do not say, and how, in args' own words. */
static int64_t implied_dim(const sizes *s, int d, char *how, size_t cap)
{
    switch (d) {
    case D_HIDDEN:
        snprintf(how, cap, "hidden_size %lld", (long long)s->hidden);
        return s->hidden;
    case D_QKV:
        snprintf(how, cap, "(num_attention_heads %lld + 2 x num_query_groups %lld) x kv_channels %lld",
                 (long long)s->heads, (long long)s->groups, (long long)s->head_dim);
        return s->heads > 0 && s->groups > 0 && s->heads <= INT32_MAX && s->groups <= INT32_MAX
                   ? size_mul(s->heads + 2 * s->groups, s->head_dim)
                   : 0;
    case D_ATTN:
        snprintf(how, cap, "num_attention_heads %lld x kv_channels %lld", (long long)s->heads,
                 (long long)s->head_dim);
        return size_mul(s->heads, s->head_dim);
    case D_FC1:
        snprintf(how, cap, "%sffn_hidden_size %lld", s->swiglu ? "2 (swiglu) x " : "", (long long)s->ffn);
        return size_mul(s->ffn, s->swiglu ? 2 : 1);
    case D_FFN:
        snprintf(how, cap, "ffn_hidden_size %lld", (long long)s->ffn);
        return s->ffn;
    case D_VOCAB:
        snprintf(how, cap, "padded_vocab_size %lld", (long long)s->vocab);
        return s->vocab;
    case D_HEAD:
        if (s->q_lora > 0) {
            snprintf(how, cap, "q_lora_rank %lld", (long long)s->q_lora);
            return s->q_lora;
        }
        snprintf(how, cap, "kv_channels %lld", (long long)s->head_dim);
        return s->head_dim;
    default:
        return 0;
    }
}

/* The key of a layer's tensor after "decoder.layers.<i>.", and i; NULL for other names. */
static const char *layer_key(const char *name, int64_t *layer)
{
    size_t skip = strlen(CKPT_MEGATRON_LAYERS);
    char *end;

    if (strncmp(name, CKPT_MEGATRON_LAYERS, skip) != 0 || name[skip] < '0' || name[skip] > '9')
        return NULL;
    *layer = strtoll(name + skip, &end, 10);
    return *end == '.' ? end + 1 : NULL;
}

static const char *entry_file(const ckpt_megatron *m, const mg_entry *e)
{
    if (m->dist)
        return m->dist;
    return ckpt_path(mg_rank_at(m, 0, e->src_pp, e->ep >= 0 ? e->ep : 0)->ck);
}

static int check_shape(const ckpt_megatron *m, const sizes *s, const mg_entry *e, const implied *want)
{
    const int64_t *shape = ckpt_node_shape(e->full);
    int ndim = ckpt_node_ndim(e->full), want_ndim = want->dims[1] == D_NONE ? 1 : 2, d;
    char how[160];

    if (ndim != want_ndim)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: '%s' has %d dimensions, not %d",
                               entry_file(m, e), e->name, ndim, want_ndim);
    for (d = 0; d < ndim; d++) {
        int64_t size = implied_dim(s, want->dims[d], how, sizeof how);
        if (size > 0 && shape[d] != size)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                   "%s: '%s' is %lld along axis %d at full size%s, args imply %lld (%s)",
                                   entry_file(m, e), e->name, (long long)shape[d], d,
                                   m->dist || m->info.tp == 1 ? "" : " (its TP ranks' parts together)",
                                   (long long)size, how);
    }
    return 0;
}

static int has_entry(const ckpt_megatron *m, const char *name)
{
    size_t i;

    for (i = 0; i < m->n_entries; i++)
        if (m->entries[i].full && strcmp(m->entries[i].name, name) == 0)
            return 1;
    return 0;
}

/* Every layer holds each of layer_tensors that it must (seen[layer] has a bit for each it
 * holds, any[] whether some layer holds it). */
static int check_present(const ckpt_megatron *m, const unsigned char *seen, const int *any, int moe)
{
    const char *where = m->dist ? m->dist : ckpt_set_info_of(m->set)->root;
    const ckpt_value *untie = ckpt_megatron_arg(m->args, "untie_embeddings_and_output_weights");
    int64_t l;
    size_t i;

    for (l = 0; l < m->info.num_layers; l++)
        for (i = 0; i < N_LAYER_TENSORS; i++) {
            int mlp = strncmp(layer_tensors[i], "mlp.", 4) == 0;
            if (!(seen[l] & (1u << i)) && (mlp ? !moe : any[i]))
                return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                                       "%s: no '" CKPT_MEGATRON_LAYERS "%lld.%s' though args.num_layers is %lld",
                                       where, (long long)l, layer_tensors[i], (long long)m->info.num_layers);
        }
    if (!has_entry(m, "embedding.word_embeddings.weight"))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no 'embedding.word_embeddings.weight'",
                               where);
    if (untie && untie->kind == CKPT_VAL_BOOL && untie->u.boolean && !has_entry(m, "output_layer.weight"))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                               "%s: no 'output_layer.weight' though args.untie_embeddings_and_output_weights is True",
                               where);
    return 0;
}

/* Entry e against the shape args imply for its name, if they imply one. */
static int check_entry(const ckpt_megatron *m, const sizes *s, const mg_entry *e, const char *key)
{
    size_t k;

    for (k = 0; k < sizeof implied_shapes / sizeof implied_shapes[0]; k++) {
        if (implied_shapes[k].layer ? !key || strcmp(key, implied_shapes[k].key) != 0
                                    : strcmp(e->name, implied_shapes[k].key) != 0)
            continue;
        if (!e->full)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: '%s' is not a tensor",
                                   e->src ? ckpt_path(e->src) : entry_file(m, e), e->name);
        return check_shape(m, s, e, &implied_shapes[k]);
    }
    return 0;
}

int ckpt_megatron__check_shapes(const ckpt_megatron *m)
{
    unsigned char *seen;
    int any[N_LAYER_TENSORS] = { 0 };
    sizes s;
    size_t i, k;
    int rc = 0;

    /* names of another layout spec are its own */
    if (!m->own_map)
        return 0;
    /* every layer holds tensors: more layers than tensors is a count no file backs */
    if (m->info.num_layers < 0 || m->info.num_layers > (int64_t)m->n_entries)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %lld layers in %zu tensors",
                               m->dist ? m->dist : ckpt_set_info_of(m->set)->root, (long long)m->info.num_layers,
                               m->n_entries);
    if (!(seen = calloc((size_t)m->info.num_layers + 1, 1)))
        return ckpt_error_oom();
    sizes_of(m->args, &s);
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        const mg_entry *e = &m->entries[i];
        int64_t layer = -1;
        const char *key = layer_key(e->name, &layer);
        if (ckpt_megatron__is_extra_state(e->name) || (rc = check_entry(m, &s, e, key)) < 0)
            continue;
        for (k = 0; key && layer >= 0 && layer < m->info.num_layers && k < N_LAYER_TENSORS; k++)
            if (strcmp(key, layer_tensors[k]) == 0) {
                seen[layer] |= (unsigned char)(1u << k);
                any[k] = 1;
            }
    }
    if (rc == 0)
        rc = check_present(m, seen, any, ckpt_megatron__num_experts(m->args) > 0);
    free(seen);
    return rc;
}
