/* CRC-32 through libdeflate (crc32.h). */
#include "crc32.h"

#include <libdeflate.h>

uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t len)
{
    return libdeflate_crc32(crc, data, len);
}
