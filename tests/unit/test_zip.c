/* Zip reader and writer: real torch.save files and Python zipfile archives read as Python
 * reads them, the writer reproduces torch's bytes exactly, zip64 works past 4 GiB, and
 * damaged archives fail with a message instead of crashing. */
#include "test.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/zip.h>

#include <stdlib.h>
#include <zlib.h>

static int open_zip(const char *path, ckpt_file **f, ckpt_zip **z)
{
    int rc = ckpt_file_open(f, path);

    if (rc)
        return rc;
    rc = ckpt_zip_open(z, *f);
    if (rc) {
        ckpt_file_close(*f);
        *f = NULL;
    }
    return rc;
}

static void close_zip(ckpt_file *f, ckpt_zip *z)
{
    ckpt_zip_close(z);
    ckpt_file_close(f);
}

/* Copy a fixture into the working directory, optionally changing bytes at `at`. */
static void copy_fixture(const char *fixture, const char *dst, size_t at, const void *bytes, size_t n)
{
    size_t len;
    unsigned char *data = ckpt_test_read_file(ckpt_test_data(fixture), &len);

    if (!data || at + n > len) {
        fprintf(stderr, "cannot patch %s\n", fixture);
        abort();
    }
    memcpy(data + at, bytes, n);
    ckpt_test_write_file(dst, data, len);
    free(data);
}

/* Offset of the central directory entry for `name` in a fixture. */
static size_t central_entry_offset(const char *fixture, const char *name)
{
    size_t len, i, n = strlen(name);
    unsigned char *data = ckpt_test_read_file(ckpt_test_data(fixture), &len);

    for (i = 0; data && i + 46 + n <= len; i++) {
        if (memcmp(data + i, "PK\1\2", 4) == 0 && ckpt_load_u16le(data + i + 28) == n &&
            memcmp(data + i + 46, name, n) == 0) {
            free(data);
            return i;
        }
    }
    fprintf(stderr, "no central entry %s in %s\n", name, fixture);
    abort();
}

static size_t last_signature(const char *fixture, const char *sig)
{
    size_t len, i;
    unsigned char *data = ckpt_test_read_file(ckpt_test_data(fixture), &len);

    for (i = len - 4; data && i > 0; i--) {
        if (memcmp(data + i, sig, 4) == 0) {
            free(data);
            return i;
        }
    }
    abort();
}

CKPT_TEST(test_zip_fixtures_match_python_zipfile)
{
    char line[1024], file[256], name[512], current[256] = "";
    unsigned method, crc;
    unsigned long long csize, usize, header;
    FILE *manifest = fopen(ckpt_test_data("zip/manifest.tsv"), "r");
    ckpt_file *f = NULL;
    ckpt_zip *z = NULL;
    ckpt_buf buf = CKPT_BUF_INIT;
    size_t seen = 0, checked = 0;

    ASSERT_TRUE(manifest != NULL);
    while (fgets(line, sizeof line, manifest)) {
        const ckpt_zip_entry *e;
        ckpt_extent x;
        if (line[0] == '#')
            continue;
        ASSERT_EQ_INT(sscanf(line, "%255[^\t]\t%511[^\t]\t%u\t%llu\t%llu\t%x\t%llu", file, name, &method,
                             &csize, &usize, &crc, &header), 7);
        if (strcmp(file, current) != 0) {
            if (z)
                ASSERT_EQ_INT(ckpt_zip_count(z), seen);
            close_zip(f, z);
            snprintf(current, sizeof current, "%s", file);
            snprintf(line, sizeof line, "zip/%s", file);
            ASSERT_OK(open_zip(ckpt_test_data(line), &f, &z));
            seen = 0;
        }
        e = ckpt_zip_find(z, name);
        ASSERT_TRUE(e != NULL);
        ASSERT_TRUE(e == ckpt_zip_entry_at(z, seen));
        ASSERT_EQ_STR(e->name, name);
        ASSERT_EQ_INT(e->method, method);
        ASSERT_EQ_INT(e->csize, csize);
        ASSERT_EQ_INT(e->usize, usize);
        ASSERT_EQ_INT(e->crc32, crc);
        ASSERT_EQ_INT(e->header_offset, header);
        ASSERT_OK(ckpt_zip_read(z, e, 1, &buf));
        ASSERT_EQ_INT(buf.len, usize);
        ASSERT_EQ_INT(crc32_z(0, buf.data, buf.len), crc);
        ASSERT_OK(ckpt_zip_verify(z, e));
        ckpt_zip_extent(z, e, &x);
        ASSERT_TRUE(x.file == f);
        ASSERT_EQ_INT(x.offset, e->data_offset);
        ASSERT_EQ_INT(x.stored_size, csize);
        ASSERT_EQ_INT(x.size, usize);
        ASSERT_EQ_INT(x.encoding, method == 8 ? CKPT_EXTENT_DEFLATE : CKPT_EXTENT_RAW);
        /* torch aligns every record's data to 64 bytes. */
        if (strstr(file, ".pt"))
            ASSERT_EQ_INT(e->data_offset % 64, 0);
        seen++;
        checked++;
    }
    fclose(manifest);
    ASSERT_EQ_INT(ckpt_zip_count(z), seen);
    ASSERT_TRUE(ckpt_zip_entry_at(z, seen) == NULL);
    ASSERT_TRUE(ckpt_zip_find(z, "torch_small/data/9") == NULL);
    ASSERT_TRUE(ckpt_zip_find(z, "") == NULL);
    close_zip(f, z);
    ckpt_buf_dispose(&buf);
    ASSERT_TRUE(checked >= 10);
}

