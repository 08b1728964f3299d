/* paddle2hf / hf2paddle planning: a PaddleNLP LLaMA at any TP/PP merged and mapped into a
 * Hugging Face directory, and a Hugging Face LLaMA mapped into PaddleNLP's names and cut
 * into the target layout. */
#include "paddle_private.h"

#include <ckpt/sys/common.h>

#include <stdlib.h>
#include <string.h>

/* Why paddle2hf leaves a tied head out: PaddleNLP 3 saves the embedding's parameter under
 * both names. */
#define TIED_HEAD "a tied head: the embedding's own parameter, saved under both names"

static int leave_out(void *plan, const char *name)
{
    return ckpt_plan_leave_out(plan, name, NULL);
}

/* paddle2hf: the merged model through the map, in transformers' order, as safetensors. */
int ckpt_paddle_plan_to_hf(ckpt_plan *plan, ckpt_set *set, const char *in_dir, const ckpt_paddle_hf_options *o)
{
    ckpt_paddle_model_options mo = CKPT_PADDLE_MODEL_OPTIONS_INIT;
    ckpt_paddle_model *m = NULL;
    const ckpt_paddle_model_info *info;
    ckpt_map *map = NULL;
    ckpt_map_params *params = NULL;
    ckpt_map_result *res = NULL;
    ckpt_map_input *in = NULL;
    const char **names = NULL;
    const ckpt_node **nodes = NULL;
    size_t *perm = NULL, n, i, k;
    ckpt_hf_llama_dims dims;
    ckpt_buf config = CKPT_BUF_INIT;
    int rc;

    mo.no_optimizer = 1;
    mo.leave_out = leave_out;
    mo.leave_out_payload = plan;
    if ((rc = ckpt_paddle_model_open(&m, set, ckpt_plan_graph(plan), &mo)) < 0)
        goto done;
    info = ckpt_paddle_model_info_of(m);
    if (!info->config) {
        rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                             "%s: no config.json (the Hugging Face config is made from it)", in_dir);
        goto done;
    }
    if ((rc = ckpt_paddle_hf_dims(info->config, info->config_json, CKPT_DTYPE_F32, &dims)) < 0)
        goto done;
    n = ckpt_paddle_model_tensor_count(m);
    if (!(in = calloc(n + 1, sizeof *in))) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = k = 0; i < n && rc == 0; i++) {
        in[k].name = ckpt_paddle_model_tensor_at(m, i, &in[k].node, NULL);
        if (m->family->tied_shared && dims.tied && strcmp(in[k].name, "lm_head.weight") == 0)
            rc = ckpt_plan_leave_out(plan, in[k].name, TIED_HEAD);
        else
            k++;
    }
    n = k;
    if (rc < 0 || (rc = ckpt_plan_check_drop_patterns(plan)) < 0 ||
        (rc = ckpt_map_builtin(&map, m->family->to_hf)) < 0 || (rc = ckpt_map_params_new(&params)) < 0 ||
        (rc = ckpt_hf_llama_map_params(&dims, params)) < 0 ||
        (rc = ckpt_map_params_load_json(params, info->config)) < 0 ||
        (rc = ckpt_map_apply(map, params, ckpt_plan_graph(plan), in, n, NULL, &res)) < 0 ||
        (rc = ckpt_plan_check_taken(in_dir, "paddle2hf", res)) < 0)
        goto done;
    n = ckpt_map_result_count(res);
    free(in);
    in = calloc(n + 1, sizeof *in);
    names = calloc(n + 1, sizeof *names);
    nodes = calloc(n + 1, sizeof *nodes);
    perm = calloc(n + 1, sizeof *perm);
    if (!in || !names || !nodes || !perm) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < n; i++)
        names[i] = ckpt_map_result_at(res, i)->name;
    if ((rc = ckpt_hf_llama_order(names, n, perm)) < 0)
        goto done;
    for (i = 0; i < n; i++) {
        names[i] = ckpt_map_result_at(res, perm[i])->name;
        nodes[i] = ckpt_map_result_at(res, perm[i])->node;
    }
    /* the config written must describe the tensors written */
    for (i = 0; i < n; i++) {
        in[i].name = names[i];
        in[i].node = nodes[i];
    }
    dims.dtype = n ? ckpt_node_dtype(nodes[0]) : CKPT_DTYPE_F32;
    if ((rc = ckpt_hf_llama_check_tensors(&dims, info->config, in_dir, in, n)) < 0 ||
        (rc = ckpt_hf_plan_safetensors(plan, names, nodes, n, o->max_shard)) < 0 ||
        (rc = ckpt_hf_llama_config_json(&dims, &config)) < 0)
        goto done;
    rc = ckpt_plan_add_bytes(plan, "config.json", config.data, config.len);
