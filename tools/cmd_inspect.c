/* ckptconv inspect PATH: what is inside a checkpoint. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void inspect_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv inspect PATH [options]\n"
"\n"
"Show what a checkpoint holds: its format, every tensor (name, dtype, shape,\n"
"bytes), a summary of the non-tensor metadata (args, iteration, optimizer and rng\n"
"state...), every global its pickle references (marked UNSAFE when outside the\n"
"known set: loading the file with pickle would run that code) and reader notes.\n"
"Nothing is executed and tensor data is not read unless --stats asks for it.\n"
"PATH may be a .pt/.pth/.bin file (any torch.save output), a .pdparams/.pdopt\n"
"file, a .safetensors file, a sharded model's *.safetensors.index.json, or a\n"
"DeepSpeed ZeRO checkpoint directory (shown as the consolidated model), an HDF5\n"
"file (.h5: each dataset a tensor, with its chunks, filters and compression ratio;\n"
"attributes as metadata), any of those zstd-compressed (.zst), or a\n"
"checkpoint of many files: a Megatron-LM checkpoint root or iteration directory, a\n"
"PaddleNLP directory (every file with its TP/PP/sharding rank, then the model the files\n"
"make together, tensor by tensor at full shape, with how each is cut across TP ranks;\n"
"a Megatron checkpoint's optimizer state then parameter by parameter, per rank: its range\n"
"in the distributed optimizer's grad buffers (buffer, bucket, start, end, offset in\n"
"distrib_optim.pt's flat tensors), or its key and param group in the plain state dict).\n"
"\n"
"options:\n"
"  --stats        also compute min/max/mean/std and NaN/Inf counts per tensor\n"
"                 (reads every tensor once, in parallel)\n"
"  --json         print one JSON object: {format, path, size, tensors: [{name,\n"
"                 dtype, shape, stride, offset, nbytes[, storage][, stats]}],\n"
"                 metadata,\n"
"                 globals: [{module, name, known, path}], notes}\n"
"  --verify-crc   check the CRC-32 of every zip record\n"
"  --format NAME  skip detection and read as NAME (torch, pdparams, safetensors,\n"
"                 deepspeed_zero, hdf5)\n"
"\n"
"examples:\n"
"  ckptconv inspect iter_0001000/mp_rank_00/model_optim_rng.pt\n"
"  ckptconv inspect model_state.pdparams --stats\n"
"  ckptconv inspect model.safetensors.index.json --json | jq '.tensors | length'\n");
}

typedef struct tensor_finder {
    int found;
} tensor_finder;

static int find_tensor(const ckpt_value *v, const char *path, void *payload)
{
    (void)path;
    if (v->kind == CKPT_VAL_TENSOR) {
        ((tensor_finder *)payload)->found++;
        return 0;
    }
    return 0;
}

/* A line per top-level non-tensor entry; containers holding tensors only say how many. */
static void describe_value(const ckpt_value *v, char *buf, size_t cap)
{
    tensor_finder tf = { 0 };

    if (ckpt_value_walk(v, 400, find_tensor, &tf) >= 0 && tf.found && v->kind != CKPT_VAL_TENSOR) {
        char inner[96];
        const char *kind = v->kind == CKPT_VAL_DICT ? (v->u.dict.cls ? "OrderedDict" : "dict")
                         : v->kind == CKPT_VAL_LIST ? "list"
                         : v->kind == CKPT_VAL_TUPLE ? "tuple" : "object";
        size_t n = v->kind == CKPT_VAL_DICT ? v->u.dict.map.n
                 : (v->kind == CKPT_VAL_LIST || v->kind == CKPT_VAL_TUPLE) ? v->u.seq.n : 0;
        snprintf(inner, sizeof inner, "%s of %zu entries holding %d tensors", kind, n, tf.found);
        snprintf(buf, cap, "%s", inner);
        return;
    }
    ckpt_value_repr(v, buf, cap);
}

static void for_each_metadata(const ckpt_value *root, void (*fn)(const char *key, const char *desc, void *p), void *p)
{
    char desc[160];
    size_t i;

    if (!root)
        return;
    if (root->kind != CKPT_VAL_DICT) {
        if (root->kind != CKPT_VAL_TENSOR) {
            describe_value(root, desc, sizeof desc);
            fn("(root)", desc, p);
        }
        return;
    }
    for (i = 0; i < root->u.dict.map.n; i++) {
        const ckpt_value *k = root->u.dict.map.keys[i], *v = root->u.dict.map.vals[i];
        char key[128];
        if (v->kind == CKPT_VAL_TENSOR)
            continue;
        ckpt_value_repr(k, key, sizeof key);
        if (k->kind == CKPT_VAL_STR)
            snprintf(key, sizeof key, "%s", k->u.str.ptr);
        describe_value(v, desc, sizeof desc);
        fn(key, desc, p);
    }
}

