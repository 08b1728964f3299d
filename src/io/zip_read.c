/* Zip reader for torch.save archives and any plain zip: the central directory is the
 * truth (torch writes local headers with zero sizes and CRC, the real values follow the
 * data in a descriptor), every offset and size is checked against the file before use,
 * and what cannot be read safely (encryption, other methods, split archives, duplicate
 * names) is refused when the archive is opened rather than when an entry is read. */
#include <ckpt/sys/common.h>
#include <ckpt/sys/table.h>
#include <ckpt/sys/zip.h>

#include "../core/crc32.h"
#include "zip_private.h"

#include <stdlib.h>
#include <string.h>
#define ZLIB_CONST
#include <zlib.h>

#define STORED_CHUNK ((size_t)4 << 20)   /* bytes checked, then released, at a time */
#define INFLATE_CHUNK ((size_t)256 << 10) /* inflate output buffer */
/* Deflate cannot expand one input byte into more than about this many output bytes, so a
 * larger claimed size is corrupt and must not drive an allocation. */
#define DEFLATE_MAX_RATIO 1032u

struct ckpt_zip {
    const ckpt_file *file;
    ckpt_zip_entry *entries;
    size_t count;
    char *names;       /* every name, NUL-terminated, back to back */
    ckpt_strmap index; /* name -> entry index */
};

/* What the end records say about the central directory. */
typedef struct zip_directory {
    uint64_t count;
    uint64_t offset;
    uint64_t size;
    uint64_t limit; /* the directory must end by here: the first end record */
} zip_directory;

static int multi_disk(const ckpt_file *f)
{
    return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: split (multi-disk) zip archives are not supported", f->path);
}

static int find_end_record(const ckpt_file *f, uint64_t *pos)
{
    uint64_t p, lowest;

    if (f->size >= CKPT_ZIP_EOCD_SIZE) {
        /* The record is followed only by its comment (at most 64 KiB); the last match
         * whose comment fits in the file wins. */
        lowest = f->size > CKPT_ZIP_EOCD_SIZE + CKPT_ZIP_MAX_COMMENT
                     ? f->size - CKPT_ZIP_EOCD_SIZE - CKPT_ZIP_MAX_COMMENT : 0;
        for (p = f->size - CKPT_ZIP_EOCD_SIZE + 1; p-- > lowest;) {
            const uint8_t *r = f->data + p;
            if (ckpt_load_u32le(r) == CKPT_ZIP_EOCD_SIG &&
                f->size - p - CKPT_ZIP_EOCD_SIZE >= ckpt_load_u16le(r + 20)) {
                *pos = p;
                return 0;
            }
        }
    }
    if (f->size >= 4 && ckpt_load_u32le(f->data) == CKPT_ZIP_LOCAL_SIG)
        return ckpt_error_set(CKPT_EFORMAT,
                              "%s: truncated zip: end of central directory not found (incomplete download?)",
                              f->path);
    return ckpt_error_set(CKPT_EFORMAT, "%s: not a zip archive: end of central directory not found", f->path);
}

static int read_zip64_end(const ckpt_file *f, uint64_t locator, zip_directory *d)
{
    const uint8_t *l = f->data + locator, *r;
    uint64_t at = ckpt_load_u64le(l + 8);

    if (ckpt_load_u32le(l + 4) != 0 || ckpt_load_u32le(l + 16) > 1)
        return multi_disk(f);
    if (at > locator || locator - at < CKPT_ZIP64_EOCD_SIZE ||
        ckpt_load_u32le(f->data + at) != CKPT_ZIP64_EOCD_SIG)
        return ckpt_error_set(CKPT_EFORMAT, "%s: zip64 end of central directory record not found at offset %llu",
                              f->path, (unsigned long long)at);
    r = f->data + at;
    /* Record size counts from after the size field; it may carry extensible data. */
    if (ckpt_load_u64le(r + 4) < CKPT_ZIP64_EOCD_SIZE - 12 || ckpt_load_u64le(r + 4) > locator - at - 12)
        return ckpt_error_set(CKPT_EFORMAT, "%s: zip64 end of central directory record has a bad size", f->path);
    if (ckpt_load_u32le(r + 16) != 0 || ckpt_load_u32le(r + 20) != 0 ||
        ckpt_load_u64le(r + 24) != ckpt_load_u64le(r + 32))
        return multi_disk(f);
    d->count = ckpt_load_u64le(r + 32);
    d->size = ckpt_load_u64le(r + 40);
    d->offset = ckpt_load_u64le(r + 48);
    d->limit = at;
    return 0;
}