done:
    ckpt_buf_dispose(&config);
    free(perm);
    free((void *)names);
    free((void *)nodes);
    free(in);
    ckpt_map_result_free(res);
    ckpt_map_params_free(params);
    ckpt_map_free(map);
    ckpt_paddle_model_close(m);
    return rc;
}

/* PaddleNLP's Qwen2 fuses q/k/v with their biases, which the map does not write. */
static int fused_qkv_refused(const char *config_path)
{
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                           "%s: model_type qwen2: --fused-qkv (fuse_attention_qkv) is written for llama only; Qwen2's "
                           "q, k and v stay separate",
                           config_path);
}

/* hf2paddle: the checkpoint through the inverse map, as one PaddleNLP model written at the
 * target layout. */
int ckpt_paddle_plan_from_hf(ckpt_plan *plan, const char *hf_dir, const ckpt_paddle_hf_options *o,
                             ckpt_ckpt **weights_out)
{
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    const char *variants[3] = { NULL };
    ckpt_paddle_model *m = NULL;
    ckpt_map *map = NULL;
    ckpt_map_params *params = NULL;
    ckpt_map_result *res = NULL;
    ckpt_map_input *in = NULL;
    ckpt_buf config = CKPT_BUF_INIT;
    ckpt_hf_llama_dims dims;
    char *hf_config_path = ckpt_paddle__join(hf_dir, "config.json"), *hf_config = NULL, *weights = NULL;
    size_t n = 0, i, v = 0;
    int rc;

    if (!hf_config_path) {
        rc = ckpt_error_oom();
        goto done;
    }
    if (o->fused_qkv)
        variants[v++] = "fused_qkv";
    if (o->fused_ffn)
        variants[v++] = "fused_ffn";
    if ((rc = ckpt_hf_llama_dims_read(hf_config_path, &dims)) < 0 ||
        (rc = ckpt_paddle_hf_supported(hf_config_path, &dims)) < 0 ||
        (o->fused_qkv && dims.qkv_bias && (rc = fused_qkv_refused(hf_config_path)) < 0) ||
        (rc = ckpt_paddle__read_text(hf_config_path, &hf_config)) < 0 ||
        (rc = ckpt_hf_weights_path(hf_dir, &weights)) < 0 || (rc = ckpt_open(weights_out, weights, NULL)) < 0)
        goto done;
    if (!(in = calloc(ckpt_tensor_count(*weights_out) + 1, sizeof *in))) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < ckpt_tensor_count(*weights_out) && rc == 0; i++) {
        const ckpt_tensor *ten = ckpt_tensor_at(*weights_out, i);
        int left = ckpt_plan_leave_out(plan, ten->name, ckpt_hf_left_out_rule(ten->name));
        if (left != 0) {
            rc = left < 0 ? left : 0;
            continue;
        }
        in[n].name = ten->name;
        rc = ckpt_node_tensor(ckpt_plan_graph(plan), ten, &in[n++].node);
    }
    if (rc < 0 || (rc = ckpt_plan_check_drop_patterns(plan)) < 0 ||
        (rc = ckpt_hf_llama_check_tensors(&dims, hf_config_path, weights, in, n)) < 0 ||
        (rc = ckpt_map_builtin(&map, ckpt_paddle__family(ckpt_hf_family_name(dims.family))->from_hf)) < 0 ||
        (rc = ckpt_map_params_new(&params)) < 0 ||
        (rc = ckpt_hf_llama_map_params(&dims, params)) < 0 ||
        (rc = ckpt_map_params_load_json(params, hf_config_path)) < 0 ||
        (rc = ckpt_map_apply(map, params, ckpt_plan_graph(plan), in, n, v ? variants : NULL, &res)) < 0 ||
        (rc = ckpt_paddle_config_from_hf(hf_config, o->fused_qkv, o->fused_ffn,
                                         n ? ckpt_node_dtype(in[0].node) : CKPT_DTYPE_F32, &config)) < 0 ||
        (rc = ckpt_paddle_layout_check(hf_config_path, (const char *)config.data, 0, o->tp, o->pp)) < 0 ||
        (rc = ckpt_paddle_model_new(&m, ckpt_plan_graph(plan), 1, 1, (const char *)config.data, NULL)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(res) && rc == 0; i++)
        rc = ckpt_paddle_model_add_tensor(m, ckpt_map_result_at(res, i)->name, ckpt_map_result_at(res, i)->node);
    t.tp = o->tp;
    t.pp = o->pp;
    if (rc == 0 && (rc = ckpt_paddle_model_finish(m)) == 0)
        rc = ckpt_paddle_plan(m, &t, plan);
done:
    ckpt_buf_dispose(&config);
    ckpt_paddle_model_close(m);
    ckpt_map_result_free(res);
    ckpt_map_params_free(params);
    ckpt_map_free(map);
    free(in);
    free(weights);
    free(hf_config);
    free(hf_config_path);
    return rc;
}
