/* ckptconv mcore2hf ROOT OUT: a Megatron-LM (mcore GPT, LLaMA-style) checkpoint at any
 * TP/PP layout -> a Hugging Face LLaMA, Mistral or Qwen2 directory transformers loads. */
#include "cli.h"

#include <ckpt/sys/common.h>
#include <cjson/cJSON.h>
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
"Convert a Megatron-LM mcore GPT checkpoint of a LLaMA-style model (RMSNorm, SwiGLU,\n"
"RoPE, no linear biases but Qwen2's q/k/v ones; GQA or not; --ckpt-format torch or\n"
"torch_dist) at any TP/PP/VPP layout into a Hugging Face directory of its family:\n"
"OUT/config.json (LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM: args'\n"
"hf_model_type, else add_qkv_bias is qwen2, a window_size mistral, anything else llama;\n"
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
"  ckptconv mcore2hf checkpoints/llama llama-hf/ --true-vocab-size 32000 --max-shard-size 2GB\n");
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

static int64_t arg_int(const ckpt_megatron *m, const char *name, int64_t fallback)
{
    const ckpt_value *v = ckpt_megatron_arg(ckpt_megatron_args(m), name);
    return v && v->kind == CKPT_VAL_INT ? v->u.integer : fallback;
}

/* The map's parameters from args: head counts, head size, both vocabulary sizes. */
static int set_params(const ckpt_megatron *m, ckpt_map_params *p, int64_t padded_rows)
{
    const ckpt_megatron_info *info = ckpt_megatron_info_of(m);
    const ckpt_value *gqa = ckpt_megatron_arg(ckpt_megatron_args(m), "group_query_attention");
    int64_t heads = arg_int(m, "num_attention_heads", 0), hidden = arg_int(m, "hidden_size", 0);
    int64_t groups = gqa && gqa->kind == CKPT_VAL_BOOL && gqa->u.boolean ? arg_int(m, "num_query_groups", heads) : heads;
    int rc;

    if (!info->true_vocab_size)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MAP_PARAM,
                               "the true vocabulary size is unknown (args.vocab_size is not set): give "
                               "--true-vocab-size");
    if ((rc = ckpt_map_params_set(p, "num_attention_heads", heads)) < 0 ||
        (rc = ckpt_map_params_set(p, "num_key_value_heads", groups)) < 0 ||
        (rc = ckpt_map_params_set(p, "hidden_size", hidden)) < 0 ||
        (rc = ckpt_map_params_set(p, "head_dim", arg_int(m, "kv_channels", heads ? hidden / heads : 0))) < 0 ||
        (rc = ckpt_map_params_set(p, "vocab_size", info->true_vocab_size)) < 0)
        return rc;
    return ckpt_map_params_set(p, "padded_vocab_size", padded_rows);
}

/* The config.json made from args is read back as hf2mcore reads one and held against the
 * tensors written with it, so that no value of args that does not fit them is carried. */
static int check_config(const mcore2hf_args *a, const ckpt_buf *config, const char *const *names,
                        const ckpt_node *const *nodes, size_t n)
{
    ckpt_map_input *in = calloc(n + 1, sizeof *in);
    ckpt_hf_llama_dims d;
    ckpt_buf what = CKPT_BUF_INIT;
    size_t i;
    int rc;

    if (!in || ckpt_buf_printf(&what, "config.json made from the args of %s", a->in) < 0) {
        free(in);
        ckpt_buf_dispose(&what);
        return ckpt_error_oom();
    }
    for (i = 0; i < n; i++) {
        in[i].name = names[i];
        in[i].node = nodes[i];
    }
    ckpt_hf_llama_dims_init(&d);
    rc = ckpt_hf_llama_dims_parse((const char *)what.data, (const char *)config->data, config->len, &d);
    if (rc == 0)
        rc = ckpt_hf_llama_check_tensors(&d, (const char *)what.data, a->in, in, n);
    free(in);
    ckpt_buf_dispose(&what);
    return rc;
}

/* Left out of every conversion, and listed. */
#define EXTRA_STATE_RULE "module metadata (_extra_state), which a Hugging Face model has no place for"

/* generation_config.json where hf2mcore kept it; a note on what config.json takes from
 * defaults. */
static int add_carried(ckpt_plan *plan, const ckpt_value *args)
{
    ckpt_buf b = CKPT_BUF_INIT;
    int rc;

    if ((rc = ckpt_hf_generation_config_of(args, &b)) == 0 && b.len)
        rc = ckpt_plan_add_bytes(plan, "generation_config.json", b.data, b.len);
    ckpt_buf_clear(&b);
    if (rc == 0 && (rc = ckpt_hf_llama_config_note(args, &b)) == 0 && b.len)
        rc = ckpt_plan_note(plan, "config.json", (const char *)b.data);
    ckpt_buf_dispose(&b);
    return rc;
}

static int print_json(const mcore2hf_args *a, const ckpt_plan *plan, const ckpt_plan_report *rep, double seconds)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "command", "mcore2hf");
    cJSON_AddStringToObject(o, "input", a->in);
    cJSON_AddStringToObject(o, "output", a->out);
    return cli_plan_report(o, plan, rep, seconds);
}

