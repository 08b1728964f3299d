/* ckptconv diff A B: two checkpoints compared tensor by tensor (the library's ckpt_diff). */
#include "cli.h"

#include <ckpt/sys/common.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PARAMS 64
#define MAX_EXCLUDES 64

typedef struct diff_args {
    const char *a, *b, *map;
    const char *params[MAX_PARAMS + 1], *excludes[MAX_EXCLUDES + 1];
    size_t n_params, n_excludes;
    int json, quiet, all, ignore_dtype;
    int mapped;                  /* which side the map renames: 0 A, 1 B */
    size_t tensors_a, tensors_b; /* before the map */
    double start;
    ckpt_diff_options o;
} diff_args;

static void diff_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv diff A B [options]\n"
"\n"
"Compare two checkpoints tensor by tensor: the names only A or only B has, the\n"
"dtypes and shapes that changed, and for every common tensor whether its values are\n"
"equal, the largest absolute and relative difference, how many elements lie outside\n"
"the tolerance and the index of the first one.\n"
"\n"
"A and B may be of any formats ckptconv reads, and need not be of the same one: a\n"
"single file (.pt/.bin, .pdparams, .safetensors or an index json, .h5, any of them\n"
".zst), a DeepSpeed ZeRO directory (the consolidated model), a Hugging Face directory,\n"
"or a checkpoint of many files: a Megatron-LM root or iteration directory (torch or\n"
"torch_dist) and a PaddleNLP directory are compared as the model their TP/PP ranks\n"
"make together, every tensor at full shape, so a TP2 checkpoint equals its TP1\n"
"reshard. Values are read in chunks, in parallel, within --memory; nothing is loaded\n"
"whole.\n"
"\n"
"Equality: elements are equal when their values are (NaN equals NaN at the same\n"
"index; -0 equals 0); a tensor is 'equal' when all its elements are and, for the same\n"
"dtype, its bytes are identical, 'close' when values differ but every one lies within\n"
"the tolerance, 'DIFFERENT' otherwise. Within the tolerance means, as numpy.allclose,\n"
"|a - b| <= atol + rtol * |b|; an infinity is close only to itself and NaN only to\n"
"NaN. The relative difference is |a - b| / |b| (inf where b is 0). Tensors of\n"
"different dtypes are compared by value in float64 (complex in complex128) and\n"
"reported as a dtype change; 64-bit integers of one dtype as integers.\n"
"\n"
"Not weights: a module's _extra_state entry (Transformer Engine's FP8 metadata) is\n"
"compared when both sides have it; one only A or only B has is 'state only A/B',\n"
"counted apart and not a difference (listed with --all). It never goes through a map.\n"
"\n"
"options:\n"
"  --rtol X, --atol X     tolerances (default 0 and 0: values must be equal)\n"
"  --names-only           compare names, dtypes and shapes; read no tensor data\n"
"  --map MAP              compare through a map that renames (and regroups) one\n"
"                         side's tensors into the other's: a map file\n"
"                         (formats/maps/README.md) or a built-in map's name\n"
"                         (hf_llama_megatron, megatron_hf_llama, paddle_llama_hf,\n"
"                         ...). It renames A, or B when A holds the map's target\n"
"                         names and B its source names. Its parameters come from\n"
"                         --param, then from what the checkpoints state: config.json\n"
"                         (Hugging Face, PaddleNLP), Megatron-LM args (heads, groups,\n"
"                         kv_channels, vocabulary sizes)\n"
"  --param NAME=N         a map parameter (padded_vocab_size=256), repeatable; wins\n"
"                         over what the checkpoints state\n"
"  --exclude GLOB         leave out tensors whose names match (on both sides, after\n"
"                         the map), repeatable: --exclude 'rotary_emb.*'\n"
"  --ignore-dtype         a dtype change alone does not make the exit status 1\n"
"  --all                  list equal tensors too (default: only the others)\n"
"  --json                 one JSON object: command, a, b ({path, kind, tensors}),\n"
"                         map, mapped (\"a\" or \"b\"), rtol, atol, same, summary\n"
"                         {tensors, equal, close, different, only_a, only_b, shape,\n"
"                         incomparable, unread, state_only_a, state_only_b,\n"
"                         dtype_changed, bytes_a, bytes_b, seconds}, tensors: every\n"
"                         tensor {name, status, dtype_a, dtype_b, shape_a, shape_b,\n"
"                         elements, unequal, mismatched, nan_mismatched, max_abs,\n"
"                         max_rel, first_index, a, b}; infinities as \"inf\"\n"
"  --memory SIZE          buffers for all threads together (default 512M)\n"
"  --threads N            threads (default: one per core)\n"
"  -q, --quiet            print nothing; the exit status says it\n"
"  -h, --help\n"
"\n"
"exit status: 0 A and B hold the same tensors, shapes, dtypes and values within the\n"
"tolerance; 1 they differ, or a checkpoint could not be read; 2 usage error.\n"
"\n"
"examples:\n"
"  ckptconv diff model.safetensors model.pt\n"
"  ckptconv diff fp32.safetensors bf16.safetensors --rtol 1e-2 --atol 1e-3 --ignore-dtype\n"
"  ckptconv diff ckpt-tp2/ ckpt-tp1/                  # Megatron ranks merged on both sides\n"
"  ckptconv diff llama-hf/ mcore/ --map hf_llama_megatron  # or mcore/ llama-hf/\n"
"  ckptconv diff paddle-tp2/ hf-out/ --map paddle_llama_hf\n"
"  ckptconv diff a.pt b.pt --json | jq '.tensors[] | select(.status != \"equal\")'\n");
}

