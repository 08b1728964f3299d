/* CRC-32 (src/core/crc32.c) gives zlib's crc32() for every length, alignment and way of
 * cutting the data into pieces. */
#include "test.h"

#define CKPT_BUILD
#include "core/crc32.h"

#include <stdlib.h>
#include <zlib.h>

CKPT_TEST(test_crc32_matches_zlib)
{
    size_t n = (1 << 20) + 77, len, off, cut;
    unsigned char *buf = malloc(n);
    uint64_t x = 0x2545F4914F6CDD1Dull;
    size_t i;

    for (i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    ASSERT_EQ_INT(ckpt_crc32(0, buf, 0), 0);
    ASSERT_EQ_INT(ckpt_crc32(0, "123456789", 9), 0xCBF43926u);
    for (len = 0; len < 300; len++)
        for (off = 0; off < 9; off++)
            ASSERT_EQ_INT(ckpt_crc32(0, buf + off, len), crc32_z(0, buf + off, len));
    for (len = 1000; len < n; len = len * 3 + 13) {
        uint32_t whole = (uint32_t)crc32_z(0, buf, len);
        ASSERT_EQ_INT(ckpt_crc32(0, buf, len), whole);
        for (cut = 1; cut < len; cut = cut * 7 + 1)
            ASSERT_EQ_INT(ckpt_crc32(ckpt_crc32(0, buf, cut), buf + cut, len - cut), whole);
    }
    free(buf);
}
