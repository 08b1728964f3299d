/* Extents decoded whole (HDF5 chunks: zlib or zstd, shuffled, checksummed), and the
 * per-thread cache that keeps them decoded while a read crosses them row after row. */
#include "storage_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <libdeflate.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

static const char *storage_key(const ckpt_storage *s)
{
    return s->key ? s->key : "(unnamed)";
}

static const char *extent_path(const ckpt_extent *e)
{
    return e->file && e->file->path ? e->file->path : "(no file)";
}

/* HDF5's Fletcher-32: the bytes read as big-endian 16-bit words (an odd last byte as the
 * high half of one), both sums folded every 360 words, as the library computes it. */
static uint32_t fletcher32(const uint8_t *p, uint64_t n)
{
    uint64_t words = n / 2;
    uint32_t a = 0, b = 0;

    while (words > 0) {
        uint64_t k = words < 360 ? words : 360;
        words -= k;
        while (k--) {
            a += (uint32_t)p[0] << 8 | p[1];
            b += a;
            p += 2;
        }
        a = (a & 0xffff) + (a >> 16);
        b = (b & 0xffff) + (b >> 16);
    }
    if (n & 1) {
        a += (uint32_t)p[0] << 8;
        b += a;
        a = (a & 0xffff) + (a >> 16);
        b = (b & 0xffff) + (b >> 16);
    }
    a = (a & 0xffff) + (a >> 16);
    b = (b & 0xffff) + (b >> 16);
    return b << 16 | a;
}

/* Byte k of element i was stored at k * count + i; bytes past the last whole element stay. */
static void unshuffle(const unsigned char *in, unsigned char *out, uint64_t n, size_t es)
{
    uint64_t count = n / es, i;
    size_t k;

    for (k = 0; k < es; k++) {
        const unsigned char *plane = in + k * count;
        for (i = 0; i < count; i++)
            out[i * es + k] = plane[i];
    }
    memcpy(out + count * es, in + count * es, (size_t)(n - count * es));
}

static _Thread_local uint64_t whole_decodes;

uint64_t ckpt_storage__decodes(void)
{
    return whole_decodes;
}

/* One whole decode, run under the file's SIGBUS guard: what it allocates lives here. */
typedef struct whole_args {
    const ckpt_storage *s;
    const ckpt_extent *e;
    const uint8_t *data;
    unsigned char *out;  /* e->size bytes */
    unsigned char *tmp;  /* e->size bytes, for a shuffled extent */
    struct libdeflate_decompressor *inflater;
    ZSTD_DCtx *zstd;
} whole_args;

static int whole_error(const whole_args *a, const char *what)
{
    return ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s': chunk of %llu bytes at offset %llu %s", extent_path(a->e),
                          storage_key(a->s), (unsigned long long)a->e->stored_size, (unsigned long long)a->e->offset,
                          what);
}

static int decode_whole(void *arg)
{
    whole_args *a = arg;
    const ckpt_extent *e = a->e;
    uint64_t payload = e->stored_size - (e->flags & CKPT_EXTENT_FLETCHER32 ? 4 : 0);
    unsigned char *dst = e->shuffle > 1 ? a->tmp : a->out;
    enum libdeflate_result lr;
    size_t got;

    if (e->flags & CKPT_EXTENT_FLETCHER32) {
        const uint8_t *t = a->data + payload;
        uint32_t want = fletcher32(a->data, payload);
        uint32_t stored = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
        /* HDF5 1.6.0-1.6.2 wrote the checksum with the bytes of each half swapped; HDF5 still
         * reads those files, so do we */
        uint32_t swapped = (want >> 8 & 0xff) << 24 | (want & 0xff) << 16 | (want >> 24) << 8 | (want >> 16 & 0xff);
        if (stored != want && stored != swapped)
            return whole_error(a, "fails its Fletcher-32 checksum");
    }
    switch (e->encoding) {
    case CKPT_EXTENT_RAW:
        memcpy(dst, a->data, (size_t)e->size);
        break;
    case CKPT_EXTENT_DEFLATE:
    case CKPT_EXTENT_ZLIB:
        if (!(a->inflater = libdeflate_alloc_decompressor()))
            return ckpt_error_oom();
        lr = e->encoding == CKPT_EXTENT_ZLIB
                 ? libdeflate_zlib_decompress(a->inflater, a->data, (size_t)payload, dst, (size_t)e->size, NULL)
                 : libdeflate_deflate_decompress(a->inflater, a->data, (size_t)payload, dst, (size_t)e->size, NULL);
        if (lr == LIBDEFLATE_SHORT_OUTPUT)
            return whole_error(a, "inflates to fewer bytes than the chunk holds");
        if (lr == LIBDEFLATE_INSUFFICIENT_SPACE)
            return whole_error(a, "inflates to more bytes than the chunk holds");
        if (lr != LIBDEFLATE_SUCCESS)
            return whole_error(a, "is not a valid deflate stream");
        break;
    case CKPT_EXTENT_ZSTD:
        if (!(a->zstd = ZSTD_createDCtx()))
            return ckpt_error_oom();
        got = ZSTD_decompressDCtx(a->zstd, dst, (size_t)e->size, a->data, (size_t)payload);
        if (ZSTD_isError(got)) {
            char what[160];
            snprintf(what, sizeof what, "is not a valid zstd frame: %s", ZSTD_getErrorName(got));
            return whole_error(a, what);
        }
        if (got != e->size)
            return whole_error(a, "decompresses to fewer bytes than the chunk holds");
        break;
    default:
        return whole_error(a, "has an encoding that cannot be decoded whole");
    }
    if (e->shuffle > 1)
        unshuffle(a->tmp, a->out, e->size, e->shuffle);
    whole_decodes++;
    return 0;
}

