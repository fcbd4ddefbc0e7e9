/* SPDX-License-Identifier: Apache-2.0 */
/* A JPEG header reader that needs no libjpeg: it walks the markers from SOI up to the first
 * SOS and reports the frame, the components and the colour markers, so that a record can be
 * routed (GPU hardware decoder or CPU) before anything is decoded. Every read is bounds-
 * checked against the given size: any input, truncated or garbage, gives an error and never a
 * read past its end. Nothing is allocated. */
#ifndef STOKER_DECODE_JPEG_INFO_H
#define STOKER_DECODE_JPEG_INFO_H

#include "common/common.h"

/* The SOF markers' low byte (ITU T.81, table B.1): the coding process of the frame. */
enum {
    STOKER__SOF_BASELINE = 0xC0,    /* baseline DCT, Huffman */
    STOKER__SOF_EXTENDED = 0xC1,    /* extended sequential DCT, Huffman */
    STOKER__SOF_PROGRESSIVE = 0xC2, /* progressive DCT, Huffman */
    STOKER__SOF_LOSSLESS = 0xC3,    /* lossless, Huffman */
    /* 0xC5..0xC7: hierarchical (Huffman); 0xC9..0xCB: arithmetic; 0xCD..0xCF: both */
};

/* The colour space libjpeg's jpeg_read_header infers (its jpeg_color_space), by the same
 * rule: component count, JFIF and Adobe markers, component ids. */
typedef enum stoker__jpeg_color {
    STOKER__JPEG_UNKNOWN = 0,
    STOKER__JPEG_GRAY,
    STOKER__JPEG_YCBCR,
    STOKER__JPEG_RGB,
    STOKER__JPEG_CMYK,
    STOKER__JPEG_YCCK,
} stoker__jpeg_color;

#define STOKER__JPEG_MAX_COMPONENTS 4

typedef struct stoker__jpeg_component {
    int32_t id, h, v, tq; /* identifier, sampling factors (1..4), quantisation table (0..3) */
} stoker__jpeg_component;

typedef struct stoker__jpeg_info {
    int32_t sof;       /* the frame's SOF marker byte (0xC0 .. 0xCF, STOKER__SOF_*) */
    int32_t precision; /* bits per sample: 8, 12 (or 2..16 for lossless) */
    int32_t width, height;
    int32_t components; /* 1..STOKER__JPEG_MAX_COMPONENTS */
    stoker__jpeg_component comp[STOKER__JPEG_MAX_COMPONENTS];
    int32_t h_max, v_max;     /* the largest sampling factors */
    int32_t scan_components;  /* components of the first scan (all of them: interleaved) */
    int32_t jfif;             /* an APP0 JFIF marker was seen */
    int32_t adobe;            /* an APP14 Adobe marker was seen */
    int32_t adobe_transform;  /* its transform flag (0 none, 1 YCbCr, 2 YCCK); -1 without one */
    int32_t restart_interval; /* MCUs between restart markers as of the first scan (0: none) */
    stoker__jpeg_color color;
    size_t header_size; /* bytes up to the end of the first SOS segment (entropy data follows) */
} stoker__jpeg_info;

/* Reads the header of the JPEG `data` (size bytes) into *info. Returns 0, or
 * STOKER_E_CORRUPT with the cause in err (no SOI, truncated before the first scan, a segment
 * overrunning the data, a bad SOF or SOS, zero size, bad sampling factors, more than
 * STOKER__JPEG_MAX_COMPONENTS components, ...). *info is unspecified after a failure. */
int stoker__jpeg_info_read(const uint8_t *data, size_t size, stoker__jpeg_info *info,
                           stoker__err *err);

/* Whether nvJPEG's hardware back-end can decode the image: a sequential Huffman frame
 * (baseline, or extended with 8-bit samples) with one interleaved scan, 8-bit samples, 1
 * component (sampled 1x1) or 3 in YCbCr, and chroma subsampling 4:4:4, 4:2:2 or 4:2:0 (the
 * hardware also decodes 4:4:0, whose chroma libjpeg-turbo's versions upsample differently,
 * so that the GPU's pixels could not match the CPU decoder's). When not, *why (if not NULL)
 * names the first reason, a static string: "progressive", "12-bit", "CMYK", "4:1:1
 * subsampling", ... This is the rule by the header alone; nvJPEG has the last word on an
 * image (stoker__nvjpeg_supported), but it also takes images it then decodes wrong (RGB
 * ones, grayscale with sampling factors above 1), which this rule keeps for the CPU. */
bool stoker__jpeg_hw_eligible(const stoker__jpeg_info *info, const char **why);

/* The chroma subsampling of a 3-component image as "4:4:4", "4:2:2", "4:2:0", "4:4:0",
 * "4:1:1", "4:1:0", or NULL for any other set of sampling factors (and other component
 * counts). */
const char *stoker__jpeg_subsampling(const stoker__jpeg_info *info);

#endif
