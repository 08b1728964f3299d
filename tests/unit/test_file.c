/* Mapped input files: contents, empty files, refusals with useful messages, bounds. */
#include "test.h"

#include <ckpt/sys/io.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
