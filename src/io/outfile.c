/* Atomic output files: everything is written to a temporary file in the final name's
 * directory (same filesystem, so publishing it is atomic), which is linked or renamed into
 * place only after fsync. A failed, interrupted or killed run leaves nothing under the final
 * name.
 *
 * Where the filesystem allows (Linux O_TMPFILE: ext4, xfs, btrfs, tmpfs) the temporary has no
 * name until it is linked into place, so even SIGKILL or a power loss leaves nothing behind.
 * Elsewhere (NFS, Lustre, ...) it is named after its owner (wip.h), and a later run writing
 * into the same directory removes it once its process is gone; while the run is alive, named
 * temporaries are listed in a fixed, lock-free table so that a signal handler can remove them
 * all (ckpt_outfile_cleanup_all) without taking locks or allocating.
 *
 * A ".zst" output is written plain like any other, then compressed at commit into a second
 * temporary beside the first, which is the one put in place (zstd_io.c says why). Both are
 * temporaries of the same kind, so an abort or a signal removes both. */
#include "inputs.h"
#include "wip.h"
#include "zstd_io.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IO_CHUNK ((size_t)1 << 30)    /* most bytes handed to one system call */
#define BOUNCE_SIZE ((size_t)1 << 20) /* buffer of the read/write fallback copy */
#define MAX_LIVE_TEMPS 256
#define TEMP_ATTEMPTS 100

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "signal-safe cleanup needs lock-free atomic int");

/* Slot states. Only the owner frees a slot (LIVE or CLEANED -> FREE); the signal handler
 * only moves LIVE -> CLEANING -> CLEANED, so a slot is never reused under its feet. */
enum { SLOT_FREE, SLOT_CLAIMED, SLOT_LIVE, SLOT_CLEANING, SLOT_CLEANED };

static struct live_temp {
    atomic_int state;
    int dirfd;
    char name[NAME_MAX + 1];
} live_temps[MAX_LIVE_TEMPS];

struct ckpt_outfile {
    char *final_path;
    const char *final_name; /* last component of final_path */
    int dirfd;
    int fd;
    int slot;               /* in live_temps, or -1 when the table was full */
    unsigned flags;
    int unnamed;            /* an O_TMPFILE: nothing to remove, linked into place at commit */
    char temp_name[NAME_MAX + 1]; /* empty once there is nothing to remove */
    char *temp_path;        /* named temporaries: dir/temp_name */
    char *dir_path;         /* the final name's directory, "." for a bare name */
    int dirfd_busy;         /* a signal handler may still use dirfd: leave it open */
    int zstd_level, zstd_threads;
    ckpt_zstd_stats *zstd_stats;
    ckpt_buf notes;
};

static int temp_register(int dirfd, const char *name)
{
    int i;

    for (i = 0; i < MAX_LIVE_TEMPS; i++) {
        int expected = SLOT_FREE;
        if (atomic_compare_exchange_strong(&live_temps[i].state, &expected, SLOT_CLAIMED)) {
            live_temps[i].dirfd = dirfd;
            memcpy(live_temps[i].name, name, strlen(name) + 1);
            atomic_store(&live_temps[i].state, SLOT_LIVE);
            return i;
        }
    }
    /* Still a working output; only the signal-time cleanup misses it. */
    return -1;
}

/* Zero while a signal handler on another thread may still use the slot's directory
 * descriptor, which must then stay open. */
static int temp_unregister(int slot)
{
    int expected = SLOT_LIVE;

    if (slot < 0 || atomic_compare_exchange_strong(&live_temps[slot].state, &expected, SLOT_FREE))
        return 1;
    expected = SLOT_CLEANED;
    return atomic_compare_exchange_strong(&live_temps[slot].state, &expected, SLOT_FREE);
}

void ckpt_outfile_cleanup_all(void)
{
    int saved_errno = errno;
    int i;

    for (i = 0; i < MAX_LIVE_TEMPS; i++) {
        int expected = SLOT_LIVE;
        if (atomic_compare_exchange_strong(&live_temps[i].state, &expected, SLOT_CLEANING)) {
            unlinkat(live_temps[i].dirfd, live_temps[i].name, 0);
            atomic_store(&live_temps[i].state, SLOT_CLEANED);
        }
    }
    errno = saved_errno;
}

static void discard(ckpt_outfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    if (f->temp_name[0])
        unlinkat(f->dirfd, f->temp_name, 0);
    if (temp_unregister(f->slot) && !f->dirfd_busy && f->dirfd >= 0)
        close(f->dirfd);
    ckpt_buf_dispose(&f->notes);
    free(f->temp_path);
    free(f->dir_path);
    free(f->final_path);
    free(f);
}

