/* Tensors: views (shape, strides and offset in elements) on storages, and reading their
 * elements in C order, converted to any type. */
#include "storage_private.h"
#include "transpose.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <stdlib.h>
#include <string.h>

/* Contiguous reads straight from a mapped file convert pieces of this many source bytes;
 * reads of at least RELEASE_MIN bytes hand each piece's pages back afterwards, so that
 * streaming through a large checkpoint does not grow the resident set. */
#define PIECE_BYTES ((uint64_t)8 << 20)
#define RELEASE_MIN ((uint64_t)1 << 20)
/* Strided reads gather this many elements at a time before converting them. */
#define GATHER_ELEMS 65536
/* A strided view of a storage that cannot be mapped (compressed, encoded, split or
 * byteswapped) is decoded whole when its span is at most this large, and read run by run
 * (slow for compressed and encoded extents, but in bounded memory) when it is larger. */
#define SPAN_MAX ((uint64_t)64 << 20)
/* Transposed views in memory are copied TILE_ROWS output rows by GATHER_ELEMS / TILE_ROWS
 * columns at a time: a block that stays in cache, filled from short runs of many source
 * rows and copied out in long runs. Larger blocks measured no faster. */
#define TILE_ROWS 64

static const char *tensor_name(const ckpt_tensor *t)
{
    return t->name ? t->name : "(unnamed)";
}

/* -1 when a dimension is negative, the rank is out of range or the count overflows. */
int64_t ckpt_tensor_numel(const ckpt_tensor *t)
{
    int64_t n = 1;
    int i, zero = 0;

    if (!t || t->ndim < 0 || t->ndim > CKPT_MAX_DIMS)
        return -1;
    for (i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return -1;
        zero |= t->shape[i] == 0;
    }
    if (zero)
        return 0;
    for (i = 0; i < t->ndim; i++)
        if (CKPT_MUL_OVERFLOWS(n, t->shape[i], &n))
            return -1;
    return n;
}

/* UINT64_MAX when the element count is invalid or the size overflows. */
uint64_t ckpt_tensor_nbytes(const ckpt_tensor *t)
{
    int64_t n = ckpt_tensor_numel(t);
    uint64_t bytes;

    if (n < 0 || CKPT_MUL_OVERFLOWS((uint64_t)n, (uint64_t)ckpt_dtype_size(t->dtype), &bytes))
        return UINT64_MAX;
    return bytes;
}

/* Dimensions of size 1 may have any stride, as in torch. */
int ckpt_tensor_is_contiguous(const ckpt_tensor *t)
{
    int64_t n = ckpt_tensor_numel(t), expected = 1;
    int i;

    if (n <= 0)
        return n == 0;
    for (i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1)
            continue;
        if (t->stride[i] != expected)
            return 0;
        expected *= t->shape[i];
    }
    return 1;
}

void ckpt_tensor_set_contiguous(ckpt_tensor *t)
{
    int64_t s = 1;
    int i;

    for (i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        if (t->shape[i] > 1 && CKPT_MUL_OVERFLOWS(s, t->shape[i], &s))
            s = INT64_MAX;
    }
}

int ckpt_tensor_validate(const ckpt_tensor *t)
{
    const char *name;
    size_t esize;
    int64_t numel, last;
    uint64_t end;
    int i;

    if (!t)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_tensor_validate: no tensor");
    name = tensor_name(t);
    esize = ckpt_dtype_size(t->dtype);
    if (esize == 0)
        return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': invalid element type %d", name, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > CKPT_MAX_DIMS)
        return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': %d dimensions (at most %d)", name, t->ndim, CKPT_MAX_DIMS);
    for (i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0)
            return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': dimension %d has negative size %lld", name, i,
                                  (long long)t->shape[i]);
    numel = ckpt_tensor_numel(t);
    if (numel < 0 || ckpt_tensor_nbytes(t) == UINT64_MAX)
        return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': element count overflows", name);
    if (t->offset < 0)
        return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': negative storage offset %lld", name, (long long)t->offset);
    if (numel == 0)
        return 0;
    if (!t->storage)
        return ckpt_error_set(CKPT_EFORMAT, "tensor '%s' has no storage", name);
    last = t->offset;
    for (i = 0; i < t->ndim; i++) {
        int64_t reach;
        if (t->stride[i] < 0)
            return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': dimension %d has negative stride %lld", name, i,
                                  (long long)t->stride[i]);
        if (CKPT_MUL_OVERFLOWS(t->shape[i] - 1, t->stride[i], &reach) || CKPT_ADD_OVERFLOWS(last, reach, &last))
            return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': strides reach past 2^63 elements", name);
    }
    if (CKPT_MUL_OVERFLOWS((uint64_t)last + 1, (uint64_t)esize, &end))
        return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': strides reach past 2^64 bytes", name);
    if (t->storage->nbytes % esize)
        return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': storage '%s' holds %llu bytes, not whole %zu-byte elements",
                              name, t->storage->key ? t->storage->key : "(unnamed)",
                              (unsigned long long)t->storage->nbytes, esize);
    if (end > t->storage->nbytes)
        return ckpt_error_set(CKPT_EFORMAT, "tensor '%s': view reaches byte %llu of storage '%s', which holds %llu",
                              name, (unsigned long long)end, t->storage->key ? t->storage->key : "(unnamed)",
                              (unsigned long long)t->storage->nbytes);
    return 0;
}

