/* ckptconv paddle2hf / hf2paddle: PaddleNLP LLaMA, Qwen2 (any TP/PP layout) or Mixtral (any TP)
 * <-> a Hugging Face directory, through the family's map (paddle_llama_hf, paddle_qwen2_hf,
 * paddle_mixtral_hf) and its inverse. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <ckpt/framework.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct paddle_hf_args {
    const char *cmd, *in, *out;
    int to_hf;
    int tp, pp, fused_qkv, fused_ffn;
    uint64_t max_shard;
    cli_plan_args p;
} paddle_hf_args;

static void paddle2hf_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv paddle2hf IN_DIR OUT [options]\n"
"\n"
"Convert a PaddleNLP LLaMA, Qwen2 or Mixtral checkpoint directory\n"
"(model_state.pdparams, the model_state.tpXX_ppYY.pdparams files of any\n"
"tensor/pipeline-parallel layout, or size shards with their index) into a Hugging\n"
"Face directory transformers loads: OUT/config.json (LlamaForCausalLM,\n"
"Qwen2ForCausalLM or MixtralForCausalLM, from IN_DIR/config.json) and\n"
"model.safetensors, or model-0000i-of-0000n.safetensors with\n"
"model.safetensors.index.json when larger than --max-shard-size.\n"
"\n"
"The ranks are merged first (PaddleNLP's TP rules:\n"
"formats/maps/paddlenlp_llama.json, paddlenlp_qwen2.json, paddlenlp_mixtral.json),\n"
"then llama.* (qwen2.*, mixtral.*) becomes model.*, every Linear weight is\n"
"transposed from PaddleNLP's [in, out] to [out, in] (an untied lm_head, Mixtral's\n"
"router and experts too), a fused qkv_proj is split per KV group and\n"
"gate_up_fused_proj into gate_proj and up_proj. Qwen2's q/k/v biases are copied;\n"
"its tied lm_head, saved as the embedding, is left out. Both sides use rotate-half\n"
"RoPE, so nothing is permuted. Tensors keep their dtype (bf16 stays bf16). The\n"
"optimizer state and the tokenizer files are not converted.\n"
"\n"
"options:\n"
"  --max-shard-size SIZE   largest safetensors file (default 5G, as save_pretrained)\n"
"  --dry-run               print every output file and tensor; write nothing\n"
"  --json                  one JSON report on stdout (also with --dry-run)\n"
"  --drop PATTERN          leave out the input tensors PATTERN matches (a glob over\n"
"                          the whole name; repeatable); an input tensor that no rule\n"
"                          takes is an error unless dropped. The report lists them.\n"
"  --memory SIZE, --threads N, --force, -q/--quiet, -h/--help\n"
"\n"
"examples:\n"
"  ckptconv paddle2hf llama-7b-tp2pp2/ llama-7b-hf/\n"
"  ckptconv paddle2hf ckpt/ hf/ --max-shard-size 2G --dry-run\n");
}

static void hf2paddle_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv hf2paddle HF_DIR OUT [--tp N --pp M] [options]\n"
"\n"
"Convert a Hugging Face LLaMA, Qwen2 or Mixtral directory (config.json and\n"
"model.safetensors, shards with model.safetensors.index.json, or pytorch_model.bin)\n"
"into a PaddleNLP checkpoint at TP N, PP M: OUT/model_state[.tpXX][_ppYY].pdparams\n"
"as PaddleNLP's trainer names them, and a PaddleNLP config.json (LlamaForCausalLM,\n"
"Qwen2ForCausalLM or MixtralForCausalLM). Weights are transposed to PaddleNLP's\n"
"[in, out]; q/k/v and gate/up stay separate (PaddleNLP's defaults) unless\n"
"--fused-qkv (qkv_proj, interleaved per KV group, Qwen2's biases alike) or --fused-ffn\n"
"(gate_up_fused_proj, cut [gate_r | up_r] per TP rank) ask otherwise. Qwen2's q/k/v\n"
"biases are cut with their weights; Mixtral's experts are cut like a dense MLP, its\n"
"router kept whole (PaddleNLP has no Mixtral pipeline or fused layouts: PP 1,\n"
"unfused). Pipeline stages hold global layer indices. Tensors keep their dtype;\n"
"bf16 is written as paddle.save writes it (uint16 arrays).\n"
"\n"
"options:\n"
"  --tp N, --pp M          target layout (default 1, 1)\n"
"  --fused-qkv             write qkv_proj (fuse_attention_qkv)\n"
"  --fused-ffn             write gate_up_fused_proj (fuse_attention_ffn)\n"
"  --dry-run               print every output file and tensor; write nothing\n"
"  --json                  one JSON report on stdout (also with --dry-run)\n"
"  --drop PATTERN          leave out the input tensors PATTERN matches (a glob over\n"
"                          the whole name; repeatable); an input tensor that no rule\n"
"                          takes is an error unless dropped. The report lists them.\n"
"  --memory SIZE, --threads N, --force, -q/--quiet, -h/--help\n"
"\n"
"examples:\n"
"  ckptconv hf2paddle Llama-2-7b-hf/ llama-7b-pd/ --tp 2 --fused-ffn\n");
}

static int parse_args(int argc, char **argv, paddle_hf_args *a)
{
    enum { O_TP = 256, O_PP, O_QKV, O_FFN, O_SHARD };
    static const struct option longopts[] = {
        { "tp", required_argument, NULL, O_TP }, { "pp", required_argument, NULL, O_PP },
        { "fused-qkv", no_argument, NULL, O_QKV }, { "fused-ffn", no_argument, NULL, O_FFN },
        { "max-shard-size", required_argument, NULL, O_SHARD }, CLI_PLAN_LONGOPTS,
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        rc = 0;
        if ((c == O_TP || c == O_PP || c == O_QKV || c == O_FFN) && a->to_hf)
            return cli_usage_error(a->cmd, "--%s is an option of hf2paddle",
                                   c == O_TP ? "tp" : c == O_PP ? "pp" : c == O_QKV ? "fused-qkv" : "fused-ffn");
        if (c == O_SHARD && !a->to_hf)
            return cli_usage_error(a->cmd, "--max-shard-size is an option of paddle2hf");
        switch (c) {
        case O_TP:
        case O_PP:
            rc = cli_option_parallel(a->cmd, c == O_TP ? "--tp" : "--pp", optarg, c == O_TP ? &a->tp : &a->pp);
            if (rc != 0)
                return rc;
            break;
        case O_QKV: a->fused_qkv = 1; break;
        case O_FFN: a->fused_ffn = 1; break;
        case O_SHARD:
            if (cli_parse_size(optarg, &a->max_shard) < 0 || a->max_shard == 0)
                return cli_usage_error(a->cmd, "--max-shard-size: expected a size such as 2G, not '%s'", optarg);
            break;
        case 'h':
            (a->to_hf ? paddle2hf_help : hf2paddle_help)(stdout);
            return -1;
        default:
            if ((rc = cli_plan_option(a->cmd, c, optarg, &a->p)) < 0)
                return cli_usage_error(a->cmd, "unknown option");
        }
        if (rc)
            return rc;
    }
    if (argc - optind != 2)
        return cli_usage_error(a->cmd, "expected %s and OUT, got %d argument(s)", a->to_hf ? "IN_DIR" : "HF_DIR",
                               argc - optind);
    a->in = argv[optind];
    a->out = argv[optind + 1];
    return 0;
}

static int print_json(const paddle_hf_args *a, const ckpt_plan *plan, const ckpt_plan_report *rep, double seconds)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "command", a->cmd);
    cJSON_AddStringToObject(o, "input", a->in);
    cJSON_AddStringToObject(o, "output", a->out);
    if (!a->to_hf) {
        cJSON_AddNumberToObject(o, "tp", a->tp);
        cJSON_AddNumberToObject(o, "pp", a->pp);
    }
    return cli_plan_report(o, plan, rep, seconds);
}

/* The job: PaddleNLP -> Hugging Face, or Hugging Face -> PaddleNLP at the target layout with
 * the fused variants asked for. */
