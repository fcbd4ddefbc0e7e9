/* SPDX-License-Identifier: Apache-2.0 */
/* AVX2 + FMA + F16C normalisation: the same single-rounding fused multiply-add as the
 * scalar reference, and the same round-to-nearest-even conversions, so results are equal
 * bit for bit. */
#include "transform/transform.h"

#include "transform/kernels.h"

#include <immintrin.h>

static inline __m256 load8(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* bfloat16 of 8 floats, round to nearest even (inputs are finite). */
static inline __m128i to_bf16(__m256 f)
{
    const __m256i x = _mm256_castps_si256(f);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(x, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* 8 floats as FLOAT16 or BFLOAT16, rounded to nearest even. */
static inline __m128i to16(int32_t dtype, __m256 f)
{
    return dtype == STOKER_DTYPE_FLOAT16 ? _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT)
                                         : to_bf16(f);
}

/* 8 values to dst; with streaming stores when `stream` (a line-aligned destination). */
static inline void store8(uint8_t *dst, size_t e, int32_t dtype, __m256 f, int stream)
{
    if (dtype == STOKER_DTYPE_FLOAT32) {
        if (stream)
            _mm256_stream_ps((float *)(dst + 4 * e), f);
        else
            _mm256_storeu_ps((float *)(dst + 4 * e), f);
        return;
    }
    const __m128i h = to16(dtype, f);
    if (stream)
        _mm_stream_si128((__m128i *)(dst + 2 * e), h);
    else
        _mm_storeu_si128((__m128i *)(dst + 2 * e), h);
}

/* Hot loop: one block of 48 elements (one period of the pattern) per iteration, then
 * whole vectors of the last block; streaming stores to a line-aligned destination (NHWC
 * rows of a batch slot), as emit_blocks does. Returns how many elements it did. */
static inline size_t convert_blocks(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                                    const float *bias, uint8_t *dst)
{
    const int stream = !((uintptr_t)dst & 63);
    __m256 s[6], b[6];
    for (int v = 0; v < 6; v++) {
        s[v] = _mm256_loadu_ps(scale + 8 * v);
        b[v] = _mm256_loadu_ps(bias + 8 * v);
    }
    size_t i = 0;
    for (; i + STOKER__PATTERN <= n; i += STOKER__PATTERN)
        for (int v = 0; v < 6; v++) {
            const size_t e = i + 8 * (size_t)v;
            store8(dst, e, dtype, _mm256_fmadd_ps(load8(src + e), s[v], b[v]), stream);
        }
    for (int v = 0; i + 8 <= n; v++, i += 8) /* pattern offset 8 v: i started a block */
        store8(dst, i, dtype, _mm256_fmadd_ps(load8(src + i), s[v], b[v]), stream);
    return i;
}

void stoker__convert_avx2(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                          const float *bias, void *dst)
{
    /* one instantiation per element type, so the type test leaves the loop */
    size_t done;
    if (dtype == STOKER_DTYPE_FLOAT32)
        done = convert_blocks(src, n, STOKER_DTYPE_FLOAT32, scale, bias, dst);
    else if (dtype == STOKER_DTYPE_FLOAT16)
        done = convert_blocks(src, n, STOKER_DTYPE_FLOAT16, scale, bias, dst);
    else
        done = convert_blocks(src, n, STOKER_DTYPE_BFLOAT16, scale, bias, dst);
    stoker__convert_scalar_from(src, done, n, dtype, scale, bias, dst);
}

/* Hot loop: 16 pixels per iteration, so that each plane gets whole 32-byte stores
 * (streaming ones when every plane is line-aligned: see the AVX-512 kernel). */
static inline size_t emit_blocks(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                                 const float *bias, uint8_t *const pl[3], int stream)
{
    const __m256i byte = _mm256_set1_epi32(0xFF);
    __m256 s[3], b[3];
    for (int c = 0; c < 3; c++) {
        s[c] = _mm256_set1_ps(scale[c]);
        b[c] = _mm256_set1_ps(bias[c]);
    }
    const size_t es = dtype == STOKER_DTYPE_FLOAT32 ? 4 : 2;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i v0 = _mm256_loadu_si256((const __m256i *)(rgbx + 4 * i));
        const __m256i v1 = _mm256_loadu_si256((const __m256i *)(rgbx + 4 * i + 32));
        for (int c = 0; c < 3; c++) {
            const int sh = 8 * c;
            const __m256 f0 = _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v0, sh), byte)), s[c], b[c]);
            const __m256 f1 = _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v1, sh), byte)), s[c], b[c]);
            uint8_t *o = pl[c] + es * i;
            if (dtype == STOKER_DTYPE_FLOAT32) {
                if (stream) {
                    _mm256_stream_ps((float *)o, f0);
                    _mm256_stream_ps((float *)(o + 32), f1);
                } else {
                    _mm256_storeu_ps((float *)o, f0);
                    _mm256_storeu_ps((float *)(o + 32), f1);
                }
                continue;
            }
            const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(to16(dtype, f0)),
                                                      to16(dtype, f1), 1);
            if (stream)
                _mm256_stream_si256((__m256i *)o, h);
            else
                _mm256_storeu_si256((__m256i *)o, h);
        }
    }
    return i;
}

void stoker__emit_planar_avx2(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                              const float *bias, void *const planes[3])
{
    uint8_t *const pl[3] = {planes[0], planes[1], planes[2]};
    const int stream = !(((uintptr_t)pl[0] | (uintptr_t)pl[1] | (uintptr_t)pl[2]) & 63);
    size_t done;
    if (dtype == STOKER_DTYPE_FLOAT32)
        done = emit_blocks(rgbx, n, STOKER_DTYPE_FLOAT32, scale, bias, pl, stream);
    else if (dtype == STOKER_DTYPE_FLOAT16)
        done = emit_blocks(rgbx, n, STOKER_DTYPE_FLOAT16, scale, bias, pl, stream);
    else
        done = emit_blocks(rgbx, n, STOKER_DTYPE_BFLOAT16, scale, bias, pl, stream);
    stoker__emit_planar_scalar_from(rgbx, done, n, dtype, scale, bias, planes);
}

const stoker__simd_ops stoker__simd_avx2 = {
    .level = STOKER_SIMD_AVX2,
    .name = "avx2",
    .interleave4 = stoker__interleave4_avx2,
    .hpass4 = stoker__hpass4_avx2,
    .vpass = stoker__vpass_avx2,
    .pairs = stoker__pairs_avx2,
    .hpass4_fast = stoker__hpass4_fast_avx2,
    .vpass_fast = stoker__vpass_fast_avx2,
    .unpack_planar = stoker__unpack_planar_avx2,
    .unpack_packed = stoker__unpack_packed_avx2,
    .convert = stoker__convert_avx2,
    .emit_planar = stoker__emit_planar_avx2,
};
