/* Tiled storages: a whole array read out of the boxes it was saved in. A range of the
 * array's C-order bytes is cut into runs, each the longest stretch that stays inside one
 * tile and is contiguous there too; each run is a plain read of the tile's source. A tile
 * that spans the whole of its inner axes gives runs of many rows; one cut across the last
 * axis gives a run per row. */
#include "storage_private.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/format.h>

#include <stdio.h>
#include <string.h>

static const char *tiled_key(const ckpt_storage *s)
{
    return s->key ? s->key : "(unnamed)";
}

static int tile_holds(const ckpt_tile *t, const int64_t *idx, int ndim)
{
    int d;

    for (d = 0; d < ndim; d++)
        if (idx[d] < t->offset[d] || idx[d] >= t->offset[d] + t->size[d])
            return 0;
    return 1;
}

static int regular_grid(const ckpt_tiling *g)
{
    return g->ndim > 0 && g->chunk[0] > 0;
}

/* Reads go forward, so the tile after the last one used is the likely next. */
static const ckpt_tile *tile_at(const ckpt_tiling *g, const int64_t *idx, size_t *hint)
{
    size_t i;

    if (regular_grid(g)) {
        uint64_t cell = 0;
        int d;
        for (d = 0; d < g->ndim; d++)
            cell = cell * (uint64_t)((g->shape[d] + g->chunk[d] - 1) / g->chunk[d]) + (uint64_t)(idx[d] / g->chunk[d]);
        return cell < g->n_tiles && tile_holds(&g->tiles[cell], idx, g->ndim) ? &g->tiles[cell] : NULL;
    }

    if (*hint < g->n_tiles && tile_holds(&g->tiles[*hint], idx, g->ndim))
        return &g->tiles[*hint];
    if (*hint + 1 < g->n_tiles && tile_holds(&g->tiles[*hint + 1], idx, g->ndim))
        return &g->tiles[++*hint];
    for (i = 0; i < g->n_tiles; i++)
        if (tile_holds(&g->tiles[i], idx, g->ndim)) {
            *hint = i;
            return &g->tiles[i];
        }
    return NULL;
}

static void unravel(const ckpt_tiling *g, uint64_t linear, int64_t *idx)
{
    int d;

    for (d = g->ndim - 1; d >= 0; d--) {
        idx[d] = g->shape[d] ? (int64_t)(linear % (uint64_t)g->shape[d]) : 0;
        linear = g->shape[d] ? linear / (uint64_t)g->shape[d] : 0;
    }
}

/* How many elements the tile's run holds along axis d (its size unless stored larger). */
static int64_t tile_stored(const ckpt_tile *t, int d)
{
    return t->stored[d] ? t->stored[d] : t->size[d];
}

/* Elements from idx on that are contiguous both in the whole array and in tile t, and
 * where the first of them lies in t's run (C order over its stored box). */
static uint64_t run_in_tile(const ckpt_tiling *g, const ckpt_tile *t, const int64_t *idx, uint64_t *local)
{
    uint64_t run = 1, span = 1, stride = 1;
    int d, whole = 1;

    *local = 0;
    for (d = g->ndim - 1; d >= 0; d--) {
        *local += (uint64_t)(idx[d] - t->offset[d]) * stride;
        stride *= (uint64_t)tile_stored(t, d);
    }
    /* rows continue into the next only where neither the array nor the run has more along
     * the axis than the tile */
    for (d = g->ndim - 1; d >= 0 && whole; d--) {
        run = (uint64_t)(t->offset[d] + t->size[d] - idx[d]) * span;
        whole = t->size[d] == g->shape[d] && idx[d] == 0 && tile_stored(t, d) == t->size[d];
        span *= (uint64_t)g->shape[d];
    }
    return run;
}

