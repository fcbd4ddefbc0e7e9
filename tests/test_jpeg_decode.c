/* SPDX-License-Identifier: Apache-2.0 */
/* Region decoding: for many random crop boxes, decoding only the box (jpeg_crop_scanline +
 * jpeg_skip_scanlines) gives exactly the pixels of a full decode with the same IDCT, in every
 * kind of JPEG (4:2:0, 4:2:2, 4:4:4, grayscale, progressive, CMYK with and without the
 * Adobe marker, YCCK) and odd sizes; the tolerance is zero and asserted as such. Bad input
 * gives STOKER_E_CORRUPT with libjpeg's message, or STOKER_E_LIMIT before any allocation;
 * the pipeline entry point agrees with the RGB entry point fed the full decode. */
#include "testutil.h"

#include "jpegutil.h"

#include "decode/color.h"
#include "decode/jpeg.h"
#include "transform/transform.h"

static const t_jpeg_kind KINDS[] = {
    {"4:2:0", 3, 2, 2, 0, 0, 0},
    {"4:2:2", 3, 2, 1, 0, 0, 0},
    {"4:4:4", 3, 1, 1, 0, 0, 0},
    {"gray", 1, 1, 1, 0, 0, 0},
    {"progressive 4:2:0", 3, 2, 2, 1, 0, 0},
    {"progressive gray", 1, 1, 1, 1, 0, 0},
    {"CMYK Adobe", 4, 1, 1, 0, 0, 1},
    {"CMYK plain", 4, 1, 1, 0, 0, 0},
    {"YCCK", 4, 2, 2, 0, 1, 1},
};
#define NKINDS (int)(sizeof KINDS / sizeof KINDS[0])

/* Collects delivered rows into a full-size RGBX image. */
typedef struct collect {
    stoker__jpeg_region want;
    int32_t scale; /* the reduction asked for (0: none) */
    int32_t w, h;  /* the image as decoded */
    uint8_t *img;  /* w * h * 4, 0 where nothing was delivered */
    int32_t rows, bad_x;
    /* group > 0: rows are decoded into a ring of `group` row buffers, row y into buffer
     * (y - want.y0) % group, as the pipeline stages them; a run that crossed a group would
     * overwrite a row before it was delivered and show as wrong pixels */
    int32_t group, asked, bad_run;
    uint8_t *ring;
    size_t ring_row; /* bytes */
} collect;

static int c_region(void *ctx, int32_t w, int32_t h, stoker__jpeg_region *r)
{
    collect *c = ctx;
    const int32_t f = c->scale ? c->scale : 1;
    c->w = (w + f - 1) / f;
    c->h = (h + f - 1) / f;
    if (!c->img)
        c->img = calloc((size_t)c->w * c->h, 4);
    if (c->want.x1 == 0) /* whole image */
        c->want = (stoker__jpeg_region){0, 0, c->w, c->h, 0, 0};
    *r = c->want;
    r->scale = c->scale;
    return 0;
}

static int c_row(void *ctx, int32_t y, const uint8_t *rgbx, int32_t x, int32_t n)
{
    collect *c = ctx;
    if (x > c->want.x0 || x + n < c->want.x1 || y < c->want.y0 || y >= c->want.y1)
        c->bad_x++;
    memcpy(c->img + ((size_t)y * c->w + x) * 4, rgbx, (size_t)n * 4);
    c->rows++;
    return 0;
}

static uint8_t *c_buffer(void *ctx, int32_t y, int32_t n)
{
    collect *c = ctx;
    const size_t need = ((size_t)n + (size_t)c->want.pad) * 4;
    if (!c->ring) {
        c->ring_row = need;
        c->ring = malloc(need * (size_t)c->group);
    }
    /* no row skipped or asked for after its delivery (a row not delivered in one call
     * is asked for again in the next); rows asked and not yet delivered in one group */
    const int32_t i = y - c->want.y0;
    if (need > c->ring_row || i > c->asked || i < c->rows || i / c->group != c->rows / c->group)
        c->bad_run++;
    c->asked = i + 1 > c->asked ? i + 1 : c->asked;
    return c->ring + (size_t)((y - c->want.y0) % c->group) * c->ring_row;
}

