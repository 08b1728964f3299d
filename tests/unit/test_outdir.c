/* Atomic output directories: built beside the output, moved into place whole, removed on
 * abort or interruption; existing directories only written into with force. */
#include "test.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Names in `dir` (dot files included), sorted and joined with '|', in a static buffer. */
static const char *listing(const char *dir)
{
    static char out[4096];
    struct dirent **names;
    int i, n = scandir(dir, &names, NULL, alphasort);

    out[0] = '\0';
    for (i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") != 0 && strcmp(names[i]->d_name, "..") != 0) {
            if (out[0])
                strncat(out, "|", sizeof out - strlen(out) - 1);
            strncat(out, names[i]->d_name, sizeof out - strlen(out) - 1);
        }
        free(names[i]);
    }
    free(names);
    return out;
}

static int file_is(const char *path, const char *text)
{
    size_t got;
    unsigned char *bytes = ckpt_test_read_file(path, &got);
    int same = bytes && got == strlen(text) && memcmp(bytes, text, got) == 0;

    free(bytes);
    return same;
}

/* Ask for `rel` and write `text` there. */
static int put(ckpt_outdir *d, const char *rel, const char *text)
{
    const char *path = ckpt_outdir_file(d, rel);

    if (!path)
        return ckpt_error_last()->code;
    ckpt_test_write_file(path, text, strlen(text));
    return 0;
}

CKPT_TEST(test_outdir_commit_moves_into_place)
{
    ckpt_outdir *d;
    const char *staging, *path;

    ASSERT_OK(ckpt_outdir_begin(&d, "out", 0));
    ASSERT_EQ_STR(ckpt_outdir_final(d), "out");
    /* only a hidden staging directory beside the output until commit */
    ASSERT_TRUE(strncmp(listing("."), ".out.ckptconv-", 14) == 0);
    ASSERT_TRUE(strchr(listing("."), '|') == NULL);
    staging = ckpt_outdir_staging(d);
    ASSERT_TRUE(staging[0] == '/');
    ASSERT_TRUE(strstr(staging, "/.out.ckptconv-") != NULL);
    ASSERT_TRUE((path = ckpt_outdir_file(d, "a.bin")) != NULL);
    ASSERT_TRUE(strncmp(path, staging, strlen(staging)) == 0);
    ASSERT_EQ_STR(path + strlen(staging), "/a.bin");
    ckpt_test_write_file(path, "A", 1);
    ASSERT_OK(put(d, "sub/deeper/b.bin", "B"));
    ASSERT_OK(ckpt_outdir_commit(d));
    ASSERT_EQ_STR(listing("."), "out");
    ASSERT_EQ_STR(listing("out"), "a.bin|sub");
    ASSERT_TRUE(file_is("out/a.bin", "A"));
    ASSERT_TRUE(file_is("out/sub/deeper/b.bin", "B"));
}

CKPT_TEST(test_outdir_creates_missing_parents)
{
    ckpt_outdir *d;

    ASSERT_OK(ckpt_outdir_begin(&d, "x/y/out/", 0));
    ASSERT_EQ_STR(listing("."), "x");
    ASSERT_TRUE(strncmp(listing("x/y"), ".out.ckptconv-", 14) == 0);
    ASSERT_OK(put(d, "m.bin", "M"));
    ASSERT_OK(ckpt_outdir_commit(d));
    ASSERT_EQ_STR(listing("x/y"), "out");
    ASSERT_TRUE(file_is("x/y/out/m.bin", "M"));
}

CKPT_TEST(test_outdir_abort_removes_staging)
{
    ckpt_outdir *d;

    ASSERT_OK(ckpt_outdir_begin(&d, "out", 0));
    ASSERT_OK(put(d, "a.bin", "A"));
    ASSERT_OK(put(d, "sub/b.bin", "B"));
    ASSERT_OK(put(d, "sub/inner/c.bin", "C"));
    ckpt_outdir_abort(d);
    ckpt_outdir_abort(NULL);
    ASSERT_EQ_STR(listing("."), "");
}

