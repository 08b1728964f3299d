/* HDF5 chunks through the engine: a filter pipeline, a filter mask, an element size and a
 * chunk size from the input's head, the stored chunk from its tail. Decoding must fail
 * cleanly or give exactly the chunk's size; with the round-trip bit set, the tail is
 * encoded here first (shuffle, zlib or zstd) and must decode back to itself. */
#define CKPT_FUZZ_HDF5
#include "../../formats/hdf5_private.h"
#include "fuzz.h"

#include <ckpt/sys/io.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define HEAD 8

static const unsigned known[] = { CKPT_H5_FILTER_DEFLATE, CKPT_H5_FILTER_SHUFFLE, CKPT_H5_FILTER_FLETCHER32,
                                  CKPT_H5_FILTER_ZSTD, 4 };

static void shuffle(const uint8_t *in, uint8_t *out, size_t n, size_t es)
{
    size_t count = n / es, i, k;

    for (k = 0; k < es; k++)
        for (i = 0; i < count; i++)
            out[k * count + i] = in[i * es + k];
    memcpy(out + count * es, in + count * es, n - count * es);
}

/* The tail encoded as the extent says (no checksum); its size in *out_n. */
static uint8_t *encode(const ckpt_extent *e, const uint8_t *data, size_t n, size_t *out_n)
{
    uint8_t *plain = malloc(n + 1), *packed;
    size_t cap = (n + 64) * 2;

    FUZZ_ASSERT(plain);
    if (e->shuffle > 1)
        shuffle(data, plain, n, e->shuffle);
    else
        memcpy(plain, data, n);
    if (e->encoding == CKPT_EXTENT_RAW) {
        *out_n = n;
        return plain;
    }
    cap = e->encoding == CKPT_EXTENT_ZSTD ? ZSTD_compressBound(n) : compressBound((uLong)n);
    packed = malloc(cap);
    FUZZ_ASSERT(packed);
    if (e->encoding == CKPT_EXTENT_ZSTD) {
        *out_n = ZSTD_compress(packed, cap, plain, n, 1);
        FUZZ_ASSERT(!ZSTD_isError(*out_n));
    } else {
        uLongf z = (uLongf)cap;
        FUZZ_ASSERT(compress2(packed, &z, plain, (uLong)n, 1) == Z_OK);
        *out_n = z;
    }
    free(plain);
    return packed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t ids;
    ckpt_h5_pipeline p;
    ckpt_extent e;
    ckpt_storage s;
    ckpt_file f;
    uint8_t *stored, *out;
    size_t es, want, stored_n, i;
    unsigned mask;
    int round_trip, rc;
    char why[256];

    if (size < HEAD)
        return 0;
    memset(&p, 0, sizeof p);
    p.n = data[0] % 5;
    for (i = 0; i < p.n; i++)
        p.id[i] = data[1 + i] < 200 ? known[data[1 + i] % 5] : data[1 + i] * 257u;
    mask = data[5];
    es = 1 + data[6] % 8;
    round_trip = data[7] & 1;
    want = (size_t)(data[7] >> 1) * 97;
    data += HEAD;
    size -= HEAD;
    memset(&e, 0, sizeof e);
    if (ckpt_hdf5__chunk_encoding(&p, mask, es, &e, why, sizeof why) < 0) {
        FUZZ_ASSERT(why[0] != '\0');
        return 0;
    }
    if (round_trip) {
        e.flags = 0;
        want = size;
        stored = encode(&e, data, size, &stored_n);
    } else {
        stored_n = size;
        stored = malloc(size + 1);
        FUZZ_ASSERT(stored);
        memcpy(stored, data, size);
    }
    memset(&f, 0, sizeof f);
    f.path = "chunk";
    f.fd = -1;
    f.data = stored;
    f.size = stored_n;
    e.file = &f;
    e.offset = 0;
    e.stored_size = stored_n;
    e.size = want;
    memset(&s, 0, sizeof s);
    s.key = "fuzz";
    s.dtype = CKPT_DTYPE_U8;
    s.nbytes = want;
    s.n_extents = 1;
    s.extents = &e;
    s.id = ++ids;
    out = malloc(want + 1);
    FUZZ_ASSERT(out);
    rc = ckpt_storage_read(&s, 0, want, out);
    if (round_trip) {
        FUZZ_ASSERT(rc == 0);
        FUZZ_ASSERT(memcmp(out, data, want) == 0);
    } else if (rc == 0 && want > 3) {
        /* cached now: a second read of a piece gives the same bytes */
        uint8_t piece[3];
        FUZZ_ASSERT(ckpt_storage_read(&s, want - 3, 3, piece) == 0 && memcmp(piece, out + want - 3, 3) == 0);
    } else if (rc != 0) {
        FUZZ_ASSERT(rc == CKPT_EFORMAT || rc == CKPT_EIO || rc == CKPT_EUNSUPPORTED);
    }
    free(out);
    free(stored);
    return 0;
}
