/* What `inspect` says of a storage: chunked or not, in what boxes, encoded how, and how many
 * bytes the file spends on it. */
#include <ckpt/sys/common.h>
#include <ckpt/tensor.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void add_extents(const ckpt_storage *s, ckpt_storage_summary *out)
{
    size_t i;

    for (i = 0; i < s->n_extents; i++) {
        const ckpt_extent *e = &s->extents[i];
        out->stored_bytes += e->stored_size;
        out->encodings |= 1u << e->encoding;
        out->shuffled |= e->shuffle > 1;
        out->checksummed |= (e->flags & CKPT_EXTENT_FLETCHER32) != 0;
    }
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const ckpt_storage *const *)a, y = (uintptr_t) * (const ckpt_storage *const *)b;
    return x < y ? -1 : x > y;
}

int ckpt_storage_summarize(const ckpt_storage *s, ckpt_storage_summary *out)
{
    const ckpt_storage **sources;
    size_t i, n;
    int d;

    memset(out, 0, sizeof *out);
    if (!s)
        return 0;
    out->bytes = s->nbytes;
    if (!s->tiling) {
        add_extents(s, out);
        return 0;
    }
    n = s->tiling->n_tiles;
    out->n_chunks = n;
    if (!n)
        return 0;
    out->chunk_ndim = s->tiling->ndim;
    for (d = 0; d < s->tiling->ndim; d++)
        out->chunk[d] = s->tiling->tiles[0].stored[d] ? s->tiling->tiles[0].stored[d] : s->tiling->tiles[0].size[d];
    /* tiles may share a source storage (one per file, cut into runs): count each once */
    if (!(sources = malloc(n * sizeof *sources)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++)
        sources[i] = s->tiling->tiles[i].source;
    qsort(sources, n, sizeof *sources, by_address);
    for (i = 0; i < n; i++)
        if (sources[i] && (i == 0 || sources[i] != sources[i - 1]))
            add_extents(sources[i], out);
    free(sources);
    return 0;
}
