/* Storages: the logical bytes of a storage are its decoded extents one after another. An
 * extent is a run of a mapped file, stored as is, as a raw deflate stream (zip method 8),
 * as the UTF-8 text of a latin-1 string (pickle protocol 2 writes bytes that way), as a
 * repeated pattern (HDF5's fill value), or as an HDF5 chunk: compressed (zlib, zstd),
 * shuffled, checksummed. Chunks are decoded whole and kept in a per-thread cache. */
#include "storage_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* zlib counts in unsigned int: hand it at most this much at a time. */
#define Z_PIECE ((uint64_t)1 << 30)
/* Inflated bytes that are skipped over land in a buffer of this size. */
#define SKIP_BUF 16384

static const char *storage_key(const ckpt_storage *s)
{
    return s->key ? s->key : "(unnamed)";
}

static const char *extent_path(const ckpt_extent *e)
{
    return e->file && e->file->path ? e->file->path : "(no file)";
}

/* Bytes swapped as one unit: the element size, or half of it for complex numbers (torch
 * swaps real and imaginary parts separately); 1 when nothing is swapped; 0 when the
 * storage is marked byteswapped but has no element type. */
static size_t swap_unit(const ckpt_storage *s)
{
    size_t size;

    if (!s->byteswap)
        return 1;
    size = ckpt_dtype_size(s->dtype);
    if (s->dtype == CKPT_DTYPE_C64 || s->dtype == CKPT_DTYPE_C128)
        size /= 2;
    return size;
}

static void byteswap(unsigned char *p, uint64_t len, size_t unit)
{
    uint64_t i;

    switch (unit) {
    case 2:
        for (i = 0; i + 2 <= len; i += 2) {
            uint16_t v;
            memcpy(&v, p + i, 2);
            v = __builtin_bswap16(v);
            memcpy(p + i, &v, 2);
        }
        break;
    case 4:
        for (i = 0; i + 4 <= len; i += 4) {
            uint32_t v;
            memcpy(&v, p + i, 4);
            v = __builtin_bswap32(v);
            memcpy(p + i, &v, 4);
        }
        break;
    case 8:
        for (i = 0; i + 8 <= len; i += 8) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            v = __builtin_bswap64(v);
            memcpy(p + i, &v, 8);
        }
        break;
    default:
        break;
    }
}

/* Extents that cannot be read in pieces: decoded whole, then copied from. */
static int decoded_whole(const ckpt_extent *e)
{
    return e->encoding == CKPT_EXTENT_ZLIB || e->encoding == CKPT_EXTENT_ZSTD || e->shuffle > 1 || e->flags;
}

/* The stored bytes of an extent, after checking that they lie inside its file and that its
 * encoding, sizes and flags go together. */
