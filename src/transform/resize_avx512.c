/* SPDX-License-Identifier: Apache-2.0 */
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

/* One output pixel of four rows: K taps, one weight per tap for 16 values. (Not pmaddwd on
 * 11-bit halves of the weights: the multiplies are not the bottleneck; docs/BENCHMARKS.md.) */
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

/* ---- the fast resampler ------------------------------------------------------------------- */

/* Pixels x and x + 1 of the interleaved block, zero-extended and paired per value: one
 * 32-byte load, a widening move and a word permute per pixel. */
void stoker__pairs_avx512(const uint8_t *quad, size_t n, int16_t *pq)
{
    static const int16_t order[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i pair = _mm512_loadu_si512(order);
    for (size_t x = 0; x < n; x++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(quad + 16 * x));
        _mm512_storeu_si512(pq + 32 * x, _mm512_permutexvar_epi16(pair, _mm512_cvtepu8_epi16(v)));
    }
}

/* 16 sums of `bits`-bit fixed point, rounded and shifted (still 32-bit). */
static inline __m512i round16(__m512i acc, __m512i half, __m128i bits)
{
    return _mm512_sra_epi32(_mm512_add_epi32(acc, half), bits);
}

/* One output pixel of four rows: P pairs of taps, one multiply-add each for 16 values. */
static inline __attribute__((always_inline)) __m512i fast16(const int16_t *q, const int32_t *k,
                                                            int32_t P)
{
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int32_t m = 0; m < P; m++)
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_loadu_si512(q + (size_t)m * 64),
                                                      _mm512_set1_epi32(k[m])));
    return acc;
}

/* Hot loop: four output pixels per iteration. Packing two pixels' sums to words puts, in
 * 128-bit lane r, row r of both; a 64-bit permute then gathers each row's four pixels into
 * one 256-bit half, stored once per row. */
static inline __attribute__((always_inline)) void
hpass4_fast_k(const int16_t *pq, int32_t n, const int32_t *first, const int32_t *coef,
              int32_t kstride, int32_t P, int32_t bits, uint16_t *const out[4])
{
    uint16_t *const o0 = out[0], *const o1 = out[1], *const o2 = out[2], *const o3 = out[3];
    const __m512i half = _mm512_set1_epi32(1 << (bits - 1)), top = _mm512_set1_epi16(255);
    const __m128i sh = _mm_cvtsi32_si128(bits);
    const __m512i rows01 = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i rows23 = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    int32_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const int32_t *const k = coef + (size_t)j * kstride;
        const __m512i a0 = round16(fast16(pq + (size_t)first[j] * 32, k, P), half, sh);
        const __m512i a1 =
            round16(fast16(pq + (size_t)first[j + 1] * 32, k + kstride, P), half, sh);
        const __m512i a2 =
            round16(fast16(pq + (size_t)first[j + 2] * 32, k + 2 * kstride, P), half, sh);
        const __m512i a3 =
            round16(fast16(pq + (size_t)first[j + 3] * 32, k + 3 * kstride, P), half, sh);
        const __m512i p01 = _mm512_min_epu16(_mm512_packus_epi32(a0, a1), top);
        const __m512i p23 = _mm512_min_epu16(_mm512_packus_epi32(a2, a3), top);
        const __m512i r01 = _mm512_permutex2var_epi64(p01, rows01, p23);
        const __m512i r23 = _mm512_permutex2var_epi64(p01, rows23, p23);
        _mm256_storeu_si256((__m256i *)(o0 + (size_t)j * 4), _mm512_castsi512_si256(r01));
        _mm256_storeu_si256((__m256i *)(o1 + (size_t)j * 4), _mm512_extracti64x4_epi64(r01, 1));
        _mm256_storeu_si256((__m256i *)(o2 + (size_t)j * 4), _mm512_castsi512_si256(r23));
        _mm256_storeu_si256((__m256i *)(o3 + (size_t)j * 4), _mm512_extracti64x4_epi64(r23, 1));
    }
    for (; j < n; j++) {
        const __m512i a =
            round16(fast16(pq + (size_t)first[j] * 32, coef + (size_t)j * kstride, P), half, sh);
        const __m512i p = _mm512_min_epu16(_mm512_packus_epi32(a, a), top);
        /* lane r: row r's pixel, twice */
        _mm_storel_epi64((__m128i *)(o0 + (size_t)j * 4), _mm512_castsi512_si128(p));
        _mm_storel_epi64((__m128i *)(o1 + (size_t)j * 4), _mm512_extracti32x4_epi32(p, 1));
        _mm_storel_epi64((__m128i *)(o2 + (size_t)j * 4), _mm512_extracti32x4_epi32(p, 2));
        _mm_storel_epi64((__m128i *)(o3 + (size_t)j * 4), _mm512_extracti32x4_epi32(p, 3));
    }
}