static int parse_double(const char *opt, const char *arg, double *out)
{
    char *end;

    errno = 0;
    *out = strtod(arg, &end);
    if (end == arg || *end || errno || !(*out >= 0) || isinf(*out))
        return cli_usage_error("diff", "%s %s: expected a finite number, not negative", opt, arg);
    return 0;
}

static int parse_args(int argc, char **argv, diff_args *a)
{
    enum { O_RTOL = 256, O_ATOL, O_NAMES, O_MAP, O_PARAM, O_EXCLUDE, O_IGNORE_DTYPE, O_ALL };
    static const struct option longopts[] = {
        { "rtol", required_argument, NULL, O_RTOL }, { "atol", required_argument, NULL, O_ATOL },
        { "names-only", no_argument, NULL, O_NAMES }, { "map", required_argument, NULL, O_MAP },
        { "param", required_argument, NULL, O_PARAM }, { "exclude", required_argument, NULL, O_EXCLUDE },
        { "ignore-dtype", no_argument, NULL, O_IGNORE_DTYPE }, { "all", no_argument, NULL, O_ALL },
        { "json", no_argument, NULL, CLI_O_JSON }, { "memory", required_argument, NULL, CLI_O_MEMORY },
        { "threads", required_argument, NULL, CLI_O_THREADS }, { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        rc = 0;
        switch (c) {
        case O_RTOL: rc = parse_double("--rtol", optarg, &a->o.rtol); break;
        case O_ATOL: rc = parse_double("--atol", optarg, &a->o.atol); break;
        case O_NAMES: a->o.names_only = 1; break;
        case O_MAP: a->map = optarg; break;
        case O_PARAM:
            if (a->n_params == MAX_PARAMS)
                return cli_usage_error("diff", "more than %d --param options", MAX_PARAMS);
            a->params[a->n_params++] = optarg;
            break;
        case O_EXCLUDE:
            if (a->n_excludes == MAX_EXCLUDES)
                return cli_usage_error("diff", "more than %d --exclude options", MAX_EXCLUDES);
            a->excludes[a->n_excludes++] = optarg;
            break;
        case O_IGNORE_DTYPE: a->ignore_dtype = 1; break;
        case O_ALL: a->all = 1; break;
        case CLI_O_JSON: a->json = 1; break;
        case CLI_O_MEMORY: rc = cli_option_memory("diff", optarg, &a->o.memory); break;
        case CLI_O_THREADS: rc = cli_option_threads("diff", optarg, &a->o.threads); break;
        case 'q': a->quiet = 1; break;
        case 'h': diff_help(stdout); return -1;
        default: return cli_usage_error("diff", "unknown option");
        }
        if (rc)
            return rc;
    }
    if (argc - optind != 2)
        return cli_usage_error("diff", "expected A and B, got %d argument(s)", argc - optind);
    if (a->n_params && !a->map)
        return cli_usage_error("diff", "--param is for a map: give --map too");
    a->a = argv[optind];
    a->b = argv[optind + 1];
    a->o.exclude = a->n_excludes ? a->excludes : NULL;
    return 0;
}

/* --param NAME=N into p. 0, or 2 for a usage error (printed). */
static int load_params(const diff_args *a, ckpt_map_params *p)
{
    size_t i;
    int rc;

    for (i = 0; i < a->n_params; i++) {
        const char *eq = strchr(a->params[i], '=');
        char name[128];
        long long v;
        if (!eq || eq == a->params[i] || (size_t)(eq - a->params[i]) >= sizeof name ||
            cli_parse_int(eq + 1, 0, INT64_MAX, &v) < 0)
            return cli_usage_error("diff", "--param %s: expected NAME=N (N a whole number)", a->params[i]);
        memcpy(name, a->params[i], (size_t)(eq - a->params[i]));
        name[eq - a->params[i]] = '\0';
        if ((rc = ckpt_map_params_set(p, name, v)) < 0)
            return rc;
    }
    return 0;
}

/* A map file when one is at that path, else a built-in map's name: 0, 2 for neither
 * (printed), or the library's error about the file. */
static int open_map(const char *what, ckpt_map **out)
{
    struct stat st;
    size_t i;

    if (stat(what, &st) == 0)
        return ckpt_map_load(out, what);
    for (i = 0; i < ckpt_map_builtin_count(); i++)
        if (strcmp(ckpt_map_builtin_at(i), what) == 0)
            return ckpt_map_builtin(out, what);
    return cli_usage_error("diff", "--map %s: no such file, and no built-in map is named so", what);
}

static const char *num(double v, char *buf, size_t cap)
{
    if (isinf(v))
        snprintf(buf, cap, "inf");
    else
        snprintf(buf, cap, "%.6g", v);
    return buf;
}

static void print_row(const ckpt_diff_entry *e, int width)
{
    char dtype[64], shape[160], sa[64], sb[64], n1[32], n2[32], at[96], va[32], vb[32];
    const char *name_a = ckpt_dtype_name(e->dtype_a), *name_b = ckpt_dtype_name(e->dtype_b);

    ckpt_shape_format(e->shape_a, e->ndim_a, sa, sizeof sa);
    ckpt_shape_format(e->shape_b, e->ndim_b, sb, sizeof sb);
    if (e->dtype_a == CKPT_DTYPE_INVALID || e->dtype_b == CKPT_DTYPE_INVALID) {
        snprintf(dtype, sizeof dtype, "%s", e->dtype_b == CKPT_DTYPE_INVALID ? name_a : name_b);
        snprintf(shape, sizeof shape, "%s", e->dtype_b == CKPT_DTYPE_INVALID ? sa : sb);
    } else {
        if (e->dtype_a == e->dtype_b)
            snprintf(dtype, sizeof dtype, "%s", name_a);
        else
            snprintf(dtype, sizeof dtype, "%s->%s", name_a, name_b);
        if (strcmp(sa, sb) == 0)
            snprintf(shape, sizeof shape, "%s", sa);
        else
            snprintf(shape, sizeof shape, "%s->%s", sa, sb);
    }
    /* only values that differ have figures to show */
    if (e->status != CKPT_DIFF_CLOSE && e->status != CKPT_DIFF_DIFFERENT) {
        printf("%-*s  %-12s  %-18s  %s\n", width, e->name, ckpt_diff_status_name(e->status), dtype, shape);
        return;
    }
    printf("%-*s  %-12s  %-18s  %-16s", width, e->name, ckpt_diff_status_name(e->status), dtype, shape);
    printf("  %11s  %11s  %12llu  %s", num(e->max_abs, n1, sizeof n1), num(e->max_rel, n2, sizeof n2),
           (unsigned long long)e->mismatched,
           e->first >= 0 ? ckpt_shape_format(e->first_index, e->ndim_a, at, sizeof at) : "-");
    if (e->first >= 0)
        printf(" (A %s, B %s)", num(e->first_a, va, sizeof va), num(e->first_b, vb, sizeof vb));
    printf("\n");
}

/* Without --all the table lists what differs: tensors equal in dtype and values (or, names
 * only, in dtype) are left out, and so are the state entries one side lacks (counted in the
 * summary). */
static int listed(const diff_args *a, const ckpt_diff_entry *e)
{
    if (e->status == CKPT_DIFF_STATE_ONLY_A || e->status == CKPT_DIFF_STATE_ONLY_B)
        return a->all;
    return a->all || (e->status != CKPT_DIFF_EQUAL && e->status != CKPT_DIFF_UNREAD) || e->dtype_a != e->dtype_b;
}

static void print_side(const char *which, const char *path, const ckpt_whole *w, size_t before, const char *map)
{
    printf("%s: %s (%s, %zu tensor%s", which, path, ckpt_whole_kind(w), before, before == 1 ? "" : "s");
    if (map)
        printf("; %zu through the map %s", ckpt_whole_count(w), map);
    printf(")\n");
}

static void print_text(const diff_args *a, const ckpt_whole *wa, const ckpt_whole *wb, const ckpt_diff_report *r,
                       int same)
{
    size_t i, shown = 0;
    int width = 4;

    print_side("A", a->a, wa, a->tensors_a, a->map && a->mapped == 0 ? a->map : NULL);
    print_side("B", a->b, wb, a->tensors_b, a->map && a->mapped == 1 ? a->map : NULL);
    if (a->o.rtol == 0 && a->o.atol == 0)
        printf("tolerance: none (values must be equal)\n");
    else
        printf("tolerance: |a - b| <= %g + %g * |b|\n", a->o.atol, a->o.rtol);
    for (i = 0; i < r->n; i++) {
        int len = (int)strlen(r->entries[i].name);
        if (listed(a, &r->entries[i]))
            width = len > width ? (len < 64 ? len : 64) : width;
    }
    for (i = 0; i < r->n; i++) {
        const ckpt_diff_entry *e = &r->entries[i];
        if (!listed(a, e))
            continue;
        if (!shown++)
            printf("\n%-*s  %-12s  %-18s  %-16s  %11s  %11s  %12s  %s\n", width, "name", "status", "dtype", "shape",
                   "max abs", "max rel", "mismatched", "first at");
        print_row(e, width);
    }
    printf("\n%zu tensor%s: %zu equal, %zu close, %zu different", r->n, r->n == 1 ? "" : "s", r->equal, r->close,
           r->different);
    if (r->unread)
        printf(", %zu not read (names only)", r->unread);
    printf("; %zu only in A, %zu only in B; %zu shape changes; %zu dtype changes", r->only_a, r->only_b, r->shape,
           r->dtype_changed);
    if (r->incomparable)
        printf("; %zu complex against real", r->incomparable);
    if (r->state_only_a || r->state_only_b)
        printf("; not weights (_extra_state), left aside: %zu only in A, %zu only in B", r->state_only_a,
               r->state_only_b);
    printf("\n%s\n", same ? "A and B are the same" : "A and B differ");
}

static cJSON *json_shape(const int64_t *v, int n)
{
    cJSON *arr = cJSON_CreateArray();
    int i;

    for (i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)v[i]));
    return arr;
}

