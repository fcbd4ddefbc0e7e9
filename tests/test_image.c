/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-pack's pack_image_inspect / pack_image_transcode (tools/pack/image.h) on JPEGs and
 * PNGs made here with libjpeg and libpng: good, truncated, corrupted, not-an-image,
 * oversized, CMYK, grey, PNG, large. */
#include "image.h"
#include "testutil.h"

#include <jpeglib.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>

typedef struct buf {
    unsigned char *data;
    size_t size;
} buf;

/* A smooth gradient with a little noise, so JPEG has real entropy data to damage. */
static unsigned char *synth(int w, int h, int ch, uint64_t seed)
{
    unsigned char *p = malloc((size_t)w * h * ch);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                const int v = x * 150 / w + y * 60 / h + c * 20; /* no wrap: smooth */
                const int n = (int)(t_rand(&seed) % 9) - 4;
                p[((size_t)y * w + x) * ch + c] = (unsigned char)(v + n < 0     ? 0
                                                                  : v + n > 255 ? 255
                                                                                : v + n);
            }
    return p;
}

/* coding: 0 baseline Huffman, 1 progressive, 2 arithmetic. */
static buf encode(const unsigned char *px, int w, int h, int ch, J_COLOR_SPACE cs, int quality,
                  int coding)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &out, &n);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = ch;
    c.in_color_space = cs;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    if (coding == 1)
        jpeg_simple_progression(&c);
    if (coding == 2)
        c.arith_code = TRUE; /* arithmetic coding: another entropy decoder to exercise */
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)px + (size_t)c.next_scanline * w * ch;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return (buf){out, n};
}

static buf make_jpeg(int w, int h, int ch, J_COLOR_SPACE cs, int coding)
{
    unsigned char *px = synth(w, h, ch, (uint64_t)w * 31 + (uint64_t)h);
    buf b = encode(px, w, h, ch, cs, 90, coding);
    free(px);
    return b;
}

/* Decodes with libjpeg into `cs` (RGB or CMYK); dims through w/h/ch. */
static unsigned char *decode(const buf *b, J_COLOR_SPACE cs, int *w, int *h, int *ch)
{
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr e;
    d.err = jpeg_std_error(&e);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, b->data, (unsigned long)b->size);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = cs;
    jpeg_start_decompress(&d);
    *w = (int)d.output_width;
    *h = (int)d.output_height;
    *ch = d.output_components;
    unsigned char *px = malloc((size_t)*w * *h * *ch);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = px + (size_t)d.output_scanline * *w * *ch;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return px;
}

typedef struct png_out {
    buf b;
    size_t cap;
} png_out;

static void png_write_mem(png_structp png, png_bytep data, png_size_t n)
{
    png_out *o = png_get_io_ptr(png);
    if (o->b.size + n > o->cap) {
        o->cap = (o->b.size + n) * 2;
        o->b.data = realloc(o->b.data, o->cap);
    }
    memcpy(o->b.data + o->b.size, data, n);
    o->b.size += n;
}

static void png_flush_mem(png_structp png)
{
    (void)png;
}

/* An 8-bit RGBA PNG of `px` (w x h x 4). */
static buf make_png(const unsigned char *px, int w, int h)
{
    png_out o = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png)))
        T_FAIL("libpng write failed");
    png_set_write_fn(png, &o, png_write_mem, png_flush_mem);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB_ALPHA,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++)
        png_write_row(png, (png_const_bytep)px + (size_t)y * w * 4);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return o.b;
}

static double mae(const unsigned char *a, const unsigned char *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += abs((int)a[i] - (int)b[i]);
    return s / (double)n;
}

/* What a correct conversion gives after the same re-encoding (q100, 4:2:0): comparing with
 * this isolates the conversion from JPEG's own loss, so the tolerance can be 1 level. */
static unsigned char *reencoded(const unsigned char *rgb, int w, int h)
{
    buf b = encode(rgb, w, h, 3, JCS_RGB, 100, 0);
    int rw, rh, rch;
    unsigned char *px = decode(&b, JCS_RGB, &rw, &rh, &rch);
    free(b.data);
    return px;
}

