/* ckptconv hf2mcore HF_DIR OUT --tp N --pp M: a Hugging Face LLaMA-family directory -> a
 * Megatron-LM mcore checkpoint at any TP/PP layout, ready to fine-tune. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <ckpt/framework.h>
#include <ckpt/family.h>
#include <getopt.h>
#include <limits.h>
#include <string.h>

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
"Convert a Hugging Face model directory of one of the families ckptconv knows,\n"
"  %s\n"
"(formats/families; any other model_type is refused, listing these): config.json and\n"
"model.safetensors, or shards with model.safetensors.index.json, or pytorch_model.bin,\n"
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
CLI_SPLIT_HELP
"  --ep N                         expert-parallel size of a mixture of experts (default\n"
"                                 1): rank files mp_rank_TT[_PPP]_EEE, EP rank r holding\n"
"                                 experts r * E/N .. (r + 1) * E/N - 1 as its local experts\n"
"                                 0..; num_experts must be a multiple of N\n"
"  --etp M                        expert tensor-parallel size (default --tp), dividing --tp:\n"
"                                 the experts cut over M ranks, one file per (dense TP\n"
"                                 rank, EP rank) that Megatron's expert data-parallel rank\n"
"                                 0 writes\n"
"  --transformer-impl IMPL        transformer_engine (default, Megatron's) or local\n"
"  --moe-grouped-gemm             the experts as Megatron's --moe-grouped-gemm holds them:\n"
"                                 Transformer Engine's TEGroupedMLP (per MoE layer\n"
"                                 experts.linear_fc1/2.weight<i>, local expert i's weight,\n"
"                                 and one _extra_state each), with --transformer-impl local\n"
"                                 GroupedMLP's experts.weight1/weight2 (see reshard --help)\n"
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
"  ckptconv hf2mcore tiny-llama/ out/ --tp 2 --transformer-impl local --dry-run\n",
            ckpt_family_known());
}

static int parse_args(int argc, char **argv, hf2mcore_args *a)
{
    enum { O_TP = 256, O_PP, O_VPP, O_IMPL, O_ITER, O_EP, O_ETP, O_GROUPED };
    static const struct option longopts[] = {
        { "tp", required_argument, NULL, O_TP }, { "pp", required_argument, NULL, O_PP },
        { "vpp", required_argument, NULL, O_VPP }, { "transformer-impl", required_argument, NULL, O_IMPL },
        { "iteration", required_argument, NULL, O_ITER }, { "ep", required_argument, NULL, O_EP },
        { "etp", required_argument, NULL, O_ETP }, { "moe-grouped-gemm", no_argument, NULL, O_GROUPED },
        CLI_PLAN_LONGOPTS, CLI_SPLIT_LONGOPTS,
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
        case O_EP: rc = cli_option_parallel("hf2mcore", "--ep", optarg, &a->target.ep); break;
        case O_ETP: rc = cli_option_parallel("hf2mcore", "--etp", optarg, &a->target.etp); break;
        case O_GROUPED: a->target.moe_grouped_gemm = 1; break;
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
            if ((rc = cli_split_option("hf2mcore", c, optarg, &a->target)) < 0 &&
                (rc = cli_plan_option("hf2mcore", c, optarg, &a->p)) < 0)
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
    ckpt_job_options jo = CKPT_JOB_OPTIONS_INIT;
    ckpt_plan_report rep;
    ckpt_plan *plan = NULL;
    ckpt_fw *src = NULL;
    int rc;
    double start = cli_now();

    memset(&rep, 0, sizeof rep);
    jo.name = "hf2mcore";
    jo.to = CKPT_FAMILY_MEGATRON;
    jo.from.framework = CKPT_FAMILY_HF;
    jo.target.megatron = a->target;
    jo.target.tp = a->target.tp;
    jo.target.pp = a->target.pp;
    jo.target.vpp = a->target.vpp;
    jo.target.ep = a->target.ep;
    jo.target.etp = a->target.etp;
    jo.target.impl = a->impl;
    jo.target.iteration = a->iteration;
    if ((rc = ckpt_outdir_check_apart(a->out, a->in)) < 0 || (rc = ckpt_plan_new(&plan)) < 0 ||
        (rc = cli_plan_drop_option(plan, &a->p)) < 0 || (rc = ckpt_job_plan(plan, a->in, &jo, &src)) < 0)
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
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
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
