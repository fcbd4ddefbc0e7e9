/* CRC32C with the SSE4.2 crc32 instruction (8 bytes per instruction, about 20 GB/s);
 * built with -msse4.2 and called only when the CPU has it. */
#include "common/crc32c.h"

#include <nmmintrin.h>
#include <string.h>

uint32_t stoker__crc32c_sse42(uint32_t crc, const void *data, size_t size)
{
#if defined(__x86_64__)
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (size && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        size--;
    }
    while (size >= 32) {
        uint64_t a, b, d, e;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        memcpy(&d, p + 16, 8);
        memcpy(&e, p + 24, 8);
        c = _mm_crc32_u64(c, a);
        c = _mm_crc32_u64(c, b);
        c = _mm_crc32_u64(c, d);
        c = _mm_crc32_u64(c, e);
        p += 32;
        size -= 32;
    }
    while (size >= 8) {
        uint64_t a;
        memcpy(&a, p, 8);
        c = _mm_crc32_u64(c, a);
        p += 8;
        size -= 8;
    }
    while (size--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
#else
    return stoker__crc32c_portable(crc, data, size);
#endif
}