/* ---- contiguous views ---- */

static int read_contiguous(const ckpt_tensor *t, int64_t first, int64_t count, ckpt_dtype dst_type,
                           unsigned char *dst)
{
    size_t es = ckpt_dtype_size(t->dtype), ds = ckpt_dtype_size(dst_type);
    uint64_t off = (uint64_t)(t->offset + first) * es, nbytes = (uint64_t)count * es, piece = PIECE_BYTES / es;
    const ckpt_file *file;
    uint64_t file_off, done, m;
    const unsigned char *p = ckpt_storage__map(t->storage, off, nbytes, &file, &file_off);
    ckpt_storage_cursor c;
    unsigned char *buf;
    int rc = 0;

    if (p) {
        if (nbytes < RELEASE_MIN)
            return ckpt_dtype_convert(dst_type, dst, t->dtype, p, (size_t)count);
        for (done = 0; done < (uint64_t)count && !rc; done += m) {
            m = (uint64_t)count - done < piece ? (uint64_t)count - done : piece;
            rc = ckpt_dtype_convert(dst_type, dst + done * ds, t->dtype, p + done * es, (size_t)m);
            ckpt_storage__release(file, file_off, file_off + done * es, file_off + (done + m) * es);
        }
        return rc;
    }
    if (dst_type == t->dtype)
        return ckpt_storage_read(t->storage, off, nbytes, dst);
    /* One cursor for the whole range: encoded extents are decoded once. */
    if (piece > (uint64_t)count)
        piece = (uint64_t)count;
    if (!(buf = malloc((size_t)(piece * es))))
        return ckpt_error_oom();
    ckpt_storage__cursor_open(&c, t->storage, off);
    for (done = 0; done < (uint64_t)count && !rc; done += m) {
        m = (uint64_t)count - done < piece ? (uint64_t)count - done : piece;
        rc = ckpt_storage__cursor_read(&c, buf, m * es);
        if (!rc)
            rc = ckpt_dtype_convert(dst_type, dst + done * ds, t->dtype, buf, (size_t)m);
    }
    ckpt_storage__cursor_close(&c);
    free(buf);
    return rc;
}

/* ---- strided views ---- */

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

    switch (es) {
    case 1: for (j = 0; j < n; j++) out[j] = src[j * step]; break;
    case 2: for (j = 0; j < n; j++) memcpy(out + 2 * j, src + 2 * j * step, 2); break;
    case 4: for (j = 0; j < n; j++) memcpy(out + 4 * j, src + 4 * j * step, 4); break;
    case 8: for (j = 0; j < n; j++) memcpy(out + 8 * j, src + 8 * j * step, 8); break;
    default: for (j = 0; j < n; j++) memcpy(out + es * j, src + es * j * step, es); break;
    }
}

/* The next n elements into out (source type): from `base`, the view's span in memory, or
 * else read from the storage run by run. */
