/* CRC-32 (zip's, zlib's): one function for every record the library checks or writes,
 * computed with libdeflate's carry-less-multiply kernels (tens of GB/s where zlib's table
 * code gives under 2). */
#ifndef CKPT_CRC32_H
#define CKPT_CRC32_H

#ifndef CKPT_BUILD
#error "crc32.h is private to the ckpt library"
#endif

#include <stddef.h>
#include <stdint.h>

/* The CRC of data continued from crc (0 to start), as zlib's crc32() computes it. */
uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t len);

#endif
