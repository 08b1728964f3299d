/* Reading strided views: elements gathered run by run, or, for views that transpose,
 * copied through cache-sized blocks. Input bytes come through ckpt_file_read (pread for long
 * runs, a guarded copy for short ones) or ckpt_storage_read into bounded buffers, or are
 * copied from the mapping under the file's SIGBUS guard; the pages a read touched are handed
 * back every few MiB, so that neither buffers nor mapped pages grow with the tensor. */
#include "storage_private.h"
#include "tensor_private.h"
#include "transpose.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Strided reads from a file gather at most this many bytes at a time into a tile... */
#define TILE_BYTES ((uint64_t)2 << 20)
/* ...and hand the pages they read back once the bytes read since the last time span this
 * much of the file: the most file-backed memory one reader holds. */
#define RELEASE_SPAN ((uint64_t)8 << 20)
/* Converted strided reads, and the transposed blocks, go through this many elements. */
#define GATHER_ELEMS 65536
/* A strided view of a storage that cannot be read in pieces (compressed or encoded) is
 * decoded whole when its span is at most this large, and read run by run (slow, since the
 * decoding starts over, but in bounded memory) when it is larger. */
#define SPAN_MAX ((uint64_t)64 << 20)
/* Transposed views are copied TILE_ROWS output rows by up to BAND_LINES columns at a time:
 * a block that stays in cache, filled from short runs of many source lines and copied out
 * in long runs. Larger blocks measured no faster. */
#define TILE_ROWS 64
#define BAND_LINES (GATHER_ELEMS / TILE_ROWS)
/* A band of a transposed view read from a file holds at least this many source lines. */
#define MIN_BAND_LINES 16

/* ---- strided views: where the elements come from ---- */

/* A strided view's elements, by position (element offset from the view's offset), come
 * from `base`, the view's span in memory, or else from the storage, in pieces:
 * - base is the mapping of the view's file when the span lies in one raw extent of it
 *   (`file`): the read then runs under the file's SIGBUS guard, long runs are read with
 *   ckpt_file_read, and the pages it touched are handed back every RELEASE_SPAN bytes;
 * - base is the span decoded whole, for a compressed or encoded storage of a small span;
 * - other storages (split into raw extents, byteswapped, or large and encoded) are read
 *   with ckpt_storage_read into `tile`. */
typedef struct source {
    const ckpt_tensor *v;      /* simplified */
    size_t es;
    uint64_t span;             /* positions up to the view's last element, plus one */
    uint64_t ratio;            /* span per element, rounded up */
    const unsigned char *base; /* position 0 */
    const ckpt_file *file;     /* base is its mapping */
    uint64_t file_off;         /* of position 0 */
    unsigned char *tile;       /* tile_elems elements, when there is no base */
    size_t tile_elems;
    uint64_t win_lo, win_hi;   /* positions the tile holds for gathers; empty when equal */
    uint64_t rel_lo, rel_hi;   /* positions read since pages were last handed back */
    /* the read itself, run under the guard */
    int p;
    int64_t first, count;
    ckpt_dtype dst_type;
    unsigned char *dst, *gbuf;
} source;

/* Hand back the file pages under positions [lo, hi), widened to whole pages: only the pages
 * mapped into the process go, and the kernel still has them in its cache. */
static void release_positions(const source *s, uint64_t lo, uint64_t hi)
{
    const ckpt_storage *st = s->v->storage;
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = ps > 0 ? (uint64_t)ps : 4096, at = 0;
    size_t i;

    lo = ((uint64_t)s->v->offset + lo) * s->es;
    hi = ((uint64_t)s->v->offset + hi) * s->es;
    for (i = 0; i < st->n_extents && at < hi; i++) {
        const ckpt_extent *e = &st->extents[i];
        uint64_t a = lo > at ? lo : at, b = hi < at + e->size ? hi : at + e->size;
        if (a < b && e->encoding == CKPT_EXTENT_RAW && e->file) {
            uint64_t fa = (e->offset + (a - at)) / page * page, fb = e->offset + (b - at);
            fb = (fb + page - 1) / page * page;
            ckpt_file_release(e->file, fa, fb - fa);
        }
        at += e->size;
    }
}

