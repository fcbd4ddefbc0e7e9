/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C with the SSE4.2 crc32 instruction; built with -msse4.2 -mpclmul and called only
 * when the CPU has SSE4.2 (after crc32c.c's init has run __builtin_cpu_init). The few cores
 * with SSE4.2 but no PCLMULQDQ take the single chain.
 *
 * One crc32 instruction has a latency of 3 cycles and a throughput of 1 per cycle, so a
 * single dependency chain runs at a third of the unit's rate (docs/BENCHMARKS.md). Large
 * buffers are cut into chunks of 3 blocks of B bytes whose CRCs run as three independent
 * chains in one loop; the three are then joined by shifting the first two over the bytes
 * that follow them: crc(A B C) = shift(crc(A), 2B) ^ shift(crc(B), B) ^ crc(C), with
 * crc(B) and crc(C) started from 0 (the CRC register is linear). A shift by n bytes is one
 * carry-less multiply by x^(8n - 33) mod P (reflected; the 33 accounts for the product's
 * one-bit reflection offset and the 32-bit reduction) followed by one crc32 instruction
 * that reduces the 64-bit product modulo P. */
#include "common/crc32c.h"

#include <nmmintrin.h>
#include <string.h>
#include <wmmintrin.h>

#if defined(__x86_64__)

/* Block sizes (bytes per chain) and their shift constants x^(8n - 33) mod P, reflected:
 * for n = B and n = 2B. Derived by repeated multiplication by x from x^0 = 0x80000000
 * (tests/test_crc32c.c checks every path against the portable code). */
#define LONG_BLOCK 4096u
#define LONG_K1 0x82F89C77u /* n = 4096 */
#define LONG_K2 0x54A86326u /* n = 8192 */
#define SHORT_BLOCK 512u
#define SHORT_K1 0xDD7E3B0Cu /* n = 512 */
#define SHORT_K2 0x170076FAu /* n = 1024 */

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* crc * x^(8n) mod P, given k = x^(8n - 33) mod P. */
static inline uint64_t shift(uint64_t crc, uint32_t k)
{
    const __m128i prod =
        _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)crc), _mm_cvtsi32_si128((int)k), 0);
    return _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

/* Runs the CRC register c over chunks of 3 x block bytes while they last. */
static uint64_t three_way(uint64_t c, const unsigned char **pp, size_t *size, size_t block,
                          uint32_t k1, uint32_t k2)
{
    const unsigned char *p = *pp;
    while (*size >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < block; i += 8) {
            c = _mm_crc32_u64(c, load64(p + i));
            c1 = _mm_crc32_u64(c1, load64(p + block + i));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * block + i));
        }
        c = shift(c, k2) ^ shift(c1, k1) ^ c2;
        p += 3 * block;
        *size -= 3 * block;
    }
    *pp = p;
    return c;
}

uint32_t stoker__crc32c_sse42(uint32_t crc, const void *data, size_t size)
{
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (size && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        size--;
    }
    if (size >= 3 * SHORT_BLOCK && __builtin_cpu_supports("pclmul")) {
        c = three_way(c, &p, &size, LONG_BLOCK, LONG_K1, LONG_K2);
        c = three_way(c, &p, &size, SHORT_BLOCK, SHORT_K1, SHORT_K2);
    }
    while (size >= 8) {
        c = _mm_crc32_u64(c, load64(p));
        p += 8;
        size -= 8;
    }
    while (size--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

#else

uint32_t stoker__crc32c_sse42(uint32_t crc, const void *data, size_t size)
{
    return stoker__crc32c_portable(crc, data, size);
}

#endif
