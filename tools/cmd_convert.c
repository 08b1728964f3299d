/* ckptconv convert IN OUT: between torch .pt, .pdparams, safetensors and HDF5, any of them
 * zstd-compressed. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void convert_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv convert IN OUT [options]\n"
"\n"
"Convert a checkpoint between formats. The input format is detected from its\n"
"content (IN may also be a DeepSpeed ZeRO checkpoint directory: its shards are\n"
"consolidated); the output format comes from OUT's extension (.pt .pth .bin .ckpt ->\n"
"torch, .pdparams .pdopt -> pdparams, .safetensors -> safetensors, .h5 .hdf5 ->\n"
"hdf5) unless --to names it. A name ending in .zst (model.safetensors.zst) is written\n"
"zstd-compressed, and a zstd-compressed IN is read as it is (any name).\n"
"Tensors are streamed from the mapped input straight into their place in\n"
"the output, in parallel; memory stays within --memory whatever the model size.\n"
"Nothing appears under OUT unless the whole file was written and synced.\n"
"\n"
"torch -> torch keeps every non-tensor object (args, iteration, rng states,\n"
"optimizer state, TE _extra_state) and every view/shared storage. safetensors and\n"
"pdparams hold tensors only: non-tensor entries are dropped with a note.\n"
"Tensor names are container keys joined with '/' (optimizer/state/0/exp_avg).\n"
"\n"
"options:\n"
"  --to FORMAT              output format: pt (torch), pdparams, safetensors, h5\n"
"  --compress C[:LEVEL]     HDF5 chunk compression: zstd (filter 32015, as\n"
"                           hdf5plugin; level 1-22, default 3), gzip (deflate;\n"
"                           1-9, default 6) or none (the default)\n"
"  --compress-level N       level of --compress, or of zstd for an OUT ending in\n"
"                           .zst (1-22, default 3)\n"
"  --dtype D                cast floating-point tensors to D (float32, bfloat16,\n"
"                           float16, float64, float8_e4m3fn, float8_e5m2), rounding\n"
"                           to nearest even exactly as torch's Tensor.to does\n"
"  --fp8 dequantize|keep    a Hugging Face model directory released in FP8 with\n"
"                           block scales (config.json's quantization_config):\n"
"                           its F8_E4M3 weights written as bfloat16, dequantised\n"
"                           with their weight_scale_inv as transformers does, the\n"
"                           scales consumed (dequantize, the default); or weights\n"
"                           and scales written as stored (keep). Either way every\n"
"                           weight must have its scale of the block shape\n"
"  --protocol N             pickle protocol for .pdparams output (2 or 4; default 4,\n"
"                           as paddle.save; 2 splits tensors over 1 GiB as paddle does)\n"
"  --memory SIZE            working-memory budget, e.g. 512M, 2G (default 512M)\n"
"  --threads N              worker threads (default: all cores)\n"
"  --force                  replace OUT if it exists\n"
"  --verify-crc             check CRC-32 of every zip record of the input first\n"
"  --json                   print a JSON report on stdout\n"
"  -q, --quiet              no progress bar, no summary\n"
"\n"
"safety: reading never runs pickle code. If the input's pickle references a global\n"
"outside the known set (e.g. posix.system), convert refuses and names the global\n"
"and its key path. Then:\n"
"  --drop-unknown-objects   convert the tensors only\n"
"  --keep-unknown-objects   carry the objects through verbatim; UNSAFE: whoever\n"
"                           loads the output with pickle runs that code\n"
"\n"
"examples:\n"
"  ckptconv convert model_optim_rng.pt model.safetensors\n"
"  ckptconv convert model_state.pdparams model.pt --dtype float32\n"
"  ckptconv convert in.pt out.pt --dtype bfloat16 --memory 1G\n"
"  ckptconv convert checkpoints/ pytorch_model.bin --dtype float32   # like zero_to_fp32\n"
"  ckptconv convert model.safetensors model.h5 --compress zstd:3\n"
"  ckptconv convert DeepSeek-V3/ model.safetensors --fp8 keep       # one file, still FP8\n"
"  ckptconv convert model_optim_rng.pt model_optim_rng.pt.zst --compress-level 9\n");
}

/* The writable format --to names (a format name, alias or extension), or NULL. Directory
 * formats (no extension) that write only write their files for plans: not one file here. */