static void release_all(source *s)
{
    if (s->rel_hi > s->rel_lo)
        release_positions(s, s->rel_lo, s->rel_hi);
    s->rel_lo = s->rel_hi = 0;
}

/* Positions [lo, hi) are about to be read: widen the range to hand back, or first hand it
 * back when together they would span more than RELEASE_SPAN bytes. */
static void note_read(source *s, uint64_t lo, uint64_t hi)
{
    if (s->rel_hi > s->rel_lo) {
        uint64_t a = lo < s->rel_lo ? lo : s->rel_lo, b = hi > s->rel_hi ? hi : s->rel_hi;
        if ((b - a) * s->es <= RELEASE_SPAN) {
            s->rel_lo = a;
            s->rel_hi = b;
            return;
        }
        release_all(s);
    }
    s->rel_lo = lo;
    s->rel_hi = hi;
}

/* n elements from position pos into dst (source type), from the file or the storage. */
static int fetch(source *s, uint64_t pos, uint64_t n, unsigned char *dst)
{
    note_read(s, pos, pos + n);
    if (s->file)
        return ckpt_file_read(s->file, s->file_off + pos * s->es, dst, (size_t)(n * s->es));
    return ckpt_storage_read(s->v->storage, ((uint64_t)s->v->offset + pos) * s->es, n * s->es, dst);
}

/* ---- strided views: gathered ---- */

/* Position in C order: the multi-index and the element offset from t->offset. Offsets
 * are unsigned so that stepping one past the end of a dimension cannot overflow. */
typedef struct walk {
    int64_t idx[CKPT_MAX_DIMS];
    uint64_t pos;
} walk;

static void walk_start(walk *w, const ckpt_tensor *t, int64_t first)
{
    int d;

    w->pos = 0;
    for (d = t->ndim - 1; d >= 0; d--) {
        w->idx[d] = first % t->shape[d];
        first /= t->shape[d];
        w->pos += (uint64_t)w->idx[d] * (uint64_t)t->stride[d];
    }
}

/* Move `run` elements along the last dimension (never past its end), carrying over. */
static void walk_advance(walk *w, const ckpt_tensor *t, int64_t run)
{
    int d = t->ndim - 1;

    w->pos += (uint64_t)run * (uint64_t)t->stride[d];
    w->idx[d] += run;
    while (d > 0 && w->idx[d] == t->shape[d]) {
        w->pos -= (uint64_t)t->shape[d] * (uint64_t)t->stride[d];
        w->idx[d] = 0;
        d--;
        w->idx[d]++;
        w->pos += (uint64_t)t->stride[d];
    }
}

