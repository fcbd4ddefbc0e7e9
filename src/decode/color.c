/* SPDX-License-Identifier: Apache-2.0 */
/* Colour conversions matching Pillow's. */
#include "decode/color.h"

/* Pillow's MULDIV255: a * b / 255, rounded, without a division. */
static inline int muldiv255(int a, int b)
{
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

void stoker__cmyk_to_rgbx(uint8_t *px, size_t n)
{
    /* Pillow unpacks CMYK JPEG data as "CMYK;I" (255 - v) and converts with
     * R = nk - muldiv255(C, nk), nk = 255 - K; in the raw samples nk is k and C is 255 - c */
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = px + 4 * i;
        const int k = p[3];
        for (int c = 0; c < 3; c++)
            p[c] = (uint8_t)(k - muldiv255(255 - p[c], k));
        p[3] = 255;
    }
}

void stoker__rgb_to_rgbx(const uint8_t *rgb, uint8_t *rgbx, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rgbx[4 * i] = rgb[3 * i];
        rgbx[4 * i + 1] = rgb[3 * i + 1];
        rgbx[4 * i + 2] = rgb[3 * i + 2];
        rgbx[4 * i + 3] = 255;
    }
}