CKPT_TEST(test_zip_empty_archive)
{
    ckpt_file *f;
    ckpt_zip *z;

    ASSERT_OK(open_zip(ckpt_test_data("zip/empty.zip"), &f, &z));
    ASSERT_EQ_INT(ckpt_zip_count(z), 0);
    ASSERT_TRUE(ckpt_zip_entry_at(z, 0) == NULL);
    ASSERT_TRUE(ckpt_zip_find(z, "x") == NULL);
    close_zip(f, z);
}

/* Rebuild a torch.save file record by record: the bytes must be torch's own. */
static void rewrite_torch_file(const char *fixture)
{
    size_t want_len, got_len, i;
    unsigned char *want = ckpt_test_read_file(ckpt_test_data(fixture), &want_len), *got;
    ckpt_buf buf = CKPT_BUF_INIT;
    ckpt_zip_writer *w;
    ckpt_outfile *out;
    ckpt_file *f;
    ckpt_zip *z;
    int same;

    ASSERT_TRUE(want != NULL);
    ASSERT_OK(open_zip(ckpt_test_data(fixture), &f, &z));
    ASSERT_OK(ckpt_outfile_open(&out, "rewritten.pt", 0));
    ASSERT_OK(ckpt_zip_writer_new(&w, out, 0, 64));
    for (i = 0; i < ckpt_zip_count(z); i++) {
        const ckpt_zip_entry *e = ckpt_zip_entry_at(z, i);
        ASSERT_OK(ckpt_zip_read(z, e, 1, &buf));
        ASSERT_EQ_INT(ckpt_zip_writer_add_bytes(w, e->name, buf.data, buf.len), i);
    }
    ASSERT_OK(ckpt_zip_writer_finish(w));
    ckpt_zip_writer_free(w);
    ASSERT_OK(ckpt_outfile_commit(out));
    close_zip(f, z);
    ckpt_buf_dispose(&buf);
    got = ckpt_test_read_file("rewritten.pt", &got_len);
    same = got && got_len == want_len && memcmp(got, want, want_len) == 0;
    free(got);
    free(want);
    ASSERT_TRUE(same);
}

CKPT_TEST(test_zip_writer_reproduces_torch_save)
{
    rewrite_torch_file("zip/torch_small.pt");
}

CKPT_TEST(test_zip_writer_reproduces_torch_save_without_padding)
{
    rewrite_torch_file("zip/pad_zero_fb_field_x21.pt");
}