static int extent_data(const ckpt_storage *s, const ckpt_extent *e, const uint8_t **out)
{
    uint64_t end, payload = e->stored_size;

    *out = NULL;
    if (e->encoding == CKPT_EXTENT_FILL && e->stored_size == 0 && !e->shuffle && !e->flags)
        return 0;
    if (!e->file)
        return ckpt_error_set(CKPT_EFORMAT, "storage '%s': an extent has no file", storage_key(s));
    if (CKPT_ADD_OVERFLOWS(e->offset, e->stored_size, &end) || end > e->file->size)
        return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': %llu stored bytes at offset %llu run past the end of the file (%llu bytes)",
                              extent_path(e), storage_key(s), (unsigned long long)e->stored_size,
                              (unsigned long long)e->offset, (unsigned long long)e->file->size);
    if (e->flags & ~CKPT_EXTENT_FLETCHER32)
        return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': unknown extent flags 0x%x", extent_path(e),
                              storage_key(s), (unsigned)e->flags);
    if (e->flags & CKPT_EXTENT_FLETCHER32) {
        if (payload < 4)
            return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': a checksummed extent at offset %llu holds %llu bytes, "
                                  "less than its checksum",
                                  extent_path(e), storage_key(s), (unsigned long long)e->offset,
                                  (unsigned long long)payload);
        payload -= 4;
    }
    if (decoded_whole(e) && e->size > SIZE_MAX)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: storage '%s': an extent of %llu bytes is too large to decode here",
                              extent_path(e), storage_key(s), (unsigned long long)e->size);
    switch (e->encoding) {
    case CKPT_EXTENT_RAW:
        if (payload != e->size)
            return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': a raw extent stores %llu bytes for %llu",
                                  extent_path(e), storage_key(s), (unsigned long long)payload,
                                  (unsigned long long)e->size);
        break;
    case CKPT_EXTENT_FILL:
        if (e->shuffle > 1 || e->flags || e->size % e->stored_size)
            return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': a fill of %llu bytes by a %llu-byte pattern (shuffle %u, flags 0x%x)",
                                  extent_path(e), storage_key(s), (unsigned long long)e->size,
                                  (unsigned long long)e->stored_size, (unsigned)e->shuffle, (unsigned)e->flags);
        break;
    case CKPT_EXTENT_DEFLATE:
    case CKPT_EXTENT_LATIN1_UTF8:
    case CKPT_EXTENT_ZLIB:
    case CKPT_EXTENT_ZSTD:
        break;
    default:
        return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': unknown extent encoding %d", extent_path(e),
                              storage_key(s), (int)e->encoding);
    }
    if (e->encoding == CKPT_EXTENT_LATIN1_UTF8 && (e->shuffle > 1 || e->flags))
        return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': latin-1 text cannot be shuffled or checksummed",
                              extent_path(e), storage_key(s));
    *out = e->stored_size ? e->file->data + e->offset : NULL;
    return 0;
}

/* ---- deflate ---- */

static int inflate_error(const ckpt_storage *s, const ckpt_extent *e, const char *what)
{
    return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': deflate stream at offset %llu %s", extent_path(e),
                          storage_key(s), (unsigned long long)e->offset, what);
}

/* One inflate call into [out, out+room); *produced says how much it wrote. */
static int inflate_step(ckpt_storage_cursor *c, const ckpt_extent *e, const uint8_t *data, unsigned char *out,
                        uInt room, uint64_t *produced)
{
    int zr;

    if (c->z.avail_in == 0 && c->in_pos < e->stored_size) {
        uint64_t feed = e->stored_size - c->in_pos;
        c->z.next_in = data + c->in_pos;
        c->z.avail_in = (uInt)(feed < Z_PIECE ? feed : Z_PIECE);
        c->in_pos += c->z.avail_in;
    }
    c->z.next_out = out;
    c->z.avail_out = room;
    zr = inflate(&c->z, Z_NO_FLUSH);
    *produced = room - c->z.avail_out;
    if (zr == Z_STREAM_END) {
        c->z_done = 1;
        return 0;
    }
    if (zr == Z_MEM_ERROR)
        return ckpt_error_oom();
    if (zr == Z_BUF_ERROR)
        return inflate_error(c->s, e, "is truncated");
    if (zr != Z_OK)
        return inflate_error(c->s, e, c->z.msg ? c->z.msg : "is corrupt");
    return 0;
}

/* The next n inflated bytes into out, or skipped when out is NULL. */
static int inflate_into(ckpt_storage_cursor *c, const ckpt_extent *e, const uint8_t *data, unsigned char *out,
                        uint64_t n)
{
    unsigned char skip[SKIP_BUF];
    uint64_t produced;
    int rc;

    while (n > 0) {
        uint64_t room = out ? (n < Z_PIECE ? n : Z_PIECE) : (n < SKIP_BUF ? n : SKIP_BUF);
        if (c->z_done) {
            char what[96];
            snprintf(what, sizeof what, "ends before %llu bytes", (unsigned long long)e->size);
            return inflate_error(c->s, e, what);
        }
        rc = inflate_step(c, e, data, out ? out : skip, (uInt)room, &produced);
        if (rc)
            return rc;
        n -= produced;
        if (out)
            out += produced;
    }
    return 0;
}