static int read_end_records(const ckpt_file *f, uint64_t eocd, zip_directory *d)
{
    const uint8_t *r = f->data + eocd;
    int rc;

    d->count = ckpt_load_u16le(r + 10);
    d->size = ckpt_load_u32le(r + 12);
    d->offset = ckpt_load_u32le(r + 16);
    d->limit = eocd;
    if (eocd >= CKPT_ZIP64_LOCATOR_SIZE &&
        ckpt_load_u32le(r - CKPT_ZIP64_LOCATOR_SIZE) == CKPT_ZIP64_LOCATOR_SIG) {
        rc = read_zip64_end(f, eocd - CKPT_ZIP64_LOCATOR_SIZE, d);
        if (rc)
            return rc;
    } else if (ckpt_load_u16le(r + 4) != 0 || ckpt_load_u16le(r + 6) != 0 ||
               ckpt_load_u16le(r + 8) != d->count) {
        return multi_disk(f);
    }
    if (d->offset > d->limit || d->size > d->limit - d->offset)
        return ckpt_error_set(CKPT_EFORMAT,
                              "%s: central directory (%llu bytes at offset %llu) lies outside the file (truncated?)",
                              f->path, (unsigned long long)d->size, (unsigned long long)d->offset);
    if (d->count > d->size / CKPT_ZIP_CENTRAL_SIZE)
        return ckpt_error_set(CKPT_EFORMAT, "%s: central directory of %llu bytes cannot hold %llu entries",
                              f->path, (unsigned long long)d->size, (unsigned long long)d->count);
    if (d->count >= UINT32_MAX)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: %llu zip entries are too many", f->path,
                              (unsigned long long)d->count);
    return 0;
}

/* First pass: every directory entry is whole and in place. Yields the bytes needed for
 * the names, so that allocations follow what the file really holds. */
static int walk_directory(const ckpt_file *f, const zip_directory *d, uint64_t *name_bytes)
{
    uint64_t p = d->offset, end = d->offset + d->size, i;

    *name_bytes = 0;
    for (i = 0; i < d->count; i++) {
        const uint8_t *h = f->data + p;
        uint64_t nlen, len;
        if (end - p < CKPT_ZIP_CENTRAL_SIZE || ckpt_load_u32le(h) != CKPT_ZIP_CENTRAL_SIG)
            return ckpt_error_set(CKPT_EFORMAT, "%s: central directory entry %llu is missing or corrupt",
                                  f->path, (unsigned long long)i);
        nlen = ckpt_load_u16le(h + 28);
        len = CKPT_ZIP_CENTRAL_SIZE + nlen + ckpt_load_u16le(h + 30) + ckpt_load_u16le(h + 32);
        if (end - p < len)
            return ckpt_error_set(CKPT_EFORMAT, "%s: central directory entry %llu is truncated", f->path,
                                  (unsigned long long)i);
        if (memchr(h + CKPT_ZIP_CENTRAL_SIZE, 0, nlen))
            return ckpt_error_set(CKPT_EFORMAT, "%s: central directory entry %llu has a NUL byte in its name",
                                  f->path, (unsigned long long)i);
        *name_bytes += nlen + 1;
        p += len;
    }
    return 0;
}

/* Zip64 extra field (id 1): 64-bit values for exactly the fields whose 32-bit (or 16-bit)
 * slot holds the mark, in the order usize, csize, header offset, disk. */
static int read_zip64_extra(const ckpt_file *f, ckpt_zip_entry *e, uint32_t *disk, const uint8_t *x, size_t len)
{
    int need_u = e->usize == CKPT_ZIP_U32_MARK, need_c = e->csize == CKPT_ZIP_U32_MARK;
    int need_o = e->header_offset == CKPT_ZIP_U32_MARK, need_d = *disk == CKPT_ZIP_U16_MARK;

    if (!need_u && !need_c && !need_o && !need_d)
        return 0;
    while (len >= 4) {
        size_t size = ckpt_load_u16le(x + 2);
        if (size > len - 4)
            break;
        if (ckpt_load_u16le(x) == CKPT_ZIP64_EXTRA_ID) {
            size_t need = 8u * (size_t)(need_u + need_c + need_o) + 4u * (size_t)need_d;
            const uint8_t *q = x + 4;
            if (size < need)
                break;
            if (need_u)
                e->usize = ckpt_load_u64le(q), q += 8;
            if (need_c)
                e->csize = ckpt_load_u64le(q), q += 8;
            if (need_o)
                e->header_offset = ckpt_load_u64le(q), q += 8;
            if (need_d)
                *disk = ckpt_load_u32le(q);
            return 0;
        }
        x += 4 + size;
        len -= 4 + size;
    }
    return ckpt_error_set(CKPT_EFORMAT, "%s: zip entry '%s': zip64 extra field missing or too short",
                          f->path, e->name);
}

