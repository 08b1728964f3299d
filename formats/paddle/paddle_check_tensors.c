/* A PaddleNLP model's merged tensors against config.json: every decoder layer holds what layer 0
 * holds, each part of the family's layer in one of its forms, the embedding, final norm and
 * (untied) head; each tensor the shape the sizes imply, on the pipeline stage the family's
 * pipeline model gives it. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tensor's full shape in config.json's sizes: H hidden, I intermediate, 2 twice
 * intermediate (gate | up), V vocabulary, Q all heads', K the KV heads', F q, k and v's,
 * E the experts (num_local_experts); b 0 for a vector. Model tensors but the head are named after the base model's prefix
 * ("llama."), names in a layer after "<base>.layers.N.". */
typedef struct pd_shape {
    const char *name;
    char a, b;
} pd_shape;

static const pd_shape MODEL_SHAPES[] = {
    { "embed_tokens.weight", 'V', 'H' }, { "norm.weight", 'H', 0 }, { "lm_head.weight", 'H', 'V' },
};

#define HEAD_NAME "lm_head.weight"

/* MODEL_SHAPES[i]'s name in family f. */
static const char *model_tensor(const pd_family *f, size_t i, char *buf, size_t cap)
{
    if (strcmp(MODEL_SHAPES[i].name, HEAD_NAME) == 0)
        return HEAD_NAME;
    snprintf(buf, cap, "%s.%s", f->base, MODEL_SHAPES[i].name);
    return buf;
}

static const pd_shape LAYER_SHAPES[] = {
    { "self_attn.q_proj.weight", 'H', 'Q' },
    { "self_attn.k_proj.weight", 'H', 'K' },
    { "self_attn.v_proj.weight", 'H', 'K' },
    { "self_attn.q_proj.bias", 'Q', 0 },
    { "self_attn.k_proj.bias", 'K', 0 },
    { "self_attn.v_proj.bias", 'K', 0 },
    { "self_attn.qkv_proj.weight", 'H', 'F' },
    { "self_attn.qkv_proj.bias", 'F', 0 },
    { "self_attn.o_proj.weight", 'Q', 'H' },
    { "mlp.gate_proj.weight", 'H', 'I' },
    { "mlp.up_proj.weight", 'H', 'I' },
    { "mlp.gate_up_fused_proj.weight", 'H', '2' },
    { "mlp.down_proj.weight", 'I', 'H' },
    { "input_layernorm.weight", 'H', 0 },
    { "post_attention_layernorm.weight", 'H', 0 },
    /* Mixtral's router; its experts are EXPERT_SHAPES */
    { "block_sparse_moe.gate.weight", 'H', 'E' },
    /* Transformer Engine layers ([out, in]) */
    { "transformer.self_attention.layernorm_qkv.ln_weight", 'H', 0 },
    { "transformer.self_attention.layernorm_qkv.weight", 'F', 'H' },
    { "transformer.self_attention.proj.weight", 'H', 'Q' },
    { "transformer.layernorm_mlp.ln_weight", 'H', 0 },
    { "transformer.layernorm_mlp.fc1_weight", '2', 'H' },
    { "transformer.layernorm_mlp.fc2_weight", 'H', 'I' },
};

/* A Mixtral expert's tensors, after "<base>.layers.N.block_sparse_moe.experts.M.": w1 gate, w3
 * up, w2 down, each intermediate_size wide. */
#define EXPERTS "block_sparse_moe.experts."
static const pd_shape EXPERT_SHAPES[] = {
    { "w1.weight", 'H', 'I' }, { "w2.weight", 'I', 'H' }, { "w3.weight", 'H', 'I' },
};

/* "<base>.layers.": where a decoder layer's names start. */
static const char *layer_prefix(const pd_family *f, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.layers.", f->base);
    return buf;
}

