/* SPDX-License-Identifier: Apache-2.0 */
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

/* The network-like consumer ("net"): a chain of short kernels, as a network's layers, each
 * reading the previous one's output. Each has one wave of blocks that fills every SM and
 * writes consumer_net_width() floats. The launches return cudaGetLastError()'s code. */
unsigned long long consumer_net_width(void);

/* The first layer: the same sum as consumer_launch into *sum (the batch is read), and
 * act_out (consumer_net_width() floats) set from the batch's first bytes. */
cudaError_t consumer_net_first(const void *data, unsigned long long nbytes, float *act_out,
                               unsigned long long *sum, cudaStream_t stream);

/* A further layer: act_out[i] from act_in[i] after `iters` rounds of two dependent
 * multiply-adds per thread (iters 0: the shortest kernel, a load and a store). */
cudaError_t consumer_net_layer(const float *act_in, float *act_out, unsigned long long iters,
                               cudaStream_t stream);

/* The same sum computed on the host. */
unsigned long long consumer_host_sum(const void *data, unsigned long long nbytes);

#ifdef __cplusplus
}
#endif

#endif
