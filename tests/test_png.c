/* SPDX-License-Identifier: Apache-2.0 */
/* PNG decoding (src/decode/png.c): RGB from every colour type, masks as stored samples
 * (palette indices), and the refusals. The PNGs are encoded here by libspng from samples this
 * test chose, so every expected pixel follows from them by png.h's rules, not from the decoder.
 *
 * Also a small program for tests/python/test_png.py, which compares with Pillow:
 *   test_png decode rgb|mask IN.png OUT.raw [MAX_PIXELS]
 * writes the decoded pixels to OUT.raw and prints "W H", or prints "error CODE MESSAGE" and
 * exits 2. */
#include "decode/png.h"

#include "testutil.h"

#ifdef STOKER_HAVE_PNG
#include <spng.h>

typedef struct png_buf {
    uint8_t *data;
    size_t size;
} png_buf;

/* Encodes w x h samples of `color_type` at `depth` bits (16-bit samples in host order, as
 * libspng's SPNG_FMT_PNG takes them; sub-byte samples packed) with an optional palette of n_plte
 * RGB entries. */
static png_buf encode(uint32_t w, uint32_t h, int color_type, int depth, const void *samples,
                      size_t len, const uint8_t (*plte)[3], uint32_t n_plte)
{
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    T_ASSERT(ctx);
    T_EQ_INT(spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1), 0);
    struct spng_ihdr ihdr = {
        .width = w, .height = h, .bit_depth = (uint8_t)depth, .color_type = (uint8_t)color_type};
    T_EQ_INT(spng_set_ihdr(ctx, &ihdr), 0);
    if (n_plte) {
        struct spng_plte p = {.n_entries = n_plte};
        for (uint32_t i = 0; i < n_plte; i++)
            p.entries[i] = (struct spng_plte_entry){plte[i][0], plte[i][1], plte[i][2], 255};
        T_EQ_INT(spng_set_plte(ctx, &p), 0);
    }
    int e = spng_encode_image(ctx, samples, len, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    if (e)
        T_FAIL("spng_encode_image: %s", spng_strerror(e));
    png_buf b;
    b.data = spng_get_png_buffer(ctx, &b.size, &e);
    T_ASSERT(b.data && !e);
    spng_ctx_free(ctx);
    return b;
}

enum { W = 7, H = 5 }; /* odd sizes: sub-byte rows end inside a byte */

static uint8_t sample(uint32_t x, uint32_t y, uint32_t c)
{
    return (uint8_t)(x * 37 + y * 101 + c * 59 + 3);
}

static void decode_ok(png_buf b, stoker__png_mode mode, uint8_t *out, size_t cap,
                      stoker__png_info *info)
{
    stoker__err err = {0};
    int rc = stoker__png_decode(b.data, b.size, mode, 0, out, cap, info, &err);
    if (rc)
        T_FAIL("decode: %d %s", rc, err.msg);
    T_EQ_INT(info->width, W);
    T_EQ_INT(info->height, H);
}

