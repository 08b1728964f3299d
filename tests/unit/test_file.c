/* Mapped input files: contents, empty files, refusals with useful messages, bounds; zstd
 * inputs decompressed on open. */
#include "test.h"

#define CKPT_BUILD
#include "io/zstd_io.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

CKPT_TEST(test_file_maps_contents)
{
    ckpt_file *f;

    ckpt_test_write_file("a.bin", "hello, world", 12);
    ASSERT_OK(ckpt_file_open(&f, "a.bin"));
    ASSERT_EQ_INT(f->size, 12);
    ASSERT_EQ_STR(f->path, "a.bin");
    ASSERT_TRUE(f->fd >= 0);
    ASSERT_TRUE(memcmp(f->data, "hello, world", 12) == 0);
    ckpt_file_close(f);
    ckpt_file_close(NULL);
}

CKPT_TEST(test_file_empty_has_no_data)
{
    ckpt_file *f;
    char c;

    ckpt_test_write_file("empty", "", 0);
    ASSERT_OK(ckpt_file_open(&f, "empty"));
    ASSERT_EQ_INT(f->size, 0);
    ASSERT_TRUE(f->data == NULL);
    ASSERT_OK(ckpt_file_read(f, 0, &c, 0));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_read(f, 0, &c, 1));
    ckpt_file_release(f, 0, 100);
    ckpt_file_close(f);
}

CKPT_TEST(test_file_missing_names_path_and_reason)
{
    ckpt_file *f = (ckpt_file *)1;

    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_file_open(&f, "no/such/file.pt"));
    ASSERT_TRUE(f == NULL);
    ASSERT_ERROR_MENTIONS("no/such/file.pt");
    ASSERT_ERROR_MENTIONS("No such file");
}

CKPT_TEST(test_file_refuses_directory)
{
    ckpt_file *f;

    ASSERT_TRUE(mkdir("ckpt_dir", 0755) == 0);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_file_open(&f, "ckpt_dir"));
    ASSERT_ERROR_MENTIONS("ckpt_dir");
    ASSERT_ERROR_MENTIONS("directory");
}

CKPT_TEST(test_file_refuses_devices_and_fifos)
{
    ckpt_file *f;

    ASSERT_FAILS(CKPT_EINVALID, ckpt_file_open(&f, "/dev/null"));
    ASSERT_ERROR_MENTIONS("not a regular file");
    /* Refused at once, without waiting for a writer. */
    ASSERT_TRUE(mkfifo("fifo", 0600) == 0);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_file_open(&f, "fifo"));
    ASSERT_ERROR_MENTIONS("fifo");
}

CKPT_TEST(test_file_read_checks_bounds)
{
    ckpt_file *f;
    char buf[8] = { 0 };

    ckpt_test_write_file("a.bin", "0123456789", 10);
    ASSERT_OK(ckpt_file_open(&f, "a.bin"));
    ASSERT_OK(ckpt_file_read(f, 6, buf, 4));
    ASSERT_TRUE(memcmp(buf, "6789", 4) == 0);
    ASSERT_OK(ckpt_file_read(f, 10, buf, 0));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_read(f, 7, buf, 4));
    ASSERT_ERROR_MENTIONS("a.bin");
    ASSERT_ERROR_MENTIONS("past the end");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_read(f, UINT64_MAX, buf, 2));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_read(f, 11, buf, 0));
    ckpt_file_close(f);
}

CKPT_TEST(test_file_release_keeps_contents)
{
    size_t n = 5 * 4096 + 123, i;
    unsigned char *data = malloc(n);
    ckpt_file *f;
    int same;

    ASSERT_TRUE(data != NULL);
    for (i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 7 + i / 4096);
    ckpt_test_write_file("pages.bin", data, n);
    ASSERT_OK(ckpt_file_open(&f, "pages.bin"));
    /* Whole pages, partial pages, the tail, and ranges that make no sense: all harmless. */
    ckpt_file_release(f, 0, n);
    ckpt_file_release(f, 100, 3 * 4096);
    ckpt_file_release(f, 4096, 1);
    ckpt_file_release(f, n - 10, 10);
    ckpt_file_release(f, n, 4096);
    ckpt_file_release(f, UINT64_MAX, UINT64_MAX);
    ckpt_file_release(f, 1, UINT64_MAX);
    ckpt_file_release(NULL, 0, 1);
    /* Released pages come back from the file when touched again. */
    same = memcmp(f->data, data, n) == 0;
    ckpt_file_close(f);
    free(data);
    ASSERT_TRUE(same);
}

