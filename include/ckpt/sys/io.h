/* For format implementers: mapped input files and atomic output files. */
#ifndef CKPT_SYS_IO_H
#define CKPT_SYS_IO_H

#include "../common.h"
#include "../tensor.h"

CKPT_BEGIN_DECL

/* What zstd did to one file: bytes before and after compression, and the time it took. */
typedef struct ckpt_zstd_stats { uint64_t raw_bytes, zst_bytes; double seconds; } ckpt_zstd_stats;

/* An input file, mapped read-only. Pages are read on demand; ckpt_file_release drops
 * pages already used so that reading a large file does not grow the resident set.
 *
 * A file that starts with a zstd frame (any name) is decompressed as it is opened, streaming,
 * into an unnamed temporary file in $TMPDIR (default /tmp), which is what is mapped: data,
 * size and fd are the plain bytes, path stays the name given, and zstd says what was done.
 * Memory holds one zstd window (at most 2^31 bytes, `zstd --long=31`); the temporary
 * directory needs room for the whole plain file. */
struct ckpt_file {
    const char *path;     /* as given to ckpt_file_open (copied) */
    int fd;
    const uint8_t *data;  /* the whole file; NULL when size is 0 */
    uint64_t size;
    uint64_t fd_offset;   /* where data[0] lies in what fd reads: 0, or where a window
                             (ckpt_reader_window) starts */
    ckpt_zstd_stats zstd; /* a decompressed input: its sizes and the time decompressing
                             took (zst_bytes > 0); all zero for a plain file */
};

CKPT_EXTERN(int) ckpt_file_open(ckpt_file **out, const char *path);
CKPT_EXTERN(void) ckpt_file_close(ckpt_file *f);
/* Copy [off, off+len) into dst; CKPT_EFORMAT naming the file if the range is past the end,
 * CKPT_EIO if the file was cut short while it is read. */
CKPT_EXTERN(int) ckpt_file_read(const ckpt_file *f, uint64_t off, void *dst, size_t len);
/* Run fn(arg), which reads f's mapped bytes (f->data), so that a file cut short while it is
 * read (SIGBUS) makes fn stop and this return CKPT_EIO, "file ends at offset N while being
 * read (changed on disk?)", instead of killing the process. fn must be able to stop at any
 * point: what it allocates lives in arg, for the caller to release. Nested calls are fine;
 * each thread has its own. Otherwise fn's return value. f may be NULL: fn reads several
 * files, and the error names the one that shrank. */
CKPT_EXTERN(int) ckpt_file_guard(const ckpt_file *f, int (*fn)(void *arg), void *arg);
/* Tell the kernel the pages of [off, off+len) will not be needed again soon (a mapped file
 * only: nothing for one with fd -1). */
CKPT_EXTERN(void) ckpt_file_release(const ckpt_file *f, uint64_t off, uint64_t len);

/* An output file written as a temporary file in the target directory and linked or renamed
 * into place by ckpt_outfile_commit after fsync. On abort (or free without commit) the
 * temporary is removed: nothing ever appears under the final name half-written. Where the
 * filesystem has unnamed files (O_TMPFILE) the temporary has no name, so a killed run leaves
 * nothing; elsewhere it is named after its owner, and opening any output in the same
 * directory later removes the temporaries of runs that are gone (ckpt_outfile_notes says
 * which).
 *
 * An output that is an input held open in the process (a reader's file or directory, a
 * set's root; symbolic and hard links included) or lies inside an input directory is
 * refused: CKPT_EINVALID, class CKPT_ERRCLASS_ARGUMENT. So are an existing output without
 * CKPT_OUTFILE_OVERWRITE (CKPT_EEXISTS) and a directory at the final name, with that class
 * too. */
typedef struct ckpt_outfile ckpt_outfile;

#define CKPT_OUTFILE_OVERWRITE 0x1u /* replace an existing file at the final name */
#define CKPT_OUTFILE_NAMED     0x2u /* a named temporary, for writers that need a path
                                       (ckpt_outfile_temp_path) */

CKPT_EXTERN(int) ckpt_outfile_open(ckpt_outfile **out, const char *final_path, unsigned flags);
CKPT_EXTERN(const char *) ckpt_outfile_path(const ckpt_outfile *f); /* the final name */
/* The temporary's path while it is being written: with CKPT_OUTFILE_NAMED, or where the
 * filesystem has no unnamed files; NULL otherwise. */
CKPT_EXTERN(const char *) ckpt_outfile_temp_path(const ckpt_outfile *f);
/* What opening it did besides (temporaries of interrupted runs removed), one line each; ""
 * when nothing. Valid until commit or abort. */
CKPT_EXTERN(const char *) ckpt_outfile_notes(const ckpt_outfile *f);
/* Positioned write; safe to call from several threads on disjoint ranges. */
CKPT_EXTERN(int) ckpt_outfile_pwrite(ckpt_outfile *f, uint64_t off, const void *data, size_t len);
/* Copy file bytes in the kernel where possible (copy_file_range), else through a buffer. */
CKPT_EXTERN(int) ckpt_outfile_copy(ckpt_outfile *f, uint64_t off, const ckpt_file *src,
                                   uint64_t src_off, uint64_t len);
/* Make the file exactly `size` bytes long (regions never written read as zeros). */
CKPT_EXTERN(int) ckpt_outfile_truncate(ckpt_outfile *f, uint64_t size);
/* fsync, link or rename into place, fsync the directory. A ".zst" output is first
 * compressed into a second temporary beside the first (one frame with its size and a
 * checksum; from 128 MiB on, long-distance matching with a 2^27 window, which `zstd -d` reads
 * without options), and that one is put in place. Frees f in all cases. Without
 * CKPT_OUTFILE_OVERWRITE, an output that appeared meanwhile (another run) is CKPT_EEXISTS and
 * stays as it is; with it, the last run to commit wins, each output whole. */
CKPT_EXTERN(int) ckpt_outfile_commit(ckpt_outfile *f);
/* An output whose final name ends in ".zst" is written plain and compressed with zstd as it is
 * committed. Level 0: zstd's default (3); threads 0: all cores; stats (may be NULL) is filled in
 * by a successful commit. Call before commit. */
CKPT_EXTERN(void) ckpt_outfile_set_zstd(ckpt_outfile *f, int level, int threads, ckpt_zstd_stats *stats);
/* Non-zero when the output will be compressed (its final name ends in ".zst"). */
CKPT_EXTERN(int) ckpt_outfile_is_zstd(const ckpt_outfile *f);
/* Remove the temporary and free; NULL-safe. */
CKPT_EXTERN(void) ckpt_outfile_abort(ckpt_outfile *f);
/* Remove the temporary file of every output still open in the process. Async-signal-safe:
 * meant for SIGINT/SIGTERM handlers. The outputs stay allocated: abort them (commit now
 * fails) or exit. */
CKPT_EXTERN(void) ckpt_outfile_cleanup_all(void);

CKPT_END_DECL

#endif