static void test_rgb_kinds(void)
{
    uint8_t out[W * H * 3], in[W * H * 8];
    stoker__png_info info;
    /* RGB and RGBA (alpha dropped) */
    for (int ch = 3; ch <= 4; ch++) {
        for (uint32_t i = 0; i < W * H; i++)
            for (int c = 0; c < ch; c++)
                in[i * ch + c] = sample(i % W, i / W, c);
        png_buf b = encode(W, H, ch == 3 ? 2 : 6, 8, in, (size_t)W * H * ch, NULL, 0);
        decode_ok(b, STOKER__PNG_RGB, out, sizeof out, &info);
        T_EQ_INT(info.channels, ch);
        for (uint32_t i = 0; i < W * H; i++)
            for (int c = 0; c < 3; c++)
                T_EQ_INT(out[i * 3 + c], sample(i % W, i / W, c));
        free(b.data);
    }
    /* gray and gray+alpha: replicated */
    for (int ch = 1; ch <= 2; ch++) {
        for (uint32_t i = 0; i < W * H; i++)
            for (int c = 0; c < ch; c++)
                in[i * ch + c] = sample(i % W, i / W, c);
        png_buf b = encode(W, H, ch == 1 ? 0 : 4, 8, in, (size_t)W * H * ch, NULL, 0);
        decode_ok(b, STOKER__PNG_RGB, out, sizeof out, &info);
        for (uint32_t i = 0; i < W * H; i++)
            for (int c = 0; c < 3; c++)
                T_EQ_INT(out[i * 3 + c], sample(i % W, i / W, 0));
        free(b.data);
    }
    /* 16-bit RGB: the high byte (samples given little-endian: x86's host order) */
    for (uint32_t i = 0; i < W * H * 3; i++) {
        in[i * 2 + 1] = sample(i / 3 % W, i / 3 / W, i % 3);
        in[i * 2] = (uint8_t)(255 - in[i * 2 + 1]);
    }
    png_buf b = encode(W, H, 2, 16, in, (size_t)W * H * 6, NULL, 0);
    decode_ok(b, STOKER__PNG_RGB, out, sizeof out, &info);
    T_EQ_INT(info.bit_depth, 16);
    for (uint32_t i = 0; i < W * H * 3; i++)
        T_EQ_INT(out[i], in[i * 2 + 1]);
    free(b.data);
}

static void test_palette(void)
{
    uint8_t plte[16][3], idx[W * H], packed[H * 4], out[W * H * 3];
    for (int i = 0; i < 16; i++)
        plte[i][0] = (uint8_t)(i * 16), plte[i][1] = (uint8_t)(255 - i), plte[i][2] = (uint8_t)i;
    for (uint32_t i = 0; i < W * H; i++)
        idx[i] = (uint8_t)((i * 7 + i / W) % 16);
    stoker__png_info info;
    /* 8-bit palette: RGB gives the colours, MASK the indices */
    png_buf b = encode(W, H, 3, 8, idx, sizeof idx, (const uint8_t(*)[3])plte, 16);
    decode_ok(b, STOKER__PNG_RGB, out, sizeof out, &info);
    T_EQ_INT(info.color_type, STOKER__PNG_PALETTE);
    for (uint32_t i = 0; i < W * H; i++)
        for (int c = 0; c < 3; c++)
            T_EQ_INT(out[i * 3 + c], plte[idx[i]][c]);
    memset(out, 0xEE, sizeof out);
    decode_ok(b, STOKER__PNG_MASK, out, W * H, &info);
    T_ASSERT(memcmp(out, idx, sizeof idx) == 0);
    free(b.data);
    /* 4-bit palette, rows of 7 samples packed into 4 bytes: MASK unpacks the indices */
    memset(packed, 0, sizeof packed);
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++)
            packed[y * 4 + x / 2] |= (uint8_t)(idx[y * W + x] << (x % 2 ? 0 : 4));
    b = encode(W, H, 3, 4, packed, sizeof packed, (const uint8_t(*)[3])plte, 16);
    memset(out, 0xEE, sizeof out);
    decode_ok(b, STOKER__PNG_MASK, out, W * H, &info);
    T_EQ_INT(info.bit_depth, 4);
    T_ASSERT(memcmp(out, idx, sizeof idx) == 0);
    T_EQ_INT(out[W * H], 0xEE); /* nothing written past the mask */
    free(b.data);
    /* 1-bit gray mask: 0 and 1, not scaled */
    uint8_t bits[H] = {0}, want[W * H];
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++) {
            want[y * W + x] = (uint8_t)((x + y) % 3 == 0);
            bits[y] |= (uint8_t)(want[y * W + x] << (7 - x));
        }
    b = encode(W, H, 0, 1, bits, sizeof bits, NULL, 0);
    decode_ok(b, STOKER__PNG_MASK, out, W * H, &info);
    T_ASSERT(memcmp(out, want, sizeof want) == 0);
    free(b.data);
}

