/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU share's image transform: from a decoded uint8 RGB image in device memory (the
 * whole image, or the region of it that nvJPEG decoded), the sample's crop box resized to
 * C x C with the CPU pipeline's filter, mirrored when its geometry says so, normalised and
 * written in the output dtype and layout straight into the sample's place in the device
 * batch. One launch transforms a whole batch: a descriptor per sample, in device memory.
 *
 * The filter is crop.c's (Pillow's bilinear resampling): a triangle filter whose support
 * widens with the shrink factor (unless the shrink is at most 2x and antialiasing is asked
 * for only past that, STOKER_ANTIALIAS_OVER_2X), taps clipped to the source pixels of the
 * box, weights normalised to sum 1, a horizontal pass rounded and clipped to 0..255, then a
 * vertical pass likewise. The tap ranges are Pillow's exactly (computed in double); the
 * weights are float rather than 22-bit fixed point, so a value can differ from the CPU's by
 * a rounding step where a sum falls near a half.
 *
 * The functions marked STOKER__HD compute the tap ranges and weights on both sides: the
 * kernel uses them, and host code (the tests) checks them against crop.c's tables.
 * image_kernels.cu holds the kernel (built with nvcc), image_kernels_none.c its stand-in. */
#ifndef STOKER_CUDA_IMAGE_KERNELS_H
#define STOKER_CUDA_IMAGE_KERNELS_H

#include "cuda/cuda.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define STOKER__HD __host__ __device__
#else
#define STOKER__HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* How one axis of the output maps to source pixels of the decoded buffer (crop.c's
 * stoker__axis, moved to the buffer's origin). */
typedef struct stoker__gpu_axis {
    double start;   /* where the box starts, in source pixels from `lo` (Pillow's box) */
    double scale;   /* source pixels per output pixel: the box's span / out_size */
    double support; /* the filter's half-width in source pixels: 1, or `scale` antialiased */
    int32_t lo;     /* the buffer's pixel where the box's whole pixels begin */
    int32_t n;      /* taps are clipped to the buffer's pixels [lo, lo + n) */
    int32_t first;  /* the resized index of output 0 (a centre crop's offset) */
    int32_t unused;
} stoker__gpu_axis;

/* One sample. */
typedef struct stoker__gpu_image {
    const uint8_t *src; /* device: the decoded RGB buffer, 3 bytes per pixel */
    void *dst;          /* device: the sample's place, C * C * 3 values of the output dtype */
    int64_t pitch;      /* bytes from one src row to the next */
    stoker__gpu_axis x, y;
    int32_t flip;  /* mirror the output horizontally */
    int32_t vflip; /* and vertically */
} stoker__gpu_image;

/* What every sample of a launch becomes. */
typedef struct stoker__gpu_output {
    int32_t size;            /* C: samples are C x C x 3 */
    int32_t dtype;           /* STOKER_DTYPE_UINT8, FLOAT16, BFLOAT16 or FLOAT32 */
    int32_t nchw;            /* planes (NCHW) rather than interleaved pixels (NHWC) */
    float scale[3], bias[3]; /* float dtypes: v * scale[c] + bias[c] in float32, as the CPU */
} stoker__gpu_output;

/* Queues the transform of the n samples described at `desc` (device memory, valid until the
 * work is done) on stream s. Returns 0, or a CUDA error code (stoker__cuda_error_string):
 * cudaErrorInvalidValue for a size below 1 or a dtype the transform does not write; in a
 * build without nvcc, cudaErrorNotSupported (without CUDA, the code of none.c). */
int stoker__gpu_images(const stoker__gpu_image *desc, int32_t n, const stoker__gpu_output *out,
                       stoker__stream s);

/* Queues dst + pos[k] * bytes = src + k * bytes for k < n (`bytes` each, device memory;
 * pos: n positions in device memory, valid until the work is done) on stream s: the GPU
 * share's samples, made side by side, moved to their places in a batch. Returns 0 or a CUDA
 * error code as stoker__gpu_images. */
int stoker__gpu_scatter(const uint8_t *src, uint8_t *dst, const int32_t *pos, int32_t n,
                        size_t bytes, stoker__stream s);

