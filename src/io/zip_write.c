/* Zip writer laid out byte for byte as torch's PyTorchStreamWriter (miniz in zip64 mode)
 * lays out torch.save files, so that torch reads our output as its own and files round-trip
 * unchanged: stored entries; local headers with version 0, zero time, CRC and sizes, and an
 * "FB" extra field padding each entry's data to the alignment; a data descriptor after
 * every non-empty entry; zip64 end records always.
 *
 * Entries are reserved first (their local header needs no CRC, so it is written at once)
 * and filled by the caller, possibly from several threads; descriptors and the central
 * directory follow in finish, with the CRCs the caller reported. An archive may also sit
 * inside a larger file with its offsets counted from its own start (a Distributed
 * Checkpoint's data file is torch.save archives end to end), be built in memory, or only
 * be laid out, to learn its size before anything is written. */
#include <ckpt/sys/common.h>
#include <ckpt/sys/zip.h>

#include "../core/crc32.h"
#include "zip_private.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ZIP_NAME_MAX 0xFFFFu
#define ZIP_MAX_ALIGN 0x8000u                 /* the padding length must fit the u16 extra size */
#define CD_BUFFER_SIZE ((size_t)1 << 20)      /* central directory written in pieces this big */
#define MAX_ENTRY_RECORD (CKPT_ZIP_CENTRAL_SIZE + ZIP_NAME_MAX + 28)
#define END_RECORDS (CKPT_ZIP64_EOCD_SIZE + CKPT_ZIP64_LOCATOR_SIZE + CKPT_ZIP_EOCD_SIZE)
#define FLAGS_WITH_DESCRIPTOR (CKPT_ZIP_FLAG_UTF8 | CKPT_ZIP_FLAG_DESCRIPTOR)
#define ZIP64_MADE_BY 0x031Eu /* what miniz writes: Unix, spec 3.0 */
#define ZIP64_NEEDED 0x002Du  /* spec 4.5, zip64 */

typedef struct zip_wentry {
    uint64_t header_offset;
    uint64_t data_offset;
    uint64_t size;
    size_t name_at; /* in the writer's names buffer */
    uint16_t name_len;
    uint32_t crc;
    int crc_set;
} zip_wentry;

struct ckpt_zip_writer {
    ckpt_outfile *out; /* NULL: into mem, or nowhere */
    ckpt_buf *mem;
    uint64_t base;     /* where offset 0 of the archive lies in out */
    uint64_t cursor;   /* past everything reserved; past the end records once finished */
    unsigned align;
    int finished;
    zip_wentry *entries;
    size_t count;
    size_t cap;
    ckpt_buf names;
};

static uint8_t *put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    return p + 2;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    return put16(put16(p, (uint16_t)v), (uint16_t)(v >> 16));
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
    return put32(put32(p, (uint32_t)v), (uint32_t)(v >> 32));
}

static uint32_t clamp32(uint64_t v)
{
    return v >= CKPT_ZIP_U32_MARK ? CKPT_ZIP_U32_MARK : (uint32_t)v;
}

/* miniz's rule: a large entry carries both sizes, an entry whose header lies past 4 GiB
 * carries the offset; the same fields appear in the local header and the directory. */
static int wide_size(uint64_t size)
{
    return size >= CKPT_ZIP_U32_MARK;
}

static int wide_offset(uint64_t header_offset)
{
    return header_offset >= CKPT_ZIP_U32_MARK;
}

static size_t zip64_extra_len(uint64_t size, uint64_t header_offset)
{
    size_t n = (wide_size(size) ? 16u : 0u) + (wide_offset(header_offset) ? 8u : 0u);
    return n ? 4 + n : 0;
}

/* `csize` is 0 in local headers: miniz writes them before it knows the stored size. */
static uint8_t *put_zip64_extra(uint8_t *p, uint64_t size, uint64_t csize, uint64_t header_offset)
{
    size_t len = zip64_extra_len(size, header_offset);

    if (!len)
        return p;
    p = put16(put16(p, CKPT_ZIP64_EXTRA_ID), (uint16_t)(len - 4));
    if (wide_size(size))
        p = put64(put64(p, size), csize);
    if (wide_offset(header_offset))
        p = put64(p, header_offset);
    return p;
}