static int plan_job(const paddle_hf_args *a, ckpt_plan *plan, ckpt_fw **src)
{
    const char *variants[2];
    ckpt_job_options jo = CKPT_JOB_OPTIONS_INIT;

    jo.name = a->cmd;
    jo.to = a->to_hf ? CKPT_FAMILY_HF : CKPT_FAMILY_PADDLE;
    jo.from.framework = a->to_hf ? CKPT_FAMILY_PADDLE : CKPT_FAMILY_HF;
    jo.from.no_optimizer = 1;
    jo.target.max_shard_size = a->max_shard;
    jo.target.tp = a->tp;
    jo.target.pp = a->pp;
    if (a->fused_qkv)
        variants[jo.target.n_variants++] = "fused_qkv";
    if (a->fused_ffn)
        variants[jo.target.n_variants++] = "fused_ffn";
    jo.target.variants = variants;
    return ckpt_job_plan(plan, a->in, &jo, src);
}

static int run(const paddle_hf_args *a)
{
    ckpt_plan_report rep;
    ckpt_plan *plan = NULL;
    ckpt_fw *src = NULL;
    double start = cli_now();
    int rc;

    memset(&rep, 0, sizeof rep);
    if ((rc = ckpt_outdir_check_apart(a->out, a->in)) < 0 || (rc = ckpt_plan_new(&plan)) < 0 ||
        (rc = cli_plan_drop_option(plan, &a->p)) < 0)
        goto done;
    rc = plan_job(a, plan, &src);
    if (rc < 0)
        goto done;
    if (a->p.dry_run) {
        if (a->p.json) {
            rc = print_json(a, plan, NULL, 0);
        } else {
            char summary[512];
            snprintf(summary, sizeof summary, "%s %s -> %s", a->cmd, a->in, a->out);
            rc = cli_plan_dry_run(plan, summary);
        }
        goto done;
    }
    if ((rc = cli_plan_execute(a->cmd, plan, a->out, &a->p, &rep)) < 0)
        goto done;
    if (a->p.json) {
        rc = print_json(a, plan, &rep, cli_now() - start);
    } else if (!a->p.quiet) {
        char size[32];
        cli_plan_print_dropped(plan, &a->p);
        fprintf(stderr, "wrote %s: %zu files, %s in %.2f s\n", a->out, rep.files,
                cli_human_size(rep.bytes_written, size, sizeof size), cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
    return rc < 0 ? cli_fail(a->cmd) : CLI_EXIT_OK;
}

static int paddle_hf_main(int argc, char **argv, const char *cmd, int to_hf)
{
    ckpt_convert_options write = CKPT_CONVERT_OPTIONS_INIT;
    paddle_hf_args a;
    int rc;

    memset(&a, 0, sizeof a);
    a.cmd = cmd;
    a.to_hf = to_hf;
    a.tp = a.pp = 1;
    a.p.write = write;
    rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    return run(&a);
}

int cli_paddle2hf(int argc, char **argv)
{
    return paddle_hf_main(argc, argv, "paddle2hf", 1);
}

int cli_hf2paddle(int argc, char **argv)
{
    return paddle_hf_main(argc, argv, "hf2paddle", 0);
}
