/* AVX-512 (F, BW, VL, DQ) resampling kernels; exact like the AVX2 ones. Tails use masked
 * loads and stores, which never touch the masked-off bytes. */
#include "transform/transform.h"

#include "transform/kernels.h"

#include <immintrin.h>
#include <string.h>

/* A 4x4 transpose of 32-bit pixels per 128-bit lane, then of the lanes: 16 pixels of 4 rows
 * per iteration. */
void stoker__interleave4_avx512(const uint8_t *const rows[4], size_t n, uint8_t *quad)
{
    size_t x = 0;
    for (; x + 16 <= n; x += 16) {
        const __m512i r0 = _mm512_loadu_si512(rows[0] + 4 * x);
        const __m512i r1 = _mm512_loadu_si512(rows[1] + 4 * x);
        const __m512i r2 = _mm512_loadu_si512(rows[2] + 4 * x);
        const __m512i r3 = _mm512_loadu_si512(rows[3] + 4 * x);
        const __m512i t0 = _mm512_unpacklo_epi32(r0, r1), t1 = _mm512_unpacklo_epi32(r2, r3);
        const __m512i t2 = _mm512_unpackhi_epi32(r0, r1), t3 = _mm512_unpackhi_epi32(r2, r3);
        /* lane L of p_i: pixel 4 L + i of the four rows */
        const __m512i p0 = _mm512_unpacklo_epi64(t0, t1), p1 = _mm512_unpackhi_epi64(t0, t1);
        const __m512i p2 = _mm512_unpacklo_epi64(t2, t3), p3 = _mm512_unpackhi_epi64(t2, t3);
        const __m512i a = _mm512_shuffle_i32x4(p0, p1, 0x44),
                      b = _mm512_shuffle_i32x4(p2, p3, 0x44);
        const __m512i c = _mm512_shuffle_i32x4(p0, p1, 0xEE),
                      d = _mm512_shuffle_i32x4(p2, p3, 0xEE);
        uint8_t *o = quad + 16 * x;
        _mm512_storeu_si512(o, _mm512_shuffle_i32x4(a, b, 0x88));
        _mm512_storeu_si512(o + 64, _mm512_shuffle_i32x4(a, b, 0xDD));
        _mm512_storeu_si512(o + 128, _mm512_shuffle_i32x4(c, d, 0x88));
        _mm512_storeu_si512(o + 192, _mm512_shuffle_i32x4(c, d, 0xDD));
    }
    if (x < n) {
        const uint8_t *const rest[4] = {rows[0] + 4 * x, rows[1] + 4 * x, rows[2] + 4 * x,
                                        rows[3] + 4 * x};
        stoker__interleave4_avx2(rest, n - x, quad + 16 * x);
    }
}

/* 16 sums to 16 bytes, saturated like clip8 (negative sums give 0). */
static inline __m128i finish16(__m512i acc)
{
    const __m512i v = _mm512_srai_epi32(_mm512_add_epi32(acc, _mm512_set1_epi32(STOKER__ROUND)),
                                        STOKER__PRECISION_BITS);
    return _mm512_cvtusepi32_epi8(_mm512_max_epi32(v, _mm512_setzero_si512()));
}

/* One output pixel of four rows: K taps, one weight per tap for 16 values. (A pmaddwd
 * version, exact through 11-bit halves of the weights, measured no faster on either AMD or
 * Intel: the multiplies are not the bottleneck.) */
static inline __attribute__((always_inline)) __m128i pixel16(const uint8_t *q, const int32_t *k,
                                                             int32_t K)
{
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int32_t x = 0; x < K; x++) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(q + (size_t)x * 16));
        acc = _mm512_add_epi32(
            acc, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(v), _mm512_set1_epi32(k[x])));
    }
    return finish16(acc); /* rows 0..3, 4 bytes each */
}

/* Hot loop: four output pixels per iteration, each through K taps (a constant where it is
 * inlined, so the tap loop unrolls and never mispredicts), then a 4x4 transpose of their
 * 32-bit pixels so that each row gets one 16-byte store. The four pixels are written out
 * one by one and the row pointers held in locals: byte stores may alias anything, so with
 * an array of pixels or of row pointers the compiler would keep them in memory and reload
 * them after every store. */