CKPT_TEST(test_zip_writer_reserved_entries)
{
    static const char a[] = "first entry", b[] = "the second entry, written before the first";
    uint64_t off_a, off_b;
    ckpt_buf buf = CKPT_BUF_INIT;
    ckpt_zip_writer *w;
    ckpt_outfile *out;
    ckpt_file *f;
    ckpt_zip *z;
    int ia, ib;

    ASSERT_OK(ckpt_outfile_open(&out, "r.zip", 0));
    ASSERT_OK(ckpt_zip_writer_new(&w, out, 100, 4096));
    ASSERT_EQ_INT(ckpt_zip_writer_tell(w), 100);
    ia = ckpt_zip_writer_add(w, "r/a", sizeof a, &off_a);
    ASSERT_EQ_INT(ia, 0);
    ib = ckpt_zip_writer_add(w, "r/b", sizeof b, &off_b);
    ASSERT_EQ_INT(ib, 1);
    ASSERT_EQ_INT(off_a % 4096, 0);
    ASSERT_EQ_INT(off_b % 4096, 0);
    ASSERT_EQ_INT(ckpt_zip_writer_tell(w), off_b + sizeof b + 16);
    ASSERT_OK(ckpt_outfile_pwrite(out, off_b, b, sizeof b));
    ASSERT_OK(ckpt_outfile_pwrite(out, off_a, a, sizeof a));
    ASSERT_EQ_INT(ckpt_zip_writer_add(w, "r/empty", 0, NULL), 2);
    ckpt_zip_writer_set_crc(w, ib, (uint32_t)crc32_z(0, (const unsigned char *)b, sizeof b));
    /* A CRC the caller never reported is a bug, not a zero. */
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_finish(w));
    ASSERT_ERROR_MENTIONS("r/a");
    ckpt_zip_writer_set_crc(w, ia, (uint32_t)crc32_z(0, (const unsigned char *)a, sizeof a));
    ASSERT_OK(ckpt_zip_writer_finish(w));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_finish(w));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_add(w, "r/late", 1, &off_a));
    ASSERT_ERROR_MENTIONS("finished");
    ckpt_zip_writer_free(w);
    ckpt_zip_writer_free(NULL);
    ASSERT_OK(ckpt_outfile_commit(out));

    ASSERT_OK(open_zip("r.zip", &f, &z));
    ASSERT_EQ_INT(ckpt_zip_count(z), 3);
    ASSERT_EQ_INT(ckpt_zip_find(z, "r/a")->header_offset, 100);
    ASSERT_OK(ckpt_zip_read(z, ckpt_zip_find(z, "r/b"), 1, &buf));
    ASSERT_EQ_STR((const char *)buf.data, b);
    ASSERT_OK(ckpt_zip_verify(z, ckpt_zip_find(z, "r/a")));
    ASSERT_OK(ckpt_zip_read(z, ckpt_zip_find(z, "r/empty"), 1, &buf));
    ASSERT_EQ_INT(buf.len, 0);
    close_zip(f, z);
    ckpt_buf_dispose(&buf);
}

/* Two archives end to end in one file, each counting offsets from its own start; the
 * same archive laid out only (its size known before writing) and built in memory. */
CKPT_TEST(test_zip_writer_embedded_in_memory_and_laid_out)
{
    static const char data[] = "chunk bytes";
    uint64_t sizes[2], at = 0, off;
    ckpt_buf mem = CKPT_BUF_INIT, buf = CKPT_BUF_INIT;
    ckpt_zip_writer *w;
    ckpt_outfile *out;
    ckpt_file *f;
    ckpt_zip *z;
    unsigned char *whole;
    size_t len;
    int i, e;

    /* laid out only: no file, no CRCs needed */
    ASSERT_OK(ckpt_zip_writer_new_embedded(&w, NULL, 0, 64));
    ASSERT_TRUE(ckpt_zip_writer_add(w, "archive/data/0", sizeof data, &off) >= 0);
    ASSERT_OK(ckpt_zip_writer_finish(w));
    sizes[0] = sizes[1] = ckpt_zip_writer_tell(w);
    ckpt_zip_writer_free(w);

    ASSERT_OK(ckpt_outfile_open(&out, "two.bin", 0));
    for (i = 0; i < 2; i++) {
        ASSERT_OK(ckpt_zip_writer_new_embedded(&w, out, at, 64));
        e = ckpt_zip_writer_add(w, "archive/data/0", sizeof data, &off);
        ASSERT_TRUE(e >= 0 && off % 64 == 0);
        ASSERT_OK(ckpt_outfile_pwrite(out, at + off, data, sizeof data));
        ckpt_zip_writer_set_crc(w, e, (uint32_t)crc32_z(0, (const unsigned char *)data, sizeof data));
        ASSERT_OK(ckpt_zip_writer_finish(w));
        ASSERT_EQ_INT(ckpt_zip_writer_tell(w), sizes[i]);
        ckpt_zip_writer_free(w);
        at += sizes[i];
    }
    ASSERT_OK(ckpt_outfile_commit(out));
    whole = ckpt_test_read_file("two.bin", &len);
    ASSERT_TRUE(whole && len == at);
    /* the second archive alone is a complete zip */
    ckpt_test_write_file("second.zip", whole + sizes[0], (size_t)sizes[1]);
    ASSERT_OK(open_zip("second.zip", &f, &z));
    ASSERT_OK(ckpt_zip_read(z, ckpt_zip_find(z, "archive/data/0"), 1, &buf));
    ASSERT_TRUE(buf.len == sizeof data && memcmp(buf.data, data, sizeof data) == 0);
    close_zip(f, z);

    /* in memory: the same bytes as the first archive in the file */
    ASSERT_OK(ckpt_zip_writer_new_mem(&w, &mem, 64));
    e = ckpt_zip_writer_add(w, "archive/data/0", sizeof data, &off);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_finish(w)); /* its CRC was never given */
    ckpt_zip_writer_set_crc(w, e, (uint32_t)crc32_z(0, (const unsigned char *)data, sizeof data));
    memcpy(mem.data + off, data, sizeof data);
    ASSERT_OK(ckpt_zip_writer_finish(w));
    ckpt_zip_writer_free(w);
    ASSERT_TRUE(mem.len == sizes[0] && memcmp(mem.data, whole, (size_t)sizes[0]) == 0);
    free(whole);
    ckpt_buf_dispose(&mem);
    ckpt_buf_dispose(&buf);
}