void stoker__hpass4_fast_avx512(const int16_t *pq, int32_t n, const int32_t *first,
                                const int32_t *coef, int32_t kstride, int32_t npairs, int32_t bits,
                                uint16_t *const out[4])
{
#define RUN(P) hpass4_fast_k(pq, n, first, coef, kstride, P, bits, out)
    STOKER__WITH_TAPS(npairs, RUN) /* pairs of taps: 1..8 are constants too */
#undef RUN
}

/* Hot loop: 64 values per iteration. Interleaving the words of two rows pairs each value
 * with the one below it, so one multiply-add applies two taps; the in-lane interleave is
 * undone by the in-lane pack. The tail works under a mask. */
void stoker__vpass_fast_avx512(const uint16_t *const *rows, int32_t npairs, const int32_t *coef,
                               int32_t bits, uint8_t *dst, size_t n)
{
    const __m512i half = _mm512_set1_epi32(1 << (bits - 1));
    const __m128i sh = _mm_cvtsi32_si128(bits);
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i l0 = _mm512_setzero_si512(), h0 = l0, l1 = l0, h1 = l0;
        for (int32_t m = 0; m < npairs; m++) {
            const uint16_t *a = rows[2 * m] + i, *b = rows[2 * m + 1] + i;
            const __m512i w = _mm512_set1_epi32(coef[m]);
            const __m512i a0 = _mm512_loadu_si512(a), b0 = _mm512_loadu_si512(b);
            const __m512i a1 = _mm512_loadu_si512(a + 32), b1 = _mm512_loadu_si512(b + 32);
            l0 = _mm512_add_epi32(l0, _mm512_madd_epi16(_mm512_unpacklo_epi16(a0, b0), w));
            h0 = _mm512_add_epi32(h0, _mm512_madd_epi16(_mm512_unpackhi_epi16(a0, b0), w));
            l1 = _mm512_add_epi32(l1, _mm512_madd_epi16(_mm512_unpacklo_epi16(a1, b1), w));
            h1 = _mm512_add_epi32(h1, _mm512_madd_epi16(_mm512_unpackhi_epi16(a1, b1), w));
        }
        const __m512i w0 = _mm512_packus_epi32(round16(l0, half, sh), round16(h0, half, sh));
        const __m512i w1 = _mm512_packus_epi32(round16(l1, half, sh), round16(h1, half, sh));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtusepi16_epi8(w0));
        _mm256_storeu_si256((__m256i *)(dst + i + 32), _mm512_cvtusepi16_epi8(w1));
    }
    for (; i < n; i += 32) {
        const size_t left = n - i;
        const __mmask32 m32 = left >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << left) - 1);
        __m512i l = _mm512_setzero_si512(), h = l;
        for (int32_t m = 0; m < npairs; m++) {
            const __m512i w = _mm512_set1_epi32(coef[m]);
            const __m512i va = _mm512_maskz_loadu_epi16(m32, rows[2 * m] + i);
            const __m512i vb = _mm512_maskz_loadu_epi16(m32, rows[2 * m + 1] + i);
            l = _mm512_add_epi32(l, _mm512_madd_epi16(_mm512_unpacklo_epi16(va, vb), w));
            h = _mm512_add_epi32(h, _mm512_madd_epi16(_mm512_unpackhi_epi16(va, vb), w));
        }
        const __m512i v = _mm512_packus_epi32(round16(l, half, sh), round16(h, half, sh));
        _mm256_mask_storeu_epi8(dst + i, m32, _mm512_cvtusepi16_epi8(v));
    }
}
