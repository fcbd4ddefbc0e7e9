/* SPDX-License-Identifier: Apache-2.0 */
/* JPEG header reader (ITU T.81 annex B) for routing records before decoding. Strict where
 * libjpeg warns about damage (bytes between segments), because the CPU decoder counts those
 * warnings as corruption too: a record this reader rejects is left to the CPU, whose decoder
 * then reports the real cause. */
#include "decode/jpeg_info.h"

#include <string.h>

enum {
    M_SOI = 0xD8,
    M_EOI = 0xD9,
    M_SOS = 0xDA,
    M_DQT = 0xDB,
    M_DNL = 0xDC,
    M_DRI = 0xDD,
    M_DHP = 0xDE,
    M_EXP = 0xDF,
    M_DHT = 0xC4,
    M_DAC = 0xCC,
    M_APP0 = 0xE0,
    M_APP14 = 0xEE,
    M_APP15 = 0xEF,
    M_COM = 0xFE,
    M_TEM = 0x01,
};

/* libjpeg's lengths of the marker data it examines (jdmarker.c: APP0_DATA_LEN,
 * APP14_DATA_LEN): a shorter segment does not count as JFIF or Adobe. */
#define JFIF_LEN 14
#define ADOBE_LEN 12

static uint32_t be16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

static bool is_sof(int m)
{
    return m >= 0xC0 && m <= 0xCF && m != M_DHT && m != 0xC8 && m != M_DAC;
}

/* Markers without a length field (RSTn, TEM). */
static bool is_standalone(int m)
{
    return (m >= 0xD0 && m <= 0xD7) || m == M_TEM;
}

/* Segments that carry nothing this reader needs, skipped by their length. */
static bool is_skipped(int m)
{
    return m == M_DHT || m == M_DAC || m == M_DQT || m == M_DNL || m == M_DHP || m == M_EXP ||
           m == M_COM || (m >= M_APP0 && m <= M_APP15);
}

/* The marker at *at (fill bytes 0xFF allowed before it); *at moves past it. */
static int next_marker(const uint8_t *data, size_t size, size_t *at, int *marker, stoker__err *err)
{
    size_t i = *at;
    STOKER_RETURN_IF(i >= size, err, STOKER_E_CORRUPT,
                     "truncated at byte %zu: the data ends before the first scan", i);
    STOKER_RETURN_IF(data[i] != 0xFF, err, STOKER_E_CORRUPT,
                     "byte %zu is 0x%02X where a marker was expected", i, data[i]);
    while (i < size && data[i] == 0xFF)
        i++;
    STOKER_RETURN_IF(i >= size, err, STOKER_E_CORRUPT,
                     "truncated at byte %zu: the data ends inside a marker", i);
    STOKER_RETURN_IF(data[i] == 0, err, STOKER_E_CORRUPT,
                     "byte %zu: a stuffed zero where a marker was expected", i);
    *marker = data[i];
    *at = i + 1;
    return 0;
}

static int read_components(stoker__jpeg_info *in, const uint8_t *c, stoker__err *err)
{
    in->h_max = in->v_max = 0;
    for (int32_t i = 0; i < in->components; i++, c += 3) {
        stoker__jpeg_component *k = &in->comp[i];
        *k = (stoker__jpeg_component){c[0], c[1] >> 4, c[1] & 15, c[2]};
        STOKER_RETURN_IF(k->h < 1 || k->h > 4 || k->v < 1 || k->v > 4, err, STOKER_E_CORRUPT,
                         "component %d: sampling factors %dx%d outside 1..4", (int)i, (int)k->h,
                         (int)k->v);
        STOKER_RETURN_IF(k->tq > 3, err, STOKER_E_CORRUPT,
                         "component %d: quantisation table %d outside 0..3", (int)i, (int)k->tq);
        in->h_max = k->h > in->h_max ? k->h : in->h_max;
        in->v_max = k->v > in->v_max ? k->v : in->v_max;
    }
    return 0;
}

