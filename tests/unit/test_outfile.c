/* Atomic output: nothing appears under the final name before commit, nothing is left
 * behind on abort or interruption, existing files are kept unless overwriting is asked. */
#include "test.h"

#include <ckpt/sys/io.h>

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

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

static int file_is(const char *path, const void *data, size_t len)
{
    size_t got;
    unsigned char *bytes = ckpt_test_read_file(path, &got);
    int same = bytes && got == len && memcmp(bytes, data, len) == 0;

    free(bytes);
    return same;
}

CKPT_TEST(test_outfile_commit_renames_into_place)
{
    static const char expect[12] = { 'a', 'b', 'c', 0, 0, 0, 0, 0, 'x', 'y', 'z', 'w' };
    ckpt_outfile *f;

    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", 0));
    ASSERT_EQ_STR(ckpt_outfile_path(f), "out.bin");
    ASSERT_OK(ckpt_outfile_pwrite(f, 8, "xyzw", 4));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "abc", 3));
    /* An unnamed file until commit: nothing to see, nothing a SIGKILL could leave */
    ASSERT_EQ_STR(listing("."), "");
    ASSERT_TRUE(ckpt_outfile_temp_path(f) == NULL);
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_EQ_STR(listing("."), "out.bin");
    ASSERT_TRUE(file_is("out.bin", expect, sizeof expect));
}

CKPT_TEST(test_outfile_temp_lives_next_to_the_target)
{
    ckpt_outfile *f;

    ASSERT_TRUE(mkdir("sub", 0755) == 0);
    ASSERT_OK(ckpt_outfile_open(&f, "sub/model.pt", CKPT_OUTFILE_NAMED));
    /* a named temporary says whose it is: .<name>.ckptconv-<machine>-<pid>-<start>-<random> */
    ASSERT_TRUE(strncmp(listing("sub"), ".model.pt.ckptconv-", 19) == 0);
    ASSERT_TRUE(strchr(listing("sub"), '|') == NULL);
    ASSERT_TRUE(strncmp(ckpt_outfile_temp_path(f), "sub/.model.pt.ckptconv-", 23) == 0);
    ASSERT_EQ_STR(listing("."), "sub");
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "data", 4));
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_EQ_STR(listing("sub"), "model.pt");
    ASSERT_TRUE(file_is("sub/model.pt", "data", 4));
}

CKPT_TEST(test_outfile_abort_leaves_nothing)
{
    ckpt_outfile *f;

    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", 0));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "abc", 3));
    ckpt_outfile_abort(f);
    ckpt_outfile_abort(NULL);
    ASSERT_EQ_STR(listing("."), "");
}

CKPT_TEST(test_outfile_refuses_existing_file)
{
    ckpt_outfile *f = (ckpt_outfile *)1;

    ckpt_test_write_file("out.bin", "old", 3);
    ASSERT_FAILS(CKPT_EEXISTS, ckpt_outfile_open(&f, "out.bin", 0));
    ASSERT_TRUE(f == NULL);
    /* the caller's request as it stands, not a failure of the run: a usage error to a tool */
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_ERROR_MENTIONS("out.bin");
    ASSERT_ERROR_MENTIONS("--force");
    ASSERT_EQ_STR(listing("."), "out.bin");
    ASSERT_TRUE(file_is("out.bin", "old", 3));
}

CKPT_TEST(test_outfile_overwrite_replaces)
{
    ckpt_outfile *f;

    ckpt_test_write_file("out.bin", "old contents", 12);
    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", CKPT_OUTFILE_OVERWRITE));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "new", 3));
    /* The old file stays whole until the rename. */
    ASSERT_TRUE(file_is("out.bin", "old contents", 12));
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_EQ_STR(listing("."), "out.bin");
    ASSERT_TRUE(file_is("out.bin", "new", 3));
}

