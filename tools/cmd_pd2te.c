/* ckptconv pd2te / te2pd IN_DIR OUT_DIR: PaddleNLP LLaMA <-> Transformer Engine layers,
 * through a tensor map (formats/maps/llama_pd2te.json or --map), file by file, index json
 * included. Everything is planned (and every error found) before the first byte is
 * written; the output directory appears whole or not at all. */
#include "pd2te.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { TO_TE, TO_PD };

typedef struct pd2te_args {
    int direction;
    const char *cmd, *in, *out, *config, *map_path;
    long heads, kv_heads;
    const char *variants[3];
    size_t n_variants;
    int dry_run, force, json, quiet;
    ckpt_convert_options write;
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
"  --config FILE             model config (default IN_DIR/config.json when present)\n");
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
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end || v < 1 || v > (1L << 30))
        return cli_usage_error(cmd, "%s %s: expected a positive integer", flag, s);
    *out = v;
    return 0;
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
        { "dry-run", no_argument, NULL, 'n' },
        { "memory", required_argument, NULL, 'm' },
        { "threads", required_argument, NULL, 'j' },
        { "force", no_argument, NULL, 'f' },
        { "json", no_argument, NULL, 'J' },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *cmd = a->cmd;
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
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
        case 'c': a->config = optarg; break;
        case 'p': a->map_path = optarg; break;
        case 'Q':
        case 'F':
            if (a->direction == TO_TE)
                return cli_usage_error(cmd, "--%s is an output layout of te2pd; pd2te reads either layout as it is",
                                       c == 'Q' ? "fused-qkv" : "unfused-ffn");
            a->variants[a->n_variants++] = c == 'Q' ? "fused_qkv" : "unfused_ffn";
            break;
        case 'n': a->dry_run = 1; break;
        case 'm':
            if ((rc = cli_option_memory(cmd, optarg, &a->write.memory)) != 0)
                return rc;
            break;
        case 'j':
            if ((rc = cli_option_threads(cmd, optarg, &a->write.threads)) != 0)
                return rc;
            break;
        case 'f': a->force = 1; break;
        case 'J': a->json = 1; break;
        case 'q': a->quiet = 1; break;
        case 'h': pd2te_help(stdout, cmd); return -1;
        default: return cli_usage_error(cmd, "unknown option");
        }
    }
    if (a->n_variants == 2 && strcmp(a->variants[0], a->variants[1]) == 0)
        a->n_variants = 1;
    if (!a->in && optind < argc)
        a->in = argv[optind++];
    if (!a->out && optind < argc)
        a->out = argv[optind++];
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!a->in || !a->out)
        return cli_usage_error(cmd, "expected IN_DIR and OUT_DIR");
    return 0;
}

