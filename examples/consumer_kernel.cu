/* SPDX-License-Identifier: Apache-2.0 */
// The example consumer's "training step": a kernel that keeps the GPU busy for a given
// time, then reads every byte of the batch into a checksum (so a batch overwritten while
// in use would show up as a wrong sum, and the data is really read from device memory).
// The "work" variant does a fixed amount of arithmetic on every SM instead of watching the
// clock, so that its time shows whatever else (the loader's kernels) takes the SMs from it.
// The "net" layers are many short kernels in a chain, as a network's, so that what the
// host pays to launch them shows.
#include "consumer_kernel.h"

#include <cuda_runtime.h>

namespace {

__device__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ void checksum(const unsigned char *data, unsigned long long nbytes, unsigned long long s,
                         unsigned long long *sum)
{
    // 16-byte loads for the aligned body, bytes for the tail.
    const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long nvec = nbytes / 16;
    const uint4 *v = reinterpret_cast<const uint4 *>(data);
    for (unsigned long long i = tid; i < nvec; i += stride) {
        const uint4 q = v[i];
        s += (unsigned long long)q.x + q.y + q.z + q.w;
    }
    for (unsigned long long i = nvec * 16 + tid; i < nbytes; i += stride)
        s += data[i];
    // one atomic per warp: a grid that fills the GPU would otherwise queue on one address
    for (int lane = 16; lane > 0; lane /= 2)
        s += __shfl_down_sync(0xffffffffu, s, lane);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(sum, s);
}

__global__ void consume(const unsigned char *data, unsigned long long nbytes,
                        unsigned long long busy_ns, unsigned long long *sum)
{
    // Busy: every thread spins on the global timer (nanoseconds, the same clock for all).
    const unsigned long long t0 = global_ns();
    while (global_ns() - t0 < busy_ns) {
    }
    checksum(data, nbytes, 0, sum);
}

__global__ void work(const unsigned char *data, unsigned long long nbytes, unsigned long long iters,
                     unsigned long long *sum)
{
    // Two dependent multiply-adds per round: the result only decides a comparison that is
    // never true, which keeps the compiler from dropping the loop.
    float a = (float)(threadIdx.x & 255) * 1e-3f, b = 0.5f;
    for (unsigned long long i = 0; i < iters; i++) {
        a = fmaf(a, 0.999f, b);
        b = fmaf(b, 0.999f, a * 1e-6f);
    }
    checksum(data, nbytes, a + b > 1e30f ? 1 : 0, sum);
}

// A layer of the network-like consumer: one thread per activation, `iters` rounds of the
// work kernel's arithmetic on the previous layer's value.
__global__ void net_layer(const float *in, float *out, unsigned long long iters)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    float a = in[i], b = 0.5f;
    for (unsigned long long r = 0; r < iters; r++) {
        a = fmaf(a, 0.999f, b);
        b = fmaf(b, 0.999f, a * 1e-6f);
    }
    out[i] = fmaf(a, 1e-3f, b); // stays finite however long the chain
}

// The first layer reads the whole batch (the checksum) and seeds the activations with it.
__global__ void net_first(const unsigned char *data, unsigned long long nbytes, float *out,
                          unsigned long long *sum)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    out[i] = nbytes > 0 ? (float)data[i % nbytes] * (1.0f / 255) : 0.0f;
    checksum(data, nbytes, 0, sum);
}

// Enough blocks of 256 threads to fill every SM of the current device (the one current at
// the first call; 132 SMs x 8 when the device cannot be asked). Thread-safe.
int full_grid()
{
    static const int blocks = [] {
        int dev = 0, sms = 0, per_sm = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev) !=
                cudaSuccess ||
            sms <= 0 || per_sm < 256)
            return 132 * 8;
        return sms * (per_sm / 256);
    }();
    return blocks;
}

} // namespace

extern "C" int consumer_launch(const void *data, unsigned long long nbytes, double busy_ms,
                               unsigned long long *sum, cudaStream_t stream)
{
    const unsigned long long busy_ns = (unsigned long long)(busy_ms * 1e6);
    consume<<<132, 256, 0, stream>>>(static_cast<const unsigned char *>(data), nbytes, busy_ns,
                                     sum);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

// The work kernel's grid: WAVES waves of blocks that fill every SM, each block doing its
// share of the rounds, as a GEMM's many tiles do; a block lasts a WAVES-th of the kernel.
const int WAVES = 128;

extern "C" int consumer_work_launch(const void *data, unsigned long long nbytes,
                                    unsigned long long iters, unsigned long long *sum,
                                    cudaStream_t stream)
{
    work<<<full_grid() * WAVES, 256, 0, stream>>>(static_cast<const unsigned char *>(data), nbytes,
                                                  (iters + WAVES - 1) / WAVES, sum);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" unsigned long long consumer_net_width(void)
{
    return (unsigned long long)full_grid() * 256;
}

extern "C" cudaError_t consumer_net_first(const void *data, unsigned long long nbytes,
                                          float *act_out, unsigned long long *sum,
                                          cudaStream_t stream)
{
    net_first<<<full_grid(), 256, 0, stream>>>(static_cast<const unsigned char *>(data), nbytes,
                                               act_out, sum);
    return cudaGetLastError();
}

extern "C" cudaError_t consumer_net_layer(const float *act_in, float *act_out,
                                          unsigned long long iters, cudaStream_t stream)
{
    net_layer<<<full_grid(), 256, 0, stream>>>(act_in, act_out, iters);
    return cudaGetLastError();
}

// The same sum on the host, as the kernel computes it (32-bit words of each 16 bytes).
extern "C" unsigned long long consumer_host_sum(const void *data, unsigned long long nbytes)
{
    const unsigned char *p = static_cast<const unsigned char *>(data);
    unsigned long long s = 0, i = 0;
    for (; i + 16 <= nbytes; i += 16)
        for (int w = 0; w < 4; w++) {
            unsigned int x = 0;
            for (int k = 3; k >= 0; k--)
                x = (x << 8) | p[i + w * 4 + k];
            s += x;
        }
    for (; i < nbytes; i++)
        s += p[i];
    return s;
}
