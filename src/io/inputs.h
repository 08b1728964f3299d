/* The inputs open in the process, so that no output is written over one. Readers and sets
 * hold the files and directories they open; every output the library creates (outfile.c,
 * outdir.c) is checked against them first. Files are told apart by device and inode, so a
 * symbolic link or a hard link to an input is that input; directories are compared along
 * the resolved path of the output's nearest existing ancestor, so an output anywhere below
 * an input directory is refused. */
#ifndef CKPT_IO_INPUTS_H
#define CKPT_IO_INPUTS_H

#ifndef CKPT_BUILD
#error "inputs.h is private to the ckpt library"
#endif

/* Hold `path` (a file or a directory) as an input of `owner` until ckpt_inputs__release of
 * that owner. A path that cannot be stat'ed holds nothing (opening it fails on its own).
 * 0, or CKPT_ENOMEM. */
int ckpt_inputs__hold(const void *owner, const char *path);
/* Forget every input that `owner` holds. */
void ckpt_inputs__release(const void *owner);

/* Refuse an output `path` (need not exist yet) that is an input held now, or lies inside an
 * input directory: CKPT_EINVALID, class CKPT_ERRCLASS_ARGUMENT, naming both. */
int ckpt_inputs__check_output(const char *path);

/* The same check against one input path, held or not (ckpt_outdir_check_apart). */
int ckpt_inputs__check_apart(const char *path, const char *input);

#endif
