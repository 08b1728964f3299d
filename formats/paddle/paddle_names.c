/* The variable names PaddleNLP's LLaMA gives its parameters in one process (one TP rank of one
 * pipeline stage), which its optimizer keys its state by: "linear_3.w_0_moment1_0".
 *
 * Paddle's unique_name counts per prefix and per process, a layer's prefix being its class in
 * snake case, the parallel layers' mapped to the single-card ones (ColumnParallelLinear and
 * RowParallelLinear count as linear, VocabParallelEmbedding as embedding, paddle 2.6 and 3.x
 * alike). A pipeline process builds only its own stage's layers, so every stage counts from
 * 0; TP ranks of a stage build the same classes in the same order, so they share the names.
 * The decoder's linears are linear_N, the RMSNorm weights create_parameter_N (paddle's
 * create_parameter), the embedding embedding_N, the head llama_lm_head_N, or in
 * LlamaForCausalLMPipe of PaddleNLP 3 llama_lm_head_pipe_N (LlamaLMHeadPipe; 2.x pipes build
 * LlamaLMHead); Qwen2's alike (qwen2_lm_head_N), a q/k/v bias being its linear's linear_N.b_0,
 * and a tied head the embedding's parameter itself (embedding_N.w_0 twice in the name table,
 * as PaddleNLP 3 saves it). Mixtral's router (block_sparse_moe.gate) and its experts' w1, w2,
 * w3 are linears too. Each class is built in state-dict order, which is the order of the
 * entries. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <cjson/cJSON.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_paddle__config_major(const ckpt_paddle_model *m)
{
    cJSON *json = m->config_text ? cJSON_ParseWithLength(m->config_text, m->config_len) : NULL;
    const cJSON *v = json ? cJSON_GetObjectItemCaseSensitive(json, "paddlenlp_version") : NULL;
    int major = 3;

    if (cJSON_IsNull(v))
        major = 2;
    else if (cJSON_IsString(v) && isdigit((unsigned char)v->valuestring[0]))
        major = atoi(v->valuestring);
    cJSON_Delete(json);
    return major;
}

/* Whether var is "<cls>_<N>...". */
static int of_class(const char *var, const char *cls)
{
    size_t len = strlen(cls);
    return var && strncmp(var, cls, len) == 0 && var[len] == '_' && isdigit((unsigned char)var[len + 1]);
}

const char *ckpt_paddle__head_class(const ckpt_paddle_model *m, int n_pp)
{
    long i = ckpt_paddle__find_entry(m, "lm_head.weight");
    const char *src = i >= 0 ? m->entries[i].var : NULL;
    const pd_family *f = m->family;

    if (n_pp <= 1)
        return f->head;
    /* a pipeline source shows which head class its PaddleNLP builds */
    if (of_class(src, f->head_pipe))
        return f->head_pipe;
    if (m->info.pp > 1 && of_class(src, f->head))
        return f->head;
    return ckpt_paddle__config_major(m) >= 3 ? f->head_pipe : f->head;
}

/* Whether p (a name after "<base>.layers.N.") is a Linear of a Mixtral mixture of experts: the
 * router or an expert's w1, w2, w3. */
static int moe_linear(const char *p)
{
    static const char moe[] = "block_sparse_moe.", experts[] = "experts.";

    if (strncmp(p, moe, sizeof moe - 1) != 0)
        return 0;
    p += sizeof moe - 1;
    if (strcmp(p, "gate.weight") == 0)
        return 1;
    if (strncmp(p, experts, sizeof experts - 1) != 0 || !isdigit((unsigned char)p[sizeof experts - 1]))
        return 0;
    for (p += sizeof experts - 1; isdigit((unsigned char)*p); p++)
        ;
    return strcmp(p, ".w1.weight") == 0 || strcmp(p, ".w2.weight") == 0 || strcmp(p, ".w3.weight") == 0;
}

/* The class prefix of a structured name; NULL for a tensor the family's PaddleNLP model does
 * not have. *bias: the tensor is its linear's bias. */