/* The decoded extents a thread keeps: the most recently used, up to its limit together (one
 * larger extent is kept alone: it was decoded whole anyway). Keys are storage ids, which are
 * never reused, so an entry of a checkpoint closed since is never found again, only evicted. */
#define CACHE_SLOTS 256

typedef struct cached {
    uint64_t id;
    size_t extent;
    uint64_t used; /* clock of the last use */
    uint64_t len;
    unsigned char *data;
} cached;

typedef struct chunk_cache {
    cached slot[CACHE_SLOTS];
    size_t n;
    uint64_t bytes, clock;
} chunk_cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_ready;
/* CKPT_STORAGE_CACHE_BYTES unless a writer gave this thread a share of its memory budget. */
static _Thread_local uint64_t cache_limit = CKPT_STORAGE_CACHE_BYTES;
/* The most any thread's cache has held since the last ckpt_storage__cache_peak_reset. */
static uint64_t cache_peak;

static void cache_free(void *p)
{
    chunk_cache *c = p;
    size_t i;

    for (i = 0; i < c->n; i++)
        free(c->slot[i].data);
    free(c);
}

static void cache_init(void)
{
    cache_ready = pthread_key_create(&cache_key, cache_free) == 0;
}

/* This thread's cache; NULL when there cannot be one (then nothing is kept). */
static chunk_cache *cache_get(void)
{
    chunk_cache *c;

    pthread_once(&cache_once, cache_init);
    if (!cache_ready)
        return NULL;
    if ((c = pthread_getspecific(cache_key)) != NULL)
        return c;
    if (!(c = calloc(1, sizeof *c)))
        return NULL;
    if (pthread_setspecific(cache_key, c) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

static const unsigned char *cache_find(chunk_cache *c, uint64_t id, size_t extent)
{
    size_t i;

    for (i = c->n; i-- > 0;)
        if (c->slot[i].id == id && c->slot[i].extent == extent) {
            c->slot[i].used = ++c->clock;
            return c->slot[i].data;
        }
    return NULL;
}

/* Evict the least recently used entries until `len` more bytes fit the limit. */
static void cache_evict(chunk_cache *c, uint64_t len)
{
    while (c->n > 0 && (c->n == CACHE_SLOTS || c->bytes + len > cache_limit)) {
        size_t i, lru = 0;
        for (i = 1; i < c->n; i++)
            if (c->slot[i].used < c->slot[lru].used)
                lru = i;
        c->bytes -= c->slot[lru].len;
        free(c->slot[lru].data);
        c->slot[lru] = c->slot[--c->n];
    }
}

/* Keep `data` (taking it), evicting the least recently used entries to make room. */
static void cache_put(chunk_cache *c, uint64_t id, size_t extent, unsigned char *data, uint64_t len)
{
    uint64_t peak = __atomic_load_n(&cache_peak, __ATOMIC_RELAXED);

    cache_evict(c, len);
    c->slot[c->n++] = (cached){ id, extent, ++c->clock, len, data };
    c->bytes += len;
    while (c->bytes > peak &&
           !__atomic_compare_exchange_n(&cache_peak, &peak, c->bytes, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

uint64_t ckpt_storage__cache_limit(uint64_t bytes)
{
    uint64_t old = cache_limit;
    chunk_cache *c;

    cache_limit = bytes;
    pthread_once(&cache_once, cache_init);
    if (bytes < old && cache_ready && (c = pthread_getspecific(cache_key)) != NULL)
        cache_evict(c, 0);
    return old;
}

uint64_t ckpt_storage__cache_peak(void)
{
    return __atomic_load_n(&cache_peak, __ATOMIC_RELAXED);
}

void ckpt_storage__cache_peak_reset(void)
{
    __atomic_store_n(&cache_peak, 0, __ATOMIC_RELAXED);
}

/* `take` decoded bytes from `local` on of extent `index`, decoding it (once per thread while
 * it stays cached). */
int ckpt_storage__whole_read(const ckpt_storage *s, size_t index, const ckpt_extent *e, const uint8_t *data,
                             uint64_t local, unsigned char *out, uint64_t take)
{
    chunk_cache *cache = s->id ? cache_get() : NULL;
    const unsigned char *hit = cache ? cache_find(cache, s->id, index) : NULL;
    whole_args a = { s, e, data, NULL, NULL, NULL, NULL };
    int rc;

    if (hit) {
        memcpy(out, hit + local, (size_t)take);
        return 0;
    }
    if (!(a.out = malloc(e->size ? (size_t)e->size : 1)) ||
        (e->shuffle > 1 && !(a.tmp = malloc(e->size ? (size_t)e->size : 1)))) {
        rc = ckpt_error_oom();
    } else {
        rc = ckpt_file_guard(e->file, decode_whole, &a);
    }
    libdeflate_free_decompressor(a.inflater);
    ZSTD_freeDCtx(a.zstd);
    free(a.tmp);
    if (rc == 0) {
        /* the stored bytes are used up (decoded, cached): their mapped pages can go; a chunk
         * decoded again later comes back from the page cache */
        if (e->file && e->stored_size)
            ckpt_file_release(e->file, e->offset, e->stored_size);
        memcpy(out, a.out + local, (size_t)take);
        if (cache) {
            cache_put(cache, s->id, index, a.out, e->size);
            a.out = NULL;
        }
    }
    free(a.out);
    return rc;
}

