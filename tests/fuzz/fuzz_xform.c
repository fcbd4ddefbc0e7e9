/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for JPEG decoding and the image pipeline: the input is a JPEG handed to
 * stoker__xform_jpeg, with a small output size and a small pixel limit (so that frames
 * declaring huge dimensions are rejected at once), through one scratch reused across
 * inputs as a loader worker reuses its own.
 *
 * Input: byte 0 chooses the pipeline, byte 1 the output size and record id, the rest is the
 * JPEG.
 *   byte 0 bits 0-1: transform (TRAIN, EVAL, RESIZE or for an odd record id LETTERBOX,
 *                    EVAL decoded at a DCT reduction where it fits; TRAIN is reduced
 *                    where it fits by default)
 *          bits 2-3: dtype (UINT8, FLOAT16, BFLOAT16, FLOAT32)
 *          bit 4:    layout (NCHW, NHWC)
 *          bit 5:    DCT (ISLOW, IFAST)
 *          bit 6:    SIMD level (best available, scalar)
 *          bit 7:    antialias (ALWAYS, OVER_2X)
 *   byte 1 bits 0-4: output size 1 + (bits 0-4) * 2 (1 .. 63); bits 5-6: record id;
 *          bit 7:    resampler (FAST, PILLOW).
 *
 * Each input is decoded twice, as a record of a checked data set is (the crop's rows only,
 * stoker__xform_jpeg) and as one of an unchecked data set is on its first use (to the end of
 * the data, stoker__xform_jpeg_whole), and compared with libjpeg's full decode of the same
 * bytes (t_jpeg_verdict, every row and then jpeg_finish_decompress):
 *   - a JPEG libjpeg warns about or refuses never comes out of the whole decode as a sample;
 *   - one it decodes cleanly (what a checked data set holds) comes out of both, the same;
 *   - where both give a sample, it is the same sample.
 * A breach aborts. */
#include "jpegutil.h"
#include "transform/transform.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PIXELS (1u << 22)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static stoker__xform_scratch *s;
    static uint8_t out[64 * 64 * 3 * 4], whole[64 * 64 * 3 * 4];
    if (!s && stoker__xform_scratch_create(&s) != 0)
        abort();
    if (size < 2)
        return 0;
    static const int32_t transforms[4] = {STOKER_TRANSFORM_TRAIN, STOKER_TRANSFORM_EVAL,
                                          STOKER_TRANSFORM_RESIZE, STOKER_TRANSFORM_EVAL};
    static const int32_t dtypes[4] = {STOKER_DTYPE_UINT8, STOKER_DTYPE_FLOAT16,
                                      STOKER_DTYPE_BFLOAT16, STOKER_DTYPE_FLOAT32};
    const uint8_t mode = data[0], shape = data[1];
    /* the third transform is resize for even ids, letterbox (a padded sample) for odd ones */
    const int letterbox = (mode & 3) == 2 && (shape >> 5) & 1;
    stoker__xform_params p = {
        .transform = letterbox ? STOKER_TRANSFORM_LETTERBOX : transforms[mode & 3],
        .size = 1 + (shape & 31) * 2,
        .dtype = dtypes[(mode >> 2) & 3],
        .layout = mode & 16 ? STOKER_LAYOUT_NHWC : STOKER_LAYOUT_NCHW,
        .dct = mode & 32 ? STOKER_DCT_IFAST : STOKER_DCT_ISLOW,
        .antialias = mode & 128 ? STOKER_ANTIALIAS_OVER_2X : STOKER_ANTIALIAS_ALWAYS,
        .resampler = shape & 128 ? STOKER_RESAMPLER_PILLOW : STOKER_RESAMPLER_FAST,
        .dct_scale = (mode & 3) == 3 ? STOKER_DCT_SCALE_ALWAYS : STOKER_DCT_SCALE_DEFAULT,
        .mean = {0.485f, 0.456f, 0.406f},
        .std = {0.229f, 0.224f, 0.225f},
        .max_pixels = MAX_PIXELS};
    stoker__err err = {0};
    const int32_t simd = mode & 64 ? STOKER_SIMD_SCALAR : STOKER_SIMD_AUTO;
    if (stoker__xform_params_prepare(&p, simd, &err) != 0)
        abort(); /* every combination above is valid */
    const size_t bytes = stoker__xform_sample_bytes(&p);
    if (bytes > sizeof out)
        abort();
    const int64_t id = (shape >> 5) & 3;
    const int rc = stoker__xform_jpeg(s, &p, 7, id & 1, id, data + 2, size - 2, out, &err);
    if (rc != 0 && rc != STOKER_E_CORRUPT && rc != STOKER_E_LIMIT && rc != -ENOMEM)
        abort(); /* an undocumented status */
    if ((rc == STOKER_E_CORRUPT || rc == STOKER_E_LIMIT) && err.msg[0] == '\0')
        abort(); /* every failure says why */
    if (rc == 0) {
        /* read the whole sample back, so that it stays live */
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < bytes; i++)
            sum ^= out[i];
        (void)sum;
    }
    stoker__err werr = {0};
    const int wrc =
        stoker__xform_jpeg_whole(s, &p, 7, id & 1, id, data + 2, size - 2, whole, &werr);
    if (wrc != 0 && wrc != STOKER_E_CORRUPT && wrc != STOKER_E_LIMIT && wrc != -ENOMEM)
        abort();
    if (rc == -ENOMEM || wrc == -ENOMEM)
        return 0;
    char why[JMSG_LENGTH_MAX];
    const int verdict = t_jpeg_verdict(data + 2, size - 2, MAX_PIXELS, why);
    if (wrc == 0 && verdict != 0) {
        fprintf(stderr, "fuzz_xform: a sample from a JPEG libjpeg's full decode %s: %s\n",
                verdict > 0 ? "warns about" : "refuses", why);
        abort();
    }
    if (verdict == 0 && (rc != 0 || wrc != 0)) {
        fprintf(stderr,
                "fuzz_xform: a JPEG libjpeg decodes cleanly refused: crop %d (%s), "
                "whole %d (%s)\n",
                rc, err.msg, wrc, werr.msg);
        abort();
    }
    if (rc == 0 && wrc == 0 && memcmp(out, whole, bytes) != 0) {
        fprintf(stderr, "fuzz_xform: decoding to the end changed the sample\n");
        abort();
    }
    return 0;
}