static const char *class_of(const pd_family *f, const char *name, const char *head, int *bias)
{
    static const char *const linears[] = { "self_attn.q_proj.weight",  "self_attn.k_proj.weight",
                                           "self_attn.v_proj.weight",  "self_attn.qkv_proj.weight",
                                           "self_attn.o_proj.weight",  "mlp.gate_proj.weight",
                                           "mlp.up_proj.weight",       "mlp.gate_up_fused_proj.weight",
                                           "mlp.down_proj.weight" };
    static const char *const biases[] = { "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                                          "self_attn.qkv_proj.bias" };
    size_t i, base = strlen(f->base);
    const char *p = name;

    *bias = 0;
    if (strcmp(name, "lm_head.weight") == 0)
        return head;
    if (strncmp(name, f->base, base) != 0 || name[base] != '.')
        return NULL;
    p += base + 1;
    if (strcmp(p, "embed_tokens.weight") == 0)
        return "embedding";
    if (strcmp(p, "norm.weight") == 0)
        return "create_parameter";
    if (strncmp(p, "layers.", 7) != 0 || !isdigit((unsigned char)p[7]))
        return NULL;
    for (p += 7; isdigit((unsigned char)*p); p++)
        ;
    if (*p++ != '.')
        return NULL;
    if (strcmp(p, "input_layernorm.weight") == 0 || strcmp(p, "post_attention_layernorm.weight") == 0)
        return "create_parameter";
    for (i = 0; i < sizeof linears / sizeof *linears; i++)
        if (strcmp(p, linears[i]) == 0)
            return "linear";
    if (f->moe && moe_linear(p))
        return "linear";
    for (i = 0; f->qkv_bias && i < sizeof biases / sizeof *biases; i++)
        if (strcmp(p, biases[i]) == 0) {
            *bias = 1;
            return "linear";
        }
    return NULL;
}

typedef struct counter {
    const char *cls;
    long next;
} counter;

static int compare_vars(const void *a, const void *b)
{
    const char *x = **(char *const *const *)a, *y = **(char *const *const *)b;
    return strcmp(x, y);
}

/* A tied head is the embedding's parameter: one variable under two names. */
static int one_parameter(const ckpt_paddle_model *m, const char *a, const char *b)
{
    char embed[64];

    if (!m->dims.tied || !m->family->tied_shared)
        return 0;
    snprintf(embed, sizeof embed, "%s.embed_tokens.weight", m->family->base);
    return (strcmp(a, "lm_head.weight") == 0 && strcmp(b, embed) == 0) ||
           (strcmp(b, "lm_head.weight") == 0 && strcmp(a, embed) == 0);
}

/* Two parameters of one process with one name would share their optimizer state. */
static int check_unique(const ckpt_paddle_model *m, char **vars, const size_t *sel, size_t n, int stage)
{
    char ***order = malloc((n ? n : 1) * sizeof *order);
    size_t i, named = 0;
    int rc = 0;

    if (!order)
        return ckpt_error_oom();
    for (i = 0; i < n; i++)
        if (vars[i])
            order[named++] = &vars[i];
    qsort(order, named, sizeof *order, compare_vars);
    for (i = 1; i < named && rc == 0; i++)
        if (strcmp(*order[i - 1], *order[i]) == 0) {
            size_t a = (size_t)(order[i - 1] - vars), b = (size_t)(order[i] - vars);
            if (one_parameter(m, m->entries[sel[a]].name, m->entries[sel[b]].name))
                continue;
            rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_LAYOUT,
                                 "%s: '%s' and '%s' would both be variable '%s' on pipeline stage %d (a tensor "
                                 "PaddleNLP's %s does not build keeps the source's name, which its names at this "
                                 "layout do not avoid); give --no-optimizer to reshard the model only",
                                 ckpt_paddle__where(m), m->entries[sel[a < b ? a : b]].name,
                                 m->entries[sel[a < b ? b : a]].name, *order[i], stage, m->family->title);
        }
    free(order);
    return rc;
}

int ckpt_paddle__stage_vars(const ckpt_paddle_model *m, const char *head, int stage, const size_t *sel, size_t n,
                            char **vars)
{
    counter counts[4] = { { "embedding", 0 }, { "linear", 0 }, { "create_parameter", 0 }, { NULL, 0 } };
    size_t i, k;
    int bias;

    counts[3].cls = head;
    for (i = 0; i < n; i++) {
        const pd_entry *e = &m->entries[sel[i]];
        const char *cls = class_of(m->family, e->name, head, &bias);
        char buf[64];
        if (!cls) {
            /* not built by the family's PaddleNLP model: the source's name, if it has one */
            if (e->var && !(vars[i] = strdup(e->var)))
                return ckpt_error_oom();
            continue;
        }
        for (k = 0; strcmp(counts[k].cls, cls) != 0; k++)
            ;
        if (bias && counts[k].next > 0)
            snprintf(buf, sizeof buf, "%s_%ld.b_0", cls, counts[k].next - 1);
        else if (cls == head && m->family->tied_shared && m->dims.tied && counts[0].next > 0)
            snprintf(buf, sizeof buf, "embedding_%ld.w_0", counts[0].next - 1);
        else
            snprintf(buf, sizeof buf, "%s_%ld.w_0", cls, counts[k].next++);
        if (!(vars[i] = strdup(buf)))
            return ckpt_error_oom();
    }
    return check_unique(m, vars, sel, n, stage);
}
