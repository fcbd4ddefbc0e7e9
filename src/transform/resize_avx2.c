/* SPDX-License-Identifier: Apache-2.0 */
/* AVX2 resampling and unpacking kernels; integer arithmetic identical to the scalar
 * reference (sums of int32 products are exact, so only the order differs). */
#include "transform/transform.h"

#include "transform/kernels.h"

#include <immintrin.h>
#include <string.h>

/* The 22-bit fixed-point sums of 8 lanes, rounded, shifted and saturated like clip8. */
static inline __m256i finish8(__m256i acc)
{
    return _mm256_srai_epi32(_mm256_add_epi32(acc, _mm256_set1_epi32(STOKER__ROUND)),
                             STOKER__PRECISION_BITS);
}

static inline void store4(uint8_t *p, int32_t v)
{
    memcpy(p, &v, 4);
}

/* Hot loop: one output pixel of four rows per iteration through K taps (a constant where it
 * is inlined, so the tap loop unrolls and never mispredicts). The row pointers are held in
 * locals: byte stores may alias anything, so out[] would be reloaded after every store. */
static inline __attribute__((always_inline)) void hpass4_k(const uint8_t *quad, int32_t n,
                                                           const int32_t *first,
                                                           const int32_t *coef, int32_t kstride,
                                                           int32_t K, uint8_t *const out[4])
{
    uint8_t *const o0 = out[0], *const o1 = out[1], *const o2 = out[2], *const o3 = out[3];
    for (int32_t j = 0; j < n; j++) {
        const uint8_t *q = quad + (size_t)first[j] * 16;
        const int32_t *k = coef + (size_t)j * kstride;
        __m256i a01 = _mm256_setzero_si256(), a23 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int32_t x = 0; x < K; x++) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(q + (size_t)x * 16));
            const __m256i w = _mm256_set1_epi32(k[x]);
            a01 = _mm256_add_epi32(a01, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), w));
            a23 = _mm256_add_epi32(
                a23, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), w));
        }
        /* lanes: [row 0, row 2 | row 1, row 3] after the in-lane packs */
        const __m256i p = _mm256_packs_epi32(finish8(a01), finish8(a23));
        const __m256i b = _mm256_packus_epi16(p, p);
        const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
        store4(o0 + (size_t)j * 4, _mm_cvtsi128_si32(lo));
        store4(o2 + (size_t)j * 4, _mm_extract_epi32(lo, 1));
        store4(o1 + (size_t)j * 4, _mm_cvtsi128_si32(hi));
        store4(o3 + (size_t)j * 4, _mm_extract_epi32(hi, 1));
    }
}

void stoker__hpass4_avx2(const uint8_t *quad, int32_t n, const int32_t *first, const int32_t *taps,
                         const int32_t *coef, int32_t kstride, int32_t kmax, uint8_t *const out[4])
{
    (void)taps; /* every pixel runs kmax taps; the weights past its own are zero */
#define RUN(K) hpass4_k(quad, n, first, coef, kstride, K, out)
    STOKER__WITH_TAPS(kmax, RUN)
#undef RUN
}

/* A 4x4 transpose of 32-bit pixels per 128-bit lane: 8 pixels of 4 rows per iteration. */
void stoker__interleave4_avx2(const uint8_t *const rows[4], size_t n, uint8_t *quad)
{
    size_t x = 0;
    for (; x + 8 <= n; x += 8) {
        const __m256i r0 = _mm256_loadu_si256((const __m256i *)(rows[0] + 4 * x));
        const __m256i r1 = _mm256_loadu_si256((const __m256i *)(rows[1] + 4 * x));
        const __m256i r2 = _mm256_loadu_si256((const __m256i *)(rows[2] + 4 * x));
        const __m256i r3 = _mm256_loadu_si256((const __m256i *)(rows[3] + 4 * x));
        const __m256i t0 = _mm256_unpacklo_epi32(r0, r1), t1 = _mm256_unpacklo_epi32(r2, r3);
        const __m256i t2 = _mm256_unpackhi_epi32(r0, r1), t3 = _mm256_unpackhi_epi32(r2, r3);
        const __m256i p0 = _mm256_unpacklo_epi64(t0, t1), p1 = _mm256_unpackhi_epi64(t0, t1);
        const __m256i p2 = _mm256_unpacklo_epi64(t2, t3), p3 = _mm256_unpackhi_epi64(t2, t3);
        uint8_t *o = quad + 16 * x; /* p0 holds pixels x and x + 4, p1 x+1 and x+5, ... */
        _mm256_storeu_si256((__m256i *)o, _mm256_permute2x128_si256(p0, p1, 0x20));
        _mm256_storeu_si256((__m256i *)(o + 32), _mm256_permute2x128_si256(p2, p3, 0x20));
        _mm256_storeu_si256((__m256i *)(o + 64), _mm256_permute2x128_si256(p0, p1, 0x31));
        _mm256_storeu_si256((__m256i *)(o + 96), _mm256_permute2x128_si256(p2, p3, 0x31));
    }
    if (x < n) {
        const uint8_t *const rest[4] = {rows[0] + 4 * x, rows[1] + 4 * x, rows[2] + 4 * x,
                                        rows[3] + 4 * x};
        stoker__interleave4_scalar(rest, n - x, quad + 16 * x);
    }
}