static int gather(const ckpt_tensor *t, const unsigned char *base, walk *w, unsigned char *out, int64_t n)
{
    int last = t->ndim - 1;
    size_t es = ckpt_dtype_size(t->dtype);
    uint64_t step = (uint64_t)t->stride[last];
    int rc;

    while (n > 0) {
        int64_t run = t->shape[last] - w->idx[last] < n ? t->shape[last] - w->idx[last] : n;
        if (base) {
            copy_strided(out, base + w->pos * es, es, step, run);
        } else if (step == 1) {
            if ((rc = ckpt_storage_read(t->storage, ((uint64_t)t->offset + w->pos) * es, (uint64_t)run * es, out)))
                return rc;
        } else {
            int64_t j;
            for (j = 0; j < run; j++)
                if ((rc = ckpt_storage_read(t->storage, ((uint64_t)t->offset + w->pos + (uint64_t)j * step) * es, es,
                                            out + (size_t)j * es)))
                    return rc;
        }
        out += (size_t)run * es;
        n -= run;
        walk_advance(w, t, run);
    }
    return 0;
}

/* The next count elements from `first`, gathered run by run along the last dimension;
 * converted ones go through gbuf (GATHER_ELEMS elements of the source type). */
static int read_gathered(const ckpt_tensor *t, const unsigned char *base, int64_t first, int64_t count,
                         ckpt_dtype dst_type, unsigned char *dst, unsigned char *gbuf)
{
    size_t es = ckpt_dtype_size(t->dtype), ds = ckpt_dtype_size(dst_type);
    int64_t done, m;
    walk w;
    int rc = 0;

    if (dst_type == t->dtype)
        gbuf = NULL;
    walk_start(&w, t, first);
    for (done = 0; done < count && !rc; done += m) {
        m = count - done < GATHER_ELEMS ? count - done : GATHER_ELEMS;
        rc = gather(t, base, &w, gbuf ? gbuf : dst + (size_t)done * es, m);
        if (!rc && gbuf)
            rc = ckpt_dtype_convert(dst_type, dst + (size_t)done * ds, t->dtype, gbuf, (size_t)m);
    }
    return rc;
}

/* ---- transposed views ---- */

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

/* `rows` output rows starting at element `first`, which follow one another along the unit
 * dimension, written `pitch` elements apart into out. They go through gbuf, a block that
 * stays in cache, all the rows and as many columns as fit at a time; copying the block's
 * rows out (converted or not) then writes long runs, which memory takes much better than
 * the short runs into many rows of a direct transpose. */
static int read_tile_rows(const ckpt_tensor *v, const unsigned char *base, int64_t first, int64_t rows,
                          int64_t pitch, ckpt_dtype dst_type, unsigned char *out, unsigned char *gbuf)
{
    int last = v->ndim - 1;
    size_t es = ckpt_dtype_size(v->dtype), ds = ckpt_dtype_size(dst_type);
    size_t n = (size_t)v->shape[last], step = (size_t)v->stride[last], cols = GATHER_ELEMS / (size_t)rows, j0, i;
    const unsigned char *src;
    walk w;
    int rc = 0;

    walk_start(&w, v, first);
    src = base + w.pos * es;
    if (cols >= n && (size_t)pitch == n) {
        /* short whole rows, one after another in out: the block is a run of out */
        if (dst_type == v->dtype) {
            ckpt_tensor__transpose(out, n, src, step, (size_t)rows, n, es);
            return 0;
        }
        ckpt_tensor__transpose(gbuf, n, src, step, (size_t)rows, n, es);
        return ckpt_dtype_convert(dst_type, out, v->dtype, gbuf, (size_t)rows * n);
    }
    for (j0 = 0; j0 < n && !rc; j0 += cols) {
        size_t m = n - j0 < cols ? n - j0 : cols;
        ckpt_tensor__transpose(gbuf, m, src + j0 * step * es, step, (size_t)rows, m, es);
        for (i = 0; i < (size_t)rows && !rc; i++)
            rc = ckpt_dtype_convert(dst_type, out + (i * (size_t)pitch + j0) * ds, v->dtype, gbuf + i * m * es, m);
    }
    return rc;
}

/* Elements [first, first+count) of a view with a unit dimension p before the last one.
 * Whole output rows are read TILE_ROWS indices of p at a time; partial rows at either end,
 * and rows that share an index of p with rows outside the range, are gathered. */
