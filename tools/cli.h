/* Shared by the ckptconv subcommands: option helpers, output helpers, exit codes. */
#ifndef CKPT_CLI_H
#define CKPT_CLI_H

#include <ckpt.h>

#include <stdio.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE 2

typedef int (*cli_command_fn)(int argc, char **argv);

int cli_inspect(int argc, char **argv);
/* inspect of a checkpoint set (cmd_inspect_set.c): 0, or the library error. */
int cli_inspect_set(const char *path, int json);
int cli_convert(int argc, char **argv);
int cli_pd2te(int argc, char **argv);
int cli_te2pd(int argc, char **argv);
int cli_zero_to_fp32(int argc, char **argv);
int cli_reshard(int argc, char **argv);
int cli_hf2mcore(int argc, char **argv);
int cli_mcore2hf(int argc, char **argv);
int cli_paddle2hf(int argc, char **argv);
int cli_hf2paddle(int argc, char **argv);
int cli_verify(int argc, char **argv);
int cli_diff(int argc, char **argv);

/* Print "ckptconv <cmd>: error: <last library error>" to stderr; returns CLI_EXIT_USAGE when
 * the library refused the request as it stands (class CKPT_ERRCLASS_ARGUMENT: an output that
 * is an input or inside one, exists without --force, is a directory; an unknown format),
 * else CLI_EXIT_FAILURE. */
int cli_fail(const char *cmd);
/* Print a usage error and the hint to run --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
/* "512M", "4GiB", "1e9", "2GB" (decimal units KB/MB/GB/TB, binary K/M/G/T/KiB/MiB/GiB/TiB). */
int cli_parse_size(const char *s, uint64_t *out);
/* Human size: "1.5 GiB". */
const char *cli_human_size(uint64_t bytes, char *buf, size_t cap);
/* Progress bar on stderr when it is a terminal (payload: const char *label). */
void cli_progress(uint64_t done, uint64_t total, void *payload);
void cli_progress_done(void);
/* Seconds since an arbitrary start, monotonic. */
double cli_now(void);
/* The one integer syntax of every option: decimal digits only (no sign, space or suffix),
 * from min to max (min >= 0); a value past max, overflowing or not, is refused. The prefix
 * form reads the digits at the start of s and sets *end past them (lists such as "0,5-8").
 * 0, or -1. */
int cli_parse_int_prefix(const char *s, long long min, long long max, long long *out, const char **end);
int cli_parse_int(const char *s, long long min, long long max, long long *out);
/* An integer option (opt is its spelling, "--tp"): 0, or the usage error's exit status after
 * printing "<opt> <arg>: expected an integer from <min> to <max>". */
int cli_option_int(const char *cmd, const char *opt, const char *arg, long long min, long long max, long long *out);
/* Largest TP, PP, VPP size an option takes, in every command (a format with a smaller
 * limit, PaddleNLP's 4096, says so itself). */
#define CLI_MAX_PARALLEL (1 << 20)
/* --tp, --pp, --vpp (opt): an integer from 1 to CLI_MAX_PARALLEL; 0, or the usage error's
 * exit status after printing it as cli_option_int does. */
int cli_option_parallel(const char *cmd, const char *opt, const char *arg, int *out);
/* --memory (at least 16M) and --threads (1 to 1024) values; 0, or the usage error's exit
 * status after printing it. */
int cli_option_memory(const char *cmd, const char *arg, uint64_t *out);
int cli_option_threads(const char *cmd, const char *arg, int *out);
/* --compress CODEC[:LEVEL] (zstd, gzip or none) and --compress-level N into o; 0, or the
 * usage error's exit status after printing it. The level is checked against the codec
 * later, by the writer, which knows which one applies. */
int cli_option_compress(const char *cmd, const char *arg, ckpt_convert_options *o);
int cli_option_compress_level(const char *cmd, const char *arg, ckpt_convert_options *o);

/* Megatron's uneven pipeline split (reshard, hf2mcore), under the names of Megatron's own
 * arguments: their getopt codes, long options, the help lines, and the option taken into
 * target t (0, a usage error's exit status, or -1 when c is not one of them). */
enum { CLI_O_FIRST_STAGE = 1100, CLI_O_LAST_STAGE, CLI_O_ACCOUNT_EMBEDDING, CLI_O_ACCOUNT_LOSS };
#define CLI_SPLIT_LONGOPTS                                                                                 \
    { "decoder-first-pipeline-num-layers", required_argument, NULL, CLI_O_FIRST_STAGE },                     \
        { "decoder-last-pipeline-num-layers", required_argument, NULL, CLI_O_LAST_STAGE },                   \
        { "account-for-embedding-in-pipeline-split", no_argument, NULL, CLI_O_ACCOUNT_EMBEDDING },           \
        { "account-for-loss-in-pipeline-split", no_argument, NULL, CLI_O_ACCOUNT_LOSS }
