/* zstd streams in and out of files, for the I/O handles (see zstd_io.h).
 *
 * Inputs are decompressed into an unnamed temporary file rather than into memory: the engine
 * maps its inputs and reads them lazily and in parallel, which a compressed stream cannot
 * serve, and a checkpoint may be larger than RAM. The plain bytes then live in the page cache
 * of that file (evictable, written back to $TMPDIR's disk) and only one zstd window lives in
 * this process. libzstd decompresses on one thread; the kernel already overlaps our writes
 * (into the page cache) and reads (readahead) with it, so a second thread would buy little.
 *
 * Outputs are compressed from the finished plain temporary, because the engine writes an
 * output with positioned writes from many threads, in no order, while a zstd frame is
 * written front to back. */
#include "zstd_io.h"

#include <ckpt/sys/common.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#define IN_CHUNK ((size_t)1 << 20)
/* zstd's block size: what is written was just made and is still in the cache. */
#define OUT_CHUNK ((size_t)128 << 10)
/* From this size on, an output is compressed with long-distance matching over a 2^27 window:
 * large checkpoints repeat themselves far apart (optimizer moments, tied weights), and 2^27
 * is the largest window `zstd -d` accepts without --long (or --memory). */
#define LONG_MIN_BYTES ((uint64_t)128 << 20)
#define LONG_WINDOW_LOG 27

static uint64_t input_limit = UINT64_MAX;

void ckpt_zstd__set_input_limit(uint64_t max_bytes)
{
    input_limit = max_bytes;
}

/* No window larger than the limit can need: a frame that asks for one is refused before its
 * window is allocated (a few hostile bytes could otherwise ask for 2^31). */
static int window_log_max(void)
{
    int log = 10; /* ZSTD_WINDOWLOG_ABSOLUTEMIN */

    while (log < CKPT_ZSTD_MAX_WINDOW_LOG && ((uint64_t)1 << log) < input_limit)
        log++;
    return log;
}

int ckpt_zstd__is_frame(const uint8_t *head, size_t n)
{
    uint32_t magic;

    if (n < 4)
        return 0;
    magic = (uint32_t)head[0] | (uint32_t)head[1] << 8 | (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24;
    return magic == ZSTD_MAGICNUMBER || (magic & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static const char *temp_dir(void)
{
    const char *d = getenv("TMPDIR");
    return d && *d ? d : "/tmp";
}

/* A file with no name in dir: O_TMPFILE, or where the filesystem lacks it a named file
 * removed at once. Either way nothing is left behind, whatever ends the process. */
static int open_temp(const char *dir, const char *path)
{
    char *name;
    int fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);

    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        goto done;
    if (!(name = malloc(strlen(dir) + sizeof "/ckptconv-zstd-XXXXXX"))) {
        errno = ENOMEM;
        goto done;
    }
    sprintf(name, "%s/ckptconv-zstd-XXXXXX", dir);
    fd = mkostemp(name, O_CLOEXEC);
    if (fd >= 0)
        unlink(name);
    free(name);
done:
    if (fd < 0)
        return ckpt_error_set(CKPT_EIO, "%s: cannot create a temporary file in %s to decompress it into: %s "
                              "(set TMPDIR to a writable directory)", path, dir, strerror(errno));
    return fd;
}

static int temp_write_error(const char *path, const char *dir, uint64_t written)
{
    int e = errno;

    if (e == ENOSPC || e == EDQUOT)
        return ckpt_error_set(CKPT_EIO, "%s: no space left in %s after decompressing %llu bytes of it: set TMPDIR "
                              "to a directory with room for the whole decompressed file", path, dir,
                              (unsigned long long)written);
    return ckpt_error_set(CKPT_EIO, "%s: cannot write the decompressed file in %s: %s", path, dir, strerror(e));
}

static int zstd_input_error(const char *path, size_t code, uint64_t at)
{
    if (ZSTD_getErrorCode(code) == ZSTD_error_frameParameter_windowTooLarge)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT,
                               "%s: zstd frame needs a window larger than 2^%d bytes", path, window_log_max());
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: corrupt zstd data near offset %llu: %s", path,
                           (unsigned long long)at, ZSTD_getErrorName(code));
}

