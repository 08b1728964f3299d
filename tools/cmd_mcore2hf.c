/* ckptconv mcore2hf ROOT OUT: a Megatron-LM mcore GPT checkpoint of a known family at any
 * TP/PP layout -> a Hugging Face directory of its family that transformers loads. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <ckpt/framework.h>
#include <ckpt/family.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct mcore2hf_args {
    const char *in, *out;
    int64_t iteration, true_vocab;
    uint64_t max_shard;
    cli_plan_args p;
} mcore2hf_args;

static void mcore2hf_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv mcore2hf ROOT OUT [options]\n"
"\n"
"Convert a Megatron-LM mcore GPT checkpoint of a model of one of the families ckptconv\n"
"knows,\n"
"  %s\n"
"(GQA or not; --ckpt-format torch or torch_dist) at any TP/PP/VPP layout into a Hugging\n"
"Face directory of its family: OUT/config.json (the family's architectures and\n"
"model_type: args' hf_model_type, else the family whose args match what the model\n"
"computes, e.g. add_qkv_bias is qwen2, a window_size mistral, plain RoPE/SwiGLU llama;\n"
"head_dim, key/value heads, rope_theta and llama3 scaling, rms_norm_eps, sliding_window,\n"
"vocab_size = the true vocabulary, the token ids hf2mcore kept; args without them leave\n"
"them to transformers' defaults, and the report says so), generation_config.json where\n"
"hf2mcore kept it, and model.safetensors, sharded like transformers'\n"
"save_pretrained above --max-shard-size (model-00001-of-0000N.safetensors +\n"
"model.safetensors.index.json).\n"
"\n"
"The rank files are merged as `ckptconv reshard` reads them; then linear_qkv is split per\n"
"query group into q/k/v (both sides use rotate-half RoPE, so no permutation), linear_fc1\n"
"into gate/up, the norms are renamed (TE or local layer names, detected) and the\n"
"vocabulary padding rows are dropped. _extra_state entries and the optimizer state are\n"
"not part of a Hugging Face model and are left out (the report lists the _extra_state\n"
"entries); any other tensor the rules do not take is an error. Tensors keep their dtype.\n"
"\n"
"options:\n"
"  --iteration I            read iter_I instead of the one the tracker names\n"
"  --true-vocab-size V      the vocabulary without padding, when args do not hold it\n"
"                           (args.vocab_size)\n"
"  --max-shard-size SIZE    largest safetensors file (default 5GB, decimal units as\n"
"                           transformers takes them)\n"
"  --dry-run                print every output tensor with its sources; write nothing\n"
"  --json                   one JSON report on stdout (also with --dry-run)\n"
"  --drop PATTERN           leave out the input tensors PATTERN matches (a glob over\n"
"                           the whole name; repeatable); an input tensor that no rule\n"
"                           takes is an error unless dropped. The report lists them.\n"
"  --memory SIZE, --threads N, --force, -q/--quiet, -h/--help\n"
"\n"
"examples:\n"
"  ckptconv mcore2hf checkpoints/llama-tp2pp2 llama-hf/\n"
"  ckptconv mcore2hf checkpoints/llama llama-hf/ --true-vocab-size 32000 --max-shard-size 2GB\n",
            ckpt_family_known());
}

static int parse_args(int argc, char **argv, mcore2hf_args *a)
{
    enum { O_ITER = 256, O_TRUE, O_SHARD };
    static const struct option longopts[] = {
        { "iteration", required_argument, NULL, O_ITER }, { "true-vocab-size", required_argument, NULL, O_TRUE },
        { "max-shard-size", required_argument, NULL, O_SHARD }, CLI_PLAN_LONGOPTS,
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    long long v;
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        rc = 0;
        switch (c) {
        case O_ITER:
        case O_TRUE:
            if ((rc = cli_option_int("mcore2hf", c == O_ITER ? "--iteration" : "--true-vocab-size", optarg,
                                     c == O_TRUE, c == O_TRUE ? INT_MAX : LLONG_MAX, &v)) != 0)
                return rc;
            *(c == O_ITER ? &a->iteration : &a->true_vocab) = v;
            break;
        case O_SHARD:
            if (cli_parse_size(optarg, &a->max_shard) < 0 || a->max_shard == 0)
                return cli_usage_error("mcore2hf", "--max-shard-size: '%s' is not a size", optarg);
            break;
        case 'h': mcore2hf_help(stdout); return -1;
        default:
            if ((rc = cli_plan_option("mcore2hf", c, optarg, &a->p)) < 0)
                return cli_usage_error("mcore2hf", "unknown option");
        }
        if (rc)
            return rc;
    }
    if (argc - optind != 2)
        return cli_usage_error("mcore2hf", "expected ROOT and OUT, got %d argument(s)", argc - optind);
    a->in = argv[optind];
    a->out = argv[optind + 1];
    return 0;
}

static int print_json(const mcore2hf_args *a, const ckpt_plan *plan, const ckpt_plan_report *rep, double seconds)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "command", "mcore2hf");
    cJSON_AddStringToObject(o, "input", a->in);
    cJSON_AddStringToObject(o, "output", a->out);
    return cli_plan_report(o, plan, rep, seconds);
}

/* The tensors the plan writes. */
static size_t tensors_written(const ckpt_plan *plan)
{
    size_t i, n = 0;

    for (i = 0; i < ckpt_plan_file_count(plan); i++)
        n += ckpt_plan_file_at(plan, i)->n_tensors;
    return n;
}

