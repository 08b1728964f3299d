/* Tiled storages: a whole array stitched from chunks cut along rows, columns or both, read
 * whole, in pieces, through views and mappings; bad tilings refused by the check. */
#include "core_fixture.h"

#include <ckpt/sys/format.h>

#define ROWS 5
#define COLS 6

typedef struct grid {
    mapped m;
    ckpt_extent e[4];
    ckpt_storage src[4];
    ckpt_tile tiles[4];
    ckpt_tiling tiling;
    ckpt_storage s;
    float whole[ROWS][COLS];
} grid;

/* A 5x6 array cut into rows 0..2 | 3..4 and columns 0..3 | 4..5, each chunk stored in C
 * order at its own place in one file, out of order and unaligned. */
static void grid_init(grid *g)
{
    static const int64_t row0[4] = { 0, 0, 3, 3 }, rows[4] = { 3, 3, 2, 2 };
    static const int64_t col0[4] = { 0, 4, 0, 4 }, cols[4] = { 4, 2, 4, 2 };
    static const uint64_t at[4] = { 301, 3, 170, 90 };
    uint8_t file[400];
    int i, r, c;

    memset(g, 0, sizeof *g);
    memset(file, 0xEE, sizeof file);
    for (r = 0; r < ROWS; r++)
        for (c = 0; c < COLS; c++)
            g->whole[r][c] = (float)(r * 10 + c);
    for (i = 0; i < 4; i++) {
        uint64_t n = 0;
        for (r = 0; r < rows[i]; r++)
            for (c = 0; c < cols[i]; c++, n++)
                memcpy(file + at[i] + n * 4, &g->whole[row0[i] + r][col0[i] + c], 4);
    }
    ASSERT_OK(map_file(&g->m, "tiles.bin", file, sizeof file));
    for (i = 0; i < 4; i++) {
        uint64_t bytes = (uint64_t)(rows[i] * cols[i]) * 4;
        extent_set(&g->e[i], &g->m, at[i], bytes, bytes, CKPT_EXTENT_RAW);
        g->src[i].key = "chunk";
        g->src[i].dtype = CKPT_DTYPE_F32;
        g->src[i].nbytes = bytes;
        g->src[i].n_extents = 1;
        g->src[i].extents = &g->e[i];
        g->tiles[i].offset[0] = row0[i];
        g->tiles[i].offset[1] = col0[i];
        g->tiles[i].size[0] = rows[i];
        g->tiles[i].size[1] = cols[i];
        g->tiles[i].source = &g->src[i];
    }
    g->tiling.ndim = 2;
    g->tiling.shape[0] = ROWS;
    g->tiling.shape[1] = COLS;
    g->tiling.n_tiles = 4;
    g->tiling.tiles = g->tiles;
    g->s.key = "w";
    g->s.dtype = CKPT_DTYPE_F32;
    g->s.tiling = &g->tiling;
}

CKPT_TEST(test_tiled_storage_reads_the_whole_array_in_c_order)
{
    grid g;
    float got[ROWS * COLS];
    double wide[ROWS * COLS];
    int64_t shape[2] = { ROWS, COLS };
    ckpt_tensor t;
    int i;

    grid_init(&g);
    ASSERT_OK(ckpt_storage_tiling_check(&g.s));
    ASSERT_EQ_INT((int)g.s.nbytes, ROWS * COLS * 4);
    ASSERT_OK(ckpt_storage_read(&g.s, 0, g.s.nbytes, got));
    ASSERT_TRUE(memcmp(got, g.whole, sizeof got) == 0);
    /* pieces starting and ending inside rows and chunks */
    memset(got, 0, sizeof got);
    ASSERT_OK(ckpt_storage_read(&g.s, 3 * 4, 17 * 4, got));
    ASSERT_TRUE(memcmp(got, &g.whole[0][3], 17 * 4) == 0);
    tensor_init(&t, "w", CKPT_DTYPE_F32, &g.s, 2, shape);
    ASSERT_OK(ckpt_tensor_read(&t, 0, ROWS * COLS, CKPT_DTYPE_F64, wide));
    for (i = 0; i < ROWS * COLS; i++)
        ASSERT_TRUE(wide[i] == (double)g.whole[i / COLS][i % COLS]);
    unmap_file(&g.m);
}