CKPT_TEST(test_zip_writer_argument_checks)
{
    char *name = malloc(65537);
    ckpt_zip_writer *w;
    ckpt_outfile *out;
    ckpt_buf buf = CKPT_BUF_INIT;
    ckpt_file *f;
    ckpt_zip *z;
    uint64_t off;

    ASSERT_TRUE(name != NULL);
    ASSERT_OK(ckpt_outfile_open(&out, "a.zip", 0));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_new(&w, out, 0, 0));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_new(&w, out, 0, 48));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_new(&w, out, 0, 65536));
    ASSERT_OK(ckpt_zip_writer_new(&w, out, 0, 1));
    memset(name, 'n', 65536);
    name[65536] = '\0';
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_add(w, name, 1, &off));
    ASSERT_ERROR_MENTIONS("longer than");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_zip_writer_add(w, "huge", UINT64_MAX - 10, &off));
    name[65535] = '\0';
    ASSERT_OK(ckpt_zip_writer_add_bytes(w, name, "x", 1));
    ASSERT_OK(ckpt_zip_writer_finish(w));
    ckpt_zip_writer_free(w);
    ASSERT_OK(ckpt_outfile_commit(out));
    ASSERT_OK(open_zip("a.zip", &f, &z));
    ASSERT_OK(ckpt_zip_read(z, ckpt_zip_find(z, name), 1, &buf));
    ASSERT_EQ_STR((const char *)buf.data, "x");
    close_zip(f, z);
    ckpt_buf_dispose(&buf);
    free(name);
}

/* Every truncation of a real torch file fails cleanly, naming the cause. */
CKPT_TEST(test_zip_every_truncation_fails)
{
    size_t len, cut;
    unsigned char *data = ckpt_test_read_file(ckpt_test_data("zip/torch_small.pt"), &len);

    ASSERT_TRUE(data != NULL);
    for (cut = 0; cut < len; cut++) {
        ckpt_file *f;
        ckpt_zip *z;
        remove("cut.pt"); /* a new file each time: some filesystems flush a rewritten one */
        ckpt_test_write_file("cut.pt", data, cut);
        ASSERT_FAILS(CKPT_EFORMAT, open_zip("cut.pt", &f, &z));
        ASSERT_ERROR_MENTIONS("end of central directory not found");
        ASSERT_ERROR_MENTIONS("cut.pt");
        if (cut >= 4)
            ASSERT_ERROR_MENTIONS("incomplete download");
    }
    free(data);
}

CKPT_TEST(test_zip_not_a_zip)
{
    ckpt_file *f;
    ckpt_zip *z;

    ckpt_test_write_file("text.txt", "this is not a zip archive at all, just some words", 49);
    ASSERT_FAILS(CKPT_EFORMAT, open_zip("text.txt", &f, &z));
    ASSERT_ERROR_MENTIONS("not a zip archive");
}

