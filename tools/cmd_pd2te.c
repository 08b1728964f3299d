/* ckptconv pd2te / te2pd IN_DIR OUT_DIR: PaddleNLP LLaMA <-> Transformer Engine layers,
 * through a tensor map (formats/maps/llama_pd2te.json or --map), file by file, index json
 * included. Everything is planned (and every error found) before the first byte is
 * written; the output directory appears whole or not at all. */
#include "pd2te.h"

#include <ckpt/framework.h>
#include <ckpt/sys/common.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum { TO_TE, TO_PD };

typedef struct pd2te_args {
    int direction;
    const char *cmd, *in, *out, *config, *map_path;
    long heads, kv_heads, tp, pp;
    const char *variants[2];
    size_t n_variants;
    cli_plan_args run;
} pd2te_args;

static void pd2te_help(FILE *out, const char *cmd)
{
    int to_te = strcmp(cmd, "pd2te") == 0;
    fprintf(out,
"usage: ckptconv %s IN_DIR OUT_DIR [options]\n"
"       ckptconv %s --input_ckpt_path IN_DIR --output_ckpt_path OUT_DIR [--mode %s] [options]\n"
"\n",
            cmd, cmd, cmd);
    if (to_te)
        fprintf(out,
"Convert a PaddleNLP LLaMA checkpoint directory to Transformer Engine layers (the\n"
"te backend's [out, in] layout), as PaddleNLP's te_llama_ckpt_converter.py does:\n"
"per layer, q/k/v_proj become one layernorm_qkv.weight = concat([q, k, v], axis 1)^T,\n"
"o_proj/gate_up_fused_proj/down_proj are transposed to proj/fc1_weight/fc2_weight, the\n"
"two norms are renamed, and embed_tokens, llama.norm and lm_head are kept.\n"
"Also what the script cannot do: layers 100 and up; a fused qkv_proj input\n"
"(fuse_attention_qkv, split per KV group first: needs the head counts and\n"
"hidden_size); an unfused gate_proj/up_proj input (fused first); size-sharded files\n"
"whose q/k/v sit in different files (the fused tensor goes to q_proj's file).\n");
    else
        fprintf(out,
"Convert a Transformer Engine LLaMA checkpoint directory (as written by pd2te) back\n"
"to PaddleNLP's layout: layernorm_qkv.weight is transposed and split into q/k/v_proj\n"
"in the ratio of the head counts, proj/fc1_weight/fc2_weight are transposed back.\n"
"The head counts are required: an equal three-way split, which the original script\n"
"does without them, is wrong for GQA. te2pd(pd2te(x)) is x, byte for byte.\n");
    fprintf(out,
"\n"
"Every model_state*.pdparams file is converted on its own (tensor-parallel files\n"
"model_state.tpXX[_ppYY].pdparams keep their names; pipeline files keep their global\n"
"layer indices), except the files that one model_state.pdparams.index*.json lists,\n"
"which are converted together; the index is rewritten with the new names. Other\n"
"files (config.json, tokenizer) are copied; *.pdopt and subdirectories are skipped,\n"
"and the summary says so. Only tensors are written: paddle.save's name table\n"
"(StructuredToParameterName@@) names the source layout's parameters and is dropped.\n"
"Tensors are streamed from the mapped input into their place in the output; memory\n"
"stays within --memory whatever the model size. OUT_DIR appears whole or not at all.\n"
"\n"
"options:\n"
"  --num-attention-heads N   model parameters; --num_attention_heads and\n"
"  --num-key-value-heads K   --num_key_value_heads are accepted too. Default: from\n"
"                            config.json (flags win)\n"
"  --config FILE             model config (default IN_DIR/config.json when present)\n"
"  --tp N, --pp M            convert and reshard in one pass: OUT_DIR gets\n"
"                            model_state.tpXX_ppYY.pdparams for TP N, PP M (each\n"
"                            default: the input's); the PaddleNLP-side tensors are cut\n"
"                            as 'ckptconv reshard' cuts them (pd2te: before the\n"
"                            conversion, te2pd: after it), config.json gets\n"
"                            tensor_parallel_degree. Size-sharded inputs come out whole\n"
"                            per rank\n");
    if (!to_te)
        fprintf(out,
"  --fused-qkv               write one qkv_proj per layer (fuse_attention_qkv=True,\n"
"                            interleaved per KV group) instead of q/k/v_proj\n"
"  --unfused-ffn             write gate_proj and up_proj (fuse_attention_ffn=False)\n"
"                            instead of gate_up_fused_proj\n");
    fprintf(out,
"  --map FILE                use this tensor map (JSON, formats/maps/README.md) instead\n"
"                            of the built-in llama_pd2te; %s applies %s\n"
"  --dry-run                 print every output tensor with its source and ops, the\n"
"                            files copied and skipped; write nothing\n"
"  --memory SIZE             working-memory budget, e.g. 512M, 2G (default 512M)\n"
"  --threads N               worker threads (default: all cores)\n"
"  --force                   write into a non-empty OUT_DIR (files of the same name\n"
"                            are replaced, others kept)\n"
"  --json                    print a JSON report on stdout\n"
"  -q, --quiet               no progress bar, no summary\n"
"\n"
"examples:\n",
            cmd, to_te ? "the map" : "its inverse");
    if (to_te)
        fprintf(out,
"  ckptconv pd2te checkpoints/llama-7b-tp2 checkpoints/llama-7b-tp2-te\n"
"  ckptconv pd2te in out --dry-run | less\n");
    else
        fprintf(out,
"  ckptconv te2pd te_ckpt pd_ckpt --num-attention-heads 32 --num-key-value-heads 8\n"
"  ckptconv te2pd te_ckpt pd_ckpt --unfused-ffn     # heads from te_ckpt/config.json\n");
}

