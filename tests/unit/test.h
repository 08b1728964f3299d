/* A small unit-test harness: CKPT_TEST(name) { ... } registers a case; each test file
 * links test_main.c and becomes one executable that runs its cases, each in a fresh
 * temporary directory. `./test_x name` runs one case. Failed asserts print
 * ckpt_error_last()->message, so a failing library call says why. */
#ifndef CKPT_TEST_H
#define CKPT_TEST_H

#include <ckpt.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef void (*ckpt_test_fn)(void);
void ckpt_test_register(const char *name, ckpt_test_fn fn);
void ckpt_test_fail(const char *file, int line, const char *fmt, ...);
/* Path of a file under testdata/ (static buffer, valid until the next call). */
const char *ckpt_test_data(const char *relative);
/* Write a file in the current (temporary) directory. */
void ckpt_test_write_file(const char *path, const void *data, size_t len);
/* Read a whole file; caller frees. NULL if missing. */
unsigned char *ckpt_test_read_file(const char *path, size_t *len);
/* Copy the files (not subdirectories) of testdata/<relative> into dst, which is created;
 * 0, or -1 when something could not be read or made. */
int ckpt_test_copy_data_dir(const char *relative, const char *dst);

#define CKPT_TEST(name)                                                        \
    static void name(void);                                                    \
    __attribute__((constructor)) static void name##_register(void)             \
    {                                                                          \
        ckpt_test_register(#name, name);                                       \
    }                                                                          \
    static void name(void)

#define ASSERT_TRUE(cond)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            ckpt_test_fail(__FILE__, __LINE__, "%s", #cond);                  \
            return;                                                            \
        }                                                                      \
    } while (0)

/* A library call that must succeed (return >= 0). */
#define ASSERT_OK(expr)                                                        \
    do {                                                                       \
        int ckpt_test_rc_ = (expr);                                            \
        if (ckpt_test_rc_ < 0) {                                               \
            ckpt_test_fail(__FILE__, __LINE__, "%s returned %d: %s", #expr,    \
                           ckpt_test_rc_, ckpt_error_last()->message);         \
            return;                                                            \
        }                                                                      \
    } while (0)

/* A library call that must fail with `code`. */
#define ASSERT_FAILS(code, expr)                                               \
    do {                                                                       \
        int ckpt_test_rc_ = (expr);                                            \
        if (ckpt_test_rc_ != (code)) {                                         \
            ckpt_test_fail(__FILE__, __LINE__, "%s returned %d, expected %d (%s)", \
                           #expr, ckpt_test_rc_, (int)(code),                  \
                           ckpt_error_last()->message);                        \
            return;                                                            \
        }                                                                      \
    } while (0)

#define ASSERT_EQ_INT(a, b)                                                    \
    do {                                                                       \
        long long ckpt_a_ = (long long)(a), ckpt_b_ = (long long)(b);          \
        if (ckpt_a_ != ckpt_b_) {                                              \
            ckpt_test_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", \
                           #a, ckpt_a_, #b, ckpt_b_);                          \
            return;                                                            \
        }                                                                      \
    } while (0)

#define ASSERT_EQ_STR(a, b)                                                    \
    do {                                                                       \
        const char *ckpt_a_ = (a), *ckpt_b_ = (b);                             \
        if (!ckpt_a_ || !ckpt_b_ || strcmp(ckpt_a_, ckpt_b_) != 0) {           \
            ckpt_test_fail(__FILE__, __LINE__, "%s == \"%s\", expected \"%s\"", \
                           #a, ckpt_a_ ? ckpt_a_ : "(null)",                   \
                           ckpt_b_ ? ckpt_b_ : "(null)");                      \
            return;                                                            \
        }                                                                      \
    } while (0)

/* The last error message must contain `needle`. */
#define ASSERT_ERROR_MENTIONS(needle)                                          \
    do {                                                                       \
        if (!strstr(ckpt_error_last()->message, (needle))) {                   \
            ckpt_test_fail(__FILE__, __LINE__, "error \"%s\" does not mention \"%s\"", \
                           ckpt_error_last()->message, (needle));              \
            return;                                                            \
        }                                                                      \
    } while (0)

#endif
