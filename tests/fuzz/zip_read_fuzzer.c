/* The zip reader never crashes, never reads outside the file and keeps its own promises
 * on any input: what open accepts can be looked up, read and verified without harm. */
#include "fuzz.h"

#include <ckpt/error.h>
#include <ckpt/sys/zip.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Reading into memory is for small records; bigger claims are still streamed by verify. */
#define MAX_READ ((uint64_t)16 << 20)

static void check_entries(const ckpt_zip *z, const ckpt_file *f)
{
    ckpt_buf buf = CKPT_BUF_INIT;
    size_t i, n = ckpt_zip_count(z);

    for (i = 0; i < n; i++) {
        const ckpt_zip_entry *e = ckpt_zip_entry_at(z, i);
        ckpt_extent x;
        FUZZ_ASSERT(e != NULL);
        FUZZ_ASSERT(ckpt_zip_find(z, e->name) == e);
        FUZZ_ASSERT(e->method == 0 || e->method == 8);
        FUZZ_ASSERT(e->data_offset <= f->size && e->csize <= f->size - e->data_offset);
        FUZZ_ASSERT(e->data_offset >= e->header_offset + 30 + strlen(e->name));
        ckpt_zip_extent(z, e, &x);
        FUZZ_ASSERT(x.file == f && x.offset == e->data_offset && x.stored_size == e->csize && x.size == e->usize);
        if (e->usize <= MAX_READ) {
            int rc = ckpt_zip_read(z, e, 1, &buf);
            FUZZ_ASSERT(rc == 0 ? buf.len == e->usize : buf.len == 0);
            FUZZ_ASSERT((rc == 0) == (ckpt_zip_verify(z, e) == 0));
        } else {
            ckpt_zip_verify(z, e);
        }
    }
    FUZZ_ASSERT(ckpt_zip_entry_at(z, n) == NULL);
    ckpt_buf_dispose(&buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    ckpt_file *f;
    ckpt_zip *z;
    int fd = fuzz_memfd(data, size, path, sizeof path);

    if (ckpt_file_open(&f, path) == 0) {
        /* a zstd frame is opened decompressed (the zstd_input harness checks those bytes) */
        FUZZ_ASSERT(f->zstd.zst_bytes ? f->zstd.zst_bytes == size && f->zstd.raw_bytes == f->size : f->size == size);
        if (ckpt_zip_open(&z, f) == 0) {
            check_entries(z, f);
            ckpt_zip_close(z);
        } else {
            FUZZ_ASSERT(ckpt_error_last()->message[0] != '\0');
        }
        ckpt_file_close(f);
    }
    close(fd);
    return 0;
}