/* The input and output must not be the same directory, nor one inside the other. */
static int check_distinct(const pd2te_args *a)
{
    char *in = realpath(a->in, NULL), *out = realpath(a->out, NULL);
    int rc = 0;

    if (!out) { /* not there yet: its parent, if that exists */
        char *copy = strdup(a->out), *slash, *parent;
        size_t n = copy ? strlen(copy) : 0;
        while (n > 1 && copy[n - 1] == '/')
            copy[--n] = '\0';
        slash = copy ? strrchr(copy, '/') : NULL;
        if (slash)
            *slash = '\0';
        parent = copy ? realpath(slash ? (*copy ? copy : "/") : ".", NULL) : NULL;
        if (parent && asprintf(&out, "%s/%s", parent, slash ? slash + 1 : copy) < 0)
            out = NULL;
        free(parent);
        free(copy);
    }
    if (in && out) {
        size_t n = strlen(in);
        if (strcmp(in, out) == 0)
            rc = ckpt_error_set(CKPT_EINVALID, "%s and %s are the same directory", a->in, a->out);
        else if (strncmp(in, out, n) == 0 && out[n] == '/')
            rc = ckpt_error_set(CKPT_EINVALID, "%s is inside the input directory %s", a->out, a->in);
    }
    free(in);
    free(out);
    return rc;
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
        return (rc = ckpt_map_params_load_json(*out, a->config)) < 0 ? rc : default_kv_heads(a, *out);
    if (asprintf(&config, "%s/config.json", a->in) < 0)
        return ckpt_error_oom();
    if (stat(config, &st) == 0)
        rc = ckpt_map_params_load_json(*out, config);
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

/* Which side the names are on, over every model file at once: a TE directory given to
 * pd2te is refused before anything is planned. */
static int detect_side(const ckpt_map *m, const pd_dir *d, const char *other_cmd)
{
    const char **names;
    size_t n = 0, i, j;
    int rc;

    for (i = 0; i < d->n_models; i++)
        n += ckpt_tensor_count(d->models[i].ck);
    if (!(names = malloc((n ? n : 1) * sizeof *names)))
        return ckpt_error_oom();
    n = 0;
    for (i = 0; i < d->n_models; i++)
        for (j = 0; j < ckpt_tensor_count(d->models[i].ck); j++)
            names[n++] = ckpt_tensor_at(d->models[i].ck, j)->name;
    rc = ckpt_map_detect(m, names, n);
    free(names);
    if (rc < 0) {
        char hint[64];
        snprintf(hint, sizeof hint, " (that is 'ckptconv %s')", other_cmd);
        return prefix_error(rc, d->path, ckpt_error_last()->klass == CKPT_ERRCLASS_MAP_DIRECTION ? hint : "");
    }
    return 0;
}

/* An index must list exactly the tensors of its files, each in its own file. */
static int check_index(const pd_dir *d, const pd_space *s)
{
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(s->index, "weight_map");
    size_t i, j, n = 0;

    for (i = 0; i < s->n_files; i++) {
        const pd_model_file *f = &d->models[s->files[i]];
        for (j = 0; j < ckpt_tensor_count(f->ck); j++, n++) {
            const char *name = ckpt_tensor_at(f->ck, j)->name;
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(map, name);
            if (!e)
                return ckpt_error_set(CKPT_EFORMAT, "%s/%s: tensor %s of %s is not in its weight_map", d->path,
                                      s->index_name, name, f->name);
            if (strcmp(e->valuestring, f->name) != 0)
                return ckpt_error_set(CKPT_EFORMAT, "%s/%s: weight_map puts %s in %s, but it is in %s", d->path,
                                      s->index_name, name, e->valuestring, f->name);
        }
    }
    if ((size_t)cJSON_GetArraySize(map) != n)
        return ckpt_error_set(CKPT_EFORMAT, "%s/%s: weight_map lists %d tensors, its files hold %zu", d->path,
                              s->index_name, cJSON_GetArraySize(map), n);
    return 0;
}

static int plan_space(const pd_dir *d, const pd_space *s, const ckpt_map *m, const ckpt_map_params *p,
                      ckpt_graph *g, const pd2te_args *a, ckpt_map_result **out)
{
    ckpt_map_input *in;
    size_t n = 0, i, j;
    int rc = 0;

    if (s->index && (rc = check_index(d, s)) < 0)
        return rc;
    for (i = 0; i < s->n_files; i++)
        n += ckpt_tensor_count(d->models[s->files[i]].ck);
    if (!(in = malloc((n ? n : 1) * sizeof *in)))
        return ckpt_error_oom();
    n = 0;
    for (i = 0; i < s->n_files && rc == 0; i++) {
        const ckpt_ckpt *ck = d->models[s->files[i]].ck;
        for (j = 0; j < ckpt_tensor_count(ck) && rc == 0; j++, n++) {
            in[n].name = ckpt_tensor_at(ck, j)->name;
            in[n].home = s->files[i];
            rc = ckpt_node_tensor(g, ckpt_tensor_at(ck, j), &in[n].node);
        }
    }
    if (rc == 0) {
        const char *variants[4] = { NULL };
        memcpy(variants, a->variants, a->n_variants * sizeof *variants);
        rc = ckpt_map_apply(m, p, g, in, n, a->n_variants ? variants : NULL, out);
    }
    free(in);
    if (rc < 0) {
        char where[4096], hint[512] = "";
        snprintf(where, sizeof where, "%s/%s", a->in, s->index_name ? s->index_name : d->models[s->files[0]].name);
        if (ckpt_error_last()->klass == CKPT_ERRCLASS_MAP_PARAM)
            snprintf(hint, sizeof hint, "\n  give the model's head counts with --num-attention-heads and "
                     "--num-key-value-heads, or put its config.json in %s (or name it with --config)%s", a->in,
                     a->direction == TO_PD ? "; an equal three-way split of layernorm_qkv is only right without "
                                             "GQA, so it is not guessed" : "");
        return prefix_error(rc, where, hint);
    }
    return 0;
}

/* ---- writing ---- */

static int write_model(ckpt_outdir *od, const pd_dir *d, size_t i, const ckpt_map_result *r, const pd2te_args *a,
                       cJSON *report, uint64_t *bytes)
{
    const pd_model_file *f = &d->models[i];
    ckpt_graph_output *outs = malloc((ckpt_map_result_count(r) + 1) * sizeof *outs);
    ckpt_convert_options opts = a->write;
    ckpt_convert_report written;
    const char *path;
    size_t n = 0, k;
    int rc;

    if (!outs)
        return ckpt_error_oom();
    for (k = 0; k < ckpt_map_result_count(r); k++) {
        const ckpt_map_output *o = ckpt_map_result_at(r, k);
        if (o->home == i) {
            outs[n].name = o->name;
            outs[n].node = o->node;
            outs[n++].flags = 0;
        }
    }
    if (!(path = ckpt_outdir_file(od, f->name))) {
        free(outs);
        return ckpt_error_last()->code;
    }
    opts.format = ckpt_format_name(f->ck);
    if (!a->quiet && !a->json) {
        opts.progress = cli_progress;
        opts.progress_payload = f->name;
    }
    rc = ckpt_graph_write(outs, n, path, &opts, &written);
    cli_progress_done();
    if (rc == 0) {
        pd_report_file(report, f, i, r, &written, 0);
        *bytes += written.bytes_written;
    }
    ckpt_convert_report_dispose(&written);
    free(outs);
    return rc;
}

static int write_index(ckpt_outdir *od, const pd_dir *d, const pd_space *s, const ckpt_map_result *r, cJSON *report)
{
    size_t n = ckpt_map_result_count(r), k;
    const char **names = malloc((n + 1) * sizeof *names), **files = malloc((n + 1) * sizeof *files);
    uint64_t total = 0;
    const char *path;
    int rc = 0;

    if (!names || !files) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (k = 0; k < n; k++) {
        const ckpt_map_output *o = ckpt_map_result_at(r, k);
        names[k] = o->name;
        files[k] = d->models[o->home].name;
        total += pd_output_bytes(o->node);
    }
    if (!(path = ckpt_outdir_file(od, s->index_name))) {
        rc = ckpt_error_last()->code;
        goto done;
    }
    if ((rc = pd_index_write(path, s->index, names, files, n, total)) == 0)
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(report, "indexes"), cJSON_CreateString(s->index_name));

done:
    free(names);
    free(files);
    return rc;
}

