/* A PaddleNLP LLaMA or Qwen2 checkpoint against what it says of itself: config.json's sizes
 * bounded and consistent, its family known, the rank files its tensor_parallel_degree,
 * pipeline_parallel_degree and model_meta.json's parallel_config call for; and the constraints
 * PaddleNLP's models put on a layout (LlamaAttention, Column/RowParallelLinear, SegmentLayers).
 * The merged tensors are checked in paddle_check_tensors.c. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Far above any real model's sizes, low enough that products of two of them fit int64_t. */
#define SIZE_MAX_CFG ((int64_t)1 << 24)
#define DEGREE_MAX 4096

/* A positive whole number at `key` no larger than max: 1; absent (or null): 0. */
static int config_size(const char *where, const cJSON *json, const char *key, int64_t max, int64_t *out)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(json, key);

    if (!e || cJSON_IsNull(e))
        return 0;
    if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 1 ||
        e->valuedouble > (double)max) {
        char *text = cJSON_PrintUnformatted(e);
        int rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL, "%s: %s is %s, not a whole number from 1 to %lld",
                                 where, key, text ? text : "not a number", (long long)max);
        free(text);
        return rc;
    }
    *out = (int64_t)e->valuedouble;
    return 1;
}

/* Every PaddleNLP rule here (names, layouts, the maps) is a known family's: a config of another
 * family would be read as a model that it is not. No model_type (older PaddleNLP): LLaMA. */
static int known_family(const char *where, const cJSON *model_type, const pd_family **out)
{
    *out = ckpt_paddle__llama();
    if (!model_type)
        return 0;
    if (!cJSON_IsString(model_type))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: model_type is not a string", where);
    if (!(*out = ckpt_paddle__family(model_type->valuestring)))
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: model_type %.64s: ckptconv reads PaddleNLP's LLaMA, Qwen2 and Mixtral (model_type "
                               "llama, qwen2, mixtral) only",
                               where, model_type->valuestring);
    return 0;
}

int ckpt_paddle__dims(const char *where, const char *json_text, pd_dims *d)
{
    static const struct {
        const char *key;
        size_t at;
        int64_t max;
    } fields[] = {
        { "hidden_size", offsetof(pd_dims, hidden), SIZE_MAX_CFG },
        { "intermediate_size", offsetof(pd_dims, inter), SIZE_MAX_CFG },
        { "num_attention_heads", offsetof(pd_dims, heads), SIZE_MAX_CFG },
        { "num_key_value_heads", offsetof(pd_dims, kv), SIZE_MAX_CFG },
        { "vocab_size", offsetof(pd_dims, vocab), SIZE_MAX_CFG },
        { "num_hidden_layers", offsetof(pd_dims, layers), SIZE_MAX_CFG },
        { "tensor_parallel_degree", offsetof(pd_dims, tp), DEGREE_MAX },
        { "pipeline_parallel_degree", offsetof(pd_dims, pp), DEGREE_MAX },
        { "num_local_experts", offsetof(pd_dims, experts), SIZE_MAX_CFG },
    };
    cJSON *json;
    size_t i;
    int rc = 0;

    memset(d, 0, sizeof *d);
    d->family = ckpt_paddle__llama();
    if (!json_text)
        return 0;
    if (!(json = cJSON_Parse(json_text)) || !cJSON_IsObject(json)) {
        cJSON_Delete(json);
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not a JSON object", where);
    }
    for (i = 0; i < sizeof fields / sizeof *fields && rc >= 0; i++)
        if ((rc = config_size(where, json, fields[i].key, fields[i].max, (int64_t *)((char *)d + fields[i].at))) == 0)
            *(int64_t *)((char *)d + fields[i].at) = 0;
    d->fuse_qkv = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, "fuse_attention_qkv"));
    d->tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, "tie_word_embeddings"));
    if (rc >= 0)
        rc = known_family(where, cJSON_GetObjectItemCaseSensitive(json, "model_type"), &d->family);
    cJSON_Delete(json);
    if (rc < 0)
        return rc;
    if (!d->kv)
        d->kv = d->heads;
    if (d->hidden && d->heads && d->hidden % d->heads)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: hidden_size %lld is not a multiple of num_attention_heads %lld", where,
                               (long long)d->hidden, (long long)d->heads);
    if (d->heads && d->heads % d->kv)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MODEL,
                               "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", where,
                               (long long)d->heads, (long long)d->kv);
    return 0;
}

