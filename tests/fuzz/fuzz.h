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

/* The library's guard against decompression bombs (src/io/zstd_io.h). An input that is a
 * zstd frame is decompressed as it is opened, whatever the harness: a few bytes of it must
 * not ask for gigabytes of window or of output. */
void ckpt_zstd__set_input_limit(uint64_t max_bytes);
#define FUZZ_ZSTD_LIMIT ((uint64_t)8 << 20)

/* The input as an anonymous file; path (cap >= 32) names it for the library's open
 * functions. Close the result. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("ckpt_fuzz_input", MFD_CLOEXEC);
    size_t done = 0;

    ckpt_zstd__set_input_limit(FUZZ_ZSTD_LIMIT);
    FUZZ_ASSERT(fd >= 0);
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        FUZZ_ASSERT(n > 0);
        done += (size_t)n;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

/* Read every tensor of up to 16 MiB of an opened checkpoint (results ignored: only crashes,
 * hangs and leaks count). Include <ckpt.h> before this header to have it. */
#ifdef CKPT_H
static inline void fuzz_read_tensors(const ckpt_ckpt *c)
{
    size_t i;

    for (i = 0; i < ckpt_tensor_count(c); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c, i);
        uint64_t nbytes = ckpt_tensor_nbytes(t);
        void *buf;

        FUZZ_ASSERT(t && t->name);
        if (nbytes > ((uint64_t)16 << 20))
            continue;
        buf = malloc(nbytes ? (size_t)nbytes : 1);
        FUZZ_ASSERT(buf);
        (void)ckpt_tensor_read(t, 0, ckpt_tensor_numel(t), t->dtype, buf);
        free(buf);
    }
}
#endif

#endif