static int parse_count(const char *cmd, const char *flag, const char *s, long *out)
{
    long long v = 0;
    int rc = cli_option_int(cmd, flag, s, 1, 1L << 30, &v);

    if (rc == 0)
        *out = (long)v;
    return rc;
}

static int parse_args(pd2te_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "input_ckpt_path", required_argument, NULL, 'I' },
        { "output_ckpt_path", required_argument, NULL, 'O' },
        { "mode", required_argument, NULL, 'M' },
        { "num-attention-heads", required_argument, NULL, 'H' },
        { "num_attention_heads", required_argument, NULL, 'H' },
        { "num-key-value-heads", required_argument, NULL, 'K' },
        { "num_key_value_heads", required_argument, NULL, 'K' },
        { "config", required_argument, NULL, 'c' },
        { "map", required_argument, NULL, 'p' },
        { "fused-qkv", no_argument, NULL, 'Q' },
        { "unfused-ffn", no_argument, NULL, 'F' },
        { "tp", required_argument, NULL, 'T' },
        { "pp", required_argument, NULL, 'P' },
        CLI_PLAN_LONGOPTS,
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *cmd = a->cmd;
    int c, rc, n;

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        const char *variant = c == 'Q' ? "fused_qkv" : "unfused_ffn";
        switch (c) {
        case 'I': a->in = optarg; break;
        case 'O': a->out = optarg; break;
        case 'M':
            if (strcmp(optarg, cmd) != 0)
                return cli_usage_error(cmd, "--mode %s: this is '%s'; run 'ckptconv %s' for %s", optarg, cmd,
                                       strcmp(optarg, "pd2te") == 0 || strcmp(optarg, "te2pd") == 0 ? optarg : "pd2te",
                                       optarg);
            break;
        case 'H':
            if ((rc = parse_count(cmd, "--num-attention-heads", optarg, &a->heads)) != 0)
                return rc;
            break;
        case 'K':
            if ((rc = parse_count(cmd, "--num-key-value-heads", optarg, &a->kv_heads)) != 0)
                return rc;
            break;
        case 'T':
        case 'P':
            if ((rc = cli_option_parallel(cmd, c == 'T' ? "--tp" : "--pp", optarg, &n)) != 0)
                return rc;
            *(c == 'T' ? &a->tp : &a->pp) = n;
            break;
        case 'c': a->config = optarg; break;
        case 'p': a->map_path = optarg; break;
        case 'Q':
        case 'F':
            if (a->direction == TO_TE)
                return cli_usage_error(cmd, "--%s is an output layout of te2pd; pd2te reads either layout as it is",
                                       c == 'Q' ? "fused-qkv" : "unfused-ffn");
            if (a->n_variants == 0 || strcmp(a->variants[0], variant) != 0)
                a->variants[a->n_variants++] = variant;
            break;
        case 'h': pd2te_help(stdout, cmd); return -1;
        default:
            if ((rc = cli_plan_option(cmd, c, optarg, &a->run)) != 0)
                return rc < 0 ? cli_usage_error(cmd, "unknown option") : rc;
        }
    }
    if (!a->in && optind < argc)
        a->in = argv[optind++];
    if (!a->out && optind < argc)
        a->out = argv[optind++];
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!a->in || !a->out)
        return cli_usage_error(cmd, "expected IN_DIR and OUT_DIR");
    if (a->run.n_drop)
        return cli_usage_error(cmd, "--drop: %s writes every input tensor (a name no rule matches passes through), "
                                    "so none is left out", cmd);
    return 0;
}

/* The last error again, with suffix after it; its code and class stay. */
static int append_error(int rc, const char *suffix)
{
    char *message = strdup(ckpt_error_last()->message);

    if (!message)
        return ckpt_error_oom();
    ckpt_error_setc(rc, ckpt_error_last()->klass, "%s%s", message, suffix);
    free(message);
    return rc;
}