static int touch_byte(void *arg)
{
    const volatile uint8_t *p = arg;
    return p[0] == 0xFF ? 1 : 0;
}

/* A file cut short after it was mapped: reads past the new end are errors naming the file
 * and the offset (small ones through the mapping, under the SIGBUS guard; large ones through
 * pread), never a crash; reads before it still work. */
CKPT_TEST(test_file_cut_short_while_read)
{
    enum { SIZE = 1 << 20 };
    unsigned char *data = calloc(1, SIZE), small[100], *big = malloc(SIZE);
    ckpt_file *f;

    ckpt_test_write_file("cut.bin", data, SIZE);
    ASSERT_OK(ckpt_file_open(&f, "cut.bin"));
    ASSERT_TRUE(truncate("cut.bin", 8192) == 0);
    ASSERT_OK(ckpt_file_read(f, 100, small, sizeof small));
    ASSERT_FAILS(CKPT_EIO, ckpt_file_read(f, 500000, small, sizeof small));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "cut.bin: file ends at offset 499712 while being read") != NULL);
    ASSERT_FAILS(CKPT_EIO, ckpt_file_read(f, 4096, big, SIZE - 4096));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "while being read (changed on disk?)") != NULL);
    ASSERT_FAILS(CKPT_EIO, ckpt_file_guard(f, touch_byte, (void *)(f->data + 700000)));
    /* the guard is gone once it returned; nested guards each catch their own */
    ASSERT_EQ_INT(ckpt_file_guard(f, touch_byte, (void *)(f->data + 10)), 0);
    ckpt_file_close(f);
    free(data);
    free(big);
}

/* ---- zstd-compressed inputs: decompressed on open, then like any other file ---- */

static unsigned char *pattern(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n);
    uint32_t x = seed * 2654435761u + 1;
    size_t i;

    for (i = 0; p && i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (unsigned char)(i % 97 < 60 ? i / 1000 : x >> 24);
    }
    return p;
}

/* Append one frame of data, with a checksum and, when with_size, its size, to `path`;
 * returns its compressed size (0 on failure). */
static size_t append_frame_sized(const char *path, const void *data, size_t len, int level, int with_size)
{
    size_t cap = ZSTD_compressBound(len), n = 0;
    void *buf = malloc(cap);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    FILE *fp = fopen(path, "ab");
    int ok = buf && c && fp && !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) &&
             !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1)) &&
             !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, with_size)) &&
             !ZSTD_isError(n = ZSTD_compress2(c, buf, cap, data, len)) && fwrite(buf, 1, n, fp) == n;

    if (fp && fclose(fp) != 0)
        ok = 0;
    ZSTD_freeCCtx(c);
    free(buf);
    return ok ? n : 0;
}

static size_t append_frame(const char *path, const void *data, size_t len, int level)
{
    return append_frame_sized(path, data, len, level, 1);
}

CKPT_TEST(test_file_zstd_input_reads_as_plain)
{
    size_t n = (5 << 20) + 3, zn;
    unsigned char *data = pattern(n, 1), *back = malloc(n);
    ckpt_file *f;

    ASSERT_TRUE(data && back);
    ASSERT_TRUE((zn = append_frame("model.safetensors.zst", data, n, 3)) > 0);
    ASSERT_OK(ckpt_file_open(&f, "model.safetensors.zst"));
    ASSERT_EQ_STR(f->path, "model.safetensors.zst");
    ASSERT_EQ_INT(f->size, n);
    ASSERT_EQ_INT(f->zstd.raw_bytes, n);
    ASSERT_EQ_INT(f->zstd.zst_bytes, zn);
    ASSERT_TRUE(f->zstd.seconds >= 0.0);
    ASSERT_TRUE(memcmp(f->data, data, n) == 0);
    /* large reads go through the decompressed file's descriptor, small ones the mapping */
    ASSERT_OK(ckpt_file_read(f, 1, back, n - 1));
    ASSERT_TRUE(memcmp(back, data + 1, n - 1) == 0);
    ASSERT_OK(ckpt_file_read(f, n - 10, back, 10));
    ASSERT_TRUE(memcmp(back, data + n - 10, 10) == 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_read(f, n - 9, back, 10));
    ckpt_file_close(f);
    free(data);
    free(back);
}

