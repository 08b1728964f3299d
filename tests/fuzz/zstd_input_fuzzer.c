/* Hostile zstd inputs, through the real open path: the bytes as an input file, opened as a
 * file (decompressed on open) and as a checkpoint (every format bids on what it decompressed
 * to, the winner opens it, its tensors are read). Must never crash, hang or leak, and the
 * decompression guard keeps bombs small. Whatever opens equals what libzstd's one-shot
 * decompression makes of the same bytes. */
#include <ckpt.h>

#include "fuzz.h"

#define CKPT_FUZZ_ZSTD
#include "../../src/io/zstd_io.h"

#include <string.h>
#include <unistd.h>
#include <zstd.h>

static void check_file(const char *path, const uint8_t *data, size_t size)
{
    ckpt_file *f;
    void *plain;

    if (ckpt_file_open(&f, path) < 0) {
        FUZZ_ASSERT(ckpt_error_last()->message[0] != '\0');
        return;
    }
    if (f->zstd.zst_bytes) {
        FUZZ_ASSERT(f->zstd.zst_bytes == size && f->zstd.raw_bytes == f->size && f->size <= FUZZ_ZSTD_LIMIT);
        /* one byte more than ours: a one-shot result that is longer fails */
        plain = malloc((size_t)f->size + 1);
        FUZZ_ASSERT(plain);
        FUZZ_ASSERT(ZSTD_decompress(plain, (size_t)f->size + 1, data, size) == f->size);
        FUZZ_ASSERT(f->size == 0 || memcmp(plain, f->data, (size_t)f->size) == 0);
        free(plain);
    } else {
        FUZZ_ASSERT(f->size == size && (size == 0 || memcmp(f->data, data, size) == 0));
    }
    ckpt_file_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_ckpt *c = NULL;
    char path[64];
    int fd = fuzz_memfd(data, size, path, sizeof path);

    check_file(path, data, size);
    if (ckpt_open(&c, path, NULL) == 0) {
        fuzz_read_tensors(c);
        ckpt_close(c);
    } else {
        FUZZ_ASSERT(ckpt_error_last()->message[0] != '\0');
    }
    close(fd);
    return 0;
}
