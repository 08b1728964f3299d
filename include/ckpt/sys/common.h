/* For format and backend implementers: setting errors, overflow-checked arithmetic. */
#ifndef CKPT_SYS_COMMON_H
#define CKPT_SYS_COMMON_H

#include "../common.h"
#include "../error.h"

CKPT_BEGIN_DECL

/* Record a failure of class `klass` (a ckpt_error_class) on this thread and return `code`,
 * so that `return ckpt_error_setc(...)` reads naturally. Messages name the file, the tensor
 * or key, and the reason; no trailing newline and no "error:" prefix. */
CKPT_EXTERN(int) ckpt_error_setc(int code, int klass, const char *fmt, ...) CKPT_FORMAT_PRINTF(3, 4);
/* ckpt_error_setc with the class the code implies: CKPT_ERRCLASS_NOMEMORY for CKPT_ENOMEM,
 * CKPT_ERRCLASS_OS for CKPT_EIO, CKPT_ERRCLASS_NONE for every other code. */
CKPT_EXTERN(int) ckpt_error_set(int code, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
/* CKPT_ENOMEM, class CKPT_ERRCLASS_NOMEMORY, with a standard message. */
CKPT_EXTERN(int) ckpt_error_oom(void);
/* Prefix the current message with "<prefix>: " (adding context while unwinding); the code
 * and the class stay. */
CKPT_EXTERN(void) ckpt_error_prefix(const char *fmt, ...) CKPT_FORMAT_PRINTF(1, 2);

/* The first failure among parallel workers. Each thread has its own last error, so a loop
 * that fails in a worker keeps a copy here and raises it again on the thread that waits.
 * Zero-initialise; record from any thread. */
typedef struct ckpt_error_first {
    int code, klass;
    char message[1024];
} ckpt_error_first;
/* Keep the calling thread's last error as `f`'s, with code `rc`, unless one is kept already. */
CKPT_EXTERN(void) ckpt_error_first_record(ckpt_error_first *f, int rc);
/* Raise the kept failure on the calling thread and return its code; 0 when none was kept. */
CKPT_EXTERN(int) ckpt_error_first_raise(const ckpt_error_first *f);

/* Overflow-checked size arithmetic: evaluate to non-zero on overflow. */
#define CKPT_ADD_OVERFLOWS(a, b, out) __builtin_add_overflow((a), (b), (out))
#define CKPT_MUL_OVERFLOWS(a, b, out) __builtin_mul_overflow((a), (b), (out))

/* A growable array with room for one more element: `items` (*cap elements of elem_size bytes,
 * n of them used) as it is, or reallocated to twice the size when full. NULL when out of
 * memory (the error is set; `items` and *cap are unchanged and still the caller's). */
CKPT_EXTERN(void *) ckpt_array_grow(void *items, size_t *cap, size_t n, size_t elem_size);

/* Programmer errors only, never bad input. */
#define CKPT_ASSERT(cond) \
    do { if (!(cond)) ckpt__assert_fail(#cond, __FILE__, __LINE__); } while (0)
CKPT_EXTERN(void) ckpt__assert_fail(const char *expr, const char *file, int line);

/* Little-endian loads from unaligned memory. */
static inline uint16_t ckpt_load_u16le(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t ckpt_load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t ckpt_load_u64le(const uint8_t *p)
{
    return (uint64_t)ckpt_load_u32le(p) | ((uint64_t)ckpt_load_u32le(p + 4) << 32);
}

CKPT_END_DECL

#endif