static void test_inspect_good(void)
{
    int32_t kind, w, h, c;
    char msg[256];
    for (int coding = 0; coding <= 2; coding++) {
        buf j = make_jpeg(97, 61, 3, JCS_RGB, coding);
        T_OK(pack_image_inspect(j.data, j.size, 0, 0, &kind, &w, &h, &c, msg, sizeof msg));
        T_EQ_INT(kind, PACK_IMAGE_JPEG);
        T_EQ_INT(w, 97);
        T_EQ_INT(h, 61);
        T_EQ_INT(c, 3);
        T_OK(pack_image_inspect(j.data, j.size, PACK_IMAGE_DECODE, 0, &kind, &w, &h, &c, msg,
                                sizeof msg));
        T_EQ_STR(msg, "");
        free(j.data);
    }
    buf g = make_jpeg(40, 30, 1, JCS_GRAYSCALE, 0);
    T_OK(pack_image_inspect(g.data, g.size, PACK_IMAGE_DECODE, 0, NULL, NULL, NULL, &c, NULL, 0));
    T_EQ_INT(c, 1);
    free(g.data);
}

static void test_inspect_damaged(void)
{
    char msg[256];
    int32_t kind;
    for (int coding = 0; coding <= 2; coding++) {
        buf j = make_jpeg(256, 192, 3, JCS_RGB, coding);
        /* Truncated: the header still reads; only a full decode notices. */
        const size_t half = j.size / 2;
        T_OK(pack_image_inspect(j.data, half, 0, 0, &kind, NULL, NULL, NULL, msg, sizeof msg));
        T_EQ_RC(pack_image_inspect(j.data, half, PACK_IMAGE_DECODE, 0, &kind, NULL, NULL, NULL, msg,
                                   sizeof msg),
                STOKER_E_CORRUPT);
        T_CONTAINS(msg, "Premature end");
        /* A marker in the middle of the entropy-coded data. */
        unsigned char *bad = malloc(j.size);
        memcpy(bad, j.data, j.size);
        bad[j.size * 3 / 5] = 0xFF;
        bad[j.size * 3 / 5 + 1] = 0xD4;
        T_EQ_RC(pack_image_inspect(bad, j.size, PACK_IMAGE_DECODE, 0, NULL, NULL, NULL, NULL, msg,
                                   sizeof msg),
                STOKER_E_CORRUPT);
        T_CONTAINS(msg, "Corrupt JPEG data");
        /* Damaged data makes transcoding fail too. */
        void *out = NULL;
        size_t n = 0;
        T_EQ_RC(pack_image_transcode(j.data, half, 0, 64, 90, 0, &out, &n, msg, sizeof msg),
                STOKER_E_CORRUPT);
        T_ASSERT(out == NULL);
        free(bad);
        free(j.data);
    }
}

