/* Hostile Distributed Checkpoints: the input is a 4-byte little-endian length L, then L
 * bytes of `.metadata`, then the bytes of a data file, written as the directory's
 * __0_0.distcp and __1_0.distcp. Open the directory with the torch_dcp format, read every
 * tensor of up to 16 MiB, close. Must never crash, hang or leak, whatever the metadata
 * pickle names or the chunks claim. */
#include <ckpt.h>

#include "fuzz.h"

#include <fcntl.h>
#include <string.h>

static void put_file(const char *dir, const char *name, const uint8_t *data, size_t size)
{
    char path[512];
    size_t done = 0;
    int fd;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FUZZ_ASSERT(fd >= 0);
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        FUZZ_ASSERT(n > 0);
        done += (size_t)n;
    }
    close(fd);
}

static char dir[64];

static void remove_dir(void)
{
    static const char *const names[] = { ".metadata", "__0_0.distcp", "__1_0.distcp" };
    char path[512];
    size_t i;

    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_open_options opts = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;
    char repr[256];
    size_t meta_len;

    if (!dir[0]) {
        ckpt_zstd__set_input_limit(FUZZ_ZSTD_LIMIT);
        snprintf(dir, sizeof dir, "/tmp/ckpt-fuzz-dcp-XXXXXX");
        FUZZ_ASSERT(mkdtemp(dir));
        atexit(remove_dir);
    }
    if (size < 4)
        return 0;
    meta_len = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (meta_len > size - 4)
        meta_len = size - 4;
    put_file(dir, ".metadata", data + 4, meta_len);
    put_file(dir, "__0_0.distcp", data + 4 + meta_len, size - 4 - meta_len);
    put_file(dir, "__1_0.distcp", data + 4 + meta_len, size - 4 - meta_len);
    opts.format = "torch_dcp";
    if (ckpt_open(&c, dir, &opts) == 0) {
        fuzz_read_tensors(c);
        (void)ckpt_value_repr(ckpt_root(c), repr, sizeof repr);
        ckpt_close(c);
    } else {
        FUZZ_ASSERT(ckpt_error_last()->message[0] != '\0');
    }
    return 0;
}
