/* Work-in-progress names that a later run can prove abandoned (wip.h). */
#include "wip.h"

#include <ckpt/sys/common.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TAG ".ckptconv-"
#define RANDOM_LEN 6
/* what the owner and random parts may take: 16 hex, pid, start time, separators */
#define OWNER_MAX 64
#define MAX_DEPTH 32

static char machine[17]; /* 8 hex of the host name's hash, 8 of the boot id */
static pthread_once_t machine_once = PTHREAD_ONCE_INIT;

/* Field 22 of /proc/<pid>/stat: the process's start time, in clock ticks after boot; 0 when
 * there is no such process (or no /proc). */
static unsigned long long start_time(long pid)
{
    char path[64], buf[1024], *p;
    unsigned long long start = 0;
    FILE *f;
    int field;

    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (!(f = fopen(path, "r")))
        return 0;
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    /* the command name in parentheses may hold spaces; fields count from after it */
    if (!(p = strrchr(buf, ')')))
        return 0;
    for (field = 2, p++; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    if (field == 22)
        start = strtoull(p, NULL, 10);
    return start;
}

static void identify_machine(void)
{
    char host[256] = "", boot[64] = "";
    uint32_t h = 2166136261u;
    size_t i, n = 0;
    FILE *f;

    gethostname(host, sizeof host - 1);
    for (i = 0; host[i]; i++)
        h = (h ^ (unsigned char)host[i]) * 16777619u;
    if ((f = fopen("/proc/sys/kernel/random/boot_id", "r"))) {
        if (!fgets(boot, sizeof boot, f))
            boot[0] = '\0';
        fclose(f);
    }
    snprintf(machine, sizeof machine, "%08" PRIx32, h);
    for (i = 0; boot[i] && n < 8; i++)
        if ((boot[i] >= '0' && boot[i] <= '9') || (boot[i] >= 'a' && boot[i] <= 'f'))
            machine[8 + n++] = boot[i];
    while (n < 8)
        machine[8 + n++] = '0';
    machine[16] = '\0';
}

/* How much of the target name fits, with the tag and the owner, in NAME_MAX. */
static int kept(const char *target)
{
    int keep = (int)strlen(target), room = NAME_MAX - 1 - (int)strlen(TAG) - OWNER_MAX - RANDOM_LEN - 1;
    return keep < room ? keep : room;
}

int ckpt_wip__name(char *out, size_t cap, const char *target)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    static atomic_uint counter;
    uint8_t bytes[RANDOM_LEN];
    char rnd[RANDOM_LEN + 1];
    int i, n;

    pthread_once(&machine_once, identify_machine);
    if (getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != (ssize_t)sizeof bytes) {
        /* O_EXCL or mkdir make names unique; this only makes collisions rare */
        uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)atomic_fetch_add(&counter, 1) << 32);
        for (i = 0; i < RANDOM_LEN; i++, x >>= 8)
            bytes[i] = (uint8_t)x;
    }
    for (i = 0; i < RANDOM_LEN; i++)
        rnd[i] = alphabet[bytes[i] % (sizeof alphabet - 1)];
    rnd[RANDOM_LEN] = '\0';
    n = snprintf(out, cap, ".%.*s" TAG "%s-%ld-%llu-%s", kept(target), target, machine, (long)getpid(),
                 start_time((long)getpid()), rnd);
    if (n < 0 || (size_t)n >= cap || n > NAME_MAX)
        return ckpt_error_set(CKPT_EINVALID, "%s: no room for a temporary name beside it", target);
    return 0;
}

/* The owner of a work-in-progress name, once its prefix is stripped: 0 when it parses. */
static int parse_owner(const char *s, char host_boot[17], long *pid, unsigned long long *start)
{
    char *end;
    size_t i;

    for (i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return -1;
    memcpy(host_boot, s, 16);
    host_boot[16] = '\0';
    if (s[16] != '-')
        return -1;
    *pid = strtol(s + 17, &end, 10);
    if (end == s + 17 || *end != '-' || *pid <= 0)
        return -1;
    *start = strtoull(end + 1, &end, 10);
    if (*end != '-' || strlen(end + 1) != RANDOM_LEN)
        return -1;
    return 0;
}

/* Remove `name` under dirfd, a file or a directory tree. 0, or -1 with errno. */
static int remove_tree(int dirfd, const char *name, int depth)
{
    struct dirent *e;
    DIR *d;
    int fd, rc = 0, saved;

    if (unlinkat(dirfd, name, 0) == 0)
        return 0;
    if ((errno != EISDIR && errno != EPERM) || depth > MAX_DEPTH)
        return -1;
    if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return -1;
    if (!(d = fdopendir(fd))) {
        close(fd);
        return -1;
    }
    while (rc == 0 && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            rc = remove_tree(fd, e->d_name, depth + 1);
    saved = errno;
    closedir(d);
    if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) != 0)
        return -1;
    errno = saved;
    return rc;
}

/* The owner of a work-in-progress name: 0 when `name` is one. The target before the tag may
 * hold the tag itself; the owner is what follows the occurrence that parses. */
static int owner_of(const char *name, char host_boot[17], long *pid, unsigned long long *start)
{
    const char *tag;

    if (name[0] != '.')
        return -1;
    for (tag = strstr(name + 1, TAG); tag; tag = strstr(tag + 1, TAG))
        if (parse_owner(tag + strlen(TAG), host_boot, pid, start) == 0 && *start != 0)
            return 0;
    return -1;
}

void ckpt_wip__sweep(int dirfd, const char *dir_path, ckpt_buf *notes)
{
    char owner[17];
    struct dirent *e;
    DIR *d;
    int fd;

    pthread_once(&machine_once, identify_machine);
    /* without /proc no process can be told alive or gone */
    if (start_time((long)getpid()) == 0)
        return;
    if ((fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || !(d = fdopendir(fd))) {
        if (fd >= 0)
            close(fd);
        return;
    }
    while ((e = readdir(d))) {
        unsigned long long start;
        long pid;
        if (owner_of(e->d_name, owner, &pid, &start) < 0)
            continue;
        if (strncmp(owner, machine, 8) != 0) {
            ckpt_buf_printf(notes, "left %s/%s alone: another machine made it (a run there may still be writing "
                                   "it)\n", dir_path, e->d_name);
            continue;
        }
        /* the same boot, the same process alive: a run writing into this directory right now */
        if (strncmp(owner + 8, machine + 8, 8) == 0 && start_time(pid) == start)
            continue;
        if (remove_tree(dirfd, e->d_name, 0) == 0)
            ckpt_buf_printf(notes, "removed %s/%s, left by an interrupted run (pid %ld%s)\n", dir_path, e->d_name, pid,
                            strncmp(owner + 8, machine + 8, 8) ? ", before a reboot" : "");
        else
            ckpt_buf_printf(notes, "could not remove %s/%s, left by an interrupted run: %s\n", dir_path, e->d_name,
                            strerror(errno));
    }
    closedir(d);
}