static void copy_strided(unsigned char *out, const unsigned char *src, size_t es, uint64_t step, int64_t n)
{
    int64_t j;

    if (step == 1) {
        memcpy(out, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1: for (j = 0; j < n; j++) out[j] = src[j * step]; break;
    case 2: for (j = 0; j < n; j++) memcpy(out + 2 * j, src + 2 * j * step, 2); break;
    case 4: for (j = 0; j < n; j++) memcpy(out + 4 * j, src + 4 * j * step, 4); break;
    case 8: for (j = 0; j < n; j++) memcpy(out + 8 * j, src + 8 * j * step, 8); break;
    default: for (j = 0; j < n; j++) memcpy(out + es * j, src + es * j * step, es); break;
    }
}

/* One run of n elements `step` apart from position pos (span positions in all) into out,
 * with no base: `left` elements of the read come after it. From the tile when it holds
 * them; neighbouring elements straight into out; others through the tile, which for a
 * dense view is filled with what the next runs need too; element by element when the run
 * spans more than the tile. */
static int gather_run(source *s, uint64_t pos, uint64_t span, uint64_t step, int64_t n, int64_t left,
                      unsigned char *out)
{
    size_t es = s->es;
    uint64_t len;
    int64_t j;
    int rc;

    if (pos >= s->win_lo && pos + span <= s->win_hi) {
        copy_strided(out, s->tile + (pos - s->win_lo) * es, es, step, n);
        return 0;
    }
    if (step == 1 && (s->ratio > 4 || span * es >= 4096))
        return fetch(s, pos, span, out);
    if (span <= s->tile_elems) {
        len = span;
        if (s->ratio <= 4) {
            /* about as far as the rest of the read reaches, within the tile and the span */
            uint64_t want = span + (uint64_t)left * s->ratio;
            len = s->tile_elems < s->span - pos ? s->tile_elems : s->span - pos;
            if (want < len)
                len = want;
        }
        s->win_lo = s->win_hi = 0;
        if ((rc = fetch(s, pos, len, s->tile)))
            return rc;
        s->win_lo = pos;
        s->win_hi = pos + len;
        copy_strided(out, s->tile, es, step, n);
        return 0;
    }
    for (j = 0; j < n; j++)
        if ((rc = fetch(s, pos + (uint64_t)j * step, 1, out + (size_t)j * es)))
            return rc;
    return 0;
}

/* The next n elements into out (source type), run by run along the last dimension. */
static int gather(source *s, walk *w, unsigned char *out, int64_t n)
{
    const ckpt_tensor *v = s->v;
    int last = v->ndim - 1;
    size_t es = s->es;
    uint64_t step = (uint64_t)v->stride[last];
    int rc;

    while (n > 0) {
        int64_t run = v->shape[last] - w->idx[last] < n ? v->shape[last] - w->idx[last] : n;
        uint64_t span = (uint64_t)(run - 1) * step + 1;
        if (!s->base) {
            if ((rc = gather_run(s, w->pos, span, step, run, n - run, out)))
                return rc;
        } else if (s->file && step == 1 && span * es >= 4096) {
            /* long enough to be worth a call: read, not mapped, when long enough */
            if ((rc = fetch(s, w->pos, span, out)))
                return rc;
        } else {
            if (s->file)
                note_read(s, w->pos, w->pos + span);
            copy_strided(out, s->base + w->pos * es, es, step, run);
        }
        out += (size_t)run * es;
        n -= run;
        walk_advance(w, v, run);
    }
    return 0;
}

/* The next count elements from `first`, gathered; converted ones go through gbuf
 * (GATHER_ELEMS elements of the source type). */
static int read_gathered(source *s, int64_t first, int64_t count, ckpt_dtype dst_type, unsigned char *dst,
                         unsigned char *gbuf)
{
    size_t es = s->es, ds = ckpt_dtype_size(dst_type);
    int64_t done, m;
    walk w;
    int rc = 0;

    if (dst_type == s->v->dtype)
        gbuf = NULL;
    walk_start(&w, s->v, first);
    for (done = 0; done < count && !rc; done += m) {
        m = count - done < GATHER_ELEMS ? count - done : GATHER_ELEMS;
        rc = gather(s, &w, gbuf ? gbuf : dst + (size_t)done * es, m);
        if (!rc && gbuf)
            rc = ckpt_dtype_convert(dst_type, dst + (size_t)done * ds, s->v->dtype, gbuf, (size_t)m);
    }
    return rc;
}

/* ---- strided views: transposed ---- */

/* The same elements in the same order in the fewest dimensions: size-1 dimensions dropped,
 * neighbours that step through memory as one merged. A transpose then looks the same
 * however it was batched or padded with unit dimensions. */
static void view_simplify(ckpt_tensor *v, const ckpt_tensor *t)
{
    int64_t outer;
    int d, n = 0;

    *v = *t;
    for (d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 1)
            continue;
        if (n > 0 && !CKPT_MUL_OVERFLOWS(t->stride[d], t->shape[d], &outer) && v->stride[n - 1] == outer) {
            v->shape[n - 1] *= t->shape[d];
            v->stride[n - 1] = t->stride[d];
            continue;
        }
        v->shape[n] = t->shape[d];
        v->stride[n] = t->stride[d];
        n++;
    }
    v->ndim = n;
}

/* The innermost dimension of stride 1 when the last dimension has another stride: rows of
 * the output then run across source lines, and neighbouring indices along that dimension
 * read neighbouring bytes. -1 when there is none. */