CKPT_TEST(test_outfile_file_appearing_meanwhile_is_kept)
{
    ckpt_outfile *f;

    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", 0));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "mine", 4));
    ckpt_test_write_file("out.bin", "theirs", 6);
    ASSERT_FAILS(CKPT_EEXISTS, ckpt_outfile_commit(f));
    ASSERT_ERROR_MENTIONS("out.bin");
    ASSERT_EQ_STR(listing("."), "out.bin");
    ASSERT_TRUE(file_is("out.bin", "theirs", 6));
}

CKPT_TEST(test_outfile_bad_targets)
{
    ckpt_outfile *f;

    ASSERT_TRUE(mkdir("d", 0755) == 0);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outfile_open(&f, "d", CKPT_OUTFILE_OVERWRITE));
    ASSERT_ERROR_MENTIONS("directory");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outfile_open(&f, "d/", 0));
    ASSERT_ERROR_MENTIONS("not a file name");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_outfile_open(&f, "nodir/x.pt", 0));
    ASSERT_ERROR_MENTIONS("nodir/x.pt");
    ASSERT_EQ_STR(listing("."), "d");
    ASSERT_EQ_STR(listing("d"), "");
}

/* An open input is never an output, by whatever name; nor is anything inside an input
 * directory. */
CKPT_TEST(test_outfile_refuses_open_inputs)
{
    ckpt_outfile *f = (ckpt_outfile *)1;
    ckpt_ckpt *c;

    ASSERT_TRUE(ckpt_test_copy_data_dir("dcp", "dcp") == 0);
    ASSERT_TRUE(symlink("dcp", "dcp-link") == 0);
    ASSERT_OK(ckpt_open(&c, "dcp-link", NULL));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outfile_open(&f, "dcp/out.safetensors", CKPT_OUTFILE_OVERWRITE));
    ASSERT_TRUE(f == NULL);
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    ASSERT_ERROR_MENTIONS("dcp/out.safetensors is inside the input directory dcp-link");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_outfile_open(&f, "dcp/__0_0.distcp", CKPT_OUTFILE_OVERWRITE));
    ckpt_close(c);
    ASSERT_OK(ckpt_outfile_open(&f, "dcp/out.safetensors", 0));
    ckpt_outfile_abort(f);
    ASSERT_TRUE(strstr(listing("dcp"), "out") == NULL);
}

CKPT_TEST(test_outfile_long_name_gets_a_short_temp)
{
    char name[256];
    ckpt_outfile *f;

    memset(name, 'n', 255);
    name[255] = '\0';
    ASSERT_OK(ckpt_outfile_open(&f, name, 0));
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_EQ_STR(listing("."), name);
}

CKPT_TEST(test_outfile_respects_umask)
{
    ckpt_outfile *f;
    struct stat st;
    mode_t old = umask(027);

    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", 0));
    ASSERT_OK(ckpt_outfile_commit(f));
    umask(old);
    ASSERT_TRUE(stat("out.bin", &st) == 0);
    ASSERT_EQ_INT(st.st_mode & 0777, 0640);
}

CKPT_TEST(test_outfile_truncate)
{
    static const char zeros[6] = { 0 };
    ckpt_outfile *f;
    unsigned char *got;
    size_t len;

    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", 0));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "0123456789", 10));
    ASSERT_OK(ckpt_outfile_truncate(f, 4));
    ASSERT_OK(ckpt_outfile_truncate(f, 10));
    ASSERT_OK(ckpt_outfile_commit(f));
    got = ckpt_test_read_file("out.bin", &len);
    ASSERT_TRUE(got != NULL);
    ASSERT_EQ_INT(len, 10);
    ASSERT_TRUE(memcmp(got, "0123", 4) == 0 && memcmp(got + 4, zeros, 6) == 0);
    free(got);
}