static int create_named_temp(ckpt_outfile *f)
{
    size_t dir_len = (size_t)(f->final_name - f->final_path);
    int attempt, rc;

    for (attempt = 0; attempt < TEMP_ATTEMPTS; attempt++) {
        if ((rc = ckpt_wip__name(f->temp_name, sizeof f->temp_name, f->final_name)) < 0)
            return rc;
        /* 0666 lets the umask decide, as for any file the user creates. */
        f->fd = openat(f->dirfd, f->temp_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0)
            break;
        if (errno != EEXIST)
            break;
    }
    if (f->fd < 0) {
        f->temp_name[0] = '\0';
        return ckpt_error_set(CKPT_EIO, "%s: cannot create a temporary file in its directory: %s",
                              f->final_path, strerror(errno));
    }
    if (!(f->temp_path = malloc(dir_len + strlen(f->temp_name) + 1)))
        return ckpt_error_oom();
    memcpy(f->temp_path, f->final_path, dir_len);
    strcpy(f->temp_path + dir_len, f->temp_name);
    f->slot = temp_register(f->dirfd, f->temp_name);
    return 0;
}

/* A file with no name in the final directory, where the filesystem has them. */
static int create_unnamed_temp(ckpt_outfile *f)
{
    f->fd = openat(f->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
    f->unnamed = f->fd >= 0;
    return f->unnamed;
}

static int open_directory(ckpt_outfile *f)
{
    size_t dir_len = (size_t)(f->final_name - f->final_path);
    char *dir;

    if (dir_len == 0) {
        dir = strdup(".");
    } else {
        /* Keep the slash of "/name"; drop the one of "dir/name". */
        dir = strndup(f->final_path, dir_len > 1 ? dir_len - 1 : dir_len);
    }
    if (!dir)
        return ckpt_error_oom();
    f->dir_path = dir;
    f->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->dirfd < 0)
        return ckpt_error_set(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, "%s: cannot open directory %s: %s",
                              f->final_path, dir, strerror(errno));
    return 0;
}

int ckpt_outfile_open(ckpt_outfile **out, const char *final_path, unsigned flags)
{
    const char *slash = strrchr(final_path, '/');
    const char *name = slash ? slash + 1 : final_path;
    ckpt_outfile *f;
    struct stat st;
    int rc;

    *out = NULL;
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s: not a file name", final_path);
    if (strlen(name) > NAME_MAX)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s: file name longer than %d bytes", final_path,
                               NAME_MAX);
    f = calloc(1, sizeof *f);
    if (!f)
        return ckpt_error_oom();
    f->fd = f->dirfd = f->slot = -1;
    f->flags = flags;
    f->final_path = strdup(final_path);
    if (!f->final_path) {
        rc = ckpt_error_oom();
        goto done;
    }
    f->final_name = f->final_path + (name - final_path);
    if ((rc = ckpt_inputs__check_output(final_path)) < 0)
        goto done;
    rc = open_directory(f);
    if (rc)
        goto done;
    if (fstatat(f->dirfd, f->final_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(st.st_mode)) {
            rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s: is a directory", final_path);
            goto done;
        }
        if (!(flags & CKPT_OUTFILE_OVERWRITE)) {
            rc = ckpt_error_setc(CKPT_EEXISTS, CKPT_ERRCLASS_ARGUMENT,
                                 "%s: output already exists (pass --force/--overwrite to replace it)", final_path);
            goto done;
        }
    } else if (errno != ENOENT) {
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot stat: %s", final_path, strerror(errno));
        goto done;
    }
    ckpt_wip__sweep(f->dirfd, f->dir_path, &f->notes);
    if ((flags & CKPT_OUTFILE_NAMED) || !create_unnamed_temp(f))
        rc = create_named_temp(f);
    if (rc)
        goto done;
    *out = f;
done:
    if (rc)
        discard(f);
    return rc;
}

const char *ckpt_outfile_path(const ckpt_outfile *f)
{
    return f->final_path;
}

static int check_range(const ckpt_outfile *f, uint64_t off, uint64_t len)
{
    uint64_t end;

    if (CKPT_ADD_OVERFLOWS(off, len, &end) || end > (uint64_t)INT64_MAX)
        return ckpt_error_set(CKPT_EINVALID, "%s: %llu bytes at offset %llu exceed the largest file size",
                              f->final_path, (unsigned long long)len, (unsigned long long)off);
    return 0;
}