int ckpt_zstd__decompress(int in_fd, const char *path, int *out_fd, ckpt_zstd_stats *stats)
{
    const char *dir = temp_dir();
    double start = now();
    ZSTD_DCtx *d = ZSTD_createDCtx();
    uint8_t *ibuf = malloc(IN_CHUNK), *obuf = malloc(OUT_CHUNK);
    uint64_t consumed = 0, written = 0;
    size_t pending = 1; /* zstd's hint: 0 only between frames */
    int fd = -1, rc = 0;

    *out_fd = -1;
    if (!d || !ibuf || !obuf) {
        rc = ckpt_error_oom();
        goto done;
    }
    ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, window_log_max());
    fd = open_temp(dir, path);
    if (fd < 0) {
        rc = fd;
        goto done;
    }
    posix_fadvise(in_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    for (;;) {
        ZSTD_inBuffer in;
        ssize_t n = read(in_fd, ibuf, IN_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = ckpt_error_set(CKPT_EIO, "%s: cannot read at offset %llu: %s", path, (unsigned long long)consumed,
                                strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        in.src = ibuf;
        in.size = (size_t)n;
        in.pos = 0;
        /* Until the input is used up and the last call left room in the output: a full
         * output may mean zstd holds more. */
        for (;;) {
            ZSTD_outBuffer out = { obuf, OUT_CHUNK, 0 };
            size_t before = in.pos, r = ZSTD_decompressStream(d, &out, &in);
            if (ZSTD_isError(r)) {
                rc = zstd_input_error(path, r, consumed + in.pos);
                goto done;
            }
            /* A call that only found nothing more to flush says how much the next frame's
             * header needs, not that this frame is unfinished. */
            if (out.pos > 0 || in.pos > before)
                pending = r;
            if (out.pos > input_limit - written) {
                rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                                     "%s: zstd data decompresses to more than %llu bytes, the limit", path,
                                     (unsigned long long)input_limit);
                goto done;
            }
            if (write_all(fd, obuf, out.pos) != 0) {
                rc = temp_write_error(path, dir, written);
                goto done;
            }
            written += out.pos;
            if (in.pos == in.size && out.pos < out.size)
                break;
        }
        consumed += (uint64_t)n;
    }
    if (pending != 0) {
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                             "%s: truncated zstd data: the file ends inside a frame (%llu bytes, %llu decompressed)",
                             path, (unsigned long long)consumed, (unsigned long long)written);
        goto done;
    }
    stats->raw_bytes = written;
    stats->zst_bytes = consumed;
    stats->seconds = now() - start;
    *out_fd = fd;
    fd = -1;
done:
    if (fd >= 0)
        close(fd);
    ZSTD_freeDCtx(d);
    free(ibuf);
    free(obuf);
    return rc;
}

static int compress_error(const char *name, size_t code)
{
    return ckpt_error_set(CKPT_ERROR, "%s: zstd compression failed: %s", name, ZSTD_getErrorName(code));
}

static int configure(ZSTD_CCtx *c, uint64_t size, int level, int threads, const char *name)
{
    size_t r;

    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)(n < 256 ? n : 256) : 1;
    }
    if (ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level ? level : ZSTD_CLEVEL_DEFAULT)) ||
        ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(r = ZSTD_CCtx_setPledgedSrcSize(c, size)))
        return compress_error(name, r);
    /* A libzstd built without threads refuses workers: it then compresses on this thread. */
    if (threads > 1)
        ZSTD_CCtx_setParameter(c, ZSTD_c_nbWorkers, threads);
    if (size >= LONG_MIN_BYTES &&
        (ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_enableLongDistanceMatching, 1)) ||
         ZSTD_isError(r = ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, LONG_WINDOW_LOG))))
        return compress_error(name, r);
    return 0;
}

int ckpt_zstd__compress(int src_fd, int dst_fd, uint64_t size, int level, int threads, const char *name,
                        ckpt_zstd_stats *stats)
{
    double start = now();
    ZSTD_CCtx *c = ZSTD_createCCtx();
    uint8_t *ibuf = malloc(IN_CHUNK), *obuf = malloc(OUT_CHUNK);
    uint64_t off = 0, written = 0;
    int rc;

    if (!c || !ibuf || !obuf) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = configure(c, size, level, threads, name)) < 0)
        goto done;
    posix_fadvise(src_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    do {
        size_t want = size - off < IN_CHUNK ? (size_t)(size - off) : IN_CHUNK;
        ssize_t n = want ? pread(src_fd, ibuf, want, (off_t)off) : 0;
        ZSTD_EndDirective mode;
        ZSTD_inBuffer in;
        size_t left;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (n == 0 && want > 0)) {
            rc = ckpt_error_set(CKPT_EIO, "%s: cannot read back the written data at offset %llu: %s", name,
                                (unsigned long long)off, n < 0 ? strerror(errno) : "file shorter than written");
            goto done;
        }
        off += (uint64_t)n;
        mode = off == size ? ZSTD_e_end : ZSTD_e_continue;
        in.src = ibuf;
        in.size = (size_t)n;
        in.pos = 0;
        /* e_continue: until zstd took the input; e_end: until the frame is complete. */
        do {
            ZSTD_outBuffer out = { obuf, OUT_CHUNK, 0 };
            left = ZSTD_compressStream2(c, &out, &in, mode);
            if (ZSTD_isError(left)) {
                rc = compress_error(name, left);
                goto done;
            }
            if (write_all(dst_fd, obuf, out.pos) != 0) {
                rc = ckpt_error_set(CKPT_EIO, "%s: cannot write the compressed file: %s", name, strerror(errno));
                goto done;
            }
            written += out.pos;
        } while (mode == ZSTD_e_end ? left != 0 : in.pos < in.size);
    } while (off < size);
    stats->raw_bytes = size;
    stats->zst_bytes = written;
    stats->seconds = now() - start;
done:
    ZSTD_freeCCtx(c);
    free(ibuf);
    free(obuf);
    return rc;
}
