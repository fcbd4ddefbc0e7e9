/* SPDX-License-Identifier: Apache-2.0 */
/* Test helpers: making JPEGs with libjpeg in memory, and decoding them whole. */
#ifndef STOKER_TEST_JPEGUTIL_H
#define STOKER_TEST_JPEGUTIL_H

#include "testutil.h"

#include <setjmp.h>
#include <stdio.h>

#include <jerror.h>
#include <jpeglib.h>

/* What to make. */
typedef struct t_jpeg_kind {
    const char *name;
    int components;     /* 1 gray, 3 YCbCr (or RGB), 4 CMYK / YCCK */
    int h_samp, v_samp; /* luma sampling: 2,2 = 4:2:0; 2,1 = 4:2:2; 1,1 = 4:4:4 */
    int progressive;
    int ycck;  /* 4 components stored as YCCK */
    int adobe; /* write the Adobe APP14 marker (4 components) */
} t_jpeg_kind;

typedef struct t_jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jmp;
} t_jerr;

static void t_jerr_exit(j_common_ptr c)
{
    char msg[JMSG_LENGTH_MAX];
    c->err->format_message(c, msg);
    T_FAIL("libjpeg in a test helper: %s", msg);
}

/* A decompressor on the JPEG in memory, its header read; a libjpeg error fails the test.
 * je must outlive c (it is c's error manager). jpeg_destroy_decompress when done. */
static inline void t_jpeg_read_header(struct jpeg_decompress_struct *c, t_jerr *je,
                                      const uint8_t *jpg, size_t size)
{
    c->err = jpeg_std_error(&je->pub);
    je->pub.error_exit = t_jerr_exit;
    jpeg_create_decompress(c);
    jpeg_mem_src(c, jpg, (unsigned long)size);
    jpeg_read_header(c, TRUE);
}

/* libjpeg's RGB of a whole JPEG as the CPU decoder asks for it (islow IDCT, fancy
 * upsampling); *w, *h receive its size. free() the result. */
static inline uint8_t *t_decode_rgb(const uint8_t *jpg, size_t size, int32_t *w, int32_t *h)
{
    struct jpeg_decompress_struct c;
    t_jerr je;
    t_jpeg_read_header(&c, &je, jpg, size);
    c.out_color_space = JCS_RGB;
    c.dct_method = JDCT_ISLOW;
    c.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&c);
    *w = (int32_t)c.output_width;
    *h = (int32_t)c.output_height;
    uint8_t *px = malloc((size_t)*w * (size_t)*h * 3);
    if (!px)
        T_FAIL("out of memory decoding a %dx%d test image", (int)*w, (int)*h);
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = px + (size_t)c.output_scanline * (size_t)*w * 3;
        jpeg_read_scanlines(&c, &row, 1);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    return px;
}

/* libjpeg's verdict on a JPEG, by its full decode (every row, then jpeg_finish_decompress,
 * which reads up to the EOI marker): 0 clean, 1 damaged (a warning: corrupt data, premature
 * end, extraneous bytes, ...), -1 refused (a fatal error, or more than max_pixels pixels,
 * found from the header). Warnings that say nothing about the image data (an Adobe
 * transform, a JFIF major version or an ICC profile libjpeg does not know) are not damage,
 * by the library's convention (src/decode/jpeg_common.c). msg (JMSG_LENGTH_MAX bytes, may be
 * NULL) receives the first warning's or the error's text. The reference for what a loader
 * may deliver: a record it returns is damaged is never a good sample. */
typedef struct t_verdict_err {
    struct jpeg_error_mgr pub;
    jmp_buf jmp;
    int damage;
    char msg[JMSG_LENGTH_MAX];
} t_verdict_err;

static void t_verdict_exit(j_common_ptr c)
{
    t_verdict_err *e = (t_verdict_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jmp, 1);
}

static void t_verdict_emit(j_common_ptr c, int level)
{
    t_verdict_err *e = (t_verdict_err *)c->err;
    const int code = c->err->msg_code;
    if (level >= 0 || code == JWRN_ADOBE_XFORM || code == JWRN_JFIF_MAJOR || code == JWRN_BOGUS_ICC)
        return;
    if (e->damage++ == 0)
        c->err->format_message(c, e->msg);
}