static int degrees_in_range(const char *where, int tp, int pp)
{
    if (tp < 1 || pp < 1 || tp > DEGREE_MAX || pp > DEGREE_MAX)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, "%s: TP %d, PP %d: sizes must be from 1 to %d",
                               where, tp, pp, DEGREE_MAX);
    return 0;
}

static int layout_fits(const char *where, const pd_dims *d, int64_t num_layers, int tp, int pp)
{
    if (d->layers)
        num_layers = d->layers;
#define REFUSE(...) ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT, __VA_ARGS__)
    if (d->heads && d->heads % tp)
        return REFUSE("%s: TP %d: %lld attention heads cannot be split over %d tensor-parallel ranks (PaddleNLP's "
                      "LlamaAttention needs num_attention_heads divisible by tensor_parallel_degree)",
                      where, tp, (long long)d->heads, tp);
    if (d->kv % tp && tp % d->kv)
        return REFUSE("%s: TP %d: %lld key/value heads can neither be split over nor shared by %d tensor-parallel "
                      "ranks (PaddleNLP needs num_key_value_heads divisible by tensor_parallel_degree, or the "
                      "reverse)",
                      where, tp, (long long)d->kv, tp);
    if (d->kv % tp && d->fuse_qkv)
        return REFUSE("%s: TP %d: %lld key/value heads are kept whole on every rank, which a fused qkv_proj "
                      "(fuse_attention_qkv) cannot hold (PaddleNLP refuses this layout)",
                      where, tp, (long long)d->kv);
    if (d->inter && d->inter % tp)
        return REFUSE("%s: TP %d: intermediate_size %lld cannot be split over %d tensor-parallel ranks (gate, up and "
                      "down projections are column- and row-parallel)",
                      where, tp, (long long)d->inter, tp);
    if (pp > 1 && !d->family->pipe_cls)
        return REFUSE("%s: PP %d: PaddleNLP has no pipeline model of %s (%sPipe): one stage only", where, pp,
                      d->family->title, d->family->cls);
    if (d->family->moe && !d->experts)
        return REFUSE("%s: no num_local_experts (PaddleNLP's %s needs it)", where, d->family->title);
    if (pp > 1 && pp > num_layers)
        return REFUSE("%s: PP %d: %lld decoder layers cannot fill %d pipeline stages", where, pp,
                      (long long)num_layers, pp);
#undef REFUSE
    return 0;
}

int ckpt_paddle_layout_check(const char *where, const char *config_json, int64_t num_layers, int tp, int pp)
{
    pd_dims d;
    int rc;

    if ((rc = degrees_in_range(where, tp, pp)) < 0 || (rc = ckpt_paddle__dims(where, config_json, &d)) < 0)
        return rc;
    return layout_fits(where, &d, num_layers, tp, pp);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Fewer key/value heads than TP ranks (or a count TP does not divide) are kept whole on every
 * rank by PaddleNLP, which a tensor holding q, k and v cut by KV group cannot be. */
static int refuse_whole_kv(const char *where, int tp, int64_t kv, const char *fused)
{
    return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                           "%s: TP %d: %lld key/value heads do not divide over %d tensor-parallel ranks, so "
                           "PaddleNLP keeps them whole on every rank, which %s (cut by KV group) cannot hold; "
                           "choose a TP size that divides num_key_value_heads",
                           where, tp, (long long)kv, tp, fused);
}

int ckpt_paddle__check_target(const ckpt_paddle_model *m, int tp, int pp)
{
    const char *where = m->info.config ? m->info.config : ckpt_paddle__where(m);
    char fused[512];
    pd_dims d;
    size_t i;
    int rc;

    if ((rc = degrees_in_range(where, tp, pp)) < 0 || (rc = ckpt_paddle__dims(where, m->config_text, &d)) < 0 ||
        (rc = layout_fits(where, &d, m->info.num_layers, tp, pp)) < 0 || !d.kv || d.kv % tp == 0)
        return rc;
    for (i = 0; i < m->n_entries; i++)
        if (ends_with(m->entries[i].name, ".qkv_proj.weight") || ends_with(m->entries[i].name, ".layernorm_qkv.weight")) {
            snprintf(fused, sizeof fused, "the fused q/k/v tensor '%s'", m->entries[i].name);
            return refuse_whole_kv(where, tp, d.kv, fused);
        }
    return 0;
}