CKPT_TEST(test_zip_crc_mismatch)
{
    static const unsigned char flip = 0x42;
    ckpt_buf buf = CKPT_BUF_INIT;
    const ckpt_zip_entry *e;
    ckpt_file *f;
    ckpt_zip *z;

    /* torch_small/data/0: header at 468, data at 576 (the next multiple of 64 after
     * 468 + 30 + 18 + 4). */
    copy_fixture("zip/torch_small.pt", "crc.pt", 576 + 5, &flip, 1);
    ASSERT_OK(open_zip("crc.pt", &f, &z));
    e = ckpt_zip_find(z, "torch_small/data/0");
    ASSERT_EQ_INT(e->data_offset, 576);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_zip_read(z, e, 1, &buf));
    ASSERT_ERROR_MENTIONS("CRC-32 mismatch");
    ASSERT_ERROR_MENTIONS("torch_small/data/0");
    ASSERT_EQ_INT(buf.len, 0);
    ASSERT_OK(ckpt_zip_read(z, e, 0, &buf));
    ASSERT_EQ_INT(buf.len, 40);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_zip_verify(z, e));
    ASSERT_ERROR_MENTIONS("crc.pt");
    ASSERT_OK(ckpt_zip_verify(z, ckpt_zip_find(z, "torch_small/data/2")));
    close_zip(f, z);
    ckpt_buf_dispose(&buf);
}

CKPT_TEST(test_zip_corrupt_deflate)
{
    static const unsigned char junk[4] = { 0xDE, 0xAD, 0xBE, 0xEF };
    ckpt_buf buf = CKPT_BUF_INIT;
    const ckpt_zip_entry *e;
    ckpt_file *f;
    ckpt_zip *z;

    /* The first entry's deflate stream starts right after its 30 + 17 byte header. */
    copy_fixture("zip/deflated.zip", "bad.zip", 47 + 20, junk, sizeof junk);
    ASSERT_OK(open_zip("bad.zip", &f, &z));
    e = ckpt_zip_find(z, "deflated/data.txt");
    ASSERT_EQ_INT(e->method, 8);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_zip_read(z, e, 0, &buf));
    ASSERT_ERROR_MENTIONS("deflated/data.txt");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_zip_verify(z, e));
    close_zip(f, z);
    ckpt_buf_dispose(&buf);
}

CKPT_TEST(test_zip_deflate_size_lies)
{
    unsigned char size[4];
    ckpt_buf buf = CKPT_BUF_INIT;
    size_t cd = central_entry_offset("zip/deflated.zip", "deflated/data.txt");
    ckpt_file *f;
    ckpt_zip *z;

    /* 3200 bytes claimed as 3199: too much output. */
    size[0] = 0x7F, size[1] = 0x0C, size[2] = 0, size[3] = 0;
    copy_fixture("zip/deflated.zip", "short.zip", cd + 24, size, 4);
    ASSERT_OK(open_zip("short.zip", &f, &z));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_zip_read(z, ckpt_zip_entry_at(z, 0), 0, &buf));
    ASSERT_ERROR_MENTIONS("more than");
    close_zip(f, z);
    /* 3201 claimed: the stream ends one byte short. */
    size[0] = 0x81;
    copy_fixture("zip/deflated.zip", "long.zip", cd + 24, size, 4);
    ASSERT_OK(open_zip("long.zip", &f, &z));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_zip_verify(z, ckpt_zip_entry_at(z, 0)));
    ASSERT_ERROR_MENTIONS("inflates to 3200 bytes");
    close_zip(f, z);
    /* More than deflate can encode: refused before anything is allocated. */
    size[0] = 0, size[1] = 0, size[2] = 0, size[3] = 0x40;
    copy_fixture("zip/deflated.zip", "bomb.zip", cd + 24, size, 4);
    ASSERT_FAILS(CKPT_EFORMAT, open_zip("bomb.zip", &f, &z));
    ASSERT_ERROR_MENTIONS("more than deflate can encode");
    ckpt_buf_dispose(&buf);
}

