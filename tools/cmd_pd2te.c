/* ckptconv pd2te / te2pd IN_DIR OUT_DIR: PaddleNLP LLaMA <-> Transformer Engine layers,
 * through a tensor map (formats/maps/llama_pd2te.json or --map), file by file, index json
 * included. Everything is planned (and every error found) before the first byte is
 * written; the output directory appears whole or not at all. */
#include "pd2te.h"

#include <ckpt/sys/common.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static int load_map(const pd2te_args *a, ckpt_map **out)
{
    ckpt_map *m = NULL;
    int rc;

    if (!a->map_path)
        return ckpt_map_builtin(out, a->direction == TO_TE ? "llama_pd2te" : "llama_te2pd");
    if ((rc = ckpt_map_load(&m, a->map_path)) < 0 || a->direction == TO_TE) {
        *out = m;
        return rc;
    }
    rc = ckpt_map_invert(m, out);
    ckpt_map_free(m);
    return rc;
}

/* A config without num_key_value_heads describes a model without GQA (PaddleNLP's and
 * HF's LlamaConfig default it to num_attention_heads). Only a config says so: a lone
 * --num-attention-heads flag is not taken to mean it. */
static int default_kv_heads(const pd2te_args *a, ckpt_map_params *p)
{
    int64_t heads, kv;

    if (a->heads || ckpt_map_params_get(p, "num_key_value_heads", &kv) ||
        !ckpt_map_params_get(p, "num_attention_heads", &heads))
        return 0;
    return ckpt_map_params_set(p, "num_key_value_heads", heads);
}

/* A PaddleNLP config that pd2te reads must describe a LLaMA: its map knows no other model. */
static int load_config(const pd2te_args *a, const char *path, ckpt_map_params *p)
{
    char *text = NULL;
    int rc = ckpt_map_params_load_json(p, path);

    if (rc == 0 && a->direction == TO_TE && (rc = cli_read_text(path, &text)) == 0)
        rc = ckpt_paddle_layout_check(path, text, 0, 1, 1);
    free(text);
    return rc;
}

static int load_params(const pd2te_args *a, ckpt_map_params **out)
{
    char *config = NULL;
    struct stat st;
    int rc;

    if ((rc = ckpt_map_params_new(out)) < 0)
        return rc;
    if ((a->heads && (rc = ckpt_map_params_set(*out, "num_attention_heads", a->heads)) < 0) ||
        (a->kv_heads && (rc = ckpt_map_params_set(*out, "num_key_value_heads", a->kv_heads)) < 0))
        return rc;
    if (a->config)
        return (rc = load_config(a, a->config, *out)) < 0 ? rc : default_kv_heads(a, *out);
    if (asprintf(&config, "%s/config.json", a->in) < 0)
        return ckpt_error_oom();
    if (stat(config, &st) == 0)
        rc = load_config(a, config, *out);
    free(config);
    return rc < 0 ? rc : default_kv_heads(a, *out);
}

/* The last error again, with "<prefix>: " before it and suffix after it; its class stays. */
static int prefix_error(int rc, const char *prefix, const char *suffix)
{
    char *message = strdup(ckpt_error_last()->message);

    if (!message)
        return ckpt_error_oom();
    ckpt_error_setc(rc, ckpt_error_last()->klass, "%s%s%s%s", prefix ? prefix : "", prefix ? ": " : "", message,
                    suffix);
    free(message);
    return rc;
}

/* The checkpoint of member i when it is a model file (ckpt_paddle_open opened them all). */
static const ckpt_ckpt *model_of(const pd_job *j, size_t i)
{
    const ckpt_ckpt *ck = NULL;

    if (strcmp(ckpt_set_member_at(j->set, i)->role, "model") != 0 || ckpt_set_member_open(j->set, i, &ck) < 0)
        return NULL;
    return ck;
}

/* Which side the names are on, over every model file at once: a TE directory given to
 * pd2te is refused before anything is planned. */
static int detect_side(const ckpt_map *m, const pd_job *j, const char *other_cmd)
{
    const char **names;
    const ckpt_ckpt *ck;
    size_t n = 0, i, k;
    int rc;

    for (i = 0; i < ckpt_set_member_count(j->set); i++)
        n += (ck = model_of(j, i)) ? ckpt_tensor_count(ck) : 0;
    if (!(names = malloc((n ? n : 1) * sizeof *names)))
        return ckpt_error_oom();
    n = 0;
    for (i = 0; i < ckpt_set_member_count(j->set); i++)
        for (k = 0, ck = model_of(j, i); ck && k < ckpt_tensor_count(ck); k++)
            names[n++] = ckpt_tensor_at(ck, k)->name;
    rc = ckpt_map_detect(m, names, n);
    free(names);
    if (rc < 0) {
        char hint[64];
        snprintf(hint, sizeof hint, " (that is 'ckptconv %s')", other_cmd);
        return prefix_error(rc, ckpt_set_info_of(j->set)->root,
                            ckpt_error_last()->klass == CKPT_ERRCLASS_MAP_DIRECTION ? hint : "");
    }
    return 0;
}

