/* SPDX-License-Identifier: Apache-2.0 */
/* The geometry of fields tied to an image (docs/FORMAT.md "Samples with several fields"): a
 * mask follows its image's crop, resize and flips with nearest-neighbour sampling, boxes are
 * mapped through them and clipped, and rows tied to the boxes are dropped with them.
 *
 * A sample's geometry is stated once, in the image's full-resolution pixels and independent
 * of how the image is decoded (a DCT reduction changes the pixels the image path reads, not
 * the region it shows), from the same decisions as the image path: stoker__xform_geometry's
 * crop box, flip and vertical flip for the same (seed, epoch, id).
 *
 * Per axis, the unflipped sample's pixel k (0 <= k < count) is pixel first + k of the source
 * span [offset, offset + in) resized to `out` pixels:
 *   - TRAIN: RandomResizedCrop's box resized to the output (offset = box.x, in = box.w,
 *     out = C, first = 0, count = C);
 *   - EVAL: the whole image resized (short side S) and centre-cropped (offset = 0, in = W,
 *     out = the resized width, first = the crop's left, count = C);
 *   - RESIZE: the whole image to C x C (offset = 0, in = W, out = C, first = 0, count = C);
 *   - LETTERBOX: the whole image to its letterbox size rw x rh (stoker__letterbox_size;
 *     offset = 0, in = W, out = count = rw), at the top left of a C x C sample;
 *   - NONE: the image itself (in = out = count = W).
 * Then a horizontal flip makes output column j the unflipped column count - 1 - j, and a
 * vertical flip output row i the unflipped row count - 1 - i.
 *
 * Everything here is pure arithmetic on the caller's buffers: thread-safe, no allocation. */
#ifndef STOKER_TRANSFORM_FIELDS_H
#define STOKER_TRANSFORM_FIELDS_H

#include "transform/transform.h"

/* One axis of a tied field's geometry (see above). */
typedef struct stoker__faxis {
    int32_t offset, in, out, first, count;
} stoker__faxis;

/* The geometry of one sample, in the full-resolution pixels of its src_w x src_h image. */
typedef struct stoker__fgeom {
    int32_t src_w, src_h;
    stoker__faxis x, y;   /* the image shown is x.count wide and y.count high */
    int32_t out_w, out_h; /* the sample's size: x.count x y.count, or C x C under LETTERBOX,
                             the image shown at its top left and the rest padding */
    uint8_t fill;         /* a mask's padding (mask_fill) */
    int flip, vflip;      /* 1: mirrored left-right / top-bottom after the resize */
    /* The source region the output shows, [x0, x1) x [y0, y1) in source pixels, fractional
     * where a resize's pixels do not fall on source pixels (EVAL's centre crop). */
    double x0, y0, x1, y1;
} stoker__fgeom;

/* The geometry of record `id` (seed, epoch) for a width x height image (both >= 1) under
 * the prepared parameters p (stoker__xform_params_prepare): the decisions
 * stoker__xform_geometry makes for the image path, at full resolution. */
void stoker__sample_geometry(const stoker__xform_params *p, int32_t width, int32_t height,
                             uint64_t seed, int64_t epoch, int64_t id, stoker__fgeom *g);

/* Source index of pixel k of a resize of `in` pixels to `out` with nearest neighbour, as
 * PyTorch's CPU kernel computes it (UpSample.h: nearest_neighbor_compute_source_index with
 * compute_scales_value, no scale factor given): min(floor(k * s), in - 1) with
 * s = (float)in / out, all in float32. This is torch.nn.functional.interpolate's "nearest"
 * (and torchvision's NEAREST on tensors), not "nearest-exact": it is up to half a source
 * pixel left of the centre a bilinear resize samples. */
int32_t stoker__nearest_index(int32_t k, int32_t in, int32_t out);

/* Writes the g->out_w x g->out_h uint8 mask (rows g->out_w bytes apart) of the
 * width x height mask `src` (rows src_stride bytes apart) that g's image shows: for the
 * crop box [top, left, h, w] of TRAIN, torchvision's resized_crop(mask, top, left, h, w,
 * [C, C], NEAREST) (a crop, then interpolate mode="nearest" per axis with
 * stoker__nearest_index), then the flips; for EVAL, resize (NEAREST) to the resized size,
 * then the centre crop; for RESIZE, resize to C x C; for LETTERBOX, resize to rw x rh at
 * the top left, the rest g->fill. Values are copied, never interpolated.
 * STOKER_E_INVALID (dst untouched) when the mask is not the image's size or src_stride is
 * below width; the caller names the record and field. */
int stoker__mask_geom(const uint8_t *src, int32_t width, int32_t height, size_t src_stride,
                      const stoker__fgeom *g, uint8_t *dst, stoker__err *err);

/* Maps n boxes xyxy[4 i .. 4 i + 3] = [x1, y1, x2, y2] (source pixels) in place to the
 * output's pixels and returns how many are kept. Per axis, v' = (v - offset) * out / in -
 * first (computed in double), clipped to [0, count]; a horizontal flip then gives
 * [count_x - x2', count_x - x1'] (a vertical one the same in y), so x1 <= x2 stays. keep[i]
 * is 1 when the box keeps an area, x2' > x1' and y2' > y1' (after clipping, as stored in
 * float32), its width and height are at least min_size, and the clipped area is at least
 * min_visibility of the mapped box's area before clipping (computed in double); else 0: a
 * box wholly outside the crop, one left with a zero width or height, one given with a zero
 * area or a NaN, one below either minimum. A dropped box's values are unspecified. The
 * caller then removes the dropped rows of the boxes and of every field tied to them with
 * stoker__rows_compact.
 *
 * Compared with torchvision.transforms.v2: resized_crop's boxes (crop: subtract the origin,
 * clamp to the crop; resize: scale) and the flips give the same values (clamp-then-scale
 * equals scale-then-clip up to float rounding). SanitizeBoundingBoxes then removes boxes
 * narrower or lower than min_size output pixels (default 1; it accepts no min_size below
 * 1; later versions also remove areas below min_area, default 1); this keeps every box with
 * a positive width and height, however thin, under min_size 0 (the default), and
 * torchvision's rule under min_size 1. */
int64_t stoker__boxes_geom(float *xyxy, int64_t n, const stoker__fgeom *g, double min_size,
                           double min_visibility, uint8_t *keep);

/* Moves the rows i of `rows` (n rows of row_bytes each) with keep[i] != 0 to the front, in
 * order (memmove), and returns their count. For the boxes and every rows_of field. */
int64_t stoker__rows_compact(void *rows, int64_t n, size_t row_bytes, const uint8_t *keep);

#endif
