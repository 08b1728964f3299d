/* The zstd filter (id 32015) as an HDF5 filter over libzstd, so that the library itself
 * can write and read the chunks hdf5plugin's filter writes: each chunk one zstd frame
 * with its content size, cd_values[0] the compression level. The writer compresses its
 * chunks itself, in parallel, and hands them over with H5Dwrite_chunk; the library uses
 * this filter for anything it reads or writes through the filter pipeline. */
#include "hdf5_private.h"

#include <hdf5.h>
#include <stdlib.h>
#include <zstd.h>

int ckpt_hdf5__register_zstd(void);

/* A frame without its content size is decompressed in steps into a growing buffer. */
static size_t decompress_unsized(const void *in, size_t n, void **out, size_t *out_cap)
{
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    ZSTD_inBuffer ib = { in, n, 0 };
    size_t cap = n * 4 + 4096, len = 0, ret = 1;
    unsigned char *buf = malloc(cap);

    while (dctx && buf && ret != 0) {
        ZSTD_outBuffer ob = { buf, cap, len };
        ret = ZSTD_decompressStream(dctx, &ob, &ib);
        len = ob.pos;
        if (ZSTD_isError(ret) || (ret != 0 && ib.pos == ib.size && len < cap))
            break;
        if (len == cap) {
            unsigned char *bigger = realloc(buf, cap * 2);
            if (!bigger)
                break;
            buf = bigger;
            cap *= 2;
        }
    }
    ZSTD_freeDCtx(dctx);
    if (!buf || ret != 0) {
        free(buf);
        return 0;
    }
    *out = buf;
    *out_cap = cap;
    return len;
}

static size_t zstd_filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[], size_t nbytes,
                          size_t *buf_size, void **buf)
{
    void *out;
    size_t n;

    if (flags & H5Z_FLAG_REVERSE) {
        unsigned long long size = ZSTD_getFrameContentSize(*buf, nbytes);
        if (size == ZSTD_CONTENTSIZE_ERROR)
            return 0;
        if (size == ZSTD_CONTENTSIZE_UNKNOWN) {
            size_t cap;
            if (!(n = decompress_unsized(*buf, nbytes, &out, &cap)))
                return 0;
            free(*buf);
            *buf = out;
            *buf_size = cap;
            return n;
        }
        if (size > SIZE_MAX || !(out = malloc(size ? (size_t)size : 1)))
            return 0;
        n = ZSTD_decompress(out, (size_t)size, *buf, nbytes);
        if (ZSTD_isError(n) || n != size) {
            free(out);
            return 0;
        }
        free(*buf);
        *buf = out;
        *buf_size = (size_t)size;
        return n;
    }
    if (!(out = malloc(ZSTD_compressBound(nbytes))))
        return 0;
    n = ZSTD_compress(out, ZSTD_compressBound(nbytes), *buf, nbytes, cd_nelmts > 0 ? (int)cd_values[0] : 3);
    if (ZSTD_isError(n)) {
        free(out);
        return 0;
    }
    free(*buf);
    *buf = out;
    *buf_size = ZSTD_compressBound(nbytes);
    return n;
}

static const H5Z_class2_t zstd_class = {
    H5Z_CLASS_T_VERS, CKPT_H5_FILTER_ZSTD, 1, 1, "Zstandard compression (libzstd)", NULL, NULL, zstd_filter,
};

int ckpt_hdf5__register_zstd(void)
{
    /* a plugin loaded earlier (hdf5plugin in the same process) has the same format */
    if (H5Zfilter_avail(CKPT_H5_FILTER_ZSTD) > 0)
        return 0;
    return H5Zregister(&zstd_class) < 0 ? -1 : 0;
}
