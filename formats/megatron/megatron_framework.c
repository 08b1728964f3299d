/* Megatron-LM as a framework: a checkpoint set (legacy rank files or torch_dist) opened as its
 * logical model, or a model given tensor by tensor with args from its family's config, planned
 * at a target layout in either format. */
#include <ckpt/hf.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/framework.h>

#include <stdlib.h>
#include <string.h>

/* a norm fused into the linear after it (linear_qkv; multi-latent attention's linear_q_up_proj
 * and linear_kv_up_proj), which only Transformer Engine layers have */
#define TE_NORM ".layer_norm_weight"
#define EXTRA_STATE_SUFFIX "._extra_state"
#define EXTRA_STATE_RULE "module metadata (_extra_state), which a Hugging Face model has no place for"

typedef struct mg_fw {
    ckpt_megatron *m;
    ckpt_arena *arena; /* a created model's args */
    int created, te, extra_states_added;
} mg_fw;

extern const ckpt_layout_vtable ckpt_layout_megatron;
extern const ckpt_model_source_vtable ckpt_model_source_megatron;

static void mg_free(void *state)
{
    mg_fw *s = state;

    ckpt_megatron_close(s->m);
    ckpt_arena_free(s->arena);
    free(s);
}

static int args_int(const ckpt_value *args, const char *name, int64_t fallback)
{
    const ckpt_value *v = ckpt_megatron_arg(args, name);
    return v && v->kind == CKPT_VAL_INT && v->u.integer > 0 && v->u.integer <= 1 << 30 ? (int)v->u.integer
                                                                                       : (int)fallback;
}

/* The family args describe, and its config; a model of none is opened without one unless a
 * conversion needs it. */
static int read_family(ckpt_fw_builder *b, const mg_fw *s)
{
    const ckpt_value *args = ckpt_megatron_args(s->m);
    const ckpt_megatron_info *mi = ckpt_megatron_info_of(s->m);
    const char *root = ckpt_set_info_of(ckpt_fw_builder_set(b))->root;
    const ckpt_family *f = NULL;
    ckpt_family_config *c = NULL;
    int rc;

    if ((rc = ckpt_family_detect(&f, CKPT_FAMILY_MEGATRON, root, args)) == 0 &&
        (rc = ckpt_family_config_read(&c, f, CKPT_FAMILY_MEGATRON, root, args)) == 0 && mi->true_vocab_size)
        rc = ckpt_family_config_set_int(c, "vocab_size", mi->true_vocab_size);
    return ckpt_fw_builder_family_read(b, rc, f, c);
}

static int mg_open(ckpt_fw_builder *b, void **state)
{
    const ckpt_fw_options *o = ckpt_fw_builder_options(b);
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    const ckpt_megatron_info *mi;
    ckpt_fw_info info;
    mg_fw *s = calloc(1, sizeof *s);
    size_t i;
    int rc;

    if (!s)
        return ckpt_error_oom();
    *state = s;
    mo.true_vocab_size = o->true_vocab_size;
    mo.leave_out = o->leave_out;
    mo.leave_out_payload = o->leave_out_payload;
    if ((rc = ckpt_megatron_open(&s->m, ckpt_fw_builder_set(b), ckpt_fw_builder_graph(b), &mo)) < 0 ||
        (rc = read_family(b, s)) < 0)
        return rc;
    for (i = 0; i < ckpt_megatron_tensor_count(s->m) && rc == 0; i++) {
        const ckpt_node *full;
        ckpt_tensor_layout l;
        const char *name = ckpt_megatron_tensor_at(s->m, i, &full, &l);
        s->te |= strstr(name, TE_NORM) != NULL;
        rc = ckpt_fw_builder_add(b, name, full, &l);
    }
    if (rc < 0)
        return rc;
    mi = ckpt_megatron_info_of(s->m);
    memset(&info, 0, sizeof info);
    info.impl = s->te ? "transformer_engine" : "local";
    info.tp = mi->run_tp;
    info.pp = mi->run_pp;
    info.vpp = mi->run_vpp;
    info.ep = mi->ep;
    info.dp = args_int(ckpt_megatron_args(s->m), "data_parallel_size", 1);
    info.iteration = mi->iteration;
    info.has_optimizer = mi->has_optimizer;
    return ckpt_fw_builder_info(b, &info);
}

