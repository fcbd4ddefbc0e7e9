/* SPDX-License-Identifier: Apache-2.0 */
/* What the image fuzzers share. */
#ifndef STOKER_FUZZ_UTIL_H
#define STOKER_FUZZ_UTIL_H

#include "transform/transform.h"

/* Prepares the image pipeline's parameters a fuzzer compares samples with: `transform` to
 * uint8 samples of size x size, ImageNet's mean and std, the DCT scaling of the default rule
 * (or always, dct_always), images up to max_pixels. 0, or the pipeline's error in err. */
static inline int fuzz_xform_params(stoker__xform_params *xp, int32_t transform, int32_t size,
                                    bool dct_always, uint64_t max_pixels, stoker__err *err)
{
    *xp = (stoker__xform_params){.transform = transform,
                                 .size = size,
                                 .dtype = STOKER_DTYPE_UINT8,
                                 .dct_scale = dct_always ? STOKER_DCT_SCALE_ALWAYS
                                                         : STOKER_DCT_SCALE_DEFAULT,
                                 .mean = {0.485f, 0.456f, 0.406f},
                                 .std = {0.229f, 0.224f, 0.225f},
                                 .max_pixels = max_pixels};
    return stoker__xform_params_prepare(xp, STOKER_SIMD_AUTO, err);
}

#endif