CKPT_TEST(test_outdir_refusals)
{
    ckpt_outdir *d = (ckpt_outdir *)1;

    ckpt_test_write_file("afile", "x", 1);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outdir_begin(&d, "afile", 1));
    ASSERT_TRUE(d == NULL);
    ASSERT_ERROR_MENTIONS("afile exists and is not a directory");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_TRUE(mkdir("full", 0755) == 0);
    ckpt_test_write_file("full/old", "x", 1);
    ASSERT_FAILS(CKPT_EEXISTS, ckpt_outdir_begin(&d, "full", 0));
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_ERROR_MENTIONS("full is not empty (1 entries)");
    ASSERT_ERROR_MENTIONS("--force");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outdir_begin(&d, ".", 1));
    ASSERT_ERROR_MENTIONS("name the output directory itself");
    ASSERT_EQ_STR(listing("."), "afile|full");
    ASSERT_EQ_STR(listing("full"), "old");
    /* an empty directory needs no force */
    ASSERT_TRUE(mkdir("empty", 0755) == 0);
    ASSERT_OK(ckpt_outdir_begin(&d, "empty", 0));
    ASSERT_OK(put(d, "a.bin", "A"));
    ASSERT_OK(ckpt_outdir_commit(d));
    ASSERT_EQ_STR(listing("empty"), "a.bin");
}

CKPT_TEST(test_outdir_force_merges)
{
    ckpt_outdir *d;

    ASSERT_TRUE(mkdir("out", 0755) == 0 && mkdir("out/sub", 0755) == 0);
    ckpt_test_write_file("out/keep.txt", "mine", 4);
    ckpt_test_write_file("out/a.bin", "old", 3);
    ckpt_test_write_file("out/sub/old.txt", "old", 3);
    ASSERT_OK(ckpt_outdir_begin(&d, "out", 1));
    ASSERT_OK(put(d, "a.bin", "new"));
    ASSERT_OK(put(d, "sub/b.bin", "B"));
    ASSERT_OK(put(d, "fresh/c.bin", "C"));
    /* nothing changes in the output before commit */
    ASSERT_TRUE(file_is("out/a.bin", "old"));
    ASSERT_OK(ckpt_outdir_commit(d));
    ASSERT_EQ_STR(listing("."), "out");
    ASSERT_EQ_STR(listing("out"), "a.bin|fresh|keep.txt|sub");
    ASSERT_TRUE(file_is("out/keep.txt", "mine"));
    ASSERT_TRUE(file_is("out/a.bin", "new"));
    ASSERT_EQ_STR(listing("out/sub"), "b.bin|old.txt");
    ASSERT_TRUE(file_is("out/fresh/c.bin", "C"));
}

CKPT_TEST(test_outdir_bad_names)
{
    static const char *const bad[] = { "", "/abs.bin", "../up.bin", "a/../b.bin", "sub/.." };
    ckpt_outdir *d;
    size_t i;

    ASSERT_OK(ckpt_outdir_begin(&d, "out", 0));
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_TRUE(ckpt_outdir_file(d, bad[i]) == NULL);
        ASSERT_EQ_INT(ckpt_error_last()->code, CKPT_EINVALID);
        ASSERT_ERROR_MENTIONS("not a plain relative output name");
    }
    ASSERT_OK(put(d, "a.bin", "A"));
    ASSERT_TRUE(ckpt_outdir_file(d, "a.bin") == NULL);
    ASSERT_EQ_INT(ckpt_error_last()->code, CKPT_EEXISTS);
    ASSERT_ERROR_MENTIONS("a.bin: written twice");
    ckpt_outdir_abort(d);
    ASSERT_EQ_STR(listing("."), "");
}