static int check_entry(const ckpt_file *f, const ckpt_zip_entry *e, unsigned flags)
{
    if (flags & (CKPT_ZIP_FLAG_ENCRYPTED | CKPT_ZIP_FLAG_STRONG_ENCRYPTION))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: zip entry '%s' is encrypted", f->path, e->name);
    if (e->method != 0 && e->method != 8)
        return ckpt_error_set(CKPT_EUNSUPPORTED,
                              "%s: zip entry '%s' uses compression method %u (only stored and deflated are supported)",
                              f->path, e->name, (unsigned)e->method);
    if (e->method == 0 && e->csize != e->usize)
        return ckpt_error_set(CKPT_EFORMAT, "%s: zip entry '%s' is stored but its sizes differ (%llu and %llu)",
                              f->path, e->name, (unsigned long long)e->csize, (unsigned long long)e->usize);
    if (e->method == 8 && e->csize < UINT64_MAX / DEFLATE_MAX_RATIO - 1 &&
        e->usize > (e->csize + 1) * DEFLATE_MAX_RATIO)
        return ckpt_error_set(CKPT_EFORMAT,
                              "%s: zip entry '%s' claims %llu bytes from %llu deflated bytes, "
                              "more than deflate can encode",
                              f->path, e->name, (unsigned long long)e->usize, (unsigned long long)e->csize);
    return 0;
}

static int read_local_header(const ckpt_file *f, ckpt_zip_entry *e)
{
    const uint8_t *h;
    uint64_t start;
    size_t nlen = strlen(e->name);

    if (e->header_offset > f->size || f->size - e->header_offset < CKPT_ZIP_LOCAL_SIZE)
        return ckpt_error_set(CKPT_EFORMAT,
                              "%s: zip entry '%s': local header offset %llu lies past the end of the file",
                              f->path, e->name, (unsigned long long)e->header_offset);
    h = f->data + e->header_offset;
    if (ckpt_load_u32le(h) != CKPT_ZIP_LOCAL_SIG)
        return ckpt_error_set(CKPT_EFORMAT, "%s: zip entry '%s': no local header at offset %llu",
                              f->path, e->name, (unsigned long long)e->header_offset);
    start = e->header_offset + CKPT_ZIP_LOCAL_SIZE + ckpt_load_u16le(h + 26) + ckpt_load_u16le(h + 28);
    if (start > f->size)
        return ckpt_error_set(CKPT_EFORMAT, "%s: zip entry '%s': local header runs past the end of the file",
                              f->path, e->name);
    if (ckpt_load_u16le(h + 26) != nlen || memcmp(h + CKPT_ZIP_LOCAL_SIZE, e->name, nlen) != 0)
        return ckpt_error_set(CKPT_EFORMAT,
                              "%s: zip entry '%s': local header at offset %llu names a different entry",
                              f->path, e->name, (unsigned long long)e->header_offset);
    if (e->csize > f->size - start)
        return ckpt_error_set(CKPT_EFORMAT,
                              "%s: zip entry '%s': %llu bytes at offset %llu lie past the end of the file (%llu bytes)",
                              f->path, e->name, (unsigned long long)e->csize, (unsigned long long)start,
                              (unsigned long long)f->size);
    e->data_offset = start;
    return 0;
}

static int index_insert(ckpt_zip *z, size_t i)
{
    const char *name = z->entries[i].name;
    int rc = ckpt_strmap_add(&z->index, name, strlen(name), i, NULL);

    if (rc == 1)
        return ckpt_error_set(CKPT_EFORMAT, "%s: duplicate zip entry '%s'", z->file->path, name);
    return rc;
}

