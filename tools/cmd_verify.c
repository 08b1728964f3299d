/* ckptconv verify A [B]: run two checkpoints of one model layer by layer on the same inputs
 * and say which layer differs. */
#include "cli.h"
#include "verify_optim.h"

#include <ckpt/verify.h>
#include <cjson/cJSON.h>
#include <ckpt/family.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct verify_args {
    const char *a, *b;
    ckpt_model_options model;
    ckpt_verify_options v;
    int64_t *layers;
    int json, quiet;
    int optimizer;           /* --optimizer */
    double optimizer_rtol;
} verify_args;

static void verify_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv verify A [B] [options]\n"
"\n"
"Run the decoder layers of two checkpoints of the same model side by side and report,\n"
"layer by layer, how far apart they are. Each layer of A and B is given the same random\n"
"hidden states (its own, from --seed and its index), so a difference does not carry into\n"
"the next layer: the first layer that fails is the broken one. Then the embeddings of\n"
"the same random tokens, the final norm and the logits are compared where both have them.\n"
"A layer is compared by what it adds to the residual stream (its output minus its input).\n"
"A mixture-of-experts layer's row is followed by its router's (\"layer 3 router\"), its\n"
"router's expert bias where it has one (\"layer 3 router expert bias\", DeepSeek-V3), its\n"
"shared expert's and each expert's (\"layer 3 expert 5\"), run alone on the same rows, so\n"
"that a failing layer names the router, the bias or the experts (two swapped experts: both);\n"
"a multi-latent attention layer's row is followed by its attention's alone (\"layer 3\n"
"attention\").\n"
"Routing: softmax after or before the top-k, or sigmoid with DeepSeek-V3's expert bias\n"
"(choosing, not weighting), group-limited top-k and scaling; dense layers at any position\n"
"(first_k_dense_replace, mlp_only_layers, a moe_layer_freq list). Multi-latent attention\n"
"(MLA: q and kv through their low-rank projections and norms, RoPE on the rope part of\n"
"each head, YaRN frequencies and attention scale or plain RoPE) runs as attention from\n"
"the same backend operations on the CPU and a GPU.\n"
"\n"
"A and B may each be:\n"
"  a Megatron-LM checkpoint root or iteration directory, any TP/PP/VPP; tensor-parallel\n"
"    ranks run as the ranks would (column parts side by side, row parts as partial sums,\n"
"    each rank's fused QKV and [gate; up] split as that rank splits them), so a shard cut\n"
"    the wrong way fails even where merging the shards would hide it; a torch_dist\n"
"    checkpoint (iter_NNNNNNN/ with .metadata) runs at its global shapes, as TP 1;\n"
"  a Hugging Face directory (config.json + safetensors or pytorch_model.bin) or weights\n"
"    file of one of the families ckptconv knows: %s;\n"
"  a PaddleNLP LLaMA or Qwen2 checkpoint directory or .pdparams file (fused q/k/v and\n"
"    gate/up or not; LLaMA's Transformer Engine layers, pd2te's output, too),\n"
"    tensor-parallel files run as ranks;\n"
"  a DeepSpeed ZeRO checkpoint directory: the fp32 master weights consolidated from the\n"
"    ranks' partitions (config.json beside `latest` or above it).\n"
"With A alone: a tensor-parallel checkpoint's ranks against their merge, or a ZeRO\n"
"checkpoint's module weights (stages 0-2) against its consolidated master weights.\n"
"\n"
"A layer passes when the relative L2 distance between A's and B's outputs is at most the\n"
"tolerance and neither has a NaN or Inf: 1e-5 for float32 weights, 2e-4 for float16,\n"
"1e-3 for bfloat16. When one model's weights are more precise, they are first rounded to\n"
"the other's type (to nearest even, as torch's .to() rounds), so that a correct conversion\n"
"runs the same numbers; --keep-precision runs each model at its own precision, with 8\n"
"times the tolerance. The CPU computes in float32; a GPU multiplies bfloat16 and float16\n"
"weights on tensor cores, accumulating in float32.\n"
"\n"
"options:\n"
"  --layers all|I,J,K-L     global indices of the layers to run (default: every layer both hold)\n"
"  --tokens N               tokens in each layer's input (default 64)\n"
"  --seed S                 seed of the random inputs (default 0)\n"
"  --tol T                  relative L2 tolerance instead of the one the weights' type gives\n"
"  --device auto|cpu|cuda   where to run (default auto: CUDA when a GPU is visible, else CPU)\n"
"  --keep-precision         run each model at its weights' own precision\n"
"  --merge-tp               run tensor-parallel checkpoints merged instead of rank by rank\n"
"  --tag TAG                DeepSpeed: the tag directory (default: the one `latest` names)\n"
"  --iteration I            Megatron: the iteration (default: the tracker's)\n"
"  --optimizer              Megatron-LM: also compare each parameter's fp32 master copy,\n"
"                           exp_avg and exp_avg_sq by name (B needed), whatever the layout,\n"
"                           format and optimizer (plain or distributed) of each side; exact\n"
"                           unless --optimizer-rtol\n"
"  --optimizer-rtol R       the optimizer state passes when |A - B| <= R |B| per element\n"
"  --json                   one JSON object on stdout\n"
"  --threads N, -q/--quiet, -h/--help\n"
"\n"
"model configuration (read from config.json or Megatron's args; these give a value the\n"
"files lack, or override one, for both A and B):\n"
"  --num-layers N  --hidden-size N  --num-heads N  --num-kv-heads N  --head-dim N\n"
"  --ffn-hidden-size N  --vocab-size N  --norm-eps X  --rope-theta X  --rotary-percent X\n"
"  --rope-interleaved  --norm rmsnorm|layernorm\n"
"  --activation swiglu|gelu|gelu_tanh|relu|silu|geglu_tanh  --position rope|learned|none\n"
"  --qk-norm  --tied-embeddings\n"
"\n"
"Exit status: 0 when every layer (and with --optimizer every state) passes, 1 when one\n"
"fails (it is named) or on an error,\n"
"2 on a usage error.\n"
"\n"
"examples:\n"
"  ckptconv verify llama-hf/ llama-mcore/                  # hf2mcore's output against its input\n"
"  ckptconv verify ckpt/ ckpt-tp4/ --layers 0,31 --tokens 256\n"
"  ckptconv verify ckpt-tp4/                               # TP ranks against their merge\n"
"  ckptconv verify paddle_ckpt/ te_ckpt/ --json | jq '.layers[] | select(.pass | not)'\n"
"  ckptconv verify ckpt-distopt/ ckpt-plain-tp1/ --optimizer  # masters and moments too\n",
            ckpt_family_known());
}