static void test_not_jpeg(void)
{
    char msg[256];
    int32_t kind = -1, w = 0, h = 0, c = 0;
    unsigned char *px = synth(33, 17, 4, 1);
    buf p = make_png(px, 33, 17);
    T_EQ_RC(pack_image_inspect(p.data, p.size, PACK_IMAGE_DECODE, 0, &kind, &w, &h, &c, msg,
                               sizeof msg),
            STOKER_E_FORMAT);
    T_EQ_INT(kind, PACK_IMAGE_PNG);
    T_EQ_INT(w, 33);
    T_EQ_INT(h, 17);
    T_EQ_INT(c, 4);
    T_CONTAINS(msg, "PNG");
    const char text[] = "hello, this is not an image\n";
    T_EQ_RC(
        pack_image_inspect(text, sizeof text - 1, 0, 0, &kind, NULL, NULL, NULL, msg, sizeof msg),
        STOKER_E_FORMAT);
    T_EQ_INT(kind, PACK_IMAGE_UNKNOWN);
    T_EQ_RC(pack_image_inspect("", 0, 0, 0, &kind, NULL, NULL, NULL, msg, sizeof msg),
            STOKER_E_FORMAT);
    T_CONTAINS(msg, "empty");
    /* Starts like a JPEG, then nothing. */
    const unsigned char soi[] = {0xFF, 0xD8, 0xFF, 0xE0};
    T_EQ_RC(pack_image_inspect(soi, sizeof soi, 0, 0, &kind, NULL, NULL, NULL, msg, sizeof msg),
            STOKER_E_CORRUPT);
    void *out = NULL;
    size_t n = 0;
    T_EQ_RC(pack_image_transcode(p.data, p.size, 0, 0, 0, 0, &out, &n, msg, sizeof msg),
            STOKER_E_FORMAT);
    T_EQ_RC(pack_image_transcode(text, sizeof text - 1, PACK_IMAGE_TO_RGB, 0, 0, 0, &out, &n, msg,
                                 sizeof msg),
            STOKER_E_FORMAT);
    free(px);
    free(p.data);
}

/* A JPEG whose SOF declares 65000 x 65000: refused after the header, nothing huge allocated. */
static void test_limit(void)
{
    buf j = make_jpeg(64, 48, 3, JCS_RGB, 0);
    size_t sof = 0;
    for (size_t i = 2; i + 9 < j.size; i++)
        if (j.data[i] == 0xFF && (j.data[i + 1] == 0xC0 || j.data[i + 1] == 0xC2)) {
            sof = i;
            break;
        }
    T_ASSERT(sof > 0);
    j.data[sof + 5] = 65000 >> 8; /* height */
    j.data[sof + 6] = 65000 & 0xFF;
    j.data[sof + 7] = 65000 >> 8; /* width */
    j.data[sof + 8] = 65000 & 0xFF;
    char msg[256];
    int32_t w = 0;
    T_EQ_RC(pack_image_inspect(j.data, j.size, PACK_IMAGE_DECODE, 1 << 20, NULL, &w, NULL, NULL,
                               msg, sizeof msg),
            STOKER_E_LIMIT);
    T_EQ_INT(w, 65000);
    T_CONTAINS(msg, "65000x65000");
    void *out = NULL;
    size_t n = 0;
    T_EQ_RC(pack_image_transcode(j.data, j.size, PACK_IMAGE_TO_RGB, 100, 0, 1 << 20, &out, &n, msg,
                                 sizeof msg),
            STOKER_E_LIMIT);
    /* The default limit (1 << 28) also refuses 65000^2 = 4.2e9 pixels. */
    T_EQ_RC(pack_image_inspect(j.data, j.size, PACK_IMAGE_DECODE, 0, NULL, NULL, NULL, NULL, msg,
                               sizeof msg),
            STOKER_E_LIMIT);
    free(j.data);
}

static void test_transcode_gray(void)
{
    buf g = make_jpeg(50, 40, 1, JCS_GRAYSCALE, 0);
    void *out = (void *)1;
    size_t n = 1;
    T_OK(pack_image_transcode(g.data, g.size, 0, 0, 0, 0, &out, &n, NULL, 0));
    T_ASSERT(out == NULL && n == 0); /* nothing to do */
    T_OK(pack_image_transcode(g.data, g.size, PACK_IMAGE_TO_RGB, 0, 100, 0, &out, &n, NULL, 0));
    T_ASSERT(out != NULL && n > 0);
    buf o = {out, n};
    int w, h, ch, gw, gh, gch;
    unsigned char *rgb = decode(&o, JCS_RGB, &w, &h, &ch);
    unsigned char *gray = decode(&g, JCS_GRAYSCALE, &gw, &gh, &gch);
    T_EQ_INT(w, 50);
    T_EQ_INT(h, 40);
    T_EQ_INT(ch, 3);
    unsigned char *gray3 = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++)
        gray3[3 * i] = gray3[3 * i + 1] = gray3[3 * i + 2] = gray[i];
    const double e = mae(rgb, gray3, (size_t)w * h * 3);
    if (e > 1.5)
        T_FAIL("grey -> RGB differs by %.3f", e);
    free(out);
    free(rgb);
    free(gray);
    free(gray3);
    free(g.data);
}

