/* Output directories that appear whole or not at all.
 *
 * A run that writes several files (a converted checkpoint directory, consolidated shards)
 * builds them in a staging directory beside the output, `.<name>.ckptconv-<owner>-<random>`,
 * and moves it into place once everything is written. A failed run (or one interrupted by
 * a signal whose handler calls ckpt_outdir_cleanup_all) removes the staging directory:
 * nothing is left under the output name. A killed one (SIGKILL, out of memory, power loss)
 * cannot; the staging directory's name says whose it was, and the next run writing into the
 * same parent directory removes it once that process is gone (ckpt_outdir_notes says so).
 *
 * With `force`, an existing non-empty output directory is written into at the end, file by
 * file: files of the same name are replaced, other files are kept. Two runs writing one
 * output at once: without force the first to finish wins whole and the other fails
 * (CKPT_EEXISTS or CKPT_EIO, "filled meanwhile"); with force they commit one after the other,
 * as if run in turn. Files are never mixed. */
#ifndef CKPT_OUTDIR_H
#define CKPT_OUTDIR_H

#include "common.h"

CKPT_BEGIN_DECL

typedef struct ckpt_outdir ckpt_outdir;

/* Refuse `final` when it is a file (CKPT_EINVALID), a non-empty directory without force
 * (CKPT_EEXISTS), an input held open in the process or inside an input directory
 * (CKPT_EINVALID, see ckpt_outfile_open): all with class CKPT_ERRCLASS_ARGUMENT. Creates its
 * missing parent directories and the staging directory. The handle ends with
 * ckpt_outdir_commit or ckpt_outdir_abort. */
CKPT_EXTERN(int) ckpt_outdir_begin(ckpt_outdir **out, const char *final, int force);
/* Where the output file `rel` (a relative path, "a.pdparams" or "mp_rank_01/x.bin") is to
 * be written: inside the staging directory, parents created. Each name may be asked for
 * once; absolute names and names with ".." are refused; with force, so is a name whose
 * final place is an open input or inside an input directory (the output directory holds
 * the input: CKPT_EINVALID, class CKPT_ERRCLASS_ARGUMENT). Valid until commit or abort;
 * NULL on error (last error set). */
CKPT_EXTERN(const char *) ckpt_outdir_file(ckpt_outdir *d, const char *rel);
/* The output directory as the caller named it. */
CKPT_EXTERN(const char *) ckpt_outdir_final(const ckpt_outdir *d);
/* The staging directory (absolute), where the files are until commit. */
CKPT_EXTERN(const char *) ckpt_outdir_staging(const ckpt_outdir *d);
/* What beginning it did besides (staging directories of interrupted runs removed), one line
 * each; "" when nothing. Valid until commit or abort. */
CKPT_EXTERN(const char *) ckpt_outdir_notes(const ckpt_outdir *d);
/* Move everything into place and free d. On error the staging directory is removed. */
CKPT_EXTERN(int) ckpt_outdir_commit(ckpt_outdir *d);
/* Remove the staging directory and free d; NULL-safe. */
CKPT_EXTERN(void) ckpt_outdir_abort(ckpt_outdir *d);
/* Remove the staging directory of every output directory being built in the process.
 * Async-signal-safe: meant for SIGINT/SIGTERM handlers, after ckpt_outfile_cleanup_all
 * (which removes the files still being written, so that the directories can go). The
 * handles stay allocated: abort them (commit now fails) or exit. */
CKPT_EXTERN(void) ckpt_outdir_cleanup_all(void);

/* Refuse an output directory that is the input directory or lies inside it (a later run
 * would read the output as input; --force would write over what is being read): CKPT_EINVALID,
 * class CKPT_ERRCLASS_ARGUMENT, naming both. Files and directories are compared by device and
 * inode along the output's nearest existing ancestor, resolved. For a check before the input
 * is opened: ckpt_outdir_begin does it against every open input. */
CKPT_EXTERN(int) ckpt_outdir_check_apart(const char *final, const char *input);

CKPT_END_DECL

#endif
