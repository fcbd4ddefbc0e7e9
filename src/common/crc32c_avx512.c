/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C by carry-less multiplication folding with VPCLMULQDQ on 512-bit registers; built
 * with -mavx512f -mavx512vl -mvpclmulqdq -mpclmul -msse4.2 and called only when crc32c.c
 * found those features and the OS saving the AVX-512 state.
 *
 * The three-chain crc32 code (crc32c_sse42.c) is bound by the crc32 unit's one 8-byte
 * step per cycle. Folding instead keeps sixteen 128-bit lanes of the message in four ZMM
 * registers and moves each lane 256 bytes forward per step with two carry-less multiplies:
 * eight VPCLMULQDQ for 256 bytes, where crc32 takes 32 cycles (about 4x per thread on
 * 150 KB buffers in L2, docs/BENCHMARKS.md).
 *
 * Why folding is exact: the raw CRC register of a message M of n bits is M(x) x^32 mod P,
 * with the initial register added into M's first 32 bits, so any value congruent to M
 * modulo P gives the same CRC. In the reflected order a 16-byte lane L is the polynomial
 * L(x) = A(x) x^64 + B(x), A its first 8 bytes and B its last 8. Moving L forward over d
 * bytes multiplies it by x^(8d); instead of that 128+8d-bit product the code adds the
 * congruent A (x^(8d+64) mod P) + B (x^(8d) mod P), under 128 bits, to the lane d bytes on.
 * A reflected 64 x 64 carry-less product comes out multiplied by x once more, and a 32-bit
 * constant K held in a 64-bit operand's low half stands for K(x) x^32; so the constants
 * are x^(8d+64-33) and x^(8d-33) mod P. When one lane is left, its 16 bytes, fed to the
 * crc32 instruction from a zero register, give M(x) x^32 mod P itself. */
#include "common/crc32c.h"

/* Fold distances, in bytes: the main step (4 x 64), the four registers folded into one
 * (192, 128, 64), one register's lanes into one (48, 32, 16), and the remaining steps of
 * one register (64) and one lane (16). k_lo = x^(8 bytes + 31) mod P, for a lane's first 8
 * bytes; k_hi = x^(8 bytes - 33) mod P, for its last 8; both reflected (bit 31 is x^0) and
 * derived by repeated multiplication by x from x^0 = 0x80000000, as crc32c.c's table is:
 * v = v & 1 ? (v >> 1) ^ 0x82F63B78 : v >> 1. tests/test_crc32c.c recomputes each. */
const stoker__crc32c_fold stoker__crc32c_folds[STOKER__CRC32C_NFOLDS] = {
    [STOKER__CRC32C_FOLD16] = {16, 0xF20C0DFEu, 0x493C7D27u},
    [STOKER__CRC32C_FOLD32] = {32, 0x3DA6D0CBu, 0xBA4FC28Eu},
    [STOKER__CRC32C_FOLD48] = {48, 0x1C291D04u, 0xDDC0152Bu},
    [STOKER__CRC32C_FOLD64] = {64, 0x740EEF02u, 0x9E4ADDF8u},
    [STOKER__CRC32C_FOLD128] = {128, 0x6992CEA2u, 0x0D3B6092u},
    [STOKER__CRC32C_FOLD192] = {192, 0xA87AB8A8u, 0xAB7AFF2Au},
    [STOKER__CRC32C_FOLD256] = {256, 0xDCB17AA4u, 0xB9E02B86u},
};

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512VL__) &&                        \
    defined(__VPCLMULQDQ__) && defined(__PCLMUL__) && defined(__SSE4_2__)

#include <immintrin.h>

const int stoker__crc32c_avx512_built = 1;

/* Buffers from this size on are folded from a 64-byte boundary. */
#define ALIGN_FROM 4096u
/* How far ahead of the fold its loads are prefetched, in bytes: 16 steps. */
#define PREFETCH 4096

_Static_assert(STOKER__CRC32C_AVX512_MIN >= 256 && ALIGN_FROM >= 256 + 63,
               "the fold needs 256 bytes past the head");

/* A lane's constants: k_lo in its low 64 bits (multiplies the lane's first 8 bytes), k_hi
 * in its high 64. */
static inline __m128i lane_k(int which)
{
    const stoker__crc32c_fold *f = &stoker__crc32c_folds[which];
    return _mm_set_epi64x((long long)f->k_hi, (long long)f->k_lo);
}

static inline __m512i wide_k(int which)
{
    return _mm512_broadcast_i32x4(lane_k(which));
}

/* x moved forward by k's distance, added to y: 0x96 is the three-way exclusive or. */
static inline __m512i fold512(__m512i x, __m512i k, __m512i y)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}

static inline __m128i fold128(__m128i x, __m128i k, __m128i y)
{
    return _mm_ternarylogic_epi64(_mm_clmulepi64_si128(x, k, 0x00),
                                  _mm_clmulepi64_si128(x, k, 0x11), y, 0x96);
}

