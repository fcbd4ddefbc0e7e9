/* SPDX-License-Identifier: Apache-2.0 */
// The GPU share's image transform (image_kernels.h): one thread per output pixel, all of a
// batch in one launch (blockIdx.y: the sample). A thread computes its column's and row's
// taps once, then for each row tap the horizontal sum over the column taps, rounded and
// clipped to 0..255 as the CPU's horizontal pass stores it, and weighs it into the vertical
// sum. That is the work of a direct 2-D filter (taps_x * taps_y reads per output) rather
// than a separable pass over an intermediate buffer, which would need a temporary of the
// crop's height per sample; the reads of neighbouring threads overlap and come from cache.
#include "cuda/image_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "stoker.h"

namespace {

const int THREADS = 256;
const unsigned MAX_GRID_Y = 65535; // samples per launch

__device__ inline void put(uint8_t *dst, long long i, float v)
{
    dst[i] = (uint8_t)v;
}
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

__device__ inline float round_clip(float v)
{
    return fminf(fmaxf(floorf(v + 0.5f), 0.0f), 255.0f);
}

template <typename T>
__global__ void transform(const stoker__gpu_image *__restrict__ desc, stoker__gpu_output out)
{
    const stoker__gpu_image im = desc[blockIdx.y];
    const int32_t c = out.size;
    const long long plane = (long long)c * c;
    T *dst = static_cast<T *>(im.dst);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < plane; p += stride) {
        const int32_t oy = (int32_t)(p / c), ox = (int32_t)(p % c);
        const stoker__gpu_filter fx =
            stoker__gpu_filter_of(&im.x, im.x.first + (im.flip ? c - 1 - ox : ox));
        const stoker__gpu_filter fy =
            stoker__gpu_filter_of(&im.y, im.y.first + (im.vflip ? c - 1 - oy : oy));
        const uint8_t *rows =
            im.src + (long long)(im.y.lo + fy.xmin) * im.pitch + (long long)(im.x.lo + fx.xmin) * 3;
        float acc[3] = {0.0f, 0.0f, 0.0f};
        for (int32_t ky = 0; ky < fy.n; ky++) {
            const uint8_t *px = rows + ky * im.pitch;
            float h[3] = {0.0f, 0.0f, 0.0f};
            for (int32_t kx = 0; kx < fx.n; kx++, px += 3) {
                const float w = stoker__gpu_weight(&fx, kx);
                h[0] = fmaf(w, px[0], h[0]);
                h[1] = fmaf(w, px[1], h[1]);
                h[2] = fmaf(w, px[2], h[2]);
            }
            const float wy = stoker__gpu_weight(&fy, ky);
            for (int ch = 0; ch < 3; ch++)
                acc[ch] = fmaf(wy, round_clip(h[ch]), acc[ch]);
        }
        for (int ch = 0; ch < 3; ch++) {
            const float v = round_clip(acc[ch]);
            const float o = sizeof(T) == 1 ? v : fmaf(v, out.scale[ch], out.bias[ch]);
            put(dst, out.nchw ? ch * plane + p : p * 3 + ch, o);
        }
    }
}

template <typename T>
cudaError_t launch(const stoker__gpu_image *desc, int32_t n, const stoker__gpu_output &out,
                   cudaStream_t s)
{
    const long long plane = (long long)out.size * out.size;
    long long blocks = (plane + THREADS - 1) / THREADS;
    blocks = blocks > 65535 ? 65535 : blocks; // grid-stride beyond that
    for (int32_t at = 0; at < n; at += (int32_t)MAX_GRID_Y) {
        const unsigned m = (unsigned)(n - at) < MAX_GRID_Y ? (unsigned)(n - at) : MAX_GRID_Y;
        transform<T><<<dim3((unsigned)blocks, m), THREADS, 0, s>>>(desc + at, out);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

// One block column per sample (blockIdx.y), 16-byte words when every address allows them.
template <typename W>
__global__ void scatter(const uint8_t *src, uint8_t *dst, const int32_t *pos, size_t words)
{
    const W *from = reinterpret_cast<const W *>(src) + (size_t)blockIdx.y * words;
    W *to = reinterpret_cast<W *>(dst) + (size_t)pos[blockIdx.y] * words;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += (size_t)gridDim.x * blockDim.x)
        to[i] = from[i];
}

// One block column per image (blockIdx.y), a thread per pixel of its region.
__global__ void ycc_to_rgb(const stoker__gpu_ycc *__restrict__ desc)
{
    const stoker__gpu_ycc im = desc[blockIdx.y];
    const long long n = (long long)im.w * im.h;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const int32_t ry = (int32_t)(p / im.w), rx = (int32_t)(p % im.w);
        uint8_t rgb[3];
        stoker__ycc_pixel(&im, im.x + rx, im.y + ry, rgb);
        uint8_t *o = im.dst + (long long)ry * im.dst_pitch + (long long)rx * 3;
        o[0] = rgb[0];
        o[1] = rgb[1];
        o[2] = rgb[2];
    }
}

} // namespace

extern "C" int stoker__gpu_ycc_to_rgb(const stoker__gpu_ycc *desc, int32_t n, stoker__stream stream)
{
    if (n < 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const unsigned blocks = 128; // a region of ~100,000 pixels: a few pixels per thread
    for (int32_t at = 0; at < n; at += (int32_t)MAX_GRID_Y) {
        const unsigned m = (unsigned)(n - at) < MAX_GRID_Y ? (unsigned)(n - at) : MAX_GRID_Y;
        ycc_to_rgb<<<dim3(blocks, m), THREADS, 0, s>>>(desc + at);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return (int)e;
    }
    return 0;
}

extern "C" int stoker__gpu_scatter(const uint8_t *src, uint8_t *dst, const int32_t *pos, int32_t n,
                                   size_t bytes, stoker__stream stream)
{
    if (n < 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const bool wide = bytes % 16 == 0 && (uintptr_t)src % 16 == 0 && (uintptr_t)dst % 16 == 0;
    const size_t words = wide ? bytes / 16 : bytes;
    const size_t want = (words + THREADS - 1) / THREADS;
    const unsigned blocks = want > 1024 ? 1024u : want < 1 ? 1u : (unsigned)want;
    for (int32_t at = 0; at < n; at += (int32_t)MAX_GRID_Y) {
        const unsigned m = (unsigned)(n - at) < MAX_GRID_Y ? (unsigned)(n - at) : MAX_GRID_Y;
        const uint8_t *from = src + (size_t)at * bytes;
        if (wide)
            scatter<uint4><<<dim3(blocks, m), THREADS, 0, s>>>(from, dst, pos + at, words);
        else
            scatter<uint8_t><<<dim3(blocks, m), THREADS, 0, s>>>(from, dst, pos + at, words);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return (int)e;
    }
    return 0;
}

extern "C" int stoker__gpu_images(const stoker__gpu_image *desc, int32_t n,
                                  const stoker__gpu_output *out, stoker__stream stream)
{
    if (out->size < 1 || n < 0)
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (out->dtype) {
    case STOKER_DTYPE_UINT8: return (int)launch<uint8_t>(desc, n, *out, s);
    case STOKER_DTYPE_FLOAT32: return (int)launch<float>(desc, n, *out, s);
    case STOKER_DTYPE_FLOAT16: return (int)launch<__half>(desc, n, *out, s);
    case STOKER_DTYPE_BFLOAT16: return (int)launch<__nv_bfloat16>(desc, n, *out, s);
    default: return (int)cudaErrorInvalidValue;
    }
}
