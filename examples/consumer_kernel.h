/* The example consumer kernel (consumer_kernel.cu). */
#ifndef STOKER_EXAMPLE_CONSUMER_KERNEL_H
#define STOKER_EXAMPLE_CONSUMER_KERNEL_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queues on `stream`: spin busy_ms milliseconds, then add the 32-bit little-endian words
 * of data's 16-byte blocks (and the tail's bytes) into *sum (device memory). 0 or -1. */
int consumer_launch(const void *data, unsigned long long nbytes, double busy_ms,
                    unsigned long long *sum, cudaStream_t stream);

/* Queues on `stream`: `iters` rounds of dependent multiply-adds per thread of a grid that
 * fills every SM, cut into 128 waves of short blocks as a GEMM's tiles are (a fixed amount
 * of work: its time grows when other kernels share the SMs, which can start between its
 * blocks), then the same sum as consumer_launch (plus 0). 0 or -1. */
int consumer_work_launch(const void *data, unsigned long long nbytes, unsigned long long iters,
                         unsigned long long *sum, cudaStream_t stream);

/* The same sum computed on the host. */
unsigned long long consumer_host_sum(const void *data, unsigned long long nbytes);

#ifdef __cplusplus
}
#endif

#endif