CKPT_TEST(test_file_plain_file_has_no_zstd_stats)
{
    ckpt_file *f;

    ckpt_test_write_file("p.bin", "\x28\xb5\x2f", 3); /* a magic cut short is just bytes */
    ASSERT_OK(ckpt_file_open(&f, "p.bin"));
    ASSERT_EQ_INT(f->size, 3);
    ASSERT_EQ_INT(f->zstd.zst_bytes, 0);
    ckpt_file_close(f);
}

CKPT_TEST(test_file_zstd_multiple_and_skippable_frames)
{
    static const unsigned char skippable[12] = { 0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'n', 'o', 't', 'e' };
    size_t n = 300000;
    unsigned char *data = pattern(n, 2);
    ckpt_file *f;
    FILE *fp;

    ASSERT_TRUE(data != NULL);
    /* a skippable frame first, then three frames, one of them empty */
    ASSERT_TRUE((fp = fopen("multi.zst", "wb")) != NULL);
    ASSERT_TRUE(fwrite(skippable, 1, sizeof skippable, fp) == sizeof skippable);
    ASSERT_TRUE(fclose(fp) == 0);
    ASSERT_TRUE(append_frame("multi.zst", data, 1000, 1) > 0);
    ASSERT_TRUE(append_frame("multi.zst", data, 0, 1) > 0);
    ASSERT_TRUE(append_frame("multi.zst", data + 1000, n - 1000, 19) > 0);
    ASSERT_OK(ckpt_file_open(&f, "multi.zst"));
    ASSERT_EQ_INT(f->size, n);
    ASSERT_TRUE(memcmp(f->data, data, n) == 0);
    ckpt_file_close(f);
    free(data);
}

/* Frames whose output ends exactly where a buffer of the decompressor does: the frame is
 * complete, not cut short. */
CKPT_TEST(test_file_zstd_frame_ends_on_buffer_boundary)
{
    static const size_t sizes[] = { 128 << 10, 1 << 20, 4 << 20 };
    unsigned char *data = pattern(4 << 20, 6);
    size_t i;
    ckpt_file *f;

    ASSERT_TRUE(data != NULL);
    for (i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        ASSERT_TRUE(unlink("edge.zst") == 0 || i == 0);
        ASSERT_TRUE(append_frame("edge.zst", data, sizes[i], 1) > 0);
        ASSERT_OK(ckpt_file_open(&f, "edge.zst"));
        ASSERT_EQ_INT(f->size, sizes[i]);
        ASSERT_TRUE(memcmp(f->data, data, sizes[i]) == 0);
        ckpt_file_close(f);
    }
    free(data);
}

CKPT_TEST(test_file_zstd_truncated_or_corrupt)
{
    size_t n = 1 << 20, zn, len;
    unsigned char *data = pattern(n, 3), *zst;
    ckpt_file *f = (ckpt_file *)1;

    ASSERT_TRUE(data != NULL);
    ASSERT_TRUE((zn = append_frame("good.zst", data, n, 3)) > 0);
    zst = ckpt_test_read_file("good.zst", &len);
    ASSERT_TRUE(zst && len == zn);
    ckpt_test_write_file("cut.pt.zst", zst, zn - 7);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_open(&f, "cut.pt.zst"));
    ASSERT_TRUE(f == NULL);
    ASSERT_ERROR_MENTIONS("cut.pt.zst: truncated zstd data");
    ckpt_test_write_file("header.zst", zst, 4);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_open(&f, "header.zst"));
    ASSERT_ERROR_MENTIONS("truncated");
    /* damage in the middle: a block that does not decode, or a checksum that fails */
    zst[zn / 2] ^= 0x5a;
    zst[zn / 2 + 1] ^= 0xa5;
    ckpt_test_write_file("bad.zst", zst, zn);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_open(&f, "bad.zst"));
    ASSERT_ERROR_MENTIONS("bad.zst: corrupt zstd data");
    /* bytes after the last frame that are not a frame */
    zst[zn / 2] ^= 0x5a;
    zst[zn / 2 + 1] ^= 0xa5;
    ckpt_test_write_file("tail.zst", zst, zn);
    ASSERT_TRUE(append_frame("tail.zst", "", 0, 1) > 0);
    {
        FILE *fp = fopen("tail.zst", "ab");
        ASSERT_TRUE(fp && fwrite("junk", 1, 4, fp) == 4 && fclose(fp) == 0);
    }
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_open(&f, "tail.zst"));
    ASSERT_ERROR_MENTIONS("tail.zst: corrupt zstd data");
    free(zst);
    free(data);
}

