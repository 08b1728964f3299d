/* Work in progress that survives a crash: the temporary file or staging directory an output
 * is built in beside its final name. Nothing removes those after SIGKILL, an OOM kill or a
 * power loss, so their names say whose they are — the machine, its boot, the process and its
 * start time — and a later run that writes into the same directory removes the ones it can
 * prove abandoned: made on this machine, and its process gone (another boot, no such process,
 * or another process under a reused pid). Anything it cannot prove abandoned, it leaves. */
#ifndef CKPT_WIP_H
#define CKPT_WIP_H

#ifndef CKPT_BUILD
#error "wip.h is private to the ckpt library"
#endif

#include <ckpt/buf.h>

#include <stddef.h>

/* ".<target>.ckptconv-<owner>-<random>" into out (at most NAME_MAX bytes; a long target is
 * shortened). 0, or a negative error. */
int ckpt_wip__name(char *out, size_t cap, const char *target);

/* Remove, under the directory dirfd (named dir_path in messages), every work-in-progress
 * entry, of whatever target, that belonged to a process that is gone: any run that writes
 * into a directory clears what killed runs left there. One line per entry removed or left
 * alone for a reason is appended to notes. Failures to remove are notes too, never errors:
 * the run itself is not affected. */
void ckpt_wip__sweep(int dirfd, const char *dir_path, ckpt_buf *notes);

#endif
