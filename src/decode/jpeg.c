/* SPDX-License-Identifier: Apache-2.0 */
/* Region decoding with libjpeg-turbo. The error manager is jpeg_common's: fatal errors
 * longjmp to the setjmp in decode, which owns every resource touched after it
 * (the decompressor and the row buffer both belong to the decoder object, so nothing of an
 * intermediate frame can leak), and damage warnings are counted as corruption. */
#include "decode/jpeg.h"

#include "decode/color.h"
#include "decode/jpeg_common.h"

#include <string.h>

#define EDGE 2 /* pixels */

struct stoker__jpeg_dec {
    struct jpeg_decompress_struct c;
    stoker__jpeg_err je;
    uint8_t *row;   /* one RGBX (or CMYK) row plus padding */
    size_t row_cap; /* bytes */
};

int stoker__jpeg_dec_create(stoker__jpeg_dec **out)
{
    stoker__jpeg_dec *d = stoker__calloc(1, sizeof *d);
    *out = d;
    if (!d)
        return -ENOMEM;
    d->c.err = stoker__jpeg_err_init(&d->je);
    if (setjmp(d->je.jmp)) { /* jpeg_create_decompress fails only when out of memory */
        stoker__free(d);
        *out = NULL;
        return -ENOMEM;
    }
    jpeg_create_decompress(&d->c);
    return 0;
}

void stoker__jpeg_dec_destroy(stoker__jpeg_dec *d)
{
    if (!d)
        return;
    jpeg_destroy_decompress(&d->c);
    stoker__free(d->row);
    stoker__free(d);
}

static void reset_errors(stoker__jpeg_dec *d)
{
    d->je.damage = 0;
    d->je.msg[0] = '\0';
    d->je.pub.num_warnings = 0;
}

/* Room for `bytes`; the buffer's contents are not kept. */
static int grow_row(stoker__jpeg_dec *d, size_t bytes)
{
    if (bytes <= d->row_cap)
        return 0;
    uint8_t *p = stoker__malloc(bytes);
    if (!p)
        return -ENOMEM;
    memset(p, 0, bytes); /* the padding is read (and multiplied by zero) */
    stoker__free(d->row);
    d->row = p;
    d->row_cap = bytes;
    return 0;
}

static int check_region(const stoker__jpeg_region *r, int32_t w, int32_t h, stoker__err *err)
{
    STOKER_RETURN_IF(r->x0 < 0 || r->y0 < 0 || r->x1 > w || r->y1 > h || r->x0 >= r->x1 ||
                         r->y0 >= r->y1 || r->pad < 0,
                     err, STOKER_E_INVALID,
                     "JPEG region [%d,%d)x[%d,%d) outside %dx%d (scale 1/%d)", (int)r->x0,
                     (int)r->x1, (int)r->y0, (int)r->y1, (int)w, (int)h, (int)r->scale);
    return 0;
}

static int not_jpeg(const uint8_t *data, size_t size, stoker__err *err)
{
    if (stoker__is_png(data, size))
        return stoker__fail(err, STOKER_E_CORRUPT, "not a JPEG: PNG data");
    return stoker__fail(err, STOKER_E_CORRUPT, "not a JPEG: no SOI marker (%zu bytes)", size);
}

/* Chooses the output colour space and decoding options after the header. With a scale of
 * 2, 4 or 8, libjpeg-turbo runs its reduced IDCTs (4x4, 2x2, 1x1; SIMD on x86-64) on the
 * full-resolution components and the full 8x8 one on 2x-subsampled chroma, which then
 * needs no upsampling. */
static void set_output(j_decompress_ptr c, int32_t dct, int32_t scale)
{
    const int cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
    c->out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGBX; /* libjpeg does YCCK -> CMYK */
    c->dct_method = dct == STOKER_DCT_IFAST ? JDCT_IFAST : JDCT_ISLOW;
    c->do_fancy_upsampling = TRUE;
    c->scale_num = 1;
    c->scale_denom = (unsigned)scale;
}

