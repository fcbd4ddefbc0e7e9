/* SPDX-License-Identifier: Apache-2.0 */
/* The per-sample image pipeline: crop-box geometry, bilinear antialiased resampling,
 * normalisation, and the one entry point the loader's workers call per record.
 *
 * Resampling is Pillow's ImagingResample "bilinear" (a triangle filter whose support grows
 * with the downscale factor, a horizontal pass to uint8 and then a vertical pass to uint8),
 * which is also what torchvision's Resize does on PIL images. With Pillow's 22-bit
 * fixed-point weights (STOKER_RESAMPLER_PILLOW) the uint8 result equals Pillow's exactly
 * for the same decoded pixels. The fast resampler (the default) rounds the same weights to
 * 16 bits, so that one SIMD multiply-add (pmaddwd) applies two taps to 16 or 32 values, as
 * Pillow-SIMD and torchvision's uint8 tensor kernels do. Normalising
 * then maps each uint8 value v to (v/255 - mean)/std = v * (1/(255 std)) + (-mean/std),
 * computed as one fused multiply-add in float32 in every variant, so that all SIMD
 * variants give bit-identical results (float16 and bfloat16 round to nearest even). */
#ifndef STOKER_TRANSFORM_H
#define STOKER_TRANSFORM_H

#include "common/common.h"

/* ---- geometry ---------------------------------------------------------------------------- */

/* A box of source pixels. */
typedef struct stoker__box {
    int32_t x, y, w, h;
} stoker__box;

/* torchvision's RandomResizedCrop.get_params(scale, ratio) for a width x height image (both
 * >= 1; scale within (0, 1], ratio > 0, each lo <= hi): 10 tries of a log-uniform ratio and
 * uniform area, then the centre-crop fallback that clamps the ratio. Randomness is draw
 * 0..39 of (seed, epoch, id). Returns 1 when the fallback was taken, else 0. */
int stoker__rrc_box(int32_t width, int32_t height, const double scale[2], const double ratio[2],
                    uint64_t seed, int64_t epoch, int64_t id, stoker__box *box);
/* The horizontal flip decision of (seed, epoch, id) with probability p: 1 flip, 0 keep
 * (never for p <= 0, always for p = 1; at 0.5, the draw's top bit). */
int stoker__rrc_flip(double p, uint64_t seed, int64_t epoch, int64_t id);
/* The vertical flip decision of (seed, epoch, id) with probability p: 1 flip, 0 keep (never
 * for p = 0, always for p = 1). */
int stoker__rrc_vflip(double p, uint64_t seed, int64_t epoch, int64_t id);

/* torchvision's Resize(short) + CenterCrop(crop) on a width x height image: the resized
 * size (*rw, *rh; the long side int(short * long / short_side)) and the crop's top-left
 * corner in resized pixels (round half to even, as Python's round). */
void stoker__eval_geometry(int32_t width, int32_t height, int32_t short_side, int32_t crop,
                           int32_t *rw, int32_t *rh, int32_t *left, int32_t *top);

/* The letterbox's resized size (*rw x *rh) of a width x height image in a size x size
 * sample: the long side size, the short side round(short * size / long), half to even, at
 * least 1. */
void stoker__letterbox_size(int32_t width, int32_t height, int32_t size, int32_t *rw, int32_t *rh);

/* One axis of a resample: outputs [first, first + count) of a resize of the in_size source
 * pixels starting at source pixel `offset` to out_size pixels. With plain_to_2x set, a
 * shrink by at most 2x keeps the bilinear filter's unit support (two taps) instead of
 * widening it by the shrink factor. in0 < in1 makes the resized span the fractional box
 * [in0, in1) of those pixels (Pillow's resize box), the filters still reading only them;
 * in0 = in1 = 0: all of them. */
typedef struct stoker__axis {
    int32_t offset, in_size, out_size, first, count;
    int32_t plain_to_2x;
    double in0, in1;
} stoker__axis;

/* The whole geometry of one sample: how x and y map, whether x is mirrored (flip) and y
 * (vflip: the output rows are written bottom to top), and the factor (1, 2, 4 or 8) the
 * source was shrunk by in decoding, in whose pixels x and y are. The resized image is
 * x.count x y.count pixels at the sample's top left; where that is less than the sample's
 * size (LETTERBOX), the rest of the sample is black, normalised as the image is. */
typedef struct stoker__geom {
    stoker__axis x, y;
    int flip, vflip;
    int32_t scale;
} stoker__geom;

/* The filter length of an axis (Pillow's ksize = 2 ceil(support) + 1). */
int32_t stoker__resample_ksize(const stoker__axis *a);