/* Hot loop: 32 bytes per iteration, one multiply-add per tap and 8 bytes. */
void stoker__vpass_avx2(const uint8_t *src, size_t stride, int32_t taps, const int32_t *coef,
                        uint8_t *dst, size_t n)
{
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int32_t k = 0; k < taps; k++) {
            const uint8_t *r = src + (size_t)k * stride + i;
            const __m256i w = _mm256_set1_epi32(coef[k]);
            const __m256i v = _mm256_loadu_si256((const __m256i *)r);
            const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(lo), w));
            a1 = _mm256_add_epi32(
                a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), w));
            a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(hi), w));
            a3 = _mm256_add_epi32(
                a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)), w));
        }
        const __m256i p01 = _mm256_packs_epi32(finish8(a0), finish8(a1));
        const __m256i p23 = _mm256_packs_epi32(finish8(a2), finish8(a3));
        const __m256i out = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), order);
        _mm256_storeu_si256((__m256i *)(dst + i), out);
    }
    for (; i + 8 <= n; i += 8) {
        __m256i a = _mm256_setzero_si256();
        for (int32_t k = 0; k < taps; k++) {
            const __m128i v = _mm_loadl_epi64((const __m128i *)(src + (size_t)k * stride + i));
            a = _mm256_add_epi32(
                a, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), _mm256_set1_epi32(coef[k])));
        }
        const __m256i f = finish8(a);
        const __m128i p =
            _mm_packs_epi32(_mm256_castsi256_si128(f), _mm256_extracti128_si256(f, 1));
        _mm_storel_epi64((__m128i *)(dst + i), _mm_packus_epi16(p, p));
    }
    if (i < n)
        stoker__vpass_scalar(src + i, stride, taps, coef, dst + i, n - i);
}

static inline void store8(uint8_t *p, __m128i v, int high)
{
    const uint64_t x = (uint64_t)(high ? _mm_extract_epi64(v, 1) : _mm_cvtsi128_si64(v));
    memcpy(p, &x, 8);
}

void stoker__unpack_planar_avx2(const uint8_t *rgbx, size_t n, uint8_t *r, uint8_t *g, uint8_t *b)
{
    const __m256i group = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0,
                                           4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(rgbx + 4 * i));
        const __m256i t = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, group), order);
        const __m128i rg = _mm256_castsi256_si128(t), bx = _mm256_extracti128_si256(t, 1);
        store8(r + i, rg, 0);
        store8(g + i, rg, 1);
        store8(b + i, bx, 0);
    }
    if (i < n)
        stoker__unpack_planar_scalar(rgbx + 4 * i, n - i, r + i, g + i, b + i);
}

void stoker__unpack_packed_avx2(const uint8_t *rgbx, size_t n, uint8_t *rgb)
{
    const __m128i drop = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m128i v = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(rgbx + 4 * i)), drop);
        const int32_t tail = _mm_extract_epi32(v, 2);
        store8(rgb + 3 * i, v, 0);
        memcpy(rgb + 3 * i + 8, &tail, 4);
    }
    if (i < n)
        stoker__unpack_packed_scalar(rgbx + 4 * i, n - i, rgb + 3 * i);
}

/* ---- the fast resampler ------------------------------------------------------------------- */

/* Pixels x and x + 1 of the interleaved block, zero-extended and paired per value. The
 * in-lane word interleave leaves values 0-3 and 8-11 in one register, 4-7 and 12-15 in the
 * other; a lane swap restores the order. */
