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
#include <sys/mman.h>
#include <sys/stat.h>
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

/* The most one compressed byte can decompress to: a block takes at least 4 bytes (an RLE
 * block: its 3-byte header and the byte repeated) and yields at most 128 KiB. */
#define MAX_RATIO ((uint64_t)1 << 15)
/* The largest window libzstd (and `zstd -d`) accepts without being asked for more. */
#define DEFAULT_WINDOW ((uint64_t)1 << 27)

/* No window larger than the output can fill: the limit, and beyond zstd's default window,
 * what the input's compressed bytes can decompress to. A frame that asks for more is
 * refused before its window is allocated: six bytes could otherwise ask for 2^31. */
static int window_log_max(uint64_t compressed)
{
    uint64_t fill = compressed > UINT64_MAX / MAX_RATIO ? UINT64_MAX : compressed * MAX_RATIO;
    uint64_t most = fill > DEFAULT_WINDOW ? fill : DEFAULT_WINDOW;
    int log = 10; /* ZSTD_WINDOWLOG_ABSOLUTEMIN */

    if (most > input_limit)
        most = input_limit;
    while (log < CKPT_ZSTD_MAX_WINDOW_LOG && ((uint64_t)1 << log) < most)
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

static int zstd_input_error(const char *path, size_t code, uint64_t at, uint64_t compressed)
{
    if (ZSTD_getErrorCode(code) == ZSTD_error_frameParameter_windowTooLarge && window_log_max(compressed) <
        window_log_max(UINT64_MAX))
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: zstd frame asks for a window over 2^%d bytes, more than its %llu bytes can "
                               "decompress to", path, window_log_max(compressed), (unsigned long long)compressed);
    if (ZSTD_getErrorCode(code) == ZSTD_error_frameParameter_windowTooLarge)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT,
                               "%s: zstd frame needs a window larger than 2^%d bytes", path,
                               window_log_max(compressed));
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: corrupt zstd data near offset %llu: %s", path,
                           (unsigned long long)at, ZSTD_getErrorName(code));
}

/* One decompression in progress. */
typedef struct inflate {
    const char *path, *dir;
    int fd;               /* the temporary */
    uint64_t written;
    uint64_t limit;       /* the most bytes allowed: the input limit or the header's bound */
    uint64_t header_max;  /* what the check allowed; UINT64_MAX when it set no bound */
    uint64_t need;        /* the check runs once this much is written; UINT64_MAX: no check due */
    uint64_t declared;    /* the first frame's size, 0 when it does not say */
    uint64_t compressed;  /* the input's size */
    const ckpt_zstd_check *check;
} inflate;

static int too_long(const inflate *z, uint64_t declared)
{
    int by_header = z->header_max != UINT64_MAX && z->header_max == z->limit;

    if (by_header && declared)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: zstd frame declares %llu decompressed bytes, more than its header or index "
                               "allows (%llu)",
                               z->path, (unsigned long long)declared, (unsigned long long)z->header_max);
    if (by_header)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: zstd data decompresses to more than its header or index allows (%llu bytes)",
                               z->path, (unsigned long long)z->header_max);
    if (declared)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                               "%s: zstd frame declares %llu decompressed bytes, more than the limit of %llu", z->path,
                               (unsigned long long)declared, (unsigned long long)z->limit);
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                           "%s: zstd data decompresses to more than %llu bytes, the limit", z->path,
                           (unsigned long long)z->limit);
}

/* Show the check what is written so far (all of it when whole); it sets the bound, asks for
 * more, or refuses. */
static int run_check(inflate *z, int whole)
{
    uint64_t need = 0, max_size = UINT64_MAX;
    void *head = NULL;
    int rc;

    if (z->written > SIZE_MAX)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: too large to map in this address space", z->path);
    if (z->written && (head = mmap(NULL, (size_t)z->written, PROT_READ, MAP_SHARED, z->fd, 0)) == MAP_FAILED)
        return ckpt_error_set(CKPT_EIO, "%s: cannot map its decompressed start: %s", z->path, strerror(errno));
    rc = z->check->fn(z->check->arg, z->path, head, (size_t)z->written, whole, &need, &max_size);
    if (head)
        munmap(head, (size_t)z->written);
    if (rc < 0)
        return rc;
    /* A check that wants what it already has would never be asked again: it said no bound. */
    if (!whole && need > z->written) {
        z->need = need;
        return 0;
    }
    z->need = UINT64_MAX;
    z->header_max = max_size;
    if (max_size < z->limit)
        z->limit = max_size;
    if (z->declared > z->limit)
        return too_long(z, z->declared);
    return z->written > z->limit ? too_long(z, 0) : 0;
}