static inline __attribute__((always_inline)) void hpass4_k(const uint8_t *quad, int32_t n,
                                                           const int32_t *first,
                                                           const int32_t *coef, int32_t kstride,
                                                           int32_t K, uint8_t *const out[4])
{
    uint8_t *const o0 = out[0], *const o1 = out[1], *const o2 = out[2], *const o3 = out[3];
    int32_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const int32_t *const k = coef + (size_t)j * kstride;
        /* pixels j .. j + 3 of rows 0..3 */
        const __m128i b0 = pixel16(quad + (size_t)first[j] * 16, k, K);
        const __m128i b1 = pixel16(quad + (size_t)first[j + 1] * 16, k + kstride, K);
        const __m128i b2 = pixel16(quad + (size_t)first[j + 2] * 16, k + 2 * kstride, K);
        const __m128i b3 = pixel16(quad + (size_t)first[j + 3] * 16, k + 3 * kstride, K);
        const __m128i t0 = _mm_unpacklo_epi32(b0, b1), t1 = _mm_unpacklo_epi32(b2, b3);
        const __m128i t2 = _mm_unpackhi_epi32(b0, b1), t3 = _mm_unpackhi_epi32(b2, b3);
        _mm_storeu_si128((__m128i *)(o0 + (size_t)j * 4), _mm_unpacklo_epi64(t0, t1));
        _mm_storeu_si128((__m128i *)(o1 + (size_t)j * 4), _mm_unpackhi_epi64(t0, t1));
        _mm_storeu_si128((__m128i *)(o2 + (size_t)j * 4), _mm_unpacklo_epi64(t2, t3));
        _mm_storeu_si128((__m128i *)(o3 + (size_t)j * 4), _mm_unpackhi_epi64(t2, t3));
    }
    for (; j < n; j++) {
        const __m128i b = pixel16(quad + (size_t)first[j] * 16, coef + (size_t)j * kstride, K);
        const int32_t px[4] = {_mm_cvtsi128_si32(b), _mm_extract_epi32(b, 1),
                               _mm_extract_epi32(b, 2), _mm_extract_epi32(b, 3)};
        for (int r = 0; r < 4; r++)
            memcpy(out[r] + (size_t)j * 4, &px[r], 4);
    }
}

void stoker__hpass4_avx512(const uint8_t *quad, int32_t n, const int32_t *first,
                           const int32_t *taps, const int32_t *coef, int32_t kstride, int32_t kmax,
                           uint8_t *const out[4])
{
    (void)taps; /* every pixel runs kmax taps; the weights past its own are zero */
#define RUN(K) hpass4_k(quad, n, first, coef, kstride, K, out)
    STOKER__WITH_TAPS(kmax, RUN)
#undef RUN
}

/* Hot loop: 64 bytes per iteration; the tail, 16 bytes at a time under a mask. */
void stoker__vpass_avx512(const uint8_t *src, size_t stride, int32_t taps, const int32_t *coef,
                          uint8_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        for (int32_t k = 0; k < taps; k++) {
            const uint8_t *r = src + (size_t)k * stride + i;
            const __m512i w = _mm512_set1_epi32(coef[k]);
            a0 = _mm512_add_epi32(
                a0,
                _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)r)), w));
            a1 = _mm512_add_epi32(
                a1, _mm512_mullo_epi32(
                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r + 16))), w));
            a2 = _mm512_add_epi32(
                a2, _mm512_mullo_epi32(
                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r + 32))), w));
            a3 = _mm512_add_epi32(
                a3, _mm512_mullo_epi32(
                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r + 48))), w));
        }
        _mm_storeu_si128((__m128i *)(dst + i), finish16(a0));
        _mm_storeu_si128((__m128i *)(dst + i + 16), finish16(a1));
        _mm_storeu_si128((__m128i *)(dst + i + 32), finish16(a2));
        _mm_storeu_si128((__m128i *)(dst + i + 48), finish16(a3));
    }
    for (; i < n; i += 16) {
        const size_t left = n - i;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        __m512i a = _mm512_setzero_si512();
        for (int32_t k = 0; k < taps; k++) {
            const __m128i v = _mm_maskz_loadu_epi8(m, src + (size_t)k * stride + i);
            a = _mm512_add_epi32(
                a, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(v), _mm512_set1_epi32(coef[k])));
        }
        _mm_mask_storeu_epi8(dst + i, m, finish16(a));
    }
}