static int inflate_enter(ckpt_storage_cursor *c, const ckpt_extent *e, const uint8_t *data)
{
    memset(&c->z, 0, sizeof c->z);
    if (inflateInit2(&c->z, -15) != Z_OK)
        return ckpt_error_oom();
    c->z_active = 1;
    c->z_done = 0;
    c->in_pos = 0;
    return inflate_into(c, e, data, NULL, c->local);
}

/* After the last byte of the extent: the stream must end there. */
static int inflate_finish(ckpt_storage_cursor *c, const ckpt_extent *e, const uint8_t *data)
{
    unsigned char extra;
    uint64_t produced, before;
    int rc;

    while (!c->z_done) {
        before = c->in_pos - c->z.avail_in;
        rc = inflate_step(c, e, data, &extra, 1, &produced);
        if (rc)
            return rc;
        if (produced) {
            char what[96];
            snprintf(what, sizeof what, "inflates to more than %llu bytes", (unsigned long long)e->size);
            return inflate_error(c->s, e, what);
        }
        if (!c->z_done && c->in_pos - c->z.avail_in == before)
            return inflate_error(c->s, e, "makes no progress");
    }
    return 0;
}

/* ---- latin-1 text in UTF-8 ---- */

/* The next n decoded bytes into out, or skipped when out is NULL. */
static int latin1_into(ckpt_storage_cursor *c, const ckpt_extent *e, const uint8_t *data, unsigned char *out,
                       uint64_t n)
{
    uint64_t i = c->in_pos, end = e->stored_size, k;

    for (k = 0; k < n; k++) {
        unsigned v;
        if (i >= end)
            return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': latin-1 text at offset %llu ends before %llu bytes",
                                  extent_path(e), storage_key(c->s), (unsigned long long)e->offset,
                                  (unsigned long long)e->size);
        v = data[i];
        if (v < 0x80) {
            i++;
        } else if ((v == 0xC2 || v == 0xC3) && i + 1 < end && (data[i + 1] & 0xC0) == 0x80) {
            v = ((v & 0x03u) << 6) | (data[i + 1] & 0x3Fu);
            i += 2;
        } else {
            return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': byte at offset %llu is not a latin-1 character in UTF-8",
                                  extent_path(e), storage_key(c->s), (unsigned long long)(e->offset + i));
        }
        if (out)
            out[k] = (unsigned char)v;
    }
    c->in_pos = i;
    return 0;
}

/* ---- repeated patterns ---- */

/* n bytes of the fill from decoded offset `local` on. */
static void fill_into(const ckpt_extent *e, const uint8_t *pattern, uint64_t local, unsigned char *out, uint64_t n)
{
    uint64_t k = e->stored_size, at;

    if (k == 0) {
        memset(out, 0, (size_t)n);
        return;
    }
    at = local % k;
    while (n > 0) {
        uint64_t take = k - at < n ? k - at : n;
        memcpy(out, pattern + at, (size_t)take);
        out += take;
        n -= take;
        at = 0;
    }
}

/* ---- cursor ---- */

static void cursor_next_extent(ckpt_storage_cursor *c)
{
    if (c->z_active)
        inflateEnd(&c->z);
    c->z_active = 0;
    c->z_done = 0;
    c->entered = 0;
    c->in_pos = 0;
    c->local = 0;
    c->extent++;
}

void ckpt_storage__cursor_open(ckpt_storage_cursor *c, const ckpt_storage *s, uint64_t off)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->pos = off;
    c->local = off;
    while (c->extent < s->n_extents && c->local >= s->extents[c->extent].size) {
        c->local -= s->extents[c->extent].size;
        c->extent++;
    }
}

void ckpt_storage__cursor_close(ckpt_storage_cursor *c)
{
    if (c->z_active)
        inflateEnd(&c->z);
    c->z_active = 0;
}