/* Data descriptor: 24 bytes when the entry has a zip64 extra field, else 16. */
static size_t descriptor_len(uint64_t size, uint64_t header_offset)
{
    if (size == 0)
        return 0;
    return zip64_extra_len(size, header_offset) ? 24 : 16;
}

static const char *wpath(const ckpt_zip_writer *w)
{
    return w->out ? ckpt_outfile_path(w->out) : "(zip archive in memory)";
}

/* An archive in memory holds at least `end` bytes (zeros where nothing was written yet). */
static int mem_cover(ckpt_zip_writer *w, uint64_t end)
{
    if (end > (uint64_t)SIZE_MAX)
        return ckpt_error_oom();
    if (end > w->mem->len) {
        if (ckpt_buf_reserve(w->mem, (size_t)(end - w->mem->len)) < 0)
            return CKPT_ENOMEM;
        memset(w->mem->data + w->mem->len, 0, (size_t)(end - w->mem->len));
        w->mem->len = (size_t)end;
    }
    return 0;
}

/* Bytes at archive offset `off`: into the file, into memory, or (laying out) nowhere. */
static int emit(ckpt_zip_writer *w, uint64_t off, const void *data, size_t len)
{
    int rc;

    if (w->out)
        return ckpt_outfile_pwrite(w->out, w->base + off, data, len);
    if (!w->mem)
        return 0;
    if ((rc = mem_cover(w, off + len)) < 0)
        return rc;
    memcpy(w->mem->data + off, data, len);
    return 0;
}

static int writer_new(ckpt_zip_writer **out, ckpt_outfile *f, ckpt_buf *mem, uint64_t base, uint64_t start,
                      unsigned align)
{
    ckpt_zip_writer *w;
    const char *path = f ? ckpt_outfile_path(f) : "(zip archive in memory)";

    *out = NULL;
    if (align == 0 || align > ZIP_MAX_ALIGN || (align & (align - 1)) != 0)
        return ckpt_error_set(CKPT_EINVALID, "%s: zip alignment %u is not a power of two up to %u", path, align,
                              ZIP_MAX_ALIGN);
    if (start > (uint64_t)INT64_MAX || base > (uint64_t)INT64_MAX)
        return ckpt_error_set(CKPT_EINVALID, "%s: zip start offset %llu exceeds the largest file size", path,
                              (unsigned long long)(start > base ? start : base));
    w = calloc(1, sizeof *w);
    if (!w)
        return ckpt_error_oom();
    w->out = f;
    w->mem = mem;
    w->base = base;
    w->cursor = start;
    w->align = align;
    *out = w;
    return 0;
}

int ckpt_zip_writer_new(ckpt_zip_writer **out, ckpt_outfile *f, uint64_t start, unsigned align)
{
    return writer_new(out, f, NULL, 0, start, align);
}

int ckpt_zip_writer_new_embedded(ckpt_zip_writer **out, ckpt_outfile *f, uint64_t base, unsigned align)
{
    return writer_new(out, f, NULL, base, 0, align);
}

int ckpt_zip_writer_new_mem(ckpt_zip_writer **out, ckpt_buf *mem, unsigned align)
{
    if (!mem)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_zip_writer_new_mem: no buffer");
    ckpt_buf_clear(mem);
    return writer_new(out, NULL, mem, 0, 0, align);
}

static int writer_usable(const ckpt_zip_writer *w)
{
    if (w->finished)
        return ckpt_error_set(CKPT_EINVALID, "%s: zip archive already finished", wpath(w));
    return 0;
}