static int unit_dim(const ckpt_tensor *v)
{
    int d, last = v->ndim - 1;

    if (last < 1 || v->stride[last] == 1)
        return -1;
    for (d = last - 1; d >= 0; d--)
        if (v->stride[d] == 1)
            return d;
    return -1;
}

int64_t ckpt_tensor__page_band(const ckpt_tensor *t, uint64_t page)
{
    size_t es = ckpt_dtype_size(t->dtype);
    int64_t numel = ckpt_tensor_numel(t), after = 1, indices;
    ckpt_tensor v;
    int d, p;

    if (numel <= 0 || es == 0 || ckpt_tensor_is_contiguous(t))
        return 1;
    view_simplify(&v, t);
    if ((p = unit_dim(&v)) < 0)
        return 1;
    /* consecutive indices of p read neighbouring bytes of every source line: a page of each
     * line is used up by page / es of them, with everything after p */
    indices = (int64_t)((page + es - 1) / es);
    if (indices > v.shape[p])
        indices = v.shape[p];
    for (d = p + 1; d < v.ndim; d++)
        after *= v.shape[d];
    return indices * after;
}

/* Elements per line of a tile holding lines of k elements: whole cache lines, and not a
 * multiple of 256 bytes, so that the lines a block reads do not all fall into the same
 * cache sets. */
static uint64_t tile_pitch(uint64_t k, size_t es)
{
    uint64_t unit = es < 64 ? 64 / es : 1, p = (k + unit - 1) / unit * unit;

    if (p * es % 256 == 0)
        p += unit;
    return p;
}

/* The band of source lines [j0, j0 + m), elements [i0, i0 + k) of each, read into the tile
 * (no base): as one piece when at least half of it is wanted, line by line otherwise.
 * Element (i, j) of the band is then at tile[(i - i0) + (j - j0) * pitch]. */
static int fetch_band(source *s, uint64_t at, int64_t k, int64_t m, uint64_t step, int whole, uint64_t pitch)
{
    int64_t j;
    int rc = 0;

    s->win_lo = s->win_hi = 0;
    if (whole)
        return fetch(s, at, (uint64_t)(m - 1) * step + (uint64_t)k, s->tile);
    for (j = 0; j < m && !rc; j++)
        rc = fetch(s, at + (uint64_t)j * step, (uint64_t)k, s->tile + (size_t)((uint64_t)j * pitch) * s->es);
    return rc;
}

/* A panel: k output rows, row i holding the elements at positions pos + i + j * step for
 * j < n, which are elements e0 + i * pitch + j of the read (e0 may be negative); only those in
 * [0, count) are written, at dst. Source lines j are taken in bands of up to BAND_LINES (fewer
 * when the band would span more than RELEASE_SPAN bytes of a file, or not fit the tile), and
 * each band is copied out TILE_ROWS rows at a time through gbuf, a block that stays in cache,
 * so that dst is written in long runs, which memory takes much better than the short runs
 * into many rows of a direct transpose. */
typedef struct panel {
    uint64_t pos, step;
    int64_t k, n, pitch, e0;
} panel;

/* Rows [i, i + rows) of band [j0, j0 + m), transposed from src (element (i, j) of the band
 * at src[(i - i0) + (j - j0) * lp]) into the read's elements. */
