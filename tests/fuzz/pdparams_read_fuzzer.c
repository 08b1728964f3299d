/* The pdparams reader on hostile bytes: the input is a whole .pdparams file, opened
 * through the public API with the format forced (no bidding), then the first elements of
 * every tensor are read. It must never crash; failures are format errors with a message. */
#include <ckpt.h>

#include "fuzz.h"

#include <string.h>
#include <unistd.h>

#define MAX_TENSORS 256
#define MAX_ELEMS 4096

static unsigned char buf[MAX_ELEMS * 16];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_open_options opts = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;
    char path[64];
    size_t i;
    int fd = fuzz_memfd(data, size, path, sizeof path), rc;

    opts.format = "pdparams";
    rc = ckpt_open(&c, path, &opts);
    if (rc < 0) {
        FUZZ_ASSERT(c == NULL);
        FUZZ_ASSERT(rc == CKPT_EFORMAT || rc == CKPT_EUNSUPPORTED || rc == CKPT_ENOMEM || rc == CKPT_EUNSAFE);
        FUZZ_ASSERT(ckpt_error_last()->message[0] != '\0');
    } else {
        for (i = 0; i < ckpt_tensor_count(c) && i < MAX_TENSORS; i++) {
            const ckpt_tensor *t = ckpt_tensor_at(c, i);
            int64_t n = ckpt_tensor_numel(t);
            FUZZ_ASSERT(t->name != NULL && ckpt_dtype_size(t->dtype) > 0);
            FUZZ_ASSERT(n == 0 || t->storage != NULL);
            if (n > MAX_ELEMS)
                n = MAX_ELEMS;
            rc = ckpt_tensor_read(t, 0, n, t->dtype, buf);
            FUZZ_ASSERT(rc == 0 || rc == CKPT_EFORMAT);
        }
        ckpt_close(c);
    }
    close(fd);
    return 0;
}
