/* Input files, mapped read-only: checkpoints are read in place, never copied into memory,
 * and pages already consumed can be dropped so that a pass over a file larger than RAM
 * keeps a small resident set.
 *
 * A file cut short while it is mapped turns reads past its new end into SIGBUS. Large reads
 * therefore go through pread (a short read is an error), and every read of mapped bytes
 * runs under a guard: the library's SIGBUS handler, installed with the first mapping, jumps
 * back to the innermost guard of the faulting thread, which reports the file and the
 * offset. A fault with no guard active goes to whatever handler was there before. Mapped
 * files are listed, so that a guard over many files (opening a checkpoint directory) can
 * name the one that shrank.
 *
 * A zstd-compressed file is decompressed first, into a temporary file that is mapped in its
 * place (zstd_io.c): from then on it is an input like any other. */
#include "zstd_io.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREAD_MIN ((size_t)64 << 10)
#define PREAD_CHUNK ((size_t)1 << 30)

/* ---- the SIGBUS guard ---- */

static _Thread_local sigjmp_buf *guard_jump;
static _Thread_local const uint8_t *guard_fault;
static struct sigaction previous_sigbus;
static pthread_once_t sigbus_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    if (guard_jump) {
        guard_fault = info->si_addr;
        siglongjmp(*guard_jump, 1);
    }
    /* Not a read the library guards: the fault is someone else's. Restoring their handler and
     * returning runs the faulting instruction again, under it. */
    (void)sig;
    (void)context;
    sigaction(SIGBUS, &previous_sigbus, NULL);
}

/* ---- the mapped files, to tell which one a fault is in ---- */

static pthread_mutex_t mapped_lock = PTHREAD_MUTEX_INITIALIZER;
static const ckpt_file **mapped;
static size_t n_mapped, cap_mapped;

static int list_mapped(const ckpt_file *f)
{
    int rc = 0;

    pthread_mutex_lock(&mapped_lock);
    if (n_mapped == cap_mapped) {
        size_t cap = cap_mapped ? cap_mapped * 2 : 64;
        const ckpt_file **grown = realloc(mapped, cap * sizeof *grown);
        if (grown) {
            mapped = grown;
            cap_mapped = cap;
        } else {
            rc = ckpt_error_oom();
        }
    }
    if (rc == 0)
        mapped[n_mapped++] = f;
    pthread_mutex_unlock(&mapped_lock);
    return rc;
}

static void unlist_mapped(const ckpt_file *f)
{
    size_t i;

    pthread_mutex_lock(&mapped_lock);
    for (i = 0; i < n_mapped; i++)
        if (mapped[i] == f) {
            mapped[i] = mapped[--n_mapped];
            break;
        }
    pthread_mutex_unlock(&mapped_lock);
}

static void install_sigbus(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    /* NODEFER: the jump leaves the handler without restoring the signal mask */
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous_sigbus);
}

/* The error for a fault at `at`, naming the mapped file that holds it (f is one of them). */
static int shrank(const ckpt_file *f, const uint8_t *at)
{
    int rc = 0;
    size_t i;

    pthread_mutex_lock(&mapped_lock);
    for (i = 0; i < n_mapped && rc == 0; i++) {
        const ckpt_file *m = mapped[i];
        if (at >= m->data && at < m->data + m->size)
            rc = ckpt_error_set(CKPT_EIO, "%s: file ends at offset %llu while being read (changed on disk?)", m->path,
                                (unsigned long long)((uint64_t)(at - m->data) & ~(uint64_t)4095));
    }
    pthread_mutex_unlock(&mapped_lock);
    if (rc == 0)
        rc = ckpt_error_set(CKPT_EIO, "%s: a mapped input file ended while being read (changed on disk?)",
                            f ? f->path : "input");
    return rc;
}

int ckpt_file_guard(const ckpt_file *f, int (*fn)(void *arg), void *arg)
{
    sigjmp_buf jump, *outer = guard_jump;
    int rc;

    if (sigsetjmp(jump, 0)) {
        guard_jump = outer;
        return shrank(f, guard_fault);
    }
    guard_jump = &jump;
    rc = fn(arg);
    guard_jump = outer;
    return rc;
}

typedef struct copy_args {
    void *dst;
    const void *src;
    size_t len;
} copy_args;

static int copy(void *arg)
{
    copy_args *c = arg;
    memcpy(c->dst, c->src, c->len);
    return 0;
}

/* A file that starts with a zstd frame: *fd becomes its decompression (see zstd_io.c), and
 * *st describes that. The compressed file is closed. */
