/* The engine side of a format's write hooks, and the executor: the format lays out the
 * file and says where each blob's bytes go (placements); the engine produces every
 * placement exactly once, in parallel, straight into its place in the output. */
#include "engine.h"
#include "node.h"
#include "../core/crc32.h"
#include "../core/storage_private.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

#define DEFAULT_MEMORY (512ull << 20)
/* A thread moves a placement in steps of at most this many bytes: the step read into its
 * buffer is still in the core's cache when it is written out, which on a few-core machine
 * makes the difference between disk speed and memory speed. */
#define MAX_CHUNK (256ull << 10)
#define MIN_CHUNK (64ull << 10)
/* A step over a transpose is longer (ckpt_writer__step), up to this: a longer buffer costs
 * more page faults of its own on first use than it saves on the input (measured on a
 * [32000, 2048] bf16 transpose, a band of 131 MB). */
#define MAX_STEP (16ull << 20)
/* Shorter runs of input bytes are not worth a system call of their own. */
#define MIN_DIRECT_RUN (64ull << 10)

typedef struct placement {
    size_t blob;
    uint64_t blob_off, len, file_off;
    ckpt_extent_encoding encoding;
    uint32_t crc;
} placement;

typedef struct run_state {
    uint64_t total, done, next_report;
    int failed;
    ckpt_error_first error;
} run_state;

struct ckpt_writer {
    const ckpt_format_vtable *format;
    const ckpt_out *out;
    const ckpt_blob_source *sources;
    const ckpt_convert_options *opts;
    const char *path;
    char *plain_name; /* path without ".zst" when the output is compressed */
    ckpt_outfile *file;
    void *state;
    placement *pl;
    size_t n_pl, cap_pl;
    ckpt_buf *notes;
    int threads;
    run_state progress; /* of the data a CKPT_FORMAT_ENCODES format reads */
    uint64_t *blob_read;  /* bytes of each blob it has read, to release them once all are */
};

const ckpt_out *ckpt_writer_out(const ckpt_writer *w)
{
    return w->out;
}

ckpt_outfile *ckpt_writer_file(ckpt_writer *w)
{
    return w->file;
}

const char *ckpt_writer_path(const ckpt_writer *w)
{
    return w->path;
}

const char *ckpt_writer_name(const ckpt_writer *w)
{
    return w->plain_name ? w->plain_name : w->path;
}

const char *ckpt_writer_temp_path(const ckpt_writer *w)
{
    return (w->format->caps & CKPT_FORMAT_BY_PATH) ? ckpt_outfile_temp_path(w->file) : NULL;
}

int ckpt_writer_threads(const ckpt_writer *w)
{
    return w->threads;
}

uint64_t ckpt_writer_memory(const ckpt_writer *w)
{
    return w->opts->memory ? w->opts->memory : DEFAULT_MEMORY;
}

const ckpt_convert_options *ckpt_writer_options(const ckpt_writer *w)
{
    return w->opts;
}

void **ckpt_writer_state(ckpt_writer *w)
{
    return &w->state;
}

void ckpt_writer_note(ckpt_writer *w, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (w->notes && ckpt_buf_puts(w->notes, line) == 0)
        ckpt_buf_putc(w->notes, '\n');
}

static int check_range(const ckpt_writer *w, size_t blob, uint64_t blob_off, uint64_t len)
{
    uint64_t end;
    size_t esize;

    if (blob >= w->out->n_blobs)
        return ckpt_error_set(CKPT_EINVALID, "%s: placement of blob %zu of %zu", w->path, blob, w->out->n_blobs);
    esize = ckpt_dtype_size(w->out->blobs[blob].dtype);
    if (CKPT_ADD_OVERFLOWS(blob_off, len, &end) || end > w->out->blobs[blob].nbytes || !esize ||
        blob_off % esize || len % esize)
        return ckpt_error_set(CKPT_EINVALID, "%s: placement [%llu, +%llu) does not fit blob %zu (%llu bytes)",
                              w->path, (unsigned long long)blob_off, (unsigned long long)len, blob,
                              (unsigned long long)w->out->blobs[blob].nbytes);
    return 0;
}