static void json_num(cJSON *o, const char *key, double v)
{
    if (isinf(v))
        cJSON_AddStringToObject(o, key, v > 0 ? "inf" : "-inf");
    else if (isnan(v))
        cJSON_AddNullToObject(o, key);
    else
        cJSON_AddNumberToObject(o, key, v);
}

static cJSON *json_side(const char *path, const ckpt_whole *w, size_t tensors)
{
    cJSON *s = cJSON_CreateObject();

    cJSON_AddStringToObject(s, "path", path);
    cJSON_AddStringToObject(s, "kind", ckpt_whole_kind(w));
    cJSON_AddNumberToObject(s, "tensors", (double)tensors);
    return s;
}

static cJSON *json_entry(const ckpt_diff_entry *e)
{
    cJSON *t = cJSON_CreateObject();
    static const char *const status[] = { "equal", "close", "different", "only_a", "only_b",
                                          "shape", "incomparable", "unread", "state_only_a", "state_only_b" };

    cJSON_AddStringToObject(t, "name", e->name);
    cJSON_AddStringToObject(t, "status", status[e->status]);
    if (e->dtype_a != CKPT_DTYPE_INVALID) {
        cJSON_AddStringToObject(t, "dtype_a", ckpt_dtype_name(e->dtype_a));
        cJSON_AddItemToObject(t, "shape_a", json_shape(e->shape_a, e->ndim_a));
    }
    if (e->dtype_b != CKPT_DTYPE_INVALID) {
        cJSON_AddStringToObject(t, "dtype_b", ckpt_dtype_name(e->dtype_b));
        cJSON_AddItemToObject(t, "shape_b", json_shape(e->shape_b, e->ndim_b));
    }
    if (e->status == CKPT_DIFF_EQUAL || e->status == CKPT_DIFF_CLOSE || e->status == CKPT_DIFF_DIFFERENT) {
        cJSON_AddNumberToObject(t, "elements", (double)e->elements);
        cJSON_AddNumberToObject(t, "unequal", (double)e->unequal);
        cJSON_AddNumberToObject(t, "mismatched", (double)e->mismatched);
        cJSON_AddNumberToObject(t, "nan_mismatched", (double)e->nan_mismatched);
        json_num(t, "max_abs", e->max_abs);
        json_num(t, "max_rel", e->max_rel);
        if (e->first >= 0) {
            cJSON_AddItemToObject(t, "first_index", json_shape(e->first_index, e->ndim_a));
            json_num(t, "a", e->first_a);
            json_num(t, "b", e->first_b);
        } else {
            cJSON_AddNullToObject(t, "first_index");
        }
    }
    return t;
}

