/* SPDX-License-Identifier: Apache-2.0 */
/* The kernels of each instruction set, for the per-ISA tables and their tails. Internal to
 * src/transform. */
#ifndef STOKER_TRANSFORM_KERNELS_H
#define STOKER_TRANSFORM_KERNELS_H

#include "transform/transform.h"

#define STOKER__ROUND (1 << (STOKER__PRECISION_BITS - 1))

/* RUN(K) with K a constant when kmax is 1..8 (taps up to a 3.5x shrink, or pairs of taps
 * up to 7.5x), so that a kernel's tap loop, inlined, unrolls; RUN(kmax) otherwise. */
#define STOKER__WITH_TAPS(kmax, RUN)                                                               \
    switch (kmax) {                                                                                \
    case 1: RUN(1); break;                                                                         \
    case 2: RUN(2); break;                                                                         \
    case 3: RUN(3); break;                                                                         \
    case 4: RUN(4); break;                                                                         \
    case 5: RUN(5); break;                                                                         \
    case 6: RUN(6); break;                                                                         \
    case 7: RUN(7); break;                                                                         \
    case 8: RUN(8); break;                                                                         \
    default: RUN(kmax); break;                                                                     \
    }

void stoker__interleave4_scalar(const uint8_t *const rows[4], size_t n, uint8_t *quad);
void stoker__hpass4_scalar(const uint8_t *quad, int32_t n, const int32_t *first,
                           const int32_t *taps, const int32_t *coef, int32_t kstride, int32_t kmax,
                           uint8_t *const out[4]);
void stoker__vpass_scalar(const uint8_t *src, size_t stride, int32_t taps, const int32_t *coef,
                          uint8_t *dst, size_t n);
void stoker__pairs_scalar(const uint8_t *quad, size_t n, int16_t *pq);
void stoker__hpass4_fast_scalar(const int16_t *pq, int32_t n, const int32_t *first,
                                const int32_t *coef, int32_t kstride, int32_t npairs, int32_t bits,
                                uint16_t *const out[4]);
void stoker__vpass_fast_scalar(const uint16_t *const *rows, int32_t npairs, const int32_t *coef,
                               int32_t bits, uint8_t *dst, size_t n);
/* The scalar vertical pass of values [start, n): the tail of the AVX2 variant. */
void stoker__vpass_fast_scalar_from(const uint16_t *const *rows, int32_t npairs,
                                    const int32_t *coef, int32_t bits, uint8_t *dst, size_t start,
                                    size_t n);
void stoker__unpack_planar_scalar(const uint8_t *rgbx, size_t n, uint8_t *r, uint8_t *g,
                                  uint8_t *b);
void stoker__unpack_packed_scalar(const uint8_t *rgbx, size_t n, uint8_t *rgb);
/* The scalar conversion of elements [start, n): the tail of every variant. */
void stoker__convert_scalar_from(const uint8_t *src, size_t start, size_t n, int32_t dtype,
                                 const float *scale, const float *bias, void *dst);
void stoker__emit_planar_scalar(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                                const float *bias, void *const planes[3]);
/* The scalar emission of pixels [start, n): the tail of the AVX2 variant. */
void stoker__emit_planar_scalar_from(const uint8_t *rgbx, size_t start, size_t n, int32_t dtype,
                                     const float *scale, const float *bias, void *const planes[3]);
void stoker__convert_scalar(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                            const float *bias, void *dst);

void stoker__interleave4_avx2(const uint8_t *const rows[4], size_t n, uint8_t *quad);
void stoker__hpass4_avx2(const uint8_t *quad, int32_t n, const int32_t *first, const int32_t *taps,
                         const int32_t *coef, int32_t kstride, int32_t kmax, uint8_t *const out[4]);
void stoker__vpass_avx2(const uint8_t *src, size_t stride, int32_t taps, const int32_t *coef,
                        uint8_t *dst, size_t n);
void stoker__pairs_avx2(const uint8_t *quad, size_t n, int16_t *pq);
void stoker__hpass4_fast_avx2(const int16_t *pq, int32_t n, const int32_t *first,
                              const int32_t *coef, int32_t kstride, int32_t npairs, int32_t bits,
                              uint16_t *const out[4]);
void stoker__vpass_fast_avx2(const uint16_t *const *rows, int32_t npairs, const int32_t *coef,
                             int32_t bits, uint8_t *dst, size_t n);
void stoker__unpack_planar_avx2(const uint8_t *rgbx, size_t n, uint8_t *r, uint8_t *g, uint8_t *b);
void stoker__unpack_packed_avx2(const uint8_t *rgbx, size_t n, uint8_t *rgb);
void stoker__emit_planar_avx2(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                              const float *bias, void *const planes[3]);
void stoker__convert_avx2(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                          const float *bias, void *dst);

void stoker__interleave4_avx512(const uint8_t *const rows[4], size_t n, uint8_t *quad);
void stoker__hpass4_avx512(const uint8_t *quad, int32_t n, const int32_t *first,
                           const int32_t *taps, const int32_t *coef, int32_t kstride, int32_t kmax,
                           uint8_t *const out[4]);
void stoker__vpass_avx512(const uint8_t *src, size_t stride, int32_t taps, const int32_t *coef,
                          uint8_t *dst, size_t n);
void stoker__pairs_avx512(const uint8_t *quad, size_t n, int16_t *pq);
void stoker__hpass4_fast_avx512(const int16_t *pq, int32_t n, const int32_t *first,
                                const int32_t *coef, int32_t kstride, int32_t npairs, int32_t bits,
                                uint16_t *const out[4]);
void stoker__vpass_fast_avx512(const uint16_t *const *rows, int32_t npairs, const int32_t *coef,
                               int32_t bits, uint8_t *dst, size_t n);
void stoker__emit_planar_avx512(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                                const float *bias, void *const planes[3]);
void stoker__convert_avx512(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                            const float *bias, void *dst);

#endif