/* A dimension's size; 0 when config.json does not give what it depends on. */
static int64_t dim_of(const pd_dims *d, char code)
{
    int64_t hd = d->hidden && d->heads ? d->hidden / d->heads : 0;

    switch (code) {
    case 'H': return d->hidden;
    case 'I': return d->inter;
    case '2': return 2 * d->inter;
    case 'V': return d->vocab;
    case 'Q': return d->heads * hd;
    case 'K': return d->kv * hd;
    case 'F': return (d->heads + 2 * d->kv) * hd;
    case 'E': return d->experts;
    default: return 0;
    }
}

/* The expected shape of `name`: 1 with want[] filled, 0 when it is not a tensor of the table
 * or config.json does not give its sizes. */
static int expected_shape(const pd_dims *d, const char *name, int64_t want[2], int *ndim)
{
    const pd_shape *s = NULL;
    char buf[64], prefix[64];
    size_t i, len = strlen(layer_prefix(d->family, prefix, sizeof prefix));

    for (i = 0; i < sizeof MODEL_SHAPES / sizeof *MODEL_SHAPES && !s; i++)
        if (strcmp(name, model_tensor(d->family, i, buf, sizeof buf)) == 0)
            s = &MODEL_SHAPES[i];
    if (!s && strncmp(name, prefix, len) == 0) {
        const char *rest = name + len + strspn(name + len, "0123456789");
        for (i = 0; *rest == '.' && i < sizeof LAYER_SHAPES / sizeof *LAYER_SHAPES && !s; i++)
            if (strcmp(rest + 1, LAYER_SHAPES[i].name) == 0)
                s = &LAYER_SHAPES[i];
        if (d->family->moe && *rest == '.' && strncmp(rest + 1, EXPERTS, strlen(EXPERTS)) == 0) {
            rest += 1 + strlen(EXPERTS);
            rest += strspn(rest, "0123456789");
            for (i = 0; *rest == '.' && i < sizeof EXPERT_SHAPES / sizeof *EXPERT_SHAPES && !s; i++)
                if (strcmp(rest + 1, EXPERT_SHAPES[i].name) == 0)
                    s = &EXPERT_SHAPES[i];
        }
    }
    if (!s)
        return 0;
    *ndim = s->b ? 2 : 1;
    want[0] = dim_of(d, s->a);
    want[1] = s->b ? dim_of(d, s->b) : 1;
    if (d->tied && strcmp(name, HEAD_NAME) == 0) {
        /* tied to the embedding, the head holds [vocab, hidden] */
        want[0] = d->vocab;
        want[1] = d->hidden;
    }
    return want[0] > 0 && want[1] > 0;
}

/* An expert numbered num_local_experts or above is no expert of the model. */
static int expert_in_range(const ckpt_paddle_model *m, const pd_entry *e)
{
    const char *at = m->dims.family->moe ? strstr(e->name, "." EXPERTS) : NULL;
    char *end;
    long long k;

    if (!at)
        return 0;
    k = strtoll(at + 1 + strlen(EXPERTS), &end, 10);
    if (end == at + 1 + strlen(EXPERTS) || k < m->dims.experts)
        return 0;
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: holds %s, but %s says num_local_experts %lld",
                           ckpt_paddle__where(m), e->name, m->info.config, (long long)m->dims.experts);
}