/* The source range [lo, hi) (absolute pixels) that the outputs of `a` read. */
void stoker__resample_range(const stoker__axis *a, int32_t *lo, int32_t *hi);

/* Computes Pillow's fixed-point coefficients for the outputs of `a`: for output j (or
 * count-1-j when `flip`), first[j] = the first source pixel used, relative to source pixel
 * `origin`; taps[j] = how many are used (may be NULL); coef[(j * kpad + k) * rep + r] =
 * weight k, repeated `rep` times (1, or 4 to repeat it per channel), 0 for k >= taps[j].
 * kpad >= stoker__resample_ksize(a). `tmp` holds kpad doubles. Also returns, through lo/hi,
 * the source range [lo, hi) (absolute pixels) that the outputs read. */
void stoker__resample_coeffs(const stoker__axis *a, int32_t origin, int flip, int32_t kpad,
                             int32_t rep, int32_t *first, int32_t *taps, int32_t *coef, double *tmp,
                             int32_t *lo, int32_t *hi);

/* The largest of 2, 4 and 8 (at most max_scale) that leaves both axes of g shrinking or
 * unchanged, else 1; with a factor above 1, rewrites g in the pixels of a width x height
 * image decoded at that reduction (ceil(width / factor) wide): the source range widened to
 * whole pixels, the box fractional within it. */
int32_t stoker__geom_reduce(stoker__geom *g, int32_t max_scale);

/* The fast resampler's weights: Pillow's 22-bit weights of n filters (kpad each) rounded
 * to as many bits as the largest weight allows in an int16 (14 when a weight is 1, more
 * for smaller ones), in pairs: pairs[j * ((kpad + 1) / 2) + m] holds weights 2 m (low 16
 * bits) and 2 m + 1 (high 16 bits, zero past kpad) of filter j. Returns those bits. */
int32_t stoker__coeffs_to_pairs(const int32_t *coef, int32_t n, int32_t kpad, int32_t *pairs);

/* ---- SIMD kernels --------------------------------------------------------------------------- */

#define STOKER__PRECISION_BITS 22 /* Pillow's: 32 - 8 - 2 */
#define STOKER__PATTERN 48        /* period of normalisation patterns: 3 channels x 16 lanes */

/* One instruction set's kernels. Every kernel accepts any alignment and any length. */
typedef struct stoker__simd_ops {
    int32_t level;    /* a stoker_simd value */
    const char *name; /* "scalar", "avx2", "avx512" */
    /* Four rows of n RGBX pixels to one interleaved block: quad[(x * 4 + r) * 4 + c] =
     * rows[r][x * 4 + c], so that pixel x of the four rows is 16 contiguous bytes. */
    void (*interleave4)(const uint8_t *const rows[4], size_t n, uint8_t *quad);
    /* Horizontal pass over four interleaved rows at once (one filter, four rows: every
     * weight multiplies 16 values): output pixel j of row r is
     * sum_k quad[first[j] + k][r] * coef[j * kstride + k], k < taps[j], rounded and clipped
     * to uint8 per channel, stored at out[r] + 4 j. kmax is the largest taps[j] (at most
     * kstride); weights from taps[j] to kmax must be zero, and quad must be readable up to
     * pixel first[j] + kmax - 1: the SIMD variants run every pixel through kmax taps, a
     * loop of fixed length, as mispredicted exits of loops of varying length cost more
     * than a multiply by zero. */
    void (*hpass4)(const uint8_t *quad, int32_t n, const int32_t *first, const int32_t *taps,
                   const int32_t *coef, int32_t kstride, int32_t kmax, uint8_t *const out[4]);
    /* Vertical pass, channel-agnostic: dst[i] = clip(sum_k src[k * stride + i] * coef[k]),
     * k < taps, for i < n bytes. */
    void (*vpass)(const uint8_t *src, size_t stride, int32_t taps, const int32_t *coef,
                  uint8_t *dst, size_t n);
    /* The fast resampler. `bits`: the weights' fixed-point precision (14..22); every sum is
     * rounded, shifted right by bits and clipped to 0..255. A pair of weights is one int32:
     * the low 16 bits weight the first tap, the high 16 bits the second (both signed).
     *
     * pairs: pq[x * 32 + 2 s + i] = quad[(x + i) * 16 + s] for x < n, i = 0, 1: value s of
     * pixel x beside value s of pixel x + 1, widened to 16 bits (reads quad pixel n). */
    void (*pairs)(const uint8_t *quad, size_t n, int16_t *pq);
    /* Horizontal pass over four interleaved rows: output pixel j of row r, channel c (value
     * s = 4 r + c) is sum_m pq[first[j] + 2 m][s] pairs weighted by coef[j * kstride + m],
     * m < npairs, stored as uint16 at out[r] + 4 j + c. Pairs past a pixel's taps must weigh
     * zero, and pq must be readable up to first[j] + 2 npairs - 2. */
    void (*hpass4_fast)(const int16_t *pq, int32_t n, const int32_t *first, const int32_t *coef,
                        int32_t kstride, int32_t npairs, int32_t bits, uint16_t *const out[4]);
    /* Vertical pass: dst[i] = sum over m < npairs of rows[2 m][i] and rows[2 m + 1][i]
     * (uint16 values of at most 255) weighted by the pair coef[m], for i < n. */
    void (*vpass_fast)(const uint16_t *const *rows, int32_t npairs, const int32_t *coef,
                       int32_t bits, uint8_t *dst, size_t n);
    /* n RGBX pixels to three planes (NCHW) or to packed RGB (NHWC). */
    void (*unpack_planar)(const uint8_t *rgbx, size_t n, uint8_t *r, uint8_t *g, uint8_t *b);
    void (*unpack_packed)(const uint8_t *rgbx, size_t n, uint8_t *rgb);
    /* dst[i] = src[i] * scale[i % 48] + bias[i % 48] (one fused multiply-add, float32) as
     * FLOAT32, FLOAT16 or BFLOAT16 (round to nearest even), for i < n. May write with
     * streaming stores, as emit_planar. */
    void (*convert)(const uint8_t *src, size_t n, int32_t dtype, const float *scale,
                    const float *bias, void *dst);
    /* unpack_planar and then convert per plane in one pass, bit for bit the same: n RGBX
     * pixels to planes[c][i] = rgbx[4 i + c] * scale[c] + bias[c] (one fused multiply-add)
     * as FLOAT32, FLOAT16 or BFLOAT16. May write with streaming (non-temporal) stores: whoever
     * publishes the planes to another thread must fence first (stoker__xform_jpeg does). */
    void (*emit_planar)(const uint8_t *rgbx, size_t n, int32_t dtype, const float *scale,
                        const float *bias, void *const planes[3]);
} stoker__simd_ops;