static int run(const mcore2hf_args *a)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_report rep;
    ckpt_set *set = NULL;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map *map = NULL;
    ckpt_map_params *params = NULL;
    ckpt_map_result *res = NULL;
    ckpt_map_input *inputs = NULL;
    const char **names = NULL;
    const ckpt_node **nodes = NULL;
    size_t *perm = NULL;
    ckpt_buf config = CKPT_BUF_INIT;
    ckpt_dtype dtype = CKPT_DTYPE_F32;
    size_t i, k, n = 0, n_out;
    int64_t padded_rows = 0;
    int te = 0, rc;
    double start = cli_now();

    memset(&rep, 0, sizeof rep);
    so.layout = "megatron";
    so.iteration = a->iteration;
    mo.true_vocab_size = a->true_vocab;
    if ((rc = ckpt_outdir_check_apart(a->out, a->in)) < 0 || (rc = ckpt_set_open(&set, a->in, &so)) < 0 ||
        (rc = ckpt_plan_new(&plan)) < 0 || (rc = cli_plan_drop_option(plan, &a->p)) < 0)
        goto done;
    mo.leave_out = cli_plan_leave_out;
    mo.leave_out_payload = plan;
    if ((rc = ckpt_megatron_open(&m, set, ckpt_plan_graph(plan), &mo)) < 0 || (rc = ckpt_hf_llama_args_check(ckpt_megatron_args(m))) < 0)
        goto done;
    inputs = calloc(ckpt_megatron_tensor_count(m) + 1, sizeof *inputs);
    if (!inputs) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < ckpt_megatron_tensor_count(m); i++) {
        const ckpt_node *full;
        ckpt_tensor_layout l;
        const char *name = ckpt_megatron_tensor_at(m, i, &full, &l);
        size_t len = strlen(name);
        int left = ckpt_plan_leave_out(plan, name,
                                       len > 13 && strcmp(name + len - 13, "._extra_state") == 0 ? EXTRA_STATE_RULE
                                                                                                 : NULL);
        if (left != 0) {
            if (left < 0) {
                rc = left;
                goto done;
            }
            continue;
        }
        te |= strstr(name, "linear_qkv.layer_norm_weight") != NULL;
        if (l.tp == CKPT_TP_VOCAB) {
            padded_rows = ckpt_node_shape(full)[0];
            dtype = ckpt_node_dtype(full);
        }
        inputs[n].name = name;
        inputs[n].node = full;
        inputs[n++].home = 0;
    }
    if ((rc = ckpt_map_builtin(&map, te ? "megatron_hf_llama" : "megatron_hf_llama_local")) < 0 ||
        (rc = ckpt_map_params_new(&params)) < 0 || (rc = set_params(m, params, padded_rows)) < 0 ||
        (rc = ckpt_plan_check_drop_patterns(plan)) < 0 ||
        (rc = ckpt_map_apply(map, params, ckpt_plan_graph(plan), inputs, n, NULL, &res)) < 0 ||
        (rc = ckpt_plan_check_taken(a->in, "mcore2hf", res)) < 0)
        goto done;
    n_out = ckpt_map_result_count(res);
    names = calloc(n_out + 1, sizeof *names);
    nodes = calloc(n_out + 1, sizeof *nodes);
    perm = calloc(n_out + 1, sizeof *perm);
    if (!names || !nodes || !perm) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < n_out; i++)
        names[i] = ckpt_map_result_at(res, i)->name;
    if ((rc = ckpt_hf_llama_order(names, n_out, perm)) < 0)
        goto done;
    for (i = 0, k = 0; i < n_out; i++) {
        if (ckpt_hf_llama_tied_copy(ckpt_megatron_args(m), ckpt_map_result_at(res, perm[i])->name))
            continue;
        names[k] = ckpt_map_result_at(res, perm[i])->name;
        nodes[k++] = ckpt_map_result_at(res, perm[i])->node;
    }
    n_out = k;
    if ((rc = ckpt_hf_plan_safetensors(plan, names, nodes, n_out, a->max_shard)) < 0 ||
        (rc = ckpt_hf_llama_config(ckpt_megatron_args(m), ckpt_megatron_info_of(m)->true_vocab_size, dtype,
                                   &config)) < 0 ||
        (rc = check_config(a, &config, names, nodes, n_out)) < 0 ||
        (rc = ckpt_plan_add_bytes(plan, "config.json", config.data, config.len)) < 0 ||
        (rc = add_carried(plan, ckpt_megatron_args(m))) < 0)
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
        fprintf(stderr, "wrote %s: %zu tensors in %zu files, %s in %.2f s\n", a->out, n_out, rep.files,
                cli_human_size(rep.bytes_written, size, sizeof size), cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    ckpt_buf_dispose(&config);
    free(names);
    free(nodes);
    free(perm);
    free(inputs);
    ckpt_map_result_free(res);
    ckpt_map_params_free(params);
    ckpt_map_free(map);
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
    ckpt_set_close(set);
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