/* What a decoding step needs, for running it under the file's SIGBUS guard: the encoded
 * bytes are read through the mapping. */
typedef struct decode_args {
    ckpt_storage_cursor *c;
    const ckpt_extent *e;
    const uint8_t *data;
    unsigned char *out;
    uint64_t take;
} decode_args;

static int decode(void *arg)
{
    decode_args *a = arg;
    ckpt_storage_cursor *c = a->c;
    int rc;

    if (a->e->encoding == CKPT_EXTENT_DEFLATE) {
        if (!c->entered) {
            c->entered = 1;
            if ((rc = inflate_enter(c, a->e, a->data)) != 0)
                return rc;
        }
        return inflate_into(c, a->e, a->data, a->out, a->take);
    }
    if (!c->entered) {
        c->entered = 1;
        c->in_pos = 0;
        if ((rc = latin1_into(c, a->e, a->data, NULL, c->local)) != 0)
            return rc;
    }
    return latin1_into(c, a->e, a->data, a->out, a->take);
}

static int fill_copy(void *arg)
{
    decode_args *a = arg;

    fill_into(a->e, a->data, a->c->local, a->out, a->take);
    return 0;
}

static int decode_finish(void *arg)
{
    decode_args *a = arg;
    return inflate_finish(a->c, a->e, a->data);
}

/* `take` bytes of the current extent, from c->local on. */
static int extent_read(ckpt_storage_cursor *c, const ckpt_extent *e, unsigned char *out, uint64_t take)
{
    decode_args a = { c, e, NULL, out, take };
    int rc = extent_data(c->s, e, &a.data);

    if (rc)
        return rc;
    if (decoded_whole(e))
        return ckpt_storage__whole_read(c->s, c->extent, e, a.data, c->local, out, take);
    if (e->encoding == CKPT_EXTENT_RAW)
        return ckpt_file_read(e->file, e->offset + c->local, out, (size_t)take);
    if (e->encoding == CKPT_EXTENT_FILL && e->stored_size)
        return ckpt_file_guard(e->file, fill_copy, &a);
    if (e->encoding == CKPT_EXTENT_FILL) {
        fill_into(e, NULL, c->local, out, take);
        return 0;
    }
    return ckpt_file_guard(e->file, decode, &a);
}

/* The extent was read to its end: its encoded form must end there too. */
static int extent_finish(ckpt_storage_cursor *c, const ckpt_extent *e)
{
    decode_args a = { c, e, NULL, NULL, 0 };
    int rc;

    if (!c->entered || e->encoding == CKPT_EXTENT_RAW || e->encoding == CKPT_EXTENT_FILL || decoded_whole(e))
        return 0;
    if ((rc = extent_data(c->s, e, &a.data)) != 0)
        return rc;
    if (e->encoding == CKPT_EXTENT_DEFLATE)
        return ckpt_file_guard(e->file, decode_finish, &a);
    if (c->in_pos != e->stored_size)
        return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': latin-1 text at offset %llu holds more than %llu bytes",
                              extent_path(e), storage_key(c->s), (unsigned long long)e->offset,
                              (unsigned long long)e->size);
    return 0;
}