int ckpt_zip_writer_add(ckpt_zip_writer *w, const char *name, uint64_t size, uint64_t *data_offset)
{
    size_t name_len = strlen(name), x64, pad, header_len;
    uint64_t at = w->cursor, start, end;
    uint8_t *header, *p;
    zip_wentry *e;
    int rc = writer_usable(w);

    if (rc)
        return rc;
    if (name_len > ZIP_NAME_MAX)
        return ckpt_error_set(CKPT_EINVALID, "%s: zip entry name of %zu bytes is longer than %u",
                              wpath(w), name_len, ZIP_NAME_MAX);
    if (w->count >= INT_MAX)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: too many zip entries", wpath(w));
    x64 = zip64_extra_len(size, at);
    start = at + CKPT_ZIP_LOCAL_SIZE + name_len + x64 + 4; /* 4: the FB field's own header */
    pad = (size_t)((w->align - start % w->align) % w->align);
    start += pad;
    if (CKPT_ADD_OVERFLOWS(start, size, &end) || CKPT_ADD_OVERFLOWS(end, (uint64_t)descriptor_len(size, at), &end) ||
        end > (uint64_t)INT64_MAX)
        return ckpt_error_set(CKPT_EINVALID, "%s: zip entry '%s' of %llu bytes exceeds the largest file size",
                              wpath(w), name, (unsigned long long)size);
    if (w->count == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        zip_wentry *grown = realloc(w->entries, cap * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        w->entries = grown;
        w->cap = cap;
    }
    header_len = (size_t)(start - at);
    header = malloc(header_len);
    if (!header)
        return ckpt_error_oom();
    p = put32(header, CKPT_ZIP_LOCAL_SIG);
    p = put16(p, 0);                                                 /* version needed */
    p = put16(p, size ? FLAGS_WITH_DESCRIPTOR : CKPT_ZIP_FLAG_UTF8);
    p = put16(p, 0);                                                 /* stored */
    p = put32(p, 0);                                                 /* time, date */
    p = put32(put32(put32(p, 0), 0), 0);                             /* crc, sizes: in the descriptor */
    p = put16(p, (uint16_t)name_len);
    p = put16(p, (uint16_t)(x64 + 4 + pad));
    memcpy(p, name, name_len);
    p = put_zip64_extra(p + name_len, size, 0, at);
    p = put16(put16(p, 0x4246), (uint16_t)pad);                      /* "FB" */
    memset(p, 'Z', pad);
    rc = emit(w, at, header, header_len);
    free(header);
    if (rc == 0 && w->mem)
        rc = mem_cover(w, start + size); /* the caller writes the data into it */
    if (rc == 0)
        rc = ckpt_buf_append(&w->names, name, name_len);
    if (rc)
        return rc;
    e = &w->entries[w->count];
    e->header_offset = at;
    e->data_offset = start;
    e->size = size;
    e->name_at = w->names.len - name_len;
    e->name_len = (uint16_t)name_len;
    e->crc = 0;
    e->crc_set = size == 0;
    w->cursor = end;
    if (data_offset)
        *data_offset = start;
    return (int)w->count++;
}

int ckpt_zip_writer_add_bytes(ckpt_zip_writer *w, const char *name, const void *data, size_t len)
{
    uint64_t at;
    int index = ckpt_zip_writer_add(w, name, len, &at), rc;

    if (index < 0)
        return index;
    rc = emit(w, at, data, len);
    if (rc)
        return rc;
    ckpt_zip_writer_set_crc(w, index, ckpt_crc32(0, data, len));
    return index;
}

void ckpt_zip_writer_set_crc(ckpt_zip_writer *w, int entry, uint32_t crc)
{
    CKPT_ASSERT(entry >= 0 && (size_t)entry < w->count);
    w->entries[entry].crc = crc;
    w->entries[entry].crc_set = 1;
}

uint64_t ckpt_zip_writer_tell(const ckpt_zip_writer *w)
{
    return w->cursor;
}

static int check_crcs(const ckpt_zip_writer *w)
{
    size_t i;

    for (i = 0; i < w->count; i++) {
        const zip_wentry *e = &w->entries[i];
        if (!e->crc_set)
            return ckpt_error_set(CKPT_EINVALID, "%s: zip entry '%.*s' was never given its CRC-32",
                                  wpath(w), (int)e->name_len,
                                  (const char *)w->names.data + e->name_at);
    }
    return 0;
}

static int write_descriptors(ckpt_zip_writer *w)
{
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < w->count; i++) {
        const zip_wentry *e = &w->entries[i];
        uint8_t d[24], *p;
        if (e->size == 0)
            continue;
        p = put32(put32(d, CKPT_ZIP_DESCRIPTOR_SIG), e->crc);
        if (descriptor_len(e->size, e->header_offset) == 24)
            p = put64(put64(p, e->size), e->size);
        else
            p = put32(put32(p, (uint32_t)e->size), (uint32_t)e->size);
        rc = emit(w, e->data_offset + e->size, d, (size_t)(p - d));
    }
    return rc;
}