static int decode(stoker__jpeg_dec *d, const uint8_t *data, size_t size, int32_t dct, collect *c,
                  stoker__err *err)
{
    const stoker__jpeg_sink sink = {c_region, c_row, c, c->group ? c_buffer : NULL, c->group};
    return stoker__jpeg_decode(d, data, size, dct, UINT64_C(1) << 28, &sink, err);
}

/* Plain libjpeg, whole image shrunk by `scale` in the IDCT, as RGB (or CMYK converted the
 * Pillow way) for reference. */
static uint8_t *reference_decode(const uint8_t *data, size_t size, int32_t scale, int32_t *w,
                                 int32_t *h)
{
    struct jpeg_decompress_struct c;
    t_jerr je;
    t_jpeg_read_header(&c, &je, data, size);
    const int cmyk = c.num_components == 4;
    c.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    c.scale_num = 1;
    c.scale_denom = (unsigned)scale;
    jpeg_start_decompress(&c);
    *w = (int32_t)c.output_width;
    *h = (int32_t)c.output_height;
    uint8_t *px = malloc((size_t)*w * *h * 4), *row = malloc((size_t)*w * 4);
    while (c.output_scanline < c.output_height) {
        uint8_t *dst = px + (size_t)c.output_scanline * *w * 4;
        jpeg_read_scanlines(&c, &row, 1);
        for (int32_t x = 0; x < *w; x++) {
            for (int k = 0; k < 3; k++)
                dst[4 * x + k] = cmyk ? row[4 * x + k] : row[3 * x + k];
            dst[4 * x + 3] = cmyk ? row[4 * x + 3] : 255;
        }
        if (cmyk)
            stoker__cmyk_to_rgbx(dst, (size_t)*w);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    free(row);
    return px;
}

/* Regions of one image, decoded at a reduction of `scale` (1: none), against the whole
 * image decoded alike. */
static void check_kind(stoker__jpeg_dec *d, const t_jpeg_kind *k, int32_t iw, int32_t ih,
                       int32_t dct, int32_t scale)
{
    size_t size;
    uint8_t *jpg = t_make_jpeg(k, iw, ih, 85, (uint64_t)iw * 31 + ih, &size);
    const int32_t w = (iw + scale - 1) / scale, h = (ih + scale - 1) / scale;
    stoker__err err;
    collect full = {.scale = scale};
    T_OK(decode(d, jpg, size, dct, &full, &err));
    T_EQ_INT(full.w, w);
    T_EQ_INT(full.rows, h);
    T_EQ_INT(full.bad_x, 0);
    if (dct == STOKER_DCT_ISLOW) { /* the whole decode is plain libjpeg's */
        int32_t rw, rh;
        uint8_t *ref = reference_decode(jpg, size, scale, &rw, &rh);
        T_EQ_INT(rw, w);
        T_EQ_INT(rh, h);
        for (size_t i = 0; i < (size_t)w * h * 4; i++)
            if (i % 4 != 3 && ref[i] != full.img[i])
                T_FAIL("%s %dx%d 1/%d: full decode differs from libjpeg at %zu", k->name, (int)iw,
                       (int)ih, (int)scale, i);
        free(ref);
    }
    uint64_t seed = (uint64_t)w * h;
    for (int t = 0; t < 60; t++) {
        collect part = {.scale = scale};
        const int32_t x0 = (int32_t)(t_rand(&seed) % (uint64_t)w);
        const int32_t y0 = (int32_t)(t_rand(&seed) % (uint64_t)h);
        const int32_t x1 = x0 + 1 + (int32_t)(t_rand(&seed) % (uint64_t)(w - x0));
        const int32_t y1 = y0 + 1 + (int32_t)(t_rand(&seed) % (uint64_t)(h - y0));
        part.want = (stoker__jpeg_region){x0, y0, x1, y1, (int32_t)(t % 9), scale};
        part.group = t % 2 ? 1 + t % 9 : 0; /* 0: the decoder's own row; 1..9 rows staged */
        T_OK(decode(d, jpg, size, dct, &part, &err));
        T_EQ_INT(part.rows, y1 - y0);
        T_EQ_INT(part.bad_x, 0);
        T_EQ_INT(part.bad_run, 0);
        for (int32_t y = y0; y < y1; y++)
            for (int32_t x = x0; x < x1; x++)
                for (int c = 0; c < 3; c++) {
                    const size_t i = ((size_t)y * w + x) * 4 + c;
                    if (part.img[i] != full.img[i])
                        T_FAIL("%s %dx%d 1/%d dct %d: crop [%d,%d)x[%d,%d) pixel (%d,%d) ch %d: "
                               "%u, full decode %u",
                               k->name, (int)iw, (int)ih, (int)scale, (int)dct, (int)x0, (int)x1,
                               (int)y0, (int)y1, (int)x, (int)y, c, part.img[i], full.img[i]);
                }
        free(part.img);
        free(part.ring);
    }
    free(full.img);
    free(jpg);
}

/* A JPEG whose SOF claims w x h (patched into a small valid one). */
static uint8_t *patch_sof(const uint8_t *jpg, size_t size, int w, int h)
{
    uint8_t *p = malloc(size);
    memcpy(p, jpg, size);
    for (size_t i = 2; i + 9 < size; i++)
        if (p[i] == 0xFF && (p[i + 1] == 0xC0 || p[i + 1] == 0xC2)) {
            p[i + 5] = (uint8_t)(h >> 8), p[i + 6] = (uint8_t)h;
            p[i + 7] = (uint8_t)(w >> 8), p[i + 8] = (uint8_t)w;
            return p;
        }
    T_FAIL("no SOF marker");
}

static void check_bad_input(stoker__jpeg_dec *d)
{
    static const t_jpeg_kind k420 = {"4:2:0", 3, 2, 2, 0, 0, 0};
    size_t size;
    uint8_t *jpg = t_make_jpeg(&k420, 333, 257, 90, 5, &size);
    stoker__err err;
    collect c = {0};

    T_EQ_RC(decode(d, jpg, 0, STOKER_DCT_ISLOW, &c, &err), STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "not a JPEG");
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13};
    T_EQ_RC(decode(d, png, sizeof png, STOKER_DCT_ISLOW, &c, &err), STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "PNG");
    static const char text[] = "this is not an image at all, just some text";
    T_EQ_RC(decode(d, (const uint8_t *)text, sizeof text, STOKER_DCT_ISLOW, &c, &err),
            STOKER_E_CORRUPT);

    /* truncated: libjpeg warns "Premature end of JPEG file" and fills in: corrupt */
    memset(&c, 0, sizeof c);
    T_EQ_RC(decode(d, jpg, size / 2, STOKER_DCT_ISLOW, &c, &err), STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "Premature end");
    free(c.img);
    /* cut inside the header: libjpeg's error, through the longjmp */
    memset(&c, 0, sizeof c);
    T_EQ_RC(decode(d, jpg, 40, STOKER_DCT_ISLOW, &c, &err), STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "JPEG: ");
    /* damaged entropy data: a warning (or an error), either way corrupt */
    uint8_t *bad = malloc(size);
    memcpy(bad, jpg, size);
    for (size_t i = size / 3; i < size / 3 + 64; i++)
        bad[i] = (uint8_t)(i * 7);
    memset(&c, 0, sizeof c);
    T_EQ_RC(decode(d, bad, size, STOKER_DCT_ISLOW, &c, &err), STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "JPEG: ");
    printf("damaged data: %s\n", err.msg);
    free(c.img);
    free(bad);

    /* 60000 x 60000 declared: the limit, before any allocation of ours */
    uint8_t *huge = patch_sof(jpg, size, 60000, 60000);
    const stoker__jpeg_sink sink = {c_region, c_row, &c, NULL, 0};
    stoker__alloc_fail_at(0);
    T_EQ_RC(stoker__jpeg_decode(d, huge, size, STOKER_DCT_ISLOW, UINT64_C(1) << 28, &sink, &err),
            STOKER_E_LIMIT);
    T_EQ_INT(stoker__alloc_fail_at(0), 0);
    T_CONTAINS(err.msg, "60000x60000");
    free(huge);

    /* the decoder is still usable after all that */
    memset(&c, 0, sizeof c);
    T_OK(decode(d, jpg, size, STOKER_DCT_ISLOW, &c, &err));
    T_EQ_INT(c.rows, 257);
    free(c.img);
    free(jpg);
}