int ckpt_outfile_pwrite(ckpt_outfile *f, uint64_t off, const void *data, size_t len)
{
    const uint8_t *p = data;
    int rc = check_range(f, off, len);

    while (rc == 0 && len > 0) {
        ssize_t n = pwrite(f->fd, p, len < IO_CHUNK ? len : IO_CHUNK, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return ckpt_error_set(CKPT_EIO, "%s: cannot write at offset %llu: %s", f->final_path,
                                  (unsigned long long)off, n < 0 ? strerror(errno) : "no progress");
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return rc;
}

static int source_shrank(const ckpt_file *src, uint64_t off)
{
    return ckpt_error_set(CKPT_EIO, "%s: file ends at offset %llu while being read (changed on disk?)",
                          src->path, (unsigned long long)off);
}

static int copy_buffered(ckpt_outfile *f, uint64_t off, const ckpt_file *src, uint64_t src_off,
                         uint64_t len)
{
    size_t cap = len < BOUNCE_SIZE ? (size_t)len : BOUNCE_SIZE;
    uint8_t *buf = malloc(cap);
    int rc = 0;

    if (!buf)
        return ckpt_error_oom();
    while (len > 0) {
        ssize_t n = pread(src->fd, buf, len < cap ? (size_t)len : cap, (off_t)(src->fd_offset + src_off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = ckpt_error_set(CKPT_EIO, "%s: cannot read at offset %llu: %s", src->path,
                                (unsigned long long)src_off, strerror(errno));
            break;
        }
        if (n == 0) {
            rc = source_shrank(src, src_off);
            break;
        }
        rc = ckpt_outfile_pwrite(f, off, buf, (size_t)n);
        if (rc)
            break;
        off += (uint64_t)n;
        src_off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    free(buf);
    return rc;
}

int ckpt_outfile_copy(ckpt_outfile *f, uint64_t off, const ckpt_file *src, uint64_t src_off,
                      uint64_t len)
{
    uint64_t end;
    int rc = check_range(f, off, len);

    if (rc)
        return rc;
    if (CKPT_ADD_OVERFLOWS(src_off, len, &end) || end > src->size)
        return ckpt_error_set(CKPT_EFORMAT,
                              "%s: %llu bytes at offset %llu lie past the end of the file (%llu bytes)",
                              src->path, (unsigned long long)len, (unsigned long long)src_off,
                              (unsigned long long)src->size);
    while (len > 0) {
        loff_t in = (loff_t)(src->fd_offset + src_off), o = (loff_t)off;
        ssize_t n = copy_file_range(src->fd, &in, f->fd, &o, len < IO_CHUNK ? (size_t)len : IO_CHUNK, 0);
        if (n < 0 && errno == EINTR)
            continue;
        /* The kernel copy is an optimisation that many setups refuse (across filesystems,
         * old kernels, some filesystems): the portable path reports any real error. */
        if (n < 0)
            return copy_buffered(f, off, src, src_off, len);
        if (n == 0)
            return source_shrank(src, src_off);
        off += (uint64_t)n;
        src_off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

int ckpt_outfile_truncate(ckpt_outfile *f, uint64_t size)
{
    int rc = check_range(f, 0, size);

    while (rc == 0 && ftruncate(f->fd, (off_t)size) != 0) {
        if (errno != EINTR)
            return ckpt_error_set(CKPT_EIO, "%s: cannot set the size to %llu bytes: %s", f->final_path,
                                  (unsigned long long)size, strerror(errno));
    }
    return rc;
}

static int exists_error(const ckpt_outfile *f)
{
    return ckpt_error_set(CKPT_EEXISTS,
                          "%s: output appeared while it was being written (pass --force/--overwrite to replace it)",
                          f->final_path);
}

static int rename_into_place(ckpt_outfile *f)
{
    struct stat st;
    int r;

    if (f->flags & CKPT_OUTFILE_OVERWRITE) {
        r = renameat(f->dirfd, f->temp_name, f->dirfd, f->final_name);
    } else {
        r = renameat2(f->dirfd, f->temp_name, f->dirfd, f->final_name, RENAME_NOREPLACE);
        /* A filesystem without RENAME_NOREPLACE: check, then rename (a small race). */
        if (r != 0 && (errno == EINVAL || errno == ENOSYS)) {
            if (fstatat(f->dirfd, f->final_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                errno = EEXIST;
            else
                r = renameat(f->dirfd, f->temp_name, f->dirfd, f->final_name);
        }
    }
    if (r == 0) {
        f->temp_name[0] = '\0';
        return 0;
    }
    if (errno == EEXIST)
        return exists_error(f);
    return ckpt_error_set(CKPT_EIO, "%s: cannot rename the temporary file into place: %s", f->final_path,
                          strerror(errno));
}

/* Give the unnamed file `name` under the final directory: through /proc/self/fd, or by its
 * descriptor where /proc is missing (which needs CAP_DAC_READ_SEARCH). */
static int link_unnamed(const ckpt_outfile *f, const char *name)
{
    char proc[64];

    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    if (linkat(AT_FDCWD, proc, f->dirfd, name, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    if (errno != ENOENT)
        return -1;
    return linkat(f->fd, "", f->dirfd, name, AT_EMPTY_PATH);
}

/* The unnamed file linked into place: straight to the final name when nothing may be
 * replaced (an existing one makes the link fail), else under a work-in-progress name renamed
 * over the final one (a rename replaces; a link cannot). */
static int link_into_place(ckpt_outfile *f)
{
    int rc, attempt;

    if (!(f->flags & CKPT_OUTFILE_OVERWRITE)) {
        if (link_unnamed(f, f->final_name) == 0)
            return 0;
        if (errno == EEXIST)
            return exists_error(f);
        return ckpt_error_set(CKPT_EIO, "%s: cannot link the written file into place: %s", f->final_path,
                              strerror(errno));
    }
    for (attempt = 0; attempt < TEMP_ATTEMPTS; attempt++) {
        if ((rc = ckpt_wip__name(f->temp_name, sizeof f->temp_name, f->final_name)) < 0)
            return rc;
        if (link_unnamed(f, f->temp_name) == 0)
            break;
        if (errno != EEXIST) {
            f->temp_name[0] = '\0';
            return ckpt_error_set(CKPT_EIO, "%s: cannot link the written file beside its final name: %s",
                                  f->final_path, strerror(errno));
        }
    }
    f->slot = temp_register(f->dirfd, f->temp_name);
    return rename_into_place(f);
}

void ckpt_outfile_set_zstd(ckpt_outfile *f, int level, int threads, ckpt_zstd_stats *stats)
{
    f->zstd_level = level;
    f->zstd_threads = threads;
    f->zstd_stats = stats;
}

int ckpt_outfile_is_zstd(const ckpt_outfile *f)
{
    size_t n = strlen(f->final_name);
    return n > 4 && strcmp(f->final_name + n - 4, ".zst") == 0;
}

/* Replace the plain temporary by its compression, a new temporary made the same way. Until
 * the plain one is removed both are listed for the signal handler. */
static int compress_temp(ckpt_outfile *f, ckpt_zstd_stats *stats)
{
    int plain_fd = f->fd, plain_slot = f->slot, src = f->fd, rc = 0;
    char plain_name[sizeof f->temp_name];
    char *plain_path = f->temp_path;
    struct stat st;

    memcpy(plain_name, f->temp_name, sizeof plain_name);
    f->fd = f->slot = -1;
    f->temp_name[0] = '\0';
    f->temp_path = NULL;
    f->unnamed = 0;
    /* A named temporary may have been replaced by the format library that wrote it by path
     * (HDF5): what counts is what the name holds now. */
    if (plain_name[0] && (src = openat(f->dirfd, plain_name, O_RDONLY | O_CLOEXEC)) < 0)
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot reopen the written temporary file: %s", f->final_path,
                            strerror(errno));
    else if (fstat(src, &st) != 0)
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot stat the written temporary file: %s", f->final_path,
                            strerror(errno));
    if (rc == 0 && !create_unnamed_temp(f))
        rc = create_named_temp(f);
    if (rc == 0)
        rc = ckpt_zstd__compress(src, f->fd, (uint64_t)st.st_size, f->zstd_level, f->zstd_threads, f->final_path,
                                 stats);
    if (src >= 0 && src != plain_fd)
        close(src);
    close(plain_fd);
    if (plain_name[0])
        unlinkat(f->dirfd, plain_name, 0);
    if (!temp_unregister(plain_slot))
        f->dirfd_busy = 1;
    free(plain_path);
    return rc;
}

int ckpt_outfile_commit(ckpt_outfile *f)
{
    ckpt_zstd_stats stats;
    int rc = 0;

    if (ckpt_outfile_is_zstd(f) && (rc = compress_temp(f, &stats)) < 0)
        goto done;
    if (fsync(f->fd) != 0) {
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot flush to disk: %s", f->final_path, strerror(errno));
        goto done;
    }
    if (f->unnamed && (rc = link_into_place(f)) < 0)
        goto done;
    /* Some filesystems (NFS) report write errors only at close. */
    rc = close(f->fd);
    f->fd = -1;
    if (rc != 0) {
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot close: %s", f->final_path, strerror(errno));
        goto done;
    }
    if (!f->unnamed && (rc = rename_into_place(f)) < 0)
        goto done;
    /* The new name is durable only once the directory is; EINVAL: not supported there. */
    if (fsync(f->dirfd) != 0 && errno != EINVAL)
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot flush the directory to disk: %s", f->final_path,
                            strerror(errno));
    if (rc == 0 && f->zstd_stats && ckpt_outfile_is_zstd(f))
        *f->zstd_stats = stats;
done:
    discard(f);
    return rc;
}

const char *ckpt_outfile_temp_path(const ckpt_outfile *f)
{
    return f->temp_path;
}

const char *ckpt_outfile_notes(const ckpt_outfile *f)
{
    return f->notes.len ? (const char *)f->notes.data : "";
}

void ckpt_outfile_abort(ckpt_outfile *f)
{
    if (f)
        discard(f);
}