static int shape_fits(const ckpt_paddle_model *m, const pd_entry *e)
{
    char have[96], want_text[96], experts[48] = "";
    int64_t want[2];
    int ndim = 0;
    int rc;

    if ((rc = expert_in_range(m, e)) < 0)
        return rc;
    if (m->dims.family->moe)
        snprintf(experts, sizeof experts, ", num_local_experts %lld", (long long)m->dims.experts);
    if (!e->full || !expected_shape(&m->dims, e->name, want, &ndim))
        return 0;
    if (ckpt_node_ndim(e->full) == ndim && ckpt_node_shape(e->full)[0] == want[0] &&
        (ndim == 1 || ckpt_node_shape(e->full)[1] == want[1]))
        return 0;
    ckpt_shape_format(ckpt_node_shape(e->full), ckpt_node_ndim(e->full), have, sizeof have);
    ckpt_shape_format(want, ndim, want_text, sizeof want_text);
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                           "%s: %s is %s merged over %d TP rank%s, but %s implies %s (hidden_size %lld, "
                           "intermediate_size %lld, num_attention_heads %lld, num_key_value_heads %lld, vocab_size "
                           "%lld%s)",
                           ckpt_paddle__where(m), e->name, have, m->info.tp, m->info.tp == 1 ? "" : "s",
                           m->info.config, want_text, (long long)m->dims.hidden, (long long)m->dims.inter,
                           (long long)m->dims.heads, (long long)m->dims.kv, (long long)m->dims.vocab, experts);
}

/* Every decoder layer holds the tensors layer 0 holds, and no more. */
static int layers_complete(const ckpt_paddle_model *m, int64_t layers)
{
    ckpt_buf name = CKPT_BUF_INIT;
    size_t *count = calloc((size_t)layers + 1, sizeof *count), i;
    int64_t l;
    int rc = 0;

    if (!count)
        return ckpt_error_oom();
    for (i = 0; i < m->n_entries; i++)
        if (m->entries[i].tensor && m->entries[i].layout.layer >= 0 && m->entries[i].layout.layer < layers)
            count[m->entries[i].layout.layer]++;
    for (l = 0; l < layers && rc == 0; l++)
        if (!count[l])
            rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no tensor of decoder layer %lld (of %lld)",
                                 ckpt_paddle__where(m), (long long)l, (long long)layers);
    for (i = 0; i < m->n_entries && rc == 0; i++) {
        const pd_entry *e = &m->entries[i];
        if (!e->tensor || e->layout.layer != 0)
            continue;
        for (l = 1; l < layers && rc == 0; l++) {
            ckpt_buf_clear(&name);
            if ((rc = ckpt_parallel_rename_layer(m->spec, e->name, l, &name)) == 0 &&
                ckpt_paddle__find_entry(m, (const char *)name.data) < 0)
                rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no %s (layer 0 has %s)",
                                     ckpt_paddle__where(m), (const char *)name.data, e->name);
        }
    }
    for (l = 1; l < layers && rc == 0; l++)
        if (count[l] != count[0])
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                                 "%s: decoder layer %lld holds %zu tensors, layer 0 holds %zu", ckpt_paddle__where(m),
                                 (long long)l, count[l], count[0]);
    ckpt_buf_dispose(&name);
    free(count);
    return rc;
}

/* What a decoder layer of PaddleNLP's LLaMA holds: per part, its forms ('|' between them:
 * separate, fused, Transformer Engine's), each the tensors that make it ('+' between them).
 * A family with q/k/v biases holds QKV_BIAS_PART too (fused with the weights or not). */
static const char QKV_BIAS_PART[] = "self_attn.q_proj.bias+self_attn.k_proj.bias+self_attn.v_proj.bias|"
                                    "self_attn.qkv_proj.bias";
static const char *const LAYER_PARTS[] = {
    ("self_attn.q_proj.weight+self_attn.k_proj.weight+self_attn.v_proj.weight|self_attn.qkv_proj.weight|"
     "transformer.self_attention.layernorm_qkv.weight"),
    "self_attn.o_proj.weight|transformer.self_attention.proj.weight",
    "input_layernorm.weight|transformer.self_attention.layernorm_qkv.ln_weight",
    "post_attention_layernorm.weight|transformer.layernorm_mlp.ln_weight",
    /* the dense MLP; a mixture of experts is checked by experts_present instead */
    "mlp.gate_proj.weight+mlp.up_proj.weight|mlp.gate_up_fused_proj.weight|transformer.layernorm_mlp.fc1_weight",
    "mlp.down_proj.weight|transformer.layernorm_mlp.fc2_weight",
};
#define DENSE_MLP_PARTS 2

