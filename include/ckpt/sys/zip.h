/* For format implementers: the zip container torch.save uses. */
#ifndef CKPT_SYS_ZIP_H
#define CKPT_SYS_ZIP_H

#include "../buf.h"
#include "io.h"

CKPT_BEGIN_DECL

typedef struct ckpt_zip_entry {
    const char *name;      /* NUL-terminated copy */
    uint64_t header_offset; /* of the local file header */
    uint64_t data_offset;  /* of the stored bytes, past the local header */
    uint64_t csize;        /* stored size */
    uint64_t usize;        /* size after inflating */
    uint32_t crc32;        /* from the central directory */
    uint16_t method;       /* 0 stored, 8 deflated; others are refused at open */
} ckpt_zip_entry;

typedef struct ckpt_zip ckpt_zip;

/* Parse the central directory (zip64 included) of a mapped file. Checks every offset and
 * size against the file, refuses encrypted entries, unknown methods, duplicate names and
 * local headers that disagree with the directory. Errors name the file and say what is
 * wrong ("truncated: central directory not found (partial download?)"). */
CKPT_EXTERN(int) ckpt_zip_open(ckpt_zip **out, const ckpt_file *f);
CKPT_EXTERN(void) ckpt_zip_close(ckpt_zip *z);
CKPT_EXTERN(size_t) ckpt_zip_count(const ckpt_zip *z);
CKPT_EXTERN(const ckpt_zip_entry *) ckpt_zip_entry_at(const ckpt_zip *z, size_t i);
/* Exact name lookup; NULL if absent. */
CKPT_EXTERN(const ckpt_zip_entry *) ckpt_zip_find(const ckpt_zip *z, const char *name);
/* Read a whole entry into `out` (inflating if deflated), checking the size; with
 * `check_crc` also the CRC-32. For small records (data.pkl, version). Replaces what `out`
 * held; on failure `out` is left empty. */
CKPT_EXTERN(int) ckpt_zip_read(const ckpt_zip *z, const ckpt_zip_entry *e, int check_crc, ckpt_buf *out);
/* Stream the entry through zlib and compare size and CRC-32 with the directory, in bounded
 * memory, releasing the pages read (ckpt_file_release). */
CKPT_EXTERN(int) ckpt_zip_verify(const ckpt_zip *z, const ckpt_zip_entry *e);
/* Describe an entry's bytes as a storage extent (RAW or DEFLATE). */
CKPT_EXTERN(void) ckpt_zip_extent(const ckpt_zip *z, const ckpt_zip_entry *e, ckpt_extent *out);

/* Writer producing what torch.save produces: stored entries, each data start aligned to
 * `align` bytes with an "FB" padding extra field, a data descriptor after every non-empty
 * entry, zip64 end records always. Entry data is written by the caller at the offset
 * returned by ckpt_zip_writer_add (possibly from several threads); the CRC comes back
 * through ckpt_zip_writer_set_crc before finish. */
typedef struct ckpt_zip_writer ckpt_zip_writer;

CKPT_EXTERN(int) ckpt_zip_writer_new(ckpt_zip_writer **out, ckpt_outfile *f, uint64_t start, unsigned align);
/* An archive at byte `base` of f whose offsets count from its own start, as torch.load sees
 * a byte range of a larger file (PyTorch Distributed Checkpoint data files). With f NULL
 * nothing is written: the archive is only laid out (CRCs need not be given), and
 * ckpt_zip_writer_tell after finish is its size. */
CKPT_EXTERN(int) ckpt_zip_writer_new_embedded(ckpt_zip_writer **out, ckpt_outfile *f, uint64_t base, unsigned align);
/* An archive built in memory: `mem` is emptied and receives its bytes; an entry's data
 * (at mem->data + data_offset) may be filled in as soon as it is added. */
CKPT_EXTERN(int) ckpt_zip_writer_new_mem(ckpt_zip_writer **out, ckpt_buf *mem, unsigned align);
/* Reserve an entry of `size` bytes; *data_offset receives where its data goes. Returns the
 * entry index (>= 0) or a negative error. Names must be unique (readers refuse duplicates);
 * the writer does not check. */
CKPT_EXTERN(int) ckpt_zip_writer_add(ckpt_zip_writer *w, const char *name, uint64_t size, uint64_t *data_offset);
/* Add and write a small entry in one go (CRC computed here). */
CKPT_EXTERN(int) ckpt_zip_writer_add_bytes(ckpt_zip_writer *w, const char *name, const void *data, size_t len);
/* Every non-empty entry needs its CRC before finish. May be called from several threads for
 * different entries, but not while an entry is being added. */
CKPT_EXTERN(void) ckpt_zip_writer_set_crc(ckpt_zip_writer *w, int entry, uint32_t crc);
/* Offset just past everything reserved so far; once finished, the archive's size (from
 * its start, or from offset 0 of the file for ckpt_zip_writer_new's `start`). */
CKPT_EXTERN(uint64_t) ckpt_zip_writer_tell(const ckpt_zip_writer *w);
/* Write data descriptors, central directory, zip64 records and the end record. */
CKPT_EXTERN(int) ckpt_zip_writer_finish(ckpt_zip_writer *w);
CKPT_EXTERN(void) ckpt_zip_writer_free(ckpt_zip_writer *w);

CKPT_END_DECL

#endif
