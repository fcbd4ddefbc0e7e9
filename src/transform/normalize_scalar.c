/* SPDX-License-Identifier: Apache-2.0 */
/* Reference normalisation: uint8 -> (v/255 - mean)/std as one fused multiply-add, then the
 * element type's rounding to nearest even. The SIMD variants must match it bit for bit. */
#include "transform/transform.h"

#include "transform/kernels.h"

#include <math.h>
#include <string.h>

static uint32_t bits_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

/* A float16 subnormal (|f| < 2^-14): k units of 2^-24, rounded to nearest even. */
static uint16_t f16_subnormal(uint32_t sign, uint32_t ax)
{
    if (ax < 0x33000000u) /* below 2^-25: rounds to zero */
        return (uint16_t)sign;
    const uint32_t e = ax >> 23, m = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e; /* 14..24 */
    uint32_t k = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (k & 1)))
        k++;
    return (uint16_t)(sign | k);
}

uint16_t stoker__f32_to_f16(float f)
{
    const uint32_t x = bits_of(f);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) /* inf, nan (kept quiet) */
        return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0));
    if (ax >= 0x477FF000u) /* 65520 and above round to infinity */
        return (uint16_t)(sign | 0x7C00u);
    if (ax < 0x38800000u)
        return f16_subnormal(sign, ax);
    const uint32_t t = ax - (112u << 23); /* rebias the exponent 127 -> 15 */
    return (uint16_t)(sign | ((t + 0xFFFu + ((t >> 13) & 1)) >> 13));
}

uint16_t stoker__f32_to_bf16(float f)
{
    const uint32_t x = bits_of(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1)) >> 16);
}

float stoker__f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FFu;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m | 0x400u), (int)e - 25);
    uint32_t x = bits_of(v) | sign;
    memcpy(&v, &x, sizeof v);
    return v;
}

/* Element i of dst, in dtype (FLOAT32, FLOAT16 or BFLOAT16), becomes v. */
static inline void put(void *dst, size_t i, int32_t dtype, float v)
{
    if (dtype == STOKER_DTYPE_FLOAT32) {
        memcpy((uint8_t *)dst + 4 * i, &v, 4);
        return;
    }
    const uint16_t h =
        dtype == STOKER_DTYPE_FLOAT16 ? stoker__f32_to_f16(v) : stoker__f32_to_bf16(v);
    memcpy((uint8_t *)dst + 2 * i, &h, 2);
}

void stoker__convert_scalar_from(const uint8_t *src, size_t start, size_t n, int32_t dtype,
                                 const float *scale, const float *bias, void *dst)
{
    for (size_t i = start; i < n; i++) {
        const size_t p = i % STOKER__PATTERN;
        put(dst, i, dtype, fmaf((float)src[i], scale[p], bias[p]));
    }
}

void stoker__convert_scalar(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                            const float *bias, void *dst)
{
    stoker__convert_scalar_from(src, 0, n, dtype, scale, bias, dst);
}

void stoker__emit_planar_scalar_from(const uint8_t *rgbx, size_t start, size_t n, int32_t dtype,
                                     const float *scale, const float *bias, void *const planes[3])
{
    for (size_t i = start; i < n; i++)
        for (int c = 0; c < 3; c++)
            put(planes[c], i, dtype, fmaf((float)rgbx[4 * i + (size_t)c], scale[c], bias[c]));
}

void stoker__emit_planar_scalar(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                                const float *bias, void *const planes[3])
{
    stoker__emit_planar_scalar_from(rgbx, 0, n, dtype, scale, bias, planes);
}

const stoker__simd_ops stoker__simd_scalar = {
    .level = STOKER_SIMD_SCALAR,
    .name = "scalar",
    .interleave4 = stoker__interleave4_scalar,
    .hpass4 = stoker__hpass4_scalar,
    .vpass = stoker__vpass_scalar,
    .pairs = stoker__pairs_scalar,
    .hpass4_fast = stoker__hpass4_fast_scalar,
    .vpass_fast = stoker__vpass_fast_scalar,
    .unpack_planar = stoker__unpack_planar_scalar,
    .unpack_packed = stoker__unpack_packed_scalar,
    .convert = stoker__convert_scalar,
    .emit_planar = stoker__emit_planar_scalar,
};
