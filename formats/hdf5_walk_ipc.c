/* The walk of an HDF5 file runs in a child process, so that libhdf5's crashes and endless
 * loops on corrupt files end the child, not the program: the child writes records into a
 * pipe (the writer below) and exits without running any exit handler (libhdf5's would flush
 * and close what this process has open); this process reads them with a time limit, then
 * looks at how the child ended. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include "hdf5_private.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A child that sends nothing for this long is taken to loop forever. One step of a walk (an
 * object's header, an attribute, a chunk lookup) reads a few blocks of metadata; a long walk
 * keeps sending records. */
#define DEFAULT_LIMIT_S 10u
/* More records than this are not the metadata of any file worth reading. */
#define MAX_RECORD_BYTES ((size_t)1 << 30)
/* How often the child sends what it has, however little. */
#define SEND_EVERY_NS 500000000ull

static ckpt_h5_walk_fn walk_override;
static unsigned limit_override;

void ckpt_hdf5__set_walk(ckpt_h5_walk_fn fn, unsigned limit_s)
{
    walk_override = fn;
    limit_override = limit_s;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the child's writer ---- */

void ckpt_hdf5__flush(ckpt_h5_out *o)
{
    size_t done = 0;

    while (done < o->len) {
        ssize_t n = write(o->fd, o->buf + done, o->len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(3);
        done += (size_t)n;
    }
    o->len = 0;
    o->sent_ns = now_ns();
}

static void put(ckpt_h5_out *o, const void *data, size_t n)
{
    const unsigned char *p = data;

    while (n) {
        size_t k = sizeof o->buf - o->len < n ? sizeof o->buf - o->len : n;
        memcpy(o->buf + o->len, p, k);
        o->len += k;
        p += k;
        n -= k;
        if (o->len == sizeof o->buf)
            ckpt_hdf5__flush(o);
    }
    if (o->len && now_ns() - o->sent_ns >= SEND_EVERY_NS)
        ckpt_hdf5__flush(o);
}

static void put_le(ckpt_h5_out *o, uint64_t v, size_t n)
{
    unsigned char b[8];
    size_t i;

    for (i = 0; i < n; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put(o, b, n);
}

void ckpt_hdf5__put_u8(ckpt_h5_out *o, unsigned v)
{
    put_le(o, v, 1);
}

void ckpt_hdf5__put_u32(ckpt_h5_out *o, uint32_t v)
{
    put_le(o, v, 4);
}

void ckpt_hdf5__put_u64(ckpt_h5_out *o, uint64_t v)
{
    put_le(o, v, 8);
}

void ckpt_hdf5__put_bytes(ckpt_h5_out *o, const void *data, size_t n)
{
    if (n > UINT32_MAX)
        n = UINT32_MAX;
    ckpt_hdf5__put_u32(o, (uint32_t)n);
    put(o, data, n);
}

void ckpt_hdf5__put_str(ckpt_h5_out *o, const char *s)
{
    ckpt_hdf5__put_bytes(o, s, strlen(s));
}

void ckpt_hdf5__put_note(ckpt_h5_out *o, const char *fmt, ...)
{
    char text[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ckpt_hdf5__put_u8(o, CKPT_H5R_NOTE);
    ckpt_hdf5__put_str(o, text);
}

void ckpt_hdf5__put_fail(ckpt_h5_out *o)
{
    const ckpt_error *e = ckpt_error_last();

    ckpt_hdf5__put_u8(o, CKPT_H5R_FAIL);
    ckpt_hdf5__put_u32(o, (uint32_t)-e->code);
    ckpt_hdf5__put_u32(o, (uint32_t)e->klass);
    ckpt_hdf5__put_str(o, e->message);
}

/* The child keeps none of this process's signal handling: a handler that jumps back into
 * the caller (the guard against files cut short) or removes the output's temporaries must not
 * run here, and a crash must end the child by its signal, which is what this process looks
 * for. It dies with this process, and says nothing on stderr (a sanitizer's report of a crash
 * in libhdf5 included): this process reports. */
static void child(int fd, pid_t parent, const char *path, const ckpt_file *file)
{
    ckpt_h5_out *o;
    sigset_t all;
    int sig, devnull;

    for (sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(2);
    if ((devnull = open("/dev/null", O_WRONLY)) >= 0) {
        dup2(devnull, STDERR_FILENO);
        close(devnull);
    }
    if (!(o = malloc(sizeof *o)))
        _exit(2);
    o->fd = fd;
    o->len = 0;
    o->sent_ns = now_ns();
    (walk_override ? walk_override : ckpt_hdf5__walk)(path, file, o);
    ckpt_hdf5__flush(o);
    _exit(0);
}

/* ---- this process's side ---- */

static int corrupt(const char *path, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);

static int corrupt(const char *path, const char *fmt, ...)
{
    char why[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: corrupt HDF5 file (%s)", path, why);
}

static void wait_child(pid_t pid, int *status)
{
    pid_t got;

    while ((got = waitpid(pid, status, 0)) < 0 && errno == EINTR)
        ;
    /* reaped by someone else (SIGCHLD ignored): how it ended is unknown, the records tell */
    if (got < 0)
        *status = 0;
}

/* Read the child's records until it has exited and the pipe is drained, or until it has
 * sent nothing for limit_s (*hung) or too much. EOF alone does not end the read: a child
 * forked meanwhile by another thread may hold the pipe open. 1 when the child has been
 * reaped (*status), 0 when not, or an error. */
static int collect(int fd, pid_t pid, unsigned limit_s, const char *path, unsigned char **buf, size_t *len,
                   int *status, int *hung)
{
    uint64_t limit = (uint64_t)limit_s * 1000000000ull, quiet_since = now_ns();
    size_t cap = 0;
    int exited = 0;

    *hung = 0;
    if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
        return ckpt_error_set(CKPT_EIO, "%s: cannot read its HDF5 metadata: %s", path, strerror(errno));
    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        uint64_t quiet;
        ssize_t n;

        if (*len == cap) {
            unsigned char *grown;
            if (cap == MAX_RECORD_BYTES)
                return corrupt(path, "its metadata, as the HDF5 library reads it, is over %zu MiB",
                               MAX_RECORD_BYTES >> 20);
            cap = cap ? cap * 2 : 1 << 16;
            if (!(grown = realloc(*buf, cap)))
                return ckpt_error_oom();
            *buf = grown;
        }
        n = read(fd, *buf + *len, cap - *len);
        if (n > 0) {
            *len += (size_t)n;
            quiet_since = now_ns();
            continue;
        }
        if (n == 0 && exited)
            return 1;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            return ckpt_error_set(CKPT_EIO, "%s: cannot read its HDF5 metadata: %s", path, strerror(errno));
        if (exited)
            return 1;
        if (waitpid(pid, status, WNOHANG) == pid) {
            exited = 1;
            continue;
        }
        quiet = now_ns() - quiet_since;
        if (quiet >= limit) {
            *hung = 1;
            return 0;
        }
        /* wake at least every 100 ms: an exited child is seen even while the pipe stays open */
        (void)poll(&p, 1, (int)((limit - quiet) / 1000000 < 100 ? (limit - quiet) / 1000000 + 1 : 100));
    }
}

int ckpt_hdf5__run_walk(const char *path, const ckpt_file *file, unsigned char **records, size_t *len)
{
    unsigned limit_s = limit_override ? limit_override : DEFAULT_LIMIT_S;
    int fds[2], status = 0, hung, rc;
    pid_t pid, parent;

    *records = NULL;
    *len = 0;
    if (pipe2(fds, O_CLOEXEC) < 0)
        return ckpt_error_set(CKPT_EIO, "%s: cannot start reading its HDF5 metadata: %s", path, strerror(errno));
    parent = getpid();
    if ((pid = fork()) < 0) {
        rc = errno;
        close(fds[0]);
        close(fds[1]);
        return ckpt_error_set(CKPT_EIO, "%s: cannot start reading its HDF5 metadata: %s", path, strerror(rc));
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], parent, path, file);
    }
    close(fds[1]);
    rc = collect(fds[0], pid, limit_s, path, records, len, &status, &hung);
    close(fds[0]);
    if (rc <= 0) {
        kill(pid, SIGKILL);
        wait_child(pid, &status);
    }
    if (rc == 0 && hung)
        rc = corrupt(path, "the HDF5 library made no progress reading its metadata for %u s", limit_s);
    else if (rc >= 0 && WIFSIGNALED(status))
        rc = corrupt(path, "the HDF5 library crashed while reading its metadata: signal %d", WTERMSIG(status));
    else if (rc >= 0 && WIFEXITED(status) && WEXITSTATUS(status) != 0)
        rc = corrupt(path, "the process reading its metadata with the HDF5 library failed: exit status %d",
                     WEXITSTATUS(status));
    if (rc < 0) {
        free(*records);
        *records = NULL;
        *len = 0;
        return rc;
    }
    return 0;
}
