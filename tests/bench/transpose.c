/* Throughput of ckpt_tensor_read on transposed [4096, 11008] and [11008, 4096] matrices
 * (bf16 and f32, as read and converted to the other type), the views pd2te reads for most
 * weights, and of the same matrices read in place for scale.
 * Not part of the build or the tests; build it on request against a built library:
 *
 *   cc -O2 -Iinclude tests/bench/transpose.c build/libckpt.a -lz -lzstd -lcjson -ldeflate -fopenmp -lm \
 *      -o transpose-bench
 *   ./transpose-bench [dir [piece_bytes]]
 *
 * It writes the matrices into dir (default "."), maps them afresh for every pass (so page
 * faults count, as in a conversion) and reads the view in pieces of piece_bytes of output
 * (default 16 MiB, the writer's chunk). Prints output GB/s, the best of a few passes.
 * Large in-place reads convert on all OpenMP threads; OMP_NUM_THREADS=1 compares one
 * thread with one thread. */
#define _POSIX_C_SOURCE 200809L

#include <ckpt/error.h>
#include <ckpt/sys/io.h>
#include <ckpt/tensor.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROWS 4096
#define COLS 11008
#define PASSES 5

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int write_matrix(const char *path, size_t es)
{
    size_t row = (size_t)COLS * es, i, r;
    unsigned char *buf = malloc(row);
    FILE *f = fopen(path, "wb");
    int ok = buf && f;

    for (r = 0; ok && r < ROWS; r++) {
        for (i = 0; i < row; i++)
            buf[i] = (unsigned char)(r * 131 + i * 7 + (i >> 8));
        if (es == 2)
            for (i = 0; i < row; i += 2)
                buf[i + 1] &= 0x3F; /* finite bf16 values, so conversions do real work */
        else
            for (i = 0; i < row; i += 4)
                buf[i + 3] &= 0x3F;
        ok = fwrite(buf, 1, row, f) == row;
    }
    /* written back before timing, so that the passes do not race the flusher */
    if (ok && (fflush(f) || fsync(fileno(f))))
        ok = 0;
    if (f && fclose(f))
        ok = 0;
    free(buf);
    return ok ? 0 : -1;
}

/* One pass: map the file, read the whole transposed view in pieces. Seconds, or -1. */
/* layout 0: the matrix read in place; 1: the transpose of [ROWS, COLS]; 2: the transpose
 * of the same bytes seen as [COLS, ROWS]. */
static double pass(const char *path, ckpt_dtype src, ckpt_dtype dst, int layout, uint64_t piece_bytes,
                   unsigned char *out)
{
    size_t es = ckpt_dtype_size(src), ds = ckpt_dtype_size(dst);
    int64_t numel = (int64_t)ROWS * COLS, piece = (int64_t)(piece_bytes / ds), done;
    ckpt_file *f;
    ckpt_extent e;
    ckpt_storage s;
    ckpt_tensor t;
    double t0, t1;
    int rc = 0;

    if (ckpt_file_open(&f, path))
        return -1;
    e.file = f;
    e.offset = 0;
    e.stored_size = e.size = (uint64_t)numel * es;
    e.encoding = CKPT_EXTENT_RAW;
    memset(&s, 0, sizeof s);
    s.key = "w";
    s.dtype = src;
    s.nbytes = e.size;
    s.n_extents = 1;
    s.extents = &e;
    memset(&t, 0, sizeof t);
    t.name = "w.T";
    t.dtype = src;
    t.storage = &s;
    t.ndim = 2;
    t.shape[0] = layout == 1 ? COLS : ROWS;
    t.shape[1] = layout == 1 ? ROWS : COLS;
    t.stride[0] = layout == 0 ? COLS : 1;
    t.stride[1] = layout == 0 ? 1 : layout == 1 ? COLS : ROWS;
    t0 = now();
    for (done = 0; done < numel && !rc; done += piece) {
        int64_t m = numel - done < piece ? numel - done : piece;
        rc = ckpt_tensor_read(&t, done, m, dst, out + (size_t)done * ds);
    }
    t1 = now();
    ckpt_file_close(f);
    if (rc) {
        fprintf(stderr, "%s\n", ckpt_error_last()->message);
        return -1;
    }
    return t1 - t0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    uint64_t piece_bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)16 << 20;
    static const struct {
        ckpt_dtype src, dst;
        int layout;
        const char *label;
    } cases[] = {
        { CKPT_DTYPE_BF16, CKPT_DTYPE_BF16, 1, "[4096, 11008].T bf16 -> bf16" },
        { CKPT_DTYPE_F32, CKPT_DTYPE_F32, 1, "[4096, 11008].T f32  -> f32 " },
        { CKPT_DTYPE_BF16, CKPT_DTYPE_F32, 1, "[4096, 11008].T bf16 -> f32 " },
        { CKPT_DTYPE_F32, CKPT_DTYPE_BF16, 1, "[4096, 11008].T f32  -> bf16" },
        { CKPT_DTYPE_BF16, CKPT_DTYPE_BF16, 2, "[11008, 4096].T bf16 -> bf16" },
        { CKPT_DTYPE_F32, CKPT_DTYPE_F32, 2, "[11008, 4096].T f32  -> f32 " },
        /* the same bytes read in place, for scale */
        { CKPT_DTYPE_BF16, CKPT_DTYPE_BF16, 0, "[4096, 11008]   bf16 -> bf16" },
        { CKPT_DTYPE_F32, CKPT_DTYPE_F32, 0, "[4096, 11008]   f32  -> f32 " },
    };
    char paths[2][4096];
    unsigned char *out = malloc((size_t)ROWS * COLS * 4);
    size_t c;
    int p;

    if (!out)
        return 1;
    snprintf(paths[0], sizeof paths[0], "%s/transpose-bf16.bin", dir);
    snprintf(paths[1], sizeof paths[1], "%s/transpose-f32.bin", dir);
    if (write_matrix(paths[0], 2) || write_matrix(paths[1], 4)) {
        fprintf(stderr, "cannot write the matrices in %s\n", dir);
        return 1;
    }
    memset(out, 1, (size_t)ROWS * COLS * 4);
    printf("pieces of %llu bytes\n", (unsigned long long)piece_bytes);
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *path = paths[cases[c].src == CKPT_DTYPE_F32];
        double best = -1;
        for (p = 0; p < PASSES; p++) {
            double sec = pass(path, cases[c].src, cases[c].dst, cases[c].layout, piece_bytes, out);
            if (sec < 0)
                return 1;
            if (best < 0 || sec < best)
                best = sec;
        }
        printf("%s  %7.3f s  %6.2f GB/s out\n", cases[c].label, best,
               (double)ROWS * COLS * (double)ckpt_dtype_size(cases[c].dst) / best / 1e9);
    }
    remove(paths[0]);
    remove(paths[1]);
    free(out);
    return 0;
}
