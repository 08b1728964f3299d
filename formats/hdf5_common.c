/* What the HDF5 reader and writer share with the library: its error stack turned into our
 * messages, and the one-time set-up (the zstd filter registered). */
#include "hdf5_private.h"

#include <hdf5.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_hdf5__register_zstd(void);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_rc;
static volatile int file_left_open;

/* libhdf5 1.10 cannot close a file whose last writes failed (a full disk, a file size limit):
 * the close fails, leaves the file half closed, and its exit-time clean-up crashes on it after
 * the error has been reported. So the clean-up is ours, skipped when a file was left so. */
static void term_library(void)
{
    if (!file_left_open)
        H5close();
}

void ckpt_hdf5__file_left_open(void)
{
    file_left_open = 1;
}

static void init_once(void)
{
    /* fails, harmlessly, where the program has already used libhdf5 itself */
    H5dont_atexit();
    once_rc = H5open() < 0 || atexit(term_library) != 0 ? -1 : ckpt_hdf5__register_zstd();
}

int ckpt_hdf5__init(void)
{
    pthread_once(&once, init_once);
    if (once_rc < 0)
        return ckpt_hdf5__fail(CKPT_EIO, "the HDF5 library did not initialise");
    /* error stacks are per thread in a thread-safe HDF5: silence this thread's */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

/* The deepest entry is where HDF5 found the problem; the outer ones only say which call
 * failed. Its description is the useful part ("file signature not found", ...). */
static herr_t keep_innermost(unsigned n, const H5E_error2_t *e, void *payload)
{
    char *out = payload, *nl;
    const char *at, *err;

    (void)n;
    if (!e->desc || !*e->desc)
        return 0;
    /* the file drivers append the time, the file, the descriptor and errno, over lines
     * ("file write failed: time = ..., errno = 28, ...", "unable to extend file properly,
     * errno = 27, ..."): what failed, and errno's meaning */
    at = strstr(e->desc, ": time = ");
    err = strstr(e->desc, "errno = ");
    if (!at)
        at = strstr(e->desc, ", errno = ");
    if (at && err)
        snprintf(out, 256, "%.*s: %s", (int)(at - e->desc), e->desc, strerror(atoi(err + 8)));
    else
        snprintf(out, 256, "%s", e->desc);
    while ((nl = strchr(out, '\n')))
        *nl = ' ';
    return 0;
}

/* The innermost reason of HDF5's error stack into reason[256] ("" when none); the stack is
 * cleared. */
static void take_reason(char *reason)
{
    *reason = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, reason);
    H5Eclear2(H5E_DEFAULT);
}

int ckpt_hdf5__fail(int code, const char *fmt, ...)
{
    char what[768], reason[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    take_reason(reason);
    if (*reason)
        return ckpt_error_set(code, "%s: %s", what, reason);
    return ckpt_error_set(code, "%s", what);
}

int ckpt_hdf5__corrupt(const char *path, const char *fmt, ...)
{
    char what[768], reason[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    take_reason(reason);
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: corrupt HDF5 file (%s%s%s)", path, what,
                           *reason ? ": " : "", reason);
}
