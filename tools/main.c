/* ckptconv: one binary, one subcommand per file in tools/. */
#include "cli.h"

#include <ckpt/sys/io.h>

#include <signal.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *name;
    cli_command_fn fn;
    const char *summary;
} commands[] = {
    { "inspect", cli_inspect, "list tensors, metadata and pickle globals of a checkpoint" },
    { "convert", cli_convert, "convert between torch .pt, .pdparams, safetensors and HDF5 (.zst too)" },
    { "pd2te", cli_pd2te, "PaddleNLP LLaMA checkpoint directory -> Transformer Engine layers" },
    { "te2pd", cli_te2pd, "Transformer Engine LLaMA checkpoint directory -> PaddleNLP layout" },
    { "zero-to-fp32", cli_zero_to_fp32, "consolidate a DeepSpeed ZeRO checkpoint into fp32 weights" },
    { "reshard", cli_reshard, "Megatron-LM or PaddleNLP checkpoint -> another TP/PP layout, optimizer state too" },
    { "hf2mcore", cli_hf2mcore, "Hugging Face model (Llama, Mistral, Qwen2/3, Gemma 3, GPT-2) -> Megatron-LM at any TP/PP" },
    { "mcore2hf", cli_mcore2hf, "Megatron-LM checkpoint at any TP/PP -> Hugging Face model directory" },
    { "paddle2hf", cli_paddle2hf, "PaddleNLP LLaMA or Qwen2 checkpoint at any TP/PP -> Hugging Face directory" },
    { "hf2paddle", cli_hf2paddle, "Hugging Face LLaMA or Qwen2 directory -> PaddleNLP checkpoint at any TP/PP" },
    { "verify", cli_verify, "run two checkpoints layer by layer on the same inputs; name the layer that differs" },
    { "diff", cli_diff, "compare two checkpoints of any formats tensor by tensor, sets at full shape" },
};

static void usage(FILE *out)
{
    size_t i;
    fprintf(out,
            "usage: ckptconv <command> [options]\n"
            "\n"
            "Read, convert and verify large-model training checkpoints without running\n"
            "their pickle code and without loading them whole into memory.\n"
            "\n"
            "commands:\n");
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "formats: ");
    for (i = 0; i < ckpt_format_count(); i++) {
        const char *ext;
        const char *name = ckpt_format_at(i, NULL, &ext);
        fprintf(out, "%s%s (%s)", i ? ", " : "", name, *ext ? ext : "a directory");
    }
    fprintf(out,
            "\n\n"
            "Run 'ckptconv <command> --help' for the options of a command.\n"
            "Exit status: 0 success, 1 failure (the message names file, tensor and reason), 2 usage error.\n");
}

static void on_signal(int sig)
{
    /* never leave a half-written temporary behind */
    ckpt_outfile_cleanup_all();
    ckpt_outdir_cleanup_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    size_t i;

    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ckptconv %s\n", CKPT_VERSION_STRING);
        return CLI_EXIT_OK;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    /* Past the file size limit (ulimit -f) a write fails with EFBIG instead of killing the
     * process: the run reports it, removes its temporaries and exits 1. */
    signal(SIGXFSZ, SIG_IGN);
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "ckptconv: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