static int read_entries(ckpt_zip *z, const zip_directory *d)
{
    const ckpt_file *f = z->file;
    char *name = z->names;
    uint64_t p = d->offset;
    size_t i;
    int rc;

    for (i = 0; i < z->count; i++) {
        const uint8_t *h = f->data + p;
        ckpt_zip_entry *e = &z->entries[i];
        size_t nlen = ckpt_load_u16le(h + 28), xlen = ckpt_load_u16le(h + 30);
        uint32_t disk = ckpt_load_u16le(h + 34);

        memcpy(name, h + CKPT_ZIP_CENTRAL_SIZE, nlen);
        name[nlen] = '\0';
        e->name = name;
        name += nlen + 1;
        e->method = ckpt_load_u16le(h + 10);
        e->crc32 = ckpt_load_u32le(h + 16);
        e->csize = ckpt_load_u32le(h + 20);
        e->usize = ckpt_load_u32le(h + 24);
        e->header_offset = ckpt_load_u32le(h + 42);
        rc = read_zip64_extra(f, e, &disk, h + CKPT_ZIP_CENTRAL_SIZE + nlen, xlen);
        if (rc)
            return rc;
        if (disk != 0)
            return multi_disk(f);
        rc = check_entry(f, e, ckpt_load_u16le(h + 8));
        if (rc)
            return rc;
        rc = read_local_header(f, e);
        if (rc)
            return rc;
        rc = index_insert(z, i);
        if (rc)
            return rc;
        p += CKPT_ZIP_CENTRAL_SIZE + nlen + xlen + ckpt_load_u16le(h + 32);
    }
    return 0;
}

int ckpt_zip_open(ckpt_zip **out, const ckpt_file *f)
{
    zip_directory d;
    uint64_t eocd = 0, name_bytes = 0;
    ckpt_zip *z;
    int rc;

    *out = NULL;
    rc = find_end_record(f, &eocd);
    if (rc)
        return rc;
    rc = read_end_records(f, eocd, &d);
    if (rc)
        return rc;
    rc = walk_directory(f, &d, &name_bytes);
    if (rc)
        return rc;
    z = calloc(1, sizeof *z);
    if (!z)
        return ckpt_error_oom();
    z->file = f;
    z->count = (size_t)d.count;
    z->entries = calloc(z->count ? z->count : 1, sizeof *z->entries);
    z->names = malloc(name_bytes ? (size_t)name_bytes : 1);
    if (!z->entries || !z->names) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = ckpt_strmap_reserve(&z->index, z->count)) < 0)
        goto done;
    rc = read_entries(z, &d);
done:
    if (rc)
        ckpt_zip_close(z);
    else
        *out = z;
    return rc;
}

void ckpt_zip_close(ckpt_zip *z)
{
    if (!z)
        return;
    free(z->entries);
    free(z->names);
    ckpt_strmap_dispose(&z->index);
    free(z);
}

size_t ckpt_zip_count(const ckpt_zip *z)
{
    return z->count;
}

const ckpt_zip_entry *ckpt_zip_entry_at(const ckpt_zip *z, size_t i)
{
    return i < z->count ? &z->entries[i] : NULL;
}

const ckpt_zip_entry *ckpt_zip_find(const ckpt_zip *z, const char *name)
{
    uint64_t i;

    return ckpt_strmap_get(&z->index, name, strlen(name), &i) ? &z->entries[i] : NULL;
}

/* Receives an entry's decoded bytes, in order, in bounded pieces. */
typedef int (*consume_fn)(void *ctx, const uint8_t *p, size_t n);

/* An entry being streamed: what the loops below keep, outside them, so that a file cut
 * short under them (SIGBUS, caught by ckpt_file_guard) leaves nothing unreleased. */
typedef struct stream_args {
    const ckpt_zip *z;
    const ckpt_zip_entry *e;
    int release;
    consume_fn fn;
    void *ctx;
    z_stream s;
    uint8_t *out;
} stream_args;

static int stream_stored(void *arg)
{
    stream_args *a = arg;
    const ckpt_zip_entry *e = a->e;
    uint64_t done = 0;
    int rc = 0;

    while (rc == 0 && done < e->csize) {
        size_t n = e->csize - done < STORED_CHUNK ? (size_t)(e->csize - done) : STORED_CHUNK;
        rc = a->fn(a->ctx, a->z->file->data + e->data_offset + done, n);
        if (a->release)
            ckpt_file_release(a->z->file, e->data_offset + done, n);
        done += n;
    }
    return rc;
}

