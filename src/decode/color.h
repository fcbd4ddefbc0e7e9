/* SPDX-License-Identifier: Apache-2.0 */
/* Colour conversions of decoded rows that libjpeg-turbo does not do itself. */
#ifndef STOKER_DECODE_COLOR_H
#define STOKER_DECODE_COLOR_H

#include <stddef.h>
#include <stdint.h>

/* n pixels of libjpeg's raw CMYK samples (as stored: Adobe's inverted convention, which is
 * how Pillow reads every CMYK JPEG) to RGBX, in place, exactly as Pillow's
 * Image.open(f).convert("RGB"): R = k - muldiv255(255 - c, k) with Pillow's rounding. */
void stoker__cmyk_to_rgbx(uint8_t *px, size_t n);

/* n RGB pixels to RGBX (X = 255); src and dst must not overlap. */
void stoker__rgb_to_rgbx(const uint8_t *rgb, uint8_t *rgbx, size_t n);

#endif