static void copy_and_check(const char *src_path)
{
    size_t n = 3 * 1024 * 1024 + 123, i;
    unsigned char *data = malloc(n + 3); /* room for the expected output */
    ckpt_file *src;
    ckpt_outfile *f;
    int same;

    ASSERT_TRUE(data != NULL);
    for (i = 0; i < n; i++)
        data[i] = (unsigned char)(i ^ (i >> 9));
    ckpt_test_write_file(src_path, data, n);
    ASSERT_OK(ckpt_file_open(&src, src_path));
    ASSERT_OK(ckpt_outfile_open(&f, "copy.bin", 0));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "head", 4));
    ASSERT_OK(ckpt_outfile_copy(f, 4, src, 1, n - 1));
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_outfile_copy(f, 0, src, n - 2, 3));
    ASSERT_ERROR_MENTIONS(src_path);
    ASSERT_OK(ckpt_outfile_commit(f));
    ckpt_file_close(src);
    memmove(data + 4, data + 1, n - 1);
    memcpy(data, "head", 4);
    same = file_is("copy.bin", data, n + 3);
    free(data);
    ASSERT_TRUE(same);
}

CKPT_TEST(test_outfile_copy_same_filesystem)
{
    copy_and_check("source.bin");
}

/* Across filesystems the kernel refuses copy_file_range; the buffered path takes over. */
CKPT_TEST(test_outfile_copy_across_filesystems)
{
    char path[64];
    struct stat st;

    if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode)) {
        printf("     (no /dev/shm: copying within one filesystem)\n");
        copy_and_check("source.bin");
        return;
    }
    snprintf(path, sizeof path, "/dev/shm/ckpt-copy-src-%d", (int)getpid());
    copy_and_check(path);
    remove(path);
}

CKPT_TEST(test_outfile_cleanup_all_removes_temps)
{
    ckpt_outfile *a, *b;

    ASSERT_OK(ckpt_outfile_open(&a, "a.bin", CKPT_OUTFILE_NAMED));
    ASSERT_OK(ckpt_outfile_open(&b, "b.bin", CKPT_OUTFILE_NAMED));
    ASSERT_OK(ckpt_outfile_pwrite(a, 0, "a", 1));
    ckpt_outfile_cleanup_all();
    ASSERT_EQ_STR(listing("."), "");
    /* The handles stay usable enough to be closed; commit has nothing left to rename. */
    ckpt_outfile_abort(a);
    ASSERT_FAILS(CKPT_EIO, ckpt_outfile_commit(b));
    ASSERT_EQ_STR(listing("."), "");
    /* Slots were given back: later outputs work and are cleaned up as well. */
    ASSERT_OK(ckpt_outfile_open(&a, "c.bin", CKPT_OUTFILE_NAMED));
    ckpt_outfile_cleanup_all();
    ASSERT_EQ_STR(listing("."), "");
    ckpt_outfile_abort(a);
}

static void on_signal(int sig)
{
    (void)sig;
    ckpt_outfile_cleanup_all();
}

CKPT_TEST(test_outfile_cleanup_from_signal_handler)
{
    struct sigaction sa, old;
    ckpt_outfile *f;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ASSERT_TRUE(sigaction(SIGUSR1, &sa, &old) == 0);
    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", CKPT_OUTFILE_NAMED));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "partial", 7));
    raise(SIGUSR1);
    sigaction(SIGUSR1, &old, NULL);
    ASSERT_EQ_STR(listing("."), "");
    ckpt_outfile_abort(f);
}

CKPT_TEST(test_outfile_many_open_at_once)
{
    enum { N = 300 };
    ckpt_outfile *f[N];
    char name[32];
    int i;

    /* More outputs than the cleanup table holds: all still work. */
    for (i = 0; i < N; i++) {
        snprintf(name, sizeof name, "o%03d", i);
        ASSERT_OK(ckpt_outfile_open(&f[i], name, 0));
    }
    for (i = 0; i < N; i++) {
        if (i % 2)
            ckpt_outfile_abort(f[i]);
        else
            ASSERT_OK(ckpt_outfile_commit(f[i]));
    }
    ASSERT_TRUE(strncmp(listing("."), "o000|o002|", 10) == 0);
    ASSERT_TRUE(strstr(listing("."), "ckptconv") == NULL);
}