CKPT_TEST(test_outdir_cleanup_all_removes_staging)
{
    ckpt_outdir *a, *b;

    ASSERT_OK(ckpt_outdir_begin(&a, "one", 0));
    ASSERT_OK(ckpt_outdir_begin(&b, "two", 0));
    ASSERT_OK(put(a, "top.bin", "T"));
    ASSERT_OK(put(a, "x/y/z/deep.bin", "D"));
    ASSERT_OK(put(a, "x/y/side.bin", "S"));
    ASSERT_OK(put(b, "mp_rank_00/m.bin", "M"));
    ckpt_outdir_cleanup_all();
    ASSERT_EQ_STR(listing("."), "");
    /* the handles stay usable enough to be closed; commit has nothing left to move */
    ckpt_outdir_abort(a);
    ASSERT_FAILS(CKPT_EIO, ckpt_outdir_commit(b));
    ASSERT_ERROR_MENTIONS("two: cannot move the output into place");
    ASSERT_EQ_STR(listing("."), "");
}

CKPT_TEST(test_outdir_cleanup_all_spares_committed_output)
{
    ckpt_outdir *d;

    ASSERT_OK(ckpt_outdir_begin(&d, "out", 0));
    ASSERT_OK(put(d, "sub/a.bin", "A"));
    ASSERT_OK(ckpt_outdir_commit(d));
    ckpt_outdir_cleanup_all();
    ASSERT_TRUE(file_is("out/sub/a.bin", "A"));
    /* slots were given back: a later output is cleaned up as well */
    ASSERT_OK(ckpt_outdir_begin(&d, "later", 0));
    ASSERT_OK(put(d, "b.bin", "B"));
    ckpt_outdir_cleanup_all();
    ASSERT_EQ_STR(listing("."), "out");
    ckpt_outdir_abort(d);
}

static void on_signal(int sig)
{
    (void)sig;
    ckpt_outdir_cleanup_all();
}

CKPT_TEST(test_outdir_cleanup_from_signal_handler)
{
    struct sigaction sa, old;
    ckpt_outdir *d;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ASSERT_TRUE(sigaction(SIGUSR1, &sa, &old) == 0);
    ASSERT_OK(ckpt_outdir_begin(&d, "out", 0));
    ASSERT_OK(put(d, "a/b.bin", "partial"));
    raise(SIGUSR1);
    sigaction(SIGUSR1, &old, NULL);
    ASSERT_EQ_STR(listing("."), "");
    ckpt_outdir_abort(d);
}

/* An output directory inside an open input's directory is refused before anything is made
 * there, the missing parents included; so is the input directory itself, even with force. */
CKPT_TEST(test_outdir_refuses_open_inputs)
{
    ckpt_outdir *d = (ckpt_outdir *)1;
    ckpt_ckpt *c;

    ASSERT_TRUE(ckpt_test_copy_data_dir("dcp", "dcp") == 0);
    ASSERT_OK(ckpt_open(&c, "dcp", NULL));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outdir_begin(&d, "dcp/a/b", 1));
    ASSERT_TRUE(d == NULL);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_ERROR_MENTIONS("dcp/a/b is inside the input directory dcp");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outdir_begin(&d, "dcp", 1));
    ASSERT_ERROR_MENTIONS("dcp and dcp are the same directory");
    ASSERT_EQ_STR(listing("dcp"), ".metadata|__0_0.distcp|__1_0.distcp|expected.json");
    ASSERT_OK(ckpt_outdir_begin(&d, "out", 0));
    ckpt_outdir_abort(d);
    ckpt_close(c);
}

/* With force the output directory may hold an input: its files may be written beside it,
 * never over it nor into it. */
