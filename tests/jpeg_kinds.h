/* SPDX-License-Identifier: Apache-2.0 */
/* Test helpers: JPEGs of every kind libjpeg can write here, with the hardware decoder's
 * verdict on each by nvJPEG's documented rule (the GPU tests check the rule against nvJPEG
 * itself). */
#ifndef STOKER_TEST_JPEG_KINDS_H
#define STOKER_TEST_JPEG_KINDS_H

#include "jpegutil.h"

/* What to write: per-component sampling factors, libjpeg's stored colour space, options. */
enum { PROG = 1, ARITH = 2, SEPARATE = 4, NO_JFIF = 8, NO_ADOBE = 16 };

typedef struct kind {
    const char *name;
    int components;
    int samp[3][2];
    J_COLOR_SPACE space;
    int flags, restart;
    const char *why; /* the expected hardware obstacle, NULL: eligible */
} kind;

static const kind JPEG_KINDS[] = {
    {"4:2:0", 3, {{2, 2}, {1, 1}, {1, 1}}, JCS_YCbCr, 0, 0, NULL},
    {"4:2:2", 3, {{2, 1}, {1, 1}, {1, 1}}, JCS_YCbCr, 0, 0, NULL},
    {"4:4:4", 3, {{1, 1}, {1, 1}, {1, 1}}, JCS_YCbCr, 0, 0, NULL},
    {"4:4:0", 3, {{1, 2}, {1, 1}, {1, 1}}, JCS_YCbCr, 0, 0, "4:4:0 subsampling"},
    {"4:1:1", 3, {{4, 1}, {1, 1}, {1, 1}}, JCS_YCbCr, 0, 0, "4:1:1 subsampling"},
    {"4:1:0", 3, {{4, 2}, {1, 1}, {1, 1}}, JCS_YCbCr, 0, 0, "4:1:0 subsampling"},
    {"chroma 2x1", 3, {{2, 2}, {2, 1}, {2, 1}}, JCS_YCbCr, 0, 0, "unusual subsampling"},
    {"luma 3x1", 3, {{3, 1}, {1, 1}, {1, 1}}, JCS_YCbCr, 0, 0, "unusual subsampling"},
    {"gray", 1, {{1, 1}}, JCS_GRAYSCALE, 0, 0, NULL},
    {"gray 2x2", 1, {{2, 2}}, JCS_GRAYSCALE, 0, 0, "grayscale sampling factors above 1"},
    {"progressive 4:2:0", 3, {{2, 2}, {1, 1}, {1, 1}}, JCS_YCbCr, PROG, 0, "progressive"},
    {"progressive gray", 1, {{1, 1}}, JCS_GRAYSCALE, PROG, 0, "progressive"},
    {"arithmetic 4:2:0", 3, {{2, 2}, {1, 1}, {1, 1}}, JCS_YCbCr, ARITH, 0, "arithmetic coding"},
    {"arithmetic progressive",
     3,
     {{2, 2}, {1, 1}, {1, 1}},
     JCS_YCbCr,
     PROG | ARITH,
     0,
     "progressive"},
    {"CMYK Adobe", 4, {{1, 1}, {1, 1}, {1, 1}}, JCS_CMYK, 0, 0, "CMYK"},
    {"CMYK plain", 4, {{1, 1}, {1, 1}, {1, 1}}, JCS_CMYK, NO_ADOBE, 0, "CMYK"},
    {"YCCK", 4, {{2, 2}, {1, 1}, {1, 1}}, JCS_YCCK, 0, 0, "YCCK"},
    {"RGB Adobe", 3, {{1, 1}, {1, 1}, {1, 1}}, JCS_RGB, 0, 0, "RGB colour space"},
    {"RGB ids", 3, {{1, 1}, {1, 1}, {1, 1}}, JCS_RGB, NO_ADOBE, 0, "RGB colour space"},
    {"restart 4:2:0", 3, {{2, 2}, {1, 1}, {1, 1}}, JCS_YCbCr, 0, 3, NULL},
    {"restart gray", 1, {{1, 1}}, JCS_GRAYSCALE, 0, 1, NULL},
    {"one scan per component",
     3,
     {{2, 2}, {1, 1}, {1, 1}},
     JCS_YCbCr,
     SEPARATE,
     0,
     "non-interleaved scans"},
    {"no JFIF", 3, {{2, 2}, {1, 1}, {1, 1}}, JCS_YCbCr, NO_JFIF, 0, NULL},
};
#define NJPEG_KINDS (int)(sizeof JPEG_KINDS / sizeof JPEG_KINDS[0])

/* Encodes a w x h test pattern as kind k (quality 80); *size receives the length. */
static inline uint8_t *t_make_kind(const kind *k, int w, int h, uint64_t seed, size_t *size)
{
    struct jpeg_compress_struct c;
    t_jerr je;
    c.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = t_jerr_exit;
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long out_size = 0;
    jpeg_mem_dest(&c, &out, &out_size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = k->components;
    c.in_color_space = k->components == 1 ? JCS_GRAYSCALE : k->components == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_colorspace(&c, k->space);
    jpeg_set_quality(&c, 80, TRUE);
    for (int i = 0; i < k->components && i < 3; i++) {
        c.comp_info[i].h_samp_factor = k->samp[i][0];
        c.comp_info[i].v_samp_factor = k->samp[i][1];
    }
    if (k->components == 4) { /* K like Y */
        c.comp_info[3].h_samp_factor = k->samp[0][0];
        c.comp_info[3].v_samp_factor = k->samp[0][1];
    }
    jpeg_scan_info scans[3];
    if (k->flags & SEPARATE) {
        for (int i = 0; i < k->components; i++)
            scans[i] = (jpeg_scan_info){1, {i}, 0, 63, 0, 0};
        c.scan_info = scans;
        c.num_scans = k->components;
    }
    if (k->flags & PROG)
        jpeg_simple_progression(&c);
    c.arith_code = k->flags & ARITH ? TRUE : FALSE;
    c.restart_interval = (unsigned)k->restart;
    if (k->flags & NO_JFIF)
        c.write_JFIF_header = FALSE;
    if (k->flags & NO_ADOBE)
        c.write_Adobe_marker = FALSE;
    jpeg_start_compress(&c, TRUE);
    uint8_t *px = t_pattern(w, h, k->components, seed);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = px + (size_t)c.next_scanline * w * k->components;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(px);
    uint8_t *copy = malloc(out_size);
    memcpy(copy, out, out_size);
    free(out);
    *size = out_size;
    return copy;
}

#endif