/* The kernels of `level` (STOKER_SIMD_AUTO: the best this CPU runs, detected once).
 * STOKER_E_UNSUPPORTED when the CPU (or build) lacks that level, STOKER_E_INVALID for an
 * unknown one. Thread-safe. */
int stoker__simd_ops_get(int32_t level, const stoker__simd_ops **out, stoker__err *err);
/* The best level this CPU runs (a stoker_simd value). Thread-safe. */
int32_t stoker__simd_best(void);

/* Per-ISA tables (simd.c hands them out; tests may call kernels directly). */
extern const stoker__simd_ops stoker__simd_scalar;
extern const stoker__simd_ops stoker__simd_avx2;
extern const stoker__simd_ops stoker__simd_avx512;

/* Scalar conversions used by the reference kernels (round to nearest even). */
uint16_t stoker__f32_to_f16(float f);
uint16_t stoker__f32_to_bf16(float f);
float stoker__f16_to_f32(uint16_t h);

/* ---- the pipeline -------------------------------------------------------------------------- */

/* Read-only parameters shared by all workers: filled by the caller (the loader's plan),
 * then stoker__xform_params_prepare. */
typedef struct stoker__xform_params {
    int32_t transform;    /* STOKER_TRANSFORM_TRAIN / EVAL / RESIZE / LETTERBOX (DEFAULT =
                             TRAIN) */
    int32_t size;         /* output C: samples are C x C x 3 (0 = 224) */
    int32_t resize;       /* eval short side S (0 = round(C * 256 / 224)) */
    int32_t dtype;        /* UINT8, FLOAT16, BFLOAT16, FLOAT32 (DEFAULT = FLOAT16) */
    int32_t layout;       /* NCHW or NHWC (DEFAULT = NCHW) */
    int32_t dct;          /* ISLOW or IFAST (DEFAULT = ISLOW) */
    int32_t antialias;    /* ALWAYS or OVER_2X (DEFAULT = OVER_2X) */
    int32_t resampler;    /* FAST or PILLOW (DEFAULT = FAST) */
    int32_t dct_scale;    /* NEVER, TRAIN or ALWAYS (DEFAULT = TRAIN) */
    double vflip;         /* TRAIN: the probability of a vertical flip, 0 to 1 */
    double hflip;         /* TRAIN: the probability of a horizontal flip: 0 = the default 0.5, as
                             every field left 0; below 0, never */
    double crop_scale[2]; /* TRAIN: the crop's share of the area, lo..hi (0 = 0.08, 1) */
    double crop_ratio[2]; /* TRAIN: the crop's width/height, lo..hi (0 = 3/4, 4/3) */
    double min_box_size;  /* boxes kept: width and height at least this (output pixels) */
    double min_box_vis;   /* boxes kept: at least this share of their area shown, 0 to 1 */
    int32_t mask_fill;    /* LETTERBOX: a mask's padding, 0 to 255 */
    float mean[3], std[3];
    uint64_t max_pixels; /* decoded pixels allowed per image (0 = 1 << 28) */
    const stoker__simd_ops *simd;
    /* derived by prepare: normalisation patterns for planes 0..2 and for packed RGB (3) */
    float scale[4][STOKER__PATTERN], bias[4][STOKER__PATTERN];
} stoker__xform_params;