/* The frame header: P, Y, X, Nf, then Nf times (C, H:V, Tq). */
static int read_sof(stoker__jpeg_info *in, int marker, const uint8_t *s, size_t n, stoker__err *err)
{
    STOKER_RETURN_IF(in->sof != 0, err, STOKER_E_CORRUPT,
                     "a second frame header (SOF 0x%02X) before the first scan", marker);
    STOKER_RETURN_IF(n < 6, err, STOKER_E_CORRUPT, "frame header (SOF 0x%02X) of %zu bytes", marker,
                     n);
    const int32_t nf = s[5];
    STOKER_RETURN_IF(nf == 0 || n != 6 + 3 * (size_t)nf, err, STOKER_E_CORRUPT,
                     "frame header of %zu bytes for %d components", n, (int)nf);
    STOKER_RETURN_IF(nf > STOKER__JPEG_MAX_COMPONENTS, err, STOKER_E_UNSUPPORTED,
                     "%d components, at most %d are read", (int)nf, STOKER__JPEG_MAX_COMPONENTS);
    in->sof = marker;
    in->precision = s[0];
    in->height = (int32_t)be16(s + 1);
    in->width = (int32_t)be16(s + 3);
    in->components = nf;
    STOKER_RETURN_IF(in->precision < 2 || in->precision > 16, err, STOKER_E_CORRUPT,
                     "sample precision of %d bits", (int)in->precision);
    STOKER_RETURN_IF(in->width == 0 || in->height == 0, err, STOKER_E_CORRUPT,
                     "empty image: %dx%d pixels", (int)in->width, (int)in->height);
    return read_components(in, s + 6, err);
}

/* The first scan header: Ns, then Ns times (Cs, Td:Ta), then Ss, Se, Ah:Al. */
static int read_sos(stoker__jpeg_info *in, const uint8_t *s, size_t n, stoker__err *err)
{
    STOKER_RETURN_IF(in->sof == 0, err, STOKER_E_CORRUPT, "a scan (SOS) before any frame header");
    const int32_t ns = n > 0 ? s[0] : 0;
    STOKER_RETURN_IF(ns < 1 || ns > 4 || n != 4 + 2 * (size_t)ns, err, STOKER_E_CORRUPT,
                     "scan header of %zu bytes for %d components", n, (int)ns);
    uint32_t used = 0; /* frame components already named by this scan */
    for (int32_t i = 0; i < ns; i++) {
        int32_t k = 0;
        while (k < in->components && (in->comp[k].id != s[1 + 2 * i] || (used >> k & 1)))
            k++;
        STOKER_RETURN_IF(k == in->components, err, STOKER_E_CORRUPT,
                         "scan component %d (id %d) is not a component of the frame", (int)i,
                         (int)s[1 + 2 * i]);
        used |= 1u << k;
    }
    in->scan_components = ns;
    return 0;
}

static void read_app(stoker__jpeg_info *in, int marker, const uint8_t *s, size_t n)
{
    if (marker == M_APP0 && n >= JFIF_LEN && memcmp(s, "JFIF", 5) == 0)
        in->jfif = 1;
    if (marker == M_APP14 && n >= ADOBE_LEN && memcmp(s, "Adobe", 5) == 0) {
        in->adobe = 1;
        in->adobe_transform = s[11];
    }
}

/* libjpeg's default_decompress_parms (jdapimin.c), term for term. */
static stoker__jpeg_color guess_color(const stoker__jpeg_info *in)
{
    switch (in->components) {
    case 1: return STOKER__JPEG_GRAY;
    case 3:
        if (in->jfif)
            return STOKER__JPEG_YCBCR;
        if (in->adobe)
            return in->adobe_transform == 0 ? STOKER__JPEG_RGB : STOKER__JPEG_YCBCR;
        if (in->comp[0].id == 82 && in->comp[1].id == 71 && in->comp[2].id == 66)
            return STOKER__JPEG_RGB; /* 'R', 'G', 'B' */
        return STOKER__JPEG_YCBCR;
    case 4:
        if (in->adobe)
            return in->adobe_transform == 0 ? STOKER__JPEG_CMYK : STOKER__JPEG_YCCK;
        return STOKER__JPEG_CMYK;
    default: return STOKER__JPEG_UNKNOWN;
    }
}

/* One marker segment before the first scan (at: its length field). Sets *done at SOS. */
static int read_segment(stoker__jpeg_info *in, int marker, const uint8_t *data, size_t size,
                        size_t *at, bool *done, stoker__err *err)
{
    STOKER_RETURN_IF(size - *at < 2, err, STOKER_E_CORRUPT,
                     "truncated at byte %zu: the data ends in marker 0x%02X's length", size,
                     marker);
    const size_t len = be16(data + *at);
    STOKER_RETURN_IF(len < 2 || len > size - *at, err, STOKER_E_CORRUPT,
                     "marker 0x%02X at byte %zu: a length of %zu bytes, %zu left", marker, *at - 2,
                     len, size - *at);
    const uint8_t *s = data + *at + 2;
    const size_t n = len - 2;
    int rc = 0;
    if (is_sof(marker))
        rc = read_sof(in, marker, s, n, err);
    else if (marker == M_SOS)
        rc = read_sos(in, s, n, err);
    else if (marker == M_DRI) {
        STOKER_RETURN_IF(n != 2, err, STOKER_E_CORRUPT, "restart interval (DRI) of %zu bytes", n);
        in->restart_interval = (int32_t)be16(s);
    } else if (is_skipped(marker))
        read_app(in, marker, s, n);
    else
        return stoker__fail(err, STOKER_E_CORRUPT, "unknown marker 0x%02X at byte %zu", marker,
                            *at - 2);
    *at += len;
    *done = rc == 0 && marker == M_SOS;
    return rc;
}