static void print_meta_line(const char *key, const char *desc, void *p)
{
    if (!*(int *)p)
        printf("\nmetadata:\n");
    *(int *)p = 1;
    printf("  %-32s %s\n", key, desc);
}

static void add_meta_json(const char *key, const char *desc, void *p)
{
    cJSON_AddStringToObject((cJSON *)p, key, desc);
}

static int compute_stats(const ckpt_ckpt *c, ckpt_tensor_stats **out)
{
    size_t n = ckpt_tensor_count(c), i;
    ckpt_tensor_stats *stats = calloc(n ? n : 1, sizeof *stats);
    int rc = 0;

    if (!stats)
        return CKPT_ENOMEM;
    for (i = 0; i < n && rc >= 0; i++) {
        rc = ckpt_tensor_stats_compute(ckpt_tensor_at(c, i), &stats[i]);
        if (rc == CKPT_EUNSUPPORTED) {
            /* complex values have no order: report no statistics for them */
            stats[i].min = stats[i].max = stats[i].mean = stats[i].std = NAN;
            stats[i].count = stats[i].nan = stats[i].inf = 0;
            ckpt_error_clear();
            rc = 0;
        }
        cli_progress(i + 1, n, "stats");
    }
    cli_progress_done();
    if (rc < 0) {
        free(stats);
        return rc;
    }
    *out = stats;
    return 0;
}

