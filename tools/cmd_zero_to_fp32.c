/* ckptconv zero-to-fp32 CHECKPOINT_DIR OUTPUT_DIR: DeepSpeed's zero_to_fp32.py, same options
 * and outputs, streamed from the mapped rank files into place; more inputs (BF16_Optimizer,
 * fp32 ZeRO-0, tensor parallelism) and optionally the consolidated optimizer states. */
#include "cli.h"

#include <ckpt/deepspeed.h>
#include <ckpt/sys/common.h>
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

typedef struct zero_args {
    const char *in, *out, *tag;
    ckpt_deepspeed_fp32_options plan;
    cli_plan_args run;
} zero_args;

static void zero_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv zero-to-fp32 CHECKPOINT_DIR OUTPUT_DIR [options]\n"
"\n"
"Consolidate a DeepSpeed ZeRO 1/2/3 checkpoint into one fp32 state dict, as DeepSpeed's\n"
"zero_to_fp32.py does, with the same options, file names and tensor values (bit for\n"
"bit): OUTPUT_DIR/pytorch_model.bin, or model.safetensors with --safe-serialization;\n"
"above --max-shard-size, shards pytorch_model-00001-of-00003.bin ... and the index\n"
"pytorch_model.bin.index.json (model.safetensors.index.json). CHECKPOINT_DIR is the\n"
"directory holding `latest`, which names the tag directory (global_step100); --tag\n"
"names another one. The fp32 master weights are gathered from every rank's optimizer\n"
"partitions: floating tensors are written as float32 (buffers and the bf16/fp16\n"
"copies of frozen parameters are cast exactly as torch does), integer buffers keep\n"
"their type, tied weights (lm_head.weight = embed.weight) stay one tensor in .bin.\n"
"Output order: buffers, frozen parameters, trainable parameters, tied names.\n"
"\n"
"Tensors are streamed from the mapped rank files straight into their place in the\n"
"output, in parallel; memory stays within --memory whatever the model size. Nothing\n"
"appears under OUTPUT_DIR unless every file was written and synced (the files are\n"
"built in a hidden directory beside it, moved into place at the end, removed on\n"
"error or Ctrl-C). A non-empty OUTPUT_DIR is refused unless --force.\n"
"\n"
"Beyond DeepSpeed's script:\n"
"  - BF16_Optimizer checkpoints (bf16 with fp32 gradient accumulation) and fp32\n"
"    ZeRO-0 checkpoints (the module state dict is the fp32 weights); fp16/bf16\n"
"    ZeRO-0 checkpoints are refused: their fp32 masters are not stored by name;\n"
"  - tensor parallelism: a tag directory with mp_rank_00_..., mp_rank_01_... files\n"
"    gives one consolidated output per model-parallel rank, in OUTPUT_DIR/mp_rank_00/,\n"
"    OUTPUT_DIR/mp_rank_01/, ... (merging the ranks needs the model's split rules);\n"
"  - --optimizer-states, --dry-run, --json.\n"
"\n"
"options (DeepSpeed's spellings with '_' work too):\n"
"  -t, --tag TAG                 the tag directory to read instead of `latest`'s\n"
"  --exclude-frozen-parameters   leave out the frozen (requires_grad=False) parameters\n"
"  --safe-serialization          write safetensors instead of torch .bin files; tied\n"
"                                weights cannot be written so (as in DeepSpeed)\n"
"  --max-shard-size SIZE         largest file before sharding, decimal units as in\n"
"                                DeepSpeed (5GB = 5*10^9 bytes; KB, MB, GB, TB; also\n"
"                                KiB, MiB, GiB); default 5GB. A tensor larger than\n"
"                                SIZE gets a shard of its own\n"
"  --optimizer-states            also write each parameter's optimizer state (Adam's\n"
"                                exp_avg, exp_avg_sq), consolidated like the weights,\n"
"                                as <param>.exp_avg ... into optimizer_states.bin\n"
"                                (.safetensors), sharded and indexed the same way\n"
"  --to FORMAT                   bin (default), safetensors or h5 (model.h5: one\n"
"                                chunked HDF5 dataset per tensor)\n"
"  --compress C[:LEVEL]          with --to h5: zstd (filter 32015, as hdf5plugin;\n"
"                                level 1-22, default 3), gzip (1-9, default 6) or none\n"
"  --compress-level N            the level of --compress\n"
"  --dry-run                     print every output file, its tensors (name, dtype,\n"
"                                shape, bytes) and its size; write nothing\n"
"  --memory SIZE                 working-memory budget, e.g. 512M, 2G (default 512M)\n"
"  --threads N                   worker threads (default: all cores)\n"
"  --force                       write into a non-empty OUTPUT_DIR (files of the same\n"
"                                name are replaced, others kept)\n"
"  --json                        print a JSON report on stdout\n"
"  -q, --quiet                   no progress bar, no notes, no summary\n"
"\n"
"examples:\n"
"  ckptconv zero-to-fp32 checkpoints/ hf_model/\n"
"  ckptconv zero-to-fp32 checkpoints/ hf_model/ --safe-serialization --max-shard-size 2GB\n"
"  ckptconv zero-to-fp32 checkpoints/ out/ -t global_step500 --exclude-frozen-parameters\n"
"  ckptconv zero-to-fp32 checkpoints/ out/ --optimizer-states --dry-run\n");
}

