/* PaddleNLP as a framework: a checkpoint directory of any TP/PP layout (rank files, size
 * shards, a unified safetensors checkpoint; optimizer files merged with their parameters)
 * opened as one model at full shapes, or a model given tensor by tensor with the PaddleNLP
 * config.json its family's config implies, planned at a target layout (ckpt_paddle_plan). */
#include "paddle_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/framework.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Why a conversion leaves a tied head out: PaddleNLP 3 saves the embedding's parameter under
 * both names. */
#define TIED_HEAD "a tied head: the embedding's own parameter, saved under both names"
#define HEAD "lm_head.weight"

typedef struct pd_fw {
    ckpt_paddle_model *m;
    int no_optimizer;
    int tied_shared; /* an opened model's head is the embedding saved twice */
    const ckpt_family *family; /* an opened model's; NULL: none known */
    char *dir;                 /* an opened model's directory */
    ckpt_set *set;             /* its set (borrowed) */
    ckpt_map_result **te;      /* impl "te": the map's results per rank, holding its names */
    size_t n_te;
    /* a created model's */
    const ckpt_family *f;
    const ckpt_family_config *c;
    int fused_qkv, fused_ffn;
    char *where; /* the source's config.json, named in refusals; NULL: "paddle" */
    ckpt_fw_tensor_list added;
} pd_fw;

extern const ckpt_layout_vtable ckpt_layout_paddle;
extern const ckpt_model_source_vtable ckpt_model_source_paddle;

static void pd_free(void *state)
{
    pd_fw *s = state;
    size_t i;

    ckpt_paddle_model_close(s->m);
    for (i = 0; i < s->n_te; i++)
        ckpt_map_result_free(s->te[i]);
    free(s->te);
    ckpt_fw_tensor_list_dispose(&s->added);
    free(s->where);
    free(s->dir);
    free(s);
}

static int config_bool(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;
    return c && ckpt_family_config_get(c, field, &v) == 0 && v && v->kind == CKPT_VAL_BOOL && v->u.boolean;
}

/* The family config.json names; a model of none is opened without one unless a conversion
 * needs it. A conversion holds the config to what PaddleNLP's LLaMA and Qwen2 can describe
 * first (ckpt_paddle_hf_dims), so that it says what PaddleNLP's model lacks. */
static int read_family(ckpt_fw_builder *b, pd_fw *s)
{
    const ckpt_fw_options *o = ckpt_fw_builder_options(b);
    const ckpt_paddle_model_info *mi = ckpt_paddle_model_info_of(s->m);
    const ckpt_family *f = NULL;
    ckpt_family_config *c = NULL;
    ckpt_hf_llama_dims dims;
    int rc;

    if (o->need_family && !mi->config)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                               "%s: no config.json (the Hugging Face config is made from it)",
                               ckpt_fw_builder_path(b));
    /* a mixture-of-experts family's config is held to the family by its config read below */
    if (o->need_family && !s->m->family->moe &&
        (rc = ckpt_paddle_hf_dims(mi->config, mi->config_json, CKPT_DTYPE_F32, &dims)) < 0)
        return rc;
    if (!mi->config_json)
        rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                             "%s: no config.json (the model's family and config are read from it)",
                             ckpt_fw_builder_path(b));
    else if ((rc = ckpt_family_detect(&f, CKPT_FAMILY_PADDLE, mi->config, mi->config_json)) == 0)
        rc = ckpt_family_config_read(&c, f, CKPT_FAMILY_PADDLE, mi->config, mi->config_json);
    if (rc == 0) {
        s->tied_shared = s->m->family->tied_shared && config_bool(c, "tied");
        s->family = f;
    }
    return ckpt_fw_builder_family_read(b, rc, f, c);
}

