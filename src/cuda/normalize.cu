/* SPDX-License-Identifier: Apache-2.0 */
// GPU normalisation: uint8 HWC images -> float32 / float16 / bfloat16, NCHW or NHWC.
// One thread per pixel: it reads the pixel's 3 bytes and writes its 3 values. NHWC
// writes are contiguous; NCHW writes are three coalesced planes. Reads of 3-byte pixels
// by consecutive threads are coalesced by the cache; the kernel is bound by the writes
// (2 or 4 bytes out per byte in), so wider loads would not change its speed.
#include "cuda/cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "stoker.h"

namespace {

struct Params {
    float scale[3], bias[3];
};

__device__ inline void put(float *dst, long long i, float v)
{
    dst[i] = v;
}
__device__ inline void put(__half *dst, long long i, float v)
{
    dst[i] = __float2half_rn(v);
}
__device__ inline void put(__nv_bfloat16 *dst, long long i, float v)
{
    dst[i] = __float2bfloat16_rn(v);
}

template <typename T>
__global__ void normalize(const uint8_t *__restrict__ src, T *__restrict__ dst, long long pixels,
                          long long plane, int nchw, Params p)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < pixels; i += stride) {
        const uint8_t *px = src + i * 3;
        if (nchw) {
            const long long img = i / plane, at = i % plane;
            T *o = dst + img * plane * 3 + at;
            for (int c = 0; c < 3; c++)
                put(o, (long long)c * plane, fmaf((float)px[c], p.scale[c], p.bias[c]));
        } else {
            for (int c = 0; c < 3; c++)
                put(dst, i * 3 + c, fmaf((float)px[c], p.scale[c], p.bias[c]));
        }
    }
}

template <typename T>
cudaError_t launch(const uint8_t *src, void *dst, long long pixels, long long plane, int nchw,
                   const Params &p, cudaStream_t s)
{
    const int threads = 256;
    long long blocks = (pixels + threads - 1) / threads;
    if (blocks > 65535)
        blocks = 65535; // grid-stride beyond that
    if (blocks < 1)
        blocks = 1;
    normalize<T>
        <<<(unsigned)blocks, threads, 0, s>>>(src, static_cast<T *>(dst), pixels, plane, nchw, p);
    return cudaGetLastError();
}

} // namespace

extern "C" bool stoker__cuda_has_kernels(void)
{
    return true;
}

extern "C" int stoker__cuda_normalize(const uint8_t *src, void *dst, int64_t n, int64_t h,
                                      int64_t w, int32_t dtype, bool nchw, const float scale[3],
                                      const float bias[3], stoker__stream stream)
{
    Params p;
    for (int c = 0; c < 3; c++) {
        p.scale[c] = scale[c];
        p.bias[c] = bias[c];
    }
    const long long plane = (long long)h * w, pixels = (long long)n * plane;
    if (pixels == 0)
        return 0;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (dtype) {
    case STOKER_DTYPE_FLOAT32: return launch<float>(src, dst, pixels, plane, nchw, p, s);
    case STOKER_DTYPE_FLOAT16: return launch<__half>(src, dst, pixels, plane, nchw, p, s);
    case STOKER_DTYPE_BFLOAT16: return launch<__nv_bfloat16>(src, dst, pixels, plane, nchw, p, s);
    default: return cudaErrorInvalidValue;
    }
}