int ckpt_writer_place(ckpt_writer *w, size_t blob, uint64_t blob_off, uint64_t len, uint64_t file_off,
                      ckpt_extent_encoding encoding)
{
    int rc = check_range(w, blob, blob_off, len);

    if (rc < 0)
        return rc;
    if (encoding != CKPT_EXTENT_RAW && encoding != CKPT_EXTENT_LATIN1_UTF8)
        return ckpt_error_set(CKPT_EINVALID, "%s: unsupported placement encoding %d", w->path, (int)encoding);
    if (w->n_pl >= INT32_MAX)
        return ckpt_error_set(CKPT_EINVALID, "%s: too many placements", w->path);
    if (w->n_pl == w->cap_pl) {
        size_t cap = w->cap_pl ? w->cap_pl * 2 : 64;
        placement *pl = realloc(w->pl, cap * sizeof *pl);
        if (!pl)
            return ckpt_error_oom();
        w->pl = pl;
        w->cap_pl = cap;
    }
    w->pl[w->n_pl] = (placement){ blob, blob_off, len, file_off, encoding, 0 };
    return (int)w->n_pl++;
}

uint32_t ckpt_writer_placement_crc(const ckpt_writer *w, int placement_index)
{
    return placement_index >= 0 && (size_t)placement_index < w->n_pl ? w->pl[placement_index].crc : 0;
}

/* Each of `threads` threads' share of the budget: a quarter (at most CKPT_STORAGE_CACHE_BYTES)
 * keeps decoded chunks of compressed inputs, the rest holds a chunk of output plus its
 * latin-1 encoding (twice as large). */
static uint64_t thread_share(const ckpt_writer *w, int threads)
{
    return (w->opts->memory ? w->opts->memory : DEFAULT_MEMORY) / (uint64_t)(threads > 0 ? threads : 1);
}

static uint64_t cache_share(const ckpt_writer *w, int threads)
{
    uint64_t cache = thread_share(w, threads) / 4;

    return cache < CKPT_STORAGE_CACHE_BYTES ? cache : CKPT_STORAGE_CACHE_BYTES;
}

uint64_t ckpt_writer_cache_bytes(const ckpt_writer *w)
{
    return cache_share(w, w->threads);
}

static uint64_t chunk_size(const ckpt_writer *w, int threads)
{
    uint64_t chunk = (thread_share(w, threads) - cache_share(w, threads)) / 3;

    if (chunk > MAX_CHUNK)
        chunk = MAX_CHUNK;
    if (chunk < MIN_CHUNK)
        chunk = MIN_CHUNK;
    return chunk;
}

/* The most bytes one thread's step buffer may grow to for a placement whose input pages are
 * used up only by long steps (ckpt_writer__step): its share of the budget less the cache
 * and the encoding buffer, halved for the band a concatenation copies its parts through,
 * and at most MAX_STEP. */
static uint64_t step_cap(const ckpt_writer *w, int threads, uint64_t chunk)
{
    uint64_t left = thread_share(w, threads) - cache_share(w, threads), cap;

    cap = left > 2 * chunk ? (left - 2 * chunk) / 2 : chunk;
    return cap < MAX_STEP ? cap : MAX_STEP;
}

static uint64_t page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);

    return ps > 0 ? (uint64_t)ps : 4096;
}

uint64_t ckpt_writer__step(const ckpt_node *node, ckpt_dtype dtype, uint64_t len, uint64_t chunk, uint64_t cap,
                           uint64_t page)
{
    uint64_t es = ckpt_dtype_size(dtype), band = (uint64_t)ckpt_node__page_band(node, dtype, page) * es;

    if (band <= chunk)
        return chunk;
    if (band > len)
        band = len;
    if (band > cap)
        band = cap - cap % es;
    return band > chunk ? band : chunk;
}

/* Reads one placement's blob bytes in order. Storages whose extents are compressed or
 * text-encoded go through a cursor, which decodes each extent once however the read is
 * split; everything else is read by element range (any strides). */
typedef struct blob_reader {
    const ckpt_writer *w;
    size_t blob;
    int sequential;
    ckpt_storage_cursor cursor;
    uint8_t *raw; /* source-dtype bytes when converting through the cursor */
    size_t raw_cap;
} blob_reader;