int ckpt_paddle_fused_kv_check(const char *where, const char *config_json, int tp, const char *fused)
{
    pd_dims d;
    int rc;

    if ((rc = ckpt_paddle__dims(where, config_json, &d)) < 0 || !d.kv || d.kv % tp == 0)
        return rc;
    return refuse_whole_kv(where, tp, d.kv, fused);
}

/* ---- the rank files ---- */

/* Whether the model files are PaddleNLP's per-rank .pdparams (a unified checkpoint is merged
 * whatever layout trained it). */
static int per_rank_files(const ckpt_paddle_model *m)
{
    return !m->reorder;
}

/* The first member whose TP rank (or PP stage) is `from` or more; the set's extent comes
 * from such a member, so there is one. */
static const ckpt_member *member_beyond(const ckpt_set *s, int axis_tp, int from)
{
    size_t i;

    for (i = 0; i < ckpt_set_member_count(s); i++) {
        const ckpt_member *mb = ckpt_set_member_at(s, i);
        if ((axis_tp ? mb->at.tp : mb->at.pp) >= from)
            return mb;
    }
    return ckpt_set_member_at(s, 0);
}

/* The set's extent on one axis against the degree a metadata file gives it. */
static int degree_agrees(const ckpt_paddle_model *m, int axis_tp, int64_t want, const char *source, const char *field)
{
    const ckpt_set_info *si = ckpt_set_info_of(m->set);
    int have = axis_tp ? si->tp : si->pp;
    ckpt_buf name = CKPT_BUF_INIT;
    int rc;

    if (!want || want == have)
        return 0;
    if (want < have) {
        const ckpt_member *mb = member_beyond(m->set, axis_tp, (int)want);
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: %s rank %d, but %s says %s %lld",
                               mb->path, axis_tp ? "TP" : "PP", axis_tp ? mb->at.tp : mb->at.pp, source, field,
                               (long long)want);
    }
    rc = axis_tp ? ckpt_paddle_rank_file("model_state", ".pdparams", have, 0, (int)want, si->pp, &name)
                 : ckpt_paddle_rank_file("model_state", ".pdparams", 0, have, si->tp, (int)want, &name);
    if (rc == 0)
        rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                             "%s: no %s: %s says %s %lld, the directory has model files of %d %s rank%s", si->root,
                             (const char *)name.data, source, field, (long long)want, have, axis_tp ? "TP" : "PP",
                             have == 1 ? "" : "s");
    ckpt_buf_dispose(&name);
    return rc;
}

/* A sharded save: every TP/PP rank has a model file (and, when the optimizer files are read
 * and sharded, an optimizer file) for each sharding rank below the degree model_meta.json
 * gives (else the file names), and none beyond. */