/* The map applied to one group's tensors, its nodes built in the plan's graph. */
static int map_group(pd_job *j, size_t g, const ckpt_map *m, const ckpt_map_params *p, const pd2te_args *a)
{
    const ckpt_paddle_group *grp = ckpt_paddle_group_at(j->dir, g);
    ckpt_map_input *in;
    size_t n = 0, i, k;
    int rc;

    if ((rc = ckpt_paddle_group_check(j->dir, g)) < 0)
        return rc;
    for (i = 0; i < grp->n_files; i++)
        n += ckpt_tensor_count(model_of(j, grp->files[i]));
    if (!(in = malloc((n ? n : 1) * sizeof *in)))
        return ckpt_error_oom();
    n = 0;
    for (i = 0; i < grp->n_files && rc == 0; i++) {
        const ckpt_ckpt *ck = model_of(j, grp->files[i]);
        for (k = 0; k < ckpt_tensor_count(ck) && rc == 0; k++, n++) {
            in[n].name = ckpt_tensor_at(ck, k)->name;
            in[n].home = grp->files[i];
            rc = ckpt_node_tensor(ckpt_plan_graph(j->plan), ckpt_tensor_at(ck, k), &in[n].node);
        }
    }
    if (rc == 0) {
        const char *variants[4] = { NULL };
        memcpy(variants, a->variants, a->n_variants * sizeof *variants);
        rc = ckpt_map_apply(m, p, ckpt_plan_graph(j->plan), in, n, a->n_variants ? variants : NULL, &j->results[g]);
    }
    free(in);
    if (rc < 0) {
        char where[4096], hint[512] = "";
        snprintf(where, sizeof where, "%s/%s", a->in,
                 ckpt_set_member_at(j->set, grp->index >= 0 ? (size_t)grp->index : grp->files[0])->rel);
        if (ckpt_error_last()->klass == CKPT_ERRCLASS_MAP_PARAM)
            snprintf(hint, sizeof hint, "\n  give the model's head counts with --num-attention-heads and "
                     "--num-key-value-heads, or put its config.json in %s (or name it with --config)%s", a->in,
                     a->direction == TO_PD ? "; an equal three-way split of layernorm_qkv is only right without "
                                             "GQA, so it is not guessed" : "");
        return prefix_error(rc, where, hint);
    }
    return 0;
}

/* The group's index, rewritten with the names its files now hold. */
static int plan_index(pd_job *j, size_t g)
{
    const ckpt_map_result *r = j->results[g];
    size_t n = ckpt_map_result_count(r), k;
    const char **names = malloc((n + 1) * sizeof *names), **files = malloc((n + 1) * sizeof *files);
    const ckpt_member *index;
    ckpt_buf json = CKPT_BUF_INIT;
    uint64_t total = 0;
    int rc;

    if (!names || !files) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (k = 0; k < n; k++) {
        const ckpt_map_output *o = ckpt_map_result_at(r, k);
        names[k] = o->name;
        files[k] = ckpt_set_member_at(j->set, o->home)->rel;
        total += pd_node_bytes(o->node);
    }
    index = ckpt_set_member_at(j->set, (size_t)ckpt_paddle_group_at(j->dir, g)->index);
    j->origin[ckpt_plan_file_count(j->plan)] = g;
    if ((rc = ckpt_paddle_index_json(j->dir, g, names, files, n, total, &json)) == 0)
        rc = ckpt_plan_add_bytes(j->plan, index->rel, json.data, json.len);
done:
    ckpt_buf_dispose(&json);
    free(names);
    free(files);
    return rc;
}

/* Every output file: the model files in member order, the indexes, the files copied. */
static int plan_files(pd_job *j)
{
    size_t n = ckpt_set_member_count(j->set), i, k, f;
    const ckpt_ckpt *ck;
    int rc = 0;

    if (!(j->origin = calloc(n + ckpt_paddle_extra_count(j->dir) + 1, sizeof *j->origin)))
        return ckpt_error_oom();
    for (i = 0; i < n && rc == 0; i++) {
        const ckpt_map_result *r = j->results[j->group_of[i]];
        if (!(ck = model_of(j, i)))
            continue;
        if ((rc = ckpt_plan_add_file(j->plan, ckpt_set_member_at(j->set, i)->rel, ckpt_format_name(ck), &f)) < 0)
            break;
        j->origin[f] = i;
        for (k = 0; k < ckpt_map_result_count(r) && rc == 0; k++) {
            const ckpt_map_output *o = ckpt_map_result_at(r, k);
            if (o->home == i)
                rc = ckpt_plan_add_tensor(j->plan, f, o->name, o->node, 0, NULL);
        }
    }
    for (i = 0; i < ckpt_paddle_group_count(j->dir) && rc == 0; i++)
        if (ckpt_paddle_group_at(j->dir, i)->index >= 0)
            rc = plan_index(j, i);
    for (i = 0; i < ckpt_paddle_extra_count(j->dir) && rc == 0; i++) {
        const ckpt_paddle_extra *x = ckpt_paddle_extra_at(j->dir, i);
        if (!x->skip)
            rc = ckpt_plan_add_copy(j->plan, x->rel, x->path);
    }
    return rc;
}

