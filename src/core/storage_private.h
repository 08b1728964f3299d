/* Sequential reading of a storage's logical bytes, shared by storage.c and tensor.c.
 * A cursor decodes each extent once from where it starts (compressed and text-encoded
 * extents cannot be entered in the middle), so a long read through a cursor costs one
 * pass however it is split into pieces. */
#ifndef CKPT_CORE_STORAGE_PRIVATE_H
#define CKPT_CORE_STORAGE_PRIVATE_H

#ifndef CKPT_BUILD
#error "storage_private.h is internal to the library"
#endif

#include <ckpt/tensor.h>

#define ZLIB_CONST
#include <zlib.h>

typedef struct ckpt_storage_cursor {
    const ckpt_storage *s;
    uint64_t pos;       /* logical offset of the next byte */
    size_t extent;      /* extent holding pos */
    uint64_t local;     /* decoded offset of pos inside that extent */
    uint64_t in_pos;    /* stored bytes of that extent consumed (DEFLATE, LATIN1_UTF8) */
    int entered;        /* the decoder of that extent has been positioned at `local` */
    int z_active;
    int z_done;         /* the deflate stream has ended */
    z_stream z;
} ckpt_storage_cursor;

/* Start at logical offset `off`. Never fails; errors come from the reads. */
void ckpt_storage__cursor_open(ckpt_storage_cursor *c, const ckpt_storage *s, uint64_t off);
/* The next `len` bytes, decoded and byteswapped. With byteswap, the cursor position and
 * `len` must be multiples of the swap unit. 0 or a negative error naming the storage. */
int ckpt_storage__cursor_read(ckpt_storage_cursor *c, void *dst, uint64_t len);
void ckpt_storage__cursor_close(ckpt_storage_cursor *c);

/* Like ckpt_storage_map, also giving the file and the file offset of the bytes (to
 * release their pages after use). */
const void *ckpt_storage__map(const ckpt_storage *s, uint64_t off, uint64_t len, const ckpt_file **file,
                              uint64_t *file_off);

/* ckpt_storage_read and ckpt_storage__map of a storage with a tiling (storage_tiled.c). */
int ckpt_storage__tiled_read(const ckpt_storage *s, uint64_t off, uint64_t len, void *dst);
const void *ckpt_storage__tiled_map(const ckpt_storage *s, uint64_t off, uint64_t len, const ckpt_file **file,
                                    uint64_t *file_off);

/* Hand back the pages of the mapped files that hold storage bytes [lo, hi), once they
 * have been read (for a tiled storage: of the tiles that lie wholly inside the range). */
void ckpt_storage__release_bytes(const ckpt_storage *s, uint64_t lo, uint64_t hi);
void ckpt_storage__tiled_release(const ckpt_storage *s, uint64_t lo, uint64_t hi);

/* Hand back the pages of file bytes [from, to) after a sequential read that started at
 * `start` (<= from). ckpt_file_release keeps pages that stick out of its range, so the
 * range is widened back over the page `from` falls in, never before `start`: read in
 * pieces, every page gets released once the read has passed it. */
void ckpt_storage__release(const ckpt_file *f, uint64_t start, uint64_t from, uint64_t to);

/* How many extents this thread has decoded whole (chunks: a cache miss each). */
uint64_t ckpt_storage__decodes(void);
/* Set the calling thread's decoded-extent cache limit (evicting down to it); returns the one
 * it replaces. A writer gives each of its threads a share of its memory budget. */
uint64_t ckpt_storage__cache_limit(uint64_t bytes);
/* The most bytes any thread's cache has held since the last reset (for tests). */
uint64_t ckpt_storage__cache_peak(void);
void ckpt_storage__cache_peak_reset(void);
/* `take` decoded bytes from `local` on of extent `index` of s, an extent decoded whole whose
 * stored bytes are `data` (storage_whole.c); through the calling thread's cache. */
int ckpt_storage__whole_read(const ckpt_storage *s, size_t index, const ckpt_extent *e, const uint8_t *data,
                             uint64_t local, unsigned char *out, uint64_t take);

#endif
