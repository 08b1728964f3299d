/* Output directories that appear whole or not at all.
 *
 * A command that writes several files (pd2te, zero-to-fp32) builds them in a staging
 * directory beside the output, `.<name>.ckptconv-XXXXXX`, and moves it into place once
 * everything is written. A failed run (or SIGINT/SIGTERM/SIGHUP, through
 * cli_outdir_cleanup_all) removes the staging directory: nothing is left under the output
 * name. With `force`, an existing non-empty output directory is written into at the end,
 * file by file: files of the same name are replaced, other files are kept. */
#ifndef CKPT_CLI_OUTDIR_H
#define CKPT_CLI_OUTDIR_H

typedef struct cli_outdir cli_outdir;

/* Refuse `final` when it is a file, or a non-empty directory without force. Creates its
 * missing parent directories and the staging directory. Errors are the library's (last
 * error set). */
int cli_outdir_begin(cli_outdir **out, const char *final, int force);
/* Where the output file `rel` (a relative path, "a.pdparams" or "mp_rank_01/x.bin") is to
 * be written: inside the staging directory, parents created. Valid until commit or abort;
 * NULL on error. */
const char *cli_outdir_file(cli_outdir *d, const char *rel);
/* The output directory as the user named it. */
const char *cli_outdir_final(const cli_outdir *d);
/* Move everything into place and free d. On error the staging directory is removed. */
int cli_outdir_commit(cli_outdir *d);
/* Remove the staging directory and free d; NULL-safe. */
void cli_outdir_abort(cli_outdir *d);
/* Remove the staging directory of the output being built, if any. Async-signal-safe; call
 * it after ckpt_outfile_cleanup_all, which removes the files still being written. */
void cli_outdir_cleanup_all(void);

#endif
