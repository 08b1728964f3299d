/* Thread-local last error (libgit2's convention): a code, a class and a message naming
 * file, tensor and reason. */
#include <ckpt/sys/common.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_ERROR_MESSAGE_MAX 1024

static _Thread_local char last_message[CKPT_ERROR_MESSAGE_MAX];
static _Thread_local ckpt_error last_error = { "", CKPT_OK, CKPT_ERRCLASS_NONE };

static void set_message(int code, int klass, const char *fmt, va_list ap)
{
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    last_error.message = last_message;
    last_error.code = code;
    last_error.klass = klass;
}

/* Only codes that name one area imply a class; CKPT_EFORMAT and the rest occur in every
 * area, so guessing would mislead a caller that branches on the class. */
static int class_of_code(int code)
{
    switch (code) {
    case CKPT_ENOMEM: return CKPT_ERRCLASS_NOMEMORY;
    case CKPT_EIO: return CKPT_ERRCLASS_OS;
    default: return CKPT_ERRCLASS_NONE;
    }
}

int ckpt_error_setc(int code, int klass, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(code, klass, fmt, ap);
    va_end(ap);
    return code;
}

int ckpt_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(code, class_of_code(code), fmt, ap);
    va_end(ap);
    return code;
}

int ckpt_error_oom(void)
{
    return ckpt_error_setc(CKPT_ENOMEM, CKPT_ERRCLASS_NOMEMORY, "out of memory");
}

void ckpt_error_prefix(const char *fmt, ...)
{
    char old[CKPT_ERROR_MESSAGE_MAX];
    size_t len;
    va_list ap;

    memcpy(old, last_message, sizeof old);
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    len = strlen(last_message);
    if (len + 2 < sizeof last_message) {
        memcpy(last_message + len, ": ", 2);
        len += 2;
        memcpy(last_message + len, old, strnlen(old, sizeof last_message - len - 1));
        last_message[len + strnlen(old, sizeof last_message - len - 1)] = '\0';
    }
    last_error.message = last_message;
}

void ckpt_error_first_record(ckpt_error_first *f, int rc)
{
#ifdef CKPT_HAVE_OPENMP
#pragma omp critical(ckpt_error_first)
#endif
    if (!f->code) {
        f->klass = last_error.klass;
        snprintf(f->message, sizeof f->message, "%s", last_error.message);
        f->code = rc < 0 ? rc : CKPT_ERROR;
    }
}

int ckpt_error_first_raise(const ckpt_error_first *f)
{
    return f->code ? ckpt_error_setc(f->code, f->klass, "%s", f->message) : 0;
}

const ckpt_error *ckpt_error_last(void)
{
    return &last_error;
}

void ckpt_error_clear(void)
{
    last_message[0] = '\0';
    last_error.message = last_message;
    last_error.code = CKPT_OK;
    last_error.klass = CKPT_ERRCLASS_NONE;
}

const char *ckpt_error_name(int code)
{
    switch (code) {
    case CKPT_OK: return "ok";
    case CKPT_ERROR: return "error";
    case CKPT_ENOTFOUND: return "not found";
    case CKPT_EFORMAT: return "format error";
    case CKPT_EUNSUPPORTED: return "unsupported";
    case CKPT_ENOMEM: return "out of memory";
    case CKPT_EIO: return "I/O error";
    case CKPT_EINVALID: return "invalid argument";
    case CKPT_EUSER: return "user error";
    case CKPT_EABORTED: return "aborted";
    case CKPT_EUNSAFE: return "unsafe input";
    case CKPT_EEXISTS: return "already exists";
    case CKPT_ITEROVER: return "end of iteration";
    default: return "unknown error";
    }
}

const char *ckpt_error_class_name(int klass)
{
    switch (klass) {
    case CKPT_ERRCLASS_NONE: return "none";
    case CKPT_ERRCLASS_NOMEMORY: return "memory";
    case CKPT_ERRCLASS_OS: return "os";
    case CKPT_ERRCLASS_FORMAT: return "format";
    case CKPT_ERRCLASS_PICKLE: return "pickle";
    case CKPT_ERRCLASS_ZIP: return "zip";
    case CKPT_ERRCLASS_MAP: return "map";
    case CKPT_ERRCLASS_GRAPH: return "graph";
    case CKPT_ERRCLASS_MAP_PARAM: return "map parameter";
    case CKPT_ERRCLASS_MAP_DIRECTION: return "map direction";
    case CKPT_ERRCLASS_LAYOUT: return "layout";
    case CKPT_ERRCLASS_BACKEND: return "backend";
    case CKPT_ERRCLASS_MODEL: return "model";
    case CKPT_ERRCLASS_ARGUMENT: return "argument";
    default: return "unknown";
    }
}

void ckpt__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "ckptconv: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}