static int run(const mcore2hf_args *a)
{
    ckpt_job_options jo = CKPT_JOB_OPTIONS_INIT;
    ckpt_plan_report rep;
    ckpt_plan *plan = NULL;
    ckpt_fw *src = NULL;
    int rc;
    double start = cli_now();

    memset(&rep, 0, sizeof rep);
    jo.name = "mcore2hf";
    jo.to = CKPT_FAMILY_HF;
    jo.from.framework = CKPT_FAMILY_MEGATRON;
    jo.from.iteration = a->iteration;
    jo.from.true_vocab_size = a->true_vocab;
    jo.target.max_shard_size = a->max_shard;
    if ((rc = ckpt_outdir_check_apart(a->out, a->in)) < 0 || (rc = ckpt_plan_new(&plan)) < 0 ||
        (rc = cli_plan_drop_option(plan, &a->p)) < 0 || (rc = ckpt_job_plan(plan, a->in, &jo, &src)) < 0)
        goto done;
    if (a->p.dry_run && a->p.json) {
        rc = print_json(a, plan, NULL, 0);
        goto done;
    }
    if (a->p.dry_run) {
        char summary[512];
        snprintf(summary, sizeof summary, "mcore2hf %s -> %s", a->in, a->out);
        rc = cli_plan_dry_run(plan, summary);
        goto done;
    }
    rc = cli_plan_execute("mcore2hf", plan, a->out, &a->p, &rep);
    if (rc == 0 && a->p.json) {
        rc = print_json(a, plan, &rep, cli_now() - start);
    } else if (rc == 0 && !a->p.quiet) {
        char size[32];
        cli_plan_print_dropped(plan, &a->p);
        fprintf(stderr, "wrote %s: %zu tensors in %zu files, %s in %.2f s\n", a->out, tensors_written(plan), rep.files,
                cli_human_size(rep.bytes_written, size, sizeof size), cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
    return rc < 0 ? cli_fail("mcore2hf") : CLI_EXIT_OK;
}

int cli_mcore2hf(int argc, char **argv)
{
    ckpt_convert_options write = CKPT_CONVERT_OPTIONS_INIT;
    mcore2hf_args a;
    int rc;

    memset(&a, 0, sizeof a);
    a.p.write = write;
    a.iteration = -1;
    rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    return run(&a);
}