CKPT_TEST(test_tiled_storage_serves_strided_views_and_maps_runs)
{
    grid g;
    float got[ROWS * COLS];
    ckpt_tensor t;
    int64_t shape[2] = { ROWS, COLS };
    const void *p;
    int r, c;

    grid_init(&g);
    ASSERT_OK(ckpt_storage_tiling_check(&g.s));
    /* the transpose reads every chunk across its rows */
    tensor_init(&t, "w.T", CKPT_DTYPE_F32, &g.s, 2, shape);
    t.shape[0] = COLS;
    t.shape[1] = ROWS;
    t.stride[0] = 1;
    t.stride[1] = COLS;
    ASSERT_OK(ckpt_tensor_read(&t, 0, ROWS * COLS, CKPT_DTYPE_F32, got));
    for (c = 0; c < COLS; c++)
        for (r = 0; r < ROWS; r++)
            ASSERT_TRUE(got[c * ROWS + r] == g.whole[r][c]);
    /* a run inside one chunk maps straight to the file; one across chunks does not */
    p = ckpt_storage_map(&g.s, (uint64_t)(COLS + 1) * 4, 3 * 4);
    ASSERT_TRUE(p != NULL);
    memcpy(got, p, 3 * 4); /* the chunk lies unaligned in the file */
    ASSERT_TRUE(got[0] == g.whole[1][1] && got[2] == g.whole[1][3]);
    ASSERT_TRUE(ckpt_storage_map(&g.s, (uint64_t)(COLS + 3) * 4, 2 * 4) == NULL);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_storage_read(&g.s, 2, 4, got));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_read(&g.s, 4, g.s.nbytes, got));
    unmap_file(&g.m);
}

/* Chunks that span every inner axis are read in runs of many rows. */
CKPT_TEST(test_tiled_storage_layer_chunks_read_in_long_runs)
{
    enum { L = 3, R = 4, C = 5 };
    int32_t vals[L * R * C], got[L * R * C];
    mapped m;
    ckpt_extent e[L];
    ckpt_storage src[L], s;
    ckpt_tile tiles[L];
    ckpt_tiling tiling;
    int i;

    for (i = 0; i < L * R * C; i++)
        vals[i] = i * 7 - 3;
    ASSERT_OK(map_file(&m, "layers.bin", vals, sizeof vals));
    memset(src, 0, sizeof src);
    memset(tiles, 0, sizeof tiles);
    memset(&tiling, 0, sizeof tiling);
    memset(&s, 0, sizeof s);
    for (i = 0; i < L; i++) {
        /* layer i is stored at layer (L-1-i)'s place in the file */
        extent_set(&e[i], &m, (uint64_t)(L - 1 - i) * R * C * 4, R * C * 4, R * C * 4, CKPT_EXTENT_RAW);
        src[i].dtype = CKPT_DTYPE_I32;
        src[i].nbytes = R * C * 4;
        src[i].n_extents = 1;
        src[i].extents = &e[i];
        tiles[i].offset[0] = i;
        tiles[i].size[0] = 1;
        tiles[i].size[1] = R;
        tiles[i].size[2] = C;
        tiles[i].source = &src[i];
    }
    tiling.ndim = 3;
    tiling.shape[0] = L;
    tiling.shape[1] = R;
    tiling.shape[2] = C;
    tiling.n_tiles = L;
    tiling.tiles = tiles;
    s.dtype = CKPT_DTYPE_I32;
    s.tiling = &tiling;
    ASSERT_OK(ckpt_storage_tiling_check(&s));
    ASSERT_OK(ckpt_storage_read(&s, 0, sizeof got, got));
    for (i = 0; i < L * R * C; i++)
        ASSERT_EQ_INT(got[i], vals[((L - 1 - i / (R * C)) * R * C) + i % (R * C)]);
    ASSERT_TRUE(ckpt_storage_map(&s, (uint64_t)R * C * 4, (uint64_t)R * C * 4) ==
                (const void *)(m.f.data + (uint64_t)(L - 2) * R * C * 4));
    unmap_file(&m);
}