/* ---- YCbCr planes to RGB, as libjpeg ------------------------------------------------------
 * nvJPEG's hardware decoder writes an image's planes at their own resolution (its planar
 * output); its own chroma upsampling either replicates samples or, interpolating, makes the
 * decode wait for the whole device (every stream's queued kernels). So the planes are
 * converted here, the way libjpeg(-turbo) does with the CPU decoder's settings: chroma
 * upsampled by libjpeg's "fancy" triangle filter (jdsample.c: h2v1 and h2v2, 3/4 of the
 * nearer sample and 1/4 of the further one in each direction, with its rounding biases and
 * its edge rule, which repeats the edge sample; plain replication for a chroma plane of two
 * columns or fewer, as libjpeg), then YCbCr to RGB with jdcolor.c's 16-bit fixed-point
 * tables. Both are integer arithmetic: the result is libjpeg's for the same planes. */

/* One image's planes and the region written as interleaved RGB. */
typedef struct stoker__gpu_ycc {
    const uint8_t *plane[3]; /* device: Y, Cb, Cr (Cb and Cr unused for grayscale) */
    int32_t pitch[3];        /* bytes from one row of the plane to the next */
    int32_t width, height;   /* the image's (the Y plane's) */
    int32_t cw, ch;          /* the chroma planes' size */
    int32_t hs, vs;          /* chroma subsampling, 1 or 2 each way; 0: grayscale */
    int32_t x, y, w, h;      /* the region */
    uint8_t *dst;            /* device: the region's RGB, h rows of dst_pitch bytes */
    int64_t dst_pitch;
} stoker__gpu_ycc;

/* Queues the conversion of the n images described at `desc` (device memory, valid until the
 * work is done) on stream s. Returns 0 or a CUDA error code as stoker__gpu_images. */
int stoker__gpu_ycc_to_rgb(const stoker__gpu_ycc *desc, int32_t n, stoker__stream s);

/* libjpeg's h2 fancy upsampling of chroma row `row` (cw samples) at output column x. */
STOKER__HD static inline int32_t stoker__ycc_h2(const uint8_t *row, int32_t cw, int32_t x)
{
    const int32_t i = x >> 1;
    const int32_t nb = x & 1 ? (i + 1 < cw ? i + 1 : i) : (i > 0 ? i - 1 : 0);
    return (3 * row[i] + row[nb] + (x & 1 ? 2 : 1)) >> 2;
}

/* One chroma value of plane p (1 or 2) at image pixel (x, y). */
STOKER__HD static inline int32_t stoker__ycc_chroma(const stoker__gpu_ycc *im, int p, int32_t x,
                                                    int32_t y)
{
    const uint8_t *base = im->plane[p];
    const int64_t pitch = im->pitch[p];
    const bool fancy = im->cw > 2;
    if (im->vs == 1) {
        const uint8_t *row = base + (int64_t)y * pitch;
        return im->hs == 1 ? row[x] : fancy ? stoker__ycc_h2(row, im->cw, x) : row[x >> 1];
    }
    /* h2v2 (vs 2 is only taken with hs 2) */
    const int32_t j = y >> 1;
    if (!fancy)
        return base[(int64_t)j * pitch + (x >> 1)];
    const int32_t jn = y & 1 ? (j + 1 < im->ch ? j + 1 : j) : (j > 0 ? j - 1 : 0);
    const uint8_t *r0 = base + (int64_t)j * pitch, *r1 = base + (int64_t)jn * pitch;
    const int32_t i = x >> 1;
    const int32_t in = x & 1 ? (i + 1 < im->cw ? i + 1 : i) : (i > 0 ? i - 1 : 0);
    const int32_t here = 3 * r0[i] + r1[i], there = 3 * r0[in] + r1[in];
    return (3 * here + there + (x & 1 ? 7 : 8)) >> 4;
}

STOKER__HD static inline uint8_t stoker__ycc_clamp(int32_t v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* The RGB of image pixel (x, y): jdcolor.c's ycc_rgb_convert (SCALEBITS 16; its tables'
 * entries computed in place; >> on a negative value is the arithmetic shift libjpeg's
 * RIGHT_SHIFT is on every compiler it supports). */