static int copy_file(ckpt_outdir *od, const char *dir, const char *name, uint64_t *bytes)
{
    char *src_path = NULL;
    const char *path = ckpt_outdir_file(od, name);
    ckpt_file *src = NULL;
    ckpt_outfile *dst = NULL;
    int rc;

    if (!path)
        return ckpt_error_last()->code;
    if (asprintf(&src_path, "%s/%s", dir, name) < 0)
        return ckpt_error_oom();
    if ((rc = ckpt_file_open(&src, src_path)) < 0 || (rc = ckpt_outfile_open(&dst, path, 0)) < 0)
        goto done;
    if (src->size && (rc = ckpt_outfile_copy(dst, 0, src, 0, src->size)) < 0)
        goto done;
    *bytes += src->size;
    rc = ckpt_outfile_commit(dst);
    dst = NULL;

done:
    ckpt_outfile_abort(dst);
    ckpt_file_close(src);
    free(src_path);
    return rc;
}

static int write_all(const pd2te_args *a, const pd_dir *d, ckpt_map_result *const *results, cJSON *report, uint64_t *bytes)
{
    ckpt_outdir *od = NULL;
    size_t i;
    int rc;

    if ((rc = ckpt_outdir_begin(&od, a->out, a->force)) < 0)
        return rc;
    for (i = 0; i < d->n_models && rc == 0; i++)
        rc = write_model(od, d, i, results[d->models[i].space], a, report, bytes);
    for (i = 0; i < d->n_spaces && rc == 0; i++)
        if (d->spaces[i].index_name)
            rc = write_index(od, d, &d->spaces[i], results[i], report);
    for (i = 0; i < d->n_others && rc == 0; i++)
        if (!d->others[i].why)
            rc = copy_file(od, d->path, d->others[i].name, bytes);
    if (rc < 0) {
        ckpt_outdir_abort(od);
        return rc;
    }
    return ckpt_outdir_commit(od);
}

