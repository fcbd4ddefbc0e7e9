/* SPDX-License-Identifier: Apache-2.0 */
/* AVX-512 normalisation: the same fused multiply-add and round-to-nearest-even conversions
 * as the scalar reference, 16 lanes at a time; the tail under a mask. */
#include "transform/transform.h"

#include "transform/kernels.h"

#include <immintrin.h>

static inline __m512 load16(__mmask16 m, const uint8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, p)));
}

static inline __m256i to_bf16(__m512 f)
{
    const __m512i x = _mm512_castps_si512(f);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(x, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
    return _mm512_cvtepi32_epi16(r);
}

/* 16 floats as FLOAT16 or BFLOAT16, rounded to nearest even. */
static inline __m256i to16(int32_t dtype, __m512 f)
{
    return dtype == STOKER_DTYPE_FLOAT16
               ? _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
               : to_bf16(f);
}

/* Whole vectors of a line-aligned destination: streaming stores (see emit_all). */
static inline void stream16(uint8_t *dst, size_t e, int32_t dtype, __m512 f)
{
    if (dtype == STOKER_DTYPE_FLOAT32)
        _mm512_stream_ps((float *)(dst + 4 * e), f);
    else
        _mm256_stream_si256((__m256i *)(dst + 2 * e), to16(dtype, f));
}

static inline void store16(uint8_t *dst, size_t e, __mmask16 m, int32_t dtype, __m512 f)
{
    if (dtype == STOKER_DTYPE_FLOAT32)
        _mm512_mask_storeu_ps(dst + 4 * e, m, f);
    else
        _mm256_mask_storeu_epi16(dst + 2 * e, m, to16(dtype, f));
}

/* Hot loop: one 48-element period (3 vectors) per iteration, then masked vectors. A
 * line-aligned destination (NHWC rows of a batch slot) takes streaming stores, as planes
 * do (emit_all). */
static inline void convert_all(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                               const float *bias, uint8_t *dst)
{
    const int stream = !((uintptr_t)dst & 63);
    __m512 s[3], b[3];
    for (int v = 0; v < 3; v++) {
        s[v] = _mm512_loadu_ps(scale + 16 * v);
        b[v] = _mm512_loadu_ps(bias + 16 * v);
    }
    size_t i = 0;
    for (; i + STOKER__PATTERN <= n; i += STOKER__PATTERN)
        for (int v = 0; v < 3; v++) {
            const size_t e = i + 16 * (size_t)v;
            const __m512 f = _mm512_fmadd_ps(load16(0xFFFF, src + e), s[v], b[v]);
            if (stream)
                stream16(dst, e, dtype, f);
            else
                store16(dst, e, 0xFFFF, dtype, f);
        }
    for (int v = 0; i + 16 * (size_t)v < n; v++) {
        const size_t e = i + 16 * (size_t)v, left = n - e;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        store16(dst, e, m, dtype, _mm512_fmadd_ps(load16(m, src + e), s[v], b[v]));
    }
}

void stoker__convert_avx512(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                            const float *bias, void *dst)
{
    if (dtype == STOKER_DTYPE_FLOAT32)
        convert_all(src, n, STOKER_DTYPE_FLOAT32, scale, bias, dst);
    else if (dtype == STOKER_DTYPE_FLOAT16)
        convert_all(src, n, STOKER_DTYPE_FLOAT16, scale, bias, dst);
    else
        convert_all(src, n, STOKER_DTYPE_BFLOAT16, scale, bias, dst);
}

/* Three channels of 16 RGBX pixels, each normalised. */
static inline void channels16(__m512i v, const __m512 *s, const __m512 *b, __m512 f[3])
{
    const __m512i byte = _mm512_set1_epi32(0xFF);
    for (int c = 0; c < 3; c++)
        f[c] = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * (unsigned)c), byte)), s[c],
            b[c]);
}

/* Hot loop: 32 pixels per iteration, so that each plane gets whole 64-byte lines; written
 * with streaming stores when every plane is line-aligned (then each sample's rows are),
 * which skip reading the lines in first and leave the caches to the decoder. Batches are
 * read next by a DMA engine or from another core, not from this one's caches. */
static inline void emit_all(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                            const float *bias, uint8_t *const pl[3], int stream)
{
    __m512 s[3], b[3];
    for (int c = 0; c < 3; c++) {
        s[c] = _mm512_set1_ps(scale[c]);
        b[c] = _mm512_set1_ps(bias[c]);
    }
    const size_t es = dtype == STOKER_DTYPE_FLOAT32 ? 4 : 2;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 f0[3], f1[3];
        channels16(_mm512_loadu_si512(rgbx + 4 * i), s, b, f0);
        channels16(_mm512_loadu_si512(rgbx + 4 * i + 64), s, b, f1);
        for (int c = 0; c < 3; c++) {
            uint8_t *o = pl[c] + es * i;
            if (dtype == STOKER_DTYPE_FLOAT32) {
                if (stream) {
                    _mm512_stream_ps((float *)o, f0[c]);
                    _mm512_stream_ps((float *)(o + 64), f1[c]);
                } else {
                    _mm512_storeu_ps(o, f0[c]);
                    _mm512_storeu_ps(o + 64, f1[c]);
                }
            } else {
                const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(to16(dtype, f0[c])),
                                                     to16(dtype, f1[c]), 1);
                if (stream)
                    _mm512_stream_si512((__m512i *)o, h);
                else
                    _mm512_storeu_si512(o, h);
            }
        }
    }
    for (; i < n; i += 16) {
        const size_t left = n - i;
        const __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        __m512 f[3];
        channels16(_mm512_maskz_loadu_epi32(m, rgbx + 4 * i), s, b, f);
        for (int c = 0; c < 3; c++)
            store16(pl[c], i, m, dtype, f[c]);
    }
}

void stoker__emit_planar_avx512(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                                const float *bias, void *const planes[3])
{
    uint8_t *const pl[3] = {planes[0], planes[1], planes[2]};
    const int stream = !(((uintptr_t)pl[0] | (uintptr_t)pl[1] | (uintptr_t)pl[2]) & 63);
    if (dtype == STOKER_DTYPE_FLOAT32)
        emit_all(rgbx, n, STOKER_DTYPE_FLOAT32, scale, bias, pl, stream);
    else if (dtype == STOKER_DTYPE_FLOAT16)
        emit_all(rgbx, n, STOKER_DTYPE_FLOAT16, scale, bias, pl, stream);
    else
        emit_all(rgbx, n, STOKER_DTYPE_BFLOAT16, scale, bias, pl, stream);
}

/* Unpacking is bound by stores, not width: the AVX2 kernels serve here too. */
const stoker__simd_ops stoker__simd_avx512 = {
    .level = STOKER_SIMD_AVX512,
    .name = "avx512",
    .interleave4 = stoker__interleave4_avx512,
    .hpass4 = stoker__hpass4_avx512,
    .vpass = stoker__vpass_avx512,
    .pairs = stoker__pairs_avx512,
    .hpass4_fast = stoker__hpass4_fast_avx512,
    .vpass_fast = stoker__vpass_fast_avx512,
    .unpack_planar = stoker__unpack_planar_avx2,
    .unpack_packed = stoker__unpack_packed_avx2,
    .convert = stoker__convert_avx512,
    .emit_planar = stoker__emit_planar_avx512,
};
