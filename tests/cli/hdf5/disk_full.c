/* Preloaded into ckptconv by the full-disk tests (LD_PRELOAD): the disk holding the output
 * fills up. Writes and space reservations that reach past CKPT_DISK_FULL_AT bytes of a file
 * whose name holds ".ckptconv-" (the output's temporary) fail with ENOSPC, as a full disk's
 * do; other files are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether [off, off + len) of fd lies past the space left. */
static int full(int fd, off_t off, size_t len)
{
    const char *at = getenv("CKPT_DISK_FULL_AT");
    char link[64], path[4096];
    ssize_t n;

    if (!at || fd < 0)
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    if ((n = readlink(link, path, sizeof path - 1)) <= 0)
        return 0;
    path[n] = '\0';
    return strstr(path, ".ckptconv-") && off + (off_t)len > (off_t)strtoll(at, NULL, 10);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);

    if (!real)
        real = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    if (full(fd, off, len)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
    return pwrite(fd, buf, len, off);
}

ssize_t write(int fd, const void *buf, size_t len)
{
    static ssize_t (*real)(int, const void *, size_t);

    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (full(fd, lseek(fd, 0, SEEK_CUR), len)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, buf, len);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    static int (*real)(int, int, off_t, off_t);

    if (!real)
        real = (int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, "fallocate");
    if (full(fd, off, (size_t)len)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, mode, off, len);
}

int fallocate64(int fd, int mode, off_t off, off_t len)
{
    return fallocate(fd, mode, off, len);
}
