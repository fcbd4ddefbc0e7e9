/* SPDX-License-Identifier: Apache-2.0 */
/* PNG decoding for image and mask fields, with libspng (Debian's libspng-dev).
 *
 * libspng rather than libpng: it decodes a PNG held in memory in one call to the format asked
 * for (RGB8 from gray, palette, alpha and 16-bit alike), with no setjmp/longjmp error path
 * and no callbacks, and is faster than libpng at decoding. stoker-pack keeps libpng for its
 * conversions (--rgb), which encode too.
 *
 * Two modes:
 *   - STOKER__PNG_RGB: 8-bit RGB, [height, width, 3]. Gray is replicated, a palette gives its
 *     colours, alpha (and tRNS) is dropped, not composited, and 16-bit samples keep their high
 *     byte (v >> 8); no gamma is applied. This is Pillow's convert("RGB") for 8-bit images.
 *   - STOKER__PNG_MASK: one 8-bit channel, [height, width], the stored samples as they are: a
 *     palette image gives its palette INDICES (the class ids of a label map such as VOC's),
 *     never its colours; a gray image gives its values (1, 2 or 4-bit samples unpacked, not
 *     scaled: a 1-bit mask gives 0 and 1). Other colour types and 16-bit gray are refused
 *     (STOKER_E_INVALID): a mask is one channel of at most 8 bits.
 *
 * A build without libspng has these functions answer STOKER_E_UNSUPPORTED (png_none.c). */
#ifndef STOKER_DECODE_PNG_H
#define STOKER_DECODE_PNG_H

#include "common/common.h"

typedef enum stoker__png_mode {
    STOKER__PNG_RGB = 0,
    STOKER__PNG_MASK = 1,
} stoker__png_mode;

/* The IHDR colour types (PNG specification, 11.2.2). */
enum {
    STOKER__PNG_GRAY = 0,
    STOKER__PNG_TRUECOLOR = 2,
    STOKER__PNG_PALETTE = 3,
    STOKER__PNG_GRAY_ALPHA = 4,
    STOKER__PNG_TRUECOLOR_ALPHA = 6,
};

typedef struct stoker__png_info {
    int32_t width, height;
    int32_t channels;   /* of the file: 1 gray or palette (indices), 2 gray+alpha, 3, 4 */
    int32_t bit_depth;  /* bits per sample (per index for a palette): 1, 2, 4, 8 or 16 */
    int32_t color_type; /* STOKER__PNG_GRAY .. STOKER__PNG_TRUECOLOR_ALPHA */
    int32_t interlaced; /* Adam7 */
} stoker__png_info;

/* Whether this build decodes PNG. */
bool stoker__png_supported(void);

/* Reads the header (signature and IHDR) of the PNG `data` into *info. Returns 0, or
 * STOKER_E_CORRUPT with libspng's message (not a PNG, truncated, bad IHDR or its CRC), or
 * STOKER_E_UNSUPPORTED in a build without PNG. */
int stoker__png_info_read(const uint8_t *data, size_t size, stoker__png_info *info,
                          stoker__err *err);

/* The bytes the decoded image takes in `mode`: width * height * (3 or 1). */
uint64_t stoker__png_out_size(const stoker__png_info *info, stoker__png_mode mode);

/* Decodes the PNG `data` in `mode` into `out` (cap bytes, at least stoker__png_out_size), and
 * its header into *info (may be NULL). Refuses, before decoding, an image of more than
 * `max_pixels` pixels (width * height; 0: no limit) with STOKER_E_LIMIT. Returns 0, or:
 * STOKER_E_CORRUPT with libspng's message (truncated or corrupt data, a CRC mismatch, a
 * palette index past the palette), STOKER_E_INVALID (a mask that is not one channel of at most
 * 8 bits; cap too small), STOKER_E_UNSUPPORTED in a build without PNG. `out` is unspecified
 * after a failure. */
int stoker__png_decode(const uint8_t *data, size_t size, stoker__png_mode mode, uint64_t max_pixels,
                       uint8_t *out, size_t cap, stoker__png_info *info, stoker__err *err);

#endif