static void test_refusals(void)
{
    uint8_t in[W * H * 3], out[W * H * 3];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (uint8_t)(i * 13);
    png_buf b = encode(W, H, 2, 8, in, sizeof in, NULL, 0);
    stoker__err err = {0};
    stoker__png_info info;
    /* an RGB image is not a mask */
    T_EQ_RC(stoker__png_decode(b.data, b.size, STOKER__PNG_MASK, 0, out, sizeof out, NULL, &err),
            STOKER_E_INVALID);
    T_CONTAINS(err.msg, "one channel");
    /* over the pixel limit: refused before decoding */
    T_EQ_RC(
        stoker__png_decode(b.data, b.size, STOKER__PNG_RGB, W * H - 1, out, sizeof out, NULL, &err),
        STOKER_E_LIMIT);
    T_CONTAINS(err.msg, "35 pixels");
    T_OK(stoker__png_decode(b.data, b.size, STOKER__PNG_RGB, W * H, out, sizeof out, NULL, &err));
    /* too small an output */
    T_EQ_RC(stoker__png_decode(b.data, b.size, STOKER__PNG_RGB, 0, out, sizeof out - 1, NULL, &err),
            STOKER_E_INVALID);
    /* truncated anywhere: every prefix, IEND's CRC included */
    for (size_t n = 0; n < b.size; n++) {
        int rc = stoker__png_decode(b.data, n, STOKER__PNG_RGB, 0, out, sizeof out, NULL, &err);
        if (rc != STOKER_E_CORRUPT)
            T_FAIL("prefix of %zu bytes: %d (%s)", n, rc, err.msg);
        T_CONTAINS(err.msg, "PNG");
    }
    /* a flipped byte in the image data (zlib's stream breaks first), then in its CRC */
    uint8_t *bad = malloc(b.size);
    memcpy(bad, b.data, b.size);
    bad[b.size - 12 - 6] ^= 0x40;
    T_EQ_RC(stoker__png_decode(bad, b.size, STOKER__PNG_RGB, 0, out, sizeof out, NULL, &err),
            STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "IDAT");
    memcpy(bad, b.data, b.size);
    bad[b.size - 12 - 1] ^= 0x01;
    T_EQ_RC(stoker__png_decode(bad, b.size, STOKER__PNG_RGB, 0, out, sizeof out, NULL, &err),
            STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "checksum");
    /* not a PNG at all */
    T_EQ_RC(stoker__png_info_read((const uint8_t *)"\xFF\xD8\xFF\xE0 not a png", 14, &info, &err),
            STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "PNG header");
    free(bad);
    free(b.data);
}

/* test_png decode rgb|mask IN OUT [MAX_PIXELS] */
static int decode_file(int argc, char **argv)
{
    size_t size;
    uint8_t *data = t_read_file(argv[3], &size);
    T_ASSERT(data);
    stoker__png_mode mode = strcmp(argv[2], "mask") == 0 ? STOKER__PNG_MASK : STOKER__PNG_RGB;
    uint64_t max = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
    stoker__err err = {0};
    stoker__png_info info;
    int rc = stoker__png_info_read(data, size, &info, &err);
    uint8_t *out = NULL;
    if (rc == 0) {
        size_t cap = (size_t)stoker__png_out_size(&info, mode);
        out = malloc(cap ? cap : 1);
        rc = stoker__png_decode(data, size, mode, max, out, cap, &info, &err);
        if (rc == 0)
            t_write_file(argv[4], out, cap);
    }
    free(data);
    free(out);
    if (rc) {
        printf("error %d %s\n", rc, err.msg);
        return 2;
    }
    printf("%d %d\n", info.width, info.height);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "decode") == 0)
        return decode_file(argc, argv);
    T_ASSERT(stoker__png_supported());
    test_rgb_kinds();
    test_palette();
    test_refusals();
    printf("ok\n");
    return 0;
}
#else
int main(void)
{
    stoker__err err = {0};
    uint8_t b[1] = {0};
    T_EQ_RC(stoker__png_decode(b, 1, STOKER__PNG_RGB, 0, b, 1, NULL, &err), STOKER_E_UNSUPPORTED);
    T_CONTAINS(err.msg, "libspng");
    printf("built without libspng: PNG refused\n");
    return T_SKIP;
}
#endif