int ckpt_storage__tiled_read(const ckpt_storage *s, uint64_t off, uint64_t len, void *dst)
{
    const ckpt_tiling *g = s->tiling;
    size_t es = ckpt_dtype_size(s->dtype), hint = 0;
    unsigned char *out = dst;
    uint64_t at, left, end;
    int64_t idx[CKPT_MAX_DIMS];
    int rc;

    if (es == 0 || off % es || len % es)
        return ckpt_error_set(CKPT_EINVALID, "tiled storage '%s': %llu bytes at %llu are not whole elements",
                              tiled_key(s), (unsigned long long)len, (unsigned long long)off);
    if (CKPT_ADD_OVERFLOWS(off, len, &end) || end > s->nbytes)
        return ckpt_error_set(CKPT_EFORMAT, "tiled storage '%s': bytes [%llu, +%llu) are past its end (%llu bytes)",
                              tiled_key(s), (unsigned long long)off, (unsigned long long)len,
                              (unsigned long long)s->nbytes);
    at = off / es;
    left = len / es;
    while (left > 0) {
        const ckpt_tile *t;
        uint64_t local, run;

        unravel(g, at, idx);
        if (!(t = tile_at(g, idx, &hint)))
            return ckpt_error_set(CKPT_EFORMAT, "tiled storage '%s': element %llu is in no tile", tiled_key(s),
                                  (unsigned long long)at);
        run = run_in_tile(g, t, idx, &local);
        if (run > left)
            run = left;
        if ((rc = ckpt_storage_read(t->source, t->source_offset + local * es, run * es, out)) < 0)
            return rc;
        out += run * es;
        at += run;
        left -= run;
    }
    return 0;
}

const void *ckpt_storage__tiled_map(const ckpt_storage *s, uint64_t off, uint64_t len, const ckpt_file **file,
                                    uint64_t *file_off)
{
    const ckpt_tiling *g = s->tiling;
    size_t es = ckpt_dtype_size(s->dtype), hint = 0;
    const ckpt_tile *t;
    int64_t idx[CKPT_MAX_DIMS];
    uint64_t local, run;

    if (es == 0 || off % es || len % es || off >= s->nbytes)
        return NULL;
    unravel(g, off / es, idx);
    if (!(t = tile_at(g, idx, &hint)))
        return NULL;
    run = run_in_tile(g, t, idx, &local);
    if (len > run * es)
        return NULL;
    return ckpt_storage__map(t->source, t->source_offset + local * es, len, file, file_off);
}

/* Element index of a tile's first (or, with `last`, last) element in the whole array. */
static uint64_t tile_corner(const ckpt_tiling *g, const ckpt_tile *t, int last)
{
    uint64_t linear = 0;
    int d;

    for (d = 0; d < g->ndim; d++)
        linear = linear * (uint64_t)g->shape[d] + (uint64_t)(t->offset[d] + (last ? t->size[d] - 1 : 0));
    return linear;
}

void ckpt_storage__tiled_release(const ckpt_storage *s, uint64_t lo, uint64_t hi)
{
    const ckpt_tiling *g = s->tiling;
    size_t es = ckpt_dtype_size(s->dtype), i;
    int d, empty;

    if (es == 0)
        return;
    for (i = 0; i < g->n_tiles; i++) {
        const ckpt_tile *t = &g->tiles[i];
        uint64_t n = 1;
        for (d = 0, empty = 0; d < g->ndim; d++) {
            empty |= t->size[d] == 0;
            n *= (uint64_t)tile_stored(t, d);
        }
        if (!empty && tile_corner(g, t, 0) * es >= lo && (tile_corner(g, t, 1) + 1) * es <= hi)
            ckpt_storage__release_bytes(t->source, t->source_offset, t->source_offset + n * es);
    }
}

static int boxes_meet(const ckpt_tile *a, const ckpt_tile *b, int ndim)
{
    int d;

    for (d = 0; d < ndim; d++)
        if (!a->size[d] || !b->size[d] || a->offset[d] >= b->offset[d] + b->size[d] ||
            b->offset[d] >= a->offset[d] + a->size[d])
            return 0;
    return 1;
}

int ckpt_tiling_check_boxes(const ckpt_tiling *g, const char *what, int code, uint64_t *elements)
{
    uint64_t whole = 1, covered = 0;
    size_t i, j;
    int d;

    if (g->ndim < 0 || g->ndim > CKPT_MAX_DIMS)
        return ckpt_error_set(code, "%s: %d dimensions", what, g->ndim);
    for (d = 0; d < g->ndim; d++)
        if (g->shape[d] < 0 || CKPT_MUL_OVERFLOWS(whole, (uint64_t)g->shape[d], &whole))
            return ckpt_error_set(code, "%s: bad shape (axis %d)", what, d);
    for (i = 0; i < g->n_tiles; i++) {
        const ckpt_tile *t = &g->tiles[i];
        uint64_t n = 1;
        for (d = 0; d < g->ndim; d++) {
            if (t->offset[d] < 0 || t->size[d] < 0 || t->offset[d] > g->shape[d] ||
                t->size[d] > g->shape[d] - t->offset[d])
                return ckpt_error_set(code, "%s: chunk %zu ([%lld, +%lld) on axis %d) lies outside the tensor (%lld)",
                                      what, i, (long long)t->offset[d], (long long)t->size[d], d,
                                      (long long)g->shape[d]);
            n *= (uint64_t)t->size[d];
        }
        for (j = 0; j < i && n; j++)
            if (boxes_meet(t, &g->tiles[j], g->ndim))
                return ckpt_error_set(code, "%s: chunks %zu and %zu overlap", what, j, i);
        covered += n;
    }
    if (covered != whole)
        return ckpt_error_set(code, "%s: its chunks hold %llu of its %llu elements", what,
                              (unsigned long long)covered, (unsigned long long)whole);
    if (elements)
        *elements = whole;
    return 0;
}