static inline int t_jpeg_verdict(const uint8_t *jpg, size_t size, uint64_t max_pixels, char *msg)
{
    struct jpeg_decompress_struct c;
    t_verdict_err e;
    memset(&e, 0, sizeof e);
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = t_verdict_exit;
    e.pub.emit_message = t_verdict_emit;
    uint8_t *volatile row = NULL;
    int out = -1;
    jpeg_create_decompress(&c);
    if (setjmp(e.jmp) == 0) {
        jpeg_mem_src(&c, jpg, (unsigned long)size);
        jpeg_read_header(&c, TRUE);
        if ((uint64_t)c.image_width * c.image_height > max_pixels) {
            snprintf(e.msg, sizeof e.msg, "%ux%u pixels", c.image_width, c.image_height);
        } else {
            jpeg_start_decompress(&c);
            row = malloc((size_t)c.output_width * (size_t)c.output_components);
            if (!row)
                T_FAIL("out of memory for a %u-pixel row", c.output_width);
            while (c.output_scanline < c.output_height) {
                JSAMPROW r = row;
                jpeg_read_scanlines(&c, &r, 1);
            }
            jpeg_finish_decompress(&c);
            out = e.damage > 0;
        }
    }
    if (msg)
        snprintf(msg, JMSG_LENGTH_MAX, "%s", e.msg);
    free(row);
    jpeg_destroy_decompress(&c);
    return out;
}

/* A photo-like test pattern: gradients, edges and noise, deterministic in `seed`. */
static inline uint8_t *t_pattern(int w, int h, int ch, uint64_t seed)
{
    uint8_t *p = malloc((size_t)w * h * ch);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                int v = (x * (3 + c) + y * (5 - c)) % 256;
                if (((x / 13) + (y / 11)) % 3 == c % 3)
                    v = 255 - v;
                v += (int)(t_rand(&seed) % 24) - 12;
                p[((size_t)y * w + x) * ch + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

/* Encodes a w x h test pattern as `kind`; *size receives the length. free() the result. */
/* t_make_jpeg with Huffman tables made for the image (optimize) or the standard ones. */
static inline uint8_t *t_make_jpeg_huff(const t_jpeg_kind *kind, int w, int h, int quality,
                                        uint64_t seed, int optimize, size_t *size)
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
    c.input_components = kind->components;
    c.in_color_space = kind->components == 1   ? JCS_GRAYSCALE
                       : kind->components == 3 ? JCS_RGB
                                               : JCS_CMYK;
    jpeg_set_defaults(&c);
    if (kind->components == 4)
        jpeg_set_colorspace(&c, kind->ycck ? JCS_YCCK : JCS_CMYK);
    if (kind->components == 4)
        c.write_Adobe_marker = kind->adobe ? TRUE : FALSE;
    jpeg_set_quality(&c, quality, TRUE);
    if (kind->components >= 3) {
        c.comp_info[0].h_samp_factor = kind->h_samp;
        c.comp_info[0].v_samp_factor = kind->v_samp;
    }
    if (kind->progressive)
        jpeg_simple_progression(&c);
    c.optimize_coding = optimize ? TRUE : FALSE;
    jpeg_start_compress(&c, TRUE);
    uint8_t *px = t_pattern(w, h, kind->components, seed);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = px + (size_t)c.next_scanline * w * kind->components;
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

static inline uint8_t *t_make_jpeg(const t_jpeg_kind *kind, int w, int h, int quality,
                                   uint64_t seed, size_t *size)
{
    return t_make_jpeg_huff(kind, w, h, quality, seed, 0, size);
}

/* A JPEG data set for loader tests: record id is a t_make_jpeg image (quality 80, seed
 * id + 1) of kind kinds[id % nkinds], w[0] + (id % w[1]) * w[2] by h[0] + (id % h[1]) * h[2]
 * pixels, label id % labels; shards of at most shard_size bytes (0: the default). */
typedef struct t_jpeg_set {
    const t_jpeg_kind *kinds;
    int nkinds;
    int w[3], h[3];
    int64_t labels, shard_size;
} t_jpeg_set;

/* A writer of JPEG records at path (no fsync; over a data set already there), shards of at
 * most shard_size bytes (0: the default); checked: STOKER_OPT_JPEG_CHECKED (0 or 1). */
static inline stoker_writer *t_jpeg_writer_checked(const char *path, int64_t shard_size,
                                                   int checked)
{
    stoker_writer *w = t_writer_open(path, shard_size, 0, checked);
    T_OK(stoker_writer_set_field(w, STOKER_FIELD_JPEG, 0, 0, NULL));
    return w;
}

/* The records are libjpeg's own encodes, as a checked pack's are (a test that damages one on
 * purpose vouches falsely, to see what the loader does with it). */
static inline stoker_writer *t_jpeg_writer(const char *path, int64_t shard_size)
{
    return t_jpeg_writer_checked(path, shard_size, 1);
}

static inline void t_write_jpeg_set(const char *path, int64_t n, const t_jpeg_set *spec)
{
    stoker_writer *w = t_jpeg_writer(path, spec->shard_size);
    for (int64_t id = 0; id < n; id++) {
        size_t size = 0;
        const int wd = spec->w[0] + (int)(id % spec->w[1]) * spec->w[2];
        const int ht = spec->h[0] + (int)(id % spec->h[1]) * spec->h[2];
        uint8_t *j =
            t_make_jpeg(&spec->kinds[id % spec->nkinds], wd, ht, 80, (uint64_t)id + 1, &size);
        T_OK(stoker_writer_add(w, j, size, id % spec->labels, NULL));
        free(j);
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
}

#endif
