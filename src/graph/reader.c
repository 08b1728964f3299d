/* The engine side of a format's open hook: where formats put storages, tensors, the value
 * tree and notes. */
#include "engine.h"
#include "../io/inputs.h"
#include "../io/zstd_io.h"

#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Storage ids key the cache of decoded chunks (storage.c): never reused in a process. */
static atomic_uint_least64_t storage_ids;

const char *ckpt_reader_path(const ckpt_reader *r)
{
    return r->ckpt->path;
}

const ckpt_file *ckpt_reader_file(const ckpt_reader *r)
{
    return r->ckpt->n_files ? r->ckpt->files[0] : NULL;
}

/* Open a file for the checkpoint, which keeps it open as long as itself. */
static int add_file(ckpt_reader *r, const char *path, const char *name, int decompress, const ckpt_zstd_check *check,
                    const ckpt_file **out)
{
    ckpt_ckpt *c = r->ckpt;
    ckpt_file **files;
    ckpt_file *f;
    int rc;

    files = realloc(c->files, (c->n_files + 1) * sizeof *files);
    if (!files)
        return ckpt_error_oom();
    c->files = files;
    rc = ckpt_file__open_as(&f, path, name, decompress, check);
    if (rc < 0)
        return rc;
    c->files[c->n_files++] = f;
    *out = f;
    return 0;
}

/* An input file opened is held until ckpt_close, so that no output replaces it (inputs.c). */
static int hold(ckpt_reader *r, int rc, const char *path)
{
    return rc < 0 ? rc : ckpt_inputs__hold(r->ckpt, path);
}

int ckpt_reader_open_file(ckpt_reader *r, const char *path, const ckpt_file **out)
{
    ckpt_zstd_check check = { ckpt_ckpt__zstd_check, r->ckpt };

    return hold(r, add_file(r, path, path, 1, &check, out), path);
}

static int at_most(void *arg, const char *path, const uint8_t *head, size_t n, int whole, uint64_t *need,
                   uint64_t *max_size)
{
    (void)path;
    (void)head;
    (void)n;
    (void)whole;
    (void)need;
    *max_size = *(const uint64_t *)arg;
    return 0;
}

int ckpt_reader_open_file_within(ckpt_reader *r, const char *path, uint64_t max_size, const ckpt_file **out)
{
    ckpt_zstd_check check = { at_most, &max_size };

    return hold(r, add_file(r, path, path, 1, &check, out), path);
}

const ckpt_open_options *ckpt_reader_options(const ckpt_reader *r)
{
    return &r->ckpt->opts;
}

ckpt_arena *ckpt_reader_arena(ckpt_reader *r)
{
    return r->ckpt->arena;
}

void **ckpt_reader_state(ckpt_reader *r)
{
    return &r->ckpt->state;
}

ckpt_storage *ckpt_reader_new_storage(ckpt_reader *r, const char *key, ckpt_dtype dtype, size_t n_extents)
{
    ckpt_storage *s = ckpt_arena_alloc(r->ckpt->arena, sizeof *s);
    size_t bytes;

    if (!s)
        return NULL;
    if (CKPT_MUL_OVERFLOWS(n_extents, sizeof *s->extents, &bytes)) {
        ckpt_error_oom();
        return NULL;
    }
    s->key = key ? ckpt_arena_strndup(r->ckpt->arena, key, strlen(key)) : "";
    s->id = (uint64_t)atomic_fetch_add(&storage_ids, 1) + 1;
    s->dtype = dtype;
    s->n_extents = n_extents;
    s->extents = n_extents ? ckpt_arena_alloc(r->ckpt->arena, bytes) : NULL;
    if (!s->key || (n_extents && !s->extents))
        return NULL;
    return s;
}