static int run(const pd2te_args *a)
{
    ckpt_map *m = NULL;
    ckpt_map_params *params = NULL;
    ckpt_graph *g = NULL;
    ckpt_map_result **results = NULL;
    cJSON *report = NULL;
    pd_dir d;
    uint64_t bytes = 0;
    double start = cli_now();
    size_t i;
    int rc;

    memset(&d, 0, sizeof d);
    if ((rc = check_distinct(a)) < 0 || (rc = load_map(a, &m)) < 0 || (rc = load_params(a, &params)) < 0 ||
        (rc = pd_dir_open(&d, a->in)) < 0)
        goto done;
    if (d.n_models == 0) {
        rc = ckpt_error_set(CKPT_ENOTFOUND, "%s: no model_state*.pdparams files (PaddleNLP writes model_state.pdparams, "
                            "model_state.tpXX_ppYY.pdparams or size-sharded model_state-0000i-of-0000n.pdparams)", a->in);
        goto done;
    }
    if ((rc = detect_side(m, &d, a->direction == TO_TE ? "te2pd" : "pd2te")) < 0 || (rc = ckpt_graph_new(&g)) < 0)
        goto done;
    if (!(results = calloc(d.n_spaces, sizeof *results)) || !(report = pd_report_new(a->cmd, a->in, a->out, ckpt_map_name(m), a->dry_run, &d))) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < d.n_spaces && rc == 0; i++)
        rc = plan_space(&d, &d.spaces[i], m, params, g, a, &results[i]);
    if (rc < 0)
        goto done;
    if (a->dry_run) {
        if (a->json) {
            for (i = 0; i < d.n_models; i++)
                pd_report_file(report, &d.models[i], i, results[d.models[i].space], NULL, 1);
            pd_report_print(report, cli_now() - start);
        } else {
            pd_print_plan(&d, results);
        }
        goto done;
    }
    if ((rc = write_all(a, &d, results, report, &bytes)) < 0)
        goto done;
    if (a->json) {
        pd_report_print(report, cli_now() - start);
    } else if (!a->quiet) {
        size_t copied = 0, skipped = 0;
        char size[32];
        for (i = 0; i < d.n_others; i++) {
            if (d.others[i].why) {
                fprintf(stderr, "skipped %s: %s\n", d.others[i].name, d.others[i].why);
                skipped++;
            } else {
                copied++;
            }
        }
        fprintf(stderr, "wrote %s: %zu model file%s converted with %s, %zu copied, %zu skipped (%s) in %.2f s\n",
                a->out, d.n_models, d.n_models == 1 ? "" : "s", ckpt_map_name(m), copied, skipped,
                cli_human_size(bytes, size, sizeof size), cli_now() - start);
    }

done:
    for (i = 0; results && i < d.n_spaces; i++)
        ckpt_map_result_free(results[i]);
    free(results);
    cJSON_Delete(report);
    ckpt_graph_free(g);
    pd_dir_close(&d);
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
    a.write = (ckpt_convert_options)CKPT_CONVERT_OPTIONS_INIT;
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