/* The four registers of the last 256 bytes into one, congruent and ending where they end. */
static __m512i four_to_one(__m512i a0, __m512i a1, __m512i a2, __m512i a3)
{
    const __m512i t = fold512(a0, wide_k(STOKER__CRC32C_FOLD192), a3);
    const __m512i u = fold512(a1, wide_k(STOKER__CRC32C_FOLD128), t);
    return fold512(a2, wide_k(STOKER__CRC32C_FOLD64), u);
}

/* One register's four lanes into its last: lanes 0, 1 and 2 move 48, 32 and 16 bytes on,
 * lane 3 is multiplied by zero and added as it is. */
static __m128i one_to_lane(__m512i a)
{
    const stoker__crc32c_fold *f = stoker__crc32c_folds;
    const __m512i k =
        _mm512_set_epi64(0, 0, f[STOKER__CRC32C_FOLD16].k_hi, f[STOKER__CRC32C_FOLD16].k_lo,
                         f[STOKER__CRC32C_FOLD32].k_hi, f[STOKER__CRC32C_FOLD32].k_lo,
                         f[STOKER__CRC32C_FOLD48].k_hi, f[STOKER__CRC32C_FOLD48].k_lo);
    const __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(a, k, 0x00),
                                       _mm512_clmulepi64_epi128(a, k, 0x11));
    const __m128i t01 =
        _mm_xor_si128(_mm512_extracti32x4_epi32(t, 0), _mm512_extracti32x4_epi32(t, 1));
    return _mm_ternarylogic_epi64(t01, _mm512_extracti32x4_epi32(t, 2),
                                  _mm512_extracti32x4_epi32(a, 3), 0x96);
}

/* The raw register c run over n bytes at p, n >= 256 and a multiple of 16. */
static uint32_t fold(uint32_t c, const unsigned char *p, size_t n)
{
    /* four named registers, not an array: GCC keeps an array's elements in memory */
    __m512i a0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_maskz_set1_epi32(1, (int)c));
    __m512i a1 = _mm512_loadu_si512(p + 64);
    __m512i a2 = _mm512_loadu_si512(p + 128);
    __m512i a3 = _mm512_loadu_si512(p + 192);
    p += 256;
    n -= 256;
    const __m512i k256 = wide_k(STOKER__CRC32C_FOLD256);
    for (; n >= 256; p += 256, n -= 256) {
        /* the hardware prefetcher alone leaves a buffer in memory at 22 GB/s, 24 with this
         * (64 MB); in cache it costs nothing measurable. Past the buffer's end a prefetch
         * does no harm, but a pointer may not go there: the address is computed as a
         * number. */
        for (uintptr_t i = 0; i < 4; i++)
            _mm_prefetch((const char *)((uintptr_t)p + PREFETCH + 64 * i), _MM_HINT_T0);
        a0 = fold512(a0, k256, _mm512_loadu_si512(p));
        a1 = fold512(a1, k256, _mm512_loadu_si512(p + 64));
        a2 = fold512(a2, k256, _mm512_loadu_si512(p + 128));
        a3 = fold512(a3, k256, _mm512_loadu_si512(p + 192));
    }
    __m512i one = four_to_one(a0, a1, a2, a3);
    for (; n >= 64; p += 64, n -= 64)
        one = fold512(one, wide_k(STOKER__CRC32C_FOLD64), _mm512_loadu_si512(p));
    __m128i lane = one_to_lane(one);
    for (; n >= 16; p += 16, n -= 16)
        lane = fold128(lane, lane_k(STOKER__CRC32C_FOLD16), _mm_loadu_si128((const void *)p));
    const uint64_t first = (uint64_t)_mm_cvtsi128_si64(lane);
    const uint64_t last = (uint64_t)_mm_extract_epi64(lane, 1);
    return (uint32_t)_mm_crc32_u64(_mm_crc32_u64(0, first), last);
}

uint32_t stoker__crc32c_avx512(uint32_t crc, const void *data, size_t size)
{
    const unsigned char *p = data;
    if (size < STOKER__CRC32C_AVX512_MIN)
        return stoker__crc32c_sse42(crc, p, size);
    /* A 64-byte load that crosses a cache line costs about one cycle more, so on long
     * buffers the head up to the next line goes through crc32 instead; on short ones that
     * serial head costs more than it saves. At an odd address, with the head and without:
     * 150 KB in L2, 76 and 52 GB/s; 512 bytes, 14 and 28. The tail under 16 bytes goes
     * through crc32 too. */
    const size_t head = size >= ALIGN_FROM ? (size_t)(-(uintptr_t)p & 63) : 0;
    crc = stoker__crc32c_sse42(crc, p, head);
    p += head;
    size -= head;
    const size_t body = size & ~(size_t)15;
    crc = ~fold(~crc, p, body);
    return stoker__crc32c_sse42(crc, p + body, size - body);
}

#else

#include "stoker.h"

const int stoker__crc32c_avx512_built = 0;

/* The dispatcher never picks this path then, so it takes whichever path the CPU has. */
uint32_t stoker__crc32c_avx512(uint32_t crc, const void *data, size_t size)
{
    return stoker_crc32c(crc, data, size);
}

#endif
