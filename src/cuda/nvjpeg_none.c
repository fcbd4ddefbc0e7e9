/* SPDX-License-Identifier: Apache-2.0 */
/* nvjpeg.h for a build without CUDA: the decoder is never available. */
#include "cuda/nvjpeg.h"

#include <stdio.h>
#include <string.h>

int stoker__nvjpeg_open(stoker__nvjpeg **out, int device, char *why, size_t cap)
{
    (void)device;
    *out = NULL;
    if (why && cap)
        snprintf(why, cap, "this build has no CUDA support, which nvJPEG needs");
    return STOKER_E_UNSUPPORTED;
}

void stoker__nvjpeg_close(stoker__nvjpeg *nj)
{
    (void)nj;
}

void stoker__nvjpeg_timing(const stoker__nvjpeg *nj, char *buf, size_t cap)
{
    (void)nj;
    if (cap)
        buf[0] = '\0';
}

const char *stoker__nvjpeg_describe(const stoker__nvjpeg *nj)
{
    (void)nj;
    return "";
}

int stoker__nvjpeg_supported(stoker__nvjpeg *nj, const uint8_t *data, size_t size,
                             const stoker__nvjpeg_roi *roi, bool *ok, stoker__err *err)
{
    (void)nj, (void)data, (void)size, (void)roi, (void)err;
    *ok = false;
    return 0;
}

int stoker__nvjpeg_decode_batch(stoker__nvjpeg *nj, int32_t n, const uint8_t *const data[],
                                const size_t sizes[], const stoker__nvjpeg_roi *rois,
                                uint8_t *const dst[], const size_t pitch[], stoker__stream stream,
                                uint8_t *taken, stoker__err *err)
{
    (void)nj, (void)data, (void)sizes, (void)rois, (void)dst, (void)pitch, (void)stream;
    STOKER_RETURN_IF(n < 0, err, STOKER_E_INVALID, "a batch of %d JPEGs", (int)n);
    memset(taken, 0, (size_t)n);
    return 0;
}

bool stoker__nvjpeg_reserve(stoker__nvjpeg *nj, int32_t batch, int32_t width, int32_t height)
{
    (void)nj, (void)batch, (void)width, (void)height;
    return false;
}
