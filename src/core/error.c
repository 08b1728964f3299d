/* Thread-local last error (libgit2's convention): a code and a message naming file,
 * tensor and reason. */
#include <ckpt/sys/common.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_ERROR_MESSAGE_MAX 1024

static _Thread_local char last_message[CKPT_ERROR_MESSAGE_MAX];
static _Thread_local ckpt_error last_error = { "", CKPT_OK };

static int set_message(int code, const char *fmt, va_list ap)
{
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    last_error.message = last_message;
    last_error.code = code;
    return code;
}

int ckpt_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(code, fmt, ap);
    va_end(ap);
    return code;
}

int ckpt_error_oom(void)
{
    return ckpt_error_set(CKPT_ENOMEM, "out of memory");
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

const ckpt_error *ckpt_error_last(void)
{
    return &last_error;
}

void ckpt_error_clear(void)
{
    last_message[0] = '\0';
    last_error.message = last_message;
    last_error.code = CKPT_OK;
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

void ckpt__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "ckptconv: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}