/* "all", or indices and ranges: "0,5,8-10". */
static int parse_layers(const char *s, verify_args *a)
{
    size_t cap = 16, n = 0;
    const char *p = s, *end;

    if (strcmp(s, "all") == 0)
        return 0;
    if (!(a->layers = malloc(cap * sizeof *a->layers)))
        return -1;
    while (*p) {
        long long lo, hi, i;
        if (cli_parse_int_prefix(p, 0, INT_MAX, &lo, &end) < 0)
            return -1;
        hi = lo;
        if (*end == '-') {
            p = end + 1;
            if (cli_parse_int_prefix(p, lo, INT_MAX, &hi, &end) < 0 || hi - lo > 1 << 20)
                return -1;
        }
        for (i = lo; i <= hi; i++) {
            if (n == cap) {
                int64_t *g = realloc(a->layers, 2 * cap * sizeof *g);
                if (!g)
                    return -1;
                a->layers = g;
                cap *= 2;
            }
            a->layers[n++] = i;
        }
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    a->v.layers = a->layers;
    a->v.n_layers = n;
    return n ? 0 : -1;
}

static int keyword(const char *arg, const char *const *words, int n)
{
    int i;
    for (i = 0; i < n; i++)
        if (strcmp(arg, words[i]) == 0)
            return i;
    return -1;
}

enum {
    O_LAYERS = 256, O_TOKENS, O_SEED, O_TOL, O_DEVICE, O_KEEP, O_MERGE, O_TAG, O_ITER, O_JSON, O_THREADS,
    O_NUM_LAYERS, O_HIDDEN, O_HEADS, O_KV, O_HEAD_DIM, O_FFN, O_VOCAB, O_EPS, O_THETA, O_ROTARY, O_INTERLEAVED,
    O_NORM, O_ACT, O_POS, O_QK, O_TIED, O_OPTIM, O_OPTIM_RTOL
};

static const char *const norms[] = { "rmsnorm", "layernorm" };
/* in ckpt_act_kind's order */
static const char *const acts[] = { "swiglu", "gelu", "gelu_tanh", "relu", "silu", "geglu_tanh" };
static const char *const positions[] = { "rope", "learned", "none" };
static const char *const devices[] = { "auto", "cpu", "cuda" };

static int config_option(int c, const char *arg, ckpt_model_config *o)
{
    int64_t *ints[] = { &o->num_layers, &o->hidden_size, &o->num_heads, &o->num_kv_heads, &o->head_dim,
                        &o->ffn_hidden_size, &o->vocab_size };
    double *reals[] = { &o->norm_eps, &o->rope_theta, &o->rotary_percent };
    char *end;
    int k;

    if (c >= O_NUM_LAYERS && c <= O_VOCAB) {
        long long v;
        if (cli_parse_int(arg, 1, INT_MAX, &v) < 0)
            return -1;
        *ints[c - O_NUM_LAYERS] = v;
    } else if (c >= O_EPS && c <= O_ROTARY) {
        double v = strtod(arg, &end);
        if (!*arg || *end || !(v > 0) || isinf(v))
            return -1;
        *reals[c - O_EPS] = v;
    } else if (c == O_NORM) {
        if ((k = keyword(arg, norms, 2)) < 0)
            return -1;
        o->norm = k;
    } else if (c == O_ACT) {
        if ((k = keyword(arg, acts, (int)(sizeof acts / sizeof acts[0]))) < 0)
            return -1;
        o->act = k;
    } else if (c == O_POS) {
        if ((k = keyword(arg, positions, 3)) < 0)
            return -1;
        o->position = k;
    } else {
        *(c == O_INTERLEAVED ? &o->rope_interleaved : c == O_QK ? &o->qk_norm : &o->tied_embeddings) = 1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, verify_args *a)
{
    static const struct option longopts[] = {
        { "layers", required_argument, NULL, O_LAYERS }, { "tokens", required_argument, NULL, O_TOKENS },
        { "seed", required_argument, NULL, O_SEED }, { "tol", required_argument, NULL, O_TOL },
        { "device", required_argument, NULL, O_DEVICE }, { "keep-precision", no_argument, NULL, O_KEEP },
        { "merge-tp", no_argument, NULL, O_MERGE }, { "tag", required_argument, NULL, O_TAG },
        { "iteration", required_argument, NULL, O_ITER }, { "json", no_argument, NULL, O_JSON },
        { "threads", required_argument, NULL, O_THREADS }, { "quiet", no_argument, NULL, 'q' },
        { "num-layers", required_argument, NULL, O_NUM_LAYERS }, { "hidden-size", required_argument, NULL, O_HIDDEN },
        { "num-heads", required_argument, NULL, O_HEADS }, { "num-kv-heads", required_argument, NULL, O_KV },
        { "head-dim", required_argument, NULL, O_HEAD_DIM }, { "ffn-hidden-size", required_argument, NULL, O_FFN },
        { "vocab-size", required_argument, NULL, O_VOCAB }, { "norm-eps", required_argument, NULL, O_EPS },
        { "rope-theta", required_argument, NULL, O_THETA }, { "rotary-percent", required_argument, NULL, O_ROTARY },
        { "rope-interleaved", no_argument, NULL, O_INTERLEAVED }, { "norm", required_argument, NULL, O_NORM },
        { "activation", required_argument, NULL, O_ACT }, { "position", required_argument, NULL, O_POS },
        { "qk-norm", no_argument, NULL, O_QK }, { "tied-embeddings", no_argument, NULL, O_TIED },
        { "optimizer", no_argument, NULL, O_OPTIM }, { "optimizer-rtol", required_argument, NULL, O_OPTIM_RTOL },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    char *end;
    long long v;
    double d;
    int c, k;

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        switch (c) {
        case O_LAYERS:
            if (parse_layers(optarg, a) < 0)
                return cli_usage_error("verify", "--layers takes 'all' or indices and ranges such as 0,5,8-10, not "
                                                 "'%s'", optarg);
            break;
        case O_TOKENS:
        case O_SEED:
        case O_ITER:
            if (cli_option_int("verify", c == O_TOKENS ? "--tokens" : c == O_SEED ? "--seed" : "--iteration", optarg,
                               c == O_TOKENS, c == O_TOKENS ? 1 << 20 : LLONG_MAX, &v) != 0)
                return CLI_EXIT_USAGE;
            if (c == O_TOKENS)
                a->v.tokens = v;
            else if (c == O_SEED)
                a->v.seed = (uint64_t)v;
            else
                a->model.iteration = v;
            break;
        case O_TOL:
            d = strtod(optarg, &end);
            if (!*optarg || *end || !(d > 0) || isinf(d))
                return cli_usage_error("verify", "--tol needs a positive number, not '%s'", optarg);
            a->v.tol = d;
            break;
        case O_DEVICE:
            if ((k = keyword(optarg, devices, 3)) < 0)
                return cli_usage_error("verify", "--device is auto, cpu or cuda, not '%s'", optarg);
            a->v.device = (ckpt_device)k;
            break;
        case O_OPTIM: a->optimizer = 1; break;
        case O_OPTIM_RTOL:
            d = strtod(optarg, &end);
            if (!*optarg || *end || !(d >= 0) || isinf(d))
                return cli_usage_error("verify", "--optimizer-rtol needs a number >= 0, not '%s'", optarg);
            a->optimizer_rtol = d;
            a->optimizer = 1;
            break;
        case O_KEEP: a->v.keep_precision = 1; break;
        case O_MERGE: a->model.merge_tp = 1; break;
        case O_TAG: a->model.tag = optarg; break;
        case O_JSON: a->json = 1; break;
        case O_THREADS:
            if (cli_option_threads("verify", optarg, &a->v.threads))
                return CLI_EXIT_USAGE;
            break;
        case 'q': a->quiet = 1; break;
        case 'h': verify_help(stdout); return -1;
        default:
            if (c >= O_NUM_LAYERS && c <= O_TIED) {
                if (config_option(c, optarg, &a->model.overrides) < 0) {
                    const struct option *opt = longopts;
                    while (opt->val != c)
                        opt++;
                    return cli_usage_error("verify", "--%s does not take '%s' (see --help)", opt->name, optarg);
                }
                break;
            }
            return cli_usage_error("verify", "unknown option");
        }
    }
    if (argc - optind < 1 || argc - optind > 2)
        return cli_usage_error("verify", "expected A [B], got %d argument(s)", argc - optind);
    a->a = argv[optind];
    a->b = argc - optind == 2 ? argv[optind + 1] : NULL;
    if (a->optimizer && !a->b)
        return cli_usage_error("verify", "--optimizer compares two checkpoints: give A and B");
    return 0;
}

static void print_progress(size_t done, size_t total, const char *what, void *payload)
{
    (void)what;
    cli_progress(done, total, payload);
}

static cJSON *json_number_or_null(double x)
{
    return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull();
}

static void print_json(const verify_args *a, const ckpt_model *ma, const ckpt_model *mb, double seconds_open,
                       const ckpt_verify_report *r, const verify_optim *vo)
{
    cJSON *o = cJSON_CreateObject(), *layers, *notes, *side, *parts = NULL;
    size_t i;
    char *text;

    cJSON_AddBoolToObject(o, "pass", r->pass && (!vo || verify_optim_pass(vo)));
    cJSON_AddStringToObject(o, "device", r->device);
    layers = cJSON_AddArrayToObject(o, "layers");
    for (i = 0; i < r->n_entries; i++) {
        const ckpt_verify_entry *e = &r->entries[i];
        cJSON *j = cJSON_CreateObject();
        if (e->index >= 0)
            cJSON_AddNumberToObject(j, "index", (double)e->index);
        cJSON_AddStringToObject(j, "name", e->name);
        if (e->part != CKPT_VERIFY_PART_WHOLE)
            cJSON_AddStringToObject(j, "part", e->part == CKPT_VERIFY_PART_ROUTER        ? "router"
                                               : e->part == CKPT_VERIFY_PART_SHARED      ? "shared expert"
                                               : e->part == CKPT_VERIFY_PART_EXPERT_BIAS ? "expert bias"
                                               : e->part == CKPT_VERIFY_PART_ATTENTION   ? "attention"
                                                                                         : "expert");
        if (e->part == CKPT_VERIFY_PART_EXPERT)
            cJSON_AddNumberToObject(j, "expert", (double)e->expert);
        cJSON_AddItemToObject(j, "max_abs", json_number_or_null(e->max_abs));
        cJSON_AddItemToObject(j, "rel_l2", json_number_or_null(e->rel_l2));
        cJSON_AddItemToObject(j, "cosine", json_number_or_null(e->cosine));
        cJSON_AddBoolToObject(j, "pass", e->pass);
        if (e->nonfinite_a || e->nonfinite_b) {
            cJSON_AddNumberToObject(j, "nonfinite_a", (double)e->nonfinite_a);
            cJSON_AddNumberToObject(j, "nonfinite_b", (double)e->nonfinite_b);
        }
        if (e->error)
            cJSON_AddStringToObject(j, "error", e->error);
        cJSON_AddItemToArray(layers, j);
    }
    if (r->first_failure)
        cJSON_AddStringToObject(o, "first_failure", r->first_failure->name);
    for (i = 0; i < r->n_entries; i++)
        if (!r->entries[i].pass && r->entries[i].part != CKPT_VERIFY_PART_WHOLE) {
            if (!parts)
                parts = cJSON_AddArrayToObject(o, "failing_parts");
            cJSON_AddItemToArray(parts, cJSON_CreateString(r->entries[i].name));
        }
    cJSON_AddNumberToObject(o, "tol", r->tol);
    cJSON_AddStringToObject(o, "tol_reason", r->tol_reason);
    if (r->dtype != CKPT_DTYPE_INVALID)
        cJSON_AddStringToObject(o, "dtype", ckpt_dtype_name(r->dtype));
    cJSON_AddNumberToObject(o, "tokens", (double)r->tokens);
    cJSON_AddNumberToObject(o, "seed", (double)a->v.seed);
    side = cJSON_AddObjectToObject(o, "a");
    cJSON_AddStringToObject(side, "path", a->a);
    cJSON_AddStringToObject(side, "kind", ckpt_model_kind(ma));
    side = cJSON_AddObjectToObject(o, "b");
    cJSON_AddStringToObject(side, "path", a->b ? a->b : a->a);
    cJSON_AddStringToObject(side, "kind", ckpt_model_kind(mb));
    notes = cJSON_AddArrayToObject(o, "notes");
    for (i = 0; i < r->n_notes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(r->notes[i]));
    side = cJSON_AddObjectToObject(o, "seconds");
    cJSON_AddNumberToObject(side, "open", seconds_open);
    cJSON_AddNumberToObject(side, "device", r->seconds_device);
    cJSON_AddNumberToObject(side, "load", r->seconds_load);
    cJSON_AddNumberToObject(side, "a", r->seconds_a);
    cJSON_AddNumberToObject(side, "b", r->seconds_b);
    cJSON_AddNumberToObject(side, "compare", r->seconds_compare);
    if (vo)
        verify_optim_json(vo, o);
    text = cJSON_Print(o);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

/* The failing routers and experts of MoE layers, "layer 0 expert 1, layer 0 expert 2", into
 * buf ("" when none). */
static const char *failing_parts(const ckpt_verify_report *r, char *buf, size_t size)
{
    size_t i, n = 0, count = 0;

    buf[0] = 0;
    for (i = 0; i < r->n_entries; i++) {
        const ckpt_verify_entry *e = &r->entries[i];
        if (e->pass || e->part == CKPT_VERIFY_PART_WHOLE)
            continue;
        if (count++ < 16)
            n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s", count > 1 ? ", " : "", e->name);
        else if (count == 17)
            n += (size_t)snprintf(buf + n, n < size ? size - n : 0, ", ...");
    }
    return buf;
}

static void print_table(const ckpt_model *ma, const ckpt_model *mb, double seconds_open, const ckpt_verify_report *r)
{
    size_t i, failed = 0;
    int width = 12;
    char parts[1024];

    for (i = 0; i < r->n_entries; i++)
        width = (int)strlen(r->entries[i].name) > width ? (int)strlen(r->entries[i].name) : width;

    printf("A: %s\nB: %s\n", ckpt_model_kind(ma), ckpt_model_kind(mb));
    printf("device: %s; %lld tokens; tolerance: relative L2 <= %g (%s)\n", r->device, (long long)r->tokens, r->tol,
           r->tol_reason);
    for (i = 0; i < r->n_notes; i++)
        printf("note: %s\n", r->notes[i]);
    printf("\n%-*s %12s %12s %14s  %s\n", width, "", "max abs", "rel L2", "cosine", "");
    for (i = 0; i < r->n_entries; i++) {
        const ckpt_verify_entry *e = &r->entries[i];
        failed += !e->pass;
        if (e->error) {
            printf("%-*s %12s %12s %14s  FAIL: %s\n", width, e->name, "-", "-", "-", e->error);
            continue;
        }
        printf("%-*s %12.3e %12.3e %14.10f  %s", width, e->name, e->max_abs, e->rel_l2, e->cosine, e->pass ? "ok" : "FAIL");
        if (e->nonfinite_a || e->nonfinite_b)
            printf(" (NaN/Inf: %llu in A, %llu in B)", (unsigned long long)e->nonfinite_a,
                   (unsigned long long)e->nonfinite_b);
        printf("\n");
    }
    printf("\n");
    if (r->pass)
        printf("PASS: all %zu compared\n", r->n_entries);
    else
        printf("FAIL: %s is the first that differs (%zu of %zu fail)\n", r->first_failure->name, failed, r->n_entries);
    if (*failing_parts(r, parts, sizeof parts))
        printf("FAIL: on their own, these differ: %s\n", parts);
    printf("time: opening %.2f s, starting the device %.2f s, reading weights %.2f s, running A %.2f s, B %.2f s, "
           "comparing %.2f s\n",
           seconds_open, r->seconds_device, r->seconds_load, r->seconds_a, r->seconds_b, r->seconds_compare);
}

static int run(verify_args *a)
{
    ckpt_model *ma = NULL, *mb = NULL;
    ckpt_verify_report *r = NULL;
    verify_optim *vo = NULL;
    const char *label = "verify";
    double start = cli_now(), seconds_open;
    int rc, pass = 0;

    if ((rc = ckpt_model_open(&ma, a->a, &a->model)) < 0)
        goto done;
    rc = a->b ? ckpt_model_open(&mb, a->b, &a->model) : ckpt_model_open_counterpart(&mb, ma, &a->model);
    if (rc < 0)
        goto done;
    seconds_open = cli_now() - start;
    if (!a->quiet && !a->json) {
        a->v.progress = print_progress;
        a->v.progress_payload = (void *)label;
    }
    rc = ckpt_verify(ma, mb, &a->v, &r);
    if (!a->quiet && !a->json)
        cli_progress_done();
    if (rc < 0 || (a->optimizer && (rc = verify_optim_run(a->a, a->b, a->model.iteration, a->optimizer_rtol, &vo)) < 0))
        goto done;
    pass = r->pass && (!vo || verify_optim_pass(vo));
    if (a->json) {
        print_json(a, ma, mb, seconds_open, r, vo);
    } else if (!a->quiet) {
        print_table(ma, mb, seconds_open, r);
        if (vo)
            verify_optim_print(vo);
    } else {
        char parts[1024];
        if (!r->pass)
            fprintf(stderr, "ckptconv verify: %s differs first\n", r->first_failure->name);
        if (*failing_parts(r, parts, sizeof parts))
            fprintf(stderr, "ckptconv verify: on their own, these differ: %s\n", parts);
        if (vo && !verify_optim_pass(vo))
            fprintf(stderr, "ckptconv verify: optimizer state %s differs first\n", verify_optim_first_failure(vo));
    }
done:
    verify_optim_free(vo);
    ckpt_verify_report_free(r);
    ckpt_model_close(mb);
    ckpt_model_close(ma);
    if (rc < 0)
        return cli_fail("verify");
    return pass ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int cli_verify(int argc, char **argv)
{
    ckpt_verify_options v = CKPT_VERIFY_OPTIONS_INIT;
    verify_args a;
    int rc;

    memset(&a, 0, sizeof a);
    a.v = v;
    ckpt_model_options_init(&a.model);
    rc = parse_args(argc, argv, &a);
    if (rc == 0)
        rc = run(&a);
    else if (rc < 0)
        rc = CLI_EXIT_OK;
    free(a.layers);
    return rc;
}