STOKER__HD static inline void stoker__ycc_pixel(const stoker__gpu_ycc *im, int32_t x, int32_t y,
                                                uint8_t rgb[3])
{
    const int32_t Y = im->plane[0][(int64_t)y * im->pitch[0] + x];
    if (im->hs == 0) {
        rgb[0] = rgb[1] = rgb[2] = (uint8_t)Y;
        return;
    }
    const int32_t cb = stoker__ycc_chroma(im, 1, x, y) - 128;
    const int32_t cr = stoker__ycc_chroma(im, 2, x, y) - 128;
    const int32_t half = 1 << 15;
    /* FIX(1.40200) = 91881, FIX(1.77200) = 116130, FIX(0.71414) = 46802, FIX(0.34414) = 22554 */
    const int32_t r = (91881 * cr + half) >> 16;
    const int32_t b = (116130 * cb + half) >> 16;
    const int32_t g = (-22554 * cb + half - 46802 * cr) >> 16;
    rgb[0] = stoker__ycc_clamp(Y + r);
    rgb[1] = stoker__ycc_clamp(Y + g);
    rgb[2] = stoker__ycc_clamp(Y + b);
}

/* ---- the filter, on both sides ------------------------------------------------------------ */

/* The filter of one output coordinate: taps [xmin, xmin + n) from the axis' lo, weighing
 * tap k by (1 - |(k + base) * inv|) * norm (0 where that is negative). */
typedef struct stoker__gpu_filter {
    int32_t xmin, n;
    float base, inv, norm;
} stoker__gpu_filter;

STOKER__HD static inline float stoker__gpu_weight(const stoker__gpu_filter *f, int32_t k)
{
    const float d = fabsf(((float)k + f->base) * f->inv);
    return d < 1.0f ? (1.0f - d) * f->norm : 0.0f;
}

/* The filter of resized index xx (its crop offset included). The bounds are crop.c's
 * output_bounds term for term, in double; the weights are normalised to sum 1. */
STOKER__HD static inline stoker__gpu_filter stoker__gpu_filter_of(const stoker__gpu_axis *a,
                                                                  int32_t xx)
{
    const double c = a->start + (xx + 0.5) * a->scale;
    int32_t lo = (int32_t)(c - a->support + 0.5);
    int32_t hi = (int32_t)(c + a->support + 0.5);
    lo = lo < 0 ? 0 : lo;
    hi = hi > a->n ? a->n : hi;
    stoker__gpu_filter f = {lo, hi - lo, (float)(lo - c + 0.5), (float)(1.0 / a->support), 1.0f};
    float sum = 0.0f;
    for (int32_t k = 0; k < f.n; k++)
        sum += stoker__gpu_weight(&f, k);
    f.norm = sum != 0.0f ? 1.0f / sum : 1.0f;
    return f;
}

#ifdef __cplusplus
}
#endif

/* ---- descriptors from the CPU pipeline's geometry (C only) --------------------------------- */

#ifndef __CUDACC__
#include "transform/transform.h"

/* The GPU axis of crop.c's axis `a` for a buffer whose first pixel is source pixel `origin`
 * (0 for a whole decoded image; the region's first pixel for a region decode, which should
 * hold stoker__resample_range's pixels). */
static inline stoker__gpu_axis stoker__gpu_axis_of(const stoker__axis *a, int32_t origin)
{
    const bool box = a->in1 > a->in0;
    const double span = box ? a->in1 - a->in0 : (double)a->in_size;
    const double scale = span / a->out_size;
    const bool plain = scale < 1.0 || (a->plain_to_2x && scale <= 2.0);
    return (stoker__gpu_axis){.start = box ? a->in0 : 0.0,
                              .scale = scale,
                              .support = plain ? 1.0 : scale,
                              .lo = a->offset - origin,
                              .n = a->in_size,
                              .first = a->first};
}

/* The descriptor of a sample of geometry g (at scale 1) from a buffer holding the source
 * pixels from (origin_x, origin_y) on. */
static inline stoker__gpu_image stoker__gpu_image_of(const stoker__geom *g, const uint8_t *src,
                                                     int64_t pitch, int32_t origin_x,
                                                     int32_t origin_y, void *dst)
{
    return (stoker__gpu_image){.src = src,
                               .dst = dst,
                               .pitch = pitch,
                               .x = stoker__gpu_axis_of(&g->x, origin_x),
                               .y = stoker__gpu_axis_of(&g->y, origin_y),
                               .flip = g->flip,
                               .vflip = g->vflip};
}
#endif

#endif