/* The size the first frame declares, refused before anything is written when it is over
 * the limit. Frames without a size, and bytes that are not yet a whole frame header, pass:
 * the stream itself is held to the limit as it is decompressed. */
static int check_declared(inflate *z, const uint8_t *first, size_t n)
{
    unsigned long long declared = ZSTD_getFrameContentSize(first, n);

    if (declared == ZSTD_CONTENTSIZE_UNKNOWN || declared == ZSTD_CONTENTSIZE_ERROR)
        return 0;
    z->declared = declared;
    return declared > z->limit ? too_long(z, declared) : 0;
}

/* Decompress one chunk of input into the temporary. *pending gets zstd's hint (0 only
 * between frames). */
static int inflate_chunk(inflate *z, ZSTD_DCtx *d, ZSTD_inBuffer *in, uint8_t *obuf, uint64_t consumed,
                         size_t *pending)
{
    int rc;

    /* Until the input is used up and the last call left room in the output: a full output
     * may mean zstd holds more. */
    for (;;) {
        ZSTD_outBuffer out = { obuf, OUT_CHUNK, 0 };
        size_t before = in->pos, r = ZSTD_decompressStream(d, &out, in);
        if (ZSTD_isError(r))
            return zstd_input_error(z->path, r, consumed + in->pos, z->compressed);
        /* A call that only found nothing more to flush says how much the next frame's
         * header needs, not that this frame is unfinished. */
        if (out.pos > 0 || in->pos > before)
            *pending = r;
        if (out.pos > z->limit - z->written)
            return too_long(z, 0);
        if (write_all(z->fd, obuf, out.pos) != 0)
            return temp_write_error(z->path, z->dir, z->written);
        z->written += out.pos;
        if (z->written >= z->need && (rc = run_check(z, 0)) < 0)
            return rc;
        if (in->pos == in->size && out.pos < out.size)
            return 0;
    }
}

int ckpt_zstd__decompress(int in_fd, const char *path, int *out_fd, ckpt_zstd_stats *stats,
                          const ckpt_zstd_check *check)
{
    double start = now();
    ZSTD_DCtx *d = ZSTD_createDCtx();
    uint8_t *ibuf = malloc(IN_CHUNK), *obuf = malloc(OUT_CHUNK);
    inflate z = { path, temp_dir(), -1, 0, input_limit, UINT64_MAX, UINT64_MAX, 0, UINT64_MAX, check };
    struct stat st;
    uint64_t consumed = 0;
    size_t pending = 1; /* zstd's hint: 0 only between frames */
    int rc = 0;

    *out_fd = -1;
    if (check)
        z.need = CKPT_ZSTD_CHECK_BYTES;
    if (!d || !ibuf || !obuf) {
        rc = ckpt_error_oom();
        goto done;
    }
    if (fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode))
        z.compressed = (uint64_t)st.st_size;
    ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, window_log_max(z.compressed));
    if ((z.fd = open_temp(z.dir, path)) < 0) {
        rc = z.fd;
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
        if (consumed == 0 && (rc = check_declared(&z, ibuf, (size_t)n)) < 0)
            goto done;
        in.src = ibuf;
        in.size = (size_t)n;
        in.pos = 0;
        if ((rc = inflate_chunk(&z, d, &in, obuf, consumed, &pending)) < 0)
            goto done;
        consumed += (uint64_t)n;
    }
    if (pending != 0) {
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                             "%s: truncated zstd data: the file ends inside a frame (%llu bytes, %llu decompressed)",
                             path, (unsigned long long)consumed, (unsigned long long)z.written);
        goto done;
    }
    /* A stream shorter than what the check asks for: it judges all there is. */
    if (z.need != UINT64_MAX && (rc = run_check(&z, 1)) < 0)
        goto done;
    stats->raw_bytes = z.written;
    stats->zst_bytes = consumed;
    stats->seconds = now() - start;
    *out_fd = z.fd;
    z.fd = -1;
done:
    if (z.fd >= 0)
        close(z.fd);
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