/* Resolves defaults, validates (STOKER_E_INVALID naming the field), picks the SIMD kernels
 * of `simd_level` (STOKER_E_UNSUPPORTED when this CPU lacks it) and derives the patterns. */
int stoker__xform_params_prepare(stoker__xform_params *p, int32_t simd_level, stoker__err *err);
/* Whether (x/255 - mean)/std is usable for every channel: finite, std not 0. The one rule,
 * whoever normalises (the workers here, or the GPU stage). STOKER_E_INVALID naming the
 * channel. */
int stoker__xform_check_mean_std(const float mean[3], const float std[3], stoker__err *err);
/* Bytes of one finished sample: C * C * 3 * element size. */
size_t stoker__xform_sample_bytes(const stoker__xform_params *p);

/* The geometry of record `id` for a width x height image, in its full-size pixels (scale
 * 1). */
void stoker__xform_geometry(const stoker__xform_params *p, int32_t width, int32_t height,
                            uint64_t seed, int64_t epoch, int64_t id, stoker__geom *g);
/* The largest decoding reduction p allows for its transform (8, or 1 when none). */
int32_t stoker__xform_max_scale(const stoker__xform_params *p);

/* Per-stage time accumulated by a scratch (nanoseconds) and the samples it finished. */
typedef struct stoker__xform_stats {
    uint64_t samples, decode_ns, resize_ns, normalize_ns;
    uint64_t reduced; /* samples decoded at a DCT reduction (scale above 1) */
} stoker__xform_stats;

/* Per-worker state: a libjpeg decompressor, row buffers and coefficient tables. Buffers
 * grow to the largest sample seen and are then reused, so the steady state allocates
 * nothing of ours (libjpeg still uses its own pools per image). One thread at a time. */
typedef struct stoker__xform_scratch stoker__xform_scratch;

int stoker__xform_scratch_create(stoker__xform_scratch **out);
void stoker__xform_scratch_destroy(stoker__xform_scratch *s); /* NULL ok */
const stoker__xform_stats *stoker__xform_scratch_stats(const stoker__xform_scratch *s);

/* Decodes the JPEG `jpeg` (size bytes) of record `id` and writes the finished sample
 * (stoker__xform_sample_bytes(p) bytes, in p's dtype and layout) to dst, which may have any
 * alignment. Only the rows and columns the crop needs are decoded. Returns 0,
 * STOKER_E_CORRUPT (not a JPEG, or libjpeg's error or damage warning, whose text `err`
 * keeps), STOKER_E_LIMIT (width * height > max_pixels, found before any allocation for
 * the image) or -ENOMEM. dst is unspecified after a failure. */
int stoker__xform_jpeg(stoker__xform_scratch *s, const stoker__xform_params *p, uint64_t seed,
                       int64_t epoch, int64_t id, const uint8_t *jpeg, size_t size, void *dst,
                       stoker__err *err);
/* The same sample, and the rest of the image's data read after the crop's rows
 * (stoker__jpeg_decode_whole), so that damage anywhere in it fails the sample as it fails a full
 * decode: for JPEGs that were not decoded whole before. */
int stoker__xform_jpeg_whole(stoker__xform_scratch *s, const stoker__xform_params *p, uint64_t seed,
                             int64_t epoch, int64_t id, const uint8_t *jpeg, size_t size, void *dst,
                             stoker__err *err);

/* The same from a decoded width x height uint8 RGB image (rows `stride` bytes apart).
 * STOKER_E_INVALID for a size below 1 or above max_pixels (STOKER_E_LIMIT), -ENOMEM. */
int stoker__xform_rgb(stoker__xform_scratch *s, const stoker__xform_params *p, uint64_t seed,
                      int64_t epoch, int64_t id, const uint8_t *rgb, int32_t width, int32_t height,
                      size_t stride, void *dst, stoker__err *err);

#endif
