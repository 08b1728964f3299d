/* Hostile HDF5 files through the whole open path: libhdf5 walks the file in its child
 * process (a crash, abort or endless loop there must come back as an error naming the file),
 * this process decodes the walk's records and builds the checkpoint, then every tensor of up
 * to 16 MiB is read. Must never crash, hang or leak. The input is a file on disk: libhdf5
 * opens files by a name it can resolve, which an anonymous file's is not. */
#include <ckpt.h>

#define CKPT_FUZZ_HDF5
#include "../../formats/hdf5_private.h"
#include "fuzz.h"

#include <string.h>
#include <unistd.h>

/* A walk that sends nothing for this long is given up (the library's default is 10 s). */
#define WALK_LIMIT_S 2

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_open_options opts = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;
    char path[] = "/tmp/ckpt_hdf5_open_fuzz_XXXXXX", repr[256];
    int fd = mkstemp(path);
    size_t done = 0;

    FUZZ_ASSERT(fd >= 0);
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        FUZZ_ASSERT(n > 0);
        done += (size_t)n;
    }
    close(fd);
    ckpt_zstd__set_input_limit(FUZZ_ZSTD_LIMIT);
    ckpt_hdf5__set_walk(NULL, WALK_LIMIT_S);
    opts.format = "hdf5";
    if (ckpt_open(&c, path, &opts) == 0) {
        fuzz_read_tensors(c);
        if (ckpt_root(c))
            (void)ckpt_value_repr(ckpt_root(c), repr, sizeof repr);
        ckpt_close(c);
    } else {
        const char *msg = ckpt_error_last()->message;
        FUZZ_ASSERT(msg[0] != '\0' && !strchr(msg, '\n'));
    }
    unlink(path);
    return 0;
}