ckpt_storage *ckpt_reader_new_tiled_storage(ckpt_reader *r, const char *key, ckpt_dtype dtype, int ndim,
                                            const int64_t *shape, size_t n_tiles)
{
    ckpt_storage *s = ckpt_reader_new_storage(r, key, dtype, 0);
    ckpt_tiling *g;
    size_t bytes;

    if (!s)
        return NULL;
    if (ndim < 0 || ndim > CKPT_MAX_DIMS) {
        ckpt_error_set(CKPT_EFORMAT, "%s: tensor '%s' has %d dimensions", r->ckpt->path, key ? key : "", ndim);
        return NULL;
    }
    if (CKPT_MUL_OVERFLOWS(n_tiles, sizeof *g->tiles, &bytes) || !(g = ckpt_arena_alloc(r->ckpt->arena, sizeof *g)) ||
        (n_tiles && !(g->tiles = ckpt_arena_alloc(r->ckpt->arena, bytes)))) {
        ckpt_error_oom();
        return NULL;
    }
    g->ndim = ndim;
    if (ndim)
        memcpy(g->shape, shape, (size_t)ndim * sizeof *shape);
    g->n_tiles = n_tiles;
    s->tiling = g;
    return s;
}

int ckpt_reader_window(ckpt_reader *r, const ckpt_file *f, uint64_t off, uint64_t len, const ckpt_file **out)
{
    ckpt_file *w;
    uint64_t end;

    if (!f || CKPT_ADD_OVERFLOWS(off, len, &end) || end > f->size)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: bytes [%llu, +%llu) are past its end (%llu bytes)",
                               f ? f->path : "(no file)", (unsigned long long)off, (unsigned long long)len,
                               f ? (unsigned long long)f->size : 0ull);
    if (!(w = ckpt_arena_alloc(r->ckpt->arena, sizeof *w)))
        return ckpt_error_oom();
    *w = *f;
    w->data = len ? f->data + off : NULL;
    w->fd_offset = f->fd_offset + off;
    w->size = len;
    *out = w;
    return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int ckpt_reader_memory_file(ckpt_reader *r, const char *name, const void *data, size_t len, const ckpt_file **out)
{
    char proc[64];
    int fd, rc;

    /* An unnamed file rather than a buffer: whatever reads input files (pread, the kernel's
     * copy_file_range, madvise on the mapping) works on it unchanged. */
    fd = memfd_create("ckpt_reader_memory", MFD_CLOEXEC);
    if (fd < 0) {
        FILE *tmp = tmpfile();
        fd = tmp ? dup(fileno(tmp)) : -1;
        if (tmp)
            fclose(tmp);
    }
    if (fd < 0)
        return ckpt_error_set(CKPT_EIO, "%s: cannot make a file in memory for %s", r->ckpt->path, name);
    if (len && write_all(fd, data, len) != 0) {
        close(fd);
        return ckpt_error_set(CKPT_EIO, "%s: cannot write %zu bytes into memory for %s", r->ckpt->path, len, name);
    }
    /* our own bytes: whatever they start with, never a zstd frame to decompress */
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    rc = add_file(r, proc, name, 0, NULL, out);
    close(fd);
    return rc;
}

int ckpt_reader_add_tensor(ckpt_reader *r, ckpt_tensor **out)
{
    ckpt_ckpt *c = r->ckpt;

    if (c->n_tensors >= INT_MAX)
        return ckpt_error_set(CKPT_EFORMAT, "%s: more than %d tensors", c->path, INT_MAX);
    if (c->n_tensors == c->cap_tensors) {
        size_t cap = c->cap_tensors ? c->cap_tensors * 2 : 64;
        ckpt_tensor *t;
        t = realloc(c->tensors, cap * sizeof *t);
        if (!t)
            return ckpt_error_oom();
        c->tensors = t;
        c->cap_tensors = cap;
    }
    *out = &c->tensors[c->n_tensors];
    memset(*out, 0, sizeof **out);
    return (int)c->n_tensors++;
}

ckpt_tensor *ckpt_reader_tensor(ckpt_reader *r, size_t index)
{
    return index < r->ckpt->n_tensors ? &r->ckpt->tensors[index] : NULL;
}

size_t ckpt_reader_tensor_count(const ckpt_reader *r)
{
    return r->ckpt->n_tensors;
}

void ckpt_reader_set_root(ckpt_reader *r, ckpt_value *root)
{
    r->ckpt->root = root;
}

void ckpt_reader_note(ckpt_reader *r, const char *fmt, ...)
{
    ckpt_ckpt *c = r->ckpt;
    char line[1024];
    char **notes;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    notes = realloc(c->notes, (c->n_notes + 1) * sizeof *notes);
    if (!notes)
        return;
    c->notes = notes;
    c->notes[c->n_notes] = ckpt_arena_strndup(c->arena, line, strlen(line));
    if (c->notes[c->n_notes])
        c->n_notes++;
}
