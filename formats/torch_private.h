/* Shared by the files of the torch.save format module (torch.c, torch_storage.c,
 * torch_rebuild.c, torch_legacy.c, torch_write.c); nothing outside formats/torch*.c
 * includes it. */
#ifndef CKPT_FORMATS_TORCH_PRIVATE_H
#define CKPT_FORMATS_TORCH_PRIVATE_H

#if !defined(CKPT_BUILD) && !defined(CKPT_TEST)
#error "torch_private.h is internal to the torch format module"
#endif

#include <ckpt/sys/format.h>
#include <ckpt/sys/pickle.h>
#include <ckpt/sys/table.h>
#include <ckpt/sys/zip.h>

/* Nesting the tree walk accepts; the pickle reader caps containers at the same depth. */
#define CKPT_TORCH_MAX_DEPTH 512u

/* One storage key met in the persistent ids of a pickle. The storage is created with the
 * size the pid declares; its extent is filled in afterwards by the container reader (zip
 * record or legacy data section), which checks the real size against `storage->nbytes`. */
typedef struct ckpt_torch_storage_ref {
    const char *key;       /* the pid's key ("0", or a legacy pointer-like number) */
    ckpt_storage *storage;
    uint64_t numel;        /* as the pid declares it: elements, or bytes for UntypedStorage */
    const char *path;      /* key path of the first tensor using it, for messages */
    int bound;             /* extent filled in */
} ckpt_torch_storage_ref;

/* State of one interpretation pass over a pickle tree. */
typedef struct ckpt_torch_interp {
    ckpt_reader *reader;
    const char *file;          /* for messages */
    const char *key_prefix;    /* storage key prefix: "data/" in zips, "" in legacy files */
    int legacy;                /* accept 6-field pids with view metadata */
    int byteswap;              /* storages are big-endian */
    ckpt_torch_storage_ref *refs;
    size_t n_refs, cap_refs;
    ckpt_strmap by_key;        /* ref key -> index into refs */
    /* An archive inside another format (a DCP chunk) keeps its tensors here, for that
     * format to place, instead of in the reader's table. */
    int own_tensors;
    ckpt_tensor *tensors;
    size_t n_tensors, cap_tensors;
} ckpt_torch_interp;

/* A resolved persistent id. */
typedef struct ckpt_torch_pid {
    ckpt_torch_storage_ref *ref;
    int64_t view_offset; /* legacy storage views: elements into the root storage */
    int64_t limit;       /* elements the tensor may address from view_offset */
} ckpt_torch_pid;

static inline const char *ckpt_torch__shown(const char *path)
{
    return path && path[0] ? path : "top level";
}

/* torch_storage.c: the storage table and persistent ids. */
/* Set "<file>: <message> (<key path>)" and return code. */
int ckpt_torch__fail(const ckpt_torch_interp *in, int code, const char *path, const char *fmt, ...)
    CKPT_FORMAT_PRINTF(4, 5);
void ckpt_torch__interp_init(ckpt_torch_interp *in, ckpt_reader *r, const char *key_prefix, int legacy);
void ckpt_torch__interp_dispose(ckpt_torch_interp *in);
ckpt_torch_storage_ref *ckpt_torch__find_ref(const ckpt_torch_interp *in, const char *key);
/* Resolve a tensor's storage argument (a PERSID node), creating or reusing the storage of
 * its key. `*dtype` is the tensor's dtype when the call names one (v3), else
 * CKPT_DTYPE_INVALID and set from the storage class. */
int ckpt_torch__resolve_pid(ckpt_torch_interp *in, const ckpt_value *sv, const char *path, ckpt_dtype *dtype,
                            ckpt_torch_pid *info);
/* The legacy storage class name for a dtype ("FloatStorage"), or NULL for dtypes that torch
 * saves through UntypedStorage and _rebuild_tensor_v3 (float8, uint16/32/64). */
const char *ckpt_torch__storage_class(ckpt_dtype t);

/* torch_rebuild.c: turn every tensor construction under `root` into a CKPT_VAL_TENSOR node
 * in place (the original node is kept as u.tensor.source), adding tensors and storages to
 * the reader. Storages are left without extents: see ckpt_torch_storage_ref. */
int ckpt_torch__interpret(ckpt_torch_interp *in, ckpt_value *root);
/* Tensor `index` of a TENSOR node the interpretation made. */
ckpt_tensor *ckpt_torch__tensor(ckpt_torch_interp *in, size_t index);

/* torch.c: read the torch.save zip archive `f` (the reader's file, or a window on a larger
 * one) into *root, its tensors interpreted by `in` and their storages bound to its records. */
int ckpt_torch__read_archive(ckpt_torch_interp *in, const ckpt_file *f, ckpt_value **root);

/* Reader of the pre-1.6 stream of pickles (torch_legacy.c). */
int ckpt_torch__legacy_open(ckpt_reader *r);

/* Writer hooks (torch_write.c). */
/* A tensor as torch pickles it: _rebuild_tensor_v2 (v3 for the dtypes torch saves over an
 * UntypedStorage) of storage `key` holding storage_bytes bytes. */
int ckpt_torch__pickle_tensor(ckpt_pickler *p, ckpt_dtype dtype, const char *key, uint64_t storage_bytes,
                              int64_t offset, int ndim, const int64_t *shape, const int64_t *stride, int requires_grad);
/* End the pickle begun on p and append it (a stream without holes) to out; a whole value
 * pickled into out, its tensors through tensor_fn (NULL when it holds none). */
int ckpt_torch__pickle_finish(ckpt_pickler *p, ckpt_buf *out);
int ckpt_torch__pickle_value(const ckpt_value *v, int protocol, ckpt_pickler_tensor_fn tensor_fn, void *payload,
                             ckpt_buf *out);
/* The records of a torch.save archive named `archive` ("archive/") around its storages, in
 * torch's order: data.pkl, .format_version, .storage_alignment, byteorder, then (tail)
 * version. */
int ckpt_torch__archive_head(ckpt_zip_writer *zw, const char *archive, const void *pkl, size_t pkl_len);
int ckpt_torch__archive_tail(ckpt_zip_writer *zw, const char *archive);
/* Data files of a Distributed Checkpoint (torch_dcp_write.c): torch.save archives end to
 * end, one per tensor. The size of the archive of a tensor of `dtype` and `shape`, and the
 * writer hooks. */
int ckpt_torch__dcp_archive_size(ckpt_dtype dtype, int ndim, const int64_t *shape, uint64_t *size);
int ckpt_torch__dcp_write_begin(ckpt_writer *w);
int ckpt_torch__dcp_write_finish(ckpt_writer *w);
void ckpt_torch__dcp_write_free(ckpt_writer *w);
int ckpt_torch__write_begin(ckpt_writer *w);
int ckpt_torch__write_finish(ckpt_writer *w);
void ckpt_torch__write_free(ckpt_writer *w);

#endif
