/* Shared by the fuzz harnesses: always-on assertions, the libFuzzer entry point, and the
 * input as a file. */
#ifndef CKPT_FUZZ_H
#define CKPT_FUZZ_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: fuzz assertion failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                \
        }                                                                           \
    } while (0)

/* The input as an anonymous file; path (cap >= 32) names it for the library's open
 * functions. Close the result. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("ckpt_fuzz_input", MFD_CLOEXEC);
    size_t done = 0;

    FUZZ_ASSERT(fd >= 0);
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        FUZZ_ASSERT(n > 0);
        done += (size_t)n;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