/* Whether layer 0 holds <base>.layers.0.<the tensor at s, len bytes>. */
static int layer0_has(const ckpt_paddle_model *m, const char *s, size_t len, char *name, size_t cap)
{
    snprintf(name, cap, "%s.layers.0.%.*s", m->dims.family->base, (int)len, s);
    return ckpt_paddle__find_entry(m, name) >= 0;
}

/* Layer 0 holds every part of a LLaMA layer in one of its forms (the other layers hold what
 * layer 0 does): else the first missing tensor of the form it has some of is named. */
static int layer_parts_present(const ckpt_paddle_model *m)
{
    char name[160], missing[160];
    size_t n_layer = sizeof LAYER_PARTS / sizeof *LAYER_PARTS - (m->dims.family->moe ? DENSE_MLP_PARTS : 0);
    size_t i, n_parts = n_layer + (m->dims.family->qkv_bias != 0);

    for (i = 0; i < n_parts; i++) {
        const char *part = i < n_layer ? LAYER_PARTS[i] : QKV_BIAS_PART;
        const char *form = part;
        int complete = 0, best = -1;
        missing[0] = '\0';
        while (*form && !complete) {
            size_t form_len = strcspn(form, "|"), len;
            const char *t = form;
            int have = 0, lacks = 0;
            char first_missing[160] = "";
            for (; t < form + form_len; t += len + (t[len] == '+')) {
                len = strcspn(t, "+|");
                if (layer0_has(m, t, len, name, sizeof name))
                    have++;
                else if (!lacks++)
                    snprintf(first_missing, sizeof first_missing, "%s", name);
            }
            complete = !lacks;
            if (have > best) {
                best = have;
                snprintf(missing, sizeof missing, "%s", first_missing);
            }
            form += form_len + (form[form_len] == '|');
        }
        if (!complete) {
            char forms[512];
            size_t k, used = 0;
            /* in words: "a and b, or c, or d" */
            for (k = 0; part[k] && used + 6 < sizeof forms; k++) {
                const char *sep = part[k] == '+' ? " and " : part[k] == '|' ? ", or " : NULL;
                if (sep) {
                    memcpy(forms + used, sep, strlen(sep));
                    used += strlen(sep);
                } else {
                    forms[used++] = part[k];
                }
            }
            forms[used] = '\0';
            return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                                   "%s: no %s (a layer of PaddleNLP's %s holds %s)", ckpt_paddle__where(m),
                                   missing, m->dims.family->title, forms);
        }
    }
    return 0;
}

/* Layer 0 of a mixture-of-experts family holds the router and every expert's w1, w2 and w3 (the
 * other layers hold what layer 0 does). */
static int experts_present(const ckpt_paddle_model *m)
{
    static const char *const router = "block_sparse_moe.gate.weight";
    char name[160], tensor[96];
    int64_t k;
    size_t j;

    if (!layer0_has(m, router, strlen(router), name, sizeof name))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no %s (the router of PaddleNLP's %s)",
                               ckpt_paddle__where(m), name, m->dims.family->title);
    for (k = 0; k < m->dims.experts; k++)
        for (j = 0; j < sizeof EXPERT_SHAPES / sizeof *EXPERT_SHAPES; j++) {
            snprintf(tensor, sizeof tensor, EXPERTS "%lld.%s", (long long)k, EXPERT_SHAPES[j].name);
            if (!layer0_has(m, tensor, strlen(tensor), name, sizeof name))
                return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                                       "%s: no %s (%s says num_local_experts %lld)", ckpt_paddle__where(m), name,
                                       m->info.config, (long long)m->dims.experts);
        }
    return 0;
}

