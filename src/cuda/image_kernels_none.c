/* SPDX-License-Identifier: Apache-2.0 */
/* The image transform of image_kernels.h for a build without nvcc: none. */
#include "cuda/image_kernels.h"

#ifdef STOKER_HAVE_CUDA
#include <cuda_runtime_api.h>
#define NOT_BUILT ((int)cudaErrorNotSupported)
#else
#define NOT_BUILT 1 /* the one code of none.c: "this build has no CUDA support" */
#endif

int stoker__gpu_images(const stoker__gpu_image *desc, int32_t n, const stoker__gpu_output *out,
                       stoker__stream s)
{
    (void)desc, (void)n, (void)out, (void)s;
    return NOT_BUILT;
}

int stoker__gpu_scatter(const uint8_t *src, uint8_t *dst, const int32_t *pos, int32_t n,
                        size_t bytes, stoker__stream s)
{
    (void)src, (void)dst, (void)pos, (void)n, (void)bytes, (void)s;
    return NOT_BUILT;
}

int stoker__gpu_ycc_to_rgb(const stoker__gpu_ycc *desc, int32_t n, stoker__stream s)
{
    (void)desc, (void)n, (void)s;
    return NOT_BUILT;
}
