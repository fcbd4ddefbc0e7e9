/* SPDX-License-Identifier: Apache-2.0 */
/* Reference resampling kernels: Pillow's 8-bit fixed-point passes (Resample.c). */
#include "transform/transform.h"

#include "transform/kernels.h"

#include <string.h>

/* Pillow's clip8: the 22-bit fixed-point sum to uint8, saturating. */
static inline uint8_t clip8(int32_t v)
{
    if (v >= (255 << STOKER__PRECISION_BITS))
        return 255;
    if (v <= 0)
        return 0;
    return (uint8_t)(v >> STOKER__PRECISION_BITS);
}

void stoker__interleave4_scalar(const uint8_t *const rows[4], size_t n, uint8_t *quad)
{
    for (size_t x = 0; x < n; x++)
        for (int r = 0; r < 4; r++)
            memcpy(quad + (x * 4 + (size_t)r) * 4, rows[r] + x * 4, 4);
}

void stoker__hpass4_scalar(const uint8_t *quad, int32_t n, const int32_t *first,
                           const int32_t *taps, const int32_t *coef, int32_t kstride, int32_t kmax,
                           uint8_t *const out[4])
{
    (void)kmax; /* the reference runs each pixel's own taps */
    for (int32_t j = 0; j < n; j++) {
        const uint8_t *q = quad + (size_t)first[j] * 16;
        const int32_t *k = coef + (size_t)j * kstride;
        int32_t acc[16];
        for (int i = 0; i < 16; i++)
            acc[i] = STOKER__ROUND;
        for (int32_t x = 0; x < taps[j]; x++)
            for (int i = 0; i < 16; i++)
                acc[i] += q[x * 16 + i] * k[x];
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++)
                out[r][(size_t)j * 4 + c] = clip8(acc[r * 4 + c]);
    }
}

void stoker__vpass_scalar(const uint8_t *src, size_t stride, int32_t taps, const int32_t *coef,
                          uint8_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int32_t acc = STOKER__ROUND;
        for (int32_t k = 0; k < taps; k++)
            acc += src[(size_t)k * stride + i] * coef[k];
        dst[i] = clip8(acc);
    }
}

void stoker__unpack_planar_scalar(const uint8_t *rgbx, size_t n, uint8_t *r, uint8_t *g, uint8_t *b)
{
    for (size_t i = 0; i < n; i++) {
        r[i] = rgbx[4 * i];
        g[i] = rgbx[4 * i + 1];
        b[i] = rgbx[4 * i + 2];
    }
}

void stoker__unpack_packed_scalar(const uint8_t *rgbx, size_t n, uint8_t *rgb)
{
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            rgb[3 * i + c] = rgbx[4 * i + c];
}

/* ---- the fast resampler: 16-bit weights, two taps per multiply-add ------------------------- */

static inline uint16_t clip_bits(int32_t v, int32_t bits)
{
    v = (v + (1 << (bits - 1))) >> bits;
    return (uint16_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* The two weights of a pair: the low and the high 16 bits, each signed. */
static inline int32_t pair_lo(int32_t w)
{
    return (int16_t)(uint16_t)((uint32_t)w & 0xFFFFu);
}

static inline int32_t pair_hi(int32_t w)
{
    return (int16_t)(uint16_t)((uint32_t)w >> 16);
}

void stoker__pairs_scalar(const uint8_t *quad, size_t n, int16_t *pq)
{
    for (size_t x = 0; x < n; x++)
        for (int s = 0; s < 16; s++) {
            pq[x * 32 + 2 * (size_t)s] = quad[x * 16 + (size_t)s];
            pq[x * 32 + 2 * (size_t)s + 1] = quad[(x + 1) * 16 + (size_t)s];
        }
}

void stoker__hpass4_fast_scalar(const int16_t *pq, int32_t n, const int32_t *first,
                                const int32_t *coef, int32_t kstride, int32_t npairs, int32_t bits,
                                uint16_t *const out[4])
{
    for (int32_t j = 0; j < n; j++) {
        const int16_t *q = pq + (size_t)first[j] * 32;
        const int32_t *k = coef + (size_t)j * kstride;
        int32_t acc[16] = {0};
        for (int32_t m = 0; m < npairs; m++)
            for (int s = 0; s < 16; s++)
                acc[s] += q[(size_t)m * 64 + 2 * (size_t)s] * pair_lo(k[m]) +
                          q[(size_t)m * 64 + 2 * (size_t)s + 1] * pair_hi(k[m]);
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++)
                out[r][(size_t)j * 4 + (size_t)c] = clip_bits(acc[r * 4 + c], bits);
    }
}

void stoker__vpass_fast_scalar(const uint16_t *const *rows, int32_t npairs, const int32_t *coef,
                               int32_t bits, uint8_t *dst, size_t n)
{
    stoker__vpass_fast_scalar_from(rows, npairs, coef, bits, dst, 0, n);
}

void stoker__vpass_fast_scalar_from(const uint16_t *const *rows, int32_t npairs,
                                    const int32_t *coef, int32_t bits, uint8_t *dst, size_t start,
                                    size_t n)
{
    for (size_t i = start; i < n; i++) {
        int32_t acc = 0;
        for (int32_t m = 0; m < npairs; m++)
            acc += rows[2 * m][i] * pair_lo(coef[m]) + rows[2 * m + 1][i] * pair_hi(coef[m]);
        dst[i] = (uint8_t)clip_bits(acc, bits);
    }
}
