/* ckptconv hf2mcore HF_DIR OUT --tp N --pp M: a Hugging Face LLaMA-family directory -> a
 * Megatron-LM mcore checkpoint at any TP/PP layout, ready to fine-tune. */
#include "cli.h"

#include <ckpt/sys/common.h>
#include <cjson/cJSON.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct hf2mcore_args {
    const char *in, *out, *impl;
    ckpt_megatron_target target;
    int64_t iteration;
    cli_plan_args p;
} hf2mcore_args;

static void hf2mcore_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv hf2mcore HF_DIR OUT --tp N --pp M [--vpp K] [options]\n"
"\n"
"Convert a Hugging Face LLaMA, Mistral or Qwen2 directory (config.json and\n"
"model.safetensors, or shards with model.safetensors.index.json, or pytorch_model.bin)\n"
"into a Megatron-LM mcore GPT checkpoint (--ckpt-format torch) at TP N, PP M: OUT/latest_\n"
"checkpointed_iteration.txt and OUT/iter_0000001/mp_rank_TT[_PPP]/model_optim_rng.pt.\n"
"\n"
"q/k/v become one linear_qkv per query group (both sides use rotate-half RoPE, so no\n"
"permutation), gate/up one SwiGLU linear_fc1 (cut per rank as [gate_r; up_r]), the norms\n"
"get Megatron's names (--transformer-impl picks Transformer Engine or local layer names),\n"
"and the vocabulary is padded with zero rows to a multiple of 128 x TP. `args` holds what\n"
"Megatron reads to resume (sizes, head counts, vocabulary, RoPE base and Llama 3 scaling,\n"
"Mistral's sliding window, Qwen2's q/k/v biases, norm epsilon, SwiGLU, dtype, parallel\n"
"sizes), and for the way back what Megatron does not read: the family (hf_model_type),\n"
"the token ids (hf_bos_token_id, hf_eos_token_id, hf_pad_token_id) and the text of\n"
"generation_config.json (hf_generation_config); there is no optimizer or rng state, so train\n"
"from it with --finetune (or --no-load-optim --no-load-rng). Tensors keep their dtype.\n"
"Rotary inv_freq buffers that old checkpoints carry are dropped (RoPE recomputes them;\n"
"the report lists them). config.json is held against the weights first: sizes bounded,\n"
"every tensor it implies there with its shape, nothing else (but what --drop leaves out);\n"
"a mismatch is refused naming the tensor and the field.\n"
"\n"
"options:\n"
"  --tp N, --pp M, --vpp K        target layout (default 1, 1, 1)\n"
"  --transformer-impl IMPL        transformer_engine (default, Megatron's) or local\n"
"  --iteration I                  the iteration recorded (default 1)\n"
"  --dry-run                      print every output file and tensor; write nothing\n"
"  --json                         one JSON report on stdout (also with --dry-run)\n"
"  --drop PATTERN                 leave out the input tensors PATTERN matches (a glob over\n"
"                                 the whole name; repeatable); an input tensor that no rule\n"
"                                 takes is an error unless dropped. The report lists them.\n"
"  --memory SIZE, --threads N, --force, -q/--quiet, -h/--help\n"
"\n"
"examples:\n"
"  ckptconv hf2mcore Llama-3-8B/ llama3-mcore/ --tp 4 --pp 2\n"
"  ckptconv hf2mcore tiny-llama/ out/ --tp 2 --transformer-impl local --dry-run\n");
}

static int parse_args(int argc, char **argv, hf2mcore_args *a)
{
    enum { O_TP = 256, O_PP, O_VPP, O_IMPL, O_ITER };
    static const struct option longopts[] = {
        { "tp", required_argument, NULL, O_TP }, { "pp", required_argument, NULL, O_PP },
        { "vpp", required_argument, NULL, O_VPP }, { "transformer-impl", required_argument, NULL, O_IMPL },
        { "iteration", required_argument, NULL, O_ITER }, CLI_PLAN_LONGOPTS,
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    int c, rc;
    long long v;

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        rc = 0;
        switch (c) {
        case O_TP: rc = cli_option_parallel("hf2mcore", "--tp", optarg, &a->target.tp); break;
        case O_PP: rc = cli_option_parallel("hf2mcore", "--pp", optarg, &a->target.pp); break;
        case O_VPP: rc = cli_option_parallel("hf2mcore", "--vpp", optarg, &a->target.vpp); break;
        case O_ITER:
            if ((rc = cli_option_int("hf2mcore", "--iteration", optarg, 0, LLONG_MAX, &v)) == 0)
                a->iteration = v;
            break;
        case O_IMPL:
            if (strcmp(optarg, "transformer_engine") != 0 && strcmp(optarg, "local") != 0)
                return cli_usage_error("hf2mcore", "--transformer-impl is transformer_engine or local, not '%s'",
                                       optarg);
            a->impl = optarg;
            break;
        case 'h': hf2mcore_help(stdout); return -1;
        default:
            if ((rc = cli_plan_option("hf2mcore", c, optarg, &a->p)) < 0)
                return cli_usage_error("hf2mcore", "unknown option");
        }
        if (rc)
            return rc;
    }
    if (argc - optind != 2)
        return cli_usage_error("hf2mcore", "expected HF_DIR and OUT, got %d argument(s)", argc - optind);
    a->in = argv[optind];
    a->out = argv[optind + 1];
    return 0;
}