static int pd_open(ckpt_fw_builder *b, void **state)
{
    const ckpt_fw_options *o = ckpt_fw_builder_options(b);
    ckpt_paddle_model_options mo = CKPT_PADDLE_MODEL_OPTIONS_INIT;
    const ckpt_paddle_model_info *mi;
    ckpt_fw_info info;
    pd_fw *s = calloc(1, sizeof *s);
    size_t i;
    int rc = 0;

    if (!s)
        return ckpt_error_oom();
    *state = s;
    s->no_optimizer = o->no_optimizer;
    if (!(s->dir = strdup(ckpt_fw_builder_path(b))))
        return ckpt_error_oom();
    mo.no_optimizer = o->no_optimizer;
    mo.leave_out = o->leave_out;
    mo.leave_out_payload = o->leave_out_payload;
    s->set = ckpt_fw_builder_set(b);
    if (o->impl && strcmp(o->impl, "te") == 0) {
        if (!o->paddle_te)
            return ckpt_error_set(CKPT_EINVALID, "%s: impl te is read back through paddle_te's map", s->dir);
        rc = ckpt_paddle__open_te(&s->m, &s->te, &s->n_te, s->set, ckpt_fw_builder_graph(b), s->dir, o->paddle_te);
    } else {
        rc = ckpt_paddle_model_open(&s->m, s->set, ckpt_fw_builder_graph(b), &mo);
    }
    if (rc < 0 || (rc = read_family(b, s)) < 0)
        return rc;
    for (i = 0; i < ckpt_paddle_model_tensor_count(s->m) && rc == 0; i++) {
        const ckpt_node *full;
        ckpt_tensor_layout l;
        const char *name = ckpt_paddle_model_tensor_at(s->m, i, &full, &l);
        rc = ckpt_fw_builder_add(b, name, full, &l);
    }
    if (rc < 0)
        return rc;
    mi = ckpt_paddle_model_info_of(s->m);
    memset(&info, 0, sizeof info);
    info.impl = s->te ? "te" : "native";
    info.tp = mi->tp;
    info.pp = mi->pp;
    info.vpp = info.ep = info.dp = 1;
    info.iteration = -1;
    info.has_optimizer = mi->has_optimizer && !o->no_optimizer;
    return ckpt_fw_builder_info(b, &info);
}

static int has_variant(const ckpt_fw_target *t, const char *name)
{
    size_t i;

    for (i = 0; i < t->n_variants; i++)
        if (t->variants[i] && strcmp(t->variants[i], name) == 0)
            return 1;
    return 0;
}

/* The PaddleNLP family of a mixture-of-experts family f; NULL for any other. */
static const pd_family *moe_family(const ckpt_family *f)
{
    const pd_family *pf = f ? ckpt_paddle__family(ckpt_family_name(f)) : NULL;
    return pf && pf->moe ? pf : NULL;
}

/* A Hugging Face source's config.json, held to what PaddleNLP's LLaMA and Qwen2 can be
 * (another family, llama3 RoPE scaling), a mixture-of-experts family's config to what its
 * PaddleNLP model computes; its path names the refusals and the layout check. */
static int check_hf_source(pd_fw *s, const ckpt_fw_target *t)
{
    ckpt_hf_llama_dims dims;
    ckpt_buf path = CKPT_BUF_INIT;
    struct stat st;
    int rc;

    if (!t->source)
        return moe_family(s->f) ? ckpt_paddle__moe_hf_check("paddle", moe_family(s->f), s->c) : 0;
    if ((rc = ckpt_buf_printf(&path, "%s/config.json", t->source)) < 0 || stat((const char *)path.data, &st) != 0 ||
        !S_ISREG(st.st_mode)) {
        ckpt_buf_dispose(&path);
        return rc;
    }
    s->where = (char *)path.data;
    if (moe_family(s->f))
        return ckpt_paddle__moe_hf_check(s->where, moe_family(s->f), s->c);
    if ((rc = ckpt_hf_llama_dims_read(s->where, &dims)) < 0)
        return rc;
    return ckpt_paddle_hf_supported(s->where, &dims);
}

static int pd_create(ckpt_fw_builder *b, const ckpt_fw_target *t, void **state)
{
    ckpt_fw_info info;
    pd_fw *s = calloc(1, sizeof *s);
    int rc;

    if (!s)
        return ckpt_error_oom();
    *state = s;
    s->f = ckpt_fw_builder_target_family(b, &s->c);
    if (!s->f || !s->c)
        return ckpt_error_set(CKPT_EINVALID, "paddle: a new model needs its family and config");
    if (t->impl && strcmp(t->impl, "native") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT,
                               "paddle: a new model is written with PaddleNLP's own layers (native), not '%s'", t->impl);
    s->fused_qkv = has_variant(t, "fused_qkv");
    s->fused_ffn = has_variant(t, "fused_ffn");
    if (moe_family(s->f) && (s->fused_qkv || s->fused_ffn))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT,
                               "paddle: %s: PaddleNLP's %s has no fused layouts (fuse_attention_qkv, "
                               "fuse_attention_ffn)",
                               s->fused_qkv ? "fused_qkv" : "fused_ffn", moe_family(s->f)->title);
    if ((rc = check_hf_source(s, t)) < 0)
        return rc;
    memset(&info, 0, sizeof info);
    info.impl = "native";
    info.tp = t->tp ? t->tp : 1;
    info.pp = t->pp ? t->pp : 1;
    info.vpp = info.ep = info.dp = 1;
    info.iteration = -1;
    return ckpt_fw_builder_info(b, &info);
}