static const char *format_for_to(const char *to)
{
    const char *name = ckpt_format_find(to), *at, *ext;
    unsigned caps;
    size_t i;

    for (i = 0; name && (at = ckpt_format_at(i, &caps, &ext)); i++)
        if (strcmp(at, name) == 0)
            return caps & CKPT_FORMAT_WRITE && ext[0] ? name : NULL;
    return NULL;
}

static void print_json(const ckpt_ckpt *in, const char *out_path, const char *format,
                       const ckpt_convert_report *r, double seconds)
{
    cJSON *o = cJSON_CreateObject(), *notes = cJSON_CreateArray();
    char *text;

    cJSON_AddStringToObject(o, "input", ckpt_path(in));
    cJSON_AddStringToObject(o, "input_format", ckpt_format_name(in));
    cJSON_AddStringToObject(o, "output", out_path);
    cJSON_AddStringToObject(o, "output_format", format);
    cJSON_AddNumberToObject(o, "tensors", (double)r->tensors);
    cJSON_AddNumberToObject(o, "bytes_written", (double)r->bytes_written);
    cJSON_AddNumberToObject(o, "dropped_values", (double)r->dropped_values);
    cJSON_AddNumberToObject(o, "seconds", seconds);
    cli_json_add_lines(notes, (const char *)r->notes.data);
    cJSON_AddItemToObject(o, "notes", notes);
    text = cJSON_Print(o);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

int cli_convert(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "to", required_argument, NULL, 't' },
        { "dtype", required_argument, NULL, 'd' },
        { "protocol", required_argument, NULL, 'p' },
        { "memory", required_argument, NULL, 'm' },
        { "threads", required_argument, NULL, 'j' },
        { "force", no_argument, NULL, 'f' },
        { "verify-crc", no_argument, NULL, 'c' },
        { "json", no_argument, NULL, 'J' },
        { "quiet", no_argument, NULL, 'q' },
        { "drop-unknown-objects", no_argument, NULL, 'D' },
        { "keep-unknown-objects", no_argument, NULL, 'K' },
        { "compress", required_argument, NULL, 'z' },
        { "compress-level", required_argument, NULL, 'Z' },
        { "fp8", required_argument, NULL, '8' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    ckpt_convert_options opts = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_open_options oopts = CKPT_OPEN_OPTIONS_INIT;
    ckpt_convert_report report;
    ckpt_ckpt *in = NULL;
    const char *format;
    ckpt_fp8_mode fp8 = CKPT_FP8_DEQUANTIZE;
    int c, json = 0, quiet = 0, drop = 0, keep = 0, rc;
    double start;
    char size[32];

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            opts.format = format_for_to(optarg);
            if (!opts.format)
                return cli_usage_error("convert", "--to %s: expected pt, pdparams, safetensors or h5", optarg);
            break;
        case 'd':
            opts.dtype = ckpt_dtype_from_name(optarg);
            if (opts.dtype == CKPT_DTYPE_INVALID || !ckpt_dtype_is_float(opts.dtype))
                return cli_usage_error("convert", "--dtype %s: expected a floating-point type "
                                       "(float32, bfloat16, float16, float64, float8_e4m3fn, float8_e5m2)", optarg);
            break;
        case 'p': {
            long long v;
            if (cli_parse_int(optarg, 2, 4, &v) < 0 || v == 3)
                return cli_usage_error("convert", "--protocol %s: expected 2 or 4", optarg);
            opts.protocol = (int)v;
            break;
        }
        case 'm':
            if ((rc = cli_option_memory("convert", optarg, &opts.memory)) != 0)
                return rc;
            break;
        case 'j':
            if ((rc = cli_option_threads("convert", optarg, &opts.threads)) != 0)
                return rc;
            break;
        case 'z':
            if ((rc = cli_option_compress("convert", optarg, &opts)) != 0)
                return rc;
            break;
        case 'Z':
            if ((rc = cli_option_compress_level("convert", optarg, &opts)) != 0)
                return rc;
            break;
        case '8':
            if (strcmp(optarg, "keep") == 0)
                fp8 = CKPT_FP8_KEEP;
            else if (strcmp(optarg, "dequantize") != 0)
                return cli_usage_error("convert", "--fp8 %s: expected dequantize or keep", optarg);
            break;
        case 'f': opts.overwrite = 1; break;
        case 'c': oopts.verify_crc = 1; break;
        case 'J': json = 1; break;
        case 'q': quiet = 1; break;
        case 'D': drop = 1; break;
        case 'K': keep = 1; break;
        case 'h': convert_help(stdout); return CLI_EXIT_OK;
        default: return cli_usage_error("convert", "unknown option");
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("convert", "expected IN and OUT, got %d argument(s)", argc - optind);
    if (drop && keep)
        return cli_usage_error("convert", "--drop-unknown-objects and --keep-unknown-objects exclude each other");
    if (fp8 == CKPT_FP8_KEEP && opts.dtype != CKPT_DTYPE_INVALID)
        return cli_usage_error("convert", "--fp8 keep with --dtype would cast the FP8 weights apart from their "
                               "scales; dequantize them (the default) to cast");
    opts.unknown = drop ? CKPT_UNKNOWN_DROP : keep ? CKPT_UNKNOWN_KEEP : CKPT_UNKNOWN_REFUSE;
    format = opts.format ? opts.format : ckpt_format_for_path(argv[optind + 1]);
    if (!format)
        return cli_usage_error("convert", "cannot tell the output format of '%s' from its extension; use --to",
                               argv[optind + 1]);
    if (opts.compress != CKPT_CODEC_NONE && strcmp(format, "hdf5") != 0)
        return cli_usage_error("convert", "--compress is for HDF5 output; compress a whole %s file by ending "
                               "OUT's name in .zst (level: --compress-level)", format);
    if (!quiet && !json) {
        opts.progress = cli_progress;
        opts.progress_payload = "converting";
    }
    start = cli_now();
    if (ckpt_open(&in, argv[optind], &oopts) < 0)
        return cli_fail("convert");
    /* a Hugging Face directory released in FP8 is written dequantised (its scales consumed),
       or kept, its weights and scales checked all the same */
    if ((rc = ckpt_hf_fp8_dir(argv[optind])) >= 0)
        rc = rc ? ckpt_hf_fp8_convert(argv[optind], argv[optind + 1], fp8, &opts, &report)
                : ckpt_convert(in, argv[optind + 1], &opts, &report);
    cli_progress_done();
    if (rc < 0) {
        ckpt_convert_report_dispose(&report);
        ckpt_close(in);
        return cli_fail("convert");
    }
    if (json) {
        print_json(in, argv[optind + 1], format, &report, cli_now() - start);
    } else if (!quiet) {
        const char *line = report.notes.len ? (const char *)report.notes.data : "";
        while (*line) {
            size_t n = strcspn(line, "\n");
            fprintf(stderr, "note: %.*s\n", (int)n, line);
            line += n + (line[n] == '\n');
        }
        fprintf(stderr, "wrote %s (%s, %zu tensors, %s) in %.2f s\n", argv[optind + 1], format, report.tensors,
                cli_human_size(report.bytes_written, size, sizeof size), cli_now() - start);
    }
    if (keep && !quiet && !json)
        fprintf(stderr, "warning: --keep-unknown-objects: %s may run code when loaded with pickle\n",
                argv[optind + 1]);
    ckpt_convert_report_dispose(&report);
    ckpt_close(in);
    return CLI_EXIT_OK;
}