static int print_json(const hf2mcore_args *a, const ckpt_plan *plan, const ckpt_plan_report *rep, double seconds)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "command", "hf2mcore");
    cJSON_AddStringToObject(o, "input", a->in);
    cJSON_AddStringToObject(o, "output", a->out);
    cJSON_AddNumberToObject(o, "tp", a->target.tp);
    cJSON_AddNumberToObject(o, "pp", a->target.pp);
    cJSON_AddNumberToObject(o, "vpp", a->target.vpp);
    cJSON_AddStringToObject(o, "transformer_impl", a->impl);
    cJSON_AddNumberToObject(o, "iteration", (double)a->iteration);
    return cli_plan_report(o, plan, rep, seconds);
}

static int run(hf2mcore_args *a)
{
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_report rep;
    ckpt_ckpt *in = NULL;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map *map = NULL;
    ckpt_map_params *params = NULL;
    ckpt_map_result *res = NULL;
    ckpt_map_input *inputs = NULL;
    ckpt_value *args = NULL;
    ckpt_hf_llama_dims dims;
    char *config = cli_path_join(a->in, "config.json"), *weights = NULL;
    size_t i, n = 0;
    int te = strcmp(a->impl, "transformer_engine") == 0, rc;
    double start = cli_now();

    memset(&rep, 0, sizeof rep);
    if (!config) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = ckpt_outdir_check_apart(a->out, a->in)) < 0)
        goto done;
    if ((rc = ckpt_hf_weights_path(a->in, &weights)) < 0 || (rc = ckpt_hf_llama_dims_read(config, &dims)) < 0)
        goto done;
    if ((rc = ckpt_open(&in, weights, NULL)) < 0 || (rc = ckpt_plan_new(&plan)) < 0 ||
        (rc = cli_plan_drop_option(plan, &a->p)) < 0 || (rc = ckpt_map_params_new(&params)) < 0 ||
        (rc = ckpt_hf_llama_map_params(&dims, params)) < 0 ||
        (rc = ckpt_map_params_load_json(params, config)) < 0)
        goto done;
    inputs = calloc(ckpt_tensor_count(in) + 1, sizeof *inputs);
    if (!inputs) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < ckpt_tensor_count(in) && rc == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(in, i);
        int left = ckpt_plan_leave_out(plan, t->name, ckpt_hf_left_out_rule(t->name));
        if (left != 0) {
            rc = left < 0 ? left : 0;
            continue;
        }
        inputs[n].name = t->name;
        inputs[n].home = 0;
        rc = ckpt_node_tensor(ckpt_plan_graph(plan), t, &inputs[n++].node);
    }
    if (rc < 0 || (rc = ckpt_plan_check_drop_patterns(plan)) < 0 ||
        (rc = ckpt_hf_llama_check_tensors(&dims, config, weights, inputs, n)) < 0 ||
        (rc = ckpt_map_params_set(params, "padded_vocab_size",
                                  ckpt_megatron_padded_vocab(dims.vocab_size, 128, a->target.tp))) < 0 ||
        (rc = ckpt_hf_llama_megatron_args(ckpt_plan_arena(plan), &dims, config, a->target.tp, a->impl, &args)) < 0 ||
        (rc = ckpt_hf_generation_config_to_args(ckpt_plan_arena(plan), args, a->in)) < 0 ||
        (rc = ckpt_megatron_check_layout(args, &a->target)) < 0 ||
        (rc = ckpt_map_builtin(&map, te ? "hf_llama_megatron" : "hf_llama_megatron_local")) < 0)
        goto done;
    if ((rc = ckpt_map_apply(map, params, ckpt_plan_graph(plan), inputs, n, NULL, &res)) < 0 ||
        (rc = ckpt_megatron_new(&m, ckpt_plan_graph(plan), args, a->iteration, &mo)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(res) && rc == 0; i++)
        rc = ckpt_megatron_add_tensor(m, ckpt_map_result_at(res, i)->name, ckpt_map_result_at(res, i)->node);
    if (rc < 0 || (rc = ckpt_megatron_add_extra_states(m, te)) < 0 || (rc = ckpt_megatron_plan(m, &a->target, plan)) < 0)
        goto done;
    if (a->p.dry_run && a->p.json) {
        rc = print_json(a, plan, NULL, 0);
        goto done;
    }
    if (a->p.dry_run) {
        char summary[512];
        snprintf(summary, sizeof summary, "hf2mcore %s -> %s (TP %d, PP %d, VPP %d)", a->in, a->out, a->target.tp,
                 a->target.pp, a->target.vpp);
        rc = cli_plan_dry_run(plan, summary);
        goto done;
    }
    rc = cli_plan_execute("hf2mcore", plan, a->out, &a->p, &rep);
    if (rc == 0 && a->p.json) {
        rc = print_json(a, plan, &rep, cli_now() - start);
    } else if (rc == 0 && !a->p.quiet) {
        char size[32];
        cli_plan_print_dropped(plan, &a->p);
        fprintf(stderr, "wrote %s: TP %d, PP %d, VPP %d, %zu files, %s in %.2f s\n", a->out, a->target.tp,
                a->target.pp, a->target.vpp, rep.files, cli_human_size(rep.bytes_written, size, sizeof size),
                cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    free(inputs);
    ckpt_map_result_free(res);
    ckpt_megatron_close(m);
    ckpt_map_params_free(params);
    ckpt_map_free(map);
    ckpt_plan_free(plan);
    ckpt_close(in);
    free(config);
    free(weights);
    return rc < 0 ? cli_fail("hf2mcore") : CLI_EXIT_OK;
}

int cli_hf2mcore(int argc, char **argv)
{
    ckpt_megatron_target target = CKPT_MEGATRON_TARGET_INIT;
    ckpt_convert_options write = CKPT_CONVERT_OPTIONS_INIT;
    hf2mcore_args a;
    int rc;

    memset(&a, 0, sizeof a);
    a.target = target;
    a.p.write = write;
    a.iteration = 1;
    a.impl = "transformer_engine";
    rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    return run(&a);
}