static int needs_cursor(const ckpt_tensor *view)
{
    size_t i;
    if (!view || !view->storage || !ckpt_tensor_is_contiguous(view))
        return 0;
    for (i = 0; i < view->storage->n_extents; i++)
        if (view->storage->extents[i].encoding != CKPT_EXTENT_RAW)
            return 1;
    return 0;
}

static void blob_reader_open(blob_reader *r, const ckpt_writer *w, size_t blob, uint64_t off)
{
    const ckpt_tensor *view = ckpt_node__plain_view(w->sources[blob].node);

    memset(r, 0, sizeof *r);
    r->w = w;
    r->blob = blob;
    r->sequential = needs_cursor(view);
    if (r->sequential) {
        uint64_t first = off / ckpt_dtype_size(w->out->blobs[blob].dtype);
        ckpt_storage__cursor_open(&r->cursor, view->storage,
                                  ((uint64_t)view->offset + first) * ckpt_dtype_size(view->dtype));
    }
}

static void blob_reader_close(blob_reader *r)
{
    if (r->sequential)
        ckpt_storage__cursor_close(&r->cursor);
    free(r->raw);
}

/* Read blob bytes [off, off+len) (element aligned, len <= buffer) into buf. */
static int read_blob(const ckpt_writer *w, size_t blob, uint64_t off, uint64_t len, void *buf);

static int blob_reader_read(blob_reader *r, uint64_t off, uint64_t len, void *buf)
{
    const ckpt_tensor *view;
    ckpt_dtype dtype = r->w->out->blobs[r->blob].dtype;
    uint64_t count = len / ckpt_dtype_size(dtype), raw_len;
    int rc;

    if (!r->sequential)
        return read_blob(r->w, r->blob, off, len, buf);
    /* only plain views of storages that need a cursor are read sequentially */
    view = ckpt_node__plain_view(r->w->sources[r->blob].node);
    raw_len = count * ckpt_dtype_size(view->dtype);
    if (view->dtype == dtype)
        return ckpt_storage__cursor_read(&r->cursor, buf, len);
    if (raw_len > r->raw_cap) {
        uint8_t *raw = realloc(r->raw, (size_t)raw_len);
        if (!raw)
            return ckpt_error_oom();
        r->raw = raw;
        r->raw_cap = (size_t)raw_len;
    }
    rc = ckpt_storage__cursor_read(&r->cursor, r->raw, raw_len);
    if (rc < 0)
        return rc;
    return ckpt_dtype_convert(dtype, buf, view->dtype, r->raw, (size_t)count);
}

static int read_blob(const ckpt_writer *w, size_t blob, uint64_t off, uint64_t len, void *buf)
{
    const ckpt_blob_source *src = &w->sources[blob];
    ckpt_dtype dtype = w->out->blobs[blob].dtype;
    size_t esize = ckpt_dtype_size(dtype);
    int rc;

    if (!len)
        return 0;
    rc = ckpt_node_read(src->node, (int64_t)(off / esize), (int64_t)(len / esize), dtype, buf);
    if (rc)
        ckpt_error_prefix("writing '%s'", src->name ? src->name : "?");
    return rc;
}

static size_t latin1_to_utf8(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t i, o = 0;
    for (i = 0; i < n; i++) {
        if (src[i] < 0x80) {
            dst[o++] = src[i];
        } else {
            dst[o++] = (uint8_t)(0xC0 | (src[i] >> 6));
            dst[o++] = (uint8_t)(0x80 | (src[i] & 0x3F));
        }
    }
    return o;
}

static void report_progress(const ckpt_writer *w, run_state *rs, uint64_t n);

int ckpt_writer_read(ckpt_writer *w, size_t blob, uint64_t off, uint64_t len, void *dst)
{
    int rc = check_range(w, blob, off, len);
    uint64_t read, limit;

    if (rc < 0)
        return rc;
    if (!w->blob_read)
        return ckpt_error_set(CKPT_EINVALID, "%s: ckpt_writer_read is for formats that encode their data",
                              w->path);
    /* the format's own threads read here: each keeps to its share of the budget */
    limit = ckpt_storage__cache_limit(ckpt_writer_cache_bytes(w));
    rc = read_blob(w, blob, off, len, dst);
    ckpt_storage__cache_limit(limit);
    if (rc < 0)
        return rc;
    read = __atomic_add_fetch(&w->blob_read[blob], len, __ATOMIC_ACQ_REL);
    if (read == w->out->blobs[blob].nbytes)
        ckpt_node__release(w->sources[blob].node);
    report_progress(w, &w->progress, len);
    return 0;
}

