/* SPDX-License-Identifier: Apache-2.0 */
/* PNG decoding with libspng (png.h). Reads only from the caller's buffer and writes only to
 * the caller's output; libspng's context is the one allocation, freed before return. */
#include "decode/png.h"

#include <inttypes.h>
#include <string.h>

#include <spng.h>

/* Ancillary chunks (text, ICC profiles) are not needed: libspng keeps at most this much of
 * them, and refuses a chunk larger than it, so that a crafted file cannot make it allocate
 * without bound. */
#define CHUNK_LIMIT (8u << 20)

bool stoker__png_supported(void)
{
    return true;
}

/* A context reading `data`, its header read into *ihdr. */
static int open_png(const uint8_t *data, size_t size, spng_ctx **out, struct spng_ihdr *ihdr,
                    stoker__err *err)
{
    *out = NULL;
    spng_ctx *ctx = spng_ctx_new(0);
    STOKER_RETURN_IF(!ctx, err, -ENOMEM, "PNG: out of memory for the decoder");
    int e = spng_set_png_buffer(ctx, data, size);
    if (!e)
        e = spng_set_chunk_limits(ctx, CHUNK_LIMIT, CHUNK_LIMIT);
    if (!e)
        e = spng_get_ihdr(ctx, ihdr);
    if (e) {
        spng_ctx_free(ctx);
        return stoker__fail(err, STOKER_E_CORRUPT, "PNG header (%zu bytes): %s", size,
                            spng_strerror(e));
    }
    *out = ctx;
    return 0;
}

static void fill_info(const struct spng_ihdr *h, stoker__png_info *info)
{
    static const int32_t channels[7] = {1, 0, 3, 1, 2, 0, 4};
    info->width = (int32_t)h->width;
    info->height = (int32_t)h->height;
    info->channels = h->color_type <= 6 ? channels[h->color_type] : 0;
    info->bit_depth = h->bit_depth;
    info->color_type = h->color_type;
    info->interlaced = h->interlace_method != 0;
}

int stoker__png_info_read(const uint8_t *data, size_t size, stoker__png_info *info,
                          stoker__err *err)
{
    spng_ctx *ctx;
    struct spng_ihdr h;
    int rc = open_png(data, size, &ctx, &h, err);
    if (rc < 0)
        return rc;
    fill_info(&h, info);
    spng_ctx_free(ctx);
    return 0;
}

uint64_t stoker__png_out_size(const stoker__png_info *info, stoker__png_mode mode)
{
    return (uint64_t)info->width * (uint64_t)info->height * (mode == STOKER__PNG_RGB ? 3u : 1u);
}

/* Whether `data` holds the IEND chunk (it has no data, hence always these 12 bytes), looked
 * for from the end: libspng stops at IEND's type and does not read its CRC, so a file cut in
 * its last bytes would pass. Bytes after IEND are allowed, as other decoders allow them. */
static bool has_iend(const uint8_t *data, size_t size)
{
    static const uint8_t iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    for (size_t at = size >= sizeof iend ? size - sizeof iend + 1 : 0; at-- > 0;)
        if (data[at] == 0 && memcmp(data + at, iend, sizeof iend) == 0)
            return true;
    return false;
}

/* Unpacks rows of `depth`-bit samples (packed, each row starting on a byte) into one byte a
 * sample, in place: the packed image lies at the start of `buf`, and every output byte is
 * written after the input byte it comes from was read (backwards, both positions only fall). */
static void unpack_in_place(uint8_t *buf, uint32_t width, uint32_t height, int depth)
{
    size_t stride = ((size_t)width * (size_t)depth + 7) / 8;
    unsigned mask = (1u << depth) - 1;
    for (size_t y = height; y-- > 0;) {
        const uint8_t *row = buf + y * stride;
        uint8_t *dst = buf + y * width;
        for (size_t x = width; x-- > 0;) {
            size_t bit = x * (size_t)depth;
            unsigned shift = 8u - (unsigned)depth - (unsigned)(bit & 7);
            dst[x] = (uint8_t)((row[bit >> 3] >> shift) & mask);
        }
    }
}

int stoker__png_decode(const uint8_t *data, size_t size, stoker__png_mode mode, uint64_t max_pixels,
                       uint8_t *out, size_t cap, stoker__png_info *info, stoker__err *err)
{
    spng_ctx *ctx = NULL;
    struct spng_ihdr h;
    stoker__png_info in;
    int rc = open_png(data, size, &ctx, &h, err);
    if (rc < 0)
        return rc;
    fill_info(&h, &in);
    if (info)
        *info = in;
    uint64_t pixels = (uint64_t)h.width * h.height;
    STOKER_FAIL_IF(max_pixels && pixels > max_pixels, err, STOKER_E_LIMIT,
                   "PNG of %" PRIu32 "x%" PRIu32 " (%" PRIu64 " pixels): more than the limit of "
                   "%" PRIu64 " pixels",
                   h.width, h.height, pixels, max_pixels);
    bool indexed = h.color_type == STOKER__PNG_PALETTE || h.color_type == STOKER__PNG_GRAY;
    STOKER_FAIL_IF(mode == STOKER__PNG_MASK && (!indexed || h.bit_depth > 8), err, STOKER_E_INVALID,
                   "PNG mask of colour type %d, %d-bit: a mask must be one channel of at most "
                   "8 bits (gray, or palette indices)",
                   h.color_type, h.bit_depth);
    uint64_t need = stoker__png_out_size(&in, mode);
    STOKER_FAIL_IF(need > cap, err, STOKER_E_INVALID,
                   "PNG of %" PRIu32 "x%" PRIu32 " needs %" PRIu64 " bytes, room for %zu", h.width,
                   h.height, need, cap);
    /* Mask: the samples as stored (SPNG_FMT_PNG), packed below 8 bits, then unpacked. */
    int fmt = mode == STOKER__PNG_RGB ? SPNG_FMT_RGB8 : SPNG_FMT_PNG;
    size_t len = 0;
    int e = spng_decoded_image_size(ctx, fmt, &len);
    if (!e && len > cap)
        e = SPNG_EOVERFLOW;
    if (!e)
        e = spng_decode_image(ctx, out, len, fmt, 0);
    /* The chunks after the image data, to IEND: a file cut anywhere (even in the last CRC)
     * is corrupt, as it is for the JPEG decoder. */
    if (!e)
        e = spng_decode_chunks(ctx);
    if (!e && !has_iend(data, size))
        e = SPNG_EOF;
    STOKER_FAIL_IF(e, err, STOKER_E_CORRUPT, "PNG of %" PRIu32 "x%" PRIu32 " (%zu bytes): %s",
                   h.width, h.height, size, spng_strerror(e));
    if (mode == STOKER__PNG_MASK && h.bit_depth < 8)
        unpack_in_place(out, h.width, h.height, h.bit_depth);
    rc = 0;
fail:
    spng_ctx_free(ctx);
    return rc;
}
