/* Helpers for the core unit tests: files written in the test's directory and mapped, so
 * that storages see real mappings, and storages and tensors over them. */
#ifndef CKPT_TEST_CORE_FIXTURE_H
#define CKPT_TEST_CORE_FIXTURE_H

#include "test.h"

#include <ckpt/sys/io.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

typedef struct mapped {
    ckpt_file f;
    size_t len;
} mapped;

/* Map an existing file read-only. */
static inline int map_existing(mapped *m, const char *path, size_t len)
{
    void *p;
    int fd = open(path, O_RDONLY);

    if (fd < 0)
        return -1;
    p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    m->f.path = path;
    m->f.fd = fd; /* large reads go through it (pread) */
    m->f.fd_offset = 0;
    m->f.data = p;
    m->f.size = len;
    m->len = len;
    return 0;
}

static inline int map_file(mapped *m, const char *path, const void *data, size_t len)
{
    ckpt_test_write_file(path, data, len);
    return map_existing(m, path, len);
}

static inline void unmap_file(mapped *m)
{
    munmap((void *)m->f.data, m->len);
    close(m->f.fd);
}

static inline void extent_set(ckpt_extent *e, const mapped *m, uint64_t off, uint64_t stored, uint64_t size,
                       ckpt_extent_encoding enc)
{
    e->file = &m->f;
    e->offset = off;
    e->stored_size = stored;
    e->size = size;
    e->encoding = enc;
    e->shuffle = 0;
    e->flags = 0;
}

static inline void tensor_init(ckpt_tensor *t, const char *name, ckpt_dtype dtype, const ckpt_storage *s, int ndim,
                        const int64_t *shape)
{
    int i;

    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = dtype;
    t->storage = s;
    t->ndim = ndim;
    for (i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    ckpt_tensor_set_contiguous(t);
}

/* Raw deflate (zip method 8) of data. */
static inline unsigned char *deflate_raw(const void *data, size_t len, size_t *out_len)
{
    z_stream z;
    unsigned char *out;
    size_t cap = len + len / 100 + 1024;

    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (!out || deflate(&z, Z_FINISH) != Z_STREAM_END) {
        deflateEnd(&z);
        free(out);
        return NULL;
    }
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

#endif