/* What the user can do about a directory on the map's other side, or a head count the map
 * needs. */
static int hint_error(int rc, const pd2te_args *a)
{
    char hint[512];

    if (ckpt_error_last()->klass == CKPT_ERRCLASS_MAP_DIRECTION) {
        snprintf(hint, sizeof hint, " (that is 'ckptconv %s')", a->direction == TO_TE ? "te2pd" : "pd2te");
        return append_error(rc, hint);
    }
    if (ckpt_error_last()->klass != CKPT_ERRCLASS_MAP_PARAM)
        return rc;
    snprintf(hint, sizeof hint, "\n  give the model's head counts with --num-attention-heads and "
             "--num-key-value-heads, or put its config.json in %s (or name it with --config)%s", a->in,
             a->direction == TO_PD ? "; an equal three-way split of layernorm_qkv is only right without "
                                     "GQA, so it is not guessed" : "");
    return append_error(rc, hint);
}

static void print_summary(const pd2te_args *a, const ckpt_paddle_te_job *j, const ckpt_plan_report *rep,
                          const char *map, double seconds)
{
    size_t copied = 0, skipped = 0, models = 0, i;
    char size[32];

    for (i = 0; i < ckpt_paddle_extra_count(j->dir); i++) {
        const ckpt_paddle_extra *x = ckpt_paddle_extra_at(j->dir, i);
        if (x->skip) {
            fprintf(stderr, "skipped %s: %s\n", x->rel, x->skip);
            skipped++;
        } else {
            copied++;
        }
    }
    for (i = 0; i < ckpt_plan_file_count(j->plan); i++)
        models += ckpt_plan_file_at(j->plan, i)->kind == CKPT_PLAN_TENSORS;
    fprintf(stderr, "wrote %s: %zu model file%s converted with %s, %zu copied, %zu skipped (%s) in %.2f s\n", a->out,
            models, models == 1 ? "" : "s", map, copied, skipped, cli_human_size(rep->bytes_written, size, sizeof size),
            seconds);
}