CKPT_TEST(test_tiled_storage_check_refuses_bad_tilings)
{
    grid g;

    grid_init(&g);
    g.tiles[1].offset[1] = 3; /* overlaps chunk 0 and leaves column 5 bare */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_tiling_check(&g.s));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "overlap") != NULL);
    unmap_file(&g.m);

    grid_init(&g);
    g.tiling.n_tiles = 3; /* rows 3..4, columns 4..5 missing */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_tiling_check(&g.s));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "26 of its 30") != NULL);
    unmap_file(&g.m);

    grid_init(&g);
    g.tiles[3].size[1] = 3; /* past the last column */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_tiling_check(&g.s));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "outside") != NULL);
    unmap_file(&g.m);

    grid_init(&g);
    g.src[2].nbytes = 8; /* a chunk cut short */
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_tiling_check(&g.s));
    unmap_file(&g.m);

    grid_init(&g);
    g.src[0].dtype = CKPT_DTYPE_F16;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_tiling_check(&g.s));
    unmap_file(&g.m);
}

/* A 3x5 array in a grid of 2x2 chunks, each stored whole (edge chunks padded with junk), one
 * chunk never written and read as a fill of 9s. */
CKPT_TEST(test_tiled_storage_stored_boxes_and_fill)
{
    static const uint8_t nine = 9;
    uint8_t file[64], got[15], want[15];
    mapped m;
    ckpt_extent e[6], fill;
    ckpt_storage src[6], fills, s;
    ckpt_tile tiles[6];
    ckpt_tiling g;
    int i, r, c;

    memset(file, 0xEE, sizeof file);
    memset(tiles, 0, sizeof tiles);
    memset(&g, 0, sizeof g);
    memset(&s, 0, sizeof s);
    for (r = 0; r < 3; r++)
        for (c = 0; c < 5; c++) {
            int cell = (r / 2) * 3 + c / 2;
            want[r * 5 + c] = cell == 4 ? 9 : (uint8_t)(r * 5 + c);
            file[cell * 4 + (r % 2) * 2 + c % 2] = (uint8_t)(r * 5 + c);
        }
    file[40] = nine;
    ASSERT_OK(map_file(&m, "grid.bin", file, sizeof file));
    extent_set(&fill, &m, 40, 1, 4, CKPT_EXTENT_FILL);
    memset(&fills, 0, sizeof fills);
    fills.key = "fill";
    fills.dtype = CKPT_DTYPE_U8;
    fills.nbytes = 4;
    fills.n_extents = 1;
    fills.extents = &fill;
    for (i = 0; i < 6; i++) {
        extent_set(&e[i], &m, (uint64_t)i * 4, 4, 4, CKPT_EXTENT_RAW);
        memset(&src[i], 0, sizeof src[i]);
        src[i].key = "chunk";
        src[i].dtype = CKPT_DTYPE_U8;
        src[i].nbytes = 4;
        src[i].n_extents = 1;
        src[i].extents = &e[i];
        tiles[i].offset[0] = (i / 3) * 2;
        tiles[i].offset[1] = (i % 3) * 2;
        tiles[i].size[0] = i / 3 ? 1 : 2;
        tiles[i].size[1] = i % 3 == 2 ? 1 : 2;
        tiles[i].stored[0] = tiles[i].stored[1] = 2;
        tiles[i].source = i == 4 ? &fills : &src[i];
    }
    g.ndim = 2;
    g.shape[0] = 3;
    g.shape[1] = 5;
    g.n_tiles = 6;
    g.tiles = tiles;
    g.chunk[0] = g.chunk[1] = 2;
    s.key = "padded";
    s.dtype = CKPT_DTYPE_U8;
    s.tiling = &g;
    ASSERT_OK(ckpt_storage_tiling_check(&s));
    ASSERT_EQ_INT(s.nbytes, 15);
    ASSERT_OK(ckpt_storage_read(&s, 0, 15, got));
    ASSERT_TRUE(memcmp(got, want, 15) == 0);
    ASSERT_OK(ckpt_storage_read(&s, 6, 7, got));
    ASSERT_TRUE(memcmp(got, want + 6, 7) == 0);
    /* a stored box smaller than the tile, and a tile off its grid cell, are refused */
    tiles[0].stored[1] = 1;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_tiling_check(&s));
    tiles[0].stored[1] = 2;
    tiles[1].offset[1] = 3;
    tiles[1].size[1] = 1;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_storage_tiling_check(&s));
    unmap_file(&m);
}
