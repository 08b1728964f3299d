/* The data files of a Distributed Checkpoint, as torch's FileSystemWriter writes them:
 * one torch.save archive per tensor chunk, end to end, each read back by torch.load of its
 * byte range (so each archive counts its zip offsets from its own start). An archive is
 * named "archive/" (torch.save into a BytesIO) and holds its tensor as storage "0".
 *
 * The layout of a file depends only on the dtypes and shapes of its tensors, so whoever
 * writes `.metadata` learns each chunk's offset and length before the data is written
 * (ckpt_torch__dcp_archive_size, laid out by the same code that writes it). */
#include "torch_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DCP_ALIGN 64
#define DCP_ARCHIVE "archive/"

typedef struct dcp_writer {
    ckpt_zip_writer **zips; /* per tensor */
    int *entries;           /* per tensor: its data record, -1 when empty */
    int *placements;        /* per tensor: the engine placement, -1 when empty */
    size_t n;
} dcp_writer;

/* The archive's data.pkl: the tensor as storage "0", C order. */
static int tensor_pickle(const ckpt_tensor *t, ckpt_buf *pkl)
{
    ckpt_pickler *p = NULL;
    int rc = ckpt_pickler_new(&p, 2, NULL, NULL);

    if (rc >= 0)
        rc = ckpt_pickler_begin(p);
    if (rc >= 0)
        rc = ckpt_torch__pickle_tensor(p, t->dtype, "0", ckpt_tensor_nbytes(t), 0, t->ndim, t->shape, t->stride, 0);
    if (rc >= 0)
        rc = ckpt_torch__pickle_finish(p, pkl);
    ckpt_pickler_free(p);
    return rc < 0 ? rc : 0;
}

/* The records of one tensor's archive; *data_off and *entry: where its bytes go. */
static int add_archive(ckpt_zip_writer *zw, ckpt_dtype dtype, int ndim, const int64_t *shape, uint64_t *data_off,
                       int *entry)
{
    ckpt_buf pkl = CKPT_BUF_INIT;
    ckpt_tensor t;
    int rc;

    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = ndim;
    memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
    ckpt_tensor_set_contiguous(&t);
    rc = tensor_pickle(&t, &pkl);

    if (rc >= 0)
        rc = ckpt_torch__archive_head(zw, DCP_ARCHIVE, pkl.data, pkl.len);
    if (rc >= 0)
        rc = *entry = ckpt_zip_writer_add(zw, DCP_ARCHIVE "data/0", ckpt_tensor_nbytes(&t), data_off);
    if (rc >= 0)
        rc = ckpt_torch__archive_tail(zw, DCP_ARCHIVE);
    ckpt_buf_dispose(&pkl);
    return rc < 0 ? rc : 0;
}

int ckpt_torch__dcp_archive_size(ckpt_dtype dtype, int ndim, const int64_t *shape, uint64_t *size)
{
    ckpt_zip_writer *zw = NULL;
    uint64_t off;
    int entry, rc = ckpt_zip_writer_new_embedded(&zw, NULL, 0, DCP_ALIGN);

    if (rc >= 0)
        rc = add_archive(zw, dtype, ndim, shape, &off, &entry);
    if (rc >= 0)
        rc = ckpt_zip_writer_finish(zw);
    if (rc >= 0)
        *size = ckpt_zip_writer_tell(zw);
    ckpt_zip_writer_free(zw);
    return rc < 0 ? rc : 0;
}

int ckpt_torch__dcp_write_begin(ckpt_writer *w)
{
    const ckpt_out *out = ckpt_writer_out(w);
    dcp_writer *dw = calloc(1, sizeof *dw);
    uint64_t base = 0, size;
    size_t i;
    int rc = 0;

    if (!dw)
        return ckpt_error_oom();
    *ckpt_writer_state(w) = dw;
    dw->zips = calloc(out->n_tensors ? out->n_tensors : 1, sizeof *dw->zips);
    dw->entries = calloc(out->n_tensors ? out->n_tensors : 1, sizeof *dw->entries);
    dw->placements = calloc(out->n_tensors ? out->n_tensors : 1, sizeof *dw->placements);
    if (!dw->zips || !dw->entries || !dw->placements)
        return ckpt_error_oom();
    dw->n = out->n_tensors;
    for (i = 0; i < out->n_tensors && rc == 0; i++) {
        const ckpt_out_tensor *t = &out->tensors[i];
        uint64_t off;
        dw->placements[i] = -1;
        if ((rc = ckpt_torch__dcp_archive_size(t->dtype, t->ndim, t->shape, &size)) < 0 ||
            (rc = ckpt_zip_writer_new_embedded(&dw->zips[i], ckpt_writer_file(w), base, DCP_ALIGN)) < 0 ||
            (rc = add_archive(dw->zips[i], t->dtype, t->ndim, t->shape, &off, &dw->entries[i])) < 0)
            break;
        if (out->blobs[t->blob].nbytes) {
            rc = ckpt_writer_place(w, t->blob, 0, out->blobs[t->blob].nbytes, base + off, CKPT_EXTENT_RAW);
            if (rc >= 0) {
                dw->placements[i] = rc;
                rc = 0;
            }
        }
        base += size;
    }
    return rc;
}

int ckpt_torch__dcp_write_finish(ckpt_writer *w)
{
    dcp_writer *dw = *ckpt_writer_state(w);
    size_t i;
    int rc = 0;

    for (i = 0; i < dw->n && rc == 0; i++) {
        if (dw->placements[i] >= 0)
            ckpt_zip_writer_set_crc(dw->zips[i], dw->entries[i], ckpt_writer_placement_crc(w, dw->placements[i]));
        rc = ckpt_zip_writer_finish(dw->zips[i]);
    }
    return rc;
}

void ckpt_torch__dcp_write_free(ckpt_writer *w)
{
    void **state = ckpt_writer_state(w);
    dcp_writer *dw = *state;
    size_t i;

    if (!dw)
        return;
    for (i = 0; i < dw->n; i++)
        ckpt_zip_writer_free(dw->zips[i]);
    free(dw->zips);
    free(dw->entries);
    free(dw->placements);
    free(dw);
    *state = NULL;
}
