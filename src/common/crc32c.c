/* CRC32C: a portable slicing-by-8 reference and a run-time switch to SSE4.2. */
#include "common/crc32c.h"
#include "common/common.h"

#include <pthread.h>

static uint32_t table[8][256];
static int have_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t stoker__crc32c_portable(uint32_t crc, const void *data, size_t size)
{
    pthread_once(&once, init);
    const uint8_t *p = data;
    crc = ~crc;
    while (size >= 8) {
        uint32_t lo = crc ^ stoker__get_u32(p);
        uint32_t hi = stoker__get_u32(p + 4);
        crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
              table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
              table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        size -= 8;
    }
    while (size--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

int stoker__crc32c_hw(void)
{
    pthread_once(&once, init);
    return have_hw;
}

uint32_t stoker_crc32c(uint32_t crc, const void *data, size_t size)
{
#if defined(__x86_64__)
    if (stoker__crc32c_hw())
        return stoker__crc32c_sse42(crc, data, size);
#endif
    return stoker__crc32c_portable(crc, data, size);
}