static int plan_job(pd_job *j, const ckpt_map *m, const ckpt_map_params *p, const pd2te_args *a)
{
    size_t n_groups = ckpt_paddle_group_count(j->dir), g, i;
    int rc;

    j->results = calloc(n_groups + 1, sizeof *j->results);
    j->group_of = calloc(ckpt_set_member_count(j->set) + 1, sizeof *j->group_of);
    if (!j->results || !j->group_of)
        return ckpt_error_oom();
    for (g = 0; g < n_groups; g++)
        for (i = 0; i < ckpt_paddle_group_at(j->dir, g)->n_files; i++)
            j->group_of[ckpt_paddle_group_at(j->dir, g)->files[i]] = g;
    if ((rc = ckpt_plan_new(&j->plan)) < 0)
        return rc;
    for (g = 0; g < n_groups && rc == 0; g++)
        rc = map_group(j, g, m, p, a);
    return rc < 0 ? rc : plan_files(j);
}

static void job_free(pd_job *j)
{
    size_t g;

    for (g = 0; j->results && j->dir && g < ckpt_paddle_group_count(j->dir); g++)
        ckpt_map_result_free(j->results[g]);
    free(j->results);
    free(j->group_of);
    free(j->origin);
    ckpt_plan_free(j->plan);
    ckpt_paddle_close(j->dir);
    ckpt_set_close(j->set);
}

static void print_summary(const pd2te_args *a, const pd_job *j, const ckpt_plan_report *rep, const char *map,
                          double seconds)
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

static int run_layout(const pd2te_args *a, const ckpt_map *m, const ckpt_map_params *params)
{
    const char *variants[4] = { NULL };
    char *config = NULL;
    struct stat st;
    pd_layout_job job;
    int rc;

    if (!a->config && asprintf(&config, "%s/config.json", a->in) < 0)
        return ckpt_error_oom();
    memset(&job, 0, sizeof job);
    memcpy(variants, a->variants, a->n_variants * sizeof *variants);
    job.cmd = a->cmd;
    job.in = a->in;
    job.out = a->out;
    job.to_te = a->direction == TO_TE;
    job.tp = (int)a->tp;
    job.pp = (int)a->pp;
    job.map = m;
    job.params = params;
    job.variants = a->n_variants ? variants : NULL;
    job.config = a->config ? a->config : stat(config, &st) == 0 ? config : NULL;
    job.run = &a->run;
    rc = pd_run_layout(&job);
    free(config);
    return rc;
}

static int run(const pd2te_args *a)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_plan_report rep;
    ckpt_map *m = NULL;
    ckpt_map_params *params = NULL;
    cJSON *report = NULL;
    pd_job j;
    double start = cli_now();
    int rc;

    memset(&j, 0, sizeof j);
    memset(&rep, 0, sizeof rep);
    so.layout = "paddle";
    if (a->tp || a->pp) {
        if ((rc = load_map(a, &m)) == 0 && (rc = load_params(a, &params)) == 0)
            rc = run_layout(a, m, params);
        goto done;
    }
    if ((rc = ckpt_outdir_check_apart(a->out, a->in)) < 0 || (rc = load_map(a, &m)) < 0 ||
        (rc = load_params(a, &params)) < 0 || (rc = ckpt_set_open(&j.set, a->in, &so)) < 0 ||
        (rc = ckpt_paddle_open(&j.dir, j.set)) < 0 ||
        (rc = detect_side(m, &j, a->direction == TO_TE ? "te2pd" : "pd2te")) < 0 ||
        (rc = plan_job(&j, m, params, a)) < 0)
        goto done;
    if (!(report = pd_report_new(a->cmd, a->in, a->out, ckpt_map_name(m), &j))) {
        rc = ckpt_error_oom();
        goto done;
    }
    if (a->run.dry_run) {
        if (a->run.json) {
            rc = pd_report_print(report, &j, NULL, 0);
            report = NULL;
        } else {
            pd_print_plan(&j);
        }
        goto done;
    }
    if ((rc = cli_plan_execute(a->cmd, j.plan, a->out, &a->run, &rep)) < 0)
        goto done;
    if (a->run.json) {
        rc = pd_report_print(report, &j, &rep, cli_now() - start);
        report = NULL;
    } else if (!a->run.quiet) {
        print_summary(a, &j, &rep, ckpt_map_name(m), cli_now() - start);
    }

done:
    ckpt_plan_report_dispose(&rep);
    cJSON_Delete(report);
    job_free(&j);
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
