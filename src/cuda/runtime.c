/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA wrappers of cuda.h over the CUDA runtime (a build with CUDA). */
#include "cuda/cuda.h"

#include "common/common.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

/* A resource request, or the failure a test asked for (common.h). */
#define INJECT(call) (stoker__cuda_injected() ? cudaErrorMemoryAllocation : (call))

/* Passes a result through, clearing the runtime's sticky last error on failure: the code
 * is reported by the caller, once. */
static int check(cudaError_t e)
{
    if (e != cudaSuccess)
        cudaGetLastError();
    return (int)e;
}

bool stoker__cuda_built(void)
{
    return true;
}

int stoker__cuda_device_query(char *msg, size_t cap)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* later calls start clean */
        if (msg && cap)
            snprintf(msg, cap, "%s", cudaGetErrorString(e));
        return 0;
    }
    if (n <= 0 && msg && cap)
        snprintf(msg, cap, "no CUDA device found");
    return n > 0 ? n : 0;
}

int stoker__cuda_device_count(void)
{
    return stoker__cuda_device_query(NULL, 0);
}

int stoker__cuda_use_device(int device)
{
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        cudaGetLastError();
        prev = -1;
    }
    if (prev != device)
        check(cudaSetDevice(device));
    return prev;
}

void stoker__cuda_restore_device(int device, int previous)
{
    if (previous >= 0 && previous != device)
        check(cudaSetDevice(previous));
}

int stoker__cuda_set_device(int device)
{
    return check(cudaSetDevice(device));
}

int stoker__cuda_current_device(void)
{
    int d = -1;
    return check(cudaGetDevice(&d)) == 0 ? d : -1;
}

int stoker__cuda_stream_create(stoker__stream *s, bool urgent)
{
    int least = 0, greatest = 0;
    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
        (void)cudaGetLastError();
        least = greatest = 0;
    }
    return check(INJECT(cudaStreamCreateWithPriority((cudaStream_t *)s, cudaStreamNonBlocking,
                                                     urgent ? greatest : least)));
}

void stoker__cuda_stream_destroy(stoker__stream s)
{
    check(cudaStreamDestroy((cudaStream_t)s));
}

int stoker__cuda_stream_sync(stoker__stream s)
{
    return check(cudaStreamSynchronize((cudaStream_t)s));
}

int stoker__cuda_stream_wait(stoker__stream s, stoker__event e)
{
    return check(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
}

int stoker__cuda_host_func(stoker__stream s, void (*fn)(void *), void *arg)
{
    return check(cudaLaunchHostFunc((cudaStream_t)s, fn, arg));
}

int stoker__cuda_event_create(stoker__event *e, bool blocking_sync)
{
    const unsigned flags = cudaEventDisableTiming | (blocking_sync ? cudaEventBlockingSync : 0);
    return check(INJECT(cudaEventCreateWithFlags((cudaEvent_t *)e, flags)));
}

void stoker__cuda_event_destroy(stoker__event e)
{
    check(cudaEventDestroy((cudaEvent_t)e));
}

int stoker__cuda_event_record(stoker__event e, stoker__stream s)
{
    return check(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
}

int stoker__cuda_event_sync(stoker__event e)
{
    return check(cudaEventSynchronize((cudaEvent_t)e));
}

int stoker__cuda_malloc(void **p, size_t size)
{
    return check(INJECT(cudaMalloc(p, size)));
}

void stoker__cuda_free(void *p)
{
    if (p)
        check(cudaFree(p));
}

void *stoker__cuda_host_alloc(int device, size_t size, char *msg, size_t cap)
{
    void *p = NULL;
    const int prev = stoker__cuda_use_device(device);
    const int e = check(INJECT(cudaHostAlloc(&p, size, cudaHostAllocPortable)));
    stoker__cuda_restore_device(device, prev);
    if (e != 0) {
        snprintf(msg, cap, "%s", cudaGetErrorString((cudaError_t)e));
        return NULL;
    }
    return p;
}

void stoker__cuda_host_free(void *p)
{
    if (p)
        check(cudaFreeHost(p));
}

int stoker__cuda_copy_to_device(void *dst, const void *src, size_t size, stoker__stream s)
{
    return check(cudaMemcpyAsync(dst, src, size, cudaMemcpyHostToDevice, (cudaStream_t)s));
}

const char *stoker__cuda_error_string(int code)
{
    return cudaGetErrorString((cudaError_t)code);
}