/* A frame made by `zstd --long=31` from a pipe declares a 2 GiB window (the size is not known
 * up front, so zstd cannot shrink it): the most the library accepts. */
CKPT_TEST(test_file_zstd_long_window)
{
    size_t n = 2 << 20;
    unsigned char *data = pattern(n, 4);
    ckpt_file *f;

    ASSERT_TRUE(data != NULL);
    ckpt_test_write_file("plain.bin", data, n);
    ASSERT_TRUE(system("zstd -q --long=31 -c < plain.bin > long.zst") == 0);
    ASSERT_OK(ckpt_file_open(&f, "long.zst"));
    ASSERT_EQ_INT(f->size, n);
    ASSERT_TRUE(memcmp(f->data, data, n) == 0);
    ckpt_file_close(f);
    free(data);
}

CKPT_TEST(test_file_zstd_limit_and_temp_dir)
{
    size_t n = 1 << 20;
    unsigned char *data = pattern(n, 5);
    char *saved_copy = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    ckpt_file *f;
    int rc;

    ASSERT_TRUE(data != NULL);
    ASSERT_TRUE(append_frame("bomb.zst", data, n, 3) > 0);
    ckpt_zstd__set_input_limit(n - 1);
    rc = ckpt_file_open(&f, "bomb.zst");
    ckpt_zstd__set_input_limit(UINT64_MAX);
    ASSERT_FAILS(CKPT_EFORMAT, rc);
    ASSERT_ERROR_MENTIONS("bomb.zst: zstd frame declares 1048576 decompressed bytes, more than the limit of 1048575");
    /* a frame that does not say its size is stopped at the limit */
    ASSERT_TRUE(append_frame_sized("unsized.zst", data, n, 3, 0) > 0);
    ckpt_zstd__set_input_limit(n - 1);
    rc = ckpt_file_open(&f, "unsized.zst");
    ckpt_zstd__set_input_limit(UINT64_MAX);
    ASSERT_FAILS(CKPT_EFORMAT, rc);
    ASSERT_ERROR_MENTIONS("unsized.zst: zstd data decompresses to more than 1048575 bytes");
    /* a temporary directory that cannot be used: named, with what to do */
    setenv("TMPDIR", "no/such/dir", 1);
    rc = ckpt_file_open(&f, "bomb.zst");
    ASSERT_FAILS(CKPT_EIO, rc);
    ASSERT_ERROR_MENTIONS("no/such/dir");
    ASSERT_ERROR_MENTIONS("TMPDIR");
    /* TMPDIR elsewhere works, and leaves nothing there */
    ASSERT_TRUE(mkdir("tmp", 0700) == 0);
    setenv("TMPDIR", "tmp", 1);
    rc = ckpt_file_open(&f, "bomb.zst");
    ASSERT_OK(rc);
    ASSERT_EQ_INT(f->size, n);
    ckpt_file_close(f);
    ASSERT_TRUE(rmdir("tmp") == 0);
    if (saved_copy)
        setenv("TMPDIR", saved_copy, 1);
    else
        unsetenv("TMPDIR");
    free(saved_copy);
    free(data);
}

/* Six bytes (a frame header asking for a 2^31-byte window, fuzzing's out-of-memory input) are
 * refused before the window is allocated: they cannot decompress to more than 2^27 bytes. */
CKPT_TEST(test_file_zstd_window_larger_than_the_input_can_fill)
{
    static const unsigned char header[6] = { 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa8 };
    ckpt_file *f;

    ckpt_test_write_file("six.zst", header, sizeof header);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file_open(&f, "six.zst"));
    ASSERT_ERROR_MENTIONS("six.zst: zstd frame asks for a window over 2^27 bytes, more than its 6 bytes can "
                          "decompress to");
}

/* What a test check saw, and what it answers. */
typedef struct seen {
    int calls, whole;
    size_t n;
    uint8_t first;
    uint64_t need, max_size; /* its answers: need first (once), then max_size */
    int refuse;
} seen;

