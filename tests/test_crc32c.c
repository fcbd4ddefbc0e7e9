/* CRC32C against published check values (RFC 3720 B.4), and the SSE4.2 path against the
 * portable one on odd sizes and unaligned buffers. */
#include "common/crc32c.h"
#include "testutil.h"

int main(void)
{
    T_EQ_INT(stoker_crc32c(0, "123456789", 9), 0xE3069283u);
    uint8_t buf[4096 + 64];
    memset(buf, 0, 32);
    T_EQ_INT(stoker_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xFF, 32);
    T_EQ_INT(stoker_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    T_EQ_INT(stoker_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    T_EQ_INT(stoker_crc32c(0, buf, 32), 0x113FDB5Cu);

    uint64_t s = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)t_rand(&s);
    for (size_t off = 0; off < 9; off++) {
        for (size_t n = 0; n < 600; n += 1 + n / 7) {
            uint32_t want = stoker__crc32c_portable(0, buf + off, n);
            T_EQ_INT(stoker_crc32c(0, buf + off, n), want);
            /* incremental: two parts give the same as one */
            uint32_t part = stoker_crc32c(0, buf + off, n / 3);
            T_EQ_INT(stoker_crc32c(part, buf + off + n / 3, n - n / 3), want);
            if (stoker__crc32c_hw())
                T_EQ_INT(stoker__crc32c_sse42(0, buf + off, n), want);
        }
    }
    printf("crc32c ok (hardware: %d)\n", stoker__crc32c_hw());
    return 0;
}