#define CLI_SPLIT_HELP                                                                                     \
    "  --decoder-first-pipeline-num-layers N, --decoder-last-pipeline-num-layers M\n"                       \
    "                           megatron-core's uneven pipeline: the first (last) stage\n"                  \
    "                           holds N (M) layers, the other stages equal shares of the\n"                 \
    "                           rest; written into args under these names (Megatron)\n"                     \
    "  --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split\n"                   \
    "                           the embedding (loss) counts as a layer of the first (last)\n"               \
    "                           stage in an equal split, which holds one layer less; not\n"                 \
    "                           with the two above. Without any of these the source's split\n"              \
    "                           is kept at its own PP and VPP, else the layers split evenly\n"              \
    "                           (a PP that does not divide them is refused). A legacy or\n"                 \
    "                           torch_dist input is read at the split its args give; a\n"                   \
    "                           custom --pipeline-model-parallel-layout is refused, as is an\n"             \
    "                           uneven split written with VPP\n"
int cli_split_option(const char *cmd, int c, const char *arg, ckpt_megatron_target *t);

/* Options of the commands that write a plan: --dry-run, --json, --force, -q/--quiet,
 * --memory, --threads, --drop. Their getopt codes: */
enum { CLI_O_DRY_RUN = 1000, CLI_O_JSON, CLI_O_FORCE, CLI_O_MEMORY, CLI_O_THREADS, CLI_O_DROP };
#define CLI_PLAN_LONGOPTS                                                                         \
    { "dry-run", no_argument, NULL, CLI_O_DRY_RUN }, { "json", no_argument, NULL, CLI_O_JSON },     \
        { "force", no_argument, NULL, CLI_O_FORCE }, { "memory", required_argument, NULL, CLI_O_MEMORY }, \
        { "threads", required_argument, NULL, CLI_O_THREADS }, { "quiet", no_argument, NULL, 'q' }, \
        { "drop", required_argument, NULL, CLI_O_DROP }
typedef struct cli_plan_args {
    int dry_run, json, force, quiet;
    ckpt_convert_options write; /* memory and threads */
    const char *drop[64];       /* --drop patterns */
    size_t n_drop;
} cli_plan_args;

/* Take getopt's c if it is one of the shared options: 0, a usage error's exit status, or -1
 * when c is not one of them. */
int cli_plan_option(const char *cmd, int c, const char *arg, cli_plan_args *a);
/* Give the plan the --drop patterns. */
int cli_plan_drop_option(ckpt_plan *plan, const cli_plan_args *a);
/* ckpt_plan_leave_out(plan, name, NULL) as a reader's leave_out callback (payload: the plan). */
int cli_plan_leave_out(void *plan, const char *name);
/* --dry-run: "<summary>: N files, nothing written", then every file and tensor, then each
 * tensor left out ("dropped NAME (REASON)"). */
int cli_plan_dry_run(const ckpt_plan *plan, const char *summary);
/* Write the plan into out, with a progress bar unless quiet or json. */
int cli_plan_execute(const char *cmd, const ckpt_plan *plan, const char *out, const cli_plan_args *a,
                     ckpt_plan_report *report);
/* After a run, unless quiet or json: each tensor left out, on stderr. */
void cli_plan_print_dropped(const ckpt_plan *plan, const cli_plan_args *a);

/* Print a command's JSON report: `job` (freed here) holds the command's own keys (command,
 * input, output, its layout), then come the keys every job shares (ckpt_plan_json: dry_run,
 * files, tensors, bytes, dropped, bytes_written) and, after a run (written non-NULL),
 * seconds. 0 or an error. */
struct cJSON;
int cli_plan_report(struct cJSON *job, const ckpt_plan *plan, const ckpt_plan_report *written, double seconds);
/* Append each non-empty line of text (notes, "a\nb\n"; NULL for none) to a JSON array. */
void cli_json_add_lines(struct cJSON *array, const char *text);

/* reshard of a PaddleNLP directory (cmd_reshard_paddle.c): the target and what the command
 * line gave. */
typedef struct cli_reshard_job {
    const char *in, *out;
    int tp, pp, tp_set, pp_set;
    int no_optimizer;
    const cli_plan_args *p;
} cli_reshard_job;

int cli_reshard_paddle(const cli_reshard_job *j);

#endif