static int parse_args(zero_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        { "tag", required_argument, NULL, 't' },
        { "exclude-frozen-parameters", no_argument, NULL, 'x' },
        { "exclude_frozen_parameters", no_argument, NULL, 'x' },
        { "safe-serialization", no_argument, NULL, 's' },
        { "safe_serialization", no_argument, NULL, 's' },
        { "max-shard-size", required_argument, NULL, 'S' },
        { "max_shard_size", required_argument, NULL, 'S' },
        { "optimizer-states", no_argument, NULL, 'o' },
        { "to", required_argument, NULL, 'T' },
        { "compress", required_argument, NULL, 'z' },
        { "compress-level", required_argument, NULL, 'Z' },
        CLI_PLAN_LONGOPTS,
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *cmd = "zero-to-fp32", *format;
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "t:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 't': a->tag = optarg; break;
        case 'x': a->plan.exclude_frozen = 1; break;
        case 's': a->plan.format = "safetensors"; break;
        case 'S':
            if (cli_parse_size(optarg, &a->plan.max_shard_size) < 0 || a->plan.max_shard_size == 0)
                return cli_usage_error(cmd, "--max-shard-size %s: expected a size such as 5GB, 500MB or 2KB", optarg);
            break;
        case 'o': a->plan.optimizer_states = 1; break;
        case 'T':
            format = ckpt_format_find(optarg);
            if (!format && (strcmp(optarg, "h5") == 0 || strcmp(optarg, "hdf5") == 0))
                return cli_usage_error(cmd, "--to %s: this build has no HDF5 format module (HDF5 was not found "
                                       "when it was built)", optarg);
            if (!format || (strcmp(format, "torch") != 0 && strcmp(format, "safetensors") != 0 &&
                            strcmp(format, "hdf5") != 0))
                return cli_usage_error(cmd, "--to %s: expected bin, safetensors or h5", optarg);
            a->plan.format = format;
            break;
        case 'z':
            if ((rc = cli_option_compress(cmd, optarg, &a->run.write)) != 0)
                return rc;
            break;
        case 'Z':
            if ((rc = cli_option_compress_level(cmd, optarg, &a->run.write)) != 0)
                return rc;
            break;
        case 'h': zero_help(stdout); return -1;
        default:
            if ((rc = cli_plan_option(cmd, c, optarg, &a->run)) != 0)
                return rc < 0 ? cli_usage_error(cmd, "unknown option") : rc;
        }
    }
    if (a->run.write.compress != CKPT_CODEC_NONE && (!a->plan.format || strcmp(a->plan.format, "hdf5") != 0))
        return cli_usage_error(cmd, "--compress is for HDF5 output (--to h5)");
    if (argc - optind != 2)
        return cli_usage_error(cmd, "expected CHECKPOINT_DIR and OUTPUT_DIR, got %d argument(s)", argc - optind);
    a->in = argv[optind];
    a->out = argv[optind + 1];
    if (!*a->in || !*a->out)
        return cli_usage_error(cmd, "CHECKPOINT_DIR and OUTPUT_DIR must not be empty");
    if (a->run.n_drop)
        return cli_usage_error(cmd, "--drop: %s writes every parameter the checkpoint holds, so none is left out "
                                    "(--exclude-frozen-parameters leaves out the frozen ones)", cmd);
    return 0;
}