static uint8_t *put_central_entry(const ckpt_zip_writer *w, const zip_wentry *e, uint8_t *p)
{
    p = put32(p, CKPT_ZIP_CENTRAL_SIG);
    p = put32(p, 0);                                   /* made by, needed */
    p = put16(p, e->size ? FLAGS_WITH_DESCRIPTOR : CKPT_ZIP_FLAG_UTF8);
    p = put16(p, 0);                                   /* stored */
    p = put32(p, 0);                                   /* time, date */
    p = put32(p, e->crc);
    p = put32(put32(p, clamp32(e->size)), clamp32(e->size));
    p = put16(p, e->name_len);
    p = put16(p, (uint16_t)zip64_extra_len(e->size, e->header_offset));
    p = put16(put16(put16(p, 0), 0), 0);               /* comment length, disk, internal attributes */
    p = put32(p, 0);                                   /* external attributes */
    p = put32(p, clamp32(e->header_offset));
    memcpy(p, w->names.data + e->name_at, e->name_len);
    return put_zip64_extra(p + e->name_len, e->size, e->size, e->header_offset);
}

static uint8_t *put_end_records(const ckpt_zip_writer *w, uint8_t *p, uint64_t cd_offset, uint64_t cd_size)
{
    uint64_t end64 = cd_offset + cd_size;

    p = put32(p, CKPT_ZIP64_EOCD_SIG);
    p = put64(p, CKPT_ZIP64_EOCD_SIZE - 12);           /* counted from after this field */
    p = put16(put16(p, ZIP64_MADE_BY), ZIP64_NEEDED);
    p = put32(put32(p, 0), 0);                         /* this disk, directory disk */
    p = put64(put64(p, w->count), w->count);
    p = put64(put64(p, cd_size), cd_offset);
    p = put32(p, CKPT_ZIP64_LOCATOR_SIG);
    p = put32(p, 0);
    p = put64(p, end64);
    p = put32(p, 1);                                   /* total disks */
    p = put32(p, CKPT_ZIP_EOCD_SIG);
    p = put32(p, 0);                                   /* this disk, directory disk */
    p = put16(p, (uint16_t)(w->count >= CKPT_ZIP_U16_MARK ? CKPT_ZIP_U16_MARK : w->count));
    p = put16(p, (uint16_t)(w->count >= CKPT_ZIP_U16_MARK ? CKPT_ZIP_U16_MARK : w->count));
    p = put32(put32(p, clamp32(cd_size)), clamp32(cd_offset));
    return put16(p, 0);                                /* comment length */
}

int ckpt_zip_writer_finish(ckpt_zip_writer *w)
{
    uint64_t cd_offset = w->cursor, at = w->cursor;
    uint8_t *buf = NULL, *p;
    size_t i;
    int rc = writer_usable(w);

    if (rc == 0 && (w->out || w->mem))
        rc = check_crcs(w);
    if (rc == 0)
        rc = write_descriptors(w);
    if (rc)
        return rc;
    buf = malloc(CD_BUFFER_SIZE);
    if (!buf)
        return ckpt_error_oom();
    p = buf;
    for (i = 0; rc == 0 && i <= w->count; i++) {
        size_t room = i < w->count ? MAX_ENTRY_RECORD : END_RECORDS;
        if ((size_t)(buf + CD_BUFFER_SIZE - p) < room) {
            rc = emit(w, at, buf, (size_t)(p - buf));
            at += (uint64_t)(p - buf);
            p = buf;
        }
        if (i < w->count)
            p = put_central_entry(w, &w->entries[i], p);
        else
            p = put_end_records(w, p, cd_offset, at + (uint64_t)(p - buf) - cd_offset);
    }
    if (rc == 0)
        rc = emit(w, at, buf, (size_t)(p - buf));
    at += (uint64_t)(p - buf);
    free(buf);
    if (rc == 0) {
        w->finished = 1;
        w->cursor = at;
    }
    return rc;
}

void ckpt_zip_writer_free(ckpt_zip_writer *w)
{
    if (!w)
        return;
    free(w->entries);
    ckpt_buf_dispose(&w->names);
    free(w);
}