/* File by file: the plan or the files written, reported. */
static int report_files(const pd2te_args *a, const ckpt_paddle_te_job *j, const ckpt_map *m, double start)
{
    ckpt_plan_report rep;
    cJSON *report = pd_report_new(a->cmd, a->in, a->out, ckpt_map_name(m), j);
    int rc = 0;

    memset(&rep, 0, sizeof rep);
    if (!report)
        return ckpt_error_oom();
    if (a->run.dry_run) {
        if (a->run.json) {
            rc = pd_report_print(report, j, NULL, 0);
            report = NULL;
        } else {
            pd_print_plan(j);
        }
        goto done;
    }
    if ((rc = cli_plan_execute(a->cmd, j->plan, a->out, &a->run, &rep)) < 0)
        goto done;
    if (a->run.json) {
        rc = pd_report_print(report, j, &rep, cli_now() - start);
        report = NULL;
    } else if (!a->run.quiet) {
        print_summary(a, j, &rep, ckpt_map_name(m), cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    cJSON_Delete(report);
    return rc;
}

/* The two layouts of a --tp/--pp pass. */
typedef struct layouts {
    const ckpt_plan *plan;
    int from_tp, from_pp, tp, pp;
} layouts;

static int print_layout_json(const pd2te_args *a, const layouts *l, const ckpt_map *m, const ckpt_plan_report *rep,
                             double seconds)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *from = cJSON_AddObjectToObject(o, "from"), *to = cJSON_AddObjectToObject(o, "to");

    cJSON_AddStringToObject(o, "command", a->cmd);
    cJSON_AddStringToObject(o, "input", a->in);
    cJSON_AddStringToObject(o, "output", a->out);
    cJSON_AddStringToObject(o, "map", ckpt_map_name(m));
    cJSON_AddNumberToObject(from, "tp", l->from_tp);
    cJSON_AddNumberToObject(from, "pp", l->from_pp);
    cJSON_AddNumberToObject(to, "tp", l->tp);
    cJSON_AddNumberToObject(to, "pp", l->pp);
    return cli_plan_report(o, l->plan, rep, seconds);
}

/* --tp/--pp: the plan or the files written, reported with both layouts. */
static int report_layout(const pd2te_args *a, const layouts *l, const ckpt_map *m, double start)
{
    ckpt_plan_report rep;
    int rc;

    memset(&rep, 0, sizeof rep);
    if (a->run.json && a->run.dry_run)
        return print_layout_json(a, l, m, NULL, 0);
    if (a->run.dry_run) {
        char summary[512];
        snprintf(summary, sizeof summary, "%s %s (TP %d, PP %d) -> %s (TP %d, PP %d)", a->cmd, a->in, l->from_tp,
                 l->from_pp, a->out, l->tp, l->pp);
        return cli_plan_dry_run(l->plan, summary);
    }
    if ((rc = cli_plan_execute(a->cmd, l->plan, a->out, &a->run, &rep)) < 0)
        goto done;
    if (a->run.json) {
        rc = print_layout_json(a, l, m, &rep, cli_now() - start);
    } else if (!a->run.quiet) {
        char size[32];
        fprintf(stderr, "wrote %s: %zu files at TP %d, PP %d (from TP %d, PP %d), %s in %.2f s\n", a->out, rep.files,
                l->tp, l->pp, l->from_tp, l->from_pp, cli_human_size(rep.bytes_written, size, sizeof size),
                cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    return rc;
}

/* --tp/--pp: the PaddleNLP model planned by its own framework, pd2te writing Transformer
 * Engine's layers (target impl "te"), te2pd reading them back (source impl "te"). */
static int run_layout(const pd2te_args *a, const ckpt_paddle_te_options *o, double start)
{
    ckpt_job_options jo = CKPT_JOB_OPTIONS_INIT;
    ckpt_plan *plan = NULL;
    ckpt_fw *src = NULL;
    const ckpt_fw_info *info;
    layouts l;
    int rc;

    jo.name = a->cmd;
    jo.from.framework = CKPT_FAMILY_PADDLE;
    jo.from.no_optimizer = 1;
    jo.target.tp = (int)a->tp;
    jo.target.pp = (int)a->pp;
    jo.target.paddle = (ckpt_paddle_target)CKPT_PADDLE_TARGET_INIT;
    if (o->to_te) {
        jo.target.impl = "te";
        jo.target.paddle.te_map = o->map;
        jo.target.paddle.te_params = o->params;
    } else {
        jo.from.impl = "te";
        jo.from.paddle_te = o;
    }
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = ckpt_job_plan(plan, a->in, &jo, &src)) < 0)
        goto done;
    info = ckpt_fw_info_of(src);
    l.plan = plan;
    l.from_tp = info->tp;
    l.from_pp = info->pp;
    l.tp = a->tp ? (int)a->tp : info->tp;
    l.pp = a->pp ? (int)a->pp : info->pp;
    rc = report_layout(a, &l, o->map, start);
done:
    ckpt_plan_free(plan);
    ckpt_fw_close(src);
    return rc;
}

static int run(const pd2te_args *a)
{
    ckpt_paddle_te_options o = CKPT_PADDLE_TE_OPTIONS_INIT;
    const char *variants[4] = { NULL };
    ckpt_map *m = NULL;
    ckpt_map_params *params = NULL;
    ckpt_paddle_te_job j;
    int layout = a->tp || a->pp, to_te = a->direction == TO_TE;
    double start = cli_now();
    int rc;

    memset(&j, 0, sizeof j);
    if ((!layout && (rc = ckpt_outdir_check_apart(a->out, a->in)) < 0) ||
        (rc = ckpt_paddle_te_map(&m, to_te, a->map_path)) < 0 ||
        (rc = ckpt_paddle_te_params(&params, to_te, a->in, a->config, a->heads, a->kv_heads)) < 0 ||
        (layout && (rc = ckpt_outdir_check_apart(a->out, a->in)) < 0))
        goto done;
    memcpy(variants, a->variants, a->n_variants * sizeof *variants);
    o.to_te = to_te;
    o.map = m;
    o.params = params;
    o.variants = a->n_variants ? variants : NULL;
    o.config = a->config;
    if (layout)
        rc = run_layout(a, &o, start);
    else if ((rc = ckpt_paddle_te_plan(&j, a->in, &o)) < 0)
        rc = hint_error(rc, a);
    else
        rc = report_files(a, &j, m, start);
done:
    ckpt_paddle_te_job_dispose(&j);
    ckpt_map_params_free(params);
    ckpt_map_free(m);
    return rc;
}

static int pd2te_main(int argc, char **argv, const char *cmd, int direction)
{
    pd2te_args a;
    int rc;

    memset(&a, 0, sizeof a);
    a.cmd = cmd;
    a.direction = direction;
    a.run.write = (ckpt_convert_options)CKPT_CONVERT_OPTIONS_INIT;
    if ((rc = parse_args(&a, argc, argv)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (run(&a) < 0)
        return cli_fail(cmd);
    return CLI_EXIT_OK;
}

int cli_pd2te(int argc, char **argv)
{
    return pd2te_main(argc, argv, "pd2te", TO_TE);
}

int cli_te2pd(int argc, char **argv)
{
    return pd2te_main(argc, argv, "te2pd", TO_PD);
}