static cJSON *json_ints(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    int i;
    for (i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static void json_number_or_null(cJSON *o, const char *key, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

/* How a tensor's bytes are kept: chunks, encodings, what the file spends on them. */
typedef struct storage_info {
    ckpt_storage_summary sum;
    char codec[64]; /* "zstd", "gzip+shuffle+fletcher32", ...; "" when none */
    int plain;      /* nothing to say: plain bytes in place */
} storage_info;

static void describe_storage(const ckpt_tensor *t, storage_info *d)
{
    static const char *const names[] = { "", "deflate", "", "gzip", "zstd", "fill" };
    const ckpt_storage_summary *sum = &d->sum;
    size_t e, used = 0, cap = sizeof d->codec;

    d->codec[0] = 0;
    d->plain = 1;
    if (ckpt_storage_summarize(t->storage, &d->sum) < 0)
        return;
    for (e = 1; e < sizeof names / sizeof names[0]; e++)
        if (*names[e] && (sum->encodings & (1u << e)))
            used += (size_t)snprintf(d->codec + used, used < cap ? cap - used : 0, "%s%s", used ? "+" : "", names[e]);
    if (sum->shuffled && used < cap)
        used += (size_t)snprintf(d->codec + used, cap - used, "%sshuffle", used ? "+" : "");
    if (sum->checksummed && used < cap)
        snprintf(d->codec + used, cap - used, "%sfletcher32", used ? "+" : "");
    /* pickled text (protocol 2 bytes) is how a format stores raw bytes, not an encoding to show */
    d->plain = !sum->n_chunks && !(sum->encodings & ~((1u << CKPT_EXTENT_RAW) | (1u << CKPT_EXTENT_LATIN1_UTF8))) &&
               !sum->shuffled && !sum->checksummed;
}

static void storage_text(const storage_info *d, char *buf, size_t cap)
{
    const ckpt_storage_summary *sum = &d->sum;
    char chunk[64];

    if (d->plain) {
        snprintf(buf, cap, "-");
        return;
    }
    ckpt_shape_format(sum->chunk, sum->chunk_ndim, chunk, sizeof chunk);
    if (sum->stored_bytes && d->codec[0])
        snprintf(buf, cap, "%llu x %s %s x%.2f", (unsigned long long)sum->n_chunks, chunk, d->codec,
                 (double)sum->bytes / (double)sum->stored_bytes);
    else if (sum->n_chunks)
        snprintf(buf, cap, "%llu x %s%s%s", (unsigned long long)sum->n_chunks, chunk, d->codec[0] ? " " : "",
                 d->codec);
    else
        snprintf(buf, cap, "%s x%.2f", d->codec,
                 sum->stored_bytes ? (double)sum->bytes / (double)sum->stored_bytes : 0.0);
}

static cJSON *storage_json(const ckpt_tensor *t)
{
    storage_info d;
    cJSON *j;

    describe_storage(t, &d);
    if (d.plain)
        return NULL;
    j = cJSON_CreateObject();
    if (d.sum.n_chunks) {
        cJSON_AddNumberToObject(j, "chunks", (double)d.sum.n_chunks);
        cJSON_AddItemToObject(j, "chunk_shape", json_ints(d.sum.chunk, d.sum.chunk_ndim));
    }
    cJSON_AddStringToObject(j, "encoding", d.codec[0] ? d.codec : "raw");
    cJSON_AddNumberToObject(j, "stored_bytes", (double)d.sum.stored_bytes);
    return j;
}

static void print_json(const ckpt_ckpt *c, const ckpt_tensor_stats *stats)
{
    cJSON *o = cJSON_CreateObject(), *tensors = cJSON_CreateArray(), *globals = cJSON_CreateArray();
    cJSON *notes = cJSON_CreateArray(), *meta = cJSON_CreateObject();
    size_t i;
    char *text;

    cJSON_AddStringToObject(o, "format", ckpt_format_name(c));
    cJSON_AddStringToObject(o, "path", ckpt_path(c));
    cJSON_AddNumberToObject(o, "size", (double)ckpt_input_size(c));
    for (i = 0; i < ckpt_tensor_count(c); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c, i);
        cJSON *j = cJSON_CreateObject(), *storage;
        cJSON_AddStringToObject(j, "name", t->name);
        cJSON_AddStringToObject(j, "dtype", ckpt_dtype_name(t->dtype));
        cJSON_AddItemToObject(j, "shape", json_ints(t->shape, t->ndim));
        cJSON_AddItemToObject(j, "stride", json_ints(t->stride, t->ndim));
        cJSON_AddNumberToObject(j, "offset", (double)t->offset);
        cJSON_AddNumberToObject(j, "nbytes", (double)ckpt_tensor_nbytes(t));
        if ((storage = storage_json(t)))
            cJSON_AddItemToObject(j, "storage", storage);
        if (stats) {
            cJSON *s = cJSON_CreateObject();
            json_number_or_null(s, "min", stats[i].min);
            json_number_or_null(s, "max", stats[i].max);
            json_number_or_null(s, "mean", stats[i].mean);
            json_number_or_null(s, "std", stats[i].std);
            cJSON_AddNumberToObject(s, "nan", (double)stats[i].nan);
            cJSON_AddNumberToObject(s, "inf", (double)stats[i].inf);
            cJSON_AddItemToObject(j, "stats", s);
        }
        cJSON_AddItemToArray(tensors, j);
    }
    cJSON_AddItemToObject(o, "tensors", tensors);
    for_each_metadata(ckpt_root(c), add_meta_json, meta);
    cJSON_AddItemToObject(o, "metadata", meta);
    for (i = 0; i < ckpt_global_count(c); i++) {
        const ckpt_global_ref *g = ckpt_global_at(c, i);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "module", g->module);
        cJSON_AddStringToObject(j, "name", g->name);
        cJSON_AddBoolToObject(j, "known", g->known);
        cJSON_AddStringToObject(j, "path", g->path);
        cJSON_AddItemToArray(globals, j);
    }
    cJSON_AddItemToObject(o, "globals", globals);
    for (i = 0; i < ckpt_note_count(c); i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(ckpt_note_at(c, i)));
    cJSON_AddItemToObject(o, "notes", notes);
    text = cJSON_Print(o);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

static void print_text(const ckpt_ckpt *c, const ckpt_tensor_stats *stats)
{
    uint64_t total = 0, stored = 0, encoded = 0;
    size_t i, unsafe = 0, width = 4, n = ckpt_tensor_count(c);
    int header_printed = 0, show_storage = 0;
    storage_info *storage = calloc(n ? n : 1, sizeof *storage);
    char a[64], b[64], st[256];

    for (i = 0; i < n; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c, i);
        size_t len = strlen(t->name);
        total += ckpt_tensor_nbytes(t);
        if (len > width)
            width = len < 72 ? len : 72;
        if (!storage)
            continue;
        describe_storage(t, &storage[i]);
        show_storage |= !storage[i].plain;
        if (!storage[i].plain && storage[i].codec[0] && storage[i].sum.stored_bytes) {
            stored += storage[i].sum.stored_bytes;
            encoded += storage[i].sum.bytes;
        }
    }
    printf("path:    %s\n", ckpt_path(c));
    printf("format:  %s (%s on disk)\n", ckpt_format_name(c), cli_human_size(ckpt_input_size(c), a, sizeof a));
    printf("tensors: %zu (%s)\n", n, cli_human_size(total, b, sizeof b));
    if (ckpt_hf_fp8_dir(ckpt_path(c)) == 1)
        printf("fp8:     F8_E4M3 weights with block scales (*_scale_inv): hf2mcore and convert read them as "
               "bfloat16, dequantised (convert --fp8 keep: as stored)\n");
    if (stored)
        printf("stored:  %s of %s encoded (x%.2f)\n", cli_human_size(stored, a, sizeof a),
               cli_human_size(encoded, b, sizeof b), (double)encoded / (double)stored);
    printf("\n");
    if (n) {
        printf("%-*s  %-13s  %-20s  %12s", (int)width, "name", "dtype", "shape", "bytes");
        if (show_storage)
            printf("  %-*s", stats ? 30 : 0, "storage (chunks, encoding, ratio)");
        if (stats)
            printf("  %12s %12s %12s %12s %6s %6s", "min", "max", "mean", "std", "nan", "inf");
        printf("\n");
    }
    for (i = 0; i < n; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c, i);
        printf("%-*s  %-13s  %-20s  %12llu", (int)width, t->name, ckpt_dtype_name(t->dtype),
               ckpt_shape_format(t->shape, t->ndim, a, sizeof a), (unsigned long long)ckpt_tensor_nbytes(t));
        if (show_storage) {
            storage_text(&storage[i], st, sizeof st);
            printf("  %-*s", stats ? 30 : 0, st);
        }
        if (stats)
            printf("  %12.5g %12.5g %12.5g %12.5g %6llu %6llu", stats[i].min, stats[i].max, stats[i].mean,
                   stats[i].std, (unsigned long long)stats[i].nan, (unsigned long long)stats[i].inf);
        printf("\n");
    }
    free(storage);
    for_each_metadata(ckpt_root(c), print_meta_line, &header_printed);
    if (ckpt_global_count(c)) {
        printf("\npickle globals (%zu):\n", ckpt_global_count(c));
        for (i = 0; i < ckpt_global_count(c); i++) {
            const ckpt_global_ref *g = ckpt_global_at(c, i);
            snprintf(a, sizeof a, "%s.%s", g->module, g->name);
            if (g->known) {
                printf("  %s\n", a);
            } else {
                printf("  %-48s UNSAFE (outside the known set) at '%s'\n", a, *g->path ? g->path : "(root)");
                unsafe++;
            }
        }
        if (unsafe)
            printf("\nwarning: %zu global(s) outside the known set: loading this file with pickle/torch.load\n"
                   "would run that code. ckptconv never runs it; convert refuses such files unless told\n"
                   "--drop-unknown-objects or --keep-unknown-objects.\n", unsafe);
    }
    if (ckpt_note_count(c)) {
        printf("\nnotes:\n");
        for (i = 0; i < ckpt_note_count(c); i++)
            printf("  %s\n", ckpt_note_at(c, i));
    }
}