/* The family's layer parts, embedding, final norm and (untied) output layer. */
static int parts_present(const ckpt_paddle_model *m)
{
    char prefix[64], buf[64];
    size_t i, len = strlen(layer_prefix(m->dims.family, prefix, sizeof prefix));
    int model = 0, rc;

    for (i = 0; i < m->n_entries && !model; i++)
        model = m->entries[i].tensor && strncmp(m->entries[i].name, prefix, len) == 0;
    if (model && ((rc = layer_parts_present(m)) < 0 || (m->dims.family->moe && (rc = experts_present(m)) < 0)))
        return rc;
    for (i = 0; model && i < sizeof MODEL_SHAPES / sizeof *MODEL_SHAPES; i++) {
        const char *name = model_tensor(m->dims.family, i, buf, sizeof buf);
        long at = ckpt_paddle__find_entry(m, name);
        int optional = m->dims.tied && strcmp(name, HEAD_NAME) == 0;
        if ((at < 0 || !m->entries[at].tensor) && !optional)
            return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no %s", ckpt_paddle__where(m), name);
    }
    return 0;
}

/* Each tensor on the source stage the family's pipeline model (LlamaForCausalLMPipe) gives it. */
static int on_its_stage(const ckpt_paddle_model *m, const pd_entry *e, int64_t layers)
{
    int pp = m->info.pp, want;
    int64_t lo = 0, hi = 0, s;

    if (pp <= 1 || !e->tensor)
        return 0;
    switch (e->layout.stage) {
    case CKPT_STAGE_FIRST: want = 0; break;
    case CKPT_STAGE_LAST: want = pp - 1; break;
    case CKPT_STAGE_LAYER:
        if (e->layout.layer < 0)
            return 0;
        for (s = 0; s < pp; s++) {
            ckpt_paddle_stage_layers(layers, pp, (int)s, &lo, &hi);
            if (e->layout.layer >= lo && e->layout.layer < hi)
                break;
        }
        want = (int)s;
        break;
    default: return 0;
    }
    if (want == e->pp)
        return 0;
    ckpt_paddle_stage_layers(layers, pp, e->pp, &lo, &hi);
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                           "%s: holds %s, which PaddleNLP's %s puts on stage %d of %d (of %lld "
                           "layers, stage %d holds layers %lld to %lld)",
                           ckpt_path(ckpt_paddle__rank(m, 0, e->pp)->models[0].ck), e->name, m->dims.family->pipe_cls,
                           want, pp,
                           (long long)layers, e->pp, (long long)lo, (long long)hi - 1);
}

int ckpt_paddle__check_tensors(const ckpt_paddle_model *m)
{
    int64_t layers = m->dims.layers ? m->dims.layers : m->info.num_layers;
    size_t i;
    int rc;

    /* the checks know PaddleNLP's LLaMA, the built-in spec's model */
    if (!m->own_map)
        return 0;
    if (m->dims.layers && m->info.num_layers < m->dims.layers)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                               "%s: no tensor of decoder layer %lld, but %s says num_hidden_layers %lld",
                               ckpt_paddle__where(m), (long long)m->info.num_layers, m->info.config,
                               (long long)m->dims.layers);
    if (m->dims.layers && m->info.num_layers > m->dims.layers) {
        for (i = 0; i < m->n_entries && !(m->entries[i].tensor && m->entries[i].layout.layer >= m->dims.layers); i++)
            ;
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: holds %s, but %s says num_hidden_layers %lld",
                               ckpt_paddle__where(m), i < m->n_entries ? m->entries[i].name : "more layers",
                               m->info.config, (long long)m->dims.layers);
    }
    if ((rc = layers_complete(m, layers)) < 0 || (rc = parts_present(m)) < 0)
        return rc;
    for (i = 0; i < m->n_entries; i++)
        if ((rc = shape_fits(m, &m->entries[i])) < 0 || (rc = on_its_stage(m, &m->entries[i], layers)) < 0)
            return rc;
    return 0;
}
