/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C: a portable slicing-by-8 reference and a run-time switch to SSE4.2 or AVX-512. */
#include "common/crc32c.h"
#include "common/common.h"

#include <pthread.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

static uint32_t table[8][256];
static int path;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
/* The CPU having AVX-512 is not enough: the OS must also save its state on a context
 * switch, or the registers would be lost. XCR0 says what it saves: bits 1 and 2 (XMM, YMM)
 * and 5, 6 and 7 (opmask, upper halves of ZMM0-15, ZMM16-31). Read here as well: the
 * documentation of __builtin_cpu_supports does not promise that it looks. */
static int os_saves_zmm(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 0xE6u) == 0xE6u;
}

static int have_avx512(void)
{
    return stoker__crc32c_avx512_built && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq") &&
           __builtin_cpu_supports("pclmul") && os_saves_zmm();
}
#endif

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
    if (__builtin_cpu_supports("sse4.2"))
        path = STOKER__CRC32C_SSE42;
#endif
#if defined(__x86_64__)
    if (path == STOKER__CRC32C_SSE42 && have_avx512())
        path = STOKER__CRC32C_AVX512;
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
    return path;
}

uint32_t stoker_crc32c(uint32_t crc, const void *data, size_t size)
{
#if defined(__x86_64__)
    const int hw = stoker__crc32c_hw();
    if (hw == STOKER__CRC32C_AVX512 && size >= STOKER__CRC32C_AVX512_MIN)
        return stoker__crc32c_avx512(crc, data, size);
    if (hw)
        return stoker__crc32c_sse42(crc, data, size);
#endif
    return stoker__crc32c_portable(crc, data, size);
}