void stoker__pairs_avx2(const uint8_t *quad, size_t n, int16_t *pq)
{
    for (size_t x = 0; x < n; x++) {
        const __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(quad + 16 * x)));
        const __m256i b =
            _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(quad + 16 * x + 16)));
        const __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);
        _mm256_storeu_si256((__m256i *)(pq + 32 * x), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(pq + 32 * x + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
}

static inline __m256i round8(__m256i acc, __m256i half, __m128i bits)
{
    return _mm256_sra_epi32(_mm256_add_epi32(acc, half), bits);
}

/* Hot loop: two output pixels per iteration, each through P pairs of taps in two registers
 * (rows 0-1 and rows 2-3). Packing the two pixels' sums to words puts row 0 (or 2) in the
 * low lane and row 1 (or 3) in the high lane. */
static inline __attribute__((always_inline)) void
hpass4_fast_k(const int16_t *pq, int32_t n, const int32_t *first, const int32_t *coef,
              int32_t kstride, int32_t P, int32_t bits, uint16_t *const out[4])
{
    uint16_t *const o0 = out[0], *const o1 = out[1], *const o2 = out[2], *const o3 = out[3];
    const __m256i half = _mm256_set1_epi32(1 << (bits - 1)), top = _mm256_set1_epi16(255);
    const __m128i sh = _mm_cvtsi32_si128(bits);
    int32_t j = 0;
    for (; j + 2 <= n; j += 2) {
        __m256i a[2], b[2];
        for (int u = 0; u < 2; u++) {
            const int16_t *q = pq + (size_t)first[j + u] * 32;
            const int32_t *k = coef + (size_t)(j + u) * kstride;
            __m256i x01 = _mm256_setzero_si256(), x23 = x01;
#pragma GCC unroll 8
            for (int32_t m = 0; m < P; m++) {
                const __m256i w = _mm256_set1_epi32(k[m]);
                const __m256i *v = (const __m256i *)(q + (size_t)m * 64);
                x01 = _mm256_add_epi32(x01, _mm256_madd_epi16(_mm256_loadu_si256(v), w));
                x23 = _mm256_add_epi32(x23, _mm256_madd_epi16(_mm256_loadu_si256(v + 1), w));
            }
            a[u] = round8(x01, half, sh);
            b[u] = round8(x23, half, sh);
        }
        const __m256i p01 = _mm256_min_epu16(_mm256_packus_epi32(a[0], a[1]), top);
        const __m256i p23 = _mm256_min_epu16(_mm256_packus_epi32(b[0], b[1]), top);
        _mm_storeu_si128((__m128i *)(o0 + (size_t)j * 4), _mm256_castsi256_si128(p01));
        _mm_storeu_si128((__m128i *)(o1 + (size_t)j * 4), _mm256_extracti128_si256(p01, 1));
        _mm_storeu_si128((__m128i *)(o2 + (size_t)j * 4), _mm256_castsi256_si128(p23));
        _mm_storeu_si128((__m128i *)(o3 + (size_t)j * 4), _mm256_extracti128_si256(p23, 1));
    }
    if (j < n)
        stoker__hpass4_fast_scalar(pq, n - j, first + j, coef + (size_t)j * kstride, kstride, P,
                                   bits,
                                   (uint16_t *const[4]){o0 + (size_t)j * 4, o1 + (size_t)j * 4,
                                                        o2 + (size_t)j * 4, o3 + (size_t)j * 4});
}

void stoker__hpass4_fast_avx2(const int16_t *pq, int32_t n, const int32_t *first,
                              const int32_t *coef, int32_t kstride, int32_t npairs, int32_t bits,
                              uint16_t *const out[4])
{
#define RUN(P) hpass4_fast_k(pq, n, first, coef, kstride, P, bits, out)
    STOKER__WITH_TAPS(npairs, RUN) /* pairs of taps: 1..8 are constants too */
#undef RUN
}

/* Hot loop: 32 values per iteration, as the AVX-512 kernel does it (two rows' words
 * interleaved, one multiply-add per pair of taps); the byte pack is in-lane, so a 64-bit
 * permute restores the order. */
void stoker__vpass_fast_avx2(const uint16_t *const *rows, int32_t npairs, const int32_t *coef,
                             int32_t bits, uint8_t *dst, size_t n)
{
    const __m256i half = _mm256_set1_epi32(1 << (bits - 1));
    const __m128i sh = _mm_cvtsi32_si128(bits);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i l0 = _mm256_setzero_si256(), h0 = l0, l1 = l0, h1 = l0;
        for (int32_t m = 0; m < npairs; m++) {
            const uint16_t *a = rows[2 * m] + i, *b = rows[2 * m + 1] + i;
            const __m256i w = _mm256_set1_epi32(coef[m]);
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)a);
            const __m256i b0 = _mm256_loadu_si256((const __m256i *)b);
            const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a + 16));
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + 16));
            l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(_mm256_unpacklo_epi16(a0, b0), w));
            h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(_mm256_unpackhi_epi16(a0, b0), w));
            l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(_mm256_unpacklo_epi16(a1, b1), w));
            h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(_mm256_unpackhi_epi16(a1, b1), w));
        }
        const __m256i w0 = _mm256_packus_epi32(round8(l0, half, sh), round8(h0, half, sh));
        const __m256i w1 = _mm256_packus_epi32(round8(l1, half, sh), round8(h1, half, sh));
        const __m256i v = _mm256_permute4x64_epi64(_mm256_packus_epi16(w0, w1), 0xD8);
        _mm256_storeu_si256((__m256i *)(dst + i), v);
    }
    stoker__vpass_fast_scalar_from(rows, npairs, coef, bits, dst, i, n);
}
