/* A growable byte buffer for strings and small records the library hands back. */
#ifndef CKPT_BUF_H
#define CKPT_BUF_H

#include "common.h"

CKPT_BEGIN_DECL

typedef struct ckpt_buf {
    uint8_t *data; /* NUL-terminated after any append, for convenience */
    size_t len;
    size_t cap;
} ckpt_buf;

#define CKPT_BUF_INIT { NULL, 0, 0 }

CKPT_EXTERN(int) ckpt_buf_reserve(ckpt_buf *b, size_t extra);
CKPT_EXTERN(int) ckpt_buf_append(ckpt_buf *b, const void *data, size_t len);
CKPT_EXTERN(int) ckpt_buf_putc(ckpt_buf *b, uint8_t c);
CKPT_EXTERN(int) ckpt_buf_puts(ckpt_buf *b, const char *s);
CKPT_EXTERN(int) ckpt_buf_printf(ckpt_buf *b, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
/* Little-endian integer appends. */
CKPT_EXTERN(int) ckpt_buf_put_u16le(ckpt_buf *b, uint16_t v);
CKPT_EXTERN(int) ckpt_buf_put_u32le(ckpt_buf *b, uint32_t v);
CKPT_EXTERN(int) ckpt_buf_put_u64le(ckpt_buf *b, uint64_t v);
CKPT_EXTERN(void) ckpt_buf_clear(ckpt_buf *b);
/* Release the memory; the buffer is CKPT_BUF_INIT afterwards. */
CKPT_EXTERN(void) ckpt_buf_dispose(ckpt_buf *b);

CKPT_END_DECL

#endif
