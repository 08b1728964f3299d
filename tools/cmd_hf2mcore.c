/* ckptconv hf2mcore HF_DIR OUT --tp N --pp M: a Hugging Face LLaMA-family directory -> a
 * Megatron-LM mcore checkpoint at any TP/PP layout, ready to fine-tune. */
#include "cli.h"

#include <ckpt/sys/common.h>
#include <getopt.h>
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
"sizes) and the family (hf_model_type); there is no optimizer or rng state, so train\n"
"from it with --finetune (or --no-load-optim --no-load-rng). Tensors keep their dtype.\n"
"Rotary inv_freq buffers that old checkpoints carry are dropped. config.json is held\n"
"against the weights first: sizes bounded, every tensor it implies there with its shape,\n"
"nothing else; a mismatch is refused naming the tensor and the field.\n"
"\n"
"options:\n"
"  --tp N, --pp M, --vpp K        target layout (default 1, 1, 1)\n"
"  --transformer-impl IMPL        transformer_engine (default, Megatron's) or local\n"
"  --iteration I                  the iteration recorded (default 1)\n"
"  --dry-run                      print every output file and tensor; write nothing\n"
"  --json                         one JSON report on stdout\n"
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
        case O_TP: case O_PP: case O_VPP: case O_ITER:
            if ((rc = cli_option_int("hf2mcore", c == O_TP ? "--tp" : c == O_PP ? "--pp" : c == O_VPP ? "--vpp" : "--iteration",
                                     optarg, c == O_ITER ? 0 : 1, CLI_MAX_PARALLEL, &v)) != 0)
                return rc;
            if (c == O_TP)
                a->target.tp = (int)v;
            else if (c == O_PP)
                a->target.pp = (int)v;
            else if (c == O_VPP)
                a->target.vpp = (int)v;
            else
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

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
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
        (rc = ckpt_map_params_new(&params)) < 0 || (rc = ckpt_hf_llama_map_params(&dims, params)) < 0 ||
        (rc = ckpt_map_params_load_json(params, config)) < 0)
        goto done;
    inputs = calloc(ckpt_tensor_count(in) + 1, sizeof *inputs);
    if (!inputs) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < ckpt_tensor_count(in) && rc == 0; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(in, i);
        /* a buffer RoPE recomputes; transformers itself ignores it */
        if (ends_with(t->name, "rotary_emb.inv_freq"))
            continue;
        inputs[n].name = t->name;
        inputs[n].home = 0;
        rc = ckpt_node_tensor(ckpt_plan_graph(plan), t, &inputs[n++].node);
    }
    if (rc < 0 || (rc = ckpt_hf_llama_check_tensors(&dims, config, weights, inputs, n)) < 0 ||
        (rc = ckpt_map_params_set(params, "padded_vocab_size",
                                  ckpt_megatron_padded_vocab(dims.vocab_size, 128, a->target.tp))) < 0 ||
        (rc = ckpt_hf_llama_megatron_args(ckpt_plan_arena(plan), &dims, config, a->target.tp, a->impl, &args)) < 0 ||
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
    if (a->p.dry_run) {
        char summary[512];
        snprintf(summary, sizeof summary, "hf2mcore %s -> %s (TP %d, PP %d, VPP %d)", a->in, a->out, a->target.tp,
                 a->target.pp, a->target.vpp);
        rc = cli_plan_dry_run(plan, summary);
        goto done;
    }
    rc = cli_plan_execute("hf2mcore", plan, a->out, &a->p, &rep);
    if (rc == 0 && a->p.json) {
        printf("{\n  \"command\": \"hf2mcore\",\n  \"tp\": %d,\n  \"pp\": %d,\n  \"vpp\": %d,\n  \"files\": %zu,\n"
               "  \"bytes_written\": %llu,\n  \"seconds\": %.3f\n}\n",
               a->target.tp, a->target.pp, a->target.vpp, rep.files, (unsigned long long)rep.bytes_written,
               cli_now() - start);
    } else if (rc == 0 && !a->p.quiet) {
        char size[32];
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