static void print_json(const diff_args *a, const ckpt_whole *wa, const ckpt_whole *wb, const ckpt_diff_report *r,
                       int same)
{
    cJSON *o = cJSON_CreateObject(), *s = cJSON_CreateObject(), *tensors = cJSON_CreateArray();
    char *text;
    size_t i;

    cJSON_AddStringToObject(o, "command", "diff");
    cJSON_AddItemToObject(o, "a", json_side(a->a, wa, a->tensors_a));
    cJSON_AddItemToObject(o, "b", json_side(a->b, wb, a->tensors_b));
    if (a->map) {
        cJSON_AddStringToObject(o, "map", a->map);
        cJSON_AddStringToObject(o, "mapped", a->mapped ? "b" : "a");
    }
    cJSON_AddNumberToObject(o, "rtol", a->o.rtol);
    cJSON_AddNumberToObject(o, "atol", a->o.atol);
    cJSON_AddBoolToObject(o, "same", same);
    cJSON_AddNumberToObject(s, "equal", (double)r->equal);
    cJSON_AddNumberToObject(s, "close", (double)r->close);
    cJSON_AddNumberToObject(s, "different", (double)r->different);
    cJSON_AddNumberToObject(s, "only_a", (double)r->only_a);
    cJSON_AddNumberToObject(s, "only_b", (double)r->only_b);
    cJSON_AddNumberToObject(s, "shape", (double)r->shape);
    cJSON_AddNumberToObject(s, "incomparable", (double)r->incomparable);
    cJSON_AddNumberToObject(s, "unread", (double)r->unread);
    cJSON_AddNumberToObject(s, "state_only_a", (double)r->state_only_a);
    cJSON_AddNumberToObject(s, "state_only_b", (double)r->state_only_b);
    cJSON_AddNumberToObject(s, "dtype_changed", (double)r->dtype_changed);
    cJSON_AddNumberToObject(s, "tensors", (double)r->n);
    cJSON_AddNumberToObject(s, "bytes_a", (double)r->bytes_a);
    cJSON_AddNumberToObject(s, "bytes_b", (double)r->bytes_b);
    cJSON_AddNumberToObject(s, "seconds", cli_now() - a->start);
    cJSON_AddItemToObject(o, "summary", s);
    for (i = 0; i < r->n; i++)
        cJSON_AddItemToArray(tensors, json_entry(&r->entries[i]));
    cJSON_AddItemToObject(o, "tensors", tensors);
    text = cJSON_Print(o);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

static int inputs_of(const ckpt_whole *w, ckpt_diff_input **out)
{
    size_t i, n = ckpt_whole_count(w);
    ckpt_diff_input *in = calloc(n ? n : 1, sizeof *in);

    if (!in)
        return ckpt_error_oom();
    for (i = 0; i < n; i++) {
        in[i].name = ckpt_whole_at(w, i, &in[i].node);
        in[i].state = ckpt_whole_is_state(w, i);
    }
    *out = in;
    return 0;
}

/* Open the map and bring one side to the other's names. 0, 2 for a usage error (printed),
 * or a library error. */
static int apply_map(diff_args *a, ckpt_whole *const w[2])
{
    ckpt_map *map = NULL;
    ckpt_map_params *params = NULL;
    int rc;

    if ((rc = open_map(a->map, &map)) == 0 && (rc = ckpt_map_params_new(&params)) == 0 &&
        (rc = load_params(a, params)) == 0)
        rc = ckpt_whole_map_pair(w, map, params, &a->mapped);
    ckpt_map_params_free(params);
    ckpt_map_free(map);
    return rc;
}

static int run(diff_args *a)
{
    ckpt_whole *w[2] = { NULL, NULL };
    ckpt_diff_input *ia = NULL, *ib = NULL;
    ckpt_diff_report *r = NULL;
    int rc, usage = 0, same = 0;

    a->start = cli_now();
    if (!a->quiet && !a->json) {
        a->o.progress = cli_progress;
        a->o.progress_payload = "diff";
    }
    if ((rc = ckpt_whole_open(&w[0], a->a)) < 0 || (rc = ckpt_whole_open(&w[1], a->b)) < 0)
        goto done;
    a->tensors_a = ckpt_whole_count(w[0]);
    a->tensors_b = ckpt_whole_count(w[1]);
    if (a->map && (rc = apply_map(a, w)) != 0) {
        usage = rc > 0;
        goto done;
    }
    if ((rc = inputs_of(w[0], &ia)) < 0 || (rc = inputs_of(w[1], &ib)) < 0 ||
        (rc = ckpt_diff(ia, ckpt_whole_count(w[0]), ib, ckpt_whole_count(w[1]), &a->o, &r)) < 0)
        goto done;
    cli_progress_done();
    same = ckpt_diff_report_same(r, a->ignore_dtype);
    if (a->json)
        print_json(a, w[0], w[1], r, same);
    else if (!a->quiet)
        print_text(a, w[0], w[1], r, same);
done:
    cli_progress_done();
    ckpt_diff_report_free(r);
    free(ia);
    free(ib);
    ckpt_whole_close(w[0]);
    ckpt_whole_close(w[1]);
    if (usage)
        return CLI_EXIT_USAGE;
    if (rc < 0)
        return cli_fail("diff") == CLI_EXIT_USAGE ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
    return same ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int cli_diff(int argc, char **argv)
{
    ckpt_diff_options o = CKPT_DIFF_OPTIONS_INIT;
    diff_args a;
    int rc;

    memset(&a, 0, sizeof a);
    a.o = o;
    rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    return run(&a);
}