int ckpt_writer_encoded_size(ckpt_writer *w, size_t blob, uint64_t blob_off, uint64_t len, uint64_t *out)
{
    uint64_t chunk = chunk_size(w, 1), done = 0, high = 0;
    blob_reader reader;
    size_t esize;
    uint8_t *buf;
    int rc = check_range(w, blob, blob_off, len);

    if (rc < 0)
        return rc;
    esize = ckpt_dtype_size(w->out->blobs[blob].dtype);
    chunk -= chunk % esize;
    buf = malloc(chunk);
    if (!buf)
        return ckpt_error_oom();
    blob_reader_open(&reader, w, blob, blob_off);
    while (done < len) {
        uint64_t n = len - done < chunk ? len - done : chunk, i;
        rc = blob_reader_read(&reader, blob_off + done, n, buf);
        if (rc < 0)
            break;
        for (i = 0; i < n; i++)
            high += buf[i] >> 7;
        done += n;
    }
    blob_reader_close(&reader);
    free(buf);
    if (rc < 0)
        return rc;
    *out = len + high;
    return 0;
}

static int has_failed(const run_state *rs)
{
    return __atomic_load_n(&rs->failed, __ATOMIC_RELAXED);
}

static void record_failure(run_state *rs, int rc)
{
    ckpt_error_first_record(&rs->error, rc);
    __atomic_store_n(&rs->failed, 1, __ATOMIC_RELAXED);
}

static void report_progress(const ckpt_writer *w, run_state *rs, uint64_t n)
{
    uint64_t done;

#ifdef CKPT_HAVE_OPENMP
#pragma omp atomic capture
#endif
    done = rs->done += n;
    if (!w->opts->progress)
        return;
#ifdef CKPT_HAVE_OPENMP
#pragma omp critical(ckpt_writer_progress)
#endif
    {
        if (done >= rs->next_report || done == rs->total) {
            rs->next_report = done + rs->total / 200 + 1;
            w->opts->progress(done, rs->total, w->opts->progress_payload);
        }
    }
}

/* Bytes [done, done + n) of p from where they lie in a mapped input as they are (*src set),
 * or, *src NULL, how many of them to read through the graph first: consecutive runs that
 * are not direct are gathered into one read. */
static uint64_t next_span(const ckpt_writer *w, const placement *p, uint64_t done, uint64_t n, const ckpt_file **src,
                          uint64_t *src_off)
{
    const ckpt_node *node = w->sources[p->blob].node;
    ckpt_dtype dtype = w->out->blobs[p->blob].dtype;
    uint64_t es = ckpt_dtype_size(dtype);
    int64_t first = (int64_t)((p->blob_off + done) / es), count = (int64_t)(n / es), min = (int64_t)(MIN_DIRECT_RUN / es);
    int64_t total = ckpt_node__direct_run(node, first, count, dtype, min, src, src_off);

    if (*src)
        return (uint64_t)total * es;
    while (total < count) {
        const ckpt_file *next;
        uint64_t next_off;
        int64_t run = ckpt_node__direct_run(node, first + total, count - total, dtype, min, &next, &next_off);
        if (next)
            break;
        total += run;
    }
    return (uint64_t)total * es;
}

typedef struct mapped_write {
    ckpt_outfile *out;
    uint64_t out_off;
    const uint8_t *data;
    size_t len;
    uint32_t *crc; /* NULL: the format keeps no checksum */
} mapped_write;

static int write_mapped(void *arg)
{
    mapped_write *m = arg;

    if (m->crc)
        *m->crc = ckpt_crc32(*m->crc, m->data, m->len);
    return ckpt_outfile_pwrite(m->out, m->out_off, m->data, m->len);
}

/* Input bytes written as they are: file to file in the kernel, or, where the format keeps a
 * checksum of them, from the mapping (checksummed while they are in cache), so that they are
 * copied once rather than into a buffer and out of it. */