/* One damaged field of torch_small.pt, then the error open must report. */
static void expect_open_failure(const char *what, size_t at, const void *bytes, size_t n, int code,
                                const char *mention)
{
    const char *msg = ckpt_error_last()->message;
    ckpt_file *f;
    ckpt_zip *z;
    int rc;

    copy_fixture("zip/torch_small.pt", "damaged.pt", at, bytes, n);
    rc = open_zip("damaged.pt", &f, &z);
    if (rc != code || !strstr(msg, "damaged.pt") || !strstr(msg, mention))
        ckpt_test_fail(__FILE__, __LINE__, "%s: got %d \"%s\", expected %d mentioning \"%s\"", what,
                       rc, rc ? msg : "", code, mention);
    if (rc == 0)
        close_zip(f, z);
}

CKPT_TEST(test_zip_damaged_directory)
{
    static const unsigned char x = 'X', flag_encrypted[2] = { 0x09, 0x08 }, method12[2] = { 12, 0 };
    static const unsigned char big32[4] = { 0xF0, 0xFF, 0xFF, 0xFF }, mark32[4] = { 0xFF, 0xFF, 0xFF, 0xFF };
    static const unsigned char big64[8] = { 0, 0, 0, 0, 0, 0, 0, 0x40 }, three[4] = { 3, 0, 0, 0 };
    static const unsigned char count[16] = { 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 };
    static const unsigned char stored_size[4] = { 41, 0, 0, 0 };
    size_t cd_pkl = central_entry_offset("zip/torch_small.pt", "torch_small/data.pkl");
    size_t cd_data0 = central_entry_offset("zip/torch_small.pt", "torch_small/data/0");
    size_t eocd64 = last_signature("zip/torch_small.pt", "PK\6\6");
    size_t locator = last_signature("zip/torch_small.pt", "PK\6\7");

    expect_open_failure("local name", 468 + 30 + 3, &x, 1, CKPT_EFORMAT, "local header");
    expect_open_failure("local signature", 468, &x, 1, CKPT_EFORMAT, "no local header");
    expect_open_failure("encrypted", cd_pkl + 8, flag_encrypted, 2, CKPT_EUNSUPPORTED, "encrypted");
    expect_open_failure("method", cd_pkl + 10, method12, 2, CKPT_EUNSUPPORTED, "method 12");
    expect_open_failure("header offset", cd_data0 + 42, big32, 4, CKPT_EFORMAT, "past the end");
    expect_open_failure("stored size", cd_data0 + 20, stored_size, 4, CKPT_EFORMAT, "sizes differ");
    expect_open_failure("zip64 extra", cd_data0 + 20, mark32, 4, CKPT_EFORMAT, "zip64 extra");
    expect_open_failure("central sig", cd_data0, &x, 1, CKPT_EFORMAT, "central directory entry 1");
    expect_open_failure("cd offset", eocd64 + 48, big64, 8, CKPT_EFORMAT, "outside the file");
    expect_open_failure("entry count", eocd64 + 24, count, 8, CKPT_EUNSUPPORTED, "multi-disk");
    expect_open_failure("both counts", eocd64 + 24, count, 16, CKPT_EFORMAT, "cannot hold");
    expect_open_failure("locator", locator + 8, big64, 8, CKPT_EFORMAT, "zip64 end of central directory");
    expect_open_failure("disks", locator + 16, three, 4, CKPT_EUNSUPPORTED, "multi-disk");
}

CKPT_TEST(test_zip_duplicate_names)
{
    ckpt_zip_writer *w;
    ckpt_outfile *out;
    ckpt_file *f;
    ckpt_zip *z;

    ASSERT_OK(ckpt_outfile_open(&out, "dup.zip", 0));
    ASSERT_OK(ckpt_zip_writer_new(&w, out, 0, 64));
    ASSERT_OK(ckpt_zip_writer_add_bytes(w, "d/x", "1", 1));
    ASSERT_OK(ckpt_zip_writer_add_bytes(w, "d/y", "2", 1));
    ASSERT_OK(ckpt_zip_writer_add_bytes(w, "d/x", "3", 1));
    ASSERT_OK(ckpt_zip_writer_finish(w));
    ckpt_zip_writer_free(w);
    ASSERT_OK(ckpt_outfile_commit(out));
    ASSERT_FAILS(CKPT_EFORMAT, open_zip("dup.zip", &f, &z));
    ASSERT_ERROR_MENTIONS("duplicate zip entry 'd/x'");
}