/* A created model's tensors wait for plan: its config.json depends on their dtype. */
static int pd_add(void *state, const char *name, const ckpt_node *full)
{
    pd_fw *s = state;

    if (s->m)
        return ckpt_error_set(CKPT_EINVALID, "paddle: tensor '%s' added to a model already opened or planned", name);
    return ckpt_fw_tensor_list_add(&s->added, name, full);
}

/* The PaddleNLP model of a created one: its config.json from the family's Hugging Face one
 * (PaddleNLP's LlamaConfig and Qwen2Config take transformers' fields), checked at the target,
 * then its tensors merged into state-dict order. */
static int build(pd_fw *s, int tp, int pp, ckpt_graph *g)
{
    ckpt_dtype dtype = s->added.n ? ckpt_node_dtype(s->added.nodes[0]) : CKPT_DTYPE_F32;
    ckpt_buf hf = CKPT_BUF_INIT, config = CKPT_BUF_INIT;
    size_t i;
    int rc;

    if ((rc = ckpt_family_config_json(s->f, s->c, CKPT_FAMILY_HF, dtype, &hf)) < 0 ||
        (rc = ckpt_buf_append(&hf, "", 1)) < 0 ||
        (rc = moe_family(s->f) ? ckpt_paddle__moe_config((const char *)hf.data, dtype, &config)
                               : ckpt_paddle_config_from_hf((const char *)hf.data, s->fused_qkv, s->fused_ffn, dtype,
                                                            &config)) < 0 ||
        (rc = ckpt_paddle_layout_check(s->where ? s->where : "paddle", (const char *)config.data, 0, tp, pp)) < 0 ||
        (rc = ckpt_paddle_model_new(&s->m, g, 1, 1, (const char *)config.data, NULL)) < 0)
        goto done;
    for (i = 0; i < s->added.n && rc == 0; i++)
        rc = ckpt_paddle_model_add_tensor(s->m, s->added.names[i], s->added.nodes[i]);
    if (rc == 0)
        rc = ckpt_paddle_model_finish(s->m);
done:
    ckpt_buf_dispose(&hf);
    ckpt_buf_dispose(&config);
    return rc;
}

/* The target's layout: what t gives, else the source's (an opened model) or 1 (a new one).
 * impl "te" (an opened model only: a created one is native) writes Transformer Engine's
 * layers; a model read back from them is written as te2pd writes it, without the name table. */
static int pd_plan(void *state, const ckpt_fw_target *t, ckpt_plan *plan)
{
    pd_fw *s = state;
    ckpt_paddle_target pt = CKPT_PADDLE_TARGET_INIT;
    int created = s->f != NULL, rc;

    pt.tp = t->tp ? t->tp : created ? 1 : ckpt_paddle_model_info_of(s->m)->tp;
    pt.pp = t->pp ? t->pp : created ? 1 : ckpt_paddle_model_info_of(s->m)->pp;
    pt.drop_optimizer = s->no_optimizer || t->paddle.drop_optimizer;
    pt.te_map = t->paddle.te_map;
    pt.te_params = t->paddle.te_params;
    if (!created && t->impl && strcmp(t->impl, "te") == 0)
        return ckpt_paddle__plan_te(s->m, &pt, s->dir, s->family, plan);
    if (s->te)
        return ckpt_paddle__plan_from_te(s->m, &pt, s->set, plan);
    if (created && !s->m && (rc = build(s, pt.tp, pt.pp, ckpt_plan_graph(plan))) < 0)
        return rc;
    return ckpt_paddle_plan(s->m, &pt, plan);
}

static void *pd_native(void *state)
{
    return ((pd_fw *)state)->m;
}

static const char *pd_left_out(void *state, const char *name)
{
    pd_fw *s = state;
    return s->tied_shared && strcmp(name, HEAD) == 0 ? TIED_HEAD : NULL;
}

const ckpt_fw_vtable ckpt_framework_paddle = {
    CKPT_FRAMEWORK_ABI_VERSION,
    CKPT_FAMILY_PADDLE,
    "PaddleNLP checkpoint directories (model_state[.tpXX][_ppYY].pdparams, size shards, unified "
    "safetensors; .pdopt optimizer state), any TP/PP layout",
    &ckpt_layout_paddle,
    &ckpt_model_source_paddle,
    /* the layout's bid, above Hugging Face's: a PaddleNLP unified checkpoint has config.json
     * and model.safetensors too, but the layout claims it only when its names are PaddleNLP's */
    NULL,
    pd_open,
    pd_create,
    pd_add,
    pd_plan,
    pd_free,
    pd_native,
    pd_left_out,
    NULL,
    NULL,
    NULL,
};