CKPT_TEST(test_outdir_force_spares_inputs_inside)
{
    ckpt_outdir *d;
    ckpt_ckpt *c;

    ASSERT_TRUE(mkdir("out", 0777) == 0);
    ASSERT_TRUE(ckpt_test_copy_data_dir("dcp", "out/dcp") == 0);
    ASSERT_OK(ckpt_open(&c, "out/dcp", NULL));
    ASSERT_OK(ckpt_outdir_begin(&d, "out", 1));
    ASSERT_TRUE(ckpt_outdir_file(d, "dcp/__0_0.distcp") == NULL);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_ERROR_MENTIONS("out/dcp/__0_0.distcp is the input out/dcp/__0_0.distcp");
    ASSERT_TRUE(ckpt_outdir_file(d, "dcp/new.bin") == NULL);
    ASSERT_ERROR_MENTIONS("out/dcp/new.bin is inside the input directory out/dcp");
    ASSERT_OK(put(d, "beside.bin", "B"));
    ASSERT_OK(ckpt_outdir_commit(d));
    ckpt_close(c);
    ASSERT_EQ_STR(listing("out"), "beside.bin|dcp");
    ASSERT_EQ_STR(listing("out/dcp"), ".metadata|__0_0.distcp|__1_0.distcp|expected.json");
}

CKPT_TEST(test_outdir_check_apart)
{
    ASSERT_TRUE(mkdir("in", 0777) == 0 && mkdir("in/sub", 0777) == 0 && mkdir("other", 0777) == 0);
    ASSERT_OK(ckpt_outdir_check_apart("other", "in"));
    ASSERT_OK(ckpt_outdir_check_apart("new", "in"));
    ASSERT_OK(ckpt_outdir_check_apart("in2", "in"));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outdir_check_apart("in", "in"));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outdir_check_apart("in/", "./in"));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outdir_check_apart("in/sub", "in"));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outdir_check_apart("in/new", "in"));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "inside the input directory") != NULL);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
}

/* A staging directory a killed run left (its process gone) is removed by the next run writing
 * into the same directory, which says so; a live run's is left. Another run filling the output while
 * this one writes wins: this one fails, its staging directory goes, theirs stays. */
CKPT_TEST(test_outdir_abandoned_staging_and_races)
{
    char mine[300], dead[400];
    ckpt_outdir *live, *d;

    ASSERT_OK(ckpt_outdir_begin(&live, "out", 0));
    snprintf(mine, sizeof mine, "%s", listing("."));
    /* the same machine and boot, a pid no process has: a killed run's, with a file inside */
    snprintf(dead, sizeof dead, ".out.ckptconv-%.16s-99999999-1-abcdef", mine + 14);
    ASSERT_TRUE(mkdir(dead, 0777) == 0);
    snprintf(dead + strlen(dead), sizeof dead - strlen(dead), "/sub");
    ASSERT_TRUE(mkdir(dead, 0777) == 0);
    snprintf(dead + strlen(dead), sizeof dead - strlen(dead), "/half.pt");
    ckpt_test_write_file(dead, "x", 1);
    /* and a killed run's temporary file for another output in the same directory */
    snprintf(dead, sizeof dead, ".other.pt.ckptconv-%.16s-99999999-1-ghijkl", mine + 14);
    ckpt_test_write_file(dead, "x", 1);
    ASSERT_OK(ckpt_outdir_begin(&d, "out", 0));
    ASSERT_TRUE(strstr(ckpt_outdir_notes(d), "-99999999-1-abcdef, left by an interrupted run (pid 99999999)") != NULL);
    ASSERT_TRUE(strstr(ckpt_outdir_notes(d), "-99999999-1-ghijkl, left by an interrupted run (pid 99999999)") != NULL);
    ASSERT_TRUE(strstr(listing("."), "ghijkl") == NULL);
    ASSERT_TRUE(strstr(listing("."), mine) != NULL);
    ASSERT_TRUE(strstr(listing("."), "abcdef") == NULL);
    ASSERT_OK(put(d, "a.bin", "A"));
    ASSERT_OK(put(live, "b.bin", "B"));
    ASSERT_OK(ckpt_outdir_commit(live));
    ASSERT_FAILS(CKPT_EEXISTS, ckpt_outdir_commit(d));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "filled meanwhile") != NULL);
    ASSERT_EQ_STR(listing("."), "out");
    ASSERT_EQ_STR(listing("out"), "b.bin");
}
