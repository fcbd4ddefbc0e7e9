/* SPDX-License-Identifier: Apache-2.0 */
/* Region decoding of JPEG images for the per-sample pipeline: only the rows and columns a
 * crop needs are decoded (jpeg_crop_scanline, jpeg_skip_scanlines), rows are handed to a
 * sink as RGBX (grayscale, RGB, YCbCr, CMYK and YCCK alike). */
#ifndef STOKER_DECODE_JPEG_H
#define STOKER_DECODE_JPEG_H

#include "common/common.h"

/* The region to decode: columns [x0, x1), rows [y0, y1), non-empty and inside the image
 * as decoded. `scale` (1, 2, 4 or 8; 0 counts as 1) has libjpeg shrink the image by that
 * factor in the IDCT (scale_denom): the image as decoded is then ceil(width / scale) x
 * ceil(height / scale) pixels, and the region is in those pixels. `pad` more pixels after
 * each delivered row must be readable (they hold unspecified values); used by kernels that
 * read whole vectors. */
typedef struct stoker__jpeg_region {
    int32_t x0, y0, x1, y1, pad;
    int32_t scale;
} stoker__jpeg_region;

/* Where decoded rows go. Both callbacks return 0 to go on or a negative status (with their
 * message set) to stop; they must not call libjpeg. */
typedef struct stoker__jpeg_sink {
    /* After the header (and the pixel limit check): the image is width x height (before
     * any scaling); fill *r. */
    int (*region)(void *ctx, int32_t width, int32_t height, stoker__jpeg_region *r);
    /* Row y of the image as decoded: n RGBX pixels starting at column x (x <= r->x0 and
     * x + n >= r->x1: the decoder widens the columns to its iMCU boundaries). */
    int (*row)(void *ctx, int32_t y, const uint8_t *rgbx, int32_t x, int32_t n);
    void *ctx;
    /* Optional (NULL: the decoder's own row buffer): where to decode row y of n pixels,
     * n * 4 + pad * 4 bytes; NULL (with the message set) stops with STOKER_E_LIMIT. Saves
     * a copy when the sink keeps rows. */
    uint8_t *(*buffer)(void *ctx, int32_t y, int32_t n);
    /* With `buffer`: rows are read in runs (at most STOKER__JPEG_RUN rows) that never cross
     * a multiple of `group` rows counted from r->y0, every row's buffer asked for before
     * the run is decoded (again for rows a call left undecoded); 0 or 1: one row at a
     * time. Fewer calls into libjpeg. */
    int32_t group;
} stoker__jpeg_sink;

#define STOKER__JPEG_RUN 8

/* A reusable decoder (one libjpeg decompressor and its row buffer). One thread at a time. */
typedef struct stoker__jpeg_dec stoker__jpeg_dec;

int stoker__jpeg_dec_create(stoker__jpeg_dec **out); /* 0 or -ENOMEM */
void stoker__jpeg_dec_destroy(stoker__jpeg_dec *d);  /* NULL ok */

/* Decodes `data` (size bytes) into `sink`. dct is a stoker_dct value. Returns 0 or:
 * STOKER_E_CORRUPT (not a JPEG, libjpeg error, or a warning that the data is damaged: the
 * message carries libjpeg's text), STOKER_E_LIMIT (width * height > max_pixels, checked
 * right after the header, before anything is allocated for the image), -ENOMEM, or what a
 * callback returned. libjpeg's fatal errors longjmp back into this function only. */
int stoker__jpeg_decode(stoker__jpeg_dec *d, const uint8_t *data, size_t size, int32_t dct,
                        uint64_t max_pixels, const stoker__jpeg_sink *sink, stoker__err *err);

/* The same, and then the rest of the image read too, so that libjpeg goes through all of the
 * data and reports damage anywhere in it, as a full decode would: the rows below the region
 * are entropy-decoded and dropped (without the IDCT where libjpeg can skip them) and the
 * trailing markers read. For JPEGs nobody has decoded whole before: a region decode stops at
 * the region's last row, and damage in the data after it goes unseen. */
int stoker__jpeg_decode_whole(stoker__jpeg_dec *d, const uint8_t *data, size_t size, int32_t dct,
                              uint64_t max_pixels, const stoker__jpeg_sink *sink, stoker__err *err);

#endif