int ckpt_storage__cursor_read(ckpt_storage_cursor *c, void *dst, uint64_t len)
{
    const ckpt_storage *s = c->s;
    size_t unit = swap_unit(s);
    unsigned char *out = dst;
    uint64_t end;
    int rc;

    if (s->tiling) {
        if ((rc = ckpt_storage__tiled_read(s, c->pos, len, dst)) == 0)
            c->pos += len;
        return rc;
    }
    if (unit == 0)
        return ckpt_error_set(CKPT_EFORMAT, "storage '%s' is byteswapped but has no element type", storage_key(s));
    if (c->pos % unit || len % unit)
        return ckpt_error_set(CKPT_EINVALID, "storage '%s': %llu bytes at %llu are not whole %zu-byte elements",
                              storage_key(s), (unsigned long long)len, (unsigned long long)c->pos, unit);
    if (CKPT_ADD_OVERFLOWS(c->pos, len, &end) || end > s->nbytes)
        return ckpt_error_set(CKPT_EFORMAT, "storage '%s': bytes [%llu, +%llu) are past its end (%llu bytes)",
                              storage_key(s), (unsigned long long)c->pos, (unsigned long long)len,
                              (unsigned long long)s->nbytes);
    while (len > 0) {
        const ckpt_extent *e;
        uint64_t take;

        if (c->extent >= s->n_extents)
            return ckpt_error_set(CKPT_EFORMAT, "storage '%s': its extents hold fewer than %llu bytes",
                                  storage_key(s), (unsigned long long)end);
        e = &s->extents[c->extent];
        take = e->size - c->local < len ? e->size - c->local : len;
        if (take && (rc = extent_read(c, e, out, take)) != 0)
            return rc;
        out += take;
        len -= take;
        c->pos += take;
        c->local += take;
        if (c->local == e->size) {
            if ((rc = extent_finish(c, e)) != 0)
                return rc;
            cursor_next_extent(c);
        }
    }
    byteswap(dst, (uint64_t)(out - (unsigned char *)dst), unit);
    return 0;
}

int ckpt_storage_read(const ckpt_storage *s, uint64_t off, uint64_t len, void *dst)
{
    ckpt_storage_cursor c;
    int rc;

    if (!s || (len && !dst))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_storage_read: no storage or no destination");
    ckpt_storage__cursor_open(&c, s, off);
    rc = ckpt_storage__cursor_read(&c, dst, len);
    ckpt_storage__cursor_close(&c);
    return rc;
}

const void *ckpt_storage__map(const ckpt_storage *s, uint64_t off, uint64_t len, const ckpt_file **file,
                              uint64_t *file_off)
{
    const ckpt_extent *e;
    uint64_t end, fend;
    size_t i = 0;

    if (!s || len == 0 || swap_unit(s) != 1 || CKPT_ADD_OVERFLOWS(off, len, &end) || end > s->nbytes)
        return NULL;
    if (s->tiling)
        return ckpt_storage__tiled_map(s, off, len, file, file_off);
    while (i < s->n_extents && off >= s->extents[i].size) {
        off -= s->extents[i].size;
        i++;
    }
    if (i == s->n_extents)
        return NULL;
    e = &s->extents[i];
    if (e->encoding != CKPT_EXTENT_RAW || decoded_whole(e) || e->stored_size != e->size || len > e->size - off || !e->file ||
        !e->file->data || CKPT_ADD_OVERFLOWS(e->offset, e->size, &fend) || fend > e->file->size)
        return NULL;
    if (file)
        *file = e->file;
    if (file_off)
        *file_off = e->offset + off;
    return e->file->data + e->offset + off;
}

void ckpt_storage__release_bytes(const ckpt_storage *s, uint64_t lo, uint64_t hi)
{
    uint64_t at = 0;
    size_t i;

    if (s->tiling) {
        ckpt_storage__tiled_release(s, lo, hi);
        return;
    }
    for (i = 0; i < s->n_extents; i++) {
        const ckpt_extent *e = &s->extents[i];
        uint64_t a = lo > at ? lo : at, b = hi < at + e->size ? hi : at + e->size;
        if (a < b && e->encoding == CKPT_EXTENT_RAW && !decoded_whole(e) && e->file)
            ckpt_file_release(e->file, e->offset + (a - at), b - a);
        at += e->size;
    }
}

const void *ckpt_storage_map(const ckpt_storage *s, uint64_t off, uint64_t len)
{
    return ckpt_storage__map(s, off, len, NULL, NULL);
}

void ckpt_storage__release(const ckpt_file *f, uint64_t start, uint64_t from, uint64_t to)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = ps > 0 ? (uint64_t)ps : 4096, lo = from / page * page;

    if (lo < start)
        lo = start;
    if (to > lo)
        ckpt_file_release(f, lo, to - lo);
}