int cli_inspect(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "stats", no_argument, NULL, 's' },
        { "json", no_argument, NULL, 'J' },
        { "verify-crc", no_argument, NULL, 'c' },
        { "format", required_argument, NULL, 'F' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    ckpt_open_options opts = CKPT_OPEN_OPTIONS_INIT;
    ckpt_tensor_stats *stats = NULL;
    ckpt_ckpt *c;
    struct stat st;
    int ch, json = 0, want_stats = 0;

    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's': want_stats = 1; break;
        case 'J': json = 1; break;
        case 'c': opts.verify_crc = 1; break;
        case 'F': opts.format = optarg; break;
        case 'h': inspect_help(stdout); return CLI_EXIT_OK;
        default: return cli_usage_error("inspect", "unknown option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("inspect", "expected one PATH, got %d argument(s)", argc - optind);
    /* a directory no format reads: a checkpoint of many files, if a layout knows it; one a
     * format knows is that format's to open, or to say what is wrong with it */
    if (!opts.format && !want_stats && stat(argv[optind], &st) == 0 && S_ISDIR(st.st_mode) &&
        !ckpt_format_detect(argv[optind]))
        return cli_inspect_set(argv[optind], json) < 0 ? cli_fail("inspect") : CLI_EXIT_OK;
    if (ckpt_open(&c, argv[optind], &opts) < 0)
        return cli_fail("inspect");
    if (want_stats && compute_stats(c, &stats) < 0) {
        ckpt_close(c);
        return cli_fail("inspect");
    }
    if (json)
        print_json(c, stats);
    else
        print_text(c, stats);
    free(stats);
    ckpt_close(c);
    return CLI_EXIT_OK;
}
