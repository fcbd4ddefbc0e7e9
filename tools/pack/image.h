/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-pack's image checks and conversions: is it a JPEG, is it intact, and re-encoding
 * CMYK, grey and PNG images as RGB JPEGs and large ones smaller (--validate, --rgb,
 * --max-side). Built as a small static library of its own (stoker_pack_image) so that the
 * tests and the fuzz target drive exactly the code stoker-pack runs. Status codes are
 * stoker.h's (0 ok, negative STOKER_E_* or -errno). */
#ifndef STOKER_PACK_IMAGE_H
#define STOKER_PACK_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* What pack_image_inspect found. */
typedef enum pack_image_kind {
    PACK_IMAGE_UNKNOWN = 0,
    PACK_IMAGE_JPEG = 1,
    PACK_IMAGE_PNG = 2,
} pack_image_kind;

#define PACK_IMAGE_DECODE 1u /* fully entropy-decode (catches truncation/corruption) */
#define PACK_IMAGE_TO_RGB 2u /* transcode: CMYK/YCCK/grayscale JPEG and PNG -> RGB JPEG */

/* Inspects encoded image bytes: kind, width, height and colour components (any out pointer
 * may be NULL). With PACK_IMAGE_DECODE a JPEG is decoded through libjpeg-turbo and any
 * error or warning about damaged data makes it STOKER_E_CORRUPT. Non-JPEG input returns
 * STOKER_E_FORMAT with *kind set. `msg` (capacity msgcap, may be NULL/0) receives the
 * reason on failure. STOKER_E_LIMIT when width*height exceeds max_pixels (0 = 1 << 28).
 * Thread-safe. */
int pack_image_inspect(const void *data, size_t size, uint32_t flags, uint64_t max_pixels,
                       int32_t *kind, int32_t *width, int32_t *height, int32_t *components,
                       char *msg, size_t msgcap);

/* Re-encodes an image as a baseline RGB (or, without PACK_IMAGE_TO_RGB, grayscale-
 * preserving) JPEG when needed: when its longer side exceeds max_side (> 0; resized with
 * the aspect ratio kept), when it is PNG or CMYK/YCCK/grayscale and PACK_IMAGE_TO_RGB is
 * set. quality 1..100 (0 = 90). On success *out is NULL when the input can be stored as is,
 * else a buffer (free with free()) of *out_size bytes. Thread-safe. */
int pack_image_transcode(const void *data, size_t size, uint32_t flags, int32_t max_side,
                         int32_t quality, uint64_t max_pixels, void **out, size_t *out_size,
                         char *msg, size_t msgcap);

/* Checks a PNG image field by decoding it whole with the loader's own PNG decoder
 * (src/decode/png.c, libspng), so that what stoker-pack passes the loader reads: as RGB, or
 * with `mask` as a mask is read (one channel of at most 8 bits: gray values or palette
 * indices). Its size into *width, *height (may be NULL). 0, or STOKER_E_CORRUPT (damaged,
 * truncated, not a PNG), STOKER_E_INVALID (a mask of another colour type or 16 bits),
 * STOKER_E_LIMIT (more than max_pixels pixels; 0 = 1 << 28), STOKER_E_UNSUPPORTED (a build
 * without libspng), with the reason in msg. Thread-safe. */
int pack_png_check(const void *data, size_t size, int mask, uint64_t max_pixels, int32_t *width,
                   int32_t *height, char *msg, size_t msgcap);

/* Test hook: the nth allocation of this module from now (1 = the next) fails; 0 disables.
 * Returns how many allocations were made since the last call. Not for production use. */
uint64_t pack_image_alloc_fail_at(uint64_t nth);

#endif