static int read_tiled(const ckpt_tensor *v, int p, const unsigned char *base, int64_t first, int64_t count,
                      ckpt_dtype dst_type, unsigned char *dst, unsigned char *gbuf)
{
    int last = v->ndim - 1, d;
    size_t ds = ckpt_dtype_size(dst_type);
    int64_t n = v->shape[last], q = 1, head = (n - first % n) % n, r, r0, r_end, k, mid;
    int rc = 0;

    /* rows per index of p */
    for (d = p + 1; d < last; d++)
        q *= v->shape[d];
    if (head > count)
        head = count;
    if (head && (rc = read_gathered(v, base, first, head, dst_type, dst, gbuf)))
        return rc;
    first += head;
    count -= head;
    dst += (size_t)head * ds;
    r0 = r = first / n;
    r_end = r0 + count / n;
    while (r < r_end && !rc) {
        unsigned char *out = dst + (size_t)((r - r0) * n) * ds;
        if (r % q || r_end - r < q) {
            k = q - r % q < r_end - r ? q - r % q : r_end - r;
            rc = read_gathered(v, base, r * n, k * n, dst_type, out, gbuf);
            r += k;
            continue;
        }
        k = v->shape[p] - r / q % v->shape[p];
        if (k > (r_end - r) / q)
            k = (r_end - r) / q;
        if (k > TILE_ROWS)
            k = TILE_ROWS;
        for (mid = 0; mid < q && !rc; mid++)
            rc = read_tile_rows(v, base, (r + mid) * n, k, q * n, dst_type, out + (size_t)(mid * n) * ds, gbuf);
        r += k * q;
    }
    if (!rc && count % n)
        rc = read_gathered(v, base, r_end * n, count % n, dst_type, dst + (size_t)((r_end - r0) * n) * ds, gbuf);
    return rc;
}

static int read_strided(const ckpt_tensor *t, int64_t first, int64_t count, ckpt_dtype dst_type, unsigned char *dst)
{
    size_t es = ckpt_dtype_size(t->dtype);
    uint64_t span = 1, off = (uint64_t)t->offset * es;
    const unsigned char *base;
    unsigned char *owned = NULL, *gbuf = NULL;
    ckpt_tensor v;
    int d, p, rc = 0;

    view_simplify(&v, t);
    /* validate() bounded the span by the storage size. */
    for (d = 0; d < v.ndim; d++)
        span += (uint64_t)(v.shape[d] - 1) * (uint64_t)v.stride[d];
    span *= es;
    base = ckpt_storage_map(v.storage, off, span);
    if (!base && span <= SPAN_MAX) {
        if (!(owned = malloc((size_t)span)))
            return ckpt_error_oom();
        if ((rc = ckpt_storage_read(v.storage, off, span, owned)))
            goto done;
        base = owned;
    }
    p = base ? unit_dim(&v) : -1;
    if ((dst_type != v.dtype || p >= 0) &&
        !(gbuf = malloc((size_t)(count < GATHER_ELEMS ? count : GATHER_ELEMS) * es))) {
        rc = ckpt_error_oom();
        goto done;
    }
    if (p >= 0)
        rc = read_tiled(&v, p, base, first, count, dst_type, dst, gbuf);
    else
        rc = read_gathered(&v, base, first, count, dst_type, dst, gbuf);
done:
    free(owned);
    free(gbuf);
    return rc;
}

int ckpt_tensor_read(const ckpt_tensor *t, int64_t first, int64_t count, ckpt_dtype dst_type, void *dst)
{
    int64_t numel;
    int rc;

    if ((rc = ckpt_tensor_validate(t)))
        return rc;
    numel = ckpt_tensor_numel(t);
    if (first < 0 || count < 0 || first > numel || count > numel - first)
        return ckpt_error_set(CKPT_EINVALID, "tensor '%s': elements [%lld, +%lld) are outside its %lld elements",
                              tensor_name(t), (long long)first, (long long)count, (long long)numel);
    if (!ckpt_dtype_can_convert(dst_type, t->dtype))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "tensor '%s': cannot convert %s to %s", tensor_name(t),
                              ckpt_dtype_name(t->dtype), ckpt_dtype_name(dst_type));
    if (count == 0)
        return 0;
    if (!dst)
        return ckpt_error_set(CKPT_EINVALID, "tensor '%s': no destination", tensor_name(t));
    if (ckpt_tensor_is_contiguous(t))
        rc = read_contiguous(t, first, count, dst_type, dst);
    else
        rc = read_strided(t, first, count, dst_type, dst);
    if (rc)
        ckpt_error_prefix("tensor '%s'", tensor_name(t));
    return rc;
}