/* The temporaries of runs that are gone (another boot, a pid no process has) are removed by
 * the next run writing into the same directory, whatever output they were for, which says
 * so; those of a live run and of another machine are left. */
CKPT_TEST(test_outfile_sweeps_abandoned_temps)
{
    char mine[300], owner[64], name[400];
    ckpt_outfile *f, *live;
    const char *p;

    ASSERT_OK(ckpt_outfile_open(&live, "out.bin", CKPT_OUTFILE_NAMED));
    snprintf(mine, sizeof mine, "%s", listing("."));
    /* ".out.bin.ckptconv-" then 16 hex of this machine and boot */
    ASSERT_TRUE(strlen(mine) > 18 + 16);
    memcpy(owner, mine + 18, 16);
    owner[16] = '\0';
#define TOUCH(fmt, ...)                                                                    \
    do {                                                                                   \
        snprintf(name, sizeof name, fmt, __VA_ARGS__);                                     \
        ckpt_test_write_file(name, "x", 1);                                                \
    } while (0)
    TOUCH(".out.bin.ckptconv-%s-%d-1-aaaaaa", owner, 99999999);             /* no such process */
    TOUCH(".out.bin.ckptconv-%.8sffffffff-%d-1-bbbbbb", owner, (int)getpid()); /* an earlier boot */
    TOUCH(".out.bin.ckptconv-%s-%d-1-cccccc", owner, (int)getpid());        /* this pid, but another start */
    TOUCH(".out.bin.ckptconv-0000000000000000-%d-1-dddddd", 5);             /* another machine */
    TOUCH(".other.bin.ckptconv-%s-%d-1-eeeeee", owner, 99999999);           /* another output's */
    TOUCH(".x.ckptconv-y.ckptconv-%s-%d-1-ffffff", owner, 99999999);       /* the tag in the name */
    TOUCH(".other.bin.ckptconv-%s", mine + 18);                              /* the live run's, another output */
    TOUCH(".out.bin.ckptconv-%s", "not-a-temporary-of-ours");
#undef TOUCH
    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", 0));
    p = ckpt_outfile_notes(f);
    ASSERT_TRUE(strstr(p, "aaaaaa, left by an interrupted run (pid 99999999)\n") != NULL);
    ASSERT_TRUE(strstr(p, "bbbbbb, left by an interrupted run") && strstr(p, "before a reboot"));
    ASSERT_TRUE(strstr(p, "cccccc, left by an interrupted run") != NULL);
    ASSERT_TRUE(strstr(p, "left ./.out.bin.ckptconv-0000000000000000-5-1-dddddd alone: another machine") != NULL);
    ASSERT_TRUE(strstr(p, "eeeeee, left by an interrupted run (pid 99999999)\n") != NULL);
    ASSERT_TRUE(strstr(p, "ffffff, left by an interrupted run (pid 99999999)\n") != NULL);
    ASSERT_OK(ckpt_outfile_commit(f));
    /* left: the live run's (its process is this one, started when it did), the other
     * machine's, and what is not ours */
    p = listing(".");
    ASSERT_TRUE(strstr(p, mine) && strstr(p, "0000000000000000-5-1-dddddd"));
    snprintf(name, sizeof name, ".other.bin.ckptconv-%s", mine + 18);
    ASSERT_TRUE(strstr(p, name) != NULL);
    ASSERT_TRUE(strstr(p, "not-a-temporary-of-ours") && strstr(p, "|out.bin"));
    ASSERT_TRUE(!strstr(p, "aaaaaa") && !strstr(p, "bbbbbb") && !strstr(p, "cccccc"));
    ASSERT_TRUE(!strstr(p, "eeeeee") && !strstr(p, "ffffff"));
    ckpt_outfile_abort(live);
}