/* Rows to read in one call from row y: the sink's group, cut at the region's end. */
static int32_t run_length(const stoker__jpeg_sink *sink, int32_t y, int32_t y0, int32_t y1)
{
    if (!sink->buffer || sink->group <= 1)
        return 1;
    int32_t run = sink->group - (y - y0) % sink->group;
    run = run < STOKER__JPEG_RUN ? run : STOKER__JPEG_RUN;
    return run < y1 - y ? run : y1 - y;
}

/* Reads rows [output_scanline, y1) of the region starting at row y0 and hands them on.
 * Runs under decode's setjmp. */
static int read_rows(stoker__jpeg_dec *d, int32_t y0, int32_t y1, int32_t x,
                     const stoker__jpeg_sink *sink, stoker__err *err)
{
    j_decompress_ptr c = &d->c;
    const int cmyk = c->out_color_space == JCS_CMYK;
    while ((int32_t)c->output_scanline < y1) {
        const int32_t y = (int32_t)c->output_scanline, n = (int32_t)c->output_width;
        const int32_t run = run_length(sink, y, y0, y1);
        JSAMPROW rows[STOKER__JPEG_RUN];
        for (int32_t k = 0; k < run; k++) {
            rows[k] = sink->buffer ? sink->buffer(sink->ctx, y + k, n) : d->row;
            if (!rows[k])
                return STOKER_E_LIMIT;
        }
        /* libjpeg returns at most one row group per call: the run may come in parts */
        const int32_t got = (int32_t)jpeg_read_scanlines(c, rows, (JDIMENSION)run);
        STOKER_RETURN_IF(got < 1, err, STOKER_E_CORRUPT, "JPEG: no data for row %d", (int)y);
        for (int32_t k = 0; k < got; k++) {
            if (cmyk)
                stoker__cmyk_to_rgbx(rows[k], (size_t)n);
            const int rc = sink->row(sink->ctx, y + k, rows[k], x, n);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* stoker__jpeg_decode_whole: the rows below the region, read only so that libjpeg goes through
 * all of the data (the trailing markers are read by jpeg_finish_decompress after this).
 * jpeg_skip_scanlines Huffman-decodes the whole iMCU rows it skips of a single-scan image
 * and drops them before the IDCT (a multi-scan image was decoded whole in
 * jpeg_start_decompress), but a skip that reaches the last row marks the image finished
 * without reading what is left of it: the last row is read, into the decoder's row buffer.
 * Runs under decode's setjmp. */
static int read_to_end(stoker__jpeg_dec *d, stoker__err *err)
{
    j_decompress_ptr c = &d->c;
    const JDIMENSION left = c->output_height - c->output_scanline;
    if (left == 0)
        return 0;
    if (left > 1)
        jpeg_skip_scanlines(c, left - 1);
    STOKER_RETURN_IF(grow_row(d, (size_t)c->output_width * 4) < 0, err, -ENOMEM,
                     "JPEG: no memory for a %u-pixel row", c->output_width);
    while (c->output_scanline < c->output_height) {
        JSAMPROW row = d->row;
        STOKER_RETURN_IF(jpeg_read_scanlines(c, &row, 1) < 1, err, STOKER_E_CORRUPT,
                         "JPEG: no data for row %u", c->output_scanline);
    }
    return 0;
}

/* Everything that calls libjpeg for one image. A fatal libjpeg error longjmps out of here
 * (and out of read_rows and read_to_end) straight to decode; these frames own nothing. */
static int decode_body(stoker__jpeg_dec *d, const uint8_t *data, size_t size, int32_t dct,
                       uint64_t max_pixels, const stoker__jpeg_sink *sink, bool whole,
                       stoker__err *err)
{
    j_decompress_ptr c = &d->c;
    int rc = 0;
    jpeg_mem_src(c, data, (unsigned long)size);
    jpeg_read_header(c, TRUE);
    const int32_t w = (int32_t)c->image_width, h = (int32_t)c->image_height;
    STOKER_RETURN_IF((uint64_t)w * (uint64_t)h > max_pixels, err, STOKER_E_LIMIT,
                     "JPEG of %dx%d pixels exceeds the limit of %llu pixels", (int)w, (int)h,
                     (unsigned long long)max_pixels);
    stoker__jpeg_region r;
    if ((rc = sink->region(sink->ctx, w, h, &r)) < 0)
        return rc;
    r.scale = r.scale ? r.scale : 1;
    STOKER_RETURN_IF(r.scale != 1 && r.scale != 2 && r.scale != 4 && r.scale != 8, err,
                     STOKER_E_INVALID, "JPEG scale 1/%d is not 1, 1/2, 1/4 or 1/8", (int)r.scale);
    set_output(c, dct, r.scale);
    jpeg_calc_output_dimensions(c);
    if ((rc = check_region(&r, (int32_t)c->output_width, (int32_t)c->output_height, err)) < 0)
        return rc;
    jpeg_start_decompress(c);
    /* Fancy upsampling replicates the edge chroma sample at the edges of a cropped row, so
     * the outermost columns of a crop can differ from a full decode; asking for EDGE more
     * columns on each side keeps them out of the region, which then matches exactly. */
    const int32_t ow = (int32_t)c->output_width;
    const int32_t x0 = r.x0 > EDGE ? r.x0 - EDGE : 0, x1 = r.x1 + EDGE < ow ? r.x1 + EDGE : ow;
    JDIMENSION x = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    if (cw < c->output_width)
        jpeg_crop_scanline(c, &x, &cw); /* moves x down to an iMCU boundary */
    STOKER_RETURN_IF(!sink->buffer &&
                         grow_row(d, ((size_t)c->output_width + (size_t)r.pad) * 4) < 0,
                     err, -ENOMEM, "JPEG: no memory for a %u-pixel row", c->output_width);
    if (r.y0 > 0)
        jpeg_skip_scanlines(c, (JDIMENSION)r.y0);
    if ((rc = read_rows(d, r.y0, r.y1, (int32_t)x, sink, err)) < 0)
        return rc;
    return whole ? read_to_end(d, err) : 0;
}

static int decode(stoker__jpeg_dec *d, const uint8_t *data, size_t size, int32_t dct,
                  uint64_t max_pixels, const stoker__jpeg_sink *sink, bool whole, stoker__err *err)
{
    if (!stoker__is_jpeg(data, size))
        return not_jpeg(data, size, err);
    reset_errors(d);
    if (setjmp(d->je.jmp)) {
        jpeg_abort_decompress(&d->c);
        return stoker__fail(err, STOKER_E_CORRUPT, "JPEG: %s", d->je.msg);
    }
    /* A fresh decompressor for every image, which costs little (docs/BENCHMARKS.md):
     * libjpeg keeps the Huffman and quantization tables an image defines for the next one
     * (abbreviated streams), so a damaged image lacking a table would decode with another
     * image's, and its result would depend on what this decoder saw before. Fresh, it
     * decodes as Pillow's would. */
    jpeg_destroy_decompress(&d->c);
    jpeg_create_decompress(&d->c);
    const int rc = decode_body(d, data, size, dct, max_pixels, sink, whole, err);
    /* Stop here: rows below the region are never decoded (unless `whole` read them). When
     * every row was read, finish instead, which reads the trailing markers and warns about
     * damage found there. */
    if (rc == 0 && d->c.output_scanline == d->c.output_height)
        jpeg_finish_decompress(&d->c);
    else
        jpeg_abort_decompress(&d->c);
    if (rc < 0)
        return rc;
    STOKER_RETURN_IF(stoker__jpeg_damaged(&d->je), err, STOKER_E_CORRUPT, "JPEG: %s", d->je.msg);
    return 0;
}

int stoker__jpeg_decode(stoker__jpeg_dec *d, const uint8_t *data, size_t size, int32_t dct,
                        uint64_t max_pixels, const stoker__jpeg_sink *sink, stoker__err *err)
{
    return decode(d, data, size, dct, max_pixels, sink, false, err);
}

int stoker__jpeg_decode_whole(stoker__jpeg_dec *d, const uint8_t *data, size_t size, int32_t dct,
                              uint64_t max_pixels, const stoker__jpeg_sink *sink, stoker__err *err)
{
    return decode(d, data, size, dct, max_pixels, sink, true, err);
}