static int panel_block(const source *s, const panel *pn, const unsigned char *src, uint64_t lp, int64_t i,
                       int64_t rows, int64_t j0, int64_t m, ckpt_dtype dst_type, unsigned char *gbuf)
{
    const ckpt_tensor *v = s->v;
    size_t es = s->es, ds = ckpt_dtype_size(dst_type);
    int64_t e = pn->e0 + i * pn->pitch + j0, r, ja, jb;
    int rc = 0;

    if (m == pn->n && pn->pitch == pn->n && e >= 0 && e + rows * m <= s->count) {
        /* whole rows, one after another in the read: the block is a run of dst */
        if (dst_type == v->dtype) {
            ckpt_tensor__transpose(s->dst + (size_t)e * ds, (size_t)m, src, (size_t)lp, (size_t)rows, (size_t)m, es);
            return 0;
        }
        ckpt_tensor__transpose(gbuf, (size_t)m, src, (size_t)lp, (size_t)rows, (size_t)m, es);
        return ckpt_dtype_convert(dst_type, s->dst + (size_t)e * ds, v->dtype, gbuf, (size_t)(rows * m));
    }
    ckpt_tensor__transpose(gbuf, (size_t)m, src, (size_t)lp, (size_t)rows, (size_t)m, es);
    for (r = 0; r < rows && !rc; r++, e += pn->pitch) {
        ja = e < 0 ? -e : 0;
        jb = s->count - e < m ? s->count - e : m;
        if (ja < jb)
            rc = ckpt_dtype_convert(dst_type, s->dst + (size_t)(e + ja) * ds, v->dtype,
                                    gbuf + (size_t)(r * m + ja) * es, (size_t)(jb - ja));
    }
    return rc;
}

static int read_panel(source *s, const panel *pn, ckpt_dtype dst_type, unsigned char *gbuf)
{
    size_t es = s->es;
    uint64_t step = pn->step;
    int64_t k = pn->k, n = pn->n, kc = k, i0, j0, t0;
    int rc = 0;

    if (!s->base && (uint64_t)kc > s->tile_elems / MIN_BAND_LINES)
        kc = (int64_t)(s->tile_elems / MIN_BAND_LINES);
    for (i0 = 0; i0 < k && !rc; i0 += kc) {
        int64_t kk = k - i0 < kc ? k - i0 : kc, b = BAND_LINES;
        int whole = !s->base && (uint64_t)kk * 2 >= step;
        uint64_t lp = step, fit;

        if (s->file && step > 0) {
            fit = RELEASE_SPAN / (step * es);
            b = fit < (uint64_t)b ? (fit > 0 ? (int64_t)fit : 1) : b;
        } else if (whole && step > 0) {
            fit = (s->tile_elems - (uint64_t)kk) / step + 1;
            b = fit < (uint64_t)b ? (int64_t)fit : b;
        } else if (!s->base && !whole) {
            lp = tile_pitch((uint64_t)kk, es);
            fit = s->tile_elems / lp;
            b = fit < (uint64_t)b ? (int64_t)fit : b;
        }
        for (j0 = 0; j0 < n && !rc; j0 += b) {
            int64_t m = n - j0 < b ? n - j0 : b;
            uint64_t at = pn->pos + (uint64_t)i0 + (uint64_t)j0 * step;
            const unsigned char *src = s->base ? s->base + at * es : s->tile;

            if (s->file)
                note_read(s, at, at + (uint64_t)(m - 1) * step + (uint64_t)kk);
            if (!s->base && (rc = fetch_band(s, at, kk, m, step, whole, lp)))
                break;
            for (t0 = 0; t0 < kk && !rc; t0 += TILE_ROWS)
                rc = panel_block(s, pn, src + (size_t)t0 * es, lp, i0 + t0, kk - t0 < TILE_ROWS ? kk - t0 : TILE_ROWS,
                                 j0, m, dst_type, gbuf);
        }
    }
    return rc;
}

/* The read of a view with a unit dimension p before the last one, as panels: output row r
 * is ((o * P) + i) * q + mid, with P the size of p, i its index, q the rows per index of p
 * (the dimensions between p and the last one) and o the index of the dimensions before p.
 * Rows of one o and one mid, consecutive in i, read neighbouring source bytes: one panel. */
