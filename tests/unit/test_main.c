/* Runner for one unit-test executable: every registered case, or those named on the
 * command line, each in its own temporary directory. */
#include "test.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CKPT_TESTDATA_DIR
#error "CKPT_TESTDATA_DIR must be defined by the build"
#endif

#define MAX_TESTS 512

static struct { const char *name; ckpt_test_fn fn; } tests[MAX_TESTS];
static int n_tests;
static int current_failed;

void ckpt_test_register(const char *name, ckpt_test_fn fn)
{
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "too many tests\n");
        abort();
    }
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    n_tests++;
}

void ckpt_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "  FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    current_failed = 1;
}

const char *ckpt_test_data(const char *relative)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", CKPT_TESTDATA_DIR, relative);
    return path;
}

void ckpt_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
    fclose(f);
}

unsigned char *ckpt_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data;
    long size;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc((size_t)size + 1);
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        free(data);
        return NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return data;
}

static int selected(const char *name, int argc, char **argv)
{
    int i;
    if (argc < 2)
        return 1;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

static void remove_tree(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    char cwd[4096], dir[4096];
    int i, run = 0, failed = 0;

    if (!getcwd(cwd, sizeof cwd))
        return 2;
    for (i = 0; i < n_tests; i++) {
        if (!selected(tests[i].name, argc, argv))
            continue;
        snprintf(dir, sizeof dir, "%s/ckpt-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir) || chdir(dir) != 0) {
            perror("mkdtemp");
            return 2;
        }
        current_failed = 0;
        ckpt_error_clear();
        tests[i].fn();
        run++;
        if (current_failed) {
            failed++;
            fprintf(stderr, "FAIL %s (kept %s)\n", tests[i].name, dir);
        } else {
            printf("ok   %s\n", tests[i].name);
        }
        if (chdir(cwd) != 0)
            return 2;
        if (!current_failed)
            remove_tree(dir);
    }
    printf("%d passed, %d failed\n", run - failed, failed);
    return failed ? 1 : (run ? 0 : 2);
}

int ckpt_test_copy_data_dir(const char *relative, const char *dst)
{
    char src_dir[4096], src[4608], out[1024];
    struct dirent *e;
    unsigned char *data;
    size_t len;
    DIR *d;

    snprintf(src_dir, sizeof src_dir, "%s", ckpt_test_data(relative));
    if (mkdir(dst, 0755) != 0 || !(d = opendir(src_dir)))
        return -1;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        snprintf(src, sizeof src, "%s/%s", src_dir, e->d_name);
        if (stat(src, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (!(data = ckpt_test_read_file(src, &len)))
            break;
        snprintf(out, sizeof out, "%s/%s", dst, e->d_name);
        ckpt_test_write_file(out, data, len);
        free(data);
    }
    closedir(d);
    return e ? -1 : 0;
}