static int mg_create(ckpt_fw_builder *b, const ckpt_fw_target *t, void **state)
{
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_megatron_target mt = t->megatron;
    const ckpt_family_config *c;
    const ckpt_family *f = ckpt_fw_builder_target_family(b, &c);
    const char *impl = t->impl ? t->impl : "transformer_engine";
    ckpt_value *args = NULL;
    ckpt_fw_info info;
    mg_fw *s = calloc(1, sizeof *s);
    int rc;

    if (!s)
        return ckpt_error_oom();
    *state = s;
    s->created = 1;
    s->te = strcmp(impl, "transformer_engine") == 0;
    mt.tp = t->tp ? t->tp : 1;
    mt.pp = t->pp ? t->pp : 1;
    mt.vpp = t->vpp ? t->vpp : 1;
    if (!f || !c)
        return ckpt_error_set(CKPT_EINVALID, "megatron: a new model needs its family and config");
    if ((rc = ckpt_arena_new(&s->arena)) < 0 ||
        (rc = ckpt_family_config_args(f, c, s->arena, mt.tp, impl, &args)) < 0 ||
        (t->source && (rc = ckpt_hf_generation_config_to_args(s->arena, args, t->source)) < 0) ||
        (rc = ckpt_megatron_check_layout(args, &mt)) < 0 ||
        (rc = ckpt_megatron_new(&s->m, ckpt_fw_builder_graph(b), args, t->iteration, &mo)) < 0)
        return rc;
    memset(&info, 0, sizeof info);
    info.impl = impl;
    info.tp = mt.tp;
    info.pp = mt.pp;
    info.vpp = mt.vpp;
    info.ep = info.dp = 1;
    info.iteration = t->iteration;
    return ckpt_fw_builder_info(b, &info);
}

static int mg_add(void *state, const char *name, const ckpt_node *full)
{
    mg_fw *s = state;
    return ckpt_megatron_add_tensor(s->m, name, full);
}

/* The target's layout: what t gives, else the source's (an opened model) or 1 (a new one); the
 * virtual stages of the source only with its stages. */
static int mg_plan(void *state, const ckpt_fw_target *t, ckpt_plan *plan)
{
    mg_fw *s = state;
    const ckpt_megatron_info *mi = ckpt_megatron_info_of(s->m);
    ckpt_megatron_target mt = t->megatron;
    int rc;

    mt.tp = t->tp ? t->tp : s->created ? 1 : mi->run_tp;
    mt.pp = t->pp ? t->pp : s->created ? 1 : mi->run_pp;
    mt.vpp = t->vpp ? t->vpp : s->created || t->pp ? 1 : mi->run_vpp;
    if (t->dp)
        mt.dp = t->dp;
    if (t->ep)
        mt.ep = t->ep;
    if (t->etp)
        mt.etp = t->etp;
    if (s->created && !s->extra_states_added) {
        if ((rc = ckpt_megatron_add_extra_states(s->m, s->te)) < 0)
            return rc;
        s->extra_states_added = 1;
    }
    if (t->format && strcmp(t->format, "torch_dist") == 0)
        return ckpt_megatron_plan_dist(s->m, &mt, plan);
    if (t->format && strcmp(t->format, "torch") != 0)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT,
                               "megatron: format '%s' is torch or torch_dist", t->format);
    return ckpt_megatron_plan(s->m, &mt, plan);
}

static void *mg_native(void *state)
{
    return ((mg_fw *)state)->m;
}

static const char *mg_left_out(void *state, const char *name)
{
    size_t n = strlen(name), k = sizeof EXTRA_STATE_SUFFIX - 1;

    (void)state;
    return n > k && strcmp(name + n - k, EXTRA_STATE_SUFFIX) == 0 ? EXTRA_STATE_RULE : NULL;
}

/* The vocabulary rows of a created model: Megatron's padding for its TP. */
static int mg_map_params(void *state, ckpt_map_params *p)
{
    mg_fw *s = state;
    const ckpt_value *v = ckpt_megatron_arg(ckpt_megatron_args(s->m), "padded_vocab_size");

    if (!s->created || !v || v->kind != CKPT_VAL_INT)
        return 0;
    return ckpt_map_params_set(p, "padded_vocab_size", v->u.integer);
}

/* To Hugging Face: the generation_config.json hf2mcore kept, and what config.json takes from
 * defaults. */
static int mg_carry(void *state, const char *to, ckpt_plan *plan)
{
    mg_fw *s = state;
    const ckpt_value *args = ckpt_megatron_args(s->m);
    ckpt_buf b = CKPT_BUF_INIT;
    int rc;

    if (strcmp(to, CKPT_FAMILY_HF) != 0)
        return 0;
    if ((rc = ckpt_hf_generation_config_of(args, &b)) == 0 && b.len)
        rc = ckpt_plan_add_bytes(plan, "generation_config.json", b.data, b.len);
    ckpt_buf_clear(&b);
    if (rc == 0 && (rc = ckpt_hf_llama_config_note(args, &b)) == 0 && b.len)
        rc = ckpt_plan_note(plan, "config.json", (const char *)b.data);
    ckpt_buf_dispose(&b);
    return rc;
}

const ckpt_fw_vtable ckpt_framework_megatron = {
    CKPT_FRAMEWORK_ABI_VERSION,
    "megatron",
    "Megatron-LM checkpoints (--ckpt-format torch or torch_dist), any TP/PP/VPP/EP layout",
    &ckpt_layout_megatron,
    &ckpt_model_source_megatron,
    NULL, /* the layout's bid */
    mg_open,
    mg_create,
    mg_add,
    mg_plan,
    mg_free,
    mg_native,
    mg_left_out,
    NULL,
    mg_map_params,
    mg_carry,
};