static int shards_complete(const ckpt_paddle_model *m)
{
    const ckpt_set_info *si = ckpt_set_info_of(m->set);
    const cJSON *pc = cJSON_GetObjectItemCaseSensitive(m->meta, "parallel_config");
    int64_t degree = si->dp;
    ckpt_buf name = CKPT_BUF_INIT;
    size_t i, cells;
    unsigned char *seen;
    int rc = 0, sharded[2] = { 0, 0 }, role, tp, pp, k;

    if (m->meta && (rc = config_size(m->meta_path, pc, "sharding_degree", DEGREE_MAX, &degree)) < 0)
        return rc;
    rc = 0;
    /* sharding stage 1 without save_sharded_model shards the optimizer files only */
    for (i = 0; i < ckpt_set_member_count(m->set); i++) {
        const ckpt_member *mb = ckpt_set_member_at(m->set, i);
        sharded[strcmp(mb->role, "optimizer") == 0] |= mb->at.dp >= 0;
    }
    if (!sharded[0] && !sharded[1])
        return 0;
    cells = (size_t)si->tp * (size_t)si->pp * (size_t)degree;
    if (!(seen = calloc(2 * cells, 1)))
        return ckpt_error_oom();
    for (i = 0; i < ckpt_set_member_count(m->set) && rc == 0; i++) {
        const ckpt_member *mb = ckpt_set_member_at(m->set, i);
        int opt = strcmp(mb->role, "optimizer") == 0;
        if ((!opt && strcmp(mb->role, "model") != 0) || (opt && !m->info.has_optimizer) || mb->at.dp < 0)
            continue;
        if (mb->at.dp >= degree) {
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                 "%s: sharding rank %d, but model_meta.json's sharding_degree is %lld", mb->path,
                                 mb->at.dp, (long long)degree);
            break;
        }
        tp = mb->at.tp < 0 ? 0 : mb->at.tp;
        pp = mb->at.pp < 0 ? 0 : mb->at.pp;
        seen[(size_t)opt * cells + ((size_t)pp * (size_t)si->tp + (size_t)tp) * (size_t)degree + (size_t)mb->at.dp] = 1;
    }
    for (role = 0; role < 2 && rc == 0; role++)
        for (i = 0; i < cells && rc == 0 && sharded[role] && (role == 0 || m->info.has_optimizer); i++)
            if (!seen[(size_t)role * cells + i]) {
                k = (int)(i % (size_t)degree);
                tp = (int)(i / (size_t)degree % (size_t)si->tp);
                pp = (int)(i / (size_t)degree / (size_t)si->tp);
                /* PaddleNLP's sharded_name_suffix: tpXX_ppYY_shardZZ, each part only when used */
                ckpt_buf_clear(&name);
                if ((rc = ckpt_paddle_rank_file(role ? "optimizer" : "model_state", "", tp, pp, si->tp, si->pp,
                                                &name)) == 0 &&
                    (rc = ckpt_buf_printf(&name, "%sshard%02d%s", si->tp > 1 || si->pp > 1 ? "_" : ".", k,
                                          role ? ".pdopt" : ".pdparams")) == 0)
                    rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                         "%s: no %s (TP rank %d, PP stage %d, sharding rank %d; %s %lld)", si->root,
                                         (const char *)name.data, tp, pp, k,
                                         m->meta ? "model_meta.json's sharding_degree is"
                                                 : "sharding ranks in the file names:",
                                         (long long)degree);
            }
    ckpt_buf_dispose(&name);
    free(seen);
    return rc;
}

int ckpt_paddle__check_files(ckpt_paddle_model *m)
{
    const char *where = m->info.config ? m->info.config : ckpt_paddle__where(m);
    const cJSON *pc = cJSON_GetObjectItemCaseSensitive(m->meta, "parallel_config");
    int64_t mp = 0, pp = 0;
    int rc;

    if ((rc = ckpt_paddle__dims(where, m->config_text, &m->dims)) < 0)
        return rc;
    if (m->info.pp > 1 && !m->dims.family->pipe_cls)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: %d pipeline stages, but PaddleNLP has no pipeline model of %s (%sPipe)", where,
                               m->info.pp, m->dims.family->title, m->dims.family->cls);
    if (m->meta && ((rc = config_size(m->meta_path, pc, "mp_degree", DEGREE_MAX, &mp)) < 0 ||
                    (rc = config_size(m->meta_path, pc, "pp_degree", DEGREE_MAX, &pp)) < 0))
        return rc;
    if (!per_rank_files(m))
        return 0;
    /* save_pretrained leaves tensor_parallel_degree out at its default, 1 */
    if ((rc = degree_agrees(m, 1, m->config_text && !m->dims.tp ? 1 : m->dims.tp, "config.json",
                            "tensor_parallel_degree")) < 0 ||
        (rc = degree_agrees(m, 0, m->dims.pp, "config.json", "pipeline_parallel_degree")) < 0 ||
        (rc = degree_agrees(m, 1, mp, "model_meta.json", "parallel_config.mp_degree")) < 0 ||
        (rc = degree_agrees(m, 0, pp, "model_meta.json", "parallel_config.pp_degree")) < 0)
        return rc;
    return shards_complete(m);
}