static int read_tiled(source *s)
{
    const ckpt_tensor *v = s->v;
    int last = v->ndim - 1, d;
    int64_t n = v->shape[last], P = v->shape[s->p], q = 1, r_a, r_b, o, mid, lo, hi, rr, rr_end;
    panel pn;
    walk w;
    int rc = 0;

    for (d = s->p + 1; d < last; d++)
        q *= v->shape[d];
    r_a = s->first / n;
    r_b = (s->first + s->count - 1) / n;
    pn.n = n;
    pn.step = (uint64_t)v->stride[last];
    pn.pitch = q * n;
    for (o = r_a / (P * q); o <= r_b / (P * q) && !rc; o++) {
        lo = o * P * q > r_a ? o * P * q : r_a;
        hi = (o + 1) * P * q - 1 < r_b ? (o + 1) * P * q - 1 : r_b;
        for (mid = 0; mid < q && !rc; mid++) {
            rr = lo + (mid - lo % q + q) % q;
            rr_end = hi - (hi % q - mid + q) % q;
            if (rr > hi || rr_end < rr)
                continue;
            walk_start(&w, v, rr * n);
            pn.pos = w.pos;
            pn.k = (rr_end - rr) / q + 1;
            pn.e0 = rr * n - s->first;
            rc = read_panel(s, &pn, s->dst_type, s->gbuf);
        }
    }
    return rc;
}

static int read_source(void *arg)
{
    source *s = arg;

    if (s->p >= 0)
        return read_tiled(s);
    return read_gathered(s, s->first, s->count, s->dst_type, s->dst, s->gbuf);
}

/* Whether every extent is stored as is, so that any piece of the storage can be read. */
static int raw_storage(const ckpt_storage *st)
{
    size_t i;

    for (i = 0; i < st->n_extents; i++)
        if (st->extents[i].encoding != CKPT_EXTENT_RAW)
            return 0;
    return 1;
}

int ckpt_tensor__read_strided(const ckpt_tensor *t, int64_t first, int64_t count, ckpt_dtype dst_type,
                              unsigned char *dst)
{
    size_t es = ckpt_dtype_size(t->dtype);
    uint64_t span = 1, off = (uint64_t)t->offset * es, tile_bytes;
    unsigned char *owned = NULL;
    ckpt_tensor v;
    source s;
    int d, pieces, rc = 0;

    view_simplify(&v, t);
    memset(&s, 0, sizeof s);
    s.v = &v;
    s.es = es;
    /* validate() bounded the span by the storage size. */
    for (d = 0; d < v.ndim; d++)
        span += (uint64_t)(v.shape[d] - 1) * (uint64_t)v.stride[d];
    s.span = span;
    s.ratio = (span + (uint64_t)ckpt_tensor_numel(&v) - 1) / (uint64_t)ckpt_tensor_numel(&v);
    s.base = ckpt_storage__map(v.storage, off, span * es, &s.file, &s.file_off);
    if (!s.base)
        s.file = NULL;
    pieces = raw_storage(v.storage);
    if (!s.base && !pieces && span * es <= SPAN_MAX) {
        if (!(owned = malloc((size_t)(span * es))))
            return ckpt_error_oom();
        if ((rc = ckpt_storage_read(v.storage, off, span * es, owned)))
            goto done;
        s.base = owned;
    }
    s.p = s.base || pieces ? unit_dim(&v) : -1;
    s.first = first;
    s.count = count;
    s.dst_type = dst_type;
    s.dst = dst;
    /* panels fill gbuf with whole rows of their bands, even for reads shorter than a row */
    if ((dst_type != v.dtype || s.p >= 0) &&
        !(s.gbuf = malloc((size_t)(count < GATHER_ELEMS && s.p < 0 ? count : GATHER_ELEMS) * es))) {
        rc = ckpt_error_oom();
        goto done;
    }
    if (!s.base) {
        /* no more than a few times what the read needs */
        tile_bytes = (uint64_t)count * es * 4;
        if (tile_bytes < ((uint64_t)64 << 10))
            tile_bytes = (uint64_t)64 << 10;
        if (tile_bytes > TILE_BYTES)
            tile_bytes = TILE_BYTES;
        s.tile_elems = (size_t)(tile_bytes / es);
        if (!(s.tile = malloc(s.tile_elems * es))) {
            rc = ckpt_error_oom();
            goto done;
        }
    }
    /* Mapped bytes are read under the file's guard; conversions only ever read gbuf, a
     * buffer of ours, so nothing that runs on other threads touches the mapping. */
    rc = s.file ? ckpt_file_guard(s.file, read_source, &s) : read_source(&s);
    release_all(&s);
done:
    free(owned);
    free(s.gbuf);
    free(s.tile);
    return rc;
}
