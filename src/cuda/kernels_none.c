/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU kernels of cuda.h for a build with the CUDA runtime but without nvcc: none. */
#include "cuda/cuda.h"

#include <cuda_runtime_api.h>

bool stoker__cuda_has_kernels(void)
{
    return false;
}

int stoker__cuda_normalize(const uint8_t *src, void *dst, int64_t n, int64_t h, int64_t w,
                           int32_t dtype, bool nchw, const float scale[3], const float bias[3],
                           stoker__stream s)
{
    (void)src, (void)dst, (void)n, (void)h, (void)w, (void)dtype, (void)nchw, (void)scale;
    (void)bias, (void)s;
    return (int)cudaErrorNotSupported;
}
