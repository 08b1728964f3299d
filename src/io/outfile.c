/* Atomic output files: everything is written to a temporary file next to the final name
 * (same directory, hence same filesystem, so rename is atomic), which is renamed into place
 * only after fsync. A failed or interrupted run leaves nothing under the final name.
 *
 * Every live temporary is also listed in a fixed, lock-free table so that a signal handler
 * can remove them all (ckpt_outfile_cleanup_all) without taking locks or allocating. */
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
#define TEMP_SUFFIX_LEN 6
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
    char temp_name[NAME_MAX + 1]; /* empty once there is nothing to remove */
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
    if (temp_unregister(f->slot) && f->dirfd >= 0)
        close(f->dirfd);
    free(f->final_path);
    free(f);
}

static void random_suffix(char *dst)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static atomic_uint counter;
    uint8_t bytes[TEMP_SUFFIX_LEN];
    int i;

    if (getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != (ssize_t)sizeof bytes) {
        /* Uniqueness comes from O_EXCL; this only has to make collisions rare. */
        uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15u ^ (uint64_t)time(NULL) ^
                     ((uint64_t)atomic_fetch_add(&counter, 1) << 32);
        for (i = 0; i < TEMP_SUFFIX_LEN; i++, x >>= 8)
            bytes[i] = (uint8_t)x;
    }
    for (i = 0; i < TEMP_SUFFIX_LEN; i++)
        dst[i] = alphabet[bytes[i] % (sizeof alphabet - 1)];
    dst[TEMP_SUFFIX_LEN] = '\0';
}

static int create_temp(ckpt_outfile *f)
{
    /* ".<name>.tmp.XXXXXX", with the name shortened to keep within NAME_MAX. */
    int keep = (int)strlen(f->final_name);
    int attempt;

    if (keep > NAME_MAX - 6 - TEMP_SUFFIX_LEN)
        keep = NAME_MAX - 6 - TEMP_SUFFIX_LEN;
    for (attempt = 0; attempt < TEMP_ATTEMPTS; attempt++) {
        char suffix[TEMP_SUFFIX_LEN + 1];
        random_suffix(suffix);
        snprintf(f->temp_name, sizeof f->temp_name, ".%.*s.tmp.%s", keep, f->final_name, suffix);
        /* 0666 lets the umask decide, as for any file the user creates. */
        f->fd = openat(f->dirfd, f->temp_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    f->temp_name[0] = '\0';
    return ckpt_error_set(CKPT_EIO, "%s: cannot create a temporary file in its directory: %s",
                          f->final_path, strerror(errno));
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
    f->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->dirfd < 0) {
        int code = errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO;
        int rc = ckpt_error_set(code, "%s: cannot open directory %s: %s", f->final_path, dir,
                                strerror(errno));
        free(dir);
        return rc;
    }
    free(dir);
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
        return ckpt_error_set(CKPT_EINVALID, "%s: not a file name", final_path);
    if (strlen(name) > NAME_MAX)
        return ckpt_error_set(CKPT_EINVALID, "%s: file name longer than %d bytes", final_path, NAME_MAX);
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
    rc = open_directory(f);
    if (rc)
        goto done;
    if (fstatat(f->dirfd, f->final_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(st.st_mode)) {
            rc = ckpt_error_set(CKPT_EINVALID, "%s: is a directory", final_path);
            goto done;
        }
        if (!(flags & CKPT_OUTFILE_OVERWRITE)) {
            rc = ckpt_error_set(CKPT_EEXISTS,
                                "%s: output already exists (pass --force/--overwrite to replace it)",
                                final_path);
            goto done;
        }
    } else if (errno != ENOENT) {
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot stat: %s", final_path, strerror(errno));
        goto done;
    }
    rc = create_temp(f);
    if (rc)
        goto done;
    f->slot = temp_register(f->dirfd, f->temp_name);
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
        ssize_t n = pread(src->fd, buf, len < cap ? (size_t)len : cap, (off_t)src_off);
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
        loff_t in = (loff_t)src_off, o = (loff_t)off;
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
    if (r == 0)
        return 0;
    if (errno == EEXIST)
        return ckpt_error_set(CKPT_EEXISTS,
                              "%s: output appeared while it was being written (pass --force/--overwrite to replace it)",
                              f->final_path);
    return ckpt_error_set(CKPT_EIO, "%s: cannot rename the temporary file into place: %s", f->final_path,
                          strerror(errno));
}

int ckpt_outfile_commit(ckpt_outfile *f)
{
    int rc, fd = f->fd;

    f->fd = -1;
    if (fsync(fd) != 0) {
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot flush to disk: %s", f->final_path, strerror(errno));
        close(fd);
        goto done;
    }
    /* Some filesystems (NFS) report write errors only at close. */
    if (close(fd) != 0) {
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot close: %s", f->final_path, strerror(errno));
        goto done;
    }
    rc = rename_into_place(f);
    if (rc)
        goto done;
    f->temp_name[0] = '\0';
    /* The rename is durable only once the directory is; EINVAL: not supported there. */
    if (fsync(f->dirfd) != 0 && errno != EINVAL)
        rc = ckpt_error_set(CKPT_EIO, "%s: cannot flush the directory to disk: %s", f->final_path,
                            strerror(errno));
done:
    discard(f);
    return rc;
}

void ckpt_outfile_abort(ckpt_outfile *f)
{
    if (f)
        discard(f);
}