/* CMYK as Photoshop and Pillow write it (Adobe, inverted); expected RGB per Pillow's rule. */
static void test_transcode_cmyk(void)
{
    const int w = 64, h = 48;
    unsigned char *px = synth(w, h, 4, 7);
    buf c = encode(px, w, h, 4, JCS_CMYK, 100, 0);
    int cw, chh, cch;
    unsigned char *raw = decode(&c, JCS_CMYK, &cw, &chh, &cch);
    T_EQ_INT(cch, 4);
    unsigned char *want = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++)
        for (int k = 0; k < 3; k++) {
            const int cp = 255 - raw[4 * i + k], nk = raw[4 * i + 3];
            const int t = cp * nk + 128;
            want[3 * i + k] = (unsigned char)(nk - (((t >> 8) + t) >> 8));
        }
    void *out = NULL;
    size_t n = 0;
    T_OK(pack_image_transcode(c.data, c.size, PACK_IMAGE_TO_RGB, 0, 100, 0, &out, &n, NULL, 0));
    T_ASSERT(out != NULL);
    buf o = {out, n};
    int ow, oh, och;
    unsigned char *got = decode(&o, JCS_RGB, &ow, &oh, &och);
    T_EQ_INT(ow, w);
    T_EQ_INT(oh, h);
    unsigned char *ref = reencoded(want, w, h);
    const double e = mae(got, ref, (size_t)w * h * 3);
    if (e > 1.0)
        T_FAIL("CMYK -> RGB differs by %.3f", e);
    free(ref);
    free(out);
    free(got);
    free(want);
    free(raw);
    free(px);
    free(c.data);
}

static void test_transcode_png(void)
{
    const int w = 80, h = 60;
    unsigned char *px = synth(w, h, 4, 3);
    buf p = make_png(px, w, h);
    void *out = NULL;
    size_t n = 0;
    char msg[256];
    T_OK(pack_image_transcode(p.data, p.size, PACK_IMAGE_TO_RGB, 0, 100, 0, &out, &n, msg,
                              sizeof msg));
    buf o = {out, n};
    int ow, oh, och;
    unsigned char *got = decode(&o, JCS_RGB, &ow, &oh, &och);
    T_EQ_INT(ow, w);
    T_EQ_INT(oh, h);
    unsigned char *rgb = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++)
        memcpy(rgb + 3 * i, px + 4 * i, 3); /* alpha dropped, as Pillow's convert("RGB") */
    unsigned char *ref = reencoded(rgb, w, h);
    const double e = mae(got, ref, (size_t)w * h * 3);
    if (e > 1.0)
        T_FAIL("PNG -> RGB JPEG differs by %.3f", e);
    free(ref);
    free(out);
    /* A damaged PNG (cut short) is corrupt. */
    T_EQ_RC(pack_image_transcode(p.data, p.size / 2, PACK_IMAGE_TO_RGB, 0, 0, 0, &out, &n, msg,
                                 sizeof msg),
            STOKER_E_CORRUPT);
    T_ASSERT(out == NULL);
    free(got);
    free(rgb);
    free(px);
    free(p.data);
}