static int decompress_if_zstd(int *fd, const char *path, struct stat *st, ckpt_zstd_stats *stats,
                              const ckpt_zstd_check *check)
{
    uint8_t head[4];
    ssize_t n;
    int plain, rc;

    do
        n = pread(*fd, head, sizeof head, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return ckpt_error_set(CKPT_EIO, "%s: cannot read: %s", path, strerror(errno));
    if (!ckpt_zstd__is_frame(head, (size_t)n))
        return 0;
    if ((rc = ckpt_zstd__decompress(*fd, path, &plain, stats, check)) < 0)
        return rc;
    close(*fd);
    *fd = plain;
    if (fstat(plain, st) != 0)
        return ckpt_error_set(CKPT_EIO, "%s: cannot stat its decompressed copy: %s", path, strerror(errno));
    return 0;
}

int ckpt_file_open(ckpt_file **out, const char *path)
{
    return ckpt_file__open_as(out, path, path, 1, NULL);
}

int ckpt_file__open_as(ckpt_file **out, const char *path, const char *name, int decompress,
                       const ckpt_zstd_check *check)
{
    ckpt_file *f = NULL;
    ckpt_zstd_stats zstd = { 0, 0, 0.0 };
    struct stat st;
    size_t path_len = strlen(name);
    int fd, rc = 0;

    *out = NULL;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; no effect on regular files. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return ckpt_error_set(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, "%s: cannot open: %s",
                              path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = ckpt_error_set(CKPT_EINVALID, "%s: is a directory, expected a file", path);
        goto done;
    }
    /* Pipes and devices cannot be mapped or have no meaningful size. */
    if (!S_ISREG(st.st_mode)) {
        rc = ckpt_error_set(CKPT_EINVALID, "%s: not a regular file", path);
        goto done;
    }
    if (decompress && (rc = decompress_if_zstd(&fd, path, &st, &zstd, check)) < 0)
        goto done;
    if ((uint64_t)st.st_size > SIZE_MAX) {
        rc = ckpt_error_set(CKPT_EUNSUPPORTED, "%s: too large to map in this address space", path);
        goto done;
    }
    /* One allocation: the struct, then the copy of the path. */
    f = malloc(sizeof *f + path_len + 1);
    if (!f) {
        rc = ckpt_error_oom();
        goto done;
    }
    memcpy((char *)(f + 1), name, path_len + 1);
    f->path = (const char *)(f + 1);
    f->fd = fd;
    f->fd_offset = 0;
    f->zstd = zstd;
    f->size = (uint64_t)st.st_size;
    f->data = NULL;
    if (f->size > 0) {
        void *p = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            rc = ckpt_error_set(CKPT_EIO, "%s: cannot map: %s", path, strerror(errno));
            goto done;
        }
        f->data = p;
        if ((rc = list_mapped(f)) < 0) {
            munmap(p, (size_t)f->size);
            goto done;
        }
        pthread_once(&sigbus_once, install_sigbus);
    }
    *out = f;
    f = NULL;
    fd = -1;
done:
    free(f);
    if (fd >= 0)
        close(fd);
    return rc;
}

void ckpt_file_close(ckpt_file *f)
{
    if (!f)
        return;
    if (f->data) {
        unlist_mapped(f);
        munmap((void *)f->data, (size_t)f->size);
    }
    close(f->fd);
    free(f);
}

int ckpt_file_read(const ckpt_file *f, uint64_t off, void *dst, size_t len)
{
    uint64_t end;

    if (CKPT_ADD_OVERFLOWS(off, (uint64_t)len, &end) || end > f->size)
        return ckpt_error_set(CKPT_EFORMAT,
                              "%s: %zu bytes at offset %llu lie past the end of the file (%llu bytes)",
                              f->path, len, (unsigned long long)off, (unsigned long long)f->size);
    /* Large reads go through the page cache with pread rather than through the mapping: no
     * page faults, and the kernel's readahead. Small ones are a guarded memcpy. */
    if (len == 0)
        return 0; /* an empty file has no mapping to point into */
    if (len < PREAD_MIN) {
        copy_args c = { dst, f->data + off, len };
        return ckpt_file_guard(f, copy, &c);
    }
    while (len > 0) {
        ssize_t n = pread(f->fd, dst, len < PREAD_CHUNK ? len : PREAD_CHUNK, (off_t)(f->fd_offset + off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return ckpt_error_set(CKPT_EIO, "%s: cannot read at offset %llu: %s", f->path, (unsigned long long)off,
                                  strerror(errno));
        if (n == 0)
            return ckpt_error_set(CKPT_EIO, "%s: file ends at offset %llu while being read (changed on disk?)",
                                  f->path, (unsigned long long)off);
        dst = (uint8_t *)dst + n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

void ckpt_file_release(const ckpt_file *f, uint64_t off, uint64_t len)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = ps > 0 ? (uint64_t)ps : 4096;
    uint64_t end;
    uintptr_t base, first, last;

    /* fd -1: bytes in memory that some caller dressed as a file, not a mapping to drop */
    if (!f || !f->data || f->fd < 0 || off >= f->size)
        return;
    if (CKPT_ADD_OVERFLOWS(off, len, &end) || end > f->size)
        end = f->size;
    /* Only whole pages inside the range: a page shared with bytes outside it may still be
     * wanted by another reader. The file's last page holds nothing past the end, unless f
     * is a window on a larger mapping (ckpt_reader_window), which starts inside a page. */
    base = (uintptr_t)f->data;
    first = (base + off + page - 1) / page * page;
    last = end == f->size && base % page == 0 ? (base + end + page - 1) / page * page : (base + end) / page * page;
    if (first < last)
        madvise((void *)first, (size_t)(last - first), MADV_DONTNEED);
}