static int write_direct(const ckpt_writer *w, const ckpt_file *src, uint64_t src_off, uint64_t out_off, uint64_t n,
                        uint32_t *crc)
{
    mapped_write m = { w->file, out_off, src->data + src_off, (size_t)n, crc };
    int rc;

    if (w->format->caps & CKPT_FORMAT_CRC)
        rc = ckpt_file_guard(src, write_mapped, &m);
    else
        rc = ckpt_outfile_copy(w->file, out_off, src, src_off, n);
    ckpt_file_release(src, src_off, n);
    return rc;
}

/* A thread's buffers: `buf` for a step of a placement (grown to `size` bytes for steps longer
 * than a chunk), `enc` for its latin-1 encoding (two chunks). */
typedef struct step_bufs {
    uint8_t *buf, *enc;
    uint64_t size, cap;
} step_bufs;

static int write_placement(const ckpt_writer *w, placement *p, step_bufs *b, uint64_t chunk, run_state *rs)
{
    uint64_t done = 0, cursor = p->file_off, es = ckpt_dtype_size(w->out->blobs[p->blob].dtype);
    uint64_t step = chunk;
    uint8_t *buf, *enc = b->enc;
    uint32_t crc = 0;
    blob_reader reader;
    int direct, rc = 0;

    /* the encoding buffer holds two chunks: latin-1 placements keep to chunks */
    if (p->encoding == CKPT_EXTENT_RAW)
        step = ckpt_writer__step(w->sources[p->blob].node, w->out->blobs[p->blob].dtype, p->len, chunk, b->cap,
                                 page_size());
    if (step > b->size) {
        uint8_t *grown = realloc(b->buf, (size_t)step);
        if (!grown)
            return ckpt_error_oom();
        b->buf = grown;
        b->size = step;
    }
    buf = b->buf;
    blob_reader_open(&reader, w, p->blob, p->blob_off);
    direct = !reader.sequential && p->encoding == CKPT_EXTENT_RAW && p->blob_off % es == 0 && p->len % es == 0;
    while (done < p->len && !has_failed(rs)) {
        uint64_t n = p->len - done < step ? p->len - done : step, size;
        const ckpt_file *src = NULL;
        uint64_t src_off = 0;
        const uint8_t *data = buf;

        if (direct)
            n = next_span(w, p, done, n, &src, &src_off);
        size = n;
        if (src) {
            rc = write_direct(w, src, src_off, cursor, n, (w->format->caps & CKPT_FORMAT_CRC) ? &crc : NULL);
        } else {
            rc = blob_reader_read(&reader, p->blob_off + done, n, buf);
            if (rc < 0)
                break;
            if (w->format->caps & CKPT_FORMAT_CRC)
                crc = ckpt_crc32(crc, buf, (size_t)n);
            if (p->encoding == CKPT_EXTENT_LATIN1_UTF8) {
                size = latin1_to_utf8(buf, (size_t)n, enc);
                data = enc;
            }
            rc = ckpt_outfile_pwrite(w->file, cursor, data, (size_t)size);
        }
        if (rc < 0)
            break;
        cursor += size;
        done += n;
        report_progress(w, rs, n);
    }
    blob_reader_close(&reader);
    if (rc >= 0 && p->blob_off + p->len == w->out->blobs[p->blob].nbytes)
        ckpt_node__release(w->sources[p->blob].node);
    p->crc = crc;
    return rc < 0 ? rc : 0;
}

static int by_size_desc(const void *a, const void *b)
{
    const placement *x = *(placement *const *)a, *y = *(placement *const *)b;
    return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

static int execute(ckpt_writer *w)
{
    run_state rs;
    placement **order;
    int threads = w->threads;
    uint64_t chunk;
    size_t i;
    long n;

    memset(&rs, 0, sizeof rs);
    order = malloc((w->n_pl ? w->n_pl : 1) * sizeof *order);
    if (!order)
        return ckpt_error_oom();
    for (i = 0; i < w->n_pl; i++) {
        order[i] = &w->pl[i];
        rs.total += w->pl[i].len;
    }
    /* largest first, so the last thread to finish is not stuck with a big tensor */
    qsort(order, w->n_pl, sizeof *order, by_size_desc);
    chunk = chunk_size(w, threads);
    n = (long)w->n_pl;
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
        step_bufs b = { malloc(chunk), malloc(2 * chunk), chunk, step_cap(w, threads, chunk) };
        uint64_t limit = ckpt_storage__cache_limit(ckpt_writer_cache_bytes(w));
        long k;

        if (!b.buf || !b.enc) {
            ckpt_error_oom();
            record_failure(&rs, CKPT_ENOMEM);
        }
#ifdef CKPT_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (k = 0; k < n; k++) {
            uint64_t esize = ckpt_dtype_size(w->out->blobs[order[k]->blob].dtype);
            int rc;
            if (has_failed(&rs))
                continue;
            rc = write_placement(w, order[k], &b, chunk - chunk % esize, &rs);
            if (rc < 0)
                record_failure(&rs, rc);
        }
        free(b.buf);
        free(b.enc);
        ckpt_storage__cache_limit(limit);
    }
    free(order);
    if (rs.failed)
        return ckpt_error_first_raise(&rs.error);
    return 0;
}

