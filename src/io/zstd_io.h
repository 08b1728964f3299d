/* zstd below the I/O handles: a compressed input is decompressed as it is opened (file.c), a
 * ".zst" output is compressed as it is committed (outfile.c). Formats never see it. */
#ifndef CKPT_IO_ZSTD_IO_H
#define CKPT_IO_ZSTD_IO_H

#if !defined(CKPT_BUILD) && !defined(CKPT_FUZZ_ZSTD)
#error "zstd_io.h is internal to libckpt"
#endif

#include <ckpt/sys/io.h>

#include <stddef.h>
#include <stdint.h>

/* The largest window a compressed input may need: 2^31 bytes, the most `zstd --long=31`
 * writes. Decompressing holds one window in memory. */
#define CKPT_ZSTD_MAX_WINDOW_LOG 31

/* Non-zero when `head` (n bytes, the start of a file) begins a zstd frame or a skippable
 * frame. */
int ckpt_zstd__is_frame(const uint8_t *head, size_t n);

/* How many decompressed bytes a check (below) sees first. */
#define CKPT_ZSTD_CHECK_BYTES ((uint64_t)1 << 20)

/* What the opener of a compressed input knows of the bytes it expects, asked before the
 * rest of the stream is written: a few compressed bytes may stand for gigabytes that are not
 * a checkpoint at all. fn gets the first n decompressed bytes of `path` (n is
 * CKPT_ZSTD_CHECK_BYTES or more, or everything when `whole`). It returns < 0 to refuse (error
 * set, naming path), or 0 having set either *max_size, the most bytes the whole may hold
 * (UINT64_MAX: no bound), or, when it cannot tell yet and !whole, *need, how many leading
 * bytes it must see (more than n). The io layer knows no format: the engine passes this. */
typedef struct ckpt_zstd_check {
    int (*fn)(void *arg, const char *path, const uint8_t *head, size_t n, int whole, uint64_t *need,
              uint64_t *max_size);
    void *arg;
} ckpt_zstd_check;

/* Decompress every frame of in_fd, read from its start (`path` names it in messages), into a
 * new file without a name in $TMPDIR (default /tmp). *out_fd receives it, positioned
 * anywhere; stats gets the sizes and the time. check (may be NULL) sees the first bytes
 * before the rest is written. CKPT_EFORMAT for a truncated or corrupt stream, one past the
 * limit below or past what check allows, or one whose frame declares more than that;
 * CKPT_EUNSUPPORTED for a window over 2^31, CKPT_EIO for the temporary directory (full: the
 * message says to set TMPDIR); whatever check returns. */
int ckpt_zstd__decompress(int in_fd, const char *path, int *out_fd, ckpt_zstd_stats *stats,
                          const ckpt_zstd_check *check);

/* ckpt_file_open of `path` under another name (`name`, which errors and f->path show), and
 * with decompress 0 taking a zstd frame for plain bytes: for files the library made itself
 * (file.c). check (may be NULL) judges a compressed input's first bytes (see above). */
int ckpt_file__open_as(ckpt_file **out, const char *path, const char *name, int decompress,
                       const ckpt_zstd_check *check);

/* The most bytes one input may decompress to, a guard against decompression bombs for tests
 * and fuzzers; UINT64_MAX (the default) leaves only the temporary directory's room. Not
 * thread-safe against concurrent opens. */
void ckpt_zstd__set_input_limit(uint64_t max_bytes);

/* Compress the first `size` bytes of src_fd into dst_fd, at its current position, as one
 * frame that records its size and a checksum. level 0: zstd's default; threads 0: every
 * core. `name` (the final output) is used in messages. stats gets sizes and time. */
int ckpt_zstd__compress(int src_fd, int dst_fd, uint64_t size, int level, int threads, const char *name,
                        ckpt_zstd_stats *stats);

#endif
