/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-pack's image checks and conversions (image.h): what is it, is it intact, and
 * CMYK/grayscale/PNG to RGB JPEG with downscaling. Each function that drives libjpeg or
 * libpng arms its own setjmp and releases what it holds in that handler; buffers that
 * outlive a libjpeg session live in the caller's `pixels`, which the caller frees on every
 * path.
 *
 * libjpeg's error manager (which warnings mean damaged data) and the CMYK rule are the
 * library's own (decode/jpeg_common.c, decode/color.c, compiled in beside this file): a
 * file that --validate passes is one the loader decodes, and a converted CMYK image looks
 * as the loader would have shown it. */
#include "image.h"

#include "decode/color.h"
#include "decode/jpeg_common.h"
#include "decode/png.h"
#include "stoker.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_PIXELS (1ull << 28)
#define DEFAULT_QUALITY 90
#define ERRMSG_CAP 512

/* The reason for a failure, copied to the caller's msg buffer at the end. */
typedef struct img_err {
    char msg[ERRMSG_CAP];
} img_err;

/* Formats the reason into err and returns `code`. */
static int img_fail(img_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int img_fail(img_err *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

/* RETURN_IF sets the reason and returns the code; FAIL_IF sets `rc` and jumps to the
 * function's `fail:` cleanup label; FORWARD passes on a callee's failure to `fail:`. */
#define RETURN_IF(cond, errp, code, ...)                                                           \
    do {                                                                                           \
        if (cond)                                                                                  \
            return img_fail((errp), (code), __VA_ARGS__);                                          \
    } while (0)
#define FAIL_IF(cond, errp, code, ...)                                                             \
    do {                                                                                           \
        if (cond) {                                                                                \
            rc = img_fail((errp), (code), __VA_ARGS__);                                            \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define FORWARD(expr)                                                                              \
    do {                                                                                           \
        rc = (expr);                                                                               \
        if (rc < 0)                                                                                \
            goto fail;                                                                             \
    } while (0)

/* Every allocation of this file goes through img_malloc/img_calloc, so that a test can fail
 * the nth one (pack_image_alloc_fail_at) and see each error path release what it holds. */
static atomic_uint_fast64_t alloc_count, alloc_fail_at;

uint64_t pack_image_alloc_fail_at(uint64_t nth)
{
    const uint64_t made = atomic_exchange(&alloc_count, 0);
    atomic_store(&alloc_fail_at, nth);
    return made;
}

static bool alloc_fails(void)
{
    const uint64_t n = atomic_fetch_add(&alloc_count, 1) + 1;
    const uint64_t at = atomic_load_explicit(&alloc_fail_at, memory_order_relaxed);
    return at != 0 && n == at;
}

static void *img_malloc(size_t size)
{
    return alloc_fails() ? NULL : malloc(size ? size : 1);
}

static void *img_calloc(size_t n, size_t size)
{
    return alloc_fails() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

/* A decoded image: rows of w * ch bytes, packed. */
typedef struct pixels {
    uint8_t *data;
    uint8_t **rows; /* libpng's row pointers */
    uint32_t w, h;
    int ch;
} pixels;

static void pixels_free(pixels *px)
{
    free(px->data);
    free(px->rows);
    memset(px, 0, sizeof *px);
}

/* Copies the message of `err` into the caller's buffer and passes `rc` through. */
static int finish(const img_err *err, int rc, char *msg, size_t msgcap)
{
    if (msg && msgcap > 0) {
        if (rc < 0)
            snprintf(msg, msgcap, "%s", err->msg[0] ? err->msg : stoker_strerror(rc));
        else
            msg[0] = '\0';
    }
    return rc;
}

static int check_pixels(img_err *err, uint64_t w, uint64_t h, uint64_t max_pixels)
{
    const uint64_t limit = max_pixels ? max_pixels : DEFAULT_MAX_PIXELS;
    RETURN_IF(w * h > limit, err, STOKER_E_LIMIT,
              "image of %llux%llu pixels exceeds the limit of %llu pixels", (unsigned long long)w,
              (unsigned long long)h, (unsigned long long)limit);
    return 0;
}

/* Bytes of a w x h x ch image, or 0 on overflow. */
static size_t image_bytes(uint64_t w, uint64_t h, uint64_t ch)
{
    uint64_t n;
    if (__builtin_mul_overflow(w, h, &n) || __builtin_mul_overflow(n, ch, &n) || n > SIZE_MAX)
        return 0;
    return (size_t)n;
}

/* ---- JPEG --------------------------------------------------------------------------------- */

typedef struct jpeg_info {
    uint32_t w, h;
    int comps;
    J_COLOR_SPACE cs;
} jpeg_info;

/* Entropy-decodes every scanline as cheaply as libjpeg-turbo allows: skipping decodes the
 * Huffman data of each MCU and discards it (no inverse DCT); the last line is read for
 * real, because skipping straight to the end would skip the decoding too. */
static void drain_scanlines(struct jpeg_decompress_struct *d)
{
    JSAMPARRAY buf = (*d->mem->alloc_sarray)((j_common_ptr)d, JPOOL_IMAGE,
                                             d->output_width * (JDIMENSION)d->output_components,
                                             (JDIMENSION)d->rec_outbuf_height);
    if (d->output_height > 1)
        jpeg_skip_scanlines(d, d->output_height - 1);
    while (d->output_scanline < d->output_height)
        jpeg_read_scanlines(d, buf, (JDIMENSION)d->rec_outbuf_height);
}

/* Reads the header and, with PACK_IMAGE_DECODE, entropy-decodes everything as cheaply as
 * libjpeg allows: 1/8 scale (DC-only inverse DCT where one runs: progressive images, the
 * last row), no colour conversion, no fancy upsampling. Every coefficient is still
 * Huffman-decoded, which is what finds truncation and damaged entropy data. On 2,000
 * ImageNet-like photos this runs at about 1.5x the per-thread rate of a full-size
 * TurboJPEG decode with TJFLAG_FASTDCT (bench/pack_speed.sh). */
static int inspect_jpeg(const uint8_t *data, size_t size, uint32_t flags, uint64_t max_pixels,
                        jpeg_info *info, img_err *err)
{
    struct jpeg_decompress_struct d;
    stoker__jpeg_err je;
    d.err = stoker__jpeg_err_init(&je);
    if (setjmp(je.jmp)) {
        jpeg_destroy_decompress(&d);
        return img_fail(err, STOKER_E_CORRUPT, "JPEG: %s", je.msg);
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)size);
    jpeg_read_header(&d, TRUE);
    info->w = d.image_width;
    info->h = d.image_height;
    info->comps = d.num_components;
    info->cs = d.jpeg_color_space;
    int rc = check_pixels(err, d.image_width, d.image_height, max_pixels);
    if (rc == 0 && (flags & PACK_IMAGE_DECODE)) {
        d.scale_num = 1;
        d.scale_denom = 8;
        d.dct_method = JDCT_IFAST;
        d.do_fancy_upsampling = FALSE;
        d.do_block_smoothing = FALSE;
        d.out_color_space = d.jpeg_color_space;
        jpeg_start_decompress(&d);
        drain_scanlines(&d);
        jpeg_finish_decompress(&d);
        if (stoker__jpeg_damaged(&je))
            rc = img_fail(err, STOKER_E_CORRUPT, "JPEG: %s", je.msg);
    }
    jpeg_destroy_decompress(&d);
    return rc;
}

/* Fully decodes (accurate IDCT, fancy upsampling, as Pillow does) into px, in colour space
 * `out_cs`, scaled by 1/denom. px->data is the caller's to free, on failure too. */
static int decode_jpeg(const uint8_t *data, size_t size, J_COLOR_SPACE out_cs, unsigned denom,
                       pixels *px, img_err *err)
{
    struct jpeg_decompress_struct d;
    stoker__jpeg_err je;
    d.err = stoker__jpeg_err_init(&je);
    if (setjmp(je.jmp)) {
        jpeg_destroy_decompress(&d);
        return img_fail(err, STOKER_E_CORRUPT, "JPEG: %s", je.msg);
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)size);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = out_cs;
    d.dct_method = JDCT_ISLOW;
    d.do_fancy_upsampling = TRUE;
    d.scale_num = 1;
    d.scale_denom = denom;
    jpeg_calc_output_dimensions(&d);
    const size_t bytes =
        image_bytes(d.output_width, d.output_height, (uint64_t)d.output_components);
    px->data = bytes ? img_malloc(bytes) : NULL;
    if (!px->data) {
        jpeg_destroy_decompress(&d);
        return img_fail(err, -ENOMEM, "JPEG: no memory for %ux%u pixels", d.output_width,
                        d.output_height);
    }
    px->w = d.output_width;
    px->h = d.output_height;
    px->ch = d.output_components;
    jpeg_start_decompress(&d);
    const size_t stride = (size_t)px->w * (size_t)px->ch;
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = px->data + (size_t)d.output_scanline * stride;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    const int damaged = stoker__jpeg_damaged(&je);
    jpeg_destroy_decompress(&d);
    RETURN_IF(damaged, err, STOKER_E_CORRUPT, "JPEG: %s", je.msg);
    return 0;
}

/* CMYK -> RGB as Pillow's Image.open(f).convert("RGB") (the decoder's own conversion,
 * decode/color.h), then RGBX packed to RGB in place: 4 -> 3 channels. */
static void cmyk_to_rgb(pixels *px)
{
    const size_t n = (size_t)px->w * px->h;
    uint8_t *p = px->data;
    stoker__cmyk_to_rgbx(p, n);
    for (size_t i = 0; i < n; i++) /* forward: 3 i + c never passes 4 i + c */
        for (int c = 0; c < 3; c++)
            p[3 * i + c] = p[4 * i + c];
    px->ch = 3;
}

/* Encodes px (1 or 3 channels) as a baseline JPEG: 4:2:0, accurate DCT, libjpeg's standard
 * tables at `quality`. *out is malloc'd by libjpeg (jpeg_mem_dest), the caller frees it on
 * every path. */
static int encode_jpeg(const pixels *px, int quality, unsigned char **out, unsigned long *out_size,
                       img_err *err)
{
    struct jpeg_compress_struct c;
    stoker__jpeg_err je;
    c.err = stoker__jpeg_err_init(&je);
    if (setjmp(je.jmp)) {
        jpeg_destroy_compress(&c);
        return img_fail(err, STOKER_E_INVALID, "JPEG encoder: %s", je.msg);
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, out, out_size);
    c.image_width = px->w;
    c.image_height = px->h;
    c.input_components = px->ch;
    c.in_color_space = px->ch == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    c.dct_method = JDCT_ISLOW;
    jpeg_start_compress(&c, TRUE);
    const size_t stride = (size_t)px->w * (size_t)px->ch;
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = px->data + (size_t)c.next_scanline * stride;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return 0;
}

/* ---- PNG ---------------------------------------------------------------------------------- */

typedef struct png_src {
    const uint8_t *data;
    size_t size, pos;
    char msg[200];
} png_src;

static void png_read_mem(png_structp png, png_bytep out, png_size_t n)
{
    png_src *s = png_get_io_ptr(png);
    if (n > s->size - s->pos)
        png_error(png, "premature end of PNG data");
    memcpy(out, s->data + s->pos, n);
    s->pos += n;
}

static void png_on_error(png_structp png, png_const_charp text)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", text);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp text)
{
    (void)png; /* the library never prints; benign chunk problems are ignored */
    (void)text;
}

/* Width, height and channels from the IHDR chunk, which must come first. */
static void png_header(const uint8_t *p, size_t size, int32_t *w, int32_t *h, int32_t *comps)
{
    if (size < 33 || memcmp(p + 12, "IHDR", 4) != 0)
        return;
    static const int8_t channels[7] = {1, 0, 3, 1, 2, 0, 4};
    *w = (int32_t)(((uint32_t)p[16] << 24 | (uint32_t)p[17] << 16 | (uint32_t)p[18] << 8 | p[19]) &
                   0x7fffffff);
    *h = (int32_t)(((uint32_t)p[20] << 24 | (uint32_t)p[21] << 16 | (uint32_t)p[22] << 8 | p[23]) &
                   0x7fffffff);
    *comps = p[25] < 7 ? channels[p[25]] : 0;
}

/* Sets up libpng's transforms so that any PNG reads as 8-bit RGB the way Pillow's
 * convert("RGB") sees it: 16-bit samples keep their high byte, palettes expand (tRNS is
 * ignored), low-depth grey scales up, grey is replicated, alpha is dropped (not composited),
 * and no gamma correction is applied. */
static void png_to_rgb8(png_structp png, png_infop info)
{
    const int type = png_get_color_type(png, info);
    const int depth = png_get_bit_depth(png, info);
    if (depth == 16)
        png_set_strip_16(png);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (type & PNG_COLOR_MASK_ALPHA)
        png_set_strip_alpha(png);
    if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
}

/* Decodes a PNG to 8-bit RGB in px (the caller frees px on every path). */
static int decode_png(const uint8_t *data, size_t size, uint64_t max_pixels, pixels *px,
                      img_err *err)
{
    png_src src = {.data = data, .size = size};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return img_fail(err, -ENOMEM, "PNG: no memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        return img_fail(err, STOKER_E_CORRUPT, "PNG: %s", src.msg);
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_read_info(png, info);
    const uint32_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int rc = check_pixels(err, w, h, max_pixels);
    if (rc == 0) {
        png_to_rgb8(png, info);
        const size_t bytes = image_bytes(w, h, 3);
        if (png_get_rowbytes(png, info) != (size_t)w * 3)
            rc = img_fail(err, STOKER_E_CORRUPT, "PNG: unexpected row size");
        else if (!bytes || !(px->data = img_malloc(bytes)) ||
                 !(px->rows = img_calloc(h, sizeof *px->rows)))
            rc = img_fail(err, -ENOMEM, "PNG: no memory for %ux%u pixels", w, h);
    }
    if (rc == 0) {
        px->w = w;
        px->h = h;
        px->ch = 3;
        for (uint32_t y = 0; y < h; y++)
            px->rows[y] = px->data + (size_t)y * w * 3;
        png_read_image(png, px->rows);
        png_read_end(png, NULL);
    }
    png_destroy_read_struct(&png, &info, NULL);
    return rc;
}

/* ---- resizing ----------------------------------------------------------------------------- */

/* Area-averaging weights of one axis: output i covers input [i*s, (i+1)*s), s = n/m; each
 * input pixel weighs by the length it overlaps. first[i], taps[i] and weight[i*maxtaps..]. */
typedef struct axis {
    uint32_t *first, *taps;
    float *weight;
    uint32_t maxtaps;
} axis;

static void axis_free(axis *a)
{
    free(a->first);
    free(a->taps);
    free(a->weight);
}

static int axis_init(axis *a, uint32_t n, uint32_t m)
{
    const double s = (double)n / m;
    a->maxtaps = (uint32_t)ceil(s) + 1;
    a->first = img_calloc(m, sizeof *a->first);
    a->taps = img_calloc(m, sizeof *a->taps);
    a->weight = img_calloc((size_t)m * a->maxtaps, sizeof *a->weight);
    if (!a->first || !a->taps || !a->weight)
        return -ENOMEM;
    for (uint32_t i = 0; i < m; i++) {
        const double x0 = i * s, x1 = (i + 1) * s;
        uint32_t j = (uint32_t)x0, t = 0;
        double sum = 0;
        a->first[i] = j;
        for (; j < n && j < x1 && t < a->maxtaps; j++, t++) {
            const double w = fmin(j + 1.0, x1) - fmax((double)j, x0);
            a->weight[(size_t)i * a->maxtaps + t] = (float)w;
            sum += w;
        }
        a->taps[i] = t;
        for (uint32_t k = 0; k < t; k++)
            a->weight[(size_t)i * a->maxtaps + k] /= (float)sum;
    }
    return 0;
}

/* Box-filter (area) resize of src to dw x dh: exact area averaging, the antialiasing
 * downscale that keeps edges and fine texture without ringing. A horizontal pass into a
 * float buffer, then a vertical pass. */
static int resize_area(const pixels *src, uint32_t dw, uint32_t dh, pixels *dst, img_err *err)
{
    int rc = 0;
    const int ch = src->ch;
    axis ax = {0}, ay = {0};
    float *tmp = NULL;
    const size_t tmp_n = image_bytes(src->h, dw, (uint64_t)ch);
    const size_t out_n = image_bytes(dw, dh, (uint64_t)ch);
    FAIL_IF(!tmp_n || !out_n || tmp_n > SIZE_MAX / sizeof(float), err, -ENOMEM,
            "resize: image too large");
    FAIL_IF(axis_init(&ax, src->w, dw) < 0 || axis_init(&ay, src->h, dh) < 0 ||
                !(tmp = img_malloc(tmp_n * sizeof *tmp)) || !(dst->data = img_malloc(out_n)),
            err, -ENOMEM, "resize: no memory for %ux%u -> %ux%u", src->w, src->h, dw, dh);
    for (uint32_t y = 0; y < src->h; y++) {
        const uint8_t *in = src->data + (size_t)y * src->w * ch;
        float *o = tmp + (size_t)y * dw * ch;
        for (uint32_t x = 0; x < dw; x++) {
            const float *w = ax.weight + (size_t)x * ax.maxtaps;
            for (int c = 0; c < ch; c++) {
                float acc = 0;
                for (uint32_t t = 0; t < ax.taps[x]; t++)
                    acc += w[t] * in[(size_t)(ax.first[x] + t) * ch + c];
                o[(size_t)x * ch + c] = acc;
            }
        }
    }
    const size_t row = (size_t)dw * ch;
    for (uint32_t y = 0; y < dh; y++) {
        const float *w = ay.weight + (size_t)y * ay.maxtaps;
        uint8_t *o = dst->data + (size_t)y * row;
        for (size_t i = 0; i < row; i++) {
            float acc = 0;
            for (uint32_t t = 0; t < ay.taps[y]; t++)
                acc += w[t] * tmp[(size_t)(ay.first[y] + t) * row + i];
            o[i] = (uint8_t)fminf(255.0f, fmaxf(0.0f, acc + 0.5f));
        }
    }
    dst->w = dw;
    dst->h = dh;
    dst->ch = ch;
fail:
    axis_free(&ax);
    axis_free(&ay);
    free(tmp);
    return rc;
}

/* The size that fits the longer side into max_side, aspect kept, rounded to nearest. */
static void fit_size(uint32_t w, uint32_t h, uint32_t max_side, uint32_t *dw, uint32_t *dh)
{
    const uint32_t longer = w > h ? w : h;
    const double s = (double)max_side / longer;
    *dw = w >= h ? max_side : (uint32_t)fmax(1.0, floor(w * s + 0.5));
    *dh = h > w ? max_side : (uint32_t)fmax(1.0, floor(h * s + 0.5));
}

/* The largest libjpeg scale 1/denom whose output is still at least dw x dh, so a big photo
 * is reduced mostly by the (cheap, area-like) DCT scaling and finished by resize_area. */
static unsigned pick_denom(uint32_t w, uint32_t h, uint32_t dw, uint32_t dh)
{
    unsigned denom = 1;
    while (denom < 8 && (w + 2 * denom - 1) / (2 * denom) >= 2 * (uint64_t)dw &&
           (h + 2 * denom - 1) / (2 * denom) >= 2 * (uint64_t)dh)
        denom *= 2;
    return denom;
}

/* ---- entry points ------------------------------------------------------------------------ */

/* Kind of the bytes, with a message for what is not JPEG. */
static int classify(const void *data, size_t size, int32_t *kind, img_err *err)
{
    *kind = PACK_IMAGE_UNKNOWN;
    RETURN_IF(size == 0, err, STOKER_E_FORMAT, "empty (0 bytes), not an image");
    if (stoker__is_jpeg(data, size)) {
        *kind = PACK_IMAGE_JPEG;
        return 0;
    }
    if (stoker__is_png(data, size)) {
        *kind = PACK_IMAGE_PNG;
        return 0;
    }
    return img_fail(err, STOKER_E_FORMAT, "not a JPEG or PNG image (starts %02x %02x)",
                    ((const uint8_t *)data)[0], size > 1 ? ((const uint8_t *)data)[1] : 0);
}

int pack_image_inspect(const void *data, size_t size, uint32_t flags, uint64_t max_pixels,
                       int32_t *kind, int32_t *width, int32_t *height, int32_t *components,
                       char *msg, size_t msgcap)
{
    img_err err = {0};
    int32_t k = 0, w = 0, h = 0, c = 0;
    int rc = 0;
    if (!data && size)
        rc = img_fail(&err, STOKER_E_INVALID, "NULL data");
    else
        rc = classify(data, size, &k, &err);
    if (rc == 0 && k == PACK_IMAGE_PNG) {
        png_header(data, size, &w, &h, &c);
        rc = img_fail(&err, STOKER_E_FORMAT, "PNG, not JPEG");
    } else if (rc == 0) {
        jpeg_info info = {0};
        rc = inspect_jpeg(data, size, flags, max_pixels, &info, &err);
        w = (int32_t)info.w;
        h = (int32_t)info.h;
        c = info.comps;
    }
    if (kind)
        *kind = k;
    if (width)
        *width = w;
    if (height)
        *height = h;
    if (components)
        *components = c;
    return finish(&err, rc, msg, msgcap);
}

/* Converts CMYK, resizes to dw x dh (0: keep), and encodes px into *out. */
static int finish_transcode(pixels *px, uint32_t dw, uint32_t dh, int quality, void **out,
                            size_t *out_size, img_err *err)
{
    if (px->ch == 4)
        cmyk_to_rgb(px);
    if (dw && (dw != px->w || dh != px->h)) {
        pixels small = {0};
        const int rc = resize_area(px, dw, dh, &small, err);
        pixels_free(px);
        *px = small;
        if (rc < 0)
            return rc;
    }
    unsigned char *buf = NULL;
    unsigned long n = 0;
    const int rc = encode_jpeg(px, quality, &buf, &n, err);
    if (rc < 0) {
        free(buf); /* jpeg_mem_dest's buffer comes from malloc */
        return rc;
    }
    *out = buf;
    *out_size = n;
    return 0;
}

static int transcode_jpeg(const uint8_t *data, size_t size, uint32_t flags, int32_t max_side,
                          int quality, uint64_t max_pixels, void **out, size_t *out_size,
                          img_err *err)
{
    jpeg_info info = {0};
    int rc = inspect_jpeg(data, size, 0, max_pixels, &info, err);
    if (rc < 0)
        return rc;
    const int cmyk = info.cs == JCS_CMYK || info.cs == JCS_YCCK;
    const int gray = info.comps == 1;
    const int to_rgb = (flags & PACK_IMAGE_TO_RGB) && (cmyk || gray);
    const int shrink = max_side > 0 && (info.w > (uint32_t)max_side || info.h > (uint32_t)max_side);
    if (!to_rgb && !shrink)
        return 0; /* store as is */
    unsigned denom = 1;
    uint32_t dw = 0, dh = 0;
    if (shrink) {
        fit_size(info.w, info.h, (uint32_t)max_side, &dw, &dh);
        denom = pick_denom(info.w, info.h, dw, dh);
    }
    /* CMYK is always converted when re-encoding: a CMYK JPEG would need the same
     * conversion at load time anyway. Grey stays grey unless RGB was asked for. */
    const J_COLOR_SPACE out_cs = cmyk ? JCS_CMYK : (gray && !to_rgb) ? JCS_GRAYSCALE : JCS_RGB;
    pixels px = {0};
    rc = decode_jpeg(data, size, out_cs, denom, &px, err);
    if (rc == 0)
        rc = finish_transcode(&px, dw, dh, quality, out, out_size, err);
    pixels_free(&px);
    return rc;
}

int pack_image_transcode(const void *data, size_t size, uint32_t flags, int32_t max_side,
                         int32_t quality, uint64_t max_pixels, void **out, size_t *out_size,
                         char *msg, size_t msgcap)
{
    img_err err = {0};
    int32_t kind = 0;
    int rc = 0;
    if (out)
        *out = NULL;
    if (out_size)
        *out_size = 0;
    FAIL_IF(!out || !out_size || (!data && size), &err, STOKER_E_INVALID, "NULL argument");
    FAIL_IF(quality < 0 || quality > 100, &err, STOKER_E_INVALID, "quality %d is not in 1..100",
            quality);
    FAIL_IF(max_side < 0, &err, STOKER_E_INVALID, "max_side %d < 0", max_side);
    const int q = quality ? quality : DEFAULT_QUALITY;
    FORWARD(classify(data, size, &kind, &err));
    if (kind == PACK_IMAGE_JPEG) {
        rc = transcode_jpeg(data, size, flags, max_side, q, max_pixels, out, out_size, &err);
    } else {
        FAIL_IF(!(flags & PACK_IMAGE_TO_RGB), &err, STOKER_E_FORMAT,
                "PNG, not JPEG (converting needs PACK_IMAGE_TO_RGB)");
        pixels px = {0};
        rc = decode_png(data, size, max_pixels, &px, &err);
        uint32_t dw = 0, dh = 0;
        if (rc == 0 && max_side > 0 && (px.w > (uint32_t)max_side || px.h > (uint32_t)max_side))
            fit_size(px.w, px.h, (uint32_t)max_side, &dw, &dh);
        if (rc == 0)
            rc = finish_transcode(&px, dw, dh, q, out, out_size, &err);
        pixels_free(&px);
    }
fail:
    return finish(&err, rc, msg, msgcap);
}

/* src/decode/png.c reports through stoker__fail, which lives in the library's common layer,
 * not exported: stoker-pack formats the same message here (a PNG's message holds no URL, so
 * there is nothing to redact). */
int stoker__fail(stoker__err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int pack_png_check(const void *data, size_t size, int mask, uint64_t max_pixels, int32_t *width,
                   int32_t *height, char *msg, size_t msgcap)
{
    img_err e = {0};
    stoker__err err = {0};
    stoker__png_info info = {0};
    const stoker__png_mode mode = mask ? STOKER__PNG_MASK : STOKER__PNG_RGB;
    const uint64_t limit = max_pixels ? max_pixels : DEFAULT_MAX_PIXELS;
    int rc = stoker__png_info_read(data, size, &info, &err);
    if (rc == 0 && (uint64_t)info.width * (uint64_t)info.height > limit)
        rc = stoker__fail(&err, STOKER_E_LIMIT, "PNG of %dx%d pixels: more than %llu", info.width,
                          info.height, (unsigned long long)limit);
    uint8_t *out = NULL;
    const uint64_t need = rc == 0 ? stoker__png_out_size(&info, mode) : 0;
    if (rc == 0 && !(out = img_malloc(need ? (size_t)need : 1)))
        rc = stoker__fail(&err, -ENOMEM, "PNG: out of memory for %llu bytes",
                          (unsigned long long)need);
    if (rc == 0)
        rc = stoker__png_decode(data, size, mode, limit, out, (size_t)need, &info, &err);
    free(out);
    if (rc == 0) {
        if (width)
            *width = info.width;
        if (height)
            *height = info.height;
    } else {
        snprintf(e.msg, sizeof e.msg, "%s", err.msg);
    }
    return finish(&e, rc, msg, msgcap);
}