static const char *out_dtype_note(const ckpt_deepspeed_fp32_entry *e, char *buf, size_t cap)
{
    if (e->dtype == e->t->dtype)
        return "";
    snprintf(buf, cap, " (stored %s)", ckpt_dtype_name(e->t->dtype));
    return buf;
}

static void print_plan(const zero_args *a, const ckpt_deepspeed_fp32 *p)
{
    const char *sep = a->out[strlen(a->out) - 1] == '/' ? "" : "/";
    size_t i, j, k, n_files = 0, n_tensors = 0;
    uint64_t bytes = 0;
    char size[32], shape[256], note[64];

    for (i = 0; i < p->n_sets; i++) {
        const ckpt_deepspeed_fp32_set *s = &p->sets[i];
        for (j = 0; j < s->shards->n_files; j++) {
            const ckpt_shard_file *f = &s->shards->files[j];
            printf("%s%s%s: %zu tensor%s, %s of tensor data\n", a->out, sep, f->name, f->n_entries,
                   f->n_entries == 1 ? "" : "s", cli_human_size(f->nbytes, size, sizeof size));
            for (k = 0; k < f->n_entries; k++) {
                const ckpt_deepspeed_fp32_entry *e = &s->entries[f->entries[k]];
                if (e->storage != f->entries[k] && e->nbytes > 0)
                    printf("  %-40s %-9s %-16s = %s\n", e->name, ckpt_dtype_name(e->dtype),
                           ckpt_shape_format(e->t->shape, e->t->ndim, shape, sizeof shape), s->entries[e->storage].name);
                else
                    printf("  %-40s %-9s %-16s %llu%s\n", e->name, ckpt_dtype_name(e->dtype),
                           ckpt_shape_format(e->t->shape, e->t->ndim, shape, sizeof shape), (unsigned long long)e->nbytes,
                           out_dtype_note(e, note, sizeof note));
            }
            n_files++;
            n_tensors += f->n_entries;
            bytes += f->nbytes;
        }
        if (s->shards->index_name) {
            printf("%s%s%s: index of %zu shards, total_size %llu\n", a->out, sep, s->shards->index_name,
                   s->shards->n_files, (unsigned long long)s->shards->total_size);
            n_files++;
        }
    }
    printf("dry run: %zu file%s, %zu tensor%s, %s of tensor data; nothing written\n", n_files,
           n_files == 1 ? "" : "s", n_tensors, n_tensors == 1 ? "" : "s", cli_human_size(bytes, size, sizeof size));
}

/* The plan report every job gives (cli_plan_report), with the checkpoint's and the writers'
 * notes, and with --dry-run each file's tensors: name, dtype, shape, bytes (0 for a name tied
 * to an earlier one, alias_of names it). */
static int print_json(const zero_args *a, const ckpt_ckpt *in, const ckpt_deepspeed_fp32 *p,
                      const ckpt_plan_report *rep, double seconds)
{
    cJSON *o = cJSON_CreateObject(), *notes, *lists = NULL;
    size_t i, j, k;

    cJSON_AddStringToObject(o, "command", "zero-to-fp32");
    cJSON_AddStringToObject(o, "input", a->in);
    cJSON_AddStringToObject(o, "output", a->out);
    notes = cJSON_AddArrayToObject(o, "notes");
    for (i = 0; i < ckpt_note_count(in); i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(ckpt_note_at(in, i)));
    cli_json_add_lines(notes, rep && rep->notes.len ? (const char *)rep->notes.data : NULL);
    if (a->run.dry_run)
        lists = cJSON_AddObjectToObject(o, "tensor_lists");
    for (i = 0; lists && i < p->n_sets; i++) {
        const ckpt_deepspeed_fp32_set *s = &p->sets[i];
        for (j = 0; j < s->shards->n_files; j++) {
            const ckpt_shard_file *sf = &s->shards->files[j];
            cJSON *list = cJSON_AddArrayToObject(lists, sf->name);
            for (k = 0; k < sf->n_entries; k++) {
                size_t item = sf->entries[k];
                const ckpt_deepspeed_fp32_entry *e = &s->entries[item];
                cJSON *t = cJSON_CreateObject(), *shape;
                int d;
                cJSON_AddStringToObject(t, "name", e->name);
                cJSON_AddStringToObject(t, "dtype", ckpt_dtype_name(e->dtype));
                shape = cJSON_AddArrayToObject(t, "shape");
                for (d = 0; d < e->t->ndim; d++)
                    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e->t->shape[d]));
                cJSON_AddNumberToObject(t, "bytes", (double)(e->storage == item ? e->nbytes : 0));
                if (e->storage != item && e->nbytes > 0)
                    cJSON_AddStringToObject(t, "alias_of", s->entries[e->storage].name);
                cJSON_AddItemToArray(list, t);
            }
        }
    }
    return cli_plan_report(o, p->plan, rep, seconds);
}

