/* Tensors: views (shape, strides and offset in elements) on storages, and reading their
 * elements in C order, converted to any type. Contiguous views are read here; strided ones
 * (gathered and transposed) in tensor_strided.c.
 *
 * Input bytes are never read through the mapping here: they come through ckpt_file_read (or
 * ckpt_storage_read, which ends there) into buffers of bounded size and are converted from
 * those. A file cut short while it is read is then an error, not SIGBUS, also where
 * conversions run on other threads. */
#include "storage_private.h"
#include "tensor_private.h"

#include <ckpt/sys/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Contiguous reads that convert go through a buffer of at most this many source bytes. */
#define PIECE_BYTES ((uint64_t)4 << 20)

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

/* Read straight into dst, or in pieces through a buffer and converted; one cursor for the
 * whole range, so that encoded extents are decoded once. */
static int read_contiguous(const ckpt_tensor *t, int64_t first, int64_t count, ckpt_dtype dst_type,
                           unsigned char *dst)
{
    size_t es = ckpt_dtype_size(t->dtype), ds = ckpt_dtype_size(dst_type);
    uint64_t off = (uint64_t)(t->offset + first) * es, piece = PIECE_BYTES / es, done, m;
    ckpt_storage_cursor c;
    unsigned char *buf;
    int rc = 0;

    if (dst_type == t->dtype)
        return ckpt_storage_read(t->storage, off, (uint64_t)count * es, dst);
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

const char *ckpt_shape_format(const int64_t *shape, int ndim, char *buf, size_t cap)
{
    size_t len;
    int d;

    if (!cap)
        return buf;
    len = (size_t)snprintf(buf, cap, "[");
    for (d = 0; d < ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
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
        rc = ckpt_tensor__read_strided(t, first, count, dst_type, dst);
    if (rc)
        ckpt_error_prefix("tensor '%s'", tensor_name(t));
    return rc;
}