/* CRC-32 of n zero bytes, without reading them: whole MiB blocks by doubling. */
static uint32_t crc_of_zeros(uint64_t n)
{
    static const unsigned char zeros[1 << 20];
    uLong block = crc32_z(0, zeros, sizeof zeros), crc = 0;
    uint64_t q = n / sizeof zeros, r = n % sizeof zeros, size = sizeof zeros;

    for (; q; q >>= 1, size *= 2) {
        if (q & 1)
            crc = crc32_combine64(crc, block, (z_off64_t)size);
        block = crc32_combine64(block, block, (z_off64_t)size);
    }
    return (uint32_t)crc32_combine64(crc, crc32_z(0, zeros, (size_t)r), (z_off64_t)r);
}

/* Past 4 GiB with a sparse file: the entry's data is a hole that costs no disk. The layout
 * is checked field by field against what torch 1.13 writes for such a file. */
CKPT_TEST(test_zip64_past_4gib)
{
    const uint64_t big = ((uint64_t)1 << 32) + 100;
    ckpt_buf buf = CKPT_BUF_INIT;
    const ckpt_zip_entry *e0, *e1, *ev;
    ckpt_zip_writer *w;
    ckpt_outfile *out;
    const uint8_t *p;
    uint64_t off, cd;
    ckpt_file *f;
    ckpt_zip *z;
    int i0;

    ASSERT_EQ_INT(crc_of_zeros(3), crc32_z(0, (const unsigned char *)"\0\0\0", 3));
    ASSERT_OK(ckpt_outfile_open(&out, "big.pt", 0));
    ASSERT_OK(ckpt_zip_writer_new(&w, out, 0, 64));
    ASSERT_OK(ckpt_zip_writer_add_bytes(w, "big/data.pkl", "pickle", 6));
    i0 = ckpt_zip_writer_add(w, "big/data/0", big, &off);
    ASSERT_OK(i0);
    ckpt_zip_writer_set_crc(w, i0, crc_of_zeros(big));
    ASSERT_OK(ckpt_zip_writer_add_bytes(w, "big/data/1", "hello", 5));
    ASSERT_OK(ckpt_zip_writer_add_bytes(w, "big/version", "3\n", 2));
    ASSERT_OK(ckpt_zip_writer_finish(w));
    ckpt_zip_writer_free(w);
    ASSERT_OK(ckpt_outfile_commit(out));

    ASSERT_OK(open_zip("big.pt", &f, &z));
    ASSERT_EQ_INT(ckpt_zip_count(z), 4);
    e0 = ckpt_zip_find(z, "big/data/0");
    e1 = ckpt_zip_find(z, "big/data/1");
    ev = ckpt_zip_find(z, "big/version");
    ASSERT_TRUE(e0 && e1 && ev);
    ASSERT_EQ_INT(e0->usize, big);
    ASSERT_EQ_INT(e0->csize, big);
    ASSERT_EQ_INT(e0->data_offset, off);
    ASSERT_EQ_INT(e0->crc32, crc_of_zeros(big));
    ASSERT_EQ_INT(e1->header_offset, off + big + 24);
    ASSERT_EQ_INT(e1->data_offset % 64, 0);
    ASSERT_OK(ckpt_zip_read(z, e1, 1, &buf));
    ASSERT_EQ_STR((const char *)buf.data, "hello");
    ASSERT_OK(ckpt_zip_verify(z, ev));

    /* Big entry: the local zip64 extra holds the size and a zero stored size (miniz writes
     * it before it knows), then FB; a 24-byte descriptor. */
    p = f->data + e0->header_offset + 30 + 10;
    ASSERT_EQ_INT(ckpt_load_u32le(p), 0x00100001);
    ASSERT_EQ_INT(ckpt_load_u64le(p + 4), big);
    ASSERT_EQ_INT(ckpt_load_u64le(p + 12), 0);
    ASSERT_TRUE(memcmp(p + 20, "FB", 2) == 0);
    p = f->data + off + big;
    ASSERT_EQ_INT(ckpt_load_u32le(p), 0x08074b50);
    ASSERT_EQ_INT(ckpt_load_u32le(p + 4), e0->crc32);
    ASSERT_EQ_INT(ckpt_load_u64le(p + 8), big);
    ASSERT_EQ_INT(ckpt_load_u64le(p + 16), big);
    /* Small entry past 4 GiB: the local extra holds its own header offset. */
    p = f->data + e1->header_offset + 30 + 10;
    ASSERT_EQ_INT(ckpt_load_u32le(p), 0x00080001);
    ASSERT_EQ_INT(ckpt_load_u64le(p + 4), e1->header_offset);
    ASSERT_TRUE(memcmp(p + 12, "FB", 2) == 0);
    ASSERT_EQ_INT(ckpt_load_u64le(f->data + e1->data_offset + 5 + 8), 5);
    ASSERT_EQ_INT(ev->header_offset, e1->data_offset + 5 + 24);
    ASSERT_EQ_INT(ckpt_load_u32le(f->data + ev->header_offset + 30 + 11), 0x00080001);

    /* End records: the classic one saturates, zip64 has the real offset. */
    p = f->data + f->size - 22;
    ASSERT_EQ_INT(ckpt_load_u32le(p), 0x06054b50);
    ASSERT_EQ_INT(ckpt_load_u16le(p + 10), 4);
    ASSERT_EQ_INT(ckpt_load_u32le(p + 16), 0xFFFFFFFF);
    p -= 20 + 56;
    ASSERT_EQ_INT(ckpt_load_u32le(p), 0x06064b50);
    ASSERT_EQ_INT(ckpt_load_u16le(p + 12), 0x031E);
    ASSERT_EQ_INT(ckpt_load_u16le(p + 14), 0x002D);
    cd = ckpt_load_u64le(p + 48);
    ASSERT_EQ_INT(cd, ev->data_offset + 2 + 24);
    /* Central entries: data.pkl plain, data/0 with both sizes, data/1 with its offset. */
    p = f->data + cd + 46 + 12;
    ASSERT_EQ_INT(ckpt_load_u32le(p + 20), 0xFFFFFFFF);
    ASSERT_EQ_INT(ckpt_load_u32le(p + 24), 0xFFFFFFFF);
    ASSERT_EQ_INT(ckpt_load_u16le(p + 30), 20);
    ASSERT_EQ_INT(ckpt_load_u32le(p + 42), e0->header_offset);
    p += 46 + 10 + 20;
    ASSERT_EQ_INT(ckpt_load_u32le(p + 20), 5);
    ASSERT_EQ_INT(ckpt_load_u16le(p + 30), 12);
    ASSERT_EQ_INT(ckpt_load_u32le(p + 42), 0xFFFFFFFF);
    ASSERT_EQ_INT(ckpt_load_u64le(p + 46 + 10 + 4), e1->header_offset);
    close_zip(f, z);
    ckpt_buf_dispose(&buf);
}