static void check_resize(int w, int h, int ch, int max_side, int want_w, int want_h)
{
    buf j = make_jpeg(w, h, ch, ch == 3 ? JCS_RGB : JCS_GRAYSCALE, 0);
    void *out = NULL;
    size_t n = 0;
    char msg[256];
    T_OK(pack_image_transcode(j.data, j.size, 0, max_side, 85, 0, &out, &n, msg, sizeof msg));
    T_ASSERT(out != NULL);
    int32_t ow, oh, oc;
    T_OK(pack_image_inspect(out, n, PACK_IMAGE_DECODE, 0, NULL, &ow, &oh, &oc, msg, sizeof msg));
    T_EQ_INT(ow, want_w);
    T_EQ_INT(oh, want_h);
    T_EQ_INT(oc, ch);
    /* The downscaled picture still looks like the source: compare with a box average. */
    buf o = {out, n};
    int dw, dh, dch, sw, sh, sch;
    unsigned char *small = decode(&o, JCS_RGB, &dw, &dh, &dch);
    unsigned char *full = decode(&j, JCS_RGB, &sw, &sh, &sch);
    /* Reference: the mean of the source pixels whose centres fall in each output pixel. */
    double err = 0;
    for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++) {
            const int x0 = x * sw / dw, x1 = (x + 1) * sw / dw, y0 = y * sh / dh,
                      y1 = (y + 1) * sh / dh;
            double sum = 0;
            int cnt = 0;
            for (int yy = y0; yy < (y1 > y0 ? y1 : y0 + 1); yy++)
                for (int xx = x0; xx < (x1 > x0 ? x1 : x0 + 1); xx++, cnt++)
                    sum += full[((size_t)yy * sw + xx) * 3 + 1];
            err += fabs(sum / cnt - small[((size_t)y * dw + x) * 3 + 1]);
        }
    err /= (double)dw * dh;
    if (err > 4.0)
        T_FAIL("%dx%d -> %dx%d: differs from a box average by %.3f", w, h, dw, dh, err);
    /* Already small enough: stored as is. */
    void *none = (void *)1;
    T_OK(pack_image_transcode(j.data, j.size, 0, w > h ? w : h, 0, 0, &none, &n, NULL, 0));
    T_ASSERT(none == NULL);
    free(out);
    free(small);
    free(full);
    free(j.data);
}

/* Every allocation of the PNG + resize path failing in turn: an error or success, no leak. */
static void test_alloc_failures(void)
{
    unsigned char *px = synth(90, 70, 4, 9);
    buf p = make_png(px, 90, 70);
    int failures = 0;
    for (uint64_t nth = 1; nth < 64; nth++) {
        void *out = NULL;
        size_t n = 0;
        pack_image_alloc_fail_at(nth);
        const int rc =
            pack_image_transcode(p.data, p.size, PACK_IMAGE_TO_RGB, 40, 0, 0, &out, &n, NULL, 0);
        pack_image_alloc_fail_at(0);
        if (rc == 0) {
            T_ASSERT(out != NULL);
            free(out);
            break;
        }
        T_EQ_RC(rc, -ENOMEM);
        T_ASSERT(out == NULL);
        failures++;
    }
    T_ASSERT(failures >= 3);
    free(px);
    free(p.data);
}

static void test_invalid(void)
{
    buf j = make_jpeg(16, 16, 3, JCS_RGB, 0);
    void *out = NULL;
    size_t n = 0;
    T_EQ_RC(pack_image_transcode(j.data, j.size, 0, 0, 101, 0, &out, &n, NULL, 0),
            STOKER_E_INVALID);
    T_EQ_RC(pack_image_transcode(j.data, j.size, 0, -1, 0, 0, &out, &n, NULL, 0), STOKER_E_INVALID);
    T_EQ_RC(pack_image_transcode(j.data, j.size, 0, 0, 0, 0, NULL, &n, NULL, 0), STOKER_E_INVALID);
    free(j.data);
}

int main(void)
{
    test_inspect_good();
    test_inspect_damaged();
    test_not_jpeg();
    test_limit();
    test_transcode_gray();
    test_transcode_cmyk();
    test_transcode_png();
    check_resize(640, 480, 3, 200, 200, 150);
    check_resize(480, 640, 3, 200, 150, 200);
    check_resize(1000, 10, 3, 200, 200, 2);
    check_resize(3001, 2001, 3, 300, 300, 200);
    check_resize(333, 250, 1, 100, 100, 75);
    test_alloc_failures();
    test_invalid();
    printf("test_image: ok\n");
    return 0;
}
