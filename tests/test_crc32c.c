/* CRC32C against published check values (RFC 3720 B.4), and the SSE4.2 path against the
 * portable one on odd sizes and unaligned buffers: small sizes, every size around the
 * three-chain block boundaries (3 x 512 and 3 x 4096 bytes), sizes up to 64 KiB, and 1 MiB
 * at odd offsets. */
#include "common/crc32c.h"
#include "testutil.h"

/* size bytes at buf + off: the dispatcher, the SSE4.2 path and a split in three all agree
 * with the portable code. */
static void check_one(const uint8_t *buf, size_t off, size_t n)
{
    const uint32_t want = stoker__crc32c_portable(0x1234u, buf + off, n);
    const uint32_t got = stoker_crc32c(0x1234u, buf + off, n);
    if (got != want)
        T_FAIL("size %zu offset %zu: %08x != %08x", n, off, got, want);
    if (stoker__crc32c_hw())
        T_EQ_INT(stoker__crc32c_sse42(0x1234u, buf + off, n), want);
    const size_t a = n / 3, b = n - n / 5;
    uint32_t part = stoker_crc32c(0x1234u, buf + off, a);
    part = stoker_crc32c(part, buf + off + a, b - a);
    T_EQ_INT(stoker_crc32c(part, buf + off + b, n - b), want);
}

static void check_large(void)
{
    const size_t cap = (1u << 20) + 64;
    uint8_t *buf = malloc(cap);
    uint64_t s = 7;
    for (size_t i = 0; i < cap; i++)
        buf[i] = (uint8_t)t_rand(&s);
    static const size_t edges[] = {3 * 512, 3 * 4096, 2 * 3 * 4096 + 3 * 512};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
        for (size_t n = edges[e] - 17; n <= edges[e] + 17; n++)
            for (size_t off = 0; off < 8; off += 3)
                check_one(buf, off, n);
    for (size_t n = 600; n <= 65536; n += 1 + n / 5)
        for (size_t off = 0; off < 8; off++)
            check_one(buf, off, n);
    check_one(buf, 0, 65536);
    static const size_t offs[] = {0, 1, 3, 7, 13, 63};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
        check_one(buf, offs[i], 1u << 20);
    check_one(buf, 5, (1u << 20) - 3);
    free(buf);
}

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
    check_large();
    printf("crc32c ok (hardware: %d)\n", stoker__crc32c_hw());
    return 0;
}