CKPT_TEST(test_zip_more_than_65535_entries)
{
    enum { N = 70000 };
    ckpt_zip_writer *w;
    ckpt_outfile *out;
    ckpt_file *f;
    ckpt_zip *z;
    char name[32];
    size_t i;

    ASSERT_OK(ckpt_outfile_open(&out, "many.zip", 0));
    ASSERT_OK(ckpt_zip_writer_new(&w, out, 0, 64));
    for (i = 0; i < N; i++) {
        snprintf(name, sizeof name, "m/%zu", i);
        /* Mostly empty entries (no data, no descriptor), a few with data. */
        if (i % 1000)
            ASSERT_EQ_INT(ckpt_zip_writer_add(w, name, 0, NULL), i);
        else
            ASSERT_EQ_INT(ckpt_zip_writer_add_bytes(w, name, name, 4), i);
    }
    ASSERT_OK(ckpt_zip_writer_finish(w));
    ckpt_zip_writer_free(w);
    ASSERT_OK(ckpt_outfile_commit(out));
    ASSERT_OK(open_zip("many.zip", &f, &z));
    ASSERT_EQ_INT(ckpt_load_u16le(f->data + f->size - 22 + 10), 0xFFFF);
    ASSERT_EQ_INT(ckpt_zip_count(z), N);
    for (i = 0; i < N; i++) {
        snprintf(name, sizeof name, "m/%zu", i);
        ASSERT_TRUE(ckpt_zip_find(z, name) == ckpt_zip_entry_at(z, i));
    }
    ASSERT_OK(ckpt_zip_verify(z, ckpt_zip_find(z, "m/69000")));
    close_zip(f, z);
}
