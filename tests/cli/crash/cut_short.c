/* Preloaded into ckptconv by the crash tests (LD_PRELOAD): cuts one input file short while
 * ckptconv has it open, as another process truncating or rewriting it would. Reads past the
 * new end then fail (pread) or fault (SIGBUS through the mapping); ckptconv must report
 * either as an error naming the file.
 *
 *   CKPT_CUT_FILE=NAME   the file: the first one opened whose path ends in /NAME (NAME may
 *                        hold directories) is cut, once
 *   CKPT_CUT_AT=map      right after it is mapped, to half its size (headers and data are
 *                        read after that)
 *   CKPT_CUT_AT=opened   when ckptconv first hands pages of it back (madvise), which it
 *                        does once it has opened it: to half its size (tensor data and
 *                        whatever else is read later, through the mapping)
 *   CKPT_CUT_AT=read     at the first pread of it, to the offset that pread starts at
 *                        (headers were read through the mapping; tensor data is next) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int done;
/* the mapping of the file to cut, for CKPT_CUT_AT=opened */
static const char *map_start;
static size_t map_len;
static char map_path[PATH_MAX];

/* The path of fd when it is the file to cut, else NULL. */
static const char *target(int fd, char *path, size_t cap)
{
    const char *name = getenv("CKPT_CUT_FILE");
    size_t len, name_len;
    char link[64];
    ssize_t n;

    if (done || !name || fd < 0)
        return NULL;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    if ((n = readlink(link, path, cap - 1)) <= 0)
        return NULL;
    path[n] = '\0';
    len = (size_t)n;
    name_len = strlen(name);
    return len > name_len && path[len - name_len - 1] == '/' && strcmp(path + len - name_len, name) == 0 ? path
                                                                                                         : NULL;
}

static void cut(const char *path, off_t size)
{
    done = 1;
    if (truncate(path, size) != 0)
        perror("cut_short: truncate");
}

static int cut_at(const char *when)
{
    const char *at = getenv("CKPT_CUT_AT");
    return at && strcmp(at, when) == 0;
}

/* Each under both names: the library is built with _FILE_OFFSET_BITS=64, which binds its
 * calls to the *64 symbols. */
static void *cut_mmap(const char *sym, void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *(*real)(void *, size_t, int, int, int, off_t) =
        (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, sym);
    char path[PATH_MAX];
    struct stat st;
    void *p = real(addr, len, prot, flags, fd, off);

    if (p == MAP_FAILED || !target(fd, path, sizeof path))
        return p;
    if (cut_at("map") && fstat(fd, &st) == 0) {
        cut(path, st.st_size / 2);
    } else if (cut_at("opened") && !map_start) {
        map_start = p;
        map_len = len;
        snprintf(map_path, sizeof map_path, "%s", path);
    }
    return p;
}

static ssize_t cut_pread(const char *sym, int fd, void *buf, size_t count, off_t off)
{
    ssize_t (*real)(int, void *, size_t, off_t) = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, sym);
    char path[PATH_MAX];

    if (cut_at("read") && target(fd, path, sizeof path))
        cut(path, off);
    return real(fd, buf, count, off);
}

int madvise(void *addr, size_t len, int advice)
{
    int (*real)(void *, size_t, int) = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
    struct stat st;

    if (!done && map_start && (const char *)addr >= map_start && (const char *)addr < map_start + map_len &&
        stat(map_path, &st) == 0)
        cut(map_path, st.st_size / 2);
    return real(addr, len, advice);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return cut_mmap("mmap", addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return cut_mmap("mmap64", addr, len, prot, flags, fd, off);
}

ssize_t pread(int fd, void *buf, size_t count, off_t off)
{
    return cut_pread("pread", fd, buf, count, off);
}

ssize_t pread64(int fd, void *buf, size_t count, off_t off)
{
    return cut_pread("pread64", fd, buf, count, off);
}