static void print_summary(const zero_args *a, const ckpt_ckpt *in, const ckpt_deepspeed_fp32 *p,
                          const ckpt_plan_report *rep, double seconds)
{
    size_t i, j, tensors = 0;
    char size[32];

    /* the writers' notes were printed as the plan ran (cli_plan_execute) */
    for (i = 0; i < ckpt_note_count(in); i++)
        fprintf(stderr, "note: %s\n", ckpt_note_at(in, i));
    for (i = 0; i < p->n_sets; i++)
        for (j = 0; j < p->sets[i].shards->n_files; j++)
            tensors += p->sets[i].shards->files[j].n_entries;
    if (rep->files == 0)
        fprintf(stderr, "nothing to write: the consolidated state dict is empty\n");
    fprintf(stderr, "wrote %s: %zu file%s, %zu tensor%s, %s in %.2f s\n", a->out, rep->files,
            rep->files == 1 ? "" : "s", tensors, tensors == 1 ? "" : "s",
            cli_human_size(rep->bytes_written, size, sizeof size), seconds);
}

int cli_zero_to_fp32(int argc, char **argv)
{
    zero_args a;
    ckpt_open_options oopts = CKPT_OPEN_OPTIONS_INIT;
    ckpt_plan_report rep;
    ckpt_deepspeed_fp32 *plan = NULL;
    ckpt_ckpt *in = NULL;
    size_t i;
    double start = cli_now();
    int rc;

    memset(&a, 0, sizeof a);
    memset(&rep, 0, sizeof rep);
    a.run.write = (ckpt_convert_options)CKPT_CONVERT_OPTIONS_INIT;
    a.plan = (ckpt_deepspeed_fp32_options)CKPT_DEEPSPEED_FP32_OPTIONS_INIT;
    if ((rc = parse_args(&a, argc, argv)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    oopts.format = "deepspeed_zero";
    oopts.tag = a.tag;
    oopts.optimizer_states = a.plan.optimizer_states;
    if (ckpt_open(&in, a.in, &oopts) < 0)
        return cli_fail("zero-to-fp32");
    rc = ckpt_deepspeed_fp32_new(&plan, in, &a.plan);
    if (rc >= 0 && !a.run.dry_run)
        rc = cli_plan_execute("zero-to-fp32", plan->plan, a.out, &a.run, &rep);
    if (rc >= 0) {
        if (a.run.json) {
            rc = print_json(&a, in, plan, a.run.dry_run ? NULL : &rep, cli_now() - start);
        } else if (a.run.dry_run) {
            for (i = 0; i < ckpt_note_count(in) && !a.run.quiet; i++)
                fprintf(stderr, "note: %s\n", ckpt_note_at(in, i));
            print_plan(&a, plan);
        } else if (!a.run.quiet) {
            print_summary(&a, in, plan, &rep, cli_now() - start);
        }
    }
    rc = rc < 0 ? cli_fail("zero-to-fp32") : CLI_EXIT_OK;
    ckpt_plan_report_dispose(&rep);
    ckpt_deepspeed_fp32_free(plan);
    ckpt_close(in);
    return rc;
}