static int stream_deflated(void *arg)
{
    stream_args *a = arg;
    const ckpt_file *f = a->z->file;
    const ckpt_zip_entry *e = a->e;
    z_stream *s = &a->s;
    uint64_t fed = 0, chunk = 0, total = 0; /* chunk: where the input being inflated starts */
    int zr = Z_OK, rc = 0;

    while (rc == 0 && zr != Z_STREAM_END) {
        size_t have;
        if (s->avail_in == 0) {
            size_t n = e->csize - fed < STORED_CHUNK ? (size_t)(e->csize - fed) : STORED_CHUNK;
            if (a->release)
                ckpt_file_release(f, e->data_offset + chunk, fed - chunk);
            if (n == 0)
                return ckpt_error_set(CKPT_EFORMAT, "%s: zip entry '%s': deflate data ends early", f->path, e->name);
            s->next_in = f->data + e->data_offset + fed;
            s->avail_in = (uInt)n;
            chunk = fed;
            fed += n;
        }
        s->next_out = a->out;
        s->avail_out = (uInt)INFLATE_CHUNK;
        zr = inflate(s, Z_NO_FLUSH);
        /* Z_BUF_ERROR with no input left only means: feed me. */
        if (zr != Z_OK && zr != Z_STREAM_END && !(zr == Z_BUF_ERROR && s->avail_in == 0))
            return ckpt_error_set(CKPT_EFORMAT, "%s: zip entry '%s': corrupt deflate data (%s)", f->path, e->name,
                                  s->msg ? s->msg : "inflate failed");
        have = INFLATE_CHUNK - s->avail_out;
        if (have > e->usize - total)
            return ckpt_error_set(CKPT_EFORMAT,
                                  "%s: zip entry '%s' inflates to more than the %llu bytes the directory says",
                                  f->path, e->name, (unsigned long long)e->usize);
        total += have;
        if (have)
            rc = a->fn(a->ctx, a->out, have);
    }
    if (rc == 0 && total != e->usize)
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: zip entry '%s' inflates to %llu bytes, the directory says %llu",
                            f->path, e->name, (unsigned long long)total, (unsigned long long)e->usize);
    return rc;
}

static int stream_entry(const ckpt_zip *z, const ckpt_zip_entry *e, int release, consume_fn fn, void *ctx)
{
    stream_args a;
    int rc;

    memset(&a, 0, sizeof a);
    a.z = z;
    a.e = e;
    a.release = release;
    a.fn = fn;
    a.ctx = ctx;
    if (e->method != 8)
        return ckpt_file_guard(z->file, stream_stored, &a);
    if (!(a.out = malloc(INFLATE_CHUNK)) || inflateInit2(&a.s, -MAX_WBITS) != Z_OK) {
        free(a.out);
        return ckpt_error_oom();
    }
    rc = ckpt_file_guard(z->file, stream_deflated, &a);
    if (release)
        ckpt_file_release(z->file, e->data_offset, e->csize);
    inflateEnd(&a.s);
    free(a.out);
    return rc;
}

static int crc_mismatch(const ckpt_zip *z, const ckpt_zip_entry *e, uint32_t crc)
{
    return ckpt_error_set(CKPT_EFORMAT, "%s: zip entry '%s': CRC-32 mismatch (directory says %08x, data gives %08x)",
                          z->file->path, e->name, (unsigned)e->crc32, (unsigned)crc);
}

typedef struct read_ctx {
    ckpt_buf *out;
    uLong crc;
    int check_crc;
} read_ctx;

static int read_consume(void *ctx, const uint8_t *p, size_t n)
{
    read_ctx *c = ctx;

    if (c->check_crc)
        c->crc = ckpt_crc32(c->crc, p, n);
    return ckpt_buf_append(c->out, p, n);
}

int ckpt_zip_read(const ckpt_zip *z, const ckpt_zip_entry *e, int check_crc, ckpt_buf *out)
{
    read_ctx c = { out, 0, check_crc };
    int rc;

    if (e->usize >= SIZE_MAX)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: zip entry '%s' is too large to read into memory",
                              z->file->path, e->name);
    ckpt_buf_clear(out);
    rc = ckpt_buf_reserve(out, (size_t)e->usize);
    if (rc == 0)
        rc = stream_entry(z, e, 0, read_consume, &c);
    if (rc == 0 && check_crc && c.crc != e->crc32)
        rc = crc_mismatch(z, e, (uint32_t)c.crc);
    if (rc)
        ckpt_buf_clear(out);
    return rc;
}

static int crc_consume(void *ctx, const uint8_t *p, size_t n)
{
    uLong *crc = ctx;

    *crc = ckpt_crc32(*crc, p, n);
    return 0;
}

int ckpt_zip_verify(const ckpt_zip *z, const ckpt_zip_entry *e)
{
    uLong crc = 0;
    int rc = stream_entry(z, e, 1, crc_consume, &crc);

    if (rc == 0 && crc != e->crc32)
        rc = crc_mismatch(z, e, (uint32_t)crc);
    return rc;
}

void ckpt_zip_extent(const ckpt_zip *z, const ckpt_zip_entry *e, ckpt_extent *out)
{
    memset(out, 0, sizeof *out);
    out->file = z->file;
    out->offset = e->data_offset;
    out->stored_size = e->csize;
    out->size = e->usize;
    out->encoding = e->method == 8 ? CKPT_EXTENT_DEFLATE : CKPT_EXTENT_RAW;
}