/* A regular grid: one tile per cell, in C order, each at its cell's corner and no larger. */
static int check_grid(const ckpt_tiling *g, const char *what)
{
    int64_t cell[CKPT_MAX_DIMS];
    uint64_t cells = 1;
    size_t i;
    int d;

    for (d = 0; d < g->ndim; d++) {
        if (g->chunk[d] <= 0)
            return ckpt_error_set(CKPT_EFORMAT, "%s: grid chunk shape is %lld along axis %d", what,
                                  (long long)g->chunk[d], d);
        cell[d] = 0;
        cells *= (uint64_t)((g->shape[d] + g->chunk[d] - 1) / g->chunk[d]);
    }
    if (cells != g->n_tiles)
        return ckpt_error_set(CKPT_EFORMAT, "%s: %zu chunks for a grid of %llu", what, g->n_tiles,
                              (unsigned long long)cells);
    for (i = 0; i < g->n_tiles; i++) {
        for (d = 0; d < g->ndim; d++)
            if (g->tiles[i].offset[d] != cell[d] * g->chunk[d] || g->tiles[i].size[d] > g->chunk[d])
                return ckpt_error_set(CKPT_EFORMAT, "%s: chunk %zu is not the grid's cell %zu", what, i, i);
        for (d = g->ndim - 1; d >= 0 && ++cell[d] * g->chunk[d] >= g->shape[d]; d--)
            cell[d] = 0;
    }
    return 0;
}

int ckpt_storage_tiling_check(ckpt_storage *s)
{
    const ckpt_tiling *g = s->tiling;
    size_t es = ckpt_dtype_size(s->dtype), i;
    uint64_t whole, bytes;
    char what[256];
    int d, rc;

    if (!g || es == 0 || s->n_extents || s->byteswap)
        return ckpt_error_set(CKPT_EINVALID, "tiled storage '%s': no tiling, no dtype, or extents too", tiled_key(s));
    snprintf(what, sizeof what, "tiled storage '%s'", tiled_key(s));
    if ((rc = ckpt_tiling_check_boxes(g, what, CKPT_EFORMAT, &whole)) < 0)
        return rc;
    if (regular_grid(g) && (rc = check_grid(g, what)) < 0)
        return rc;
    for (i = 0; i < g->n_tiles; i++) {
        const ckpt_tile *t = &g->tiles[i];
        uint64_t n = 1, stored = 1, need, end;
        for (d = 0; d < g->ndim; d++) {
            int64_t k = tile_stored(t, d);
            if (k < t->size[d] || CKPT_MUL_OVERFLOWS(stored, (uint64_t)k, &stored))
                return ckpt_error_set(CKPT_EFORMAT, "%s: chunk %zu is stored as %lld elements along axis %d "
                                      "for its %lld",
                                      what, i, (long long)t->stored[d], d, (long long)t->size[d]);
            n *= (uint64_t)t->size[d];
        }
        if (n == 0)
            continue;
        n = stored;
        if (!t->source || t->source->dtype != s->dtype || CKPT_MUL_OVERFLOWS(n, es, &need) ||
            CKPT_ADD_OVERFLOWS(t->source_offset, need, &end) || end > t->source->nbytes)
            return ckpt_error_set(CKPT_EFORMAT, "%s: chunk %zu needs %llu bytes of %s at %llu; its storage '%s' holds "
                                  "%llu bytes of %s",
                                  what, i, (unsigned long long)n * es, ckpt_dtype_name(s->dtype),
                                  (unsigned long long)t->source_offset,
                                  t->source && t->source->key ? t->source->key : "(none)",
                                  t->source ? (unsigned long long)t->source->nbytes : 0ull,
                                  t->source ? ckpt_dtype_name(t->source->dtype) : "nothing");
    }
    if (CKPT_MUL_OVERFLOWS(whole, es, &bytes))
        return ckpt_error_set(CKPT_EFORMAT, "%s: too large", what);
    s->nbytes = bytes;
    return 0;
}