/* stoker__xform_jpeg equals stoker__xform_rgb on the full decode, for every transform:
 * region decoding loses nothing. With DCT reduction (the train default), samples whose crop
 * is twice the output are made from the image decoded at 1/2: close to those, not equal
 * (the Python reference tests check them against Pillow exactly). Also: corrupt data and
 * allocation failures. */
static void check_pipeline(stoker__jpeg_dec *d, const t_jpeg_kind *k, int32_t w, int32_t h)
{
    size_t size;
    uint8_t *jpg = t_make_jpeg(k, w, h, 90, 99, &size);
    stoker__err err;
    collect full = {0};
    T_OK(decode(d, jpg, size, STOKER_DCT_ISLOW, &full, &err));
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (size_t i = 0; i < (size_t)w * h; i++)
        memcpy(rgb + 3 * i, full.img + 4 * i, 3);
    stoker__xform_scratch *s;
    T_OK(stoker__xform_scratch_create(&s));
    int reduced = 0;
    for (int t = STOKER_TRANSFORM_TRAIN; t <= STOKER_TRANSFORM_RESIZE; t++) {
        stoker__xform_params p = {.transform = t,
                                  .size = 64,
                                  .resize = 80,
                                  .dtype = STOKER_DTYPE_UINT8,
                                  .dct_scale = STOKER_DCT_SCALE_NEVER,
                                  .mean = {0.5f, 0.5f, 0.5f},
                                  .std = {0.25f, 0.25f, 0.25f}};
        T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
        stoker__xform_params reducing = p;
        reducing.dct_scale = STOKER_DCT_SCALE_ALWAYS;
        const size_t bytes = stoker__xform_sample_bytes(&p);
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        for (int64_t id = 0; id < 40; id++) {
            T_OK(stoker__xform_jpeg(s, &p, 3, 0, id, jpg, size, a, &err));
            T_OK(stoker__xform_rgb(s, &p, 3, 0, id, rgb, w, h, (size_t)w * 3, b, &err));
            if (memcmp(a, b, bytes) != 0)
                T_FAIL("%s transform %d id %lld: JPEG path differs from RGB path", k->name, t,
                       (long long)id);
            const uint64_t before = stoker__xform_scratch_stats(s)->reduced;
            T_OK(stoker__xform_jpeg(s, &reducing, 3, 0, id, jpg, size, a, &err));
            if (stoker__xform_scratch_stats(s)->reduced == before)
                continue;
            reduced++;
            uint64_t sum = 0;
            for (size_t i = 0; i < bytes; i++)
                sum += (uint64_t)abs((int)a[i] - (int)b[i]);
            /* this image is mostly noise, where two low-passes differ most: 3.4..8.9 */
            if (sum == 0 || sum > 12 * bytes)
                T_FAIL("%s transform %d id %lld: reduced sample off by %.2f on average", k->name, t,
                       (long long)id, (double)sum / (double)bytes);
        }
        free(a), free(b);
    }
    const stoker__xform_stats *st = stoker__xform_scratch_stats(s);
    T_EQ_INT(st->samples, 240 + 120);
    T_EQ_INT(st->reduced, (uint64_t)reduced);
    T_ASSERT(reduced >= 41); /* eval and resize (211x157 to 64: 1/2) and some train crops */
    T_ASSERT(st->decode_ns > 0 && st->resize_ns > 0 && st->normalize_ns > 0);

    /* corrupt through the pipeline; the limit; then allocation failures leak nothing */
    stoker__xform_params p = {.transform = STOKER_TRANSFORM_TRAIN,
                              .size = 32,
                              .mean = {0.5f, 0.5f, 0.5f},
                              .std = {0.25f, 0.25f, 0.25f}};
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    uint8_t *out = malloc(stoker__xform_sample_bytes(&p));
    T_EQ_RC(stoker__xform_jpeg(s, &p, 0, 0, 0, jpg, size / 3, out, &err), STOKER_E_CORRUPT);
    p.max_pixels = (uint64_t)w * h - 1;
    T_EQ_RC(stoker__xform_jpeg(s, &p, 0, 0, 0, jpg, size, out, &err), STOKER_E_LIMIT);
    p.max_pixels = 0;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    stoker__xform_scratch_destroy(s);
    for (uint64_t n = 1; n < 40; n++) {
        stoker__xform_scratch *f = NULL;
        stoker__alloc_fail_at(n);
        int rc = stoker__xform_scratch_create(&f);
        if (rc == 0)
            rc = stoker__xform_jpeg(f, &p, 0, 0, 1, jpg, size, out, &err);
        stoker__alloc_fail_at(0);
        stoker__xform_scratch_destroy(f);
        if (rc == 0)
            break;
        T_EQ_RC(rc, -ENOMEM);
    }
    free(out);
    free(rgb);
    free(full.img);
    free(jpg);
}