static int test_check(void *arg, const char *path, const uint8_t *head, size_t n, int whole, uint64_t *need,
                      uint64_t *max_size)
{
    seen *s = arg;

    s->calls++;
    s->whole = whole;
    s->n = n;
    s->first = n ? head[0] : 0;
    if (s->refuse)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT, "%s: not what the test expects", path);
    if (s->need > n && !whole) {
        *need = s->need;
        return 0;
    }
    *max_size = s->max_size;
    return 0;
}

/* 64 MiB of zeros behind a byte no format starts with: refused once the first MiB is out,
 * the rest never decompressed. */
CKPT_TEST(test_file_zstd_check_refuses_before_the_rest)
{
    size_t n = (size_t)64 << 20;
    unsigned char *data = calloc(n, 1);
    seen s = { 0, 0, 0, 0, 0, UINT64_MAX, 1 };
    ckpt_zstd_check check = { test_check, &s };
    ckpt_file *f;

    ASSERT_TRUE(data != NULL);
    data[0] = 'X';
    ASSERT_TRUE(append_frame_sized("bomb.zst", data, n, 3, 0) > 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file__open_as(&f, "bomb.zst", "bomb.zst", 1, &check));
    ASSERT_ERROR_MENTIONS("bomb.zst: not what the test expects");
    ASSERT_EQ_INT(s.calls, 1);
    ASSERT_EQ_INT(s.whole, 0);
    ASSERT_EQ_INT(s.first, 'X');
    ASSERT_TRUE(s.n >= CKPT_ZSTD_CHECK_BYTES && s.n < 2 * CKPT_ZSTD_CHECK_BYTES);
    free(data);
}

/* A check that needs more sees more; the bound it sets holds the stream, declared or not. */
CKPT_TEST(test_file_zstd_check_bound)
{
    size_t n = (size_t)5 << 20;
    unsigned char *data = pattern(n, 6);
    seen s = { 0, 0, 0, 0, (uint64_t)3 << 20, (uint64_t)4 << 20, 0 };
    ckpt_zstd_check check = { test_check, &s };
    ckpt_file *f;

    ASSERT_TRUE(data != NULL);
    ASSERT_TRUE(append_frame_sized("long.zst", data, n, 1, 0) > 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file__open_as(&f, "long.zst", "long.zst", 1, &check));
    ASSERT_ERROR_MENTIONS("long.zst: zstd data decompresses to more than its header or index allows (4194304 bytes)");
    ASSERT_EQ_INT(s.calls, 2);
    ASSERT_TRUE(s.n >= ((size_t)3 << 20));
    /* a frame that declares more than the bound is refused before anything is written */
    memset(&s, 0, sizeof s);
    s.max_size = (uint64_t)4 << 20;
    ASSERT_TRUE(append_frame("sized.zst", data, n, 1) > 0);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file__open_as(&f, "sized.zst", "sized.zst", 1, &check));
    ASSERT_ERROR_MENTIONS("sized.zst: zstd frame declares 5242880 decompressed bytes, more than its header or index "
                          "allows (4194304)");
    /* exactly the bound is fine */
    memset(&s, 0, sizeof s);
    s.max_size = n;
    ASSERT_OK(ckpt_file__open_as(&f, "sized.zst", "sized.zst", 1, &check));
    ASSERT_EQ_INT(f->size, n);
    ckpt_file_close(f);
    free(data);
}

/* A stream shorter than the first window: the check judges all of it, told it is whole. */
CKPT_TEST(test_file_zstd_check_short_stream)
{
    seen s = { 0, 0, 0, 0, (uint64_t)1 << 30, UINT64_MAX, 0 };
    ckpt_zstd_check check = { test_check, &s };
    ckpt_file *f;

    ASSERT_TRUE(append_frame("short.zst", "hello", 5, 3) > 0);
    ASSERT_OK(ckpt_file__open_as(&f, "short.zst", "short.zst", 1, &check));
    ASSERT_EQ_INT(s.calls, 1);
    ASSERT_EQ_INT(s.whole, 1);
    ASSERT_EQ_INT(s.n, 5);
    ASSERT_EQ_INT(s.first, 'h');
    ASSERT_EQ_INT(f->size, 5);
    ckpt_file_close(f);
    /* and may refuse it */
    s.refuse = 1;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_file__open_as(&f, "short.zst", "short.zst", 1, &check));
}