/* An unnamed output replacing a file, and one refused because the file appeared meanwhile. */
CKPT_TEST(test_outfile_unnamed_overwrite_and_race)
{
    ckpt_outfile *f;

    ckpt_test_write_file("out.bin", "old", 3);
    ASSERT_OK(ckpt_outfile_open(&f, "out.bin", CKPT_OUTFILE_OVERWRITE));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "new!", 4));
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_EQ_STR(listing("."), "out.bin");
    ASSERT_TRUE(file_is("out.bin", "new!", 4));
    ASSERT_OK(ckpt_outfile_open(&f, "race.bin", 0));
    ckpt_test_write_file("race.bin", "theirs", 6);
    ASSERT_FAILS(CKPT_EEXISTS, ckpt_outfile_commit(f));
    ASSERT_TRUE(file_is("race.bin", "theirs", 6));
    ASSERT_EQ_STR(listing("."), "out.bin|race.bin");
}

/* ---- ".zst" outputs: written plain, compressed at commit ---- */

/* The frame in `path` decompresses to exactly len bytes of data, and says so in its header. */
static int zst_file_is(const char *path, const void *data, size_t len)
{
    size_t got, n;
    unsigned char *zst = ckpt_test_read_file(path, &got), *plain = malloc(len + 1);
    int same = zst && plain && ZSTD_getFrameContentSize(zst, got) == len &&
               !ZSTD_isError(n = ZSTD_decompress(plain, len + 1, zst, got)) && n == len &&
               memcmp(plain, data, len) == 0;

    free(zst);
    free(plain);
    return same;
}

static unsigned char *pattern(size_t n)
{
    unsigned char *p = malloc(n);
    size_t i;

    for (i = 0; p && i < n; i++)
        p[i] = (unsigned char)(i % 251 < 200 ? i / 4096 : i * 2654435761u >> 13);
    return p;
}

CKPT_TEST(test_outfile_zst_compressed_at_commit)
{
    size_t n = (3 << 20) + 17, got;
    unsigned char *data = pattern(n);
    ckpt_zstd_stats st = { 0, 0, -1.0 };
    ckpt_outfile *f;
    struct stat sb;

    ASSERT_TRUE(data != NULL);
    ASSERT_OK(ckpt_outfile_open(&f, "out.safetensors.zst", 0));
    ASSERT_TRUE(ckpt_outfile_is_zstd(f));
    ckpt_outfile_set_zstd(f, 5, 2, &st);
    /* placements arrive in any order, as the engine writes them */
    ASSERT_OK(ckpt_outfile_pwrite(f, n / 2, data + n / 2, n - n / 2));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, data, n / 2));
    ASSERT_EQ_STR(listing("."), "");
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_EQ_STR(listing("."), "out.safetensors.zst");
    ASSERT_TRUE(zst_file_is("out.safetensors.zst", data, n));
    ASSERT_TRUE(stat("out.safetensors.zst", &sb) == 0);
    ASSERT_EQ_INT(st.raw_bytes, n);
    ASSERT_EQ_INT(st.zst_bytes, sb.st_size);
    ASSERT_TRUE(st.zst_bytes < st.raw_bytes && st.seconds >= 0.0);
    /* and it reads back as the plain bytes */
    {
        ckpt_file *in;
        ASSERT_OK(ckpt_file_open(&in, "out.safetensors.zst"));
        got = (size_t)in->size;
        ASSERT_TRUE(got == n && memcmp(in->data, data, n) == 0);
        ckpt_file_close(in);
    }
    free(data);
}

CKPT_TEST(test_outfile_zst_only_for_zst_names)
{
    ckpt_outfile *f;

    ASSERT_OK(ckpt_outfile_open(&f, "model.zstd", 0));
    ASSERT_TRUE(!ckpt_outfile_is_zstd(f));
    ckpt_outfile_set_zstd(f, 3, 1, NULL);
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "plain", 5));
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_TRUE(file_is("model.zstd", "plain", 5));
}