/* The JPEG without its DHT segments: it relies on tables it does not define. */
static size_t strip_dht(uint8_t *p, size_t n)
{
    size_t at = 2, out = 2;
    while (at + 4 <= n && p[at] == 0xFF && p[at + 1] != 0xDA) {
        const size_t len = 2 + ((size_t)p[at + 2] << 8 | p[at + 3]);
        if (p[at + 1] != 0xC4)
            memmove(p + out, p + at, len), out += len;
        at += len;
    }
    memmove(p + out, p + at, n - at); /* the scan and what follows */
    return out + n - at;
}

/* A decoder's result never depends on the images it decoded before. libjpeg keeps the tables
 * an image defines for the next one; an image lacking its Huffman tables (damage, or a
 * Motion-JPEG frame) must decode as it does on a fresh decoder (which uses the standard
 * tables, as Pillow's does), not with the previous image's optimised ones. */
static void check_no_history(void)
{
    const t_jpeg_kind k = {"4:2:0", 3, 2, 2, 0, 0, 0};
    size_t na, nb;
    uint8_t *a = t_make_jpeg_huff(&k, 96, 64, 90, 7, 1, &na); /* its own tables */
    uint8_t *b = t_make_jpeg(&k, 96, 64, 90, 8, &nb);
    nb = strip_dht(b, nb);
    stoker__xform_params p = {.transform = STOKER_TRANSFORM_EVAL,
                              .size = 32,
                              .dtype = STOKER_DTYPE_UINT8,
                              .mean = {0.5f, 0.5f, 0.5f},
                              .std = {0.25f, 0.25f, 0.25f}};
    stoker__err err = {0}, err2 = {0};
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    const size_t bytes = stoker__xform_sample_bytes(&p);
    uint8_t *fresh = malloc(bytes), *after = malloc(bytes);
    stoker__xform_scratch *s1 = NULL, *s2 = NULL;
    T_OK(stoker__xform_scratch_create(&s1));
    T_OK(stoker__xform_scratch_create(&s2));
    const int rc1 = stoker__xform_jpeg(s1, &p, 0, 0, 1, b, nb, fresh, &err);
    T_OK(stoker__xform_jpeg(s2, &p, 0, 0, 0, a, na, after, &err2));
    const int rc2 = stoker__xform_jpeg(s2, &p, 0, 0, 1, b, nb, after, &err2);
    if (rc1 != rc2)
        T_FAIL("status %d fresh (%s), %d after another image (%s)", rc1, err.msg, rc2, err2.msg);
    T_ASSERT(rc1 != 0 || memcmp(fresh, after, bytes) == 0);
    stoker__xform_scratch_destroy(s1);
    stoker__xform_scratch_destroy(s2);
    free(fresh), free(after), free(a), free(b);
}

int main(void)
{
    check_no_history();
    stoker__jpeg_dec *d;
    T_OK(stoker__jpeg_dec_create(&d));
    static const int32_t sizes[][2] = {{333, 257}, {64, 48}, {17, 9}, {1, 1}, {130, 37}};
    for (int k = 0; k < NKINDS; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            for (int32_t scale = 1; scale <= 8; scale *= 2)
                check_kind(d, &KINDS[k], sizes[s][0], sizes[s][1], STOKER_DCT_ISLOW, scale);
            check_kind(d, &KINDS[k], sizes[s][0], sizes[s][1], STOKER_DCT_IFAST, 1);
            check_kind(d, &KINDS[k], sizes[s][0], sizes[s][1], STOKER_DCT_IFAST, 2);
        }
    printf("region decoding equals full decoding in %d kinds, at 1/1, 1/2, 1/4 and 1/8\n", NKINDS);
    check_bad_input(d);
    for (int k = 0; k < NKINDS; k++)
        check_pipeline(d, &KINDS[k], 211, 157);
    stoker__jpeg_dec_destroy(d);
    return 0;
}