int stoker__jpeg_info_read(const uint8_t *data, size_t size, stoker__jpeg_info *info,
                           stoker__err *err)
{
    memset(info, 0, sizeof *info);
    info->adobe_transform = -1;
    STOKER_RETURN_IF(size < 2 || data[0] != 0xFF || data[1] != M_SOI, err, STOKER_E_CORRUPT,
                     "not a JPEG: no SOI marker at the start");
    size_t at = 2;
    for (bool done = false; !done;) {
        int marker = 0;
        int rc = next_marker(data, size, &at, &marker, err);
        if (rc < 0)
            return rc;
        if (is_standalone(marker))
            continue;
        STOKER_RETURN_IF(marker == M_SOI || marker == M_EOI, err, STOKER_E_CORRUPT,
                         "marker 0x%02X at byte %zu, before any scan", marker, at - 2);
        rc = read_segment(info, marker, data, size, &at, &done, err);
        if (rc < 0)
            return rc;
    }
    info->header_size = at;
    info->color = guess_color(info);
    return 0;
}

const char *stoker__jpeg_subsampling(const stoker__jpeg_info *in)
{
    if (in->components != 3)
        return NULL;
    for (int c = 1; c < 3; c++)
        if (in->comp[c].h != 1 || in->comp[c].v != 1)
            return NULL;
    static const struct {
        int32_t h, v;
        const char *name;
    } known[] = {{1, 1, "4:4:4"}, {2, 1, "4:2:2"}, {2, 2, "4:2:0"},
                 {1, 2, "4:4:0"}, {4, 1, "4:1:1"}, {4, 2, "4:1:0"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (in->comp[0].h == known[i].h && in->comp[0].v == known[i].v)
            return known[i].name;
    return NULL;
}

/* The first reason the hardware decoder cannot take the image, NULL when there is none.
 * nvJPEG documents NVJPEG_BACKEND_HARDWARE as "baseline JPEG images with single scan with 1
 * or 3 channels", without the 4:1:0 and 4:1:1 chroma subsamplings. */
static const char *hw_obstacle(const stoker__jpeg_info *in)
{
    /* the SOF byte's low two bits: sequential, extended, progressive, lossless; 0x04: a
     * hierarchical frame; 0x08: arithmetic coding */
    if (in->sof & 0x04)
        return "hierarchical";
    if ((in->sof & 3) == 2)
        return "progressive";
    if ((in->sof & 3) == 3)
        return "lossless";
    if (in->sof & 0x08)
        return "arithmetic coding";
    if (in->precision != 8)
        return in->precision == 12 ? "12-bit" : "not 8-bit";
    if (in->color == STOKER__JPEG_CMYK)
        return "CMYK";
    if (in->color == STOKER__JPEG_YCCK)
        return "YCCK";
    if (in->components != 1 && in->components != 3)
        return in->components == 2 ? "2 components" : "4 components";
    if (in->color == STOKER__JPEG_RGB) /* nvJPEG 13 takes it, but converts it as YCbCr */
        return "RGB colour space";
    if (in->scan_components != in->components)
        return "non-interleaved scans";
    if (in->components == 1) /* nvJPEG 13's hardware decodes these wrong (seen on an H200) */
        return in->comp[0].h != 1 || in->comp[0].v != 1 ? "grayscale sampling factors above 1"
                                                        : NULL;
    const char *ss = stoker__jpeg_subsampling(in);
    if (!ss)
        return "unusual subsampling";
    if (strcmp(ss, "4:1:1") == 0)
        return "4:1:1 subsampling";
    if (strcmp(ss, "4:1:0") == 0)
        return "4:1:0 subsampling";
    if (strcmp(ss, "4:4:0") == 0)   /* nvJPEG decodes it, but libjpeg-turbo's versions upsample */
        return "4:4:0 subsampling"; /* its chroma differently: no one result to match */
    return NULL;
}

bool stoker__jpeg_hw_eligible(const stoker__jpeg_info *info, const char **why)
{
    const char *r = hw_obstacle(info);
    if (why)
        *why = r;
    return r == NULL;
}