int ckpt_writer__run(const ckpt_format_vtable *format, const ckpt_out *out, const ckpt_blob_source *sources,
                     const char *path, const ckpt_convert_options *opts, ckpt_convert_report *report)
{
    ckpt_writer w;
    ckpt_zstd_stats zstd = { 0, 0, 0 };
    struct stat st;
    uint64_t limit;
    size_t i;
    int rc;

    memset(&w, 0, sizeof w);
    w.format = format;
    w.out = out;
    w.sources = sources;
    w.opts = opts;
    w.path = path;
    w.notes = report ? &report->notes : NULL;
#ifdef CKPT_HAVE_OPENMP
    w.threads = opts->threads > 0 ? opts->threads : omp_get_max_threads();
#else
    w.threads = 1;
#endif
    if (format->caps & CKPT_FORMAT_ENCODES) {
        if (!(w.blob_read = calloc(out->n_blobs ? out->n_blobs : 1, sizeof *w.blob_read)))
            return ckpt_error_oom();
        for (i = 0; i < out->n_blobs; i++)
            w.progress.total += out->blobs[i].nbytes;
    }
    rc = ckpt_outfile_open(&w.file, path,
                           (opts->overwrite ? CKPT_OUTFILE_OVERWRITE : 0) |
                               ((format->caps & CKPT_FORMAT_BY_PATH) ? CKPT_OUTFILE_NAMED : 0));
    if (rc < 0) {
        free(w.blob_read);
        return rc;
    }
    if (w.notes && *ckpt_outfile_notes(w.file))
        ckpt_buf_puts(w.notes, ckpt_outfile_notes(w.file));
    if (ckpt_outfile_is_zstd(w.file)) {
        ckpt_outfile_set_zstd(w.file, opts->compress_level, w.threads, &zstd);
        if (!(w.plain_name = strndup(path, strlen(path) - 4))) {
            ckpt_outfile_abort(w.file);
            free(w.blob_read);
            return ckpt_error_oom();
        }
    }
    /* what the format reads on this thread, laying out the file or finishing it */
    limit = ckpt_storage__cache_limit(ckpt_writer_cache_bytes(&w));
    rc = format->write_begin(&w);
    if (rc >= 0)
        rc = execute(&w);
    if (rc >= 0 && format->write_finish)
        rc = format->write_finish(&w);
    ckpt_storage__cache_limit(limit);
    if (format->write_free)
        format->write_free(&w);
    free(w.pl);
    free(w.blob_read);
    free(w.plain_name);
    if (rc < 0) {
        ckpt_outfile_abort(w.file);
        return rc;
    }
    rc = ckpt_outfile_commit(w.file);
    if (rc < 0)
        return rc;
    if (w.notes && zstd.zst_bytes)
        ckpt_buf_printf(w.notes, "zstd level %d: %.1f MB -> %.1f MB (x%.2f) in %.2f s (%.0f MB/s)\n",
                        opts->compress_level ? opts->compress_level : ZSTD_CLEVEL_DEFAULT,
                        (double)zstd.raw_bytes / 1e6, (double)zstd.zst_bytes / 1e6,
                        (double)zstd.raw_bytes / (double)zstd.zst_bytes, zstd.seconds,
                        zstd.seconds > 0 ? (double)zstd.raw_bytes / 1e6 / zstd.seconds : 0.0);
    if (report && stat(path, &st) == 0)
        report->bytes_written = (uint64_t)st.st_size;
    return 0;
}
