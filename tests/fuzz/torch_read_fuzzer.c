/* Hostile torch.save files: open with the torch format forced, read every tensor of up to
 * 16 MiB, close. Must never crash, hang or leak, whatever the zip, pickle or data hold.
 * The input's parity turns CRC verification on, so both open paths are exercised. */
#include <ckpt.h>

#include "fuzz.h"

#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_open_options opts = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;
    char path[64], repr[256];
    int fd = fuzz_memfd(data, size, path, sizeof path);

    opts.format = "torch";
    opts.verify_crc = (int)(size & 1);
    if (ckpt_open(&c, path, &opts) == 0) {
        fuzz_read_tensors(c);
        if (ckpt_root(c))
            (void)ckpt_value_repr(ckpt_root(c), repr, sizeof repr);
        ckpt_close(c);
    } else {
        FUZZ_ASSERT(ckpt_error_last()->message[0] != '\0');
    }
    close(fd);
    return 0;
}
