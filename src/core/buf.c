/* Growable byte buffers and arrays. */
#include <ckpt/buf.h>
#include <ckpt/sys/common.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_buf_reserve(ckpt_buf *b, size_t extra)
{
    size_t need, cap;
    uint8_t *p;

    /* +1 keeps room for the terminating NUL. */
    if (CKPT_ADD_OVERFLOWS(b->len, extra, &need) || CKPT_ADD_OVERFLOWS(need, (size_t)1, &need))
        return ckpt_error_oom();
    if (need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    p = realloc(b->data, cap);
    if (!p)
        return ckpt_error_oom();
    b->data = p;
    b->cap = cap;
    return 0;
}

int ckpt_buf_append(ckpt_buf *b, const void *data, size_t len)
{
    int rc = ckpt_buf_reserve(b, len);
    if (rc)
        return rc;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
    return 0;
}

int ckpt_buf_putc(ckpt_buf *b, uint8_t c)
{
    return ckpt_buf_append(b, &c, 1);
}

int ckpt_buf_puts(ckpt_buf *b, const char *s)
{
    return ckpt_buf_append(b, s, strlen(s));
}

int ckpt_buf_printf(ckpt_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n, rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return ckpt_error_set(CKPT_EINVALID, "bad format string '%s'", fmt);
    rc = ckpt_buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int ckpt_buf_put_u16le(ckpt_buf *b, uint16_t v)
{
    uint8_t x[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    return ckpt_buf_append(b, x, sizeof x);
}

int ckpt_buf_put_u32le(ckpt_buf *b, uint32_t v)
{
    uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    return ckpt_buf_append(b, x, sizeof x);
}

int ckpt_buf_put_u64le(ckpt_buf *b, uint64_t v)
{
    int rc = ckpt_buf_put_u32le(b, (uint32_t)v);
    return rc ? rc : ckpt_buf_put_u32le(b, (uint32_t)(v >> 32));
}

void ckpt_buf_clear(ckpt_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}

void ckpt_buf_dispose(ckpt_buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void *ckpt_array_grow(void *items, size_t *cap, size_t n, size_t elem_size)
{
    size_t grown, bytes;
    void *p;

    if (n < *cap)
        return items;
    grown = *cap ? 2 * *cap : 16;
    if (grown < *cap || CKPT_MUL_OVERFLOWS(grown, elem_size, &bytes) || !(p = realloc(items, bytes))) {
        ckpt_error_oom();
        return NULL;
    }
    *cap = grown;
    return p;
}