CKPT_TEST(test_outfile_zst_defaults_and_empty)
{
    ckpt_outfile *f;

    /* no set_zstd: level 3, every core; nothing written: a frame of 0 bytes */
    ASSERT_OK(ckpt_outfile_open(&f, "empty.zst", 0));
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_TRUE(zst_file_is("empty.zst", "", 0));
}

CKPT_TEST(test_outfile_zst_abort_leaves_nothing)
{
    ckpt_outfile *f;

    ASSERT_OK(ckpt_outfile_open(&f, "out.pt.zst", CKPT_OUTFILE_NAMED));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "data", 4));
    ASSERT_TRUE(listing(".")[0] != '\0');
    ckpt_outfile_abort(f);
    ASSERT_EQ_STR(listing("."), "");
}

CKPT_TEST(test_outfile_zst_existing_name_stays)
{
    ckpt_outfile *f;

    ASSERT_OK(ckpt_outfile_open(&f, "keep.zst", CKPT_OUTFILE_NAMED));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "new data", 8));
    ckpt_test_write_file("keep.zst", "keep", 4);
    ASSERT_FAILS(CKPT_EEXISTS, ckpt_outfile_commit(f));
    ASSERT_ERROR_MENTIONS("keep.zst");
    ASSERT_TRUE(file_is("keep.zst", "keep", 4));
    /* neither the plain temporary nor the compressed one is left */
    ASSERT_EQ_STR(listing("."), "keep.zst");
}

CKPT_TEST(test_outfile_zst_overwrite_replaces)
{
    ckpt_outfile *f;

    ckpt_test_write_file("old.zst", "old", 3);
    ASSERT_OK(ckpt_outfile_open(&f, "old.zst", CKPT_OUTFILE_OVERWRITE));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "replacement", 11));
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_TRUE(zst_file_is("old.zst", "replacement", 11));
    ASSERT_EQ_STR(listing("."), "old.zst");
}

/* A library that writes the temporary by path (HDF5) may replace the file under that name:
 * what is compressed is what the name holds at commit. */
CKPT_TEST(test_outfile_zst_named_temp_written_by_path)
{
    ckpt_outfile *f;
    FILE *fp;

    ASSERT_TRUE(mkdir("sub", 0755) == 0);
    ASSERT_OK(ckpt_outfile_open(&f, "sub/model.h5.zst", CKPT_OUTFILE_NAMED));
    ASSERT_TRUE(unlink(ckpt_outfile_temp_path(f)) == 0);
    ASSERT_TRUE((fp = fopen(ckpt_outfile_temp_path(f), "wb")) != NULL);
    ASSERT_TRUE(fwrite("hdf5 bytes", 1, 10, fp) == 10);
    ASSERT_TRUE(fclose(fp) == 0);
    ASSERT_OK(ckpt_outfile_commit(f));
    ASSERT_EQ_STR(listing("sub"), "model.h5.zst");
    ASSERT_TRUE(zst_file_is("sub/model.h5.zst", "hdf5 bytes", 10));
}

/* A signal during the write removes the named temporary; commit then fails and leaves
 * nothing under the final name. */
CKPT_TEST(test_outfile_zst_cleanup_all_then_commit_fails)
{
    ckpt_outfile *f;

    ASSERT_OK(ckpt_outfile_open(&f, "out.zst", CKPT_OUTFILE_NAMED));
    ASSERT_OK(ckpt_outfile_pwrite(f, 0, "data", 4));
    ckpt_outfile_cleanup_all();
    ASSERT_EQ_STR(listing("."), "");
    ASSERT_TRUE(ckpt_outfile_commit(f) < 0);
    ASSERT_EQ_STR(listing("."), "");
}
